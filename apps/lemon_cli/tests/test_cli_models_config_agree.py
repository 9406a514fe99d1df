"""Models and configuration that agree, through the real ``lemon`` command: a model reference
the CLI refuses says why (exit 2, the built-in and configured providers), a missing key is
named before anything connects, a broken webhook endpoint is a problem ``config validate`` and
``doctor`` report and that does not block ``lemon chat``, and a one-shot chat says which model
it used when it is not the config default."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from lemon_cli._chat import session_for
from lemon_core.config import load_config
from lemon_core.sessions import SESSION_PORT
from lemon_platform_test.lemon_process import run_lemon
from lemon_runtime import Runtime

_SLOW = """
[providers.slow]
kind = "openai_completions"
base_url = "http://127.0.0.1:9/v1"
models = ["fake-model"]
"""

_WEBHOOK = """
[webhooks]
enabled = true

[[webhooks.endpoints]]
id = "ci"
secret_env = "CI_HOOK_SECRET_UNSET"
"""

_DEPRECATED_WEBHOOK = """
[gateway]
ingress_enabled = true

[[gateway.webhooks]]
id = "ci"
secret_env = "CI_HOOK_SECRET_UNSET"
"""


def _home(env: dict[str, str], text: str) -> Path:
    home = Path(env["LEMON_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)
    return home


def test_an_unknown_provider_is_a_usage_error_naming_the_configured_ones(
    env: dict[str, str], tmp_path: Path
) -> None:
    _home(env, _SLOW)
    proc = run_lemon(env, "chat", "--model", "nope:zzz", "hi", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nope" in proc.stderr
    known = proc.stderr.split("known providers", 1)[1]
    for name in ("slow", "openai", "anthropic", "ollama", "offline"):
        assert name in known, proc.stderr


def test_a_missing_key_is_named_before_connecting(env: dict[str, str], tmp_path: Path) -> None:
    _home(env, _SLOW)
    proc = run_lemon(env, "chat", "--model", "openai:gpt-4o-mini", "hi", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr
    assert "cannot reach" not in proc.stdout + proc.stderr  # no connection was tried
    # a configured provider's listed model is accepted (its server is down: the run fails)
    proc = run_lemon(env, "chat", "--model", "slow:fake-model", "hi", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cannot reach http://127.0.0.1:9" in proc.stdout + proc.stderr


def test_a_webhook_without_its_secret_is_reported_and_does_not_block_chat(
    env: dict[str, str], tmp_path: Path
) -> None:
    for text in (_WEBHOOK, _DEPRECATED_WEBHOOK):
        _home(env, text)
        validate = run_lemon(env, "config", "validate", cwd=tmp_path)
        assert validate.returncode == 0, validate.stdout + validate.stderr
        assert "warning" in validate.stdout
        assert "CI_HOOK_SECRET_UNSET" in validate.stdout
        doctor = run_lemon(env, "doctor", "--json", cwd=tmp_path)
        assert doctor.returncode == 1, doctor.stdout + doctor.stderr
        checks = json.loads(doctor.stdout)["checks"]
        [hook] = [c for c in checks if c["name"] == "webhooks"]
        assert hook["status"] == "fail"
        assert "CI_HOOK_SECRET_UNSET" in hook["detail"]
        chat = run_lemon(env, "chat", "/echo still here", cwd=tmp_path)
        assert chat.returncode == 0, chat.stdout + chat.stderr
        assert chat.stdout.strip() == "still here"


def test_a_one_shot_chat_says_which_model_it_used_when_not_the_default(
    env: dict[str, str], tmp_path: Path
) -> None:
    home = _home(env, '[providers.local]\nkind = "offline"\nmodels = ["picked"]\n')
    work = tmp_path / "work"
    work.mkdir()
    plain = run_lemon(env, "chat", "/echo one", cwd=work)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "model" not in plain.stderr.replace("0 tokens · offline:offline", "")

    async def pick() -> None:  # what the TUI's model picker does: the session's model
        loaded = load_config(home=home, cwd=work, environ={})
        async with Runtime(profile="full", config=loaded) as runtime:
            port = runtime.context.capabilities.require(SESSION_PORT)
            await port.patch(session_for(str(work.resolve())), model="local:picked")

    asyncio.run(pick())
    proc = run_lemon(env, "chat", "/echo two", cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "two"  # stdout is the answer alone
    assert "local:picked" in proc.stderr
    assert "not the config default" in proc.stderr


def test_a_channel_without_its_token_is_a_warning_and_does_not_block_chat(
    env: dict[str, str], tmp_path: Path
) -> None:
    _home(env, '[channels.telegram]\nenabled = true\ntoken_env = "TG_TOKEN_UNSET"\n')
    validate = run_lemon(env, "config", "validate", cwd=tmp_path)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "warning" in validate.stdout
    assert "TG_TOKEN_UNSET" in validate.stdout
    doctor = run_lemon(env, "doctor", "--json", cwd=tmp_path)
    checks = json.loads(doctor.stdout)["checks"]
    [channel] = [c for c in checks if c["name"] == "channels"]
    assert channel["status"] == "fail"
    assert "TG_TOKEN_UNSET" in channel["detail"]
    chat = run_lemon(env, "chat", "/echo still here", cwd=tmp_path)
    assert chat.returncode == 0, chat.stdout + chat.stderr
    assert chat.stdout.strip() == "still here"
