"""`[playbook]` and `[attention]` of a profile, wired by `bots/app.py`: both on by default (the
playbook kept under the profile's name), each off with `enabled = false`, and a bad value is a
`ConfigError` naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots.app import embedded
from bots.profiles import load_profile
from bots.settings import Settings, load_settings
from core.errors import ConfigError
from tests.profile_env import profile_env


def _settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str) -> Settings:
    monkeypatch.chdir(tmp_path)
    profile_env(
        monkeypatch,
        tmp_path,
        table,
        SWITCHBOARD_PROVIDER="demo",
    )
    return load_settings()


@pytest.mark.parametrize(
    ("table", "keeps_a_playbook", "attends"),
    [
        ("", True, True),
        ("[playbook]\nenabled = false\n", False, True),
        ("[attention]\nenabled = false\n", True, False),
    ],
)
async def test_the_tables_decide_what_the_runtime_gets(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    table: str,
    keeps_a_playbook: bool,
    attends: bool,
) -> None:
    settings = _settings(tmp_path, monkeypatch, table)
    profile = load_profile(settings.profiles_dir, settings.profile)

    async with embedded(settings, profile) as parts:
        playbook = parts.runtime.playbook
        attention = parts.runtime.attention

    assert (playbook is not None) is keeps_a_playbook
    assert playbook is None or playbook.bot == "bot"
    assert (attention is not None) is attends


def test_a_bad_value_names_its_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tmp_path, monkeypatch, "[playbook]\nhints = 0\n")

    with pytest.raises(ConfigError, match="hints"):
        load_profile(settings.profiles_dir, settings.profile)
