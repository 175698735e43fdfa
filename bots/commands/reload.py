"""Reloading the profile of running processes (decision 0025).

A process that answers messages (`serve`, `worker`, and `web` when embedded) reads its
profile again on SIGHUP (`reload_on_hangup`). `switchboard reload` sends that signal to each
such process on this machine that the heartbeat board lists as alive; a process on another
machine (or in another container) is named with the command to run there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import AsyncIterator

import click

from bots.commands.common import LOG, settings_from, stdout
from bots.commands.status import open_board
from bots.commands.where import STORE_EPILOG, describe_coordination, require_data
from bots.settings import Settings
from core.clock import utc_now
from core.errors import BusError, StoreError
from core.heartbeat import ProcessInfo
from core.reload import ProfileReloader, ReloadResult

__all__ = ["reload", "reload_on_hangup", "reloads"]

# How long `reload` waits for the heartbeat board before it says it does not answer.
_TIMEOUT = 10.0


@contextlib.asynccontextmanager
async def reload_on_hangup(reloader: ProfileReloader | None) -> AsyncIterator[None]:
    """While the block runs, SIGHUP reloads the profile (one reload at a time; a bad profile
    is logged and the running one kept). Without a reloader, nothing is installed."""
    loop = asyncio.get_running_loop()
    running: set[asyncio.Task[ReloadResult]] = set()

    def handle() -> None:
        assert reloader is not None
        LOG.info("SIGHUP: reading the profile again")
        task = loop.create_task(reloader.reload(), name="profile reload")
        running.add(task)
        task.add_done_callback(running.discard)

    installed = False
    if reloader is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGHUP, handle)
            installed = True
    try:
        yield
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGHUP)
        for task in list(running):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def reloads(process: ProcessInfo, *, distributed: bool) -> bool:
    """Whether the process holds a runtime that SIGHUP reloads (a gateway or a scheduler has
    none, and the default action of SIGHUP would end it)."""
    return process.role in ("serve", "worker") or (process.role == "web" and not distributed)


@click.command(epilog=STORE_EPILOG)
@click.pass_context
def reload(ctx: click.Context) -> None:
    """Make the running processes read their profile again (SOUL.md, skills, knowledge...).

    Sends SIGHUP to each `serve`, `worker` and embedded `web` process on this machine that
    `switchboard status` lists as running. The next turn of each uses the new files; a profile
    that no longer loads is refused and the running one kept (see the process's log).
    """
    settings = settings_from(ctx)
    require_data(settings)
    processes = asyncio.run(_alive(settings))
    here = socket.gethostname()
    signalled = 0
    out = stdout()
    for process in processes:
        if not reloads(process, distributed=settings.redis_url is not None):
            continue
        where = f"{process.role} {process.host}:{process.pid}"
        if process.host != here:
            out.print(f"{where}: on another machine; run `kill -HUP {process.pid}` there")
            continue
        try:
            os.kill(process.pid, signal.SIGHUP)
        except ProcessLookupError:
            out.print(f"{where}: gone")
            continue
        except PermissionError:
            out.print(f"{where}: not allowed to signal it (another user's process)")
            continue
        out.print(f"{where}: asked to reload")
        signalled += 1
    if not signalled:
        raise click.ClickException(
            f"no running serve, worker or web process on this machine uses "
            f"{describe_coordination(settings)}"
        )


async def _alive(settings: Settings) -> list[ProcessInfo]:
    """The processes on the heartbeat board that are not missing."""
    where = describe_coordination(settings)
    try:
        async with asyncio.timeout(_TIMEOUT):
            board = await open_board(settings)
            try:
                now = utc_now()
                return [p for p in await board.processes(now) if not p.missing(now)]
            finally:
                await board.aclose()
    except (OSError, TimeoutError, BusError, StoreError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise click.ClickException(f"cannot read the processes from {where}: {reason}") from None
    except Exception as exc:  # redis-py's errors, without importing it for the embedded case
        raise click.ClickException(f"cannot read the processes from {where}: {exc}") from None
