"""Counting the writes a process makes to Redis: one per round trip (a pipeline is one)."""

from __future__ import annotations

from typing import Any

import pytest

from core.redis_client import QuickConnection


def count_writes(monkeypatch: pytest.MonkeyPatch, kind: type[Any] = QuickConnection) -> list[int]:
    """A list that gains an item for each write a `kind` connection makes from now on."""
    writes: list[int] = []
    send = kind.send_packed_command

    async def counted(self: Any, command: Any, check_health: bool = True) -> None:
        writes.append(1)
        await send(self, command, check_health)

    monkeypatch.setattr(kind, "send_packed_command", counted)
    return writes
