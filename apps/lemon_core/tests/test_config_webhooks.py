"""``[[gateway.webhooks]]``: an array of tables checked entry by entry, with hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_core.config import ConfigError, LoadedConfig, WebhookConfig, load_config


def _load(tmp_path: Path, text: str) -> LoadedConfig:
    (tmp_path / "config.toml").write_text(text, encoding="utf-8")
    return load_config(home=tmp_path, cwd=tmp_path, environ={})


def test_webhooks_load_as_typed_records(tmp_path: Path) -> None:
    loaded = _load(
        tmp_path,
        "[gateway]\ningress_enabled = true\nidempotency_ttl_s = 3600\n"
        '[[gateway.webhooks]]\nid = "ci"\nsecret_env = "CI_SECRET"\nqueue_mode = "followup"\n'
        '[gateway.webhooks.tool_policy]\ndeny = ["bash"]\n'
        '[[gateway.webhooks]]\nid = "deploy"\nsecret_env = "DEPLOY_SECRET"\n',
    )
    gateway = loaded.config.gateway
    assert gateway.idempotency_ttl_s == 3600
    assert [w.id for w in gateway.webhooks] == ["ci", "deploy"]
    first: WebhookConfig = gateway.webhooks[0]
    assert first.tool_policy is not None
    assert (first.queue_mode, first.tool_policy.deny) == ("followup", ("bash",))


def test_every_bad_webhook_entry_is_named_with_its_index(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(
            tmp_path,
            '[[gateway.webhooks]]\nid = "Bad Id"\nsecret_env = "OK"\n'
            '[[gateway.webhooks]]\nid = "ok"\nsecret = "whsec_inline"\n',
        )
    rendered = str(caught.value)
    assert "gateway.webhooks[0].id" in rendered
    assert "1-64 characters of a-z" in rendered
    assert "gateway.webhooks[1].secret: unknown key" in rendered
    assert "gateway.webhooks[1].secret_env: missing required key" in rendered
