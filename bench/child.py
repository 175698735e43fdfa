"""One measured run in a process of its own (so memory figures are that run's alone).

`python -m bench.child turns --engine ENGINE --vendor V --url U --sessions N --turns T
--data DIR` runs N sessions side by side, T turns each, and prints its figures as JSON on the
last line. ENGINE `floor` is the SDK loop (`bench.floor`); `bare` and `bare-whole` are the
no-SDK loop (`bench.bare`), streamed and not; `ours` goes through Switchboard's own wiring
(`bots.app.embedded`: the profile's prompt, every built-in tool, memory, redaction, budgets,
SQLite); the settings come from the environment `bench.common.provider_env` builds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.common import ANSWER, BenchError, peak_rss_mb, rss_mb

Turn = Callable[[str, str], Awaitable[str]]


async def measure_turns(turn: Turn, sessions: int, turns: int) -> dict[str, Any]:
    """Run `sessions` conversations at once, `turns` messages each, one after the other."""
    wall_ms: list[float] = []
    cpu_ms: list[float] = []
    wrong: list[str] = []

    async def conversation(index: int) -> None:
        session = f"bench-{index}"
        for number in range(turns):
            started, cpu = time.perf_counter(), time.process_time()
            answer = await turn(session, f"what is 17*23? (message {number + 1})")
            wall_ms.append((time.perf_counter() - started) * 1000)
            cpu_ms.append((time.process_time() - cpu) * 1000)
            if answer != ANSWER:
                wrong.append(answer)

    # One turn in a conversation of its own first, for both engines alike: connections,
    # lazily loaded code and first-use caches are not what the workloads measure.
    if await turn("warm-up", "what is 17*23?") != ANSWER:
        raise BenchError("the warm-up turn did not end with the expected answer")
    rss_before = rss_mb()
    cpu_started, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(conversation(i) for i in range(sessions)))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    if wrong:
        raise BenchError(f"{len(wrong)} turn(s) did not end with the expected answer: {wrong[0]!r}")
    total = sessions * turns
    return {
        "sessions": sessions,
        "turns_per_session": turns,
        "turns": total,
        "wall_s": wall,
        "turns_per_s": total / wall,
        # Per-turn wall times in completion order (for one session: turn order).
        "turn_ms": wall_ms,
        # Per-turn CPU is only the turn's own when turns do not overlap (one session).
        "turn_cpu_ms": cpu_ms if sessions == 1 else [],
        "cpu_ms_per_turn": cpu * 1000 / total,
        "rss_before_mb": rss_before,
        "peak_rss_mb": peak_rss_mb(),
    }


async def floor_turns(args: argparse.Namespace) -> dict[str, Any]:
    from bench.bare import BareLoop
    from bench.floor import FloorLoop

    database = str(Path(args.data) / "floor.db")
    loop: FloorLoop | BareLoop
    if args.engine == "floor":
        loop = FloorLoop(args.vendor, args.url, database)
    else:
        loop = BareLoop(args.vendor, args.url, database, stream=args.engine == "bare")
    try:
        return await measure_turns(loop.turn, args.sessions, args.turns)
    finally:
        await loop.aclose()


async def our_turns(args: argparse.Namespace) -> dict[str, Any]:
    from bots.app import embedded
    from bots.profiles import load_profile
    from bots.settings import load_settings
    from core.events import RunCompleted, RunFailed
    from core.messages import Message
    from core.runtime import ChannelContext

    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)
    async with embedded(settings, profile) as parts:
        runtime, store = parts.runtime, parts.store
        mode = parts.worker.handler.contexts.modes.get("safe-chat")
        sessions: dict[str, str] = {}

        async def turn(key: str, text: str) -> str:
            if key not in sessions:
                sessions[key] = (await store.create_session(f"terminal:default:{key}")).id
            context = ChannelContext(
                platform="terminal", mode=mode, session_key=key, user_id=key, user_name="bench"
            )
            answer = ""
            async for event in runtime.run(sessions[key], Message.user(text), context):
                if isinstance(event, RunCompleted):
                    answer = event.text
                elif isinstance(event, RunFailed):
                    answer = f"failed: {event.failure}: {event.message} {event.detail}"
            return answer

        return await measure_turns(turn, args.sessions, args.turns)


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    from bench.driver import ChatDriver
    from bench.soak import CONVERSATIONS_AT_ONCE, MESSAGES_PER_CONVERSATION, SAMPLE_EVERY
    from bots.app import backends, worker_for
    from bots.profiles import load_profile
    from bots.settings import load_settings

    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)
    samples: list[tuple[int, float]] = []
    async with (
        backends(settings) as found,
        worker_for(settings, profile, found, concurrency=CONVERSATIONS_AT_ONCE) as parts,
    ):
        working = asyncio.create_task(parts.worker.run())
        try:
            async with ChatDriver(parts.bus, found.mailboxes) as driver:

                def sample() -> None:
                    if driver.answered % SAMPLE_EVERY == 0:
                        samples.append((driver.answered, rss_mb()))

                samples.append((0, rss_mb()))
                started = time.perf_counter()
                await driver.conversations(
                    args.messages // MESSAGES_PER_CONVERSATION,
                    MESSAGES_PER_CONVERSATION,
                    at_once=CONVERSATIONS_AT_ONCE,
                    after_turn=sample,
                )
                wall = time.perf_counter() - started
        finally:
            await parts.worker.stop(grace=5)
            working.cancel()
            await asyncio.gather(working, return_exceptions=True)
    return {
        "messages": driver.answered,
        "wall_s": wall,
        "rss_samples": samples,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.child")
    sub = parser.add_subparsers(dest="command", required=True)
    turns = sub.add_parser("turns", help="sessions x turns through one engine")
    turns.add_argument(
        "--engine",
        choices=["ours", "floor", "bare", "bare-whole"],
        required=True,
        help="floor: the SDK loop; bare: no SDK, streamed; bare-whole: no SDK, not streamed",
    )
    turns.add_argument("--vendor", choices=["openai", "anthropic"], required=True)
    turns.add_argument("--url", required=True)
    turns.add_argument("--sessions", type=int, default=1)
    turns.add_argument("--turns", type=int, default=200)
    turns.add_argument("--data", required=True)
    turns.add_argument("--profile", help="write a pyinstrument profile (text) to this file")
    soaking = sub.add_parser("soak", help="messages through the worker path, RSS sampled")
    soaking.add_argument("--url", required=True)
    soaking.add_argument("--messages", type=int, default=10_000)
    soaking.add_argument("--data", required=True)
    args = parser.parse_args()
    try:
        print(json.dumps(_run(args)))
    except BenchError as exc:
        sys.exit(f"bench.child: {exc}")


def _run(args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "soak":
        return asyncio.run(soak(args))
    run = our_turns if args.engine == "ours" else floor_turns
    if args.profile:
        from pyinstrument import Profiler

        with Profiler(async_mode="enabled", interval=0.0005) as profiler:
            result = asyncio.run(run(args))
        Path(args.profile).write_text(profiler.output_text(unicode=True, show_all=False))
        return result
    return asyncio.run(run(args))


if __name__ == "__main__":
    main()
