"""`Takeovers` over a real SQLite store: durations, the handback's note (or none when quiet),
the operator's words kept only while the chat is taken over, and the page's reading of a
session key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from channels.web.takeover import chat_of_session_key
from core.backends.sql.store import SqlStore
from core.envelopes import Address
from core.messages import Message
from core.takeover import Takeovers, parse_takeover_duration

KEY = "slack:T1:C42:1700000000.1"
CHAT = Address(platform="slack", chat="C42", thread="1700000000.1")


async def _conversation(store: SqlStore) -> None:
    await store.keep_message(KEY, "s1", Message.user("hi", source="k1"), finished="k1")


def test_durations_are_read_like_the_schedules_and_nonsense_is_refused() -> None:
    assert parse_takeover_duration("90m") == timedelta(minutes=90)
    assert parse_takeover_duration("1h30m") == timedelta(minutes=90)
    for bad in ("soon", "", "0m", "-1h"):
        with pytest.raises(ValueError, match=r"duration|zero|negative"):
            parse_takeover_duration(bad)


async def test_the_operators_words_are_kept_only_while_taken_over(store: SqlStore) -> None:
    await _conversation(store)
    takeovers = Takeovers(store)
    assert await takeovers.operator_said(CHAT, "too early") is None
    await takeovers.take_over(CHAT, by="cli")
    kept = await takeovers.operator_said(CHAT, "Ann from support.", ident="n1")
    again = await takeovers.operator_said(CHAT, "Ann from support.", ident="n1")
    assert kept is not None and again is not None and kept.seq == again.seq == 2
    assert [(m.speaker, m.text) for m in await store.list_messages("s1")] == [
        (None, "hi"),
        ("operator", "Ann from support."),
    ]


async def test_a_quiet_handback_leaves_no_note_a_loud_one_does(store: SqlStore) -> None:
    await _conversation(store)
    takeovers = Takeovers(store)
    await takeovers.take_over(CHAT, by="cli")
    assert await takeovers.hand_back(CHAT, quiet=True) is not None
    assert len(await store.list_messages("s1")) == 1
    assert await takeovers.hand_back(CHAT) is None  # nothing runs: nothing to note

    await takeovers.take_over(CHAT, by="cli")
    await takeovers.hand_back(CHAT)
    note = (await store.list_messages("s1"))[-1]
    assert (note.role, note.speaker) == ("assistant", "switchboard")
    assert "a person from the team answered in this chat" in note.text


def test_the_page_reads_a_chat_from_a_session_key_and_none_from_others() -> None:
    assert chat_of_session_key(KEY) == Address(
        platform="slack", bot="T1", chat="C42", thread="1700000000.1"
    )
    assert str(chat_of_session_key("telegram:777:42")) == "telegram:42"
    for other in ("scheduled:abc", "notify:cli", "notify:a:b", "telegram::42"):
        assert chat_of_session_key(other) is None
