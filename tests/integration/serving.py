"""One running bot for the channel tests, whatever its platform.

`running_bot` runs the real stack in-process around an adapter the platform's helper built:
a `Worker` on a `MemoryBus` with the given store and provider, and a `Gateway`. It yields once
the platform's `ready` condition holds (the fake saw the bot connect), failing at once if the
gateway died first, and stops everything cleanly. The platform helpers
(`telegram_helpers.serving`, ...) only build their adapter and say what "ready" means.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from bots.platforms import REGISTERED, command_registry
from channels.base import ChannelAdapter
from channels.gateway import Gateway
from channels.streaming import IncrementalRender, ReplyStreams
from core.commands import CommandRegistry
from core.confirm import Confirmations
from core.policy import ChannelPolicy
from core.providers.base import Provider
from core.readiness import Readiness
from core.runtime import AgentRuntime
from core.store.base import Store
from core.store.replies import MemoryReplyRecords
from core.tools import Tool, ToolRegistry, builtin_tools
from core.tools.ask_user import ask_user_tool
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.workers import build_worker

__all__ = ["COMMANDS", "PATIENCE", "Running", "local_replies", "running_bot", "unless_failed"]

# How long a wait lasts before the test fails instead of hanging; only reached when broken.
PATIENCE = 5.0

# The chat commands of the product: the worker runs them, the gateway lists them.
COMMANDS = command_registry()


@dataclass
class Running:
    """The parts of a running bot a test looks at."""

    adapter: ChannelAdapter
    gateway: Gateway
    worker: Worker
    bus: MemoryBus
    store: Store
    provider: Provider


def local_replies() -> ReplyStreams:
    """Streamed replies shown by this process alone (one gateway)."""
    return ReplyStreams(MemoryReplyRecords(), IncrementalRender())


@asynccontextmanager
async def running_bot(
    adapter: ChannelAdapter,
    store: Store,
    provider: Provider,
    *,
    ready: Callable[[], Awaitable[Any]],
    policy: ChannelPolicy | None = None,
    commands: CommandRegistry | None = None,
    stream_interval: float = 0.05,
    tools: Sequence[Tool[Any]] = (),
    confirm_timeout: float | None = None,
    ask_timeout: float | None = None,
) -> AsyncIterator[Running]:
    """Run a worker and a gateway around `adapter` until the block ends.

    `tools` are offered beside the built-in ones; with `confirm_timeout`, privileged calls ask
    through the confirmation gate and wait that long for the answer; with `ask_timeout`, the
    `ask_user` tool is offered too, waiting that long.
    """
    bus = MemoryBus()
    gate = None
    if confirm_timeout is not None or ask_timeout is not None:
        gate = Confirmations(bus=bus, timeout=confirm_timeout or PATIENCE, marks=store)
    asking = [ask_user_tool(gate, timeout=ask_timeout)] if gate and ask_timeout else []
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([*builtin_tools(), *tools, *asking]),
        store=store,
        confirm=gate.confirm if gate else None,
    )
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=policy or ChannelPolicy(modes=REGISTERED.default_modes()),
        commands=commands or COMMANDS,
        prompt_hints=REGISTERED.prompt_hints(),
        stream_interval=stream_interval,
        confirmations=gate,
    )
    gateway = Gateway(adapter, bus, mailboxes=worker.mailboxes, readiness=Readiness())
    worker_task = asyncio.create_task(worker.run(), name="test-worker")
    gateway_task = asyncio.create_task(gateway.run(), name="test-gateway")
    try:
        await unless_failed(ready(), gateway_task)
        yield Running(adapter, gateway, worker, bus, store, provider)
    finally:
        await gateway.stop()
        async with asyncio.timeout(PATIENCE):
            await gateway_task
        await worker.stop(grace=PATIENCE)
        async with asyncio.timeout(PATIENCE):
            await worker_task
        await bus.close()
        await provider.aclose()


async def unless_failed(ready: Awaitable[Any], task: asyncio.Task[None]) -> None:
    """Await `ready`, but fail at once with the task's error if the task ends first."""
    waiting = asyncio.ensure_future(ready)
    done, _ = await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
    if waiting not in done:
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        task.result()
        raise AssertionError("the gateway stopped before the bot was connected")
    waiting.result()
