"""A `terminal` schedule fires in an interactive `switchboard chat` and shows above the prompt.

The real command on a pseudo-terminal (prompt_toolkit and rich as a person has them); the
model is the OpenAI fake. The schedule is a one-off made with the CLI one second ahead.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from channels.terminal import NOTIFICATION_LABEL
from tests.e2e import processes
from tests.e2e.test_interactive_chat import SWITCHBOARD, Terminal
from tests.fakes import FakeOpenAI, Text

pytestmark = pytest.mark.e2e


async def test_a_scheduled_message_is_printed_above_the_prompt(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    env = processes.clean_env(tmp_path, redis_url=None, openai=fake_openai)
    added = await asyncio.to_thread(
        subprocess.run,
        [
            str(SWITCHBOARD),
            "schedule",
            "add",
            *("--in", "1s", "--misfire", "run_once", "--deliver-to", "terminal"),
            *("--prompt", "Remind me to stand up"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    fake_openai.script(Text("Time to stand up!"))
    env.update(SWITCHBOARD_PROVIDER="openai", TERM="xterm", SWITCHBOARD_LOG_LEVEL="warning")
    chat = Terminal([str(SWITCHBOARD), "chat"], env, tmp_path)
    try:
        await chat.expect("you>")
        await chat.expect(f"{NOTIFICATION_LABEL}")
        await chat.expect("Time to stand up!")
        shown_at = chat.screen.index("Time to stand up!")
        # The prompt is drawn again below the message, and still takes input.
        chat.type("/quit\r")
        await chat.expect("Resume this conversation with:")
        assert await chat.close() == 0
    finally:
        if chat.process.poll() is None:
            chat.process.kill()
        await chat.close()
    assert "you>" in chat.screen[shown_at:], chat.screen
