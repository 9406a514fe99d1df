"""Images for models: checking what a person attached, and what each wire is sent.

:func:`decode_image` turns an attachment (base64 ``data`` and a media type) into an
:class:`~lemon_ai.messages.ImageContent`, or raises :class:`~lemon_ai.errors.InvalidImageError`
with a sentence saying what is wrong and how to fix it. It guarantees:

* the media type is one every image-taking API accepts: PNG, JPEG, GIF or WebP
  (:data:`IMAGE_MIME_TYPES`); the bytes are sniffed, so a PNG labelled ``image/jpeg`` (chat
  apps do that) is sent as ``image/png`` instead of drawing a provider's 400;
* the decoded image is at most :attr:`ImageLimits.max_image_bytes` (3.75 MiB: its base64, what
  the request carries, then stays under Anthropic's 5 MiB per-image limit; OpenAI takes 20 MB);
* a message carries at most :attr:`ImageLimits.max_images` (8) images of at most
  :attr:`ImageLimits.max_total_bytes` (12 MiB, so a request stays well under the providers'
  request size limits).

:func:`user_turn` is what the providers encode: the message's text (with a note in place of
each image the model cannot be sent: a model whose catalogue entry says it takes no image input,
or an image kept only as a reference) and the images to send. :func:`tool_result_turn` is the
same for a tool result that carries images (a browser screenshot).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Final

from lemon_ai.errors import InvalidImageError
from lemon_ai.messages import ImageContent, ToolResultMessage, UserMessage
from lemon_ai.models import Model

__all__ = [
    "IMAGE_MIME_TYPES",
    "ImageLimits",
    "check_images",
    "decode_image",
    "image_note",
    "tool_result_turn",
    "user_turn",
]

IMAGE_MIME_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The media types sent to models (the ones OpenAI, Anthropic and Gemini all accept)."""

_MIB: Final = 1024 * 1024
_KINDS: Final = "PNG, JPEG, GIF or WebP"


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageLimits:
    """Bounds of the images one message may carry (decoded bytes)."""

    max_image_bytes: int = 3 * _MIB + 3 * _MIB // 4
    max_images: int = 8
    max_total_bytes: int = 12 * _MIB


def _sniff(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(raw) >= 12 and raw.startswith(b"RIFF") and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def _mib(size: int) -> str:
    return f"{size / _MIB:.2f} MiB"


def decode_image(
    data: str,
    mime_type: str | None = None,
    *,
    limits: ImageLimits | None = None,
    label: str = "the image",
) -> ImageContent:
    """Check one attachment and return it as image content (see the module docstring).

    ``data`` is base64 (a ``data:<type>;base64,`` URL is accepted too); ``mime_type`` is what
    the sender said it is (``None``: sniffed). ``label`` names the image in error messages
    (``"image 2"``).
    """
    limits = limits or ImageLimits()
    if data.startswith("data:"):
        header, sep, rest = data.partition(",")
        if not sep or not header.endswith(";base64"):
            raise InvalidImageError(
                f"{label} is a data URL that is not base64-encoded; send "
                "'data:<type>;base64,<data>' or the base64 data alone"
            )
        mime_type = mime_type or header[5:].removesuffix(";base64")
        data = rest
    declared = (mime_type or "").strip().lower()
    if declared == "image/jpg":
        declared = "image/jpeg"
    if declared and declared not in IMAGE_MIME_TYPES:
        raise InvalidImageError(
            f"{label} has media type {mime_type!r}, which models are not sent; "
            f"send a {_KINDS} image (convert it first)"
        )
    # base64 is 4 characters per 3 bytes: refuse a too-large image before decoding it.
    if len(data) // 4 * 3 > limits.max_image_bytes + 3:
        raise InvalidImageError(
            f"{label} is about {_mib(len(data) // 4 * 3)}, more than the "
            f"{_mib(limits.max_image_bytes)} an image may have; send a smaller or more "
            "compressed image (for example a JPEG at most 2048 pixels wide)"
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidImageError(
            f"{label} is not valid base64 ({exc}); send the image's bytes base64-encoded"
        ) from None
    if len(raw) > limits.max_image_bytes:
        raise InvalidImageError(
            f"{label} is {_mib(len(raw))}, more than the {_mib(limits.max_image_bytes)} an "
            "image may have; send a smaller or more compressed image"
        )
    sniffed = _sniff(raw)
    if sniffed is None:
        what = f" (labelled {mime_type})" if mime_type else ""
        raise InvalidImageError(
            f"{label}{what} is not a {_KINDS} image: its first bytes match none of them; "
            "send the image file itself"
        )
    return ImageContent(
        mime_type=sniffed,
        data=base64.b64encode(raw).decode("ascii") if raw else "",
        size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest(),
    )


def check_images(images: tuple[ImageContent, ...], limits: ImageLimits | None = None) -> None:
    """Raise :class:`InvalidImageError` when ``images`` exceed the per-message bounds."""
    limits = limits or ImageLimits()
    if len(images) > limits.max_images:
        raise InvalidImageError(
            f"{len(images)} images were attached; at most {limits.max_images} go with one "
            "message (send the rest in another message)"
        )
    total = sum(image.size for image in images)
    if total > limits.max_total_bytes:
        raise InvalidImageError(
            f"the attached images total {_mib(total)}, more than the "
            f"{_mib(limits.max_total_bytes)} one message may carry; send fewer or smaller images"
        )


def _size(size: int) -> str:
    if size >= _MIB:
        return _mib(size)
    return f"{size / 1024:.1f} KiB"


def image_note(image: ImageContent, model: Model | None = None, *, by: str = "user") -> str:
    """The text a model is given in place of an image it is not sent (``by``: who gave it,
    ``"user"`` or ``"tool"``)."""
    what = f"{image.mime_type}, {_size(image.size)}"
    verb = "The user attached" if by == "user" else "The tool returned"
    if image.available and model is not None:
        return (
            f"[{verb} an image ({what}), but this model ({model.ref}) does not "
            "accept image input, so it was not sent. Say so if the image matters.]"
        )
    return (
        f"[{verb} an image here ({what}); images are not kept in the session, "
        "so it cannot be shown again.]"
    )


def user_turn(message: UserMessage, model: Model) -> tuple[str, tuple[ImageContent, ...]]:
    """The text and the images to send for ``message`` to ``model`` (see the module docstring):
    an image is sent when its bytes are here and the model does not refuse image input."""
    if not message.images:
        return message.content, ()
    sent: list[ImageContent] = []
    notes: list[str] = []
    for image in message.images:
        if image.available and model.image_input is not False:
            sent.append(image)
        else:
            notes.append(image_note(image, model))
    text = "\n\n".join(part for part in (message.content, *notes) if part)
    return text, tuple(sent)


def tool_result_turn(
    message: ToolResultMessage, model: Model
) -> tuple[str, tuple[ImageContent, ...]]:
    """As :func:`user_turn`, for a tool result: its text (with a note in place of each image
    not sent) and the images to send."""
    if not message.images:
        return message.content, ()
    sent: list[ImageContent] = []
    notes: list[str] = []
    for image in message.images:
        if image.available and model.image_input is not False:
            sent.append(image)
        else:
            notes.append(image_note(image, model, by="tool"))
    text = "\n\n".join(part for part in (message.content, *notes) if part)
    return text, tuple(sent)
