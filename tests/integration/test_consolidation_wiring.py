"""`[memory]` of a profile, wired by `bots/app.py`: consolidation before compaction unless
`consolidate = false`, the quiet-period pass in the worker only with `consolidate_after`."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from bots.app import embedded
from bots.profiles import load_profile
from bots.settings import load_settings


@pytest.mark.parametrize(
    ("table", "consolidates", "quiet_after"),
    [
        ("", True, None),
        ('[memory]\nconsolidate_after = "30m"\n', True, timedelta(minutes=30)),
        ('[memory]\nconsolidate = false\nconsolidate_after = "30m"\n', False, None),
    ],
)
async def test_the_memory_table_decides_which_passes_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    table: str,
    consolidates: bool,
    quiet_after: timedelta | None,
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "profiles" / "bot"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(table, encoding="utf-8")
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ANTHROPIC_", "SWITCHBOARD_", "REDIS_URL", "DATABASE_URL")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SWITCHBOARD_PROFILES_DIR", str(tmp_path / "profiles"))
    monkeypatch.setenv("SWITCHBOARD_PROFILE", "bot")
    monkeypatch.setenv("SWITCHBOARD_PROVIDER", "demo")
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)

    async with embedded(settings, profile) as parts:
        consolidator = parts.runtime.consolidator
        quiet = parts.worker.quiet

    assert (consolidator is not None) is consolidates
    assert (None if quiet is None else quiet.after) == quiet_after
