"""The takeover records contract (`TakeoverRecords`): chats taken over, ended by a handback or
by expiry once, and the conversation writes made meanwhile.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import timedelta

from core.envelopes import Address
from core.messages import Message
from core.store import Store
from core.store.takeovers import Takeover
from core.takeover import operator_message
from tests.contract.store_support import START, OpenStore, TickingClock

CHAT = "telegram:42"
KEY = "telegram:777:42"  # the bot's own key is in the session key, not in the chat


def _takeover(hours: int = 4, chat: str = CHAT, by: str = "cli") -> Takeover:
    return Takeover(chat=chat, by=by, since=START, until=START + timedelta(hours=hours))


async def test_a_takeover_runs_until_it_is_handed_back(store: Store) -> None:
    assert await store.takeover_of(CHAT) is None
    kept = await store.take_over(_takeover())
    assert kept.active(START + timedelta(hours=1))
    assert await store.running_takeovers(START + timedelta(hours=1)) == [kept]
    standing = await store.turn_standing("telegram:42:1", KEY, chat=CHAT)
    assert standing.takeover == kept

    ended = await store.hand_back(CHAT, START + timedelta(hours=1))
    assert ended is not None and ended.ended_at == START + timedelta(hours=1)
    assert await store.hand_back(CHAT, START + timedelta(hours=2)) is None
    assert await store.running_takeovers(START + timedelta(hours=1, minutes=1)) == []
    assert (await store.turn_standing("telegram:42:1", KEY, chat=CHAT)).takeover is None
    found = await store.takeover_of(CHAT)
    assert found is not None and found.ended_at == START + timedelta(hours=1)


async def test_taking_over_again_extends_and_keeps_since(store: Store) -> None:
    await store.take_over(_takeover(hours=1))
    later = Takeover(
        chat=CHAT, by="web", since=START + timedelta(minutes=30), until=START + timedelta(hours=5)
    )
    kept = await store.take_over(later)
    assert kept.since == START
    assert kept.until == START + timedelta(hours=5)
    assert kept.by == "web"


async def test_expiry_ends_each_takeover_once(store: Store) -> None:
    await store.take_over(_takeover(hours=1))
    await store.take_over(_takeover(hours=3, chat="slack:C1"))
    assert await store.end_expired(START + timedelta(minutes=59)) == []

    ended = await store.end_expired(START + timedelta(hours=2))
    assert [(found.chat, found.ended_at) for found in ended] == [(CHAT, START + timedelta(hours=1))]
    assert await store.end_expired(START + timedelta(hours=2)) == []
    assert [found.chat for found in await store.running_takeovers(START)] == ["slack:C1"]


async def test_a_kept_message_is_stored_and_marked_processed_once(store: Store) -> None:
    message = Message.user("hello?", source="telegram:42:1")
    stored = await store.keep_message(KEY, "s-new", message, finished="telegram:42:1")
    again = await store.keep_message(KEY, "s-other", message, finished="telegram:42:1")
    assert stored.seq == 1 and again.seq == 0
    assert await store.is_processed("telegram:42:1")
    session = await store.current_session(KEY)
    assert session is not None and session.id == "s-new"
    assert [m.text for m in await store.list_messages("s-new")] == ["hello?"]


async def test_the_operators_words_go_to_the_chats_session_whatever_its_bots_key(
    store: Store,
) -> None:
    await store.keep_message(KEY, "s1", Message.user("hi", source="a"), finished="a")
    # A chat of another number that merely ends alike, and another platform's same chat.
    await store.keep_message("telegram:777:142", "s2", Message.user("x", source="b"), finished="b")
    await store.keep_message("slack:777:42", "s3", Message.user("y", source="c"), finished="c")
    said = operator_message("A person here.", ident="operator:n1")
    address = Address(platform="telegram", chat="42")
    kept = await store.keep_operator_message(address, said, session_id="unused")
    await store.keep_operator_message(address, said, session_id="unused")  # tried again
    assert kept is not None and kept.seq == 2
    stored = await store.list_messages("s1")
    assert [(m.role, m.speaker, m.text) for m in stored] == [
        ("user", None, "hi"),
        ("assistant", "operator", "A person here."),
    ]
    assert [m.text for m in await store.list_messages("s2")] == ["x"]


async def test_the_operators_words_make_a_session_only_when_asked_to(store: Store) -> None:
    address = Address(platform="discord", chat="C9")
    note = operator_message("(a note)")
    assert await store.keep_operator_message(address, note, session_id=None) is None
    assert await store.list_sessions() == []
    said = operator_message("Hello from the team.")
    kept = await store.keep_operator_message(address, said, session_id="made")
    assert kept is not None and kept.seq == 1
    session = await store.get_session("made")
    assert session is not None and session.key == address.session_key


async def test_takeovers_survive_a_restart(open_store: OpenStore) -> None:
    first = await open_store(TickingClock())
    await first.take_over(_takeover())
    await first.close()
    again = await open_store(TickingClock())
    assert [found.chat for found in await again.running_takeovers(START)] == [CHAT]
