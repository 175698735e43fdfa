"""Whether a process can do its work now: its loops report in, its dependencies are asked.

A loop that depends on the bus or the store (a gateway's intake and delivery, a worker's
receive, the scheduler) marks itself up or down as its calls succeed or fail; a check (the
store answers a read, the bus a ping) is asked when readiness is wanted. The process is
ready when every mark is up and every check passes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["Readiness", "ReadinessReport"]

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[None]]
"""Raises when the dependency it asks does not answer."""


@dataclass(frozen=True)
class ReadinessReport:
    """What readiness found: ready or not, and a short word per loop and check."""

    ready: bool
    details: dict[str, str]


class Readiness:
    """The marks of a process's loops and the checks of its dependencies."""

    def __init__(self, *, check_timeout: float = 2.0) -> None:
        self._marks: dict[str, str | None] = {}
        self._checks: dict[str, Check] = {}
        self._timeout = check_timeout

    def add_check(self, name: str, check: Check) -> None:
        """Ask `check` whenever readiness is wanted."""
        self._checks[name] = check

    def up(self, name: str) -> None:
        """The loop `name` is doing its work."""
        if self._marks.get(name) is not None:
            log.info("%s is working again", name)
        self._marks[name] = None

    def down(self, name: str, reason: str) -> None:
        """The loop `name` cannot do its work now (it keeps trying)."""
        if self._marks.get(name) is None:
            log.warning("%s is not working: %s", name, reason)
        self._marks[name] = reason

    def forget(self, name: str) -> None:
        """The loop `name` stopped on purpose: it no longer counts."""
        self._marks.pop(name, None)

    async def report(self) -> ReadinessReport:
        """Every mark, and every check asked now (each within the check timeout)."""
        details = {name: reason or "ok" for name, reason in self._marks.items()}
        for name, check in self._checks.items():
            details[name] = await self._ask(check)
        return ReadinessReport(all(value == "ok" for value in details.values()), details)

    async def _ask(self, check: Check) -> str:
        try:
            async with asyncio.timeout(self._timeout):
                await check()
        except TimeoutError:
            return f"no answer within {self._timeout:g}s"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"[:200]
        return "ok"
