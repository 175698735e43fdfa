"""Processes that start MCP servers stop them when they stop, even a server that lingers.

The hand-written server of `tests/fakes/mcp_servers.py` keeps running after its input ends
and ignores SIGTERM (as a server with a background timer may): only the SDK's last step, a
SIGKILL, ends it. A piped `switchboard chat` must still exit at the end of its input, and a
`switchboard worker` on SIGTERM, each leaving no server process behind. The waits are
generous and nothing is timed: the outcome is what the test asserts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import (
    REPO,
    SWITCHBOARD,
    Deployment,
    clean_env,
    communicate,
    open_profiles,
    until,
)

pytestmark = pytest.mark.e2e

# Long enough for a loaded machine; an exit that never comes fails here instead of hanging.
PATIENCE = 45.0


def _declare_lingering_server(profiles: Path, pid_file: Path, *flags: str) -> None:
    """Add the lingering server (with `flags`) to the default profile under `profiles`."""
    command = [
        sys.executable,
        "-m",
        "tests.fakes.mcp_servers",
        "plain",
        "--linger",
        "--ignore-sigterm",
        "--pid-file",
        str(pid_file),
        *flags,
    ]
    with (profiles / "default" / "profile.toml").open("a", encoding="utf-8") as toml:
        toml.write(
            f"\n[mcp.linger]\ncommand = {json.dumps(command)}\n"
            f'cwd = {json.dumps(str(REPO))}\ntier = "read_only"\n'
            # A server that never answers keeps its client starting for this long.
            "startup_timeout = 600\n"
        )


def _written_pid(path: Path) -> int | None:
    """The pid the server wrote, once it has."""
    text = path.read_text() if path.exists() else ""
    return int(text) if text else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def pid_file(tmp_path: Path) -> Iterator[Path]:
    """Where the server writes its pid; a server a failing run left behind is killed."""
    path = tmp_path / "server.pid"
    yield path
    if (pid := _written_pid(path)) is not None and _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def test_a_piped_chat_exits_at_the_end_of_input_and_stops_the_server(
    tmp_path: Path, pid_file: Path
) -> None:
    env = clean_env(tmp_path, redis_url=None)
    _declare_lingering_server(open_profiles(tmp_path), pid_file)
    process = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        "chat",
        env=env,
        cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await communicate(process, b"hello\n", timeout=PATIENCE)

    assert process.returncode == 0, stderr.decode()
    assert "hello" in stdout.decode()
    pid = _written_pid(pid_file)
    assert pid is not None and not _alive(pid), "the MCP server outlived the chat"


async def test_a_worker_exits_on_sigterm_and_stops_the_server(
    tmp_path: Path, pid_file: Path, redis_url: str
) -> None:
    env = clean_env(tmp_path, redis_url=redis_url)
    _declare_lingering_server(open_profiles(tmp_path), pid_file)
    async with Deployment(env, tmp_path) as deployment:
        worker = await deployment.start("worker")
        await worker.until_logged("worker started")

        async def started() -> bool:
            return _written_pid(pid_file) is not None

        await until(started, PATIENCE, "the MCP server wrote its pid", deployment.describe)
        pid = _written_pid(pid_file)
        assert pid is not None and _alive(pid)

        worker.send_signal(signal.SIGTERM)
        assert await worker.wait(PATIENCE) == 0, worker.describe()

    assert not _alive(pid), "the MCP server outlived the worker"


async def test_a_worker_stopped_while_its_mcp_server_starts_exits_and_stops_the_server(
    tmp_path: Path, pid_file: Path, redis_url: str
) -> None:
    env = clean_env(tmp_path, redis_url=redis_url)
    _declare_lingering_server(open_profiles(tmp_path), pid_file, "--mute")
    async with Deployment(env, tmp_path) as deployment:
        worker = await deployment.start("worker")

        async def started() -> bool:
            return _written_pid(pid_file) is not None

        await until(started, PATIENCE, "the MCP server wrote its pid", deployment.describe)
        pid = _written_pid(pid_file)
        assert pid is not None and _alive(pid)
        assert "worker started" not in worker.log  # still waiting for the server

        worker.send_signal(signal.SIGTERM)
        assert await worker.wait(PATIENCE) == 0, worker.describe()

    assert not _alive(pid), "the MCP server outlived the worker"


async def test_a_chat_exits_on_sigterm_and_stops_the_server(tmp_path: Path, pid_file: Path) -> None:
    env = clean_env(tmp_path, redis_url=None)
    _declare_lingering_server(open_profiles(tmp_path), pid_file)
    process = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        "chat",
        env=env,
        cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"hello\n")  # and the input stays open
        await process.stdin.drain()
        async with asyncio.timeout(PATIENCE):
            while b"hello" not in await process.stdout.readline():
                pass
        pid = _written_pid(pid_file)
        assert pid is not None and _alive(pid)

        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(PATIENCE):
            await process.stdout.read()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
        await process.communicate()  # closes its input and drains its output

    assert not _alive(pid), "the MCP server outlived the chat"
