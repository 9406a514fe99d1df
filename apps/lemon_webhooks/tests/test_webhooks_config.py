"""``[webhooks]`` and ``[[webhooks.endpoints]]``: an array of tables checked entry by entry,
with hints; the deprecated ``[gateway]`` spellings still read, reported with the new ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_core.config import ConfigDeprecation, ConfigError, LoadedConfig, load_config
from lemon_gateway import GatewayConfig
from lemon_webhooks import WebhookEndpointConfig, WebhooksConfig

NEW = (
    "[webhooks]\nenabled = true\nidempotency_ttl_s = 3600\n"
    '[[webhooks.endpoints]]\nid = "ci"\nsecret_env = "CI_SECRET"\nqueue_mode = "followup"\n'
    '[webhooks.endpoints.tool_policy]\ndeny = ["bash"]\n'
    '[[webhooks.endpoints]]\nid = "deploy"\nsecret_env = "DEPLOY_SECRET"\n'
)
OLD = (
    "[gateway]\ningress_enabled = true\nidempotency_ttl_s = 3600\n"
    '[[gateway.webhooks]]\nid = "ci"\nsecret_env = "CI_SECRET"\nqueue_mode = "followup"\n'
    '[gateway.webhooks.tool_policy]\ndeny = ["bash"]\n'
    '[[gateway.webhooks]]\nid = "deploy"\nsecret_env = "DEPLOY_SECRET"\n'
)


def _load(tmp_path: Path, text: str) -> LoadedConfig:
    (tmp_path / "config.toml").write_text(text, encoding="utf-8")
    return load_config(home=tmp_path, cwd=tmp_path, environ={})


@pytest.mark.parametrize("text", [NEW, OLD], ids=["webhooks", "deprecated-gateway"])
def test_webhooks_load_as_typed_records(tmp_path: Path, text: str) -> None:
    webhooks = _load(tmp_path, text).section(WebhooksConfig)
    assert webhooks.enabled is True
    assert webhooks.idempotency_ttl_s == 3600
    assert [w.id for w in webhooks.endpoints] == ["ci", "deploy"]
    first: WebhookEndpointConfig = webhooks.endpoints[0]
    assert first.tool_policy is not None
    assert (first.queue_mode, first.tool_policy.deny) == ("followup", ("bash",))


def test_the_new_spelling_has_no_deprecation(tmp_path: Path) -> None:
    assert _load(tmp_path, NEW).deprecations == ()


def test_each_deprecated_key_is_reported_with_its_new_spelling(tmp_path: Path) -> None:
    loaded = _load(
        tmp_path,
        OLD.replace(
            "idempotency_ttl_s = 3600\n",
            "idempotency_ttl_s = 3600\nwebhook_max_body_bytes = 10\n"
            "webhook_submit_timeout_s = 2\nmax_concurrent_runs = 3\n",
        ),
    )
    source = str(tmp_path / "config.toml")
    assert loaded.deprecations == (
        ConfigDeprecation(
            source=source, key="gateway.ingress_enabled", replacement="webhooks.enabled"
        ),
        ConfigDeprecation(source=source, key="gateway.webhooks", replacement="webhooks.endpoints"),
        ConfigDeprecation(
            source=source,
            key="gateway.idempotency_ttl_s",
            replacement="webhooks.idempotency_ttl_s",
        ),
        ConfigDeprecation(
            source=source,
            key="gateway.webhook_max_body_bytes",
            replacement="webhooks.max_body_bytes",
        ),
        ConfigDeprecation(
            source=source,
            key="gateway.webhook_submit_timeout_s",
            replacement="webhooks.submit_timeout_s",
        ),
    )
    assert loaded.deprecations[0].render() == (
        f"{source}: gateway.ingress_enabled: deprecated, still read; use webhooks.enabled"
    )
    config = loaded.config
    assert (
        config.section(WebhooksConfig).max_body_bytes,
        config.section(WebhooksConfig).submit_timeout_s,
    ) == (10, 2.0)
    assert config.section(GatewayConfig).max_concurrent_runs == 3  # the gateway keeps its own keys


def test_a_project_layer_overrides_a_deprecated_home_key(tmp_path: Path) -> None:
    project = tmp_path / "work" / ".lemon"
    project.mkdir(parents=True)
    (project / "config.toml").write_text("[webhooks]\nenabled = false\n", encoding="utf-8")
    (tmp_path / "config.toml").write_text("[gateway]\ningress_enabled = true\n")
    loaded = load_config(home=tmp_path, cwd=tmp_path / "work", environ={})
    assert loaded.section(WebhooksConfig).enabled is False
    assert [d.key for d in loaded.deprecations] == ["gateway.ingress_enabled"]


def test_both_spellings_in_one_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, "[gateway]\ningress_enabled = true\n[webhooks]\nenabled = false\n")
    [issue] = caught.value.issues
    assert (issue.key, issue.message) == (
        "gateway.ingress_enabled",
        "deprecated, and webhooks.enabled is set too",
    )


@pytest.mark.parametrize(
    ("table", "prefix"),
    [("webhooks.endpoints", "webhooks.endpoints"), ("gateway.webhooks", "gateway.webhooks")],
)
def test_every_bad_webhook_entry_is_named_with_its_index(
    tmp_path: Path, table: str, prefix: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(
            tmp_path,
            f'[[{table}]]\nid = "Bad Id"\nsecret_env = "OK"\n'
            f'[[{table}]]\nid = "ok"\nsecret = "whsec_inline"\n',
        )
    rendered = str(caught.value)
    assert f"{prefix}[0].id" in rendered  # the key as the file spells it
    assert "1-64 characters of a-z" in rendered
    assert f"{prefix}[1].secret: unknown key" in rendered
    assert f"{prefix}[1].secret_env: missing required key" in rendered


def test_an_unknown_gateway_key_lists_only_the_gateway_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, "[gateway]\nwebhook_typo = 1\n")
    [issue] = caught.value.issues
    assert issue.key == "gateway.webhook_typo"
    assert "ingress_enabled" not in issue.hint
    assert "max_concurrent_runs" in issue.hint
