"""Home: $LEMON_HOME resolved one way (stripped, ~ expanded, ~/.lemon by default) everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_core import Home
from lemon_core.config import lemon_home
from lemon_infra import default_store_path
from lemon_runtime import store_path


def test_lemon_home_is_stripped_and_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/users/ada")
    assert Home.from_env({"LEMON_HOME": "  ~/state\n"}).root == Path("/users/ada/state")
    assert Home.from_env({"LEMON_HOME": " /srv/lemon "}).root == Path("/srv/lemon")


@pytest.mark.parametrize("value", [None, "", "   "])
def test_an_unset_or_blank_lemon_home_means_dot_lemon(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    monkeypatch.setenv("HOME", "/users/ada")
    environ = {} if value is None else {"LEMON_HOME": value}
    assert Home.from_env(environ).root == Path("/users/ada/.lemon")


def test_the_store_path_agrees_with_the_config_home(monkeypatch: pytest.MonkeyPatch) -> None:
    # default_store_path used neither to strip nor to expand: " ~/x " named a directory
    # called " ~" in the working directory while the config was read from ~/x.
    monkeypatch.setenv("HOME", "/users/ada")
    environ = {"LEMON_HOME": " ~/x "}
    assert default_store_path(environ) == Path("/users/ada/x/store/lemon.sqlite3")
    assert default_store_path(environ) == store_path(lemon_home(environ))
    assert lemon_home(environ) == Home.from_env(environ).root


def test_every_path_lives_below_the_root() -> None:
    home = Home(root=Path("/h"))
    assert home.config == Path("/h/config.toml")
    assert home.secrets == Path("/h/secrets.env")
    assert home.store == Path("/h/store/lemon.sqlite3")
    assert home.idempotency_store == Path("/h/store/idempotency.sqlite3")
    assert home.run_owners == Path("/h/store/run-owners")
    assert home.tui_history == Path("/h/tui/history.jsonl")
    assert home.skills == Path("/h/skills")
    assert home.tokens == Path("/h/control_plane/tokens.json")
    assert home.daemon == Path("/h/daemon")
    assert home.logs == Path("/h/daemon/daemon.log")
    assert home.sessions == Path("/h/agent/sessions")
    assert home.workspace == Path("/h/agent/workspace")
