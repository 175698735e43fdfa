"""`python -m bench.probe ARGS`: `switchboard ARGS` with every Redis exchange counted.

W3 starts its workers through this module. It wraps two methods of redis-py's asyncio
connection: `send_packed_command` (one write of one or more commands whose replies are then
read: a round trip; a pipeline or a MULTI/EXEC block is one) and `pack_command` (one
command, by name; `EVALSHA` counts once however many commands its script runs). On SIGUSR1
it writes the running totals as JSON to the file named by `SWITCHBOARD_BENCH_COUNTS`, with a
serial number, so the bench can ask for them at the start and end of a measured phase
(`ask_counts`) without the process spending anything on them in between.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
from collections import Counter
from contextvars import ContextVar
from pathlib import Path
from typing import Any

COUNTS_ENV = "SWITCHBOARD_BENCH_COUNTS"

_trips = 0
# Round trips of the process's periodic work, which comes with time, not with turns: the
# heartbeat, the sweep for mailboxes with work waiting, and the look for expired leases after a
# wait for new work that brought nothing.
_periodic_trips = 0
_in_periodic: ContextVar[bool] = ContextVar("bench_periodic", default=False)
# Commands by their first argument as given (str or bytes, `CLIENT SETINFO` whole).
_raw_names: Counter[Any] = Counter()
# Round trips by the code of ours that asked for them (only with SITES_ENV set: it costs).
SITES_ENV = "BENCH_REDIS_SITES"
# A cProfile of the whole process is written to this file when it exits.
PROFILE_ENV = "BENCH_PROFILE_TO"
_sites: Counter[str] = Counter()
# Each round trip's commands, a line each, appended to this file (scripts by their name;
# a periodic round trip marked so).
TRACE_ENV = "BENCH_REDIS_TRACE"
_traced: list[str] = []
# How many times the totals were written (`_report`).
_written = 0
_ROOT = str(Path(__file__).resolve().parent.parent)


def _site() -> str:
    """`module:function` of the innermost frame in core/, channels/ or bots/."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_ROOT) and "/bench/" not in name and "-packages/" not in name:
            module = name[len(_ROOT) + 1 :].removesuffix(".py")
            return f"{module}:{frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def _script_names() -> dict[str, str]:
    """SHA1 -> `module:NAME` of every Lua script a module of core/ holds as a constant."""
    import hashlib
    import importlib
    import pkgutil

    import core

    names: dict[str, str] = {}
    for found in pkgutil.walk_packages(core.__path__, "core."):
        try:
            module = importlib.import_module(found.name)
        except Exception:
            continue
        for name, value in vars(module).items():
            if isinstance(value, str) and "redis.call" in value:
                sha = hashlib.sha1(value.encode()).hexdigest()
                names[sha] = f"{found.name.rsplit('.', 1)[-1]}:{name}"
    return names


def _commands_of(packed: Any, scripts: dict[str, str]) -> list[str]:
    """The command names in one write (RESP arrays), EVALSHA by the script's name."""
    data = packed if isinstance(packed, bytes) else b"".join(bytes(part) for part in packed)
    names: list[str] = []
    at = 0
    while (start := data.find(b"*", at)) != -1:
        try:
            count_end = data.index(b"\r\n", start)
            count = int(data[start + 1 : count_end])
            at = count_end + 2
            arguments: list[bytes] = []
            for _ in range(count):
                size_end = data.index(b"\r\n", at)
                size = int(data[at + 1 : size_end])
                arguments.append(data[size_end + 2 : size_end + 2 + size])
                at = size_end + 2 + size + 2
        except ValueError:
            break
        name = arguments[0].decode(errors="replace").upper() if arguments else "?"
        if name == "EVALSHA" and len(arguments) > 1:
            name = scripts.get(arguments[1].decode(errors="replace"), "EVALSHA")
        names.append(name)
    return names


def install() -> None:
    """Wrap redis-py's asyncio connection so that its exchanges are counted."""
    from redis.asyncio.connection import AbstractConnection

    sites = bool(os.environ.get(SITES_ENV))
    trace = os.environ.get(TRACE_ENV)
    scripts = _script_names() if trace else {}

    def counting(send: Any) -> Any:
        async def counted_send(self: Any, command: Any, check_health: bool = True) -> None:
            global _trips, _periodic_trips
            _trips += 1
            periodic = _in_periodic.get()
            if periodic:
                _periodic_trips += 1
            if sites:
                _sites[_site()] += 1
            if trace:
                names = " ".join(_commands_of(command, scripts))
                _traced.append(f"(periodic) {names}" if periodic else names)
            await send(self, command, check_health)

        return counted_send

    AbstractConnection.send_packed_command = counting(AbstractConnection.send_packed_command)  # type: ignore[method-assign]
    # Its first argument is kept as it came (the names are made when the totals are written:
    # this runs for every command).
    raw = _raw_names

    def counting_pack(pack: Any) -> Any:
        def counted_pack(self: Any, *args: Any) -> Any:
            raw[args[0] if args else b"?"] += 1
            return pack(self, *args)

        return counted_pack

    AbstractConnection.pack_command = counting_pack(AbstractConnection.pack_command)  # type: ignore[method-assign]
    _mark_periodic()


