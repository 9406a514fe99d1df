"""``[mcp]`` through the real loader: valid servers load, mistakes are clear issues."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_core.config import ConfigError, load_config
from lemon_mcp import McpConfig, definition_hash


def _load(tmp_path: Path, home_text: str, project_text: str | None = None) -> McpConfig:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    (home / "config.toml").write_text(home_text, encoding="utf-8")
    if project_text is not None:
        (work / ".lemon").mkdir(exist_ok=True)
        (work / ".lemon" / "config.toml").write_text(project_text, encoding="utf-8")
    loaded = load_config(environ={}, cwd=work, home=home)
    return loaded.config.section(McpConfig)


def _issues(tmp_path: Path, home_text: str, project_text: str | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, home_text, project_text)
    return str(info.value)


def test_a_stdio_and_an_http_server_load_with_their_defaults(tmp_path: Path) -> None:
    section = _load(
        tmp_path,
        """
[mcp.servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env_from = { TOKEN = "GH_TOKEN" }
tools.allow = ["read_*"]
tools.deny = ["read_secret*"]

[mcp.servers.fs.tools.read_text_file]
approval = "allow"

[mcp.servers.web]
url = "https://example.com/mcp"
bearer_token_env = "WEB_TOKEN"
""",
    )
    fs, web = section.servers["fs"], section.servers["web"]
    assert fs.transport == "stdio"
    assert web.transport == "http"
    assert fs.startup_timeout_s == 30
    assert fs.call_timeout_s == 300
    assert fs.approval == "ask"
    assert fs.offers("read_text_file")
    assert not fs.offers("read_secret_x")
    assert not fs.offers("write_file")
    assert fs.approval_of("read_text_file") == "allow"
    assert fs.approval_of("read_x") == "ask"
    assert set(section.secret_env_names()) == {"GH_TOKEN", "WEB_TOKEN", None}


def test_a_server_with_both_command_and_url_is_refused_with_how_to_fix(tmp_path: Path) -> None:
    text = _issues(tmp_path, '[mcp.servers.x]\ncommand = "a"\nurl = "http://h/mcp"\n')
    assert "exactly one of `command`" in text


def test_a_server_with_neither_is_refused(tmp_path: Path) -> None:
    assert "exactly one of `command`" in _issues(tmp_path, "[mcp.servers.x]\nenabled = true\n")


def test_a_bad_server_name_an_unknown_key_and_a_bad_url_are_issues(tmp_path: Path) -> None:
    assert "invalid server name" in _issues(tmp_path, '[mcp.servers."a b"]\ncommand = "x"\n')
    assert "colour" in _issues(tmp_path, '[mcp.servers.a]\ncommand = "x"\ncolour = 1\n')
    assert "http:// or https://" in _issues(tmp_path, '[mcp.servers.a]\nurl = "ftp://x"\n')


def test_a_secret_cannot_be_given_as_a_header_value_only_a_variable_name(tmp_path: Path) -> None:
    text = _issues(
        tmp_path, '[mcp.servers.a]\nurl = "https://h/mcp"\nheaders_env = {X-Key = "sk-12 34"}\n'
    )
    assert "is not a variable name" in text


def test_a_project_file_cannot_widen_approval(tmp_path: Path) -> None:
    text = _issues(tmp_path, "", '[mcp.servers.p]\ncommand = "x"\napproval = "allow"\n')
    assert 'cannot set approval = "allow"' in text
    text = _issues(
        tmp_path,
        "",
        '[mcp.servers.p]\ncommand = "x"\n[mcp.servers.p.tools.t]\napproval = "allow"\n',
    )
    assert "mcp.servers.p.tools.t.approval" in text


def test_a_project_file_may_narrow_approval_and_the_home_may_allow(tmp_path: Path) -> None:
    section = _load(
        tmp_path,
        '[mcp.servers.h]\ncommand = "x"\napproval = "allow"\n',
        '[mcp.servers.h]\napproval = "deny"\n',
    )
    assert section.servers["h"].approval == "deny"


def test_the_definition_hash_changes_with_the_definition(tmp_path: Path) -> None:
    a = _load(tmp_path, '[mcp.servers.a]\ncommand = "x"\n').servers["a"]
    b = _load(tmp_path, '[mcp.servers.a]\ncommand = "x"\nargs = ["--evil"]\n').servers["a"]
    assert definition_hash(a) == definition_hash(a) != definition_hash(b)


def test_oauth_and_transport_keys_load_and_mistakes_are_clear(tmp_path: Path) -> None:
    section = _load(
        tmp_path,
        '[mcp.servers.web]\nurl = "https://example.com/mcp"\nauth = "oauth"\n'
        'http_transport = "sse"\n[mcp.servers.web.oauth]\nscopes = ["mcp"]\nredirect_port = 8765\n',
    )
    web = section.servers["web"]
    assert (web.auth, web.http_transport, web.oauth.scopes) == ("oauth", "sse", ("mcp",))
    said = _issues(
        tmp_path,
        '[mcp.servers.a]\ncommand = "x"\nauth = "oauth"\n'
        '[mcp.servers.b]\nurl = "https://b.example"\nauth = "oauth"\nbearer_token_env = "T"\n'
        '[mcp.servers.c]\nurl = "https://c.example"\nauth = "oauth"\n'
        '[mcp.servers.c.oauth]\ngrant = "client_credentials"\n'
        '[mcp.servers.d]\nurl = "https://d.example"\n[mcp.servers.d.oauth]\nclient_id = "x"\n',
    )
    assert "`auth` and `http_transport` are for HTTP servers only" in said
    assert 'either `auth = "oauth"` or `bearer_token_env`' in said
    assert "needs `client_id` and `client_secret_env`" in said
    assert '`[...oauth]` is read only with `auth = "oauth"`' in said


def test_the_new_keys_at_their_defaults_do_not_change_the_definition_hash() -> None:
    """Approvals recorded before ``http_transport`` / ``auth`` / ``oauth`` existed still hold."""
    import hashlib

    import msgspec

    from lemon_mcp import McpServerConfig

    server = McpServerConfig(command="npx", args=("-y", "pkg"))
    old = {k: v for k, v in msgspec.to_builtins(server).items()
           if k not in ("http_transport", "auth", "oauth")}  # fmt: skip
    expected = hashlib.sha256(msgspec.json.encode(old, order="sorted")).hexdigest()
    assert definition_hash(server) == expected
    assert definition_hash(McpServerConfig(url="https://x.example", auth="oauth")) != (
        definition_hash(McpServerConfig(url="https://x.example"))
    )
