"""Heartbeats: each long-running process says, every few seconds, that it is alive.

A `ProcessInfo` (role, host, pid, version, when it started and was last seen) is written to a
`HeartbeatBoard` shared by the deployment's processes: a Redis hash in the distributed
deployment, a table of the SQLite data file in the embedded one. `switchboard status` reads
the board; a process that stopped beating is shown as missing until it ages out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.clock import utc_now
from core.watchdog import PlatformHealth

if TYPE_CHECKING:
    import aiosqlite

    from core.backends.redis.client import AnyRedis
    from core.backends.redis.keys import RedisKeys

__all__ = [
    "BEAT_SECONDS",
    "FORGET_AFTER",
    "MISSING_AFTER",
    "Beating",
    "HeartbeatBoard",
    "ProcessInfo",
    "RedisHeartbeats",
    "SqliteHeartbeats",
    "process_document",
]

log = logging.getLogger(__name__)

BEAT_SECONDS: Final = 10.0
# Three beats missed: the process is shown as missing.
MISSING_AFTER: Final = timedelta(seconds=3 * BEAT_SECONDS)
# A process not seen for this long is dropped from the board.
FORGET_AFTER: Final = timedelta(hours=1)


class ProcessInfo(BaseModel):
    """What a process says about itself in each beat."""

    model_config = ConfigDict(frozen=True)

    id: str
    role: str
    host: str
    pid: int
    version: str
    started_at: datetime
    seen_at: datetime
    # What it serves, where that says more than the role ("telegram", "telegram, slack").
    detail: str = ""
    # The watchdog's view of each platform it serves (`core/watchdog.py`), as of `seen_at`.
    platforms: list[PlatformHealth] = Field(default_factory=list)

    def missing(self, now: datetime) -> bool:
        """Whether it has stopped beating as of `now`."""
        return now - self.seen_at > MISSING_AFTER


def process_document(process: ProcessInfo, now: datetime) -> dict[str, Any]:
    """One process as `switchboard status --json` and the web page's `GET /api/platforms` show
    it: its beat (with the watchdog's view of its platforms) and whether it is missing at `now`."""
    return process.model_dump(mode="json") | {"missing": process.missing(now)}


class HeartbeatBoard(Protocol):
    """Where the deployment's processes write their beats and `status` reads them."""

    async def beat(self, info: ProcessInfo) -> None:
        """Record `info` as the process's latest beat."""
        ...

    async def leave(self, process_id: str) -> None:
        """The process stopped on purpose: take it off the board."""
        ...

    async def processes(self, now: datetime) -> list[ProcessInfo]:
        """Every process seen within `FORGET_AFTER` of `now`, by role then host; older ones are
        dropped from the board."""
        ...

    async def aclose(self) -> None:
        """Release the connection."""
        ...


def _sorted(found: list[ProcessInfo]) -> list[ProcessInfo]:
    return sorted(found, key=lambda p: (p.role, p.detail, p.host, p.pid))


class RedisHeartbeats:
    """Beats as JSON in one Redis hash, by process id."""

    def __init__(self, client: AnyRedis, keys: RedisKeys) -> None:
        self._client = client
        self._key = keys.processes()

    @classmethod
    def from_url(cls, url: str, keys: RedisKeys) -> RedisHeartbeats:
        """A board on its own connection pool to the Redis at `url`."""
        from core.backends.redis.client import connect_redis

        return cls(connect_redis(url), keys)

    async def beat(self, info: ProcessInfo) -> None:
        """HSET the beat; the hash itself expires when no process beats for a while."""
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hset(self._key, info.id, info.model_dump_json())
            pipe.expire(self._key, int(FORGET_AFTER.total_seconds()))
            await pipe.execute()

    async def leave(self, process_id: str) -> None:
        """HDEL the process."""
        await self._client.hdel(self._key, process_id)

    async def processes(self, now: datetime) -> list[ProcessInfo]:
        """Every recent beat; old and unreadable ones are removed."""
        raw = await self._client.hgetall(self._key)
        found, stale = [], []
        for field, value in raw.items():
            try:
                info = ProcessInfo.model_validate_json(value)
            except ValidationError:
                stale.append(field)
                continue
            if now - info.seen_at > FORGET_AFTER:
                stale.append(field)
            else:
                found.append(info)
        if stale:
            await self._client.hdel(self._key, *stale)
        return _sorted(found)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS processes (id TEXT PRIMARY KEY, data TEXT NOT NULL, seen REAL)"
)


class SqliteHeartbeats:
    """Beats as rows of the SQLite data file (the embedded deployment: `serve` beats, a
    `status` from another shell reads)."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path | str) -> SqliteHeartbeats:
        """A board in the SQLite file at `path` (made if missing)."""
        from core.sqlite_file import open_connection

        db = await open_connection(path)
        try:
            await db.execute(_SCHEMA)
        except BaseException:
            await db.close()
            raise
        return cls(db)

    async def beat(self, info: ProcessInfo) -> None:
        """Insert or replace the process's row."""
        await self._db.execute(
            "INSERT OR REPLACE INTO processes (id, data, seen) VALUES (?, ?, ?)",
            (info.id, info.model_dump_json(), info.seen_at.timestamp()),
        )

    async def leave(self, process_id: str) -> None:
        """Delete the process's row."""
        await self._db.execute("DELETE FROM processes WHERE id = ?", (process_id,))

    async def processes(self, now: datetime) -> list[ProcessInfo]:
        """Every recent row; older ones are deleted."""
        await self._db.execute(
            "DELETE FROM processes WHERE seen < ?", ((now - FORGET_AFTER).timestamp(),)
        )
        rows = await self._db.execute_fetchall("SELECT data FROM processes")
        found = []
        for (data,) in rows:
            with contextlib.suppress(ValidationError):
                found.append(ProcessInfo.model_validate_json(data))
        return _sorted(found)

    async def aclose(self) -> None:
        """Close the connection."""
        await self._db.close()


class Beating:
    """Beats for one process every `interval` seconds until `stop()`, then leaves the board.

    A beat that fails (Redis away) is logged at debug level and the next one tried: the
    process's own readiness says when it cannot reach the bus.
    """

    def __init__(
        self,
        board: HeartbeatBoard,
        info: ProcessInfo,
        *,
        interval: float = BEAT_SECONDS,
        clock: Callable[[], datetime] = utc_now,
        platforms: Callable[[], list[PlatformHealth]] | None = None,
    ) -> None:
        """`platforms`: the watchdog's view, sent with each beat (`switchboard status`)."""
        self.board = board
        self.info = info
        self._platforms = platforms
        self._interval = interval
        self._clock = clock
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        """Beat until `stop()`; then take the process off the board (best effort)."""
        while not self._stopped.is_set():
            try:
                update: dict[str, object] = {"seen_at": self._clock()}
                if self._platforms is not None:
                    update["platforms"] = self._platforms()
                await self.board.beat(self.info.model_copy(update=update))
            except Exception as exc:
                log.debug("heartbeat not written: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self._interval)
        try:
            await self.board.leave(self.info.id)
        except Exception as exc:
            log.debug("heartbeat not removed: %s", exc)

    def stop(self) -> None:
        """End `run()` after its current beat."""
        self._stopped.set()
