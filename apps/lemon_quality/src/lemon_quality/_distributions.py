"""Which distributions provide an import name: deterministic from the workspace alone.

Sources, in order (the first that knows the name wins, and the finding says which it was):

1. ``policy``: ``[apps.<app>.import_names]``, then ``[third_party.import_names]`` in the policy
   (an import name may map to several distributions: ``opentelemetry = ["opentelemetry-api",
   "opentelemetry-sdk"]``).
2. ``workspace environment``: the top-level names of every distribution installed in the
   workspace's own environment (``<root>/.venv``: ``top_level.txt``, else ``RECORD``), many to
   many. Never the Python that runs the gate, so two machines give the same answer for the same
   tree and environment.
3. ``built-in table``: a short fixed table of well-known import names that differ from their
   distribution (``yaml`` -> ``PyYAML``, ``PIL`` -> ``Pillow``, ``bs4`` -> ``beautifulsoup4``...),
   for trees without an environment.
4. ``name``: the normalised import name itself (``typing_extensions`` -> ``typing-extensions``).

When the root has a ``uv.lock``, only environment distributions the lock lists count (a package
installed by hand into ``.venv`` maps nothing), so the answer follows the lock; a distribution
in the lock without an environment entry is still matched by its name.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from lemon_quality.policy import Policy, canonical

# Import name -> distributions, for the most common mismatches (used only when neither the policy
# nor the workspace environment knows the name).
KNOWN: dict[str, tuple[str, ...]] = {
    "attr": ("attrs",),
    "bs4": ("beautifulsoup4",),
    "cv2": ("opencv-python", "opencv-python-headless", "opencv-contrib-python"),
    "dateutil": ("python-dateutil",),
    "docx": ("python-docx",),
    "dotenv": ("python-dotenv",),
    "git": ("gitpython",),
    "google": ("protobuf", "googleapis-common-protos", "google-api-core"),
    "jose": ("python-jose",),
    "jwt": ("pyjwt",),
    "magic": ("python-magic",),
    "multipart": ("python-multipart",),
    "OpenSSL": ("pyopenssl",),
    "PIL": ("pillow",),
    "pkg_resources": ("setuptools",),
    "serial": ("pyserial",),
    "sklearn": ("scikit-learn",),
    "yaml": ("pyyaml",),
    "zmq": ("pyzmq",),
}


def _site_packages(root: Path) -> list[Path]:
    venv = root / ".venv"
    found = sorted(venv.glob("lib/python*/site-packages")) + sorted(venv.glob("Lib/site-packages"))
    return [p for p in found if p.is_dir()]


def _dist_tops(info: Path) -> set[str]:
    top = info / "top_level.txt"
    names: set[str] = set()
    try:
        if top.is_file():
            names.update(n.strip() for n in top.read_text("utf-8").splitlines() if n.strip())
            return {n.replace("/", ".").partition(".")[0] for n in names}
        record = (info / "RECORD").read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return names
    for line in record.splitlines():
        path = line.split(",", 1)[0]
        first = path.split("/", 1)[0]
        if (
            not first
            or first.startswith(".")
            or first.endswith((".dist-info", ".data", ".pth"))
            or first == "__pycache__"
        ):
            continue
        if "/" not in path:
            if not first.endswith(".py"):
                continue
            first = first[:-3]
        if first.isidentifier():
            names.add(first)
    return names


def _locked(root: Path) -> frozenset[str] | None:
    """Canonical names of the packages in ``<root>/uv.lock``; None without a readable lock."""
    try:
        raw = tomllib.loads((root / "uv.lock").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    packages = raw.get("package", [])
    if not isinstance(packages, list):
        return None
    return frozenset(
        canonical(p["name"])
        for p in packages
        if isinstance(p, dict) and isinstance(p.get("name"), str)
    )


class DistributionMap:
    """Import name -> distributions, with where the mapping came from."""

    def __init__(self, root: Path, policy: Policy) -> None:
        self._root = root
        self._policy = policy
        self._env: Mapping[str, frozenset[str]] | None = None

    def environment(self) -> Mapping[str, frozenset[str]]:
        """Top-level import name -> distributions installed in ``<root>/.venv`` (lazy)."""
        if self._env is None:
            env: dict[str, set[str]] = defaultdict(set)
            locked = _locked(self._root)
            for sp in _site_packages(self._root):
                try:
                    entries = sorted(os.scandir(sp), key=lambda e: e.name)
                except OSError:
                    continue
                for e in entries:
                    if not e.name.endswith(".dist-info"):
                        continue
                    dist = canonical(re.split(r"-\d", e.name[: -len(".dist-info")], maxsplit=1)[0])
                    if locked is not None and dist not in locked:
                        continue
                    for top in _dist_tops(Path(e.path)):
                        env[top].add(dist)
            self._env = {k: frozenset(v) for k, v in env.items()}
        return self._env

    def providers(self, app: str, top: str) -> tuple[frozenset[str], str]:
        """The distributions that may provide ``top`` for ``app``, and the source's name."""
        pol = self._policy.apps.get(app)
        if pol is not None and top in pol.import_names:
            return frozenset(pol.import_names[top]), f"[apps.{app}.import_names]"
        if top in self._policy.import_names:
            return frozenset(self._policy.import_names[top]), "[third_party.import_names]"
        env = self.environment().get(top)
        if env:
            return env | {canonical(top)}, "the workspace environment (.venv, as locked)"
        if top in KNOWN:
            return frozenset(canonical(d) for d in KNOWN[top]), "the built-in table of known names"
        return frozenset({canonical(top)}), "its own name"
