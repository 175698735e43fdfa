"""The `Mailboxes` contract: the in-memory, SQLite and Redis mailboxes pass these same cases.

The `mailboxes` fixture is parametrized by implementation; the durable ones also keep waiting
work across a close and reopen (`test_durable_mailboxes_keep_work_across_a_restart`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.mailboxes import SqliteMailboxes
from core.envelopes import Address, Inbound
from core.mailbox import Mailboxes
from tests.backends.memory_mailboxes import MemoryMailboxes


@pytest.fixture(params=["memory", "sqlite", "redis", "redis-cluster", "redis-sentinel"])
async def mailboxes(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Mailboxes]:
    """Empty mailboxes of each implementation, closed after the test."""
    if request.param == "memory":
        yield MemoryMailboxes()
    elif request.param == "sqlite":
        sqlite = await SqliteMailboxes.open(tmp_path / "switchboard.db")
        yield sqlite
        await sqlite.aclose()
    elif request.param == "redis":
        server = request.getfixturevalue("redis_server")
        # A namespace of its own, so the session's shared server needs no flush.
        redis = RedisMailboxes.from_url(server.url, keys=RedisKeys(f"t{uuid.uuid4().hex[:12]}"))
        yield redis
        await redis.aclose()
    elif request.param in ("redis-cluster", "redis-sentinel"):
        # A 3-node Redis Cluster, or the session's server as the master a Sentinel names.
        where = request.getfixturevalue(request.param.replace("-", "_"))
        keys = RedisKeys(f"t{uuid.uuid4().hex[:12]}")
        elsewhere = RedisMailboxes.from_url(where.url, keys=keys)
        yield elsewhere
        await elsewhere.aclose()
    else:
        raise AssertionError(f"no mailboxes named {request.param!r}")


def _inbound(chat: str, text: str) -> Inbound:
    return Inbound(address=Address(platform="telegram", chat=chat), user_id="u1", text=text)


async def test_a_claim_drains_its_session_in_arrival_order(mailboxes: Mailboxes) -> None:
    first, second, other = _inbound("1", "a"), _inbound("1", "b"), _inbound("2", "c")
    for item in (first, second, other):
        await mailboxes.put(item)
    assert await mailboxes.pending() == sorted([first.session_key, other.session_key])
    claim = await mailboxes.claim(first.session_key, owner="w1")
    assert claim is not None
    seen = []
    while (head := await claim.head()) is not None:
        seen.append(head.text)
        await claim.done(head)
    assert seen == ["a", "b"]
    assert await claim.release() is False
    assert await mailboxes.pending() == [other.session_key]


async def test_a_held_session_cannot_be_claimed_again(mailboxes: Mailboxes) -> None:
    item = _inbound("1", "a")
    await mailboxes.put(item)
    claim = await mailboxes.claim(item.session_key, owner="w1")
    assert claim is not None
    assert await mailboxes.claim(item.session_key, owner="w2") is None
    assert await claim.release() is True  # the item is still waiting
    again = await mailboxes.claim(item.session_key, owner="w2")
    assert again is not None
    assert again.fence.epoch > claim.fence.epoch
    await again.release()


async def test_a_held_sessions_mailbox_is_not_listed_as_pending(mailboxes: Mailboxes) -> None:
    held, free = _inbound("1", "a"), _inbound("2", "b")
    await mailboxes.put(held)
    claim = await mailboxes.claim(held.session_key, owner="w1")
    assert claim is not None
    await mailboxes.put(free)
    # Its holder reads it again before letting go: the sweep has nothing to do there.
    assert await mailboxes.pending() == [free.session_key]
    assert await claim.release() is True  # the item is still waiting, and nobody holds it
    assert await mailboxes.pending() == sorted([held.session_key, free.session_key])


async def test_work_put_into_a_held_session_waits_for_its_holder(mailboxes: Mailboxes) -> None:
    older, first, second = _inbound("1", "a"), _inbound("1", "b"), _inbound("1", "c")
    await mailboxes.put(older)
    await mailboxes.put(first)
    claim = await mailboxes.claim(first.session_key, owner="w1")
    assert claim is not None
    head = await claim.head()
    assert head is not None and head.id == older.id
    # Held: the second only goes in (its wake's worker is refused the claim), and waits for
    # the holder.
    await mailboxes.put(second)
    assert await mailboxes.claim(second.session_key, owner="w2") is None
    seen = []
    while (head := await claim.head()) is not None:
        seen.append(head.text)
        await claim.done(head)
    assert seen == ["a", "b", "c"]
    await claim.release()
    assert await mailboxes.pending() == []
    await mailboxes.put(_inbound("1", "d"))
    again = await mailboxes.claim(first.session_key, owner="w2")
    assert again is not None and again.fence.epoch > claim.fence.epoch
    await again.release()


async def test_each_put_wakes_one_worker_for_its_session_in_order(mailboxes: Mailboxes) -> None:
    first, second, other = _inbound("1", "a"), _inbound("1", "b"), _inbound("2", "c")
    for item in (first, second, other):
        await mailboxes.put(item)
    woken = [await mailboxes.woken(1.0) for _ in range(3)]
    assert woken == [first.session_key, first.session_key, other.session_key]
    assert await mailboxes.woken(0.05) is None  # each wake was taken once


async def test_an_envelope_put_twice_waits_once(mailboxes: Mailboxes) -> None:
    item = _inbound("1", "a")
    await mailboxes.put(item)
    await mailboxes.put(item)  # a producer's retry after a put whose answer was lost
    assert await mailboxes.waiting() == 1
    claim = await mailboxes.claim(item.session_key, owner="w1")
    assert claim is not None
    await claim.done(item)
    assert await claim.head() is None
    await claim.release()


async def test_waiting_counts_the_work_of_held_and_free_sessions(mailboxes: Mailboxes) -> None:
    assert await mailboxes.waiting() == 0
    first, second, other = _inbound("1", "a"), _inbound("1", "b"), _inbound("2", "c")
    for item in (first, second, other):
        await mailboxes.put(item)
    claim = await mailboxes.claim(first.session_key, owner="w1")
    assert claim is not None
    assert await mailboxes.waiting() == 3
    await claim.done(first)
    assert await mailboxes.waiting() == 2
    await claim.release()


async def test_head_stays_until_done(mailboxes: Mailboxes) -> None:
    item = _inbound("1", "a")
    await mailboxes.put(item)
    claim = await mailboxes.claim(item.session_key, owner="w1")
    assert claim is not None
    head = await claim.head()
    assert head is not None and head.id == item.id
    again = await claim.head()
    assert again is not None and again.id == item.id
    await claim.done(item)
    assert await claim.head() is None
    await claim.release()


async def test_durable_mailboxes_keep_work_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    boxes = await SqliteMailboxes.open(path)
    first, second = _inbound("1", "a"), _inbound("1", "b")
    await boxes.put(first)
    await boxes.put(second)
    claim = await boxes.claim(first.session_key, owner="w1")
    assert claim is not None
    head = await claim.head()
    assert head is not None
    await claim.done(head)
    # The process dies holding the claim: nothing is released.
    await boxes.aclose()
    reopened = await SqliteMailboxes.open(path)
    try:
        assert await reopened.pending() == [second.session_key]
        taken = await reopened.claim(second.session_key, owner="w2")
        assert taken is not None
        left = await taken.head()
        assert left is not None and left.id == second.id
    finally:
        await reopened.aclose()


async def test_putting_an_item_already_waiting_keeps_it_once(tmp_path: Path) -> None:
    boxes = await SqliteMailboxes.open(tmp_path / "switchboard.db")
    try:
        item = _inbound("1", "a")
        await boxes.put(item)
        await boxes.put(item)  # a crashed turn resumed while its item still waits
        claim = await boxes.claim(item.session_key, owner="w1")
        assert claim is not None
        await claim.done(item)
        assert await claim.head() is None
    finally:
        await boxes.aclose()


def _command(chat: str, word: str) -> Inbound:
    return Inbound(
        address=Address(platform="telegram", chat=chat),
        user_id="u1",
        kind="command",
        command=word,
        text=f"/{word}",
    )


async def test_behind_lists_the_plain_messages_right_behind_the_head(
    mailboxes: Mailboxes,
) -> None:
    head, b, c, stop, d = (
        _inbound("1", "a"),
        _inbound("1", "b"),
        _inbound("1", "c"),
        _command("1", "stop"),
        _inbound("1", "d"),
    )
    for item in (head, b, c, stop, d):
        await mailboxes.put(item)
    claim = await mailboxes.claim(head.session_key, owner="w1")
    assert claim is not None
    first = await claim.head()
    assert first is not None and first.id == head.id
    # Up to the command: what is behind it keeps its place behind it.
    assert [m.text for m in await claim.behind()] == ["b", "c"]
    assert [m.text for m in await claim.behind(limit=1)] == ["b"]
    assert await mailboxes.waiting() == 5  # nothing taken out by looking
    # A joined message is taken out with `done`; the head stays the head.
    await claim.done(c)
    assert [m.text for m in await claim.behind()] == ["b"]
    again = await claim.head()
    assert again is not None and again.id == head.id
    await claim.done(b)
    assert await claim.behind() == []
    seen = []
    while (waiting := await claim.head()) is not None:
        seen.append(waiting.text)
        await claim.done(waiting)
    assert seen == ["a", "/stop", "d"]
    await claim.release()


async def test_behind_stops_at_an_answer_and_is_empty_with_the_head_alone(
    mailboxes: Mailboxes,
) -> None:
    head = _inbound("1", "run it")
    await mailboxes.put(head)
    claim = await mailboxes.claim(head.session_key, owner="w1")
    assert claim is not None
    assert await claim.head() is not None
    assert await claim.behind() == []
    # A typed yes may answer a question the turn asks: never joined.
    for item in (_inbound("1", "yes"), _inbound("1", "and this")):
        await mailboxes.put(item)
    assert await claim.behind() == []
    await claim.release()


async def test_behind_takes_what_accept_takes(mailboxes: Mailboxes) -> None:
    """An `ask_user` answer may be a typed yes: `accept` widens the look, a command still
    ends it (core/turns/steering.py `Steering.answer`)."""
    head = _inbound("1", "run it")
    for item in (head, _inbound("1", "yes"), _inbound("1", "blue"), _command("1", "new")):
        await mailboxes.put(item)
    claim = await mailboxes.claim(head.session_key, owner="w1")
    assert claim is not None
    assert await claim.head() is not None

    def typed(inbound: Inbound) -> bool:
        return inbound.kind == "message"

    assert [m.text for m in await claim.behind(accept=typed)] == ["yes", "blue"]
    assert await claim.behind() == []
    await claim.release()
