"""The import surface, the error tree and the runtime hook."""

from __future__ import annotations

import lemon_channels
import lemon_channels.telegram
import lemon_core.channels
from lemon_channels.errors import ChannelsError
from lemon_platform_test.errors_kit import ErrorTreeContract
from lemon_runtime import discover_apps, resolve_profile


def _kind(name: str) -> tuple[int, str]:  # constants, classes, functions (ruff's order)
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_every_exported_name_is_defined_and_sorted() -> None:
    for module in (lemon_channels, lemon_channels.telegram, lemon_core.channels):
        names = module.__all__
        assert all(hasattr(module, name) for name in names), module.__name__
        assert sorted(names, key=_kind) == names, module.__name__


def test_the_daemon_profile_boots_the_channels_after_the_router() -> None:
    apps = discover_apps()
    order = [a.name for a in resolve_profile("daemon", apps)]
    assert order.index("lemon_router") < order.index("lemon_channels")
    assert "lemon_channels" not in [a.name for a in resolve_profile("full", apps)]


class TestChannelsErrorTree(ErrorTreeContract):
    package = "lemon_channels"
    root = ChannelsError


def test_a_host_with_an_empty_ingress_is_refused() -> None:
    import pytest

    from lemon_channels import ChannelHost, ChannelsUsageError
    from lemon_channels.telegram import TelegramPlugin
    from lemon_channels.testing import FakeSessionPort
    from lemon_infra import MemoryStore

    with pytest.raises(ChannelsUsageError, match="at least 1"):
        ChannelHost(
            plugin=TelegramPlugin(token="1:x"),
            port=FakeSessionPort(),
            store=MemoryStore(),
            bus=None,
            ingress_entries=0,
        )


async def test_the_fake_session_port_is_a_session_port() -> None:
    import pytest

    from lemon_channels.testing import FakeSessionPort
    from lemon_core.sessions import ALL_SESSIONS, SessionPort, SessionSettings

    fake = FakeSessionPort()
    port: SessionPort = fake  # mypy checks the structure: every operation, every signature
    assert isinstance(port, SessionPort)  # runtime_checkable: every member is present
    # The operations added to the port after the fake was written behave, not just exist.
    assert await port.settings("k") == SessionSettings(session_key="k")
    patched = await port.patch("k", model="openai:gpt-4o-mini", thinking_level="high")
    assert patched.model == "openai:gpt-4o-mini"
    assert (await port.patch("k", label="work")).thinking_level == "high"  # others kept
    assert (await port.patch("k", model=None)).model is None  # None clears
    with pytest.raises(ValueError, match="thinking level"):
        await port.patch("k", thinking_level="loud")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="blank"):
        await port.patch("k", label="  ")
    assert (await port.reset("k")).done
    assert (await port.settings("k")).label == "work"  # reset keeps the settings
    assert (await port.delete("k")).done
    assert await port.settings("k") == SessionSettings(session_key="k")
    assert fake.resets == fake.deletes == ["k"]
    assert await port.runs() == []
    assert port.watch_all().session_key == ALL_SESSIONS
    assert port.statistics().streams_opened == 1
