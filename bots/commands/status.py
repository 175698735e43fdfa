"""`switchboard status`: the processes seen through the heartbeat board, the queues, and the
work waiting in the sessions' mailboxes.

Also `announce()`, which the long-running commands wrap themselves in so that they appear
there (`core/heartbeat.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version

import click

from bots.commands.common import AS_JSON, echo_json, settings_from, stdout
from bots.commands.where import STORE_EPILOG, describe_coordination, require_data
from bots.settings import Settings
from core.bus.base import Bus
from core.bus.stats import QueueStats, QueueStatsReader
from core.clock import utc_now
from core.envelopes import new_id
from core.errors import BusError, StoreError
from core.heartbeat import Beating, HeartbeatBoard, ProcessInfo, process_document
from core.watchdog import PlatformHealth

__all__ = ["announce", "open_board", "status"]

# How long `status` waits for Redis before it says it does not answer.
_TIMEOUT = 10.0


def _version() -> str:
    try:
        return version("switchboard")
    except PackageNotFoundError:
        return "unknown"


async def open_board(settings: Settings) -> HeartbeatBoard:
    """The deployment's heartbeat board: Redis with REDIS_URL, else the SQLite data file."""
    from core.heartbeat import RedisHeartbeats, SqliteHeartbeats

    if settings.redis_url is not None:
        return RedisHeartbeats.from_url(settings.redis_url, settings.redis_keys)
    return await SqliteHeartbeats.open(settings.database_path)


@contextlib.asynccontextmanager
async def announce(
    settings: Settings,
    role: str,
    detail: str = "",
    *,
    platforms: Callable[[], list[PlatformHealth]] | None = None,
) -> AsyncIterator[None]:
    """Beat on the board while the block runs, so `switchboard status` lists this process
    (with `platforms`, the watchdog's view of the platforms it serves)."""
    now = utc_now()
    info = ProcessInfo(
        id=f"{role}-{new_id()[:12]}",
        role=role,
        host=socket.gethostname(),
        pid=os.getpid(),
        version=_version(),
        started_at=now,
        seen_at=now,
        detail=detail,
    )
    board = await open_board(settings)
    beating = Beating(board, info, platforms=platforms)
    task = asyncio.create_task(beating.run(), name="heartbeat")
    try:
        yield
    finally:
        beating.stop()
        with contextlib.suppress(Exception):
            await task
        await board.aclose()


@click.command(epilog=STORE_EPILOG)
@AS_JSON
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """List the running processes (role, host, pid, version, last heartbeat) and the queues.

    Every `serve`, `gateway`, `worker`, `scheduler` and `web` writes a heartbeat every 10 s; one
    not heard from for 30 seconds is shown as missing, and forgotten after an hour.
    """
    settings = settings_from(ctx)
    asyncio.run(_status(settings, as_json))


async def _status(settings: Settings, as_json: bool) -> None:
    where = describe_coordination(settings)
    # Not created here: a status run from the wrong folder must not make an empty world.
    require_data(settings)
    try:
        async with asyncio.timeout(_TIMEOUT):
            board = await open_board(settings)
            try:
                now = utc_now()
                processes = await board.processes(now)
            finally:
                await board.aclose()
            queues = await _queues(settings)
            waiting = await _waiting(settings)
    except (OSError, TimeoutError, BusError, StoreError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise click.ClickException(f"cannot read the status from {where}: {reason}") from None
    except Exception as exc:  # redis-py's errors, without importing it for the embedded case
        raise click.ClickException(f"cannot read the status from {where}: {exc}") from None
    if as_json:
        echo_json(
            {
                "store": where,
                "processes": [process_document(p, now) for p in processes],
                "queues": {name: dataclasses.asdict(stats) for name, stats in queues.items()},
                "mailboxes": {"waiting": waiting},
            }
        )
        return
    out = stdout()
    if not processes:
        out.print(f"No process is running against {where}.")
    else:
        out.print(f"Processes using {where}:")
        for process in processes:
            out.print("  " + _process_line(process, now), markup=False)
            for health in process.platforms:
                out.print("    " + _platform_line(health), markup=False)
    out.print("Queues:")
    out.print(f"  {'mailboxes':<20} {waiting} waiting (inbound work of every session)")
    for name, stats in queues.items():
        out.print(f"  {_queue_line(name, stats)}", markup=False)


async def _queues(settings: Settings) -> dict[str, QueueStats]:
    # Imported here: bots.operations brings aiohttp's server, and every long-running command
    # (`switchboard chat` too) imports this module for `announce`.
    from bots.operations import watched_queues

    bus = await _open_bus(settings)
    try:
        if not isinstance(bus, QueueStatsReader):
            return {}
        return {name: await bus.queue_stats(name) for name in watched_queues()}
    finally:
        await bus.close()


async def _waiting(settings: Settings) -> int:
    """The inbound work waiting in the sessions' mailboxes (turns running or not begun)."""
    if settings.redis_url is not None:
        from core.backends.redis.mailboxes import RedisMailboxes

        shared = RedisMailboxes.from_url(settings.redis_url, keys=settings.redis_keys)
        try:
            return await shared.waiting()
        finally:
            await shared.aclose()
    from core.backends.sql.mailboxes import SqliteMailboxes

    local = await SqliteMailboxes.open(settings.database_path)
    try:
        return await local.waiting()
    finally:
        await local.aclose()


async def _open_bus(settings: Settings) -> Bus:
    if settings.redis_url is not None:
        from core.backends.redis.bus import RedisBus

        return await RedisBus.connect(settings.redis_url, keys=settings.redis_keys)
    from core.backends.sql.bus import SqliteBus

    return await SqliteBus.open(settings.database_path)


def _ago(then: datetime, now: datetime) -> str:
    seconds = max(int((now - then).total_seconds()), 0)
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"


def _process_line(process: ProcessInfo, now: datetime) -> str:
    role = f"{process.role} {process.detail}".strip()
    state = "MISSING" if process.missing(now) else "ok"
    started = f"{process.started_at:%Y-%m-%d %H:%M} UTC"
    return (
        f"{role:<24} {state:<8} {process.host}:{process.pid:<8} v{process.version:<8} "
        f"last heartbeat {_ago(process.seen_at, now)}, up since {started}"
    )


def _platform_line(health: PlatformHealth) -> str:
    """One platform as the watchdog saw it at the process's last beat."""

    def seconds(value: float | None) -> str:
        return "never" if value is None else f"{value:.0f}s ago"

    parts = [
        f"{health.platform:<10}",
        "SILENT" if health.incident is not None else "ok",
        f"update {seconds(health.since_update)}",
        f"delivery {seconds(health.since_delivery)}",
    ]
    if health.poll_lag is not None:
        parts.append(f"poll {seconds(health.poll_lag)}")
    if health.failure_rate is not None:
        parts.append(f"failing {health.failure_rate:.0%}")
    line = ", ".join([" ".join(parts[:2]), *parts[2:]])
    return f"{line} ({health.incident})" if health.incident is not None else line


def _queue_line(name: str, stats: QueueStats) -> str:
    oldest = f", oldest {stats.oldest_seconds:.0f}s" if stats.depth else ""
    return f"{name:<20} {stats.depth} waiting{oldest}, {stats.dead} dead"
