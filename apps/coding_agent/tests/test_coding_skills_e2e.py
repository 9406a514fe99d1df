"""Through the real gateway and the scripted provider: the prompt lists the usable skills by
name and description only, and the model loads a skill's body and files with read_skill."""

from __future__ import annotations

import json
import os
from pathlib import Path

from coding_agent import CodingExecutor, PromptLimits, build_system_prompt
from lemon_ai import OpenAICompletionsProvider, default_catalogue
from lemon_core.bus import Bus
from lemon_core.events import Completion
from lemon_core.execution import ExecutionCommand
from lemon_gateway import Gateway
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedToolCall, ScriptedTurn
from lemon_skills import SkillManager, SkillsSettings, SkillSummary, TrustLevel

SESSION = "agent:coder:main"
BODY = "# Release notes\n\n1. Read CHANGELOG.md.\n2. Group entries by area. UNIQUE-BODY-7731\n"


def _install(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "release-notes"
    (src / "references").mkdir(parents=True)
    (src / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Write release notes from a changelog.\n---\n" + BODY
    )
    (src / "references" / "style.md").write_text("Use the past tense. STYLE-4410\n")
    manager = SkillManager(SkillsSettings(home=home), cwd=tmp_path)
    manager.install("./release-notes", approve=lambda plan: True)


def _tool(id: str, **arguments: str) -> ScriptedToolCall:
    return ScriptedToolCall(id=id, name="read_skill", arguments=arguments)


async def _write_release_notes(
    home: Path, work: Path, scripted_provider: ScriptedProviderServer
) -> Completion:
    """One run of the coding executor (model: the scripted provider) through the gateway."""
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    executor = CodingExecutor(home=home, model=model, provider=provider)
    try:
        async with Gateway(bus=Bus(), executor=executor) as gateway:
            return await gateway.submit_execution(
                ExecutionCommand(run_id="r1", session_key=SESSION, prompt="write release notes",
                                 conversation_key=("session", SESSION), cwd=str(work))
            )  # fmt: skip
    finally:
        await provider.aclose()


async def test_a_bundle_changed_after_install_is_neither_listed_nor_read(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    _install(home, tmp_path)
    os.symlink("/etc/hostname", home / "skills" / "installed" / "release-notes" / "leak")
    scripted_provider.script(
        ScriptedTurn(tool_calls=(_tool("c1", name="release-notes"),)),
        ScriptedTurn(text="notes written"),
    )  # fmt: skip
    completion = await _write_release_notes(home, work, scripted_provider)
    assert completion.ok, completion
    first = scripted_provider.requests[0].body
    system = first["messages"][0]["content"]
    # The modified bundle (a link added after install) is no longer usable...
    assert "release-notes" not in system
    assert {t["function"]["name"] for t in first["tools"]} >= {"read_skill", "read", "bash"}
    results = {m["tool_call_id"]: m["content"] for m in scripted_provider.requests[1].body[
        "messages"] if m["role"] == "tool"}  # fmt: skip
    assert "no usable skill named 'release-notes'" in results["c1"]
    assert "UNIQUE-BODY-7731" not in json.dumps(scripted_provider.requests[1].body)


async def test_the_agent_loads_a_skill_body_through_the_tool(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    _install(home, tmp_path)
    scripted_provider.script(
        ScriptedTurn(tool_calls=(
            _tool("c1", name="release-notes"),
            _tool("c2", name="release-notes", path="references/style.md"),
            _tool("c3", name="release-notes", path="../../skills.lock"),
            _tool("c4", name="release-notes", path="/etc/hostname"),
            _tool("c5", name="nope"),
        )),
        ScriptedTurn(text="notes written"),
    )  # fmt: skip
    completion = await _write_release_notes(home, work, scripted_provider)
    assert completion.ok, completion
    assert completion.answer == "notes written"
    system = scripted_provider.requests[0].body["messages"][0]["content"]
    assert "- release-notes: Write release notes from a changelog." in system
    assert "- skill-creator: " in system  # the builtin, seeded at first start
    assert "UNIQUE-BODY-7731" not in system  # progressive disclosure: the body is not in it
    results = {m["tool_call_id"]: m["content"] for m in scripted_provider.requests[1].body[
        "messages"] if m["role"] == "tool"}  # fmt: skip
    assert "UNIQUE-BODY-7731" in results["c1"]
    assert "references/style.md" in results["c1"]  # the file list follows the body
    assert "STYLE-4410" in results["c2"]
    assert "without '..'" in results["c3"]
    assert "without '..'" in results["c4"] or "relative" in results["c4"]
    assert "no usable skill named 'nope'" in results["c5"]


def test_the_skills_section_is_clean_and_bounded(tmp_path: Path) -> None:
    skills = [
        SkillSummary(name=f"s{i}", description=f"line one\nline two\u200b {i}",
                     trust=TrustLevel.TRUSTED)
        for i in range(5)
    ]  # fmt: skip
    prompt = build_system_prompt(cwd=tmp_path, home=tmp_path, skills=skills)
    assert "- s0: line one line two 0" in prompt
    assert "\u200b" not in prompt
    bounded = build_system_prompt(cwd=tmp_path, home=tmp_path, skills=skills,
                                  limits=PromptLimits(max_skills=2))  # fmt: skip
    assert "- s1:" in bounded
    assert "- s2:" not in bounded
    assert "[3 more skill(s) left out (prompt bound)]" in bounded
    assert "## Skills" not in build_system_prompt(cwd=tmp_path, home=tmp_path)
