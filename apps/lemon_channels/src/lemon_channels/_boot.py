"""lemon_channels' ``lemon.apps`` hook: the configured chat channels inside the daemon.

Profile ``daemon`` (requires ``lemon_router``: a channel is a client of ``SESSION_PORT``).
Start reads ``[channels.telegram]`` from the runtime's config; the bot token comes from the
variable its ``token_env`` names (the environment, else ``$LEMON_HOME/secrets.env``). A
missing or refused token, or an unreachable Bot API, leaves that channel FAILED with a
sentence saying how to fix it (shown by ``lemon channels status`` and ``lemon doctor``); the
daemon keeps running without it. It registers ``CHANNEL_SUPERVISION``
(:class:`~lemon_channels._supervision.ChannelsSupervision`: automation's summaries and alerts
into the target channel's outbox). Leaving the lifespan stops the channels (pending outbound
messages stay in the store and are sent after the next start).

The app owns the ``[channels]`` section (:class:`ChannelsConfig`). A :class:`ChannelsOptions`
given to the runtime may carry ``environ`` (a mapping used instead of the process environment)
and ``edit_interval_s`` (overrides the config; tests use 0).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from lemon_channels._host import STATUS_TABLE, ChannelHost
from lemon_channels._section import SECTIONS, ChannelsConfig, ChannelsOptions, TelegramChannelConfig
from lemon_channels._supervision import ChannelsSupervision
from lemon_core.channels import CHANNEL_SUPERVISION, ChannelState, ChannelStatus
from lemon_core.config import read_secrets
from lemon_core.mounts import HTTP_MOUNTS
from lemon_core.sessions import SESSION_PORT
from lemon_core.store import Store
from lemon_runtime import AppSpec, Runtime

__all__ = ["Channels", "lemon_channels_app"]

_log = logging.getLogger("lemon_channels")


@dataclass(slots=True)
class Channels:
    """The handle: the running hosts, and the channels that could not start."""

    hosts: dict[str, ChannelHost] = field(default_factory=dict)
    failed: dict[str, ChannelStatus] = field(default_factory=dict)

    def statuses(self) -> list[ChannelStatus]:
        return [h.plugin.status() for h in self.hosts.values()] + list(self.failed.values())


async def _record_failed(store: Store, status: ChannelStatus) -> None:
    import time

    import msgspec

    data = msgspec.to_builtins(status)
    data["updated_ms"] = time.time_ns() // 1_000_000
    await store.put(STATUS_TABLE, status.channel_id, data)


async def _start(runtime: Runtime) -> Channels:
    channels = Channels()
    telegram = runtime.section(ChannelsConfig).telegram
    if telegram is None or not telegram.enabled:
        return channels
    options = runtime.option(ChannelsOptions) or ChannelsOptions()
    env: Mapping[str, str] = options.environ if options.environ is not None else os.environ
    interval = (
        options.edit_interval_s if options.edit_interval_s is not None else telegram.edit_interval_s
    )
    host_or_status = _telegram(runtime, telegram, env, interval)
    if isinstance(host_or_status, ChannelStatus):
        channels.failed["telegram"] = host_or_status
        await _record_failed(runtime.store, host_or_status)
        _log.warning("telegram: %s", host_or_status.detail)
        return channels
    status = await host_or_status.start()
    if status.state is ChannelState.RUNNING:
        channels.hosts["telegram"] = host_or_status
    else:
        channels.failed["telegram"] = status
        _log.warning("telegram: %s", status.detail)
    return channels


def _secret(runtime: Runtime, env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    if value:
        return value
    return read_secrets(runtime.home).get(name) or None


def _telegram(
    runtime: Runtime, config: TelegramChannelConfig, env: Mapping[str, str], interval: float
) -> ChannelHost | ChannelStatus:
    from lemon_channels.telegram import TelegramPlugin

    token = _secret(runtime, env, config.token_env)
    if token is None:
        return ChannelStatus(
            channel_id="telegram",
            state=ChannelState.FAILED,
            mode=config.mode,
            detail=(
                f"no bot token: set {config.token_env} (in the environment or "
                "$LEMON_HOME/secrets.env) to the token @BotFather gave you"
            ),
        )
    secret = None
    if config.mode == "webhook" and config.webhook_secret_env:
        secret = _secret(runtime, env, config.webhook_secret_env)
        if secret is None:
            return ChannelStatus(
                channel_id="telegram",
                state=ChannelState.FAILED,
                mode=config.mode,
                detail=f"webhook mode: set {config.webhook_secret_env} to a random secret",
            )
    plugin = TelegramPlugin(
        token=token,
        api_base_url=config.api_base_url,
        token_name=config.token_env,
        mode=config.mode,
        poll_timeout_s=config.poll_timeout_s,
        webhook_url=config.webhook_url,
        webhook_secret=secret,
        mounts=runtime.context.capabilities.get(HTTP_MOUNTS),
    )
    return ChannelHost(
        plugin=plugin,
        port=runtime.context.capabilities.require(SESSION_PORT),
        store=runtime.store,
        bus=runtime.bus,
        allowed_users=frozenset(str(u) for u in config.allowed_users),
        agent_id=config.agent_id,
        edit_interval_s=interval,
    )


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[Channels]:
    channels = await _start(runtime)
    # Automation reaches a person only through this (a target on a channel that is not
    # running is refused with the reason): registered even when no channel is configured.
    supervision = ChannelsSupervision(channels, runtime.store)
    capabilities = runtime.context.capabilities
    capabilities.register(CHANNEL_SUPERVISION, supervision)
    try:
        yield channels
    finally:
        capabilities.unregister(CHANNEL_SUPERVISION, supervision)
        for host in channels.hosts.values():
            await host.stop()


lemon_channels_app: Final = AppSpec(
    name="lemon_channels",
    lifespan=_lifespan,
    requires=("lemon_router",),
    profiles=frozenset({"daemon"}),
    description="chat channels (Telegram) on the session port (daemon profile)",
    sections=SECTIONS,
)
