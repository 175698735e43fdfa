"""Counting the writes a process makes to Redis: one per round trip (a pipeline is one)."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection


def count_writes(monkeypatch: pytest.MonkeyPatch, kind: type[Any] = Connection) -> list[int]:
    """A list that gains an item for each write a `kind` connection makes from now on."""
    writes: list[int] = []
    send = kind.send_packed_command

    async def counted(self: Any, command: Any, check_health: bool = True) -> None:
        writes.append(1)
        await send(self, command, check_health)

    monkeypatch.setattr(kind, "send_packed_command", counted)
    return writes


def record_writes(monkeypatch: pytest.MonkeyPatch, kind: type[Any] = Connection) -> list[bytes]:
    """A list that gains the bytes of each write a `kind` connection makes from now on."""
    writes: list[bytes] = []
    send = kind.send_packed_command

    async def recorded(self: Any, command: Any, check_health: bool = True) -> None:
        packed = command if isinstance(command, bytes) else b"".join(map(bytes, command))
        writes.append(packed)
        await send(self, command, check_health)

    monkeypatch.setattr(kind, "send_packed_command", recorded)
    return writes
