"""The heartbeat boards (Redis and SQLite) and the beating loop of a process."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.backends.redis.keys import RedisKeys
from core.heartbeat import (
    FORGET_AFTER,
    MISSING_AFTER,
    Beating,
    HeartbeatBoard,
    ProcessInfo,
    RedisHeartbeats,
    SqliteHeartbeats,
)

NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


def info(role: str, pid: int, seen: datetime = NOW, detail: str = "") -> ProcessInfo:
    return ProcessInfo(
        id=f"{role}-{pid}",
        role=role,
        host="box",
        pid=pid,
        version="0.1.0",
        started_at=NOW - timedelta(hours=1),
        seen_at=seen,
        detail=detail,
    )


@pytest.fixture(params=["sqlite", "redis"])
async def board(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[HeartbeatBoard]:
    opened: HeartbeatBoard
    if request.param == "redis":
        url = request.getfixturevalue("redis_server").url
        # A namespace of its own: the session's Redis is shared by every test.
        opened = RedisHeartbeats.from_url(url, RedisKeys(f"hb{uuid.uuid4().hex[:12]}"))
    else:
        opened = await SqliteHeartbeats.open(tmp_path / "switchboard.db")
    yield opened
    await opened.aclose()


async def test_beats_are_listed_by_role_and_replaced_by_newer_ones(board: HeartbeatBoard) -> None:
    await board.beat(info("worker", 2))
    await board.beat(info("gateway", 1, detail="telegram"))
    await board.beat(info("worker", 2, seen=NOW + timedelta(seconds=10)))

    found = await board.processes(NOW + timedelta(seconds=10))

    assert [(p.role, p.pid) for p in found] == [("gateway", 1), ("worker", 2)]
    assert found[1].seen_at == NOW + timedelta(seconds=10)
    assert found[0].detail == "telegram"


async def test_a_silent_process_is_missing_then_forgotten(board: HeartbeatBoard) -> None:
    await board.beat(info("scheduler", 3))

    later = NOW + MISSING_AFTER + timedelta(seconds=1)
    (silent,) = await board.processes(later)
    assert silent.missing(later)
    assert not silent.missing(NOW)

    assert await board.processes(NOW + FORGET_AFTER + timedelta(seconds=1)) == []
    assert await board.processes(NOW) == []  # dropped from the board, not just hidden


async def test_a_process_that_leaves_is_gone(board: HeartbeatBoard) -> None:
    await board.beat(info("worker", 4))
    await board.leave("worker-4")
    assert await board.processes(NOW) == []


async def test_beating_writes_until_stopped_and_then_leaves(tmp_path: Path) -> None:
    board = await SqliteHeartbeats.open(tmp_path / "switchboard.db")
    beats: list[datetime] = []
    beat_seen = asyncio.Event()

    def clock() -> datetime:
        beats.append(NOW + timedelta(seconds=len(beats)))
        beat_seen.set()
        return beats[-1]

    beating = Beating(board, info("worker", 5), interval=60.0, clock=clock)
    running = asyncio.create_task(beating.run())
    await beat_seen.wait()
    (listed,) = await board.processes(NOW)
    assert listed.seen_at == beats[0]

    beating.stop()
    await running
    assert await board.processes(NOW) == []
    await board.aclose()
