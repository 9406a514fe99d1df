"""The optional surfaces of a configuration that would start degraded (a webhook endpoint
whose secret is unset, a channel without its token): what ``lemon config validate`` warns
of and ``lemon doctor`` names as a problem, in the words the daemon logs at start. Such a
surface is left out at start; it never blocks the daemon or a chat."""

from __future__ import annotations

import os
from pathlib import Path

from lemon_core.config import Config, read_secrets

__all__ = ["surface_problems"]


def surface_problems(config: Config, home: Path) -> list[tuple[str, str]]:
    """``(surface, sentence)`` for each configured optional surface that would be degraded:
    ``webhooks`` (one line per endpoint) and ``channels`` (a channel without its token)."""
    from lemon_channels import ChannelsConfig
    from lemon_webhooks import WebhooksConfig, webhook_problems

    found = [
        ("webhooks", text)
        for text in webhook_problems(config.section(WebhooksConfig), environ=os.environ, home=home)
    ]
    telegram = config.section(ChannelsConfig).telegram
    if (
        telegram is not None
        and telegram.enabled
        and not (os.environ.get(telegram.token_env) or read_secrets(home).get(telegram.token_env))
    ):
        found.append(
            (
                "channels",
                f"channels.telegram: no bot token: {telegram.token_env} is not set "
                "(environment or $LEMON_HOME/secrets.env); the channel stays off",
            )
        )
    return found
