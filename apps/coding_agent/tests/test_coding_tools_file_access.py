"""Secret files and the workspace boundary, on real files: the tools themselves and the gate."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from coding_agent import (
    DEFAULT_TOOL_POLICY,
    FileAccess,
    FileAccessConfig,
    GateContext,
    Workspace,
    check_gate,
    coding_tools,
)
from lemon_agent import AbortSignal, Tool, ToolContext, ToolError, ToolResult
from lemon_core import ExecApprovals
from lemon_core.bus import EXEC_APPROVALS, Bus, Delivery
from lemon_core.events import ApprovalRequested
from lemon_core.execution import ToolPolicy

KEY = "sk-live-0123456789abcdef"


async def _noop(text: str) -> None:
    return None


def _ctx(name: str, **args: Any) -> ToolContext:
    return ToolContext(tool_call_id="t1", name=name, arguments=args, signal=AbortSignal(),
                       update=_noop)  # fmt: skip


@dataclass
class Env:
    root: Path
    work: Path
    home: Path
    outside: Path
    workspace: Workspace
    tools: dict[str, Tool]

    async def call(self, name: str, **args: Any) -> str:
        out = await self.tools[name].execute(_ctx(name, **args))
        return out.content if isinstance(out, ToolResult) else out


def _env(tmp_path: Path, config: FileAccessConfig | None = None) -> Env:
    work, home, outside = tmp_path / "work", tmp_path / "home", tmp_path / "outside"
    for d in (work / "src", work / "certs", work / ".aws", home, outside):
        d.mkdir(parents=True)
    (home / "secrets.env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (outside / "notes.txt").write_text("notes outside\n")
    (work / "src" / "app.py").write_text("print('hello')\n")
    (work / ".env").write_text(f"TOKEN={KEY}\n")
    (work / "certs" / "server.pem").write_text(f"-----BEGIN PRIVATE KEY----- {KEY}\n")
    (work / ".aws" / "credentials").write_text(f"aws_secret_access_key={KEY}\n")
    for name in ("id_ed25519", ".netrc", ".pgpass", "deploy.key", ".env.production"):
        (work / name).write_text(f"{KEY}\n")
    access = FileAccess.from_config(config or FileAccessConfig(), home=home)
    workspace = Workspace(cwd=work, access=access)
    return Env(tmp_path, work, home, outside, workspace,
               {t.name: t for t in coding_tools(workspace)})  # fmt: skip


# -- secret files, refused by the tools themselves ---------------------------------------


@pytest.mark.parametrize(
    "path",
    [".env", ".env.production", "certs/server.pem", "id_ed25519", ".netrc", ".pgpass",
     "deploy.key", ".aws/credentials", "src/../.env", "./certs/../.env"],
)  # fmt: skip
async def test_read_refuses_secret_files_inside_the_workspace(tmp_path: Path, path: str) -> None:
    env = _env(tmp_path)
    with pytest.raises(ToolError, match="is refused: it looks like a secret file") as info:
        await env.call("read", path=path)
    assert "matches the secret pattern" in str(info.value)
    assert KEY not in str(info.value)


async def test_lemon_home_secrets_are_refused_even_when_exempted(tmp_path: Path) -> None:
    env = _env(tmp_path, FileAccessConfig(allow_secrets=("secrets.env", "*")))
    (env.work / "keys.txt").symlink_to(env.home / "secrets.env")
    for path in (str(env.home / "secrets.env"), "keys.txt", "../home/secrets.env"):
        with pytest.raises(ToolError, match="Lemon's own secrets file"):
            await env.call("read", path=path)


async def test_symlinks_to_and_named_as_secrets_are_refused(tmp_path: Path) -> None:
    env = _env(tmp_path)
    (env.work / "notes.txt").symlink_to(env.work / ".env")  # innocent name, secret target
    (env.work / "plain.txt").write_text("plain\n")
    (env.work / "server.key").symlink_to(env.work / "plain.txt")  # secret name, plain target
    with pytest.raises(ToolError, match=r"it leads to .*\.env"):
        await env.call("read", path="notes.txt")
    with pytest.raises(ToolError, match=r"secret pattern '\*.key'"):
        await env.call("read", path="server.key")


async def test_configured_patterns_add_and_home_exemptions_allow(tmp_path: Path) -> None:
    env = _env(tmp_path, FileAccessConfig(secret_patterns=("*.vault",),
                                          allow_secrets=("certs/*.pem",)))  # fmt: skip
    (env.work / "prod.vault").write_text("v\n")
    with pytest.raises(ToolError, match=r"'\*.vault'"):
        await env.call("read", path="prod.vault")
    assert KEY in await env.call("read", path="certs/server.pem")
    with pytest.raises(ToolError, match="secret file"):
        await env.call("read", path=".env")


async def test_write_and_edit_refuse_secret_files(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with pytest.raises(ToolError, match="secret file"):
        await env.call("write", path=".env.local", content="X=1\n")
    assert not (env.work / ".env.local").exists()
    with pytest.raises(ToolError, match="secret file"):
        await env.call("edit", path="deploy.key", old_text=KEY, new_text="gone")
    assert (env.work / "deploy.key").read_text() == f"{KEY}\n"
    (env.work / "link.txt").symlink_to(env.home / "secrets.env")
    with pytest.raises(ToolError, match="Lemon's own secrets file"):
        await env.call("write", path="link.txt", content="overwritten")
    assert KEY in (env.home / "secrets.env").read_text()


async def test_grep_and_find_skip_secret_files_and_say_so(tmp_path: Path) -> None:
    env = _env(tmp_path)
    (env.work / "src" / "settings.py").write_text(f"# not a key: {KEY[:7]}\n")
    (env.work / "escape.txt").symlink_to(env.outside / "notes.txt")
    found = await env.call("grep", pattern="sk-", hidden=True)
    assert KEY not in found
    assert "src/settings.py:1:" in found
    assert "8 secret file(s) not searched" in found
    assert ".env" in found
    assert "certs/server.pem" in found
    outside = await env.call("grep", pattern="notes", hidden=True)
    assert "notes outside" not in outside
    assert "links leading out of the searched directory and the workspace: escape.txt" in outside
    listed = await env.call("find", pattern="*", hidden=True)
    assert ".env" not in listed.split("\n")
    assert "certs/server.pem" not in listed.split("\n")
    assert "src/app.py" in listed
    assert "secret file(s) not listed" in listed


async def test_a_path_with_a_nul_character_is_a_clear_error(tmp_path: Path) -> None:
    gate = _gate(tmp_path)
    await check_gate(_ctx("read", path="a\0b"), gate.context())  # left to the tool
    with pytest.raises(ToolError, match="NUL character"):
        await gate.env.call("read", path="a\0b")


async def test_ls_and_grep_refuse_a_secret_path_itself(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with pytest.raises(ToolError, match="secret file"):
        await env.call("grep", pattern=".", path=".env")
    with pytest.raises(ToolError, match="secret file"):
        await env.call("ls", path="certs/server.pem")


# -- the gate: free inside the workspace, asked outside ----------------------------------


@dataclass
class Gate:
    env: Env
    bus: Bus
    approvals: ExecApprovals | None

    def context(self, policy: ToolPolicy = DEFAULT_TOOL_POLICY) -> GateContext:
        return GateContext(policy=policy, workspace=self.env.workspace, approvals=self.approvals,
                           run_id="r1", session_key="agent:coder:main", agent_id="coder",
                           approval_timeout_s=30.0)  # fmt: skip


def _gate(tmp_path: Path, *, approver: bool = True) -> Gate:
    bus = Bus()
    return Gate(_env(tmp_path), bus, ExecApprovals(bus) if approver else None)


async def test_read_tools_run_freely_inside_the_workspace(tmp_path: Path) -> None:
    gate = _gate(tmp_path)
    for name, args in (("read", {"path": "src/app.py"}), ("ls", {}), ("find", {"pattern": "*"}),
                       ("grep", {"pattern": "x", "path": "src"}),
                       ("read", {"path": str(gate.env.work / "src" / "app.py")})):  # fmt: skip
        await check_gate(_ctx(name, **args), gate.context())
    assert gate.approvals is not None
    assert gate.approvals.statistics().requested == 0


@pytest.mark.parametrize(
    "how",
    ["absolute", "dotdot", "symlink", "symlinked_dir", "home"],
)
async def test_reads_outside_the_workspace_ask_and_the_question_names_the_path(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _gate(tmp_path)
    env = gate.env
    target = (env.outside / "notes.txt").resolve()
    if how == "absolute":
        path = str(target)
    elif how == "dotdot":
        path = "src/../../outside/notes.txt"
    elif how == "symlink":
        (env.work / "inside.txt").symlink_to(target)
        path = "inside.txt"
    elif how == "symlinked_dir":
        (env.work / "docs").symlink_to(env.outside, target_is_directory=True)
        path = "docs/notes.txt"
    else:
        monkeypatch.setenv("HOME", str(env.outside))
        path = "~/notes.txt"
    sub = gate.bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))
    assert gate.approvals is not None
    checking = asyncio.ensure_future(check_gate(_ctx("read", path=path), gate.context()))
    event = await asyncio.wait_for(sub.get(), 10)
    asked = event.payload
    assert isinstance(asked, ApprovalRequested)
    assert asked.pending.tool == "read"
    assert asked.pending.action == {"path": str(target)}
    assert asked.pending.rationale == f"read {target} (outside the workspace)"
    gate.approvals.resolve(asked.approval_id, "approve_once")
    await checking  # approved: the gate lets it run
    assert "notes outside" in await env.call("read", path=path)


@pytest.mark.parametrize("name", ["ls", "find", "grep"])
async def test_listing_and_searching_outside_the_workspace_ask_too(
    tmp_path: Path, name: str
) -> None:
    gate = _gate(tmp_path)
    assert gate.approvals is not None
    sub = gate.bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))
    args: dict[str, Any] = {"path": "../outside"}
    if name != "ls":
        args["pattern"] = "notes"
    checking = asyncio.ensure_future(check_gate(_ctx(name, **args), gate.context()))
    asked = (await asyncio.wait_for(sub.get(), 10)).payload
    assert isinstance(asked, ApprovalRequested)
    assert asked.pending.action == {"path": str(gate.env.outside.resolve())}
    gate.approvals.resolve(asked.approval_id, "deny")
    with pytest.raises(ToolError) as info:
        await checking
    assert f"was not approved to reach {gate.env.outside.resolve()}" in str(info.value)
    assert "outside the workspace" in str(info.value)


async def test_without_an_approver_outside_reads_are_refused(tmp_path: Path) -> None:
    gate = _gate(tmp_path, approver=False)
    outside = str(gate.env.outside / "notes.txt")
    for name, args in (("read", {"path": outside}), ("ls", {"path": "/"}),
                       ("grep", {"pattern": "x", "path": "../outside"}),
                       ("find", {"pattern": "*", "path": str(gate.env.outside)})):  # fmt: skip
        with pytest.raises(ToolError, match=r"outside the workspace .* no approval channel"):
            await check_gate(_ctx(name, **args), gate.context())
    # Inside, reads still run without anyone to ask.
    await check_gate(_ctx("read", path="src/app.py"), gate.context())


async def test_preapproved_read_tools_read_outside_without_asking_but_never_a_secret(
    tmp_path: Path,
) -> None:
    gate = _gate(tmp_path, approver=False)  # nobody to ask: a question would refuse the call
    outside = str(gate.env.outside / "notes.txt")
    named = replace(gate.context(), preapproved=frozenset({"read", "ls", "grep", "find", "*"}))
    for name, args in (("read", {"path": outside}), ("ls", {"path": "../outside"}),
                       ("grep", {"pattern": "x", "path": "../outside"}),
                       ("find", {"pattern": "*", "path": str(gate.env.outside)})):  # fmt: skip
        await check_gate(_ctx(name, **args), named)
    with pytest.raises(ToolError, match="is refused"):
        await check_gate(_ctx("read", path=str(gate.env.home / "secrets.env")), named)
    # Only by name: ALL_TOOLS alone (a webhook's policy) or another tool's name does not lift it.
    for preapproved in ({"*"}, {"bash", "ls"}):
        other = replace(gate.context(), preapproved=frozenset(preapproved))
        with pytest.raises(ToolError, match=r"outside the workspace .* no approval channel"):
            await check_gate(_ctx("read", path=outside), other)


async def test_secret_files_are_refused_by_the_gate_without_asking(tmp_path: Path) -> None:
    gate = _gate(tmp_path)
    assert gate.approvals is not None
    free = ToolPolicy()  # every tool runs without approval
    for name, args in (("read", {"path": ".env"}), ("grep", {"pattern": "x", "path": ".env"}),
                       ("write", {"path": "new.pem", "content": "x"}),
                       ("edit", {"path": "id_ed25519", "old_text": "a", "new_text": "b"}),
                       ("read", {"path": str(gate.env.home / "secrets.env")})):  # fmt: skip
        for policy in (free, DEFAULT_TOOL_POLICY):
            with pytest.raises(ToolError, match="is refused"):
                await check_gate(_ctx(name, **args), gate.context(policy))
    assert gate.approvals.statistics().requested == 0


# -- hard links: another name for the same file ------------------------------------------


async def test_a_hard_link_to_lemons_secrets_file_is_refused_by_every_file_tool(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    secrets = env.home / "secrets.env"
    (env.work / "notes.txt").hardlink_to(secrets)  # an innocent name, the same inode
    (env.work / "src" / "keys.md").hardlink_to(secrets)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read", {"path": "notes.txt"}),
        ("read", {"path": str(env.work / "src" / "keys.md")}),
        ("grep", {"pattern": "sk-", "path": "notes.txt"}),
        ("ls", {"path": "notes.txt"}),
        ("write", {"path": "notes.txt", "content": "overwritten"}),
        ("edit", {"path": "src/keys.md", "old_text": KEY, "new_text": "x"}),
    ]
    for name, args in calls:
        with pytest.raises(ToolError, match="hard link to Lemon's own secrets file") as info:
            await env.call(name, **args)
        assert KEY not in str(info.value)
    assert secrets.read_text() == f"OPENAI_API_KEY={KEY}\n"  # neither write nor edit touched it
    found = await env.call("grep", pattern="OPENAI|sk-")
    assert KEY not in found
    assert "notes.txt" in found  # named in the "not searched" note, never with its content
    assert "src/keys.md" in found
    assert "secret file(s) not searched" in found
    listed = await env.call("find", pattern="*.txt")
    assert "notes.txt" not in listed.splitlines()
    assert "secret file(s) not listed" in listed


async def test_the_gate_refuses_a_hard_link_to_the_secrets_file_without_asking(
    tmp_path: Path,
) -> None:
    gate = _gate(tmp_path)
    assert gate.approvals is not None
    (gate.env.work / "notes.txt").hardlink_to(gate.env.home / "secrets.env")
    for name in ("read", "write", "edit"):
        args = {"path": "notes.txt", "content": "x", "old_text": "a", "new_text": "b"}
        with pytest.raises(ToolError, match="hard link to Lemon's own secrets file"):
            await check_gate(_ctx(name, **args), gate.context(ToolPolicy()))
    assert gate.approvals.statistics().requested == 0


async def test_a_secrets_file_replaced_after_start_is_still_recognised_by_identity(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    secrets = env.home / "secrets.env"
    fresh = env.home / "secrets.env.tmp"
    fresh.write_text(f"OPENAI_API_KEY={KEY}2\n")
    fresh.replace(secrets)  # `lemon setup` rewrites it: a new inode under the same name
    (env.work / "notes.txt").hardlink_to(secrets)
    with pytest.raises(ToolError, match="hard link to Lemon's own secrets file"):
        await env.call("read", path="notes.txt")


# -- writes outside the workspace: the question says so ----------------------------------


@pytest.mark.parametrize("name", ["write", "edit"])
async def test_writes_outside_the_workspace_are_asked_as_outside(tmp_path: Path, name: str) -> None:
    gate = _gate(tmp_path)
    assert gate.approvals is not None
    target = (gate.env.outside / "notes.txt").resolve()
    args: dict[str, Any] = {"path": "../outside/notes.txt", "content": "x",
                            "old_text": "notes", "new_text": "x"}  # fmt: skip
    sub = gate.bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))
    checking = asyncio.ensure_future(check_gate(_ctx(name, **args), gate.context()))
    asked = (await asyncio.wait_for(sub.get(), 10)).payload
    assert isinstance(asked, ApprovalRequested)
    assert asked.pending.action == {"path": str(target)}  # the grant key is unchanged
    assert asked.pending.rationale == f"{name} {target} (outside the workspace)"
    gate.approvals.resolve(asked.approval_id, "deny")
    with pytest.raises(ToolError) as info:
        await checking
    assert f"was not approved to reach {target}, which is outside the workspace" in str(info.value)
    assert (gate.env.outside / "notes.txt").read_text() == "notes outside\n"


async def test_writes_inside_the_workspace_are_asked_without_the_outside_mark(
    tmp_path: Path,
) -> None:
    gate = _gate(tmp_path)
    assert gate.approvals is not None
    sub = gate.bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))
    checking = asyncio.ensure_future(
        check_gate(_ctx("write", path="src/new.py", content="x"), gate.context())
    )
    asked = (await asyncio.wait_for(sub.get(), 10)).payload
    assert isinstance(asked, ApprovalRequested)
    assert asked.pending.rationale == f"write {(gate.env.work / 'src' / 'new.py').resolve()}"
    gate.approvals.resolve(asked.approval_id, "approve_once")
    await checking


async def test_a_policy_that_lets_writes_run_still_lets_them_run_outside(tmp_path: Path) -> None:
    gate = _gate(tmp_path)
    assert gate.approvals is not None
    free = ToolPolicy()  # nothing needs approval: writes outside run, as the policy says
    await check_gate(_ctx("write", path="../outside/new.txt", content="x"), gate.context(free))
    assert gate.approvals.statistics().requested == 0
