"""SQL transactions per turn on the embedded path, counted by SQLAlchemy's engine events.

`python -m bench transactions`: one conversation of W1's shape (model -> calculator -> model
-> text) against the OpenAI fake, each message handed to the worker's `InboundHandler` as a
worker hands it over (dedupe, access, rate limits, checkpoint, the runtime, the reply), the
records in a SQLite file of a temporary data dir. Every transaction any engine of the process
begins is counted (the `begin` event of every `Connection`), and split into those that wrote
and those that only read by whether they ran an INSERT, UPDATE or DELETE.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from bench.common import ANSWER, provider_env
from bench.fake_llm import make_fake
from bench.report import console, table

_WRITES = ("INSERT", "UPDATE", "DELETE")


class _Counter:
    """Transactions begun, and which of them wrote."""

    def __init__(self) -> None:
        self.begun = 0
        self.writes = 0
        self._writing: set[int] = set()

    def on_begin(self, connection: Connection) -> None:
        self.begun += 1
        self._writing.discard(id(connection))

    def on_execute(
        self, connection: Connection, cursor: object, statement: str, *_: object
    ) -> None:
        if statement.lstrip().upper().startswith(_WRITES) and id(connection) not in self._writing:
            self._writing.add(id(connection))
            self.writes += 1


@contextmanager
def _environment(values: dict[str, str]) -> Any:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


async def _count(turns: int, data: Path) -> dict[str, Any]:
    from bots.app import embedded
    from bots.profiles import load_profile
    from bots.settings import load_settings
    from core.envelopes import Address, Inbound

    async with make_fake("openai", 0.0) as fake:
        with _environment(provider_env("openai", fake.url, data)):
            settings = load_settings()
            profile = load_profile(settings.profiles_dir, settings.profile)
            async with embedded(settings, profile) as parts:
                handler = parts.worker.handler
                address = Address(platform="terminal", bot="default", chat="bench")

                async def turn(number: int) -> None:
                    inbound = Inbound(
                        address=address,
                        user_id="bench",
                        user_name="bench",
                        text=f"what is 17*23? (message {number})",
                        is_direct=True,
                        platform_message_id=f"m-{number}",
                    )
                    await handler.handle(inbound, cancel=asyncio.Event())

                await turn(0)  # warm-up: the session is made, lazily loaded code loaded
                counter = _Counter()
                event.listen(Engine, "begin", counter.on_begin)
                event.listen(Engine, "before_cursor_execute", counter.on_execute)
                started = time.process_time()
                try:
                    for number in range(1, turns + 1):
                        await turn(number)
                finally:
                    event.remove(Engine, "begin", counter.on_begin)
                    event.remove(Engine, "before_cursor_execute", counter.on_execute)
                cpu = time.process_time() - started
                history = await parts.store.find_current_session("terminal:default:bench")
                assert history is not None
                last = (await parts.store.list_messages(history.id))[-1]
                if last.text != ANSWER:
                    raise RuntimeError(f"the last turn answered {last.text!r}")
    return {
        "turns": turns,
        "transactions_per_turn": counter.begun / turns,
        "writing_per_turn": counter.writes / turns,
        "reading_per_turn": (counter.begun - counter.writes) / turns,
        # The fake LLM runs in this process too: its CPU is in this figure.
        "cpu_ms_per_turn_with_the_fake": cpu * 1000 / turns,
    }


def transactions(turns: int = 50) -> dict[str, Any]:
    """Count the SQL transactions of `turns` handled turns and print them."""
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as data:
        figures = asyncio.run(_count(turns, Path(data)))
    rows = [
        ["transactions per turn", f"{figures['transactions_per_turn']:.2f}"],
        ["  that wrote", f"{figures['writing_per_turn']:.2f}"],
        ["  that only read", f"{figures['reading_per_turn']:.2f}"],
        ["CPU ms per turn (the fake LLM's too)", f"{figures['cpu_ms_per_turn_with_the_fake']:.2f}"],
    ]
    table(f"SQL transactions, {turns} turns through the InboundHandler (SQLite)", ["", ""], rows)
    console.print("  a turn: model -> calculator -> model -> text, as in W1")
    return figures
