"""Fixtures: skill directories, git repositories served over file://, and a real HTTP index
server on 127.0.0.1 (ephemeral port) for the registry and well-known documents."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lemon_skills import SkillManager, SkillsSettings

SkillFiles = Mapping[str, str | bytes]


def skill_md(name: str, description: str = "A skill for tests.", body: str = "Do it.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def write_tree(root: Path, files: SkillFiles) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def skill_text() -> Callable[..., str]:
    """``skill_text(name, description=..., body=...)``: the text of a SKILL.md."""
    return skill_md


@pytest.fixture
def make_skill(tmp_path: Path) -> Callable[..., Path]:
    """``make_skill(name, files=None, body=...)``: a skill directory under tmp_path/src."""

    def make(name: str, files: SkillFiles | None = None, body: str = "Do it well.\n",
             description: str = "A skill for tests.") -> Path:  # fmt: skip
        root = tmp_path / "src" / name
        root.mkdir(parents=True)
        write_tree(root, {"SKILL.md": skill_md(name, description, body), **(files or {})})
        return root

    return make


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
         "-c", "init.defaultBranch=main", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


@pytest.fixture
def git_repo(tmp_path: Path) -> Callable[..., tuple[str, str]]:
    """``git_repo(name, files)``: a committed repository; returns its file:// URL and the
    commit. Calling it again with the same name commits the new files on top."""

    def make(name: str, files: SkillFiles) -> tuple[str, str]:
        root = tmp_path / "repos" / name
        if not root.exists():
            root.mkdir(parents=True)
            _git(root, "init", "-q")
        write_tree(root, files)
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "skill")
        return root.as_uri(), _git(root, "rev-parse", "HEAD").strip()

    return make


class IndexServer:
    """Serves ``documents`` (path -> JSON value) on 127.0.0.1, and ``raw`` (path -> bytes, as
    they are, not necessarily JSON); other paths are 404."""

    def __init__(self) -> None:
        self.documents: dict[str, object] = {}
        self.raw: dict[str, bytes] = {}
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append(self.path)
                raw = server.raw.get(self.path)
                if raw is not None:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                    return
                doc = server.documents.get(self.path)
                body = json.dumps(doc).encode() if doc is not None else b"{}"
                self.send_response(200 if doc is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> IndexServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def index_server() -> Iterator[IndexServer]:
    with IndexServer() as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path, index_server: IndexServer) -> SkillsSettings:
    home = tmp_path / "home"
    home.mkdir()
    return SkillsSettings(
        home=home,
        registry_url=index_server.url,
        hermes_url=(tmp_path / "repos" / "hermes").as_uri(),
        github_url=(tmp_path / "repos" / "gh").as_uri(),
        well_known=(f"{index_server.url}/.well-known/skills/{{name}}.json",
                    f"{index_server.url}/mirror/{{name}}.json"),
        git_timeout_s=60,
        http_timeout_s=10,
    )  # fmt: skip


@pytest.fixture
def manager(settings: SkillsSettings, tmp_path: Path) -> SkillManager:
    return SkillManager(settings, cwd=tmp_path)
