"""`RedisStore` against the suite's real redis-server: what the shared contract cannot show.

Several `RedisStore` objects on one server stand in for several processes of a deployment.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from core.envelopes import Address
from core.errors import StoreError, StoreUnavailable
from core.facts import MemoryFact
from core.messages import Message, Usage
from core.redis_keys import RedisKeys
from core.scheduling.models import IntervalCadence, Schedule, ScheduleRun
from core.store import CostEntry, RedisStore, Store
from core.store.redis import DEFAULT_PROCESSED_TTL
from core.store.sql import SqlStore, sqlite_url
from tests.redis_server import RedisServer

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
# The stores here name no bot: the default namespace.
KEYS = RedisKeys()

OpenStore = Callable[..., Awaitable[RedisStore]]


@pytest.fixture
async def open_store(redis_url: str) -> AsyncIterator[OpenStore]:
    """Opens `RedisStore`s on the (emptied) test server; each is closed after the test."""
    opened: list[RedisStore] = []

    async def open_one(*, processed_ttl: timedelta = DEFAULT_PROCESSED_TTL) -> RedisStore:
        opened.append(await RedisStore.open(redis_url, processed_ttl=processed_ttl))
        return opened[-1]

    yield open_one
    for store in opened:
        await store.close()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client on the test server, to look at what the store wrote."""
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


def _cost(session_id: str, cost_usd: float | None) -> CostEntry:
    return CostEntry(
        session_id=session_id,
        run_id="run-1",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(input_tokens=10, output_tokens=5),
        cost_usd=cost_usd,
        at=START,
    )


async def test_data_survives_closing_and_reopening(open_store: OpenStore) -> None:
    first = await open_store()
    session = await first.current_session("telegram:42")
    await first.append_message(session.id, Message.user("hello"))
    await first.append_message(session.id, Message.assistant("hi"))
    await first.mark_processed("telegram:update:1")
    await first.record_cost(_cost(session.id, 0.25))
    await first.record_cost(_cost(session.id, None))
    await first.close()

    second = await open_store()

    assert (await second.current_session("telegram:42")).id == session.id
    found = await second.get_session(session.id)
    assert found is not None and found.message_count == 2
    assert [m.text for m in await second.list_messages(session.id)] == ["hello", "hi"]
    assert await second.is_processed("telegram:update:1") is True
    summary = await second.cost_summary(session.id)
    assert (summary.calls, summary.unpriced_calls) == (2, 1)
    assert summary.cost_usd == pytest.approx(0.25)
    assert [s.session_id for s in await second.costs_by_session()] == [session.id]
    assert (await second.append_message(session.id, Message.user("again"))).seq == 3


async def test_two_stores_appending_concurrently_get_unique_contiguous_seqs(
    open_store: OpenStore,
) -> None:
    first, second = await open_store(), await open_store()
    session = await first.current_session("terminal")

    stored = await asyncio.gather(
        *(
            (first if i % 2 else second).append_message(session.id, Message.user(f"m{i}"))
            for i in range(50)
        )
    )

    assert sorted(m.seq for m in stored) == list(range(1, 51))
    listed = await second.list_messages(session.id)
    assert [m.seq for m in listed] == list(range(1, 51))
    assert {m.seq: m.text for m in listed} == {m.seq: m.text for m in stored}
    found = await first.get_session(session.id)
    assert found is not None and found.message_count == 50


async def test_current_session_race_over_two_stores_makes_one_session(
    open_store: OpenStore,
) -> None:
    first, second = await open_store(), await open_store()

    found = await asyncio.gather(
        *((first if i % 2 else second).current_session("web:1") for i in range(20))
    )

    assert len({s.id for s in found}) == 1
    assert [s.id for s in await first.list_sessions()] == [found[0].id]


async def test_processed_markers_expire_after_the_ttl(
    open_store: OpenStore, raw: aioredis.Redis
) -> None:
    hourly = await open_store(processed_ttl=timedelta(hours=1))
    default = await open_store()

    assert await hourly.mark_processed("slack:evt:1") is True
    assert await default.mark_processed("slack:evt:2") is True

    hour_ms = 3_600_000
    assert hour_ms - 60_000 < await raw.pttl(KEYS.processed("slack:evt:1")) <= hour_ms
    thirty_days_ms = 30 * 24 * hour_ms
    ttl = await raw.pttl(KEYS.processed("slack:evt:2"))
    assert thirty_days_ms - 60_000 < ttl <= thirty_days_ms


async def test_a_non_positive_ttl_is_refused(raw: aioredis.Redis) -> None:
    with pytest.raises(ValueError, match="processed_ttl"):
        RedisStore(raw, processed_ttl=timedelta(0))


