"""How many wrong tokens one client address may try: a bound on guessing a listener's token.

Each wrong token (a failed `POST /login` of the web page, a wrong `Authorization: Bearer` on the
page, the hooks listener or the operations endpoints) counts against the address it came from,
in a moving window (`limits`, in memory: one process). Past the limit every attempt from that
address to present a token is answered 429 with `Retry-After`, the right token included: were
the right one let through, a throttled guesser could still tell it from a wrong one by the
answer, and guessing would be unbounded.
"""

from __future__ import annotations

import math
import time
from typing import Final

from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

__all__ = ["WRONG_TOKENS", "TokenThrottle"]

# Wrong tokens one address may try before it must wait.
WRONG_TOKENS: Final = "10/minute"


class TokenThrottle:
    """Counts wrong tokens per client address and says when an address must wait."""

    def __init__(self, rate: str = WRONG_TOKENS, *, namespace: str = "wrong-token") -> None:
        """`rate` in `limits` notation ("10/minute"); `namespace` names the listener."""
        self.rate: RateLimitItem = parse(rate)
        self._namespace = namespace
        self._storage = MemoryStorage()
        self._limiter = MovingWindowRateLimiter(self._storage)

    async def wait(self, address: str) -> int | None:
        """Seconds `address` must wait before it may present a token again; None: it may now."""
        if await self._limiter.test(self.rate, self._namespace, address):
            return None
        stats = await self._limiter.get_window_stats(self.rate, self._namespace, address)
        return max(1, math.ceil(stats.reset_time - time.time()))

    async def wrong(self, address: str) -> bool:
        """Count one wrong token from `address`; False when it was one too many (another
        request took the last place since `wait` said it may try)."""
        return await self._limiter.hit(self.rate, self._namespace, address)

    async def close(self) -> None:
        """Forget every count (and stop the storage's expiry task)."""
        await self._storage.reset()
