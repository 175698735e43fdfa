"""`MemoryMailboxes`: the mailboxes of one process, nothing kept (tests only)."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from core.envelopes import Inbound
from core.mailbox.base import BEHIND_LIMIT, Claim, ClaimState, LocalWakes, is_plain

__all__ = ["MemoryMailboxes"]


class _MemoryClaim(ClaimState):
    def __init__(self, boxes: MemoryMailboxes, session_key: str, epoch: int) -> None:
        super().__init__(session_key, epoch)
        self._boxes = boxes

    async def head(self) -> Inbound | None:
        box = self._boxes.boxes.get(self._key)
        return box[0] if box else None

    async def done(self, inbound: Inbound) -> None:
        box = self._boxes.boxes.get(self._key)
        for waiting in list(box or ()):
            if box is not None and waiting.id == inbound.id:
                box.remove(waiting)

    async def behind(
        self, limit: int = BEHIND_LIMIT, *, accept: Callable[[Inbound], bool] = is_plain
    ) -> list[Inbound]:
        found: list[Inbound] = []
        for waiting in list(self._boxes.boxes.get(self._key) or ())[1:]:
            if len(found) >= limit or not accept(waiting):
                break
            found.append(waiting)
        return found

    async def release(self) -> bool:
        self._boxes.held.discard(self._key)
        box = self._boxes.boxes.get(self._key)
        if not box:
            self._boxes.boxes.pop(self._key, None)
            return False
        return True


class MemoryMailboxes:
    """Mailboxes of one process (the embedded deployment)."""

    def __init__(self) -> None:
        self.boxes: dict[str, collections.deque[Inbound]] = {}
        self.held: set[str] = set()
        self._epochs: dict[str, int] = {}
        self._wakes = LocalWakes()

    async def put(self, inbound: Inbound) -> None:
        key = inbound.session_key
        box = self.boxes.setdefault(key, collections.deque())
        if all(waiting.id != inbound.id for waiting in box):
            box.append(inbound)
        self._wakes.wake(key)

    async def woken(self, within: float) -> str | None:
        return await self._wakes.next(within)

    async def waiting(self) -> int:
        return sum(len(box) for box in self.boxes.values())

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        if session_key in self.held:
            return None
        self.held.add(session_key)
        # Floored by the clock: a restarted process still outbids the epochs a store kept.
        epoch = max(self._epochs.get(session_key, 0) + 1, time.time_ns() // 1_000)
        self._epochs[session_key] = epoch
        return _MemoryClaim(self, session_key, epoch)

    async def pending(self) -> list[str]:
        """Sessions with waiting work that nobody holds."""
        return sorted(key for key, box in self.boxes.items() if box and key not in self.held)
