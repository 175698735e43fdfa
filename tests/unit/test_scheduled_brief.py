"""The scheduled-run section of the system prompt."""

from __future__ import annotations

from datetime import UTC, datetime

from core.modes import SAFE_CHAT
from core.prompt import SystemPrompt
from core.scheduling.brief import scheduled_brief

NOW = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def _brief(notify: str) -> str:
    return scheduled_brief(
        schedule_id="abc123",
        owner="slack:U1",
        chat="slack:C0123ABCD",
        notify=notify,  # type: ignore[arg-type]
        cadence="every 1h",
    )


def test_each_policy_says_when_the_answer_is_delivered() -> None:
    assert "begins with [NOTIFY]" in _brief("conditional")
    assert "nothing is delivered" in _brief("conditional")
    assert "[NOTIFY]" not in _brief("always")
    assert "delivered to that chat" in _brief("always")
    assert "nothing is delivered" in _brief("never")
    for policy in ("always", "conditional", "never"):
        text = _brief(policy)
        assert "task abc123 (every 1h)" in text
        assert "the user slack:U1" in text
        assert "slack:C0123ABCD" in text


def test_the_section_is_in_the_prompt_only_for_a_scheduled_run() -> None:
    prompt = SystemPrompt()
    plain = prompt.build(mode=SAFE_CHAT, platform_hint="", session_id="s", now=NOW)
    scheduled = prompt.build(
        mode=SAFE_CHAT, platform_hint="", session_id="s", now=NOW, scheduled=_brief("never")
    )
    assert "## Scheduled run" not in plain
    assert f"## Scheduled run\n{_brief('never')}\n\nToday is" in scheduled
    # The same schedule gives the same bytes run after run (provider caches hit).
    again = prompt.build(
        mode=SAFE_CHAT, platform_hint="", session_id="s", now=NOW, scheduled=_brief("never")
    )
    assert again == scheduled
