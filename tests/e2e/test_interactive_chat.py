"""`switchboard chat` on a terminal: the real command in a pseudo-terminal, keys typed into it.

prompt_toolkit and rich run as they do for a person; the model is the OpenAI fake, slowed
down so there is time to press Ctrl-C while it thinks.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import re
import subprocess
import sys
import termios
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import processes
from tests.fakes import FakeOpenAI, Text

pytestmark = pytest.mark.e2e

SWITCHBOARD = Path(sys.executable).with_name("switchboard")
PATIENCE = 20.0
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _own_terminal() -> None:
    """In the child: a session of its own whose controlling terminal is the pty (stdin), so
    Ctrl-C typed into it reaches the program as SIGINT, as in a real terminal."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A process on a pseudo-terminal: `type` keys, `expect` text on its screen."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self._master, slave = pty.openpty()
        self.process = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=cwd,
            close_fds=True,
            preexec_fn=_own_terminal,
        )
        os.close(slave)
        self.screen = ""
        self._more = asyncio.Event()
        asyncio.get_running_loop().add_reader(self._master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self._master)
        self.screen += _ANSI.sub(b"", data).decode(errors="replace")
        self._more.set()

    def type(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    async def expect(self, text: str) -> None:
        """Wait until `text` is on the screen (fails with the screen after PATIENCE)."""
        try:
            async with asyncio.timeout(PATIENCE):
                while text not in self.screen:
                    self._more.clear()
                    await self._more.wait()
        except TimeoutError:
            raise AssertionError(f"{text!r} never showed; the screen:\n{self.screen}") from None

    async def close(self) -> int:
        """Wait for the program to end; its exit code. Safe to call again."""
        async with asyncio.timeout(PATIENCE):
            code = await asyncio.to_thread(self.process.wait)
        if self._master >= 0:
            with contextlib.suppress(ValueError):
                asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._master = -1
        return code


@pytest.fixture
async def chat(fake_openai: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Terminal]:
    env = processes.clean_env(tmp_path, redis_url=None, openai=fake_openai)
    env.update(SWITCHBOARD_PROVIDER="openai", TERM="xterm", SWITCHBOARD_LOG_LEVEL="warning")
    terminal = Terminal([str(SWITCHBOARD), "chat"], env, tmp_path)
    try:
        yield terminal
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
        await terminal.close()


async def test_ctrl_c_while_the_model_thinks_cancels_and_the_call_is_charged(
    chat: Terminal, fake_openai: FakeOpenAI
) -> None:
    asked, released = asyncio.Event(), asyncio.Event()

    async def thinks(_body: dict[str, Any]) -> Text:
        asked.set()
        await released.wait()  # until the test is over: the answer never comes in time
        return Text("too late")

    fake_openai.script(thinks)
    await chat.expect("you>")
    chat.type("tell me a long story\r")
    async with asyncio.timeout(PATIENCE):
        await asked.wait()

    chat.type("\x03")  # Ctrl-C
    await chat.expect("Cancelled.")
    released.set()
    chat.type("/cost\r")
    await chat.expect("over 1 model call")
    chat.type("/quit\r")
    await chat.expect("Resume this conversation with:")
    assert await chat.close() == 0

    # The hint names this very program (not on PATH here) and the session just used.
    hint = re.search(r"Resume this conversation with: (\S+) chat --session (\w+)", chat.screen)
    assert hint is not None, chat.screen
    assert hint.group(1) == str(SWITCHBOARD)


async def test_an_answer_then_quit_leaves_a_hint_that_resumes_the_conversation(
    chat: Terminal, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(Text("Once upon a time."))
    await chat.expect("you>")
    chat.type("a story please\r")
    await chat.expect("Once upon a time.")
    chat.type("/quit\r")
    await chat.expect("Resume this conversation with:")
    assert await chat.close() == 0

    hint = re.search(r"chat --session (\w+)", chat.screen)
    assert hint is not None, chat.screen
    env = processes.clean_env(tmp_path, redis_url=None)
    shown = await asyncio.to_thread(
        subprocess.run,
        [str(SWITCHBOARD), "sessions", "show", hint.group(1)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "a story please" in shown.stdout
    assert "Once upon a time." in shown.stdout


async def test_a_spinner_shows_while_the_model_thinks(
    chat: Terminal, fake_openai: FakeOpenAI
) -> None:
    asked, released = asyncio.Event(), asyncio.Event()

    async def thinks(_body: dict[str, Any]) -> Text:
        asked.set()
        await released.wait()
        return Text("Here it is.")

    fake_openai.script(thinks)
    await chat.expect("you>")
    chat.type("think hard\r")
    async with asyncio.timeout(PATIENCE):
        await asked.wait()
    await chat.expect("thinking…")  # a sign of life before the first word
    released.set()
    await chat.expect("Here it is.")
    chat.type("/quit\r")
    await chat.expect("Resume this conversation with:")
    assert await chat.close() == 0
