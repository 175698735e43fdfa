"""A `switchboard serve` subprocess for end-to-end tests, with its log read as it comes."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Served", "serve"]

SWITCHBOARD = Path(sys.executable).with_name("switchboard")
# Lines of the log a failure shows (debug logs are long; the end says where it stopped).
_TAIL_LINES = 150


@dataclass
class Served:
    """A running `switchboard serve` and what it has written to stderr so far."""

    process: asyncio.subprocess.Process
    stderr: bytearray = field(default_factory=bytearray)
    grew: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def log(self) -> str:
        return self.stderr.decode(errors="replace")

    async def logged(self, text: str) -> None:
        """Return once `text` appears on stderr."""
        while text not in self.log:
            self.grew.clear()
            await self.grew.wait()

    async def until_ready(self, ready: Awaitable[object], patience: float = 20.0) -> None:
        """Await `ready`; fail with the process's stderr if it exits or `patience` runs out."""
        waiting = asyncio.ensure_future(ready)
        exited = asyncio.ensure_future(self.process.wait())
        try:
            done, _ = await asyncio.wait(
                {waiting, exited}, timeout=patience, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (waiting, exited):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if waiting not in done:
            raise AssertionError(f"switchboard serve did not start listening:\n{self.log}")

    async def unless_exited(self, waiting: asyncio.Future[Any]) -> None:
        """Wait for `waiting`; fail with the log if the process exits first."""
        exited = asyncio.ensure_future(self.process.wait())
        try:
            await asyncio.wait({waiting, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await exited
        if not waiting.done():
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
            raise AssertionError(f"switchboard serve exited early:\n{self.log}")

    async def terminate(self, patience: float) -> int:
        """SIGTERM, then the exit code, which must come within `patience` seconds.

        A process that hangs is sent SIGABRT: the fault handler (PYTHONFAULTHANDLER, set by
        `serve`) prints every thread's stack, and the failure shows that with the log's tail.
        """
        self.process.terminate()
        try:
            async with asyncio.timeout(patience):
                return await self.process.wait()
        except TimeoutError:
            pass
        self.process.send_signal(signal.SIGABRT)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10.0):
                await self.process.wait()
        tail = "\n".join(self.log.splitlines()[-_TAIL_LINES:])
        raise AssertionError(f"no exit within {patience}s of SIGTERM; the log's end:\n{tail}")


@asynccontextmanager
async def serve(env: dict[str, str], cwd: Path) -> AsyncIterator[Served]:
    """Start `switchboard serve`; kill it at the end if the test did not stop it."""
    process = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        "serve",
        env={**env, "PYTHONFAULTHANDLER": "1"},
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    served = Served(process)

    async def drain() -> None:
        # Debug logs are plentiful: read them as they come so the pipe never fills.
        assert process.stderr is not None
        while chunk := await process.stderr.read(65536):
            served.stderr.extend(chunk)
            served.grew.set()

    reader = asyncio.create_task(drain())
    try:
        yield served
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await reader