def _periodic(call: Any, *, when: Any = None) -> Any:
    """`call` (a coroutine method) with its Redis writes counted as periodic (only those of
    calls for which `when(args, kwargs)` holds, if given). The mark is a context variable."""

    async def marked(*args: Any, **kwargs: Any) -> Any:
        if when is not None and not when(args, kwargs):
            return await call(*args, **kwargs)
        token = _in_periodic.set(True)
        try:
            return await call(*args, **kwargs)
        finally:
            _in_periodic.reset(token)

    return marked


def _mark_periodic() -> None:
    import weakref

    from core.backends.redis.bus import RedisBus
    from core.backends.redis.mailboxes import RedisMailboxes
    from core.heartbeat import RedisHeartbeats

    RedisHeartbeats.beat = _periodic(RedisHeartbeats.beat)  # type: ignore[method-assign]
    RedisHeartbeats.leave = _periodic(RedisHeartbeats.leave)  # type: ignore[method-assign]
    RedisMailboxes.pending = _periodic(RedisMailboxes.pending)  # type: ignore[method-assign]
    # A look for work after a wait that brought nothing, the waits that follow, and those of a
    # `receive` called again after one that timed out: they are there because time passed.
    # Until a delivery, by bus and queue.
    idle: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

    def is_idle(args: Any, _kwargs: Any) -> bool:
        return args[1] in idle.get(args[0], ())

    RedisBus._take = _periodic(RedisBus._take, when=is_idle)  # type: ignore[method-assign]
    read_new = _periodic(RedisBus._read_new, when=is_idle)

    async def reading_new(bus: Any, queue: str, *args: Any, **kwargs: Any) -> Any:
        delivery = await read_new(bus, queue, *args, **kwargs)
        if delivery is None:
            idle.setdefault(bus, set()).add(queue)
        return delivery

    RedisBus._read_new = reading_new  # type: ignore[method-assign,assignment]
    receive = RedisBus.receive

    async def receiving(bus: Any, queue: str, *args: Any, **kwargs: Any) -> Any:
        delivery = await receive(bus, queue, *args, **kwargs)
        queues = idle.setdefault(bus, set())
        if delivery is None:
            queues.add(queue)
        else:
            queues.discard(queue)
        return delivery

    RedisBus.receive = receiving  # type: ignore[method-assign,assignment]


def _command_names() -> dict[str, int]:
    """The commands counted so far, by name (`CLIENT SETINFO` as `CLIENT`)."""
    names: Counter[str] = Counter()
    for first, count in _raw_names.items():
        name = first.decode() if isinstance(first, bytes) else str(first)
        names[name.split(" ", 1)[0].upper()] += count
    return dict(names)


def snapshot() -> dict[str, Any]:
    """The totals so far: round trips (all, and those of periodic work) and commands by name."""
    return {
        "round_trips": _trips,
        "periodic_round_trips": _periodic_trips,
        "commands": _command_names(),
        "sites": dict(_sites),
    }


def _write_trace() -> None:
    """Append the round trips traced since the last call to the `TRACE_ENV` file."""
    trace = os.environ.get(TRACE_ENV)
    if not trace or not _traced:
        return
    lines = [_traced.pop(0) for _ in range(len(_traced))]
    with open(trace, "a", encoding="utf-8") as out:
        out.writelines(f"{line}\n" for line in lines)


def _report(path: Path) -> None:
    """Write the totals to `path` (atomically), numbered one more than the last write."""
    global _written
    _written += 1
    _write_trace()
    spare = path.with_suffix(".tmp")
    spare.write_text(json.dumps({**snapshot(), "serial": _written}))
    spare.replace(path)


def read_counts(path: Path) -> dict[str, Any]:
    """The totals a probed process last wrote (zeros before it wrote any)."""
    try:
        found: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"round_trips": 0, "periodic_round_trips": 0, "commands": {}, "serial": 0}
    return found


async def ask_counts(pid: int, path: Path) -> dict[str, Any]:
    """The totals of the probed process `pid` as of now: it is asked (SIGUSR1) and its
    answer awaited (the file's serial number moves on), for up to 10 s."""
    import asyncio

    before = read_counts(path).get("serial", 0)
    os.kill(pid, signal.SIGUSR1)
    # Another process writes the file: it is looked at every 5 ms.
    for _ in range(2000):
        found = read_counts(path)
        if found.get("serial", 0) != before:
            return found
        await asyncio.sleep(0.005)
    raise RuntimeError(f"process {pid} did not write its counts to {path} within 10 s")


def main() -> None:
    """Count, then run the `switchboard` command line with this process's arguments."""
    install()
    atexit.register(_write_trace)
    target = os.environ.get(COUNTS_ENV)
    if target:
        signal.signal(signal.SIGUSR1, lambda _signal, _frame: _report(Path(target)))
    from bots.cli import main as switchboard

    profile = os.environ.get(PROFILE_ENV)
    if not profile:
        switchboard(sys.argv[1:])
        return
    import cProfile

    profiler = cProfile.Profile()
    try:
        profiler.runcall(switchboard, sys.argv[1:])
    finally:
        profiler.dump_stats(profile)


if __name__ == "__main__":
    main()
