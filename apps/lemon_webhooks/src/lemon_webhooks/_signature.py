"""Standard Webhooks signatures: ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``.

The signed content is ``<webhook-id>.<webhook-timestamp>.<body>``; the signature is
``v1,<base64 HMAC-SHA256>`` with the secret's bytes (``whsec_<base64>``) as key; the header may
carry several space-separated signatures (key rotation), any one matching is enough. The
comparison is constant time, and a timestamp more than :data:`TOLERANCE_S` away from now is
refused (an old captured message cannot be replayed).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Final

from lemon_webhooks.errors import WebhooksConfigError

__all__ = ["TOLERANCE_S", "WebhookSecret", "sign_webhook", "verify_webhook"]

#: How far (seconds) a message's timestamp may be from now, either way.
TOLERANCE_S: Final = 300
_PREFIX: Final = "whsec_"
_MAX_ID_CHARS: Final = 256
# Seconds since the epoch fit in far fewer digits; a longer header is refused before int()
# (which raises past 4300 digits, and whose result overflows a float past ~308).
_MAX_TIMESTAMP_DIGITS: Final = 20
_MIN_SECRET_BYTES: Final = 16


@dataclass(frozen=True, slots=True)
class WebhookSecret:
    """A parsed ``whsec_<base64>`` secret (its ``repr`` never shows the key)."""

    key: bytes = field(repr=False)

    @classmethod
    def parse(cls, text: str, *, name: str = "the secret") -> WebhookSecret:
        """Parse ``whsec_<base64>``; raise :class:`WebhooksConfigError` saying what is wrong."""
        value = text.strip()
        if not value.startswith(_PREFIX):
            raise WebhooksConfigError(
                f"{name} is not a Standard Webhooks secret: it must look like "
                f"'whsec_<base64>' (e.g. 'whsec_' + base64 of 32 random bytes)"
            )
        try:
            key = base64.b64decode(value[len(_PREFIX) :], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise WebhooksConfigError(
                f"{name}: the part after 'whsec_' is not valid base64"
            ) from exc
        if len(key) < _MIN_SECRET_BYTES:
            raise WebhooksConfigError(
                f"{name} is too short: use at least {_MIN_SECRET_BYTES} random bytes"
            )
        return cls(key)

    def text(self) -> str:
        """The ``whsec_<base64>`` form (to give a sender)."""
        return _PREFIX + base64.b64encode(self.key).decode("ascii")


def _digest(secret: WebhookSecret, msg_id: str, timestamp: str, body: bytes) -> bytes:
    signed = msg_id.encode("utf-8") + b"." + timestamp.encode("ascii") + b"." + body
    mac = hmac.new(secret.key, signed, hashlib.sha256).digest()
    return base64.b64encode(mac)


def sign_webhook(secret: WebhookSecret, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value for a message (what a sender computes)."""
    return "v1," + _digest(secret, msg_id, str(timestamp), body).decode("ascii")


def verify_webhook(
    secret: WebhookSecret,
    *,
    msg_id: str | None,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    now_s: float,
    tolerance_s: int = TOLERANCE_S,
) -> str | None:
    """``None`` when the message is authentic and fresh; else the reason it is refused."""
    if not msg_id or not timestamp or not signature:
        return "the webhook-id, webhook-timestamp and webhook-signature headers are required"
    if len(msg_id) > _MAX_ID_CHARS:
        return "the webhook-id header is too long"
    if len(timestamp) > _MAX_TIMESTAMP_DIGITS or not timestamp.isascii() or not timestamp.isdigit():
        return "the webhook-timestamp header must be whole seconds since the epoch"
    if abs(now_s - int(timestamp)) > tolerance_s:
        return f"the webhook-timestamp is more than {tolerance_s} s from now (a stale message)"
    expected = _digest(secret, msg_id, timestamp, body)
    matched = False
    for candidate in signature.split(" "):
        version, sep, value = candidate.partition(",")
        if sep and version == "v1":
            # every candidate is compared (no early exit on a match)
            matched |= hmac.compare_digest(expected, value.encode("ascii", "replace"))
    return None if matched else "the webhook-signature does not match"
