"""`switchboard serve` as a user runs it, a subprocess, answering on Discord.

The real discord.py in the process talks to the Discord fake (gateway websocket and REST, found
through DISCORD_API_URL and DISCORD_GATEWAY_URL); the model is the OpenAI fake, answering by
what it is asked. Both fakes run in the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from core.stopping import STOP_BUTTON, STOPPED
from tests.e2e.processes import START_PATIENCE, Deployment, clean_env, until
from tests.fakes import FakeDiscord, FakeOpenAI, Hold, Text, ToolUse
from tests.fakes.discord_api import SentMessage
from tests.fakes.discord_events import CHANNEL, GUILD

pytestmark = pytest.mark.e2e

ALICE = 42
BOB = 43
SHOUT = f"Hey @everyone and @here, <@&{GUILD}> and <@{BOB}>: can you hear me?"
_FENCE = re.compile(r"^```", re.MULTILINE)


def _long_answer() -> str:
    """About 10,000 characters: prose around a long Python block."""
    prose = "\n\n".join(f"Part {n}: " + "a sentence that explains things. " * 14 for n in range(9))
    code = "\n".join(f"def step_{n:03d}(x):\n    return x * {n}" for n in range(130))
    return f"{prose}\n\n```python\n{code}\n```\n\nThe end."


LONG = _long_answer()


def _asked(body: dict[str, Any]) -> str:
    """The text of the last message of a Chat Completions request."""
    content = body["messages"][-1].get("content") or ""
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def answer(body: dict[str, Any]) -> Text | ToolUse | Hold:
    """The model: the calculator for 6*7, a long answer, a story that never ends (until the
    turn is stopped), a shout, else an echo."""
    if body["messages"][-1]["role"] == "tool":
        return Text("The calculator says 6*7 = 42.")
    asked = _asked(body)
    if "6*7" in asked:
        return ToolUse([("call_1", "calculator", {"expression": "6*7"})])
    if "story" in asked:
        return Hold("Once upon a time")
    if "long" in asked:
        return Text(LONG, chunk=500)
    if "shout" in asked:
        return Text(SHOUT)
    return Text(f"You said: {asked}")


async def _reply(fake: FakeDiscord, channel_id: int, needle: str) -> SentMessage:
    def found() -> SentMessage | None:
        return next((m for m in fake.messages.get(channel_id, []) if needle in m.content), None)

    await fake.until(lambda: found() is not None, f"{needle!r} in {channel_id}", START_PATIENCE)
    message = found()
    assert message is not None
    return message


def discord_env(
    fake: FakeDiscord, openai: FakeOpenAI, tmp_path: Path, redis_url: str | None = None
) -> dict[str, str]:
    """No credentials of the machine; the fakes' endpoints and the test bot's token."""
    openai.script(*[answer] * 50)
    return clean_env(
        tmp_path,
        redis_url=redis_url,
        openai=openai,
        SWITCHBOARD_LOG_LEVEL="debug,libraries=debug",
        DISCORD_BOT_TOKEN=fake.token,
        DISCORD_API_URL=fake.api_url,
        DISCORD_GATEWAY_URL=fake.gateway_url,
    )


@pytest.fixture
def env(fake_discord: FakeDiscord, fake_openai: FakeOpenAI, tmp_path: Path) -> dict[str, str]:
    return discord_env(fake_discord, fake_openai, tmp_path)


async def test_serve_answers_on_discord(
    fake_discord: FakeDiscord, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_discord
    async with Deployment(env, tmp_path) as deployment:
        served = await deployment.start("serve")
        await deployment.ready(fake.wait_ready(START_PATIENCE))
        assert [c["name"] for c in fake.commands] == [
            "ask",
            "new",
            "cost",
            "stop",
            "model",
            "help",
            "schedules",
            "unschedule",
            "compact",
            "fork",
            "sessions",
            "switch",
            "forgetme",
        ]

        # A DM: answered in the DM channel, through the calculator tool.
        fake.dm(ALICE, "what is 6*7?")
        dm = fake.dm_channel_id(ALICE)
        assert "42" in (await _reply(fake, dm, "The calculator says")).content

        # A server channel: not addressed, not answered; the mention after it is.
        fake.post(CHANNEL, "talking among ourselves", user_id=ALICE)
        fake.post(CHANNEL, "hello bot", user_id=ALICE, mention=True)
        await _reply(fake, CHANNEL, "You said: hello bot")
        assert len(fake.sent_texts(CHANNEL)) == 1

        # A long answer: several messages, each within the limit with its fences closed.
        fake.dm(ALICE, "a long one please")
        await _reply(fake, dm, "The end.")
        long_parts = fake.sent_texts(dm)[1:]
        assert len(long_parts) >= 5, [len(t) for t in long_parts]
        assert all(len(text) <= 2000 for text in long_parts)
        assert all(len(_FENCE.findall(text)) % 2 == 0 for text in long_parts)

        # Mentions the model writes ping nobody: only the asker, by the reply itself.
        fake.post(CHANNEL, "shout something", user_id=ALICE, mention=True)
        shout = await _reply(fake, CHANNEL, "can you hear me?")
        assert shout.pings == {f"user:{ALICE}"}
        allowed = fake.requests_named("create_message", CHANNEL)[-1].body["allowed_mentions"]
        assert allowed["parse"] == [] and [int(u) for u in allowed["users"]] == [ALICE]

        # /ask: deferred ("thinking…"), then the answer edited into the original response.
        ask = fake.slash("ask", channel_id=CHANNEL, user_id=BOB, options={"question": "why?"})
        answered = await _reply(fake, CHANNEL, "You said: why?")
        assert answered.interaction_id == int(ask["id"])
        [callback] = fake.requests_named("interaction_callback")
        assert callback.body["type"] == 5
        [edit] = fake.requests_named("edit_webhook_message")
        assert edit.index > callback.index and edit.path.endswith("/messages/@original")

        # A reconnect that replays the last message: it is not answered twice.
        count = len(fake.sent_texts(dm))
        fake.dm(ALICE, "once only")
        await _reply(fake, dm, "You said: once only")
        fake.request_reconnect(replay=1)
        await fake.wait_resumed()
        fake.dm(ALICE, "after the resume")
        await _reply(fake, dm, "You said: after the resume")
        assert len(fake.sent_texts(dm)) == count + 2

        assert await served.stop() == 0

        # Started again: the slash commands are unchanged, so they are not registered again.
        again = await deployment.start("serve")
        await deployment.ready(fake.wait_ready(START_PATIENCE, sessions=2))
        assert len(fake.requests_named("get_commands")) == 2
        assert len(fake.requests_named("put_commands")) == 1
        assert await again.stop() == 0

    for process in (served, again):
        log = process.log
        assert "Traceback" not in log, log
        assert "DEBUG discord" in log  # discord.py's own debug lines were written
        assert fake.token not in log
        assert json.dumps(fake.token)[1:-1] not in log


def _stop_ids(message: SentMessage) -> list[str]:
    """The custom ids of the buttons `message` carries now."""
    return [button["custom_id"] for row in message.components or [] for button in row["components"]]


async def test_serve_stops_a_discord_answer_with_stop(
    fake_discord: FakeDiscord, fake_openai: FakeOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    """`/stop` (the slash command) during a long answer: the model call is dropped, the answer
    keeps its text with a line saying it was stopped (its Stop button gone), and the next
    message is answered."""
    fake = fake_discord
    async with Deployment(env, tmp_path) as deployment:
        served = await deployment.start("serve")
        await deployment.ready(fake.wait_ready(START_PATIENCE))
        fake.dm(ALICE, "tell me a long story")
        dm = fake.dm_channel_id(ALICE)
        answer = await _reply(fake, dm, "Once upon a time")
        await fake.until(
            lambda: _stop_ids(answer) == [STOP_BUTTON], "the Stop button", START_PATIENCE
        )

        stop = fake.slash("stop", user_id=ALICE)

        await fake.until(lambda: "— stopped" in answer.content, "the stopped line", START_PATIENCE)
        said_stopped = await _reply(fake, dm, STOPPED)
        await asyncio.wait_for(fake_openai.dropped.wait(), START_PATIENCE)
        edits = answer.edits
        fake.dm(ALICE, "and the short version?")
        await _reply(fake, dm, "You said: and the short version?")
        assert await served.stop() == 0

    assert answer.content.startswith("Once upon a time")
    assert answer.components is None  # the Stop button is gone
    assert answer.edits == edits  # nothing more was streamed into the stopped answer
    [last_edit] = [
        request
        for request in fake.requests_named("edit_message", dm)
        if request.path.endswith(f"/{answer.id}") and "— stopped" in request.body["content"]
    ]
    assert last_edit.body["components"] == []
    assert said_stopped.interaction_id == int(stop["id"])
    assert fake.sent_texts(dm) == [answer.content, STOPPED, "You said: and the short version?"]
    assert len(fake_openai.requests) == 2
    log = served.log
    assert "Traceback" not in log, log
    assert fake.token not in log


@pytest.mark.timeout(90)
async def test_gateway_discord_serves_workers_over_redis_one_connection_at_a_time(
    redis_url: str, fake_discord: FakeDiscord, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_discord
    env = discord_env(fake, fake_openai, tmp_path, redis_url)
    took, standing_by = r"took discord-gateway:", r"holds discord-gateway:\S+; standing by"
    async with Deployment(env, tmp_path) as deployment:
        gateways = [await deployment.start("gateway", "discord") for _ in range(2)]
        worker = await deployment.start("worker")

        async def one_active_one_standby() -> bool:
            active = [g for g in gateways if re.search(took, g.log)]
            waiting = [g for g in gateways if re.search(standing_by, g.log)]
            return len(active) == 1 and len(waiting) == 1 and active != waiting

        await until(one_active_one_standby, 20, "one active gateway", deployment.describe)
        [active] = [g for g in gateways if re.search(took, g.log)]
        [standby] = [g for g in gateways if g is not active]
        await deployment.ready(fake.wait_ready(START_PATIENCE))
        await worker.until_logged("taking work")
        fake.dm(ALICE, "hello over redis")
        dm = fake.dm_channel_id(ALICE)
        await deployment.ready(_reply(fake, dm, "You said: hello over redis"))

        assert await active.stop() == 0, active.describe()
        await standby.until_logged(took, 20)
        await deployment.ready(fake.wait_ready(START_PATIENCE, sessions=2))
        fake.dm(ALICE, "and after the switch")
        await deployment.ready(_reply(fake, dm, "You said: and after the switch"))
        assert len(fake.identifies) == 2  # never two connections at once
        assert fake.sent_texts(dm) == [
            "You said: hello over redis",
            "You said: and after the switch",
        ]
