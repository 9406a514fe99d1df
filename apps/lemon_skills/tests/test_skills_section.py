"""``[skills]``: the section lemon_skills owns; ``LEMON_SKILLS_*`` override it per process."""

from __future__ import annotations

from pathlib import Path

from lemon_core.config import load_config
from lemon_skills import DEFAULT_REGISTRY_URL, SkillsSection, SkillsSettings
from lemon_skills._boot import lemon_skills_app


def test_the_section_is_read_and_the_environment_overrides_it(tmp_path: Path) -> None:
    assert lemon_skills_app.config_sections() == {"skills": SkillsSection}
    assert lemon_skills_app.profiles == frozenset()  # it boots nothing
    (tmp_path / "config.toml").write_text(
        '[skills]\nregistry_url = "https://mirror.example"\nwell_known = ["https://a/{name}"]\n'
    )
    section = load_config(home=tmp_path, cwd=tmp_path, environ={}).section(SkillsSection)
    settings = SkillsSettings.from_config(section, home=tmp_path, environ={})
    assert (settings.registry_url, settings.well_known) == (
        "https://mirror.example",
        ("https://a/{name}",),
    )
    env = {"LEMON_SKILLS_REGISTRY_URL": "https://env.example"}
    assert SkillsSettings.from_config(section, home=tmp_path, environ=env).registry_url == (
        "https://env.example"
    )
    assert SkillsSettings.from_env(tmp_path, environ={}).registry_url == DEFAULT_REGISTRY_URL
