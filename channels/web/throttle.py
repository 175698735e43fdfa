"""How many wrong tokens one client address may try: a bound on guessing the page's token.

Each wrong token (a failed `POST /login`, or a wrong `Authorization: Bearer`) counts against
the address it came from, in a moving window (`limits`, in memory: one page process). Past
the limit every attempt from that address to present a token is answered 429 with
`Retry-After`, the right token included: were the right one let through, a throttled guesser
could still tell it from a wrong one by the answer, and guessing would be unbounded. A browser
already signed in (its cookie) is not a guess and is never throttled.
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
_NAMESPACE = "web-wrong-token"


class TokenThrottle:
    """Counts wrong tokens per client address and says when an address must wait."""

    def __init__(self, rate: str = WRONG_TOKENS) -> None:
        """`rate` in `limits` notation ("10/minute")."""
        self.rate: RateLimitItem = parse(rate)
        self._storage = MemoryStorage()
        self._limiter = MovingWindowRateLimiter(self._storage)

    async def wait(self, address: str) -> int | None:
        """Seconds `address` must wait before it may present a token again; None: it may now."""
        if await self._limiter.test(self.rate, _NAMESPACE, address):
            return None
        stats = await self._limiter.get_window_stats(self.rate, _NAMESPACE, address)
        return max(1, math.ceil(stats.reset_time - time.time()))

    async def wrong(self, address: str) -> None:
        """Count one wrong token from `address`."""
        await self._limiter.hit(self.rate, _NAMESPACE, address)

    async def close(self) -> None:
        """Forget every count (and stop the storage's expiry task)."""
        await self._storage.reset()
