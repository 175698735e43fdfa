"""System prompt assembly: fixed section order, empty sections left out, byte-stable per day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from core.modes import DISCORD, FULL, NO_TOOLS, SAFE_CHAT, CapabilityMode
from core.prompt import DEFAULT_IDENTITY, SystemPrompt
from core.skills import Skill

MORNING = datetime(2026, 3, 5, 0, 0, 1, tzinfo=UTC)
EVENING = datetime(2026, 3, 5, 23, 59, 59, 999_999, tzinfo=UTC)

SKILLS = (
    Skill(name="translate", description="Translations that keep the tone.", body="T."),
    Skill(name="summarize", description="Summaries done well.", body="S."),
)

FULL_PROMPT = SystemPrompt(
    identity="I am Soul.",
    memory="The office moved to Lyon.",
    user="Ana prefers short answers.",
    skills=SKILLS,
)


def build(
    prompt: SystemPrompt,
    *,
    mode: CapabilityMode = SAFE_CHAT,
    platform_hint: str = "Telegram rules.",
    now: datetime = MORNING,
) -> str:
    return prompt.build(mode=mode, platform_hint=platform_hint, session_id="sess-1", now=now)


def test_sections_come_in_the_fixed_order() -> None:
    text = build(FULL_PROMPT)
    assert text == (
        "I am Soul.\n\n"
        f"## Capabilities\n{SAFE_CHAT.prompt_rules}\n\n"
        "## Formatting\nTelegram rules.\n\n"
        "## Memory\nThe office moved to Lyon.\n\n"
        "## About the user\nAna prefers short answers.\n\n"
        "## Skills\n"
        "Instructions for particular tasks. When a request matches a skill, read its "
        "instructions with the read_skill tool before you answer.\n"
        "- summarize — Summaries done well.\n"
        "- translate — Translations that keep the tone.\n\n"
        "Today is Thursday 05 March 2026 (UTC). Session: sess-1."
    )


def test_empty_sections_are_left_out() -> None:
    text = build(SystemPrompt(memory="  \n", user=""), platform_hint=" ")
    assert text == (
        f"{DEFAULT_IDENTITY}\n\n"
        f"## Capabilities\n{SAFE_CHAT.prompt_rules}\n\n"
        "Today is Thursday 05 March 2026 (UTC). Session: sess-1."
    )
    for title in ("## Formatting", "## Memory", "## About the user", "## Skills"):
        assert title not in text


def test_system_replaces_the_identity() -> None:
    text = build(SystemPrompt(identity="I am Soul.", system="You are a SQL bot."))
    assert text.startswith("You are a SQL bot.\n\n## Capabilities")
    assert "I am Soul." not in text


def test_a_blank_identity_falls_back_to_the_default() -> None:
    assert build(SystemPrompt(identity=" ", system=" ")).startswith(DEFAULT_IDENTITY + "\n\n")


@pytest.mark.parametrize("mode", [FULL, SAFE_CHAT, DISCORD])
def test_skills_are_indexed_where_read_skill_is_offered(mode: CapabilityMode) -> None:
    assert "## Skills\n" in build(FULL_PROMPT, mode=mode)


def test_skills_are_not_indexed_where_no_tool_can_read_them() -> None:
    text = build(FULL_PROMPT, mode=NO_TOOLS)
    assert "## Skills" not in text
    assert "## About the user\nAna prefers short answers.\n\nToday is" in text


def test_byte_stable_across_a_day() -> None:
    first = build(FULL_PROMPT, now=MORNING)
    second = build(FULL_PROMPT, now=EVENING)
    assert first.encode() == second.encode()


def test_the_skills_index_does_not_depend_on_the_order_given() -> None:
    reversed_prompt = FULL_PROMPT.model_copy(update={"skills": SKILLS[::-1]})
    assert build(reversed_prompt) == build(FULL_PROMPT)


def test_a_new_day_changes_only_the_footer() -> None:
    today = build(FULL_PROMPT, now=EVENING)
    tomorrow = build(FULL_PROMPT, now=EVENING + timedelta(microseconds=1))
    head, _, today_footer = today.rpartition("\n\n")
    next_head, _, tomorrow_footer = tomorrow.rpartition("\n\n")
    assert head == next_head
    assert today_footer == "Today is Thursday 05 March 2026 (UTC). Session: sess-1."
    assert tomorrow_footer == "Today is Friday 06 March 2026 (UTC). Session: sess-1."


def test_the_date_is_the_utc_date_whatever_the_clock_zone() -> None:
    tokyo = timezone(timedelta(hours=9))
    late_utc_as_tokyo = EVENING.astimezone(tokyo)  # already 6 March in Tokyo
    assert build(FULL_PROMPT, now=late_utc_as_tokyo) == build(FULL_PROMPT, now=EVENING)


def test_a_naive_clock_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        build(FULL_PROMPT, now=datetime(2026, 3, 5, 12))  # noqa: DTZ001