async def test_server_down_is_a_store_error(
    open_store: OpenStore, redis_server: RedisServer
) -> None:
    store = await open_store()
    session = await store.current_session("terminal")
    down_url = redis_server.url.replace("redis://", "redis://someone:s3cret-pass@")

    await asyncio.to_thread(redis_server.stop)
    try:
        with pytest.raises(StoreError, match="append a message") as appending:
            await store.append_message(session.id, Message.user("lost"))
        with pytest.raises(StoreError, match="cannot reach the Redis store") as opening:
            await RedisStore.open(down_url)
    finally:
        await asyncio.to_thread(redis_server.start)

    assert "s3cret-pass" not in str(opening.value)
    assert f"127.0.0.1:{redis_server.port}" in str(opening.value)
    assert not isinstance(appending.value, aioredis.RedisError)
    # An outage, for a turn to wait out, not a fault of the write.
    assert isinstance(appending.value, StoreUnavailable)
    # The same store object works again once the server is back (empty: it kept no data).
    fresh = await store.create_session("terminal")
    assert (await store.append_message(fresh.id, Message.user("back"))).seq == 1


async def test_a_restarted_server_is_reconnected_to_on_the_first_call(
    open_store: OpenStore, redis_server: RedisServer
) -> None:
    """Pooled connections go stale when Redis restarts; the client retries on a fresh one."""
    store = await open_store()
    await store.current_session("terminal")

    await asyncio.to_thread(redis_server.restart)

    fresh = await store.current_session("terminal")  # the restart lost the old one
    assert (await store.append_message(fresh.id, Message.user("back"))).seq == 1


