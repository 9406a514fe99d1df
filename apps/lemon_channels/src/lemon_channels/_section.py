"""``[channels]`` / ``[channels.telegram]``: the channels' config section (declared here, named
on the app's AppSpec), and :class:`ChannelsOptions`, what a process sets besides the file."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Final, Literal

import msgspec

from lemon_core.config import CheckContext, ConfigIssue, Section

__all__ = ["ChannelsConfig", "ChannelsOptions", "TelegramChannelConfig"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TelegramChannelConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[channels.telegram]``: the Telegram bot (the README documents each key).

    Nobody may talk to the agent by default: ``allowed_users`` lists Telegram user ids, and
    unknown users get a one-time pairing code (``lemon channels pair approve CODE``).
    """

    enabled: bool = True
    token_env: str = "TELEGRAM_BOT_TOKEN"
    """The NAME of the variable (environment or secrets.env) holding the bot token."""
    api_base_url: str = "https://api.telegram.org"
    allowed_users: tuple[int, ...] = ()
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    """The public https URL Telegram posts to (webhook mode): it must end with the mount
    path ``/channels/telegram``."""
    webhook_secret_env: str | None = None
    """The NAME of the variable holding the webhook secret (webhook mode)."""
    agent_id: str = "default"
    edit_interval_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 1.0
    """The least time between two edits of a streaming answer in one chat."""
    poll_timeout_s: Annotated[int, msgspec.Meta(ge=0, le=50)] = 25


class ChannelsConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[channels]``: the chat channels the daemon runs."""

    telegram: TelegramChannelConfig | None = None

    def secret_env_names(self) -> Iterable[str | None]:
        if self.telegram is None:
            return ()
        return (self.telegram.token_env, self.telegram.webhook_secret_env)

    def check(self, name: str, ctx: CheckContext) -> Iterable[ConfigIssue]:
        """Variable names where names go, an http(s) Bot API, positive user ids, and webhook
        mode with its URL and secret."""
        telegram = self.telegram
        if telegram is None:
            return []
        issues: list[ConfigIssue] = []

        def issue(key: str, message: str, hint: str) -> None:
            issues.append(ctx.issue(f"{name}.telegram.{key}", message, hint))

        for key in ("token_env", "webhook_secret_env"):
            value = getattr(telegram, key)
            if value is not None and not _ENV_NAME.match(value):
                issue(
                    key,
                    f"{value!r} is not a variable name",
                    'give the NAME of the variable holding the secret, e.g. "TELEGRAM_BOT_TOKEN", '
                    "never the secret itself",
                )
        if not telegram.api_base_url.startswith(("http://", "https://")):
            issue(
                "api_base_url",
                f"{telegram.api_base_url!r} is not an http(s) URL",
                'e.g. "https://api.telegram.org" (or your self-hosted Bot API server)',
            )
        if any(user <= 0 for user in telegram.allowed_users):
            issue(
                "allowed_users",
                "Telegram user ids are positive integers",
                "e.g. allowed_users = [123456789] (ask @userinfobot for yours)",
            )
        if telegram.mode == "webhook":
            if not telegram.webhook_url or not telegram.webhook_url.startswith("https://"):
                issue(
                    "webhook_url",
                    "webhook mode needs the public https URL Telegram posts to",
                    'e.g. webhook_url = "https://bot.example.org/channels/telegram", '
                    'or use mode = "polling"',
                )
            if not telegram.webhook_secret_env:
                issue(
                    "webhook_secret_env",
                    "webhook mode needs a secret Telegram sends back with every update",
                    "name the variable holding it, e.g. "
                    'webhook_secret_env = "TELEGRAM_WEBHOOK_SECRET"',
                )
        return issues


@dataclass(frozen=True, kw_only=True, slots=True)
class ChannelsOptions:
    """What a process sets for its channels besides the config file (tests, the bench):
    ``environ`` is read instead of the process environment for the channels' secrets;
    ``edit_interval_s`` overrides ``[channels.telegram] edit_interval_s`` (tests use 0)."""

    environ: Mapping[str, str] | None = None
    edit_interval_s: float | None = None


#: The config sections this app owns, by name: what the ``lemon.config`` entry point names (the
#: loader reads it without importing the rest of the app), the same as its ``AppSpec`` declares.
SECTIONS: Final[Mapping[str, type[Section]]] = {"channels": ChannelsConfig}
