"""The schema is assembled from the sections the loader is given: an app's section is checked
key by key, a section nobody declares is an unknown key, and a section's own rules (deprecated
spellings, home-only keys, hints, environment keys, cross-key checks) travel with its class."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, ClassVar

import msgspec
import pytest

from lemon_core.config import CheckContext, ConfigError, ConfigIssue, Section, load_config


class _Old(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    knob_on: bool = False


class Knob(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    deprecated: ClassVar[Mapping[tuple[str, str], str]] = {("legacy", "knob_on"): "on"}
    deprecated_schema: ClassVar[type[msgspec.Struct] | None] = _Old
    home_only: ClassVar[tuple[str, ...]] = ("secret_dir",)
    hints: ClassVar[Mapping[str, str]] = {"knob.name": "lower-case letters"}
    env_keys: ClassVar[Mapping[str, str]] = {"LEMON_TEST_KNOB_LEVEL": "level"}

    on: bool = False
    level: Annotated[int, msgspec.Meta(ge=1)] = 1
    name: Annotated[str, msgspec.Meta(pattern="^[a-z]+$")] = "x"
    secret_dir: str | None = None
    wait_s: float = 1.0

    def check(self, name: str, ctx: CheckContext) -> Iterable[ConfigIssue]:
        if self.on and self.level < 2:
            return [ctx.issue(f"{name}.level", "on needs level 2", "raise it")]
        return []


class Legacy(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    other: int = 0


SECTIONS = {"knob": Knob, "legacy": Legacy}


def _load(tmp_path: Path, text: str, project: str | None = None, **env: str):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text)
    if project is not None:
        (tmp_path / ".lemon").mkdir(exist_ok=True)
        (tmp_path / ".lemon" / "config.toml").write_text(project)
    return load_config(home=home, cwd=tmp_path, environ=env, sections=SECTIONS)


def _messages(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [f"{i.key}: {i.message}" + (f" ({i.hint})" if i.hint else "") for i in exc.value.issues]


def test_a_given_section_is_typed_and_a_missing_one_is_an_unknown_key(tmp_path: Path) -> None:
    loaded = _load(tmp_path, "[knob]\nlevel = 3\nwait_s = 2\n", LEMON_TEST_KNOB_LEVEL="4")
    assert loaded.section(Knob) == Knob(level=4, wait_s=2.0)  # the environment wins
    assert loaded.config.to_builtins()["knob"]["level"] == 4
    override = loaded.with_section(msgspec.structs.replace(loaded.section(Knob), level=9))
    assert override.section(Knob).level == 9
    assert loaded.section(Knob).level == 4
    home = tmp_path / "home"
    with pytest.raises(ConfigError) as exc:
        load_config(home=home, cwd=tmp_path, environ={}, sections={})
    assert _messages(exc)[0].startswith("knob: unknown key (known keys here: defaults,")


def test_a_sections_rules_travel_with_its_class(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, '[knob]\nlevel = 0\nname = "A"\nwat = 1\n')
    assert _messages(exc) == [
        "knob.wat: unknown key (known keys here: on, level, name, secret_dir, wait_s)",
        "knob.level: Expected `int` >= 1",
        "knob.name: Expected `str` matching regex '^[a-z]+$' (lower-case letters)",
    ]
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, "[knob]\non = true\n", project='[knob]\nsecret_dir = "/x"\n')
    assert _messages(exc) == [
        "knob.level: on needs level 2 (raise it)",
        "knob.secret_dir: only the home config may set this (it widens what tools reach) "
        f"(move it to {tmp_path / 'home' / 'config.toml'})",
    ]
    (tmp_path / ".lemon" / "config.toml").unlink()
    loaded = _load(tmp_path, "[legacy]\nknob_on = true\nother = 2\n[knob]\nlevel = 2\n")
    assert loaded.section(Knob).on is True
    assert loaded.section(Legacy).other == 2
    assert [d.render().split(": ", 1)[1] for d in loaded.deprecations] == [
        "legacy.knob_on: deprecated, still read; use knob.on"
    ]


def test_lemon_core_defines_only_the_base_sections() -> None:
    """No app's section lives in lemon_core: its sections are the base ones."""
    import lemon_core.config._schema as schema

    defined = {
        name
        for name, obj in vars(schema).items()
        if isinstance(obj, type) and issubclass(obj, Section) and obj.__module__ == schema.__name__
    }
    assert defined == {
        "BusConfig",
        "Config",
        "DefaultsConfig",
        "LoggingConfig",
        "ProfileConfig",
        "ProviderConfig",
        "RuntimeConfig",
        "StoreConfig",
        "ToolPolicyConfig",
    }
