"""``lemon config validate``'s exact messages, through the real CLI, on the README's example
configs and on broken ones: the config sections moved out of lemon_core into the apps that own
them, and these messages are what a user reads, so they must stay as they are."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lemon_cli.main import app

_ROOT = Path(__file__).resolve().parents[3]
_TOML = re.compile(r"```toml\n(.*?)```", re.S)


def _validate(home: Path, text: str, project: str | None = None) -> tuple[int, list[str]]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)
    cwd = home.parent / "work"
    cwd.mkdir(exist_ok=True)
    if project is not None:
        (cwd / ".lemon").mkdir(exist_ok=True)
        (cwd / ".lemon" / "config.toml").write_text(project)
    env = {"LEMON_HOME": str(home), "LEMON_MODEL": "", "LEMON_ENV": "", "COLUMNS": "2000"}
    env["LEMON_MAX_CONCURRENT_RUNS"] = ""
    before = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, ["config", "validate"], env=env)
    finally:
        os.chdir(before)
    out = result.output.replace(str(home), "$HOME").replace(str(cwd), "$WORK")
    return result.exit_code, [line.rstrip() for line in out.splitlines() if line.strip()]


def _examples() -> list[tuple[str, str]]:
    """Every ``toml`` block of the READMEs that is a whole config file (has a section)."""
    found: list[tuple[str, str]] = []
    readmes = [_ROOT / "README.md", *sorted((_ROOT / "apps").glob("*/README.md"))]
    for readme in readmes:
        for index, block in enumerate(_TOML.findall(readme.read_text())):
            if block.lstrip().startswith("[") and "lemon.apps" not in block:
                found.append((f"{readme.parent.name}-{index}", block))
    return found


# Blocks that are fragments of a bigger file (fine once the rest is there) are not examples.
_NOT_WHOLE = {"lemon_quality"}


@pytest.mark.parametrize(
    ("name", "block"),
    [e for e in _examples() if e[0].rsplit("-", 1)[0] not in _NOT_WHOLE],
    ids=lambda v: v if isinstance(v, str) and "\n" not in v else "",
)
def test_the_readme_example_configs_validate(tmp_path: Path, name: str, block: str) -> None:
    (tmp_path / "home" / "tls").mkdir(parents=True)
    (tmp_path / "home" / "tls" / "cert.pem").write_text("x")
    (tmp_path / "home" / "tls" / "key.pem").write_text("x")
    code, lines = _validate(tmp_path / "home", block)
    assert code == 0, lines
    assert lines[-1].startswith("config ok ($HOME/config.toml"), lines


BROKEN: dict[str, tuple[str, str | None, int, list[str]]] = {
    "unknown-skills-key": (
        '[skills]\nregistry = "https://example.org"\n',
        None,
        1,
        [
            "error $HOME/config.toml: skills.registry: unknown key (known keys here: "
            "registry_url, hermes_url, github_url, well_known)"
        ],
    ),
    "unknown-router-key": (
        "[router]\nlease_ttl_ms = 1000\n",
        None,
        1,
        [
            "error $HOME/config.toml: router.lease_ttl_ms: unknown key "
            "(known keys here: lease_ttl_s)"
        ],
    ),
    "unknown-section": (
        "[gatway]\nmax_concurrent_runs = 2\n",
        None,
        1,
        [
            # The one message that changed when the apps took their sections over: the base
            # sections come first, then the apps' (by app name); [router] and [skills] are new.
            "error $HOME/config.toml: gatway: unknown key (known keys here: defaults, providers, "
            "runtime, profiles, logging, store, bus, file_access, tools, subagents, automation, "
            "web, channels, control_plane, gateway, mcp, memory, openai_api, router, skills, "
            "webhooks)"
        ],
    ),
    "unknown-gateway-key": (
        "[gateway]\nfoo = 1\n",
        None,
        1,
        [
            "error $HOME/config.toml: gateway.foo: unknown key (known keys here: "
            "max_concurrent_runs, slot_request_timeout_s, require_engine_lock, "
            "engine_lock_timeout_s, max_launch_attempts, launch_retry_backoff_s, "
            "prepare_timeout_s, store_timeout_s, shutdown_grace_s, max_pending_per_conversation, "
            "max_pending_runs, record_run_history, store_sweep_interval_s, default_cwd, "
            "shared_slots, lease_ttl_s)"
        ],
    ),
    "unknown-webhooks-key": (
        "[webhooks]\nenable = true\n",
        None,
        1,
        [
            "error $HOME/config.toml: webhooks.enable: unknown key (known keys here: enabled, "
            "idempotency_ttl_s, max_body_bytes, submit_timeout_s, sweep_interval_s, endpoints)"
        ],
    ),
    "unknown-control-plane-key": (
        "[control_plane]\nport = 1\n",
        None,
        1,
        [
            "error $HOME/config.toml: control_plane.port: unknown key (known keys here: "
            "local_auth, tls_cert, tls_key, connect_timeout_s, header_timeout_s, max_connections, "
            "max_connections_per_client)"
        ],
    ),
    "unknown-telegram-key": (
        '[channels.telegram]\ntoken = "x"\n',
        None,
        1,
        [
            "error $HOME/config.toml: channels.telegram.token: unknown key (known keys here: "
            "enabled, token_env, api_base_url, allowed_users, mode, webhook_url, "
            "webhook_secret_env, agent_id, edit_interval_s, poll_timeout_s)"
        ],
    ),
    "unknown-channels-key": (
        "[channels.slack]\nenabled = true\n",
        None,
        1,
        ["error $HOME/config.toml: channels.slack: unknown key (known keys here: telegram)"],
    ),
    "unknown-file-access-key": (
        '[file_access]\npatterns = ["x"]\n',
        None,
        1,
        [
            "error $HOME/config.toml: file_access.patterns: unknown key (known keys here: "
            "secret_patterns, allow_secrets)"
        ],
    ),
    "unknown-tools-key": (
        '[tools]\nallow = ["bash"]\n',
        None,
        1,
        [
            "error $HOME/config.toml: tools.allow: unknown key (tool policy lives in "
            "[profiles.<agent_id>.tool_policy]; [tools] holds only [tools.bash]; known keys here: "
            "bash)"
        ],
    ),
    "gateway-out-of-range": (
        "[gateway]\nmax_concurrent_runs = 2000\nshutdown_grace_s = -1\n",
        None,
        1,
        [
            "error $HOME/config.toml: gateway.max_concurrent_runs: Expected `int` <= 1024",
            "error $HOME/config.toml: gateway.shutdown_grace_s: Expected `float` >= 0.0",
        ],
    ),
    "gateway-wrong-type": (
        '[gateway]\nrequire_engine_lock = "yes"\n',
        None,
        1,
        ["error $HOME/config.toml: gateway.require_engine_lock: Expected `bool`, got `str`"],
    ),
    "bad-webhook-id": (
        '[[webhooks.endpoints]]\nid = "Bad Id"\nsecret_env = "1NOPE"\n',
        None,
        1,
        [
            "error $HOME/config.toml: webhooks.endpoints[0].id: Expected `str` matching regex "
            "'^[a-z0-9][a-z0-9_-]{0,63}$' (1-64 characters of a-z, 0-9, '_' and '-', starting with "
            "a-z or 0-9)",
            "error $HOME/config.toml: webhooks.endpoints[0].secret_env: Expected `str` matching "
            "regex '^[A-Za-z_][A-Za-z0-9_]{0,127}$' (the NAME of an environment variable, e.g. "
            "CI_WEBHOOK_SECRET)",
        ],
    ),
    "deprecated-gateway-keys": (
        "[gateway]\n"
        "ingress_enabled = true\n"
        "idempotency_ttl_s = 60\n"
        "[[gateway.webhooks]]\n"
        'id = "ci"\n'
        'secret_env = "S"\n',
        None,
        0,
        [
            "warning $HOME/config.toml: gateway.ingress_enabled: deprecated, still read; use "
            "webhooks.enabled",
            "warning $HOME/config.toml: gateway.webhooks: deprecated, still read; use "
            "webhooks.endpoints",
            "warning $HOME/config.toml: gateway.idempotency_ttl_s: deprecated, still read; use "
            "webhooks.idempotency_ttl_s",
            "warning webhooks.endpoints[0] ('ci'): its secret variable S is not set; set it in "
            "the environment or in $HOME/secrets.env to the webhook's Standard Webhooks secret "
            "(whsec_<base64>), or remove the webhook (this surface starts degraded)",
            "config ok ($HOME/config.toml)",
        ],
    ),
    "deprecated-bad-webhook": (
        '[[gateway.webhooks]]\nid = "ci"\nsecret_env = "not a name"\n',
        None,
        1,
        [
            "error $HOME/config.toml: gateway.webhooks[0].secret_env: Expected `str` matching "
            "regex '^[A-Za-z_][A-Za-z0-9_]{0,127}$' (the NAME of an environment variable, e.g. "
            "CI_WEBHOOK_SECRET)"
        ],
    ),
    "deprecated-and-new": (
        "[gateway]\ningress_enabled = true\n[webhooks]\nenabled = false\n",
        None,
        1,
        [
            "error $HOME/config.toml: gateway.ingress_enabled: deprecated, and webhooks.enabled is "
            "set too (remove gateway.ingress_enabled (its new spelling is webhooks.enabled))"
        ],
    ),
    "bad-control-plane-value": (
        "[control_plane]\nmax_connections = 0\nlocal_auth = 1\n",
        None,
        1,
        [
            "error $HOME/config.toml: control_plane.local_auth: Expected `bool`, got `int`",
            "error $HOME/config.toml: control_plane.max_connections: Expected `int` >= 1",
        ],
    ),
    "control-plane-half-tls": (
        '[control_plane]\ntls_cert = "tls/cert.pem"\n',
        None,
        1,
        [
            "error config: control_plane.tls_key: TLS needs both tls_cert and tls_key (a PEM "
            "certificate (chain) and its private key, e.g. from your CA or `openssl req -x509 "
            "-newkey rsa:2048 -nodes -keyout key.pem -out cert.pem`)"
        ],
    ),
    "bad-telegram-value": (
        "[channels.telegram]\n"
        'token_env = "123:ABC-secret"\n'
        "allowed_users = [-1]\n"
        'mode = "webhook"\n'
        'api_base_url = "ftp://x"\n'
        "poll_timeout_s = 99\n",
        None,
        1,
        ["error $HOME/config.toml: channels.telegram.poll_timeout_s: Expected `int` <= 50"],
    ),
    "bad-pass-env": (
        '[tools.bash]\npass_env = ["GITHUB TOKEN", "OK_NAME"]\n',
        None,
        1,
        [
            "error $HOME/config.toml: tools.bash.pass_env: Expected `str` matching regex "
            "'^[A-Za-z_][A-Za-z0-9_]{0,127}$' (the NAME of an environment variable, e.g. "
            "GITHUB_TOKEN)"
        ],
    ),
    "project-widens": (
        "[gateway]\nmax_concurrent_runs = 2\n",
        '[tools.bash]\npass_env = ["GITHUB_TOKEN"]\n[file_access]\nallow_secrets = ["*.pem"]\n',
        1,
        [
            "error $WORK/.lemon/config.toml: file_access.allow_secrets: only the home config may "
            "set this (it widens what tools reach) (move it to $HOME/config.toml)",
            "error $WORK/.lemon/config.toml: tools.bash.pass_env: only the home config may set "
            "this (it widens what tools reach) (move it to $HOME/config.toml)",
        ],
    ),
    "project-bad-key": (
        "",
        "[gateway]\nmax_concurent_runs = 3\n",
        1,
        [
            "error $WORK/.lemon/config.toml: gateway.max_concurent_runs: unknown key (known keys "
            "here: max_concurrent_runs, slot_request_timeout_s, require_engine_lock, "
            "engine_lock_timeout_s, max_launch_attempts, launch_retry_backoff_s, "
            "prepare_timeout_s, store_timeout_s, shutdown_grace_s, max_pending_per_conversation, "
            "max_pending_runs, record_run_history, store_sweep_interval_s, default_cwd, "
            "shared_slots, lease_ttl_s)"
        ],
    ),
    "toml-syntax": (
        "[gateway\nmax_concurrent_runs = 2\n",
        None,
        1,
        [
            "error $HOME/config.toml: not valid TOML: Expected ']' at the end of a table "
            "declaration (at line 1, column 9) (fix the syntax)"
        ],
    ),
    "legacy-section": (
        '[agent]\nname = "x"\n',
        None,
        1,
        [
            "error $HOME/config.toml: agent: unsupported section (use [profiles.<agent_id>] "
            "instead of [agent])"
        ],
    ),
    "bad-model": (
        '[defaults]\nmodel = "ghost:m"\n',
        None,
        1,
        [
            "error $HOME/config.toml: defaults.model: provider 'ghost' is not configured (add "
            "[providers.ghost] or use one of: anthropic, llamacpp, lmstudio, offline, ollama, "
            "openai, vllm)"
        ],
    ),
    "bad-store": (
        '[store]\nbackend = "postgres"\n[bus]\nbackend = "kafka"\n',
        None,
        1,
        ["error $HOME/config.toml: bus.backend: Invalid enum value 'kafka' (one of local, redis)"],
    ),
    "bad-provider": (
        '[providers.local]\nkind = "openai"\n',
        None,
        1,
        [
            "error $HOME/config.toml: providers.local.kind: Invalid enum value 'openai' (one of "
            "openai_completions, anthropic_messages, offline)"
        ],
    ),
    "telegram-cross-checks": (
        "[channels.telegram]\n"
        'token_env = "123:ABC-secret"\n'
        "allowed_users = [-1]\n"
        'mode = "webhook"\n'
        'api_base_url = "ftp://x"\n',
        None,
        1,
        [
            "error $HOME/config.toml: channels.telegram.token_env: '123:ABC-secret' is not a "
            "variable name (give the NAME of the variable holding the secret, e.g. "
            '"TELEGRAM_BOT_TOKEN", never the secret itself)',
            "error $HOME/config.toml: channels.telegram.api_base_url: 'ftp://x' is not an http(s) "
            'URL (e.g. "https://api.telegram.org" (or your self-hosted Bot API server))',
            "error $HOME/config.toml: channels.telegram.allowed_users: Telegram user ids are "
            "positive integers (e.g. allowed_users = [123456789] (ask @userinfobot for yours))",
            "error config: channels.telegram.webhook_url: webhook mode needs the public https URL "
            'Telegram posts to (e.g. webhook_url = "https://bot.example.org/channels/telegram", or '
            'use mode = "polling")',
            "error config: channels.telegram.webhook_secret_env: webhook mode needs a secret "
            "Telegram sends back with every update (name the variable holding it, e.g. "
            'webhook_secret_env = "TELEGRAM_WEBHOOK_SECRET")',
        ],
    ),
    "store-needs-dsn": (
        '[store]\nbackend = "postgres"\n',
        None,
        1,
        [
            "error config: store.dsn: backend = 'postgres' needs dsn or dsn_env (e.g. dsn = "
            '"postgresql://postgres@127.0.0.1:5432/lemon" or dsn_env = "NAME_OF_A_VARIABLE")'
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_config_validate_names_file_key_and_problem(tmp_path: Path, name: str) -> None:
    home_text, project_text, want_code, want = BROKEN[name]
    code, lines = _validate(tmp_path / "home", home_text, project_text)
    assert (code, lines) == (want_code, want)
