"""`[memory]` of a profile, wired by `bots/app.py`: consolidation before compaction unless
`consolidate = false`, the quiet-period pass in the worker only with `consolidate_after`."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bots.app import embedded
from bots.profiles import load_profile
from bots.settings import load_settings
from tests.profile_env import profile_env


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
    profile_env(
        monkeypatch,
        tmp_path,
        table,
        SWITCHBOARD_PROVIDER="demo",
    )
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)

    async with embedded(settings, profile) as parts:
        consolidator = parts.runtime.consolidator
        quiet = parts.worker.quiet

    assert (consolidator is not None) is consolidates
    assert (None if quiet is None else quiet.after) == quiet_after
