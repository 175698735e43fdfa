"""A real `switchboard chat` killed mid-turn, then `switchboard recover --resume` finishes it.

The OpenAI fake answers the first model call with a calculator call; the second call (after
the tool round) hangs, and the process is SIGKILLed while it waits. The turn is then left as a
crash leaves it; `recover` lists it and `--resume` completes it against the fake.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from tests.e2e.processes import clean_env, communicate, run_once
from tests.fakes import FakeOpenAI, Stall, Text, ToolUse

pytestmark = pytest.mark.e2e

SWITCHBOARD = Path(sys.executable).with_name("switchboard")


async def test_a_chat_killed_mid_turn_is_listed_and_resumed(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        ToolUse([("call_1", "calculator", {"expression": "17*23"})]),
        Stall(30),  # the model call after the tool round never answers
    )
    env = clean_env(tmp_path, redis_url=None, openai=fake_openai)
    chat = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        "chat",
        "--session",
        "killed",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert chat.stdin is not None
    chat.stdin.write(b"what is 17*23?\n")
    await chat.stdin.drain()
    try:
        # The second request (it carries the tool result) means the tool round is stored.
        for _ in range(300):
            if len(fake_openai.requests) >= 2:
                break
            await asyncio.sleep(0.05)  # waiting on another process, bounded
        assert len(fake_openai.requests) >= 2
    finally:
        chat.send_signal(signal.SIGKILL)
        await communicate(chat)  # reaped, its pipes read to the end

    code, listed, err = await run_once(["recover"], env, tmp_path)
    assert code == 0, err
    assert "terminal:local:killed" in listed
    assert "what is 17*23?" in listed
    run_key = next(
        word for line in listed.splitlines() for word in line.split() if word.count(":") >= 3
    )

    fake_openai.script(Text("It is 391."))
    code, resumed, err = await run_once(["recover", "--resume", run_key], env, tmp_path)
    assert code == 0, err
    assert "It is 391." in resumed
    # The resumed call carried the stored tool round, not a second copy of the question.
    last = fake_openai.requests[-1].json["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == ["what is 17*23?"]
    assert any(m["role"] == "tool" and "391" in m["content"] for m in last)

    code, again, err = await run_once(["recover"], env, tmp_path)
    assert code == 0, err
    assert "No unfinished turns." in again

    # Nothing doubled: the answer was printed once and is stored once beside one question,
    # and the conversation, taken up again, answers only what is asked now.
    assert resumed.count("It is 391.") == 1
    fake_openai.script(Text("You are welcome."))
    chat = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        "chat",
        "--session",
        "killed",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    out, err_bytes = await communicate(chat, b"thanks\n", timeout=45)
    assert chat.returncode == 0, err_bytes.decode()
    assert out.decode().strip() == "You are welcome."
    code, shown, err = await run_once(["sessions", "show", "killed"], env, tmp_path)
    assert code == 0, err
    assert shown.count("what is 17*23?") == 1
    assert shown.count("It is 391.") == 1
    assert shown.count("You are welcome.") == 1
