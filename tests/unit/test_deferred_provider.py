"""`DeferredProvider`: the real provider (and its SDK) is built on the first call, once, in a
thread, so a process is ready before the SDK has loaded (issue 22, point 4)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from core.events import ModelEvent, TextDelta
from core.providers import ModelRequest, ScriptedProvider, complete, text_reply
from core.providers.deferred import DeferredProvider


def _request() -> ModelRequest:
    return ModelRequest(model="m", system="", messages=[])


class _Builds:
    """A build function that counts its calls and remembers the thread it ran on."""

    def __init__(self, script: list[list[ModelEvent]], fail_first: bool = False) -> None:
        self.script = script
        self.calls = 0
        self.threads: list[int] = []
        self.fail_first = fail_first
        self.closed = False

    def __call__(self) -> ScriptedProvider:
        self.calls += 1
        self.threads.append(threading.get_ident())
        if self.fail_first and self.calls == 1:
            raise RuntimeError("the SDK could not be imported")
        builds = self

        class Closing(ScriptedProvider):
            async def aclose(self) -> None:
                builds.closed = True

        return Closing(self.script, name="vendor")


async def test_nothing_is_built_until_the_first_call_and_then_once() -> None:
    builds = _Builds([text_reply("one"), text_reply("two")])
    provider = DeferredProvider("vendor", builds)
    assert provider.name == "vendor" and builds.calls == 0

    first, second = await asyncio.gather(
        complete(provider, _request()), complete(provider, _request())
    )

    assert {first.text, second.text} == {"one", "two"}
    assert builds.calls == 1
    assert builds.threads != [threading.get_ident()]  # built off the event loop's thread
    await provider.aclose()
    assert builds.closed


async def test_closing_an_unused_provider_builds_nothing() -> None:
    builds = _Builds([])
    provider = DeferredProvider("vendor", builds)

    await provider.aclose()

    assert builds.calls == 0


async def test_a_failed_build_is_raised_and_tried_again_on_the_next_call() -> None:
    builds = _Builds([text_reply("after")], fail_first=True)
    provider = DeferredProvider("vendor", builds)

    with pytest.raises(RuntimeError, match="could not be imported"):
        await complete(provider, _request())
    events = [event async for event in provider.stream(_request())]

    assert builds.calls == 2
    assert events[0] == TextDelta(text="after")
