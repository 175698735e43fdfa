"""`/reload`'s answers (`core/reload.py`) and which processes `switchboard reload` signals."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bots.commands.reload import reloads
from core.heartbeat import ProcessInfo
from core.reload import ReloadResult, describe

NOW = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)


def test_a_reload_says_what_it_applied_and_what_waits_for_a_restart() -> None:
    result = ReloadResult(ok=True, applied=["SOUL.md"], restart_needed=["max_steps", "mcp"])
    assert describe(result) == (
        "Profile reloaded: SOUL.md (from the next turn on). "
        "Changed but applied only by a restart: max_steps, mcp."
    )
    assert describe(ReloadResult(ok=True)) == "Profile reloaded: nothing changed."


def test_a_refused_reload_says_the_running_profile_stays_and_why() -> None:
    result = ReloadResult(ok=False, error="profiles/bot/profile.toml: max_stepz: Extra inputs")
    assert describe(result) == (
        "The profile was not reloaded; the running one stays. "
        "profiles/bot/profile.toml: max_stepz: Extra inputs"
    )


@pytest.mark.parametrize(
    ("role", "distributed", "expected"),
    [
        ("serve", False, True),
        ("worker", True, True),
        ("web", False, True),
        ("web", True, False),  # the distributed page has no runtime: SIGHUP would end it
        ("gateway telegram", True, False),
        ("scheduler", True, False),
    ],
)
def test_only_processes_with_a_runtime_are_signalled(
    role: str, distributed: bool, expected: bool
) -> None:
    process = ProcessInfo(
        id="p", role=role, host="h", pid=1, version="1", started_at=NOW, seen_at=NOW
    )
    assert reloads(process, distributed=distributed) is expected
