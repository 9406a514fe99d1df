"""Through the real gateway and the scripted provider: ``env`` run by bash shows none of the
daemon's secrets (provider keys, the control-plane token, webhook secrets, the names the config
and secrets.env give), and ``[tools.bash] pass_env`` lets a named one through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coding_agent import CodingExecutor
from lemon_ai import OpenAICompletionsProvider, default_catalogue
from lemon_core.bus import Bus
from lemon_core.execution import ExecutionCommand
from lemon_gateway import Gateway
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedToolCall, ScriptedTurn

SESSION = "agent:coder:main"
DAEMON_ENV = {
    "OPENAI_API_KEY": "sk-openai-0123",
    "LEMON_CONTROL_PLANE_TOKEN": "cp-token-4567",
    "FOO_SECRET": "foo-secret-89ab",
    "CI_HOOK": "whsec-named-by-the-config",  # [[gateway.webhooks]] secret_env
    "LOCAL_LLM_CRED": "named-by-api-key-env",  # [providers.local] api_key_env
    "SETUP_WROTE_THIS": "named-in-secrets-env",  # a secrets.env name, exported too
    "PLAIN_SETTING": "visible",
}
CONFIG = """
[tools.bash]
pass_env = ["FOO_SECRET", "ONLY_IN_SECRETS_FILE"]

[profiles.coder.tool_policy]
require_approval = []

[providers.local]
kind = "openai_completions"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "LOCAL_LLM_CRED"

[[gateway.webhooks]]
id = "ci"
secret_env = "CI_HOOK"
"""


async def test_bash_sees_none_of_the_daemons_secrets_but_what_pass_env_names(
    tmp_path: Path, scripted_provider: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(CONFIG)
    (home / "secrets.env").write_text(
        "SETUP_WROTE_THIS=named-in-secrets-env\nONLY_IN_SECRETS_FILE=passed-from-the-file\n"
    )
    for name, value in DAEMON_ENV.items():
        monkeypatch.setenv(name, value)
    scripted_provider.script(
        ScriptedTurn(tool_calls=(
            ScriptedToolCall(id="c1", name="bash", arguments={"command": "env"}),
        )),
        ScriptedTurn(text="done"),
    )  # fmt: skip
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    executor = CodingExecutor(home=home, model=model, provider=provider)
    try:
        async with Gateway(bus=Bus(), executor=executor) as gateway:
            completion = await gateway.submit_execution(
                ExecutionCommand(run_id="r1", session_key=SESSION, prompt="show the env",
                                 conversation_key=("session", SESSION), cwd=str(work))
            )  # fmt: skip
    finally:
        await provider.aclose()
    assert completion.ok, completion
    (shown,) = [m["content"] for m in scripted_provider.requests[1].body["messages"]
                if m["role"] == "tool"]  # fmt: skip
    seen = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    for name in ("OPENAI_API_KEY", "LEMON_CONTROL_PLANE_TOKEN", "CI_HOOK", "LOCAL_LLM_CRED",
                 "SETUP_WROTE_THIS"):  # fmt: skip
        assert name not in seen
        assert DAEMON_ENV[name] not in json.dumps([r.body for r in scripted_provider.requests])
    assert seen["FOO_SECRET"] == "foo-secret-89ab"  # pass_env
    assert seen["ONLY_IN_SECRETS_FILE"] == "passed-from-the-file"  # pass_env, from the file
    assert seen["PLAIN_SETTING"] == "visible"
    assert "PATH" in seen
    assert "HOME" in seen
