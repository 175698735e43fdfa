"""A Redis Cluster the suite starts: what reaches it as one server is told so in one line."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from redis.exceptions import RedisError

from bots.cli import cli
from bots.commands import processes
from bots.limits import open_rate_limits
from bots.settings import Settings
from core.backends.redis.client import connect_redis, is_outage
from core.backends.redis.keys import RedisKeys
from core.envelopes import Address, Inbound
from core.heartbeat import ProcessInfo, RedisHeartbeats
from core.profile import ProfileSettings
from core.ratelimit import RateLimitSettings
from tests.redis_server import RedisClusterServers


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[CliRunner]:
    """The CLI in this process, without the machine's Switchboard settings; the logging
    set-up it makes undone afterwards."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith(("SWITCHBOARD_", "REDIS_"))
    }
    env["SWITCHBOARD_DATA_DIR"] = str(tmp_path / "data")
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield CliRunner(env=env)
    root.handlers[:], level = saved
    root.setLevel(level)


def test_health_on_a_cluster_node_named_as_one_server_says_so_in_one_line(
    runner: CliRunner, redis_cluster: RedisClusterServers
) -> None:
    node = redis_cluster.nodes[0]

    shown = runner.invoke(cli, ["health"], env={"REDIS_URL": f"redis://127.0.0.1:{node.port}/0"})

    assert shown.exit_code == 1, shown.output
    lines = shown.stderr.splitlines()
    assert len(lines) == 1, shown.stderr
    assert lines[0].startswith("not ok: "), lines
    assert "Redis is a cluster node and key slot" in lines[0], lines
    assert "set REDIS_URL to redis+cluster://" in lines[0], lines


async def test_heartbeats_beat_on_the_cluster(redis_cluster: RedisClusterServers) -> None:
    board = RedisHeartbeats.from_url(redis_cluster.url, RedisKeys(f"t{uuid.uuid4().hex[:12]}"))
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    info = ProcessInfo(
        id="worker-1",
        role="worker",
        host="here",
        pid=42,
        version="1",
        started_at=now,
        seen_at=now,
    )
    try:
        await board.beat(info)
        assert await board.processes(now) == [info]
    finally:
        await board.aclose()


async def test_the_rate_limits_count_on_the_cluster(
    redis_cluster: RedisClusterServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_cluster.url)
    monkeypatch.setenv("SWITCHBOARD_BOT_ID", f"t{uuid.uuid4().hex[:12]}")
    options = ProfileSettings(
        limits=RateLimitSettings(rate_limit="2/minute", chat_rate_limit="", daily_turns=0)
    )
    said = Inbound(address=Address(platform="slack", bot="B1", chat="D7"), user_id="U7", text="hi")
    limits, close = open_rate_limits(Settings(), options)
    try:
        answers = [(await limits.admit(said, is_admin=False))[0] for _ in range(3)]
    finally:
        await close()

    assert answers == [True, True, False]


def test_health_against_a_redis_that_never_answers_says_so_in_one_line(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "_HEALTH_TIMEOUT", 0.5)
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]

        shown = runner.invoke(cli, ["health"], env={"REDIS_URL": f"redis://127.0.0.1:{port}/0"})

    assert shown.exit_code == 1, shown.output
    assert shown.stderr.startswith("not ok: no answer within 0.5 s ("), shown.stderr
    assert shown.stderr.endswith(", redis)\n"), shown.stderr


async def test_a_cluster_with_no_node_up_is_an_outage_and_is_used_again_once_back(
    tmp_path: Path,
) -> None:
    cluster = RedisClusterServers(tmp_path / "cluster")
    cluster.start()
    try:
        client = connect_redis(cluster.url, decode_responses=False)
        try:
            await client.set("k{a}", b"1")
            for node in cluster.nodes:
                node.stop()

            with pytest.raises(RedisError) as plain:
                await client.get("k{a}")
            with pytest.raises(RedisError) as piped:
                async with client.pipeline(transaction=False) as pipe:
                    pipe.get("k{a}")
                    await pipe.execute()

            await asyncio.to_thread(cluster.restart)
            await client.set("k{a}", b"2")
            assert await client.get("k{a}") == b"2"
        finally:
            await client.aclose()
    finally:
        cluster.stop()

    # What the bus, the mailboxes and the worker's loops take for "Redis is away for now".
    assert is_outage(plain.value), repr(plain.value)
    assert is_outage(piped.value), repr(piped.value)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_command_whose_connection_the_cluster_client_closes_under_it_fails_as_an_outage(
    redis_cluster: RedisClusterServers, loop: str
) -> None:
    # On CLUSTERDOWN redis-py's cluster client closes every node's connections (`aclose`),
    # also those other commands are connecting or writing on; those failed with
    # AttributeError ('NoneType' object has no attribute 'writelines'; on uvloop a
    # RuntimeError, "the handler is closed") and stopped a worker. Here `aclose` runs a few
    # loop turns into a burst of commands, as it did there, on both loops the processes use.
    factory = None
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        seen = runner.run(_commands_cut_off_by_a_close(redis_cluster.url))
    assert seen, "no command was cut off by the close (the race was not reached)"
    assert all(isinstance(exc, RedisError) and is_outage(exc) for exc in seen), seen


async def _commands_cut_off_by_a_close(url: str) -> list[BaseException]:
    client = connect_redis(url, decode_responses=False)
    seen: list[BaseException] = []

    async def command(n: int) -> None:
        try:
            if n % 2:
                await client.get(f"k{n}")
            else:
                async with client.pipeline(transaction=False) as pipe:
                    pipe.get(f"k{n}")
                    await pipe.execute()
        except Exception as exc:
            seen.append(exc)

    async def close_after(turns: int) -> None:
        for _ in range(turns):
            await asyncio.sleep(0)
        await client.aclose()

    try:
        for turns in range(200):
            await asyncio.gather(*(command(n) for n in range(30)), close_after(turns % 8))
            if seen:
                break
    finally:
        await client.aclose()
    return seen
