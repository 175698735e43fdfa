"""The idle limit of a model stream: once its answer began, each next wire event must follow
within the limit, or the stream is taken for cut.

The wait before the answer begins is not limited here: a model may think long (or a server
read a long prompt) before its first piece, and the call's deadline (`RetryPolicy.
call_timeout`) bounds that wait. The answer begins with the first event that carries content
(text, a tool call's fragment, reasoning), as each provider tells (`begins`): a vendor's
opening event (Anthropic's `message_start`, OpenAI's role chunk) may come long before it.
After that, a long silence means a stream that died without closing (a proxy holding a dead
upstream); it fails as a stream cut before its end does (`ProviderError` "server"), so a retry
happens only while nothing was shown yet. Every wire event counts as a sign of life (pings and
tool-argument fragments included), so a model streaming a long tool call is not idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import TypeVar

from core.errors import ProviderError

__all__ = ["idle_limited"]

T = TypeVar("T")


async def idle_limited(
    chunks: AsyncIterable[T],
    limit: float | None,
    *,
    provider: str,
    begins: Callable[[T], bool] = lambda _chunk: True,
) -> AsyncIterator[T]:
    """`chunks` as they come; `ProviderError` ("server") when, once a chunk for which
    `begins` is true came, none comes for `limit` seconds. `limit` None: no limit."""
    iterator = aiter(chunks)
    began = False
    while True:
        timer = asyncio.timeout(limit if began else None)
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
        began = began or begins(chunk)
        yield chunk
