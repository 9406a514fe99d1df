"""read_skill and the catalog: only usable skills, confined to the bundle, text, bounded."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from lemon_agent import AbortSignal, ToolContext, ToolError
from lemon_skills import (
    PolicyRefusal,
    SkillCatalog,
    SkillManager,
    SkillsSettings,
    SkillsUsageError,
    prompt_safe,
    read_skill_tool,
)


def yes(_plan: object) -> bool:
    return True


def _overridden_install(manager: SkillManager, ident: str, name: str) -> None:
    with pytest.raises(PolicyRefusal):
        manager.install(ident, approve=yes)
    blocked = manager.lockfile.read().blocked[name]
    manager.override(name, blocked.bundle_hash, blocked.findings)
    manager.install(ident, approve=yes)


def test_a_link_out_of_the_bundle_is_never_followed_even_under_an_override(
    manager: SkillManager, settings: SkillsSettings, make_skill: Callable[..., Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    src = make_skill("linky")
    os.symlink(str(secret), src / "out.md")
    _overridden_install(manager, "./src/linky", "linky")
    catalog = SkillCatalog(settings)
    assert "linky" in [s.name for s in catalog.enabled()]
    with pytest.raises(SkillsUsageError, match="leads outside the skill"):
        catalog.read("linky", "out.md")
    assert "out.md" in catalog.read("linky")  # listed as a file, never read through


def test_reads_are_bounded_text_only_and_inside_the_bundle(
    manager: SkillManager, settings: SkillsSettings, make_skill: Callable[..., Path]
) -> None:
    make_skill("big", {"references/long.md": "x" * 5000, "assets/logo.png": b"\x89PNG\x00\x01"})
    manager.install("./src/big", approve=yes)
    catalog = SkillCatalog(settings, max_chars=1000)
    text = catalog.read("big", "references/long.md")
    assert text.startswith("x" * 1000)
    assert "truncated at 1000 characters" in text
    with pytest.raises(SkillsUsageError, match="binary file"):
        catalog.read("big", "assets/logo.png")
    for bad in ("../big/SKILL.md", "/etc/passwd", "references/../../x", ""):
        with pytest.raises(SkillsUsageError):
            catalog.read("big", bad or " ")
    with pytest.raises(SkillsUsageError, match="has no file"):
        catalog.read("big", "references")
    with pytest.raises(SkillsUsageError, match="no usable skill named 'other'"):
        catalog.read("other")


async def test_the_tool_turns_refusals_into_errors_the_model_sees(
    manager: SkillManager, settings: SkillsSettings, make_skill: Callable[..., Path]
) -> None:
    make_skill("clean", body="BODY-1234\n")
    manager.install("./src/clean", approve=yes)
    tool = read_skill_tool(SkillCatalog(settings))

    async def call(**arguments: str) -> str:
        async def update(_text: str) -> None:
            return None

        ctx = ToolContext(tool_call_id="t", name=tool.name, arguments=arguments,
                          signal=AbortSignal(), update=update)  # fmt: skip
        result = await tool.execute(ctx)
        assert isinstance(result, str)
        return result

    assert "BODY-1234" in await call(name="clean")
    with pytest.raises(ToolError, match=re.escape("without '..'")):
        await asyncio.wait_for(call(name="clean", path="../x"), 10)


def test_descriptions_are_one_clean_bounded_line() -> None:
    assert prompt_safe("a\nb\t c\u200b\u202e d\x07") == "a b c d"
    assert len(prompt_safe("y" * 2000)) == 300
