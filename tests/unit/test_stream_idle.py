"""`idle_limited` on plain async iterables: what passes, what is cut, what goes through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.errors import ProviderError
from core.providers.idle import idle_limited


async def pieces(*items: str, then: asyncio.Event | None = None) -> AsyncIterator[str]:
    """`items`, then (with `then`) nothing until the event is set."""
    for item in items:
        yield item
    if then is not None:
        await then.wait()


async def test_without_a_limit_every_chunk_passes_in_order() -> None:
    got = [c async for c in idle_limited(pieces("a", "b", "c"), None, provider="p")]
    assert got == ["a", "b", "c"]


async def test_a_stream_silent_after_its_answer_began_is_cut() -> None:
    never = asyncio.Event()
    got: list[str] = []
    with pytest.raises(ProviderError) as caught:
        async for chunk in idle_limited(pieces("a", "b", then=never), 0.05, provider="p"):
            got.append(chunk)
    assert got == ["a", "b"]
    assert caught.value.kind == "server"
    assert caught.value.provider == "p"
    assert str(caught.value) == (
        "p's answer stalled: nothing came for 0.05s, so it was cut off before its end"
    )


async def test_the_transports_own_timeout_goes_through_as_it_came() -> None:
    async def timing_out() -> AsyncIterator[str]:
        yield "a"
        raise TimeoutError("read timed out")

    with pytest.raises(TimeoutError, match="read timed out"):
        async for _ in idle_limited(timing_out(), 30.0, provider="p"):
            pass
