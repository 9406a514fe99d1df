"""Issue 23's rule that keeps the house: lemon_core declares no app's config section.

Every ``[section]`` an installed app owns is declared by that app (its ``AppSpec.config`` /
``sections``), never in lemon_core; the sections lemon_core itself declares are exactly the
shared base ones every runtime reads (defaults, providers, profiles, runtime, store, bus,
logging). A new app that put its section into core fails here.
"""

from __future__ import annotations

import inspect

import lemon_core.config as core_config
from lemon_core.config import Config, Section, installed_sections
from lemon_runtime import discover_apps

#: The base sections of lemon_core's schema: shared by the runtime composition, the backends
#: and the agent; adding one is a deliberate change of this list.
BASE_SECTIONS = {"bus", "defaults", "logging", "profiles", "providers", "runtime", "store"}


def _core_section_classes() -> set[type]:
    found: set[type] = set()
    for module in (core_config, *_submodules()):
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Section) and obj.__module__.startswith("lemon_core"):
                found.add(obj)
    return found


def _submodules() -> list[object]:
    import importlib
    import pkgutil

    return [
        importlib.import_module(f"lemon_core.config.{m.name}")
        for m in pkgutil.iter_modules(core_config.__path__)
    ]


def test_every_installed_app_section_is_declared_by_its_app() -> None:
    apps = discover_apps()
    owned = {
        name: (app.name, cls)
        for app in apps.values()
        for name, cls in app.config_sections().items()
    }
    assert owned, "no installed app declares a section: the test would prove nothing"
    for section, (app, cls) in sorted(owned.items()):
        package = cls.__module__.split(".")[0]
        assert package == app, (
            f"[{section}] of {app} is declared in {cls.__module__}: an app's section lives in "
            "the app"
        )
    # The lemon.config entry points (what the loader reads) name the same sections, the same
    # types, as the AppSpecs (what the runtime reads).
    assert installed_sections() == {name: cls for name, (_, cls) in owned.items()}


def test_lemon_core_declares_only_the_base_sections() -> None:
    assert {n for n in Config.__struct_fields__ if n != "sections"} == BASE_SECTIONS
    app_types = {cls for app in discover_apps().values() for cls in app.config_sections().values()}
    assert not (_core_section_classes() & app_types)
    assert not (set(installed_sections()) & BASE_SECTIONS)


def test_loading_the_config_imports_no_apps_runtime_code(tmp_path: object) -> None:
    # `lemon config validate`, `lemon chat` as a client and every command reading the config
    # assemble the schema from the lemon.config entry points: the apps' section modules only,
    # never their executors, gateways or servers (which cost a command half a second).
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from lemon_core.config import load_config\n"
        "load_config(environ={})\n"
        "heavy = ['coding_agent.executor', 'lemon_gateway._gateway', 'lemon_router._router',\n"
        "         'lemon_control_plane.server', 'lemon_channels._boot', 'lemon_skills.catalog',\n"
        "         'lemon_runtime', 'lemon_infra']\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"LEMON_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        cwd=str(tmp_path),
    )
    assert out.stdout.strip() == "", f"loading the config imported: {out.stdout.strip()}"