class ReplyDropper:
    """A TCP proxy to Redis that, once armed, swallows the next reply and hangs up instead.

    The command has run on the server, but the client sees a dropped connection and sends it
    again on a new one: exactly the replay the store's writes must survive.
    """

    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._armed = False
        self._let_through = 0
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Hang up every connection and wait for their handlers to finish."""
        assert self._server is not None
        self._server.close()
        # Closing the sockets ends the handlers' reads (cancelling them instead would make
        # asyncio log the cancellation as an unhandled error).
        for writer in self._writers:
            writer.close()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    def arm(self, *, after: int = 0) -> None:
        """Drop the next reply that comes back from Redis, and that connection with it.

        With `after`, let that many replies through first (the reads before a write's script).
        """
        self._armed = True
        self._let_through = after

    async def _relay(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self._target_port)
        self._writers.update((client_out, server_out))
        requests = asyncio.create_task(self._copy(client_in, server_out))
        try:
            while data := await server_in.read(65536):
                if self._armed and self._let_through == 0:
                    self._armed = False
                    break
                if self._armed:
                    self._let_through -= 1
                client_out.write(data)
                await client_out.drain()
        except ConnectionError:
            pass  # the client hung up first
        finally:
            for writer in (client_out, server_out):
                writer.close()
                self._writers.discard(writer)
            await asyncio.gather(requests, return_exceptions=True)
            self._handlers.discard(handler)

    @staticmethod
    async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()


@pytest.fixture
async def dropper(redis_server: RedisServer, redis_url: str) -> AsyncIterator[ReplyDropper]:
    """A `ReplyDropper` in front of the (emptied) test server."""
    proxy = ReplyDropper(redis_server.port)
    await proxy.start()
    yield proxy
    await proxy.stop()


@pytest.fixture
async def proxied(dropper: ReplyDropper) -> AsyncIterator[RedisStore]:
    """A `RedisStore` that talks to the test server through `dropper`."""
    store = await RedisStore.open(f"redis://127.0.0.1:{dropper.port}/0")
    yield store
    await store.close()


async def test_a_replayed_append_stores_the_message_once(
    proxied: RedisStore, dropper: ReplyDropper
) -> None:
    session = await proxied.current_session("terminal")
    # Loads the script, so the dropped reply is the script's own and not a NOSCRIPT.
    await proxied.append_message(session.id, Message.user("warm-up"))

    dropper.arm()
    stored = await proxied.append_message(session.id, Message.user("once"))

    assert stored.seq == 2
    assert [m.text for m in await proxied.list_messages(session.id)] == ["warm-up", "once"]


async def test_a_replayed_cost_is_charged_once(proxied: RedisStore, dropper: ReplyDropper) -> None:
    session = await proxied.current_session("terminal")
    await proxied.record_cost(_cost(session.id, 1.0))

    dropper.arm()
    await proxied.record_cost(_cost(session.id, 0.5))

    summary = await proxied.cost_summary(session.id)
    assert summary.calls == 2 and summary.cost_usd == pytest.approx(1.5)
    assert (await proxied.cost_summary()).calls == 2


async def test_a_write_tried_again_with_its_receipt_is_made_once(open_store: OpenStore) -> None:
    """A caller that tries a write again after an error (its first try may have landed, its
    answer lost to a Redis restart) gives the same receipt: the store makes it once."""
    store = await open_store()
    session = await store.current_session("terminal")

    first = await store.append_message(session.id, Message.user("once"), receipt="r-1")
    again = await store.append_message(session.id, Message.user("once"), receipt="r-1")
    await store.record_cost(_cost(session.id, 0.5), receipt="c-1")
    await store.record_cost(_cost(session.id, 0.5), receipt="c-1")

    assert first.seq == again.seq == 1
    assert [m.text for m in await store.list_messages(session.id)] == ["once"]
    assert (await store.cost_summary(session.id)).calls == 1


async def test_a_replayed_create_session_makes_one_session(
    proxied: RedisStore, dropper: ReplyDropper
) -> None:
    old = await proxied.current_session("terminal")

    dropper.arm()
    fresh = await proxied.create_session("terminal")

    assert [s.id for s in await proxied.list_sessions()] == [fresh.id, old.id]


async def test_a_replayed_mark_processed_still_reports_the_first_time(
    proxied: RedisStore, dropper: ReplyDropper
) -> None:
    dropper.arm()
    assert await proxied.mark_processed("telegram:update:1") is True

    assert await proxied.mark_processed("telegram:update:1") is False


async def test_refused_credentials_are_a_store_error_without_them(
    redis_server: RedisServer, redis_url: str
) -> None:
    with pytest.raises(StoreError) as refused:
        await RedisStore.open(redis_url.replace("redis://", "redis://someone:s3cret-pass@"))

    assert "s3cret-pass" not in str(refused.value)


async def test_a_closed_store_refuses_calls(open_store: OpenStore) -> None:
    store = await open_store()
    await store.close()

    with pytest.raises(StoreError, match="closed"):
        await store.current_session("terminal")
    await store.close()


async def test_negative_after_seq_lists_everything(open_store: OpenStore) -> None:
    store = await open_store()
    session = await store.current_session("terminal")
    for i in range(3):
        await store.append_message(session.id, Message.user(f"m{i}"))

    listed = await store.list_messages(session.id, after_seq=-2, limit=2)

    assert [m.seq for m in listed] == [1, 2]


@pytest.mark.parametrize("implementation", ["sqlite", "redis"])
async def test_equal_times_order_like_sqlite(
    implementation: str, redis_url: str, tmp_path: Path
) -> None:
    """With a stopped clock, "newest" and "most recently updated" fall back to creation order."""
    store: Store
    if implementation == "redis":
        store = await RedisStore.open(redis_url, clock=lambda: START)
    else:
        store = await SqlStore.open(sqlite_url(tmp_path / "db"), clock=lambda: START)
    try:
        a, b, c = [await store.create_session(key) for key in ("a", "b", "c")]
        await store.append_message(a.id, Message.user("same time as ever"))
        again = await store.create_session("b")

        assert [s.id for s in await store.list_sessions()] == [again.id, c.id, b.id, a.id]
        assert (await store.current_session("b")).id == again.id
    finally:
        await store.close()


def _schedule(schedule_id: str = "sched-1", *, owner: str = "telegram:7") -> Schedule:
    return Schedule(
        id=schedule_id,
        cadence=IntervalCadence(seconds=60, start=START),
        prompt="Ping",
        deliver_to=Address(platform="telegram", chat="42"),
        owner=owner,
        next_run_at=START,
        created_at=START,
        updated_at=START,
    )


def _schedule_run(run_id: str, minute: int) -> ScheduleRun:
    at = START + timedelta(minutes=minute)
    return ScheduleRun(id=run_id, schedule_id="sched-1", due_at=at, started_at=at)


async def test_a_deleted_schedule_leaves_no_key_behind(
    open_store: OpenStore, raw: aioredis.Redis
) -> None:
    store = await open_store()
    await store.save_schedule(_schedule("kept"))
    await store.save_schedule(_schedule())
    await store.save_run(_schedule_run("run-1", 0))

    assert await store.delete_schedule("sched-1") is True

    assert await raw.keys("*sched-1*") == []
    assert await raw.smembers(KEYS.schedules()) == {b"kept"}
    assert await raw.smembers(KEYS.schedules_by_owner("telegram:7")) == {b"kept"}
    assert len(await raw.zrange(KEYS.due_schedules(), 0, -1)) == 1


async def test_a_replayed_delete_still_reports_the_deletion(
    proxied: RedisStore, dropper: ReplyDropper
) -> None:
    await proxied.save_schedule(_schedule("warm-up"))
    await proxied.delete_schedule("warm-up")  # loads the script
    await proxied.save_schedule(_schedule())

    dropper.arm(after=1)  # the reply to the script, not to its read of the owner
    assert await proxied.delete_schedule("sched-1") is True

    assert await proxied.get_schedule("sched-1") is None


async def test_a_replayed_prune_still_reports_its_count(
    proxied: RedisStore, dropper: ReplyDropper
) -> None:
    await proxied.save_schedule(_schedule())
    for minute in range(5):
        await proxied.save_run(_schedule_run(f"run-{minute}", minute))
    assert await proxied.prune_runs("sched-1", keep=4) == 1  # loads the script

    dropper.arm()
    assert await proxied.prune_runs("sched-1", keep=2) == 2

    assert [r.id for r in await proxied.list_runs("sched-1")] == ["run-4", "run-3"]


async def test_a_schedule_saved_while_its_owner_changes_lands_in_the_right_sets(
    open_store: OpenStore, raw: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process changed the owner between our read of it and our script: we retry."""
    store = await open_store()
    await store.save_schedule(_schedule(owner="telegram:7"))
    other = await open_store()
    read_owner = store._stored_owner

    async def owner_then_change(key: str) -> str | None:
        found = await read_owner(key)
        if found == "telegram:7":
            await other.save_schedule(_schedule(owner="telegram:8"))
        return found

    monkeypatch.setattr(store, "_stored_owner", owner_then_change)
    await store.save_schedule(_schedule(owner="telegram:9"))

    assert await raw.smembers(KEYS.schedules_by_owner("telegram:7")) == set()
    assert await raw.smembers(KEYS.schedules_by_owner("telegram:8")) == set()
    assert await raw.smembers(KEYS.schedules_by_owner("telegram:9")) == {b"sched-1"}
    assert [s.owner for s in await store.list_schedules()] == ["telegram:9"]


def _fact(fact_id: str, text: str, *, scope: str = "default:telegram:1") -> MemoryFact:
    return MemoryFact(id=fact_id, scope=scope, text=text, created_at=START)


async def test_a_forgotten_fact_leaves_no_index_behind(
    open_store: OpenStore, raw: aioredis.Redis
) -> None:
    store = await open_store()
    scope = "default:telegram:1"
    await store.remember_fact(_fact("kept", "Plays the cello"))
    await store.remember_fact(_fact("gone", "Plays chess on Sundays"))

    assert await store.forget_fact(scope, "gone") is True

    assert await raw.hkeys(KEYS.facts(scope)) == [b"kept"]
    assert await raw.hkeys(KEYS.fact_terms(scope)) == [b"kept"]
    assert await raw.zrange(KEYS.fact_order(scope), 0, -1) == [b"kept"]
    assert await raw.zrange(KEYS.fact_vocabulary(scope), 0, -1) == [b"cello", b"plays"]
    assert sorted(await raw.keys(KEYS.fact_term(scope, "*"))) == [
        KEYS.fact_term(scope, "cello").encode(),
        KEYS.fact_term(scope, "plays").encode(),
    ]
    assert await store.forget_fact(scope, "kept") is True
    assert await raw.keys("*memory*") == []


async def test_a_replayed_forget_still_reports_it(
    proxied: RedisStore, dropper: ReplyDropper
) -> None:
    scope = "default:telegram:1"
    await proxied.remember_fact(_fact("warm-up", "Warm up"))
    await proxied.forget_fact(scope, "warm-up")  # loads the script
    await proxied.remember_fact(_fact("f1", "Likes jazz"))

    dropper.arm(after=1)  # the reply to the script, not to its read of the terms
    assert await proxied.forget_fact(scope, "f1") is True

    assert await proxied.list_facts(scope) == []


async def test_a_replayed_remember_stores_the_fact_once(
    proxied: RedisStore, dropper: ReplyDropper
) -> None:
    scope = "default:telegram:1"
    await proxied.remember_fact(_fact("warm-up", "Warm up"))  # loads the script

    dropper.arm()
    await proxied.remember_fact(_fact("f1", "Likes jazz"))

    assert [f.id for f in await proxied.search_facts(scope, "jazz")] == ["f1"]
    assert [f.id for f in await proxied.list_facts(scope)] == ["warm-up", "f1"]
