"""The idle limit of a model stream: once its first chunk came, each next one must follow
within the limit, or the stream is taken for cut.

The wait before the first chunk is not limited here: a model may think long before it
answers, and the call's deadline (`RetryPolicy.call_timeout`) bounds that wait. Between
chunks a long silence means a stream that died without closing (a proxy holding a dead
upstream); it fails as a stream cut before its end does (`ProviderError` "server"), so a
retry happens only while nothing was shown yet. Chunks are the vendor's wire events (pings,
tool-argument fragments included), so a model streaming a long tool call is not idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from typing import TypeVar

from core.errors import ProviderError

__all__ = ["idle_limited"]

T = TypeVar("T")


async def idle_limited(
    chunks: AsyncIterable[T], limit: float | None, *, provider: str
) -> AsyncIterator[T]:
    """`chunks` as they come; `ProviderError` ("server") when, after the first, none comes
    for `limit` seconds. `limit` None: no limit."""
    iterator = aiter(chunks)
    async for chunk in _first(iterator):
        yield chunk
    while True:
        timer = asyncio.timeout(limit)
        try:
            async with timer:
                chunk = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            # The transport's own read timeout is not this limit: it goes through as it came.
            if not timer.expired():
                raise
            raise ProviderError(
                "server",
                f"{provider}'s answer stalled: nothing came for {limit:g}s, so it was cut off "
                "before its end",
                provider=provider,
            ) from None
        yield chunk


async def _first(iterator: AsyncIterator[T]) -> AsyncIterator[T]:
    """The first chunk, whenever it comes (the call's deadline bounds that wait)."""
    try:
        yield await anext(iterator)
    except StopAsyncIteration:
        return
