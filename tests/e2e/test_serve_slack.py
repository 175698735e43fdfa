"""`switchboard serve` as a user runs it, a subprocess, talking to the Slack fake.

The fake runs in the test's event loop; the process finds it through SLACK_API_URL. Events
reach the process as signed HTTP requests (SLACK_SIGNING_SECRET) or over the fake's Socket
Mode websocket (SLACK_APP_TOKEN). The demo provider answers unless a test points the process
at the Anthropic fake.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from channels.slack.format import SLACK_LIMIT
from core.stopping import STOP_BUTTON, STOPPED
from tests.e2e.processes import Deployment, clean_env, open_profiles
from tests.e2e.served import serve
from tests.fakes import FakeAnthropic, Hold, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.fakes.slack_api import FakeSlack, SentMessage
from tests.fakes.slack_events import DM_CHANNEL, GENERAL
from tests.integration.slack_helpers import code_blocks, reply_containing, unescape
from tests.redis_server import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWITCHBOARD = Path(sys.executable).with_name("switchboard")
RANDOM = "C0RANDOM"
# Starting the process imports slack-bolt and opens the database: allow for a slow machine.
# Only reached when something is broken.
START_PATIENCE = 20.0
STOP_PATIENCE = 5.0
REPLY_PATIENCE = 10.0


@pytest.fixture
def env(fake_slack: FakeSlack, tmp_path: Path) -> dict[str, str]:
    """A clean environment: own data dir, the repo's profiles, no keys, the fake's URL."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL", "_SECRET"))
        and not k.startswith(("SWITCHBOARD_", "TELEGRAM_", "SLACK_", "DISCORD_"))
    }
    keep.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_PROFILES_DIR=str(open_profiles(tmp_path)),
        SWITCHBOARD_LOG_LEVEL="debug,libraries=debug",
        SLACK_BOT_TOKEN=fake_slack.bot_token,
        SLACK_API_URL=fake_slack.api_url,
    )
    return keep


async def test_serve_answers_slack_events_over_http(
    fake_slack: FakeSlack, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_slack
    port = free_port()
    env.update(SLACK_SIGNING_SECRET=fake.signing_secret, SLACK_PORT=str(port))
    url = f"http://127.0.0.1:{port}/slack/events"
    async with serve(env, tmp_path) as served:
        await served.until_ready(served.logged("slack events API listening"))

        assert await fake.url_verification(url, "3eZbrw1aBm2rZgRNFdxV") == (
            200,
            '{"challenge": "3eZbrw1aBm2rZgRNFdxV"}',
        )
        intruder = fake.dm("let me in")
        assert (await fake.post_event(url, intruder, secret="not-the-secret"))[0] == 401
        stale = int(time.time()) - 10 * 60
        assert (await fake.post_event(url, intruder, timestamp=stale))[0] == 401

        question = fake.dm("what is 6*7?")
        assert (await fake.post_event(url, question))[0] == 200
        answer = await reply_containing(fake, DM_CHANNEL, "worked out with the calculator")
        assert "42" in answer.text and answer.thread_ts is None

        # Slack's retry of the same event: acknowledged, not answered again (the next message
        # of the same conversation shows the retry was handled).
        assert (await fake.post_event(url, question, retry_num=1))[0] == 200
        assert (await fake.post_event(url, fake.dm("next one")))[0] == 200
        await reply_containing(fake, DM_CHANNEL, "You said: next one")
        assert sum("calculator" in text for text in fake.sent_texts(DM_CHANNEL)) == 1

        # A mention, sent as Slack does twice (`message` and `app_mention`): one reply, in the
        # mention's thread.
        mention = fake.channel_message("hello bot", mention=True)
        assert (await fake.post_event(url, mention))[0] == 200
        assert (await fake.post_event(url, fake.app_mention_for(mention)))[0] == 200
        reply = await reply_containing(fake, GENERAL, "You said: hello bot")
        assert reply.thread_ts == mention["event"]["ts"]

        # Not addressed, not answered; a mention later in its thread is, and only that.
        chatter = fake.channel_message("talking among ourselves", channel=RANDOM)
        assert (await fake.post_event(url, chatter))[0] == 200
        root = chatter["event"]["ts"]
        follow = fake.channel_message(
            "what do you say?", channel=RANDOM, mention=True, thread_ts=root
        )
        assert (await fake.post_event(url, follow))[0] == 200
        await reply_containing(fake, RANDOM, "You said: what do you say?")

        assert await served.terminate(STOP_PATIENCE) == 0

    assert fake.sent_texts(GENERAL) == [reply.text]
    assert len(fake.sent_texts(RANDOM)) == 1
    assert len(fake.sent_texts(DM_CHANNEL)) == 2  # nothing for the intruder
    log = served.log
    assert "Traceback" not in log, log
    assert "chat.postMessage" in log  # slack_sdk's request lines were logged, at debug
    assert fake.bot_token not in log
    assert fake.signing_secret not in log


def _long_markdown() -> tuple[str, str]:
    """A ~10,000-character answer: prose paragraphs around a ~3,000-character code block."""
    prose = [
        f"Paragraph {n} explains **step {n}** of the plan in plain words, with a <note> "
        "& an ampersand, so escaping matters. " * 6
        for n in range(1, 11)
    ]
    code = "\n".join(
        f"def step_{n:03d}(value):\n    return value * {n} if value < {n} else value & {n}"
        for n in range(42)
    )
    markdown = "\n\n".join([*prose[:5], f"```python\n{code}\n```", *prose[5:], "The end."])
    return markdown, code


async def test_serve_answers_over_socket_mode_and_splits_a_long_answer(
    fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_slack
    markdown, code = _long_markdown()
    assert 9_500 <= len(markdown) <= 11_000
    fake_anthropic.script(Text(markdown, chunk=500))
    env.update(
        SLACK_APP_TOKEN=fake.app_token,
        SWITCHBOARD_PROVIDER="anthropic",
        ANTHROPIC_API_KEY=TEST_API_KEY,
        ANTHROPIC_BASE_URL=fake_anthropic.url,
    )
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_socket_connected(timeout=START_PATIENCE))
        envelope = await fake.send_socket_event(fake.dm("explain the whole plan"))
        await fake.wait_for_ack(envelope)
        await reply_containing(fake, DM_CHANNEL, "The end.", timeout=REPLY_PATIENCE)
        assert await served.terminate(STOP_PATIENCE) == 0

    texts = fake.sent_texts(DM_CHANNEL)
    assert len(texts) >= 3
    assert all(len(text) <= SLACK_LIMIT for text in texts), [len(t) for t in texts]
    assert "\n".join(unescape(block) for block in code_blocks(texts)) == code
    assert texts[0].startswith("Paragraph 1 explains *step 1*")
    assert len(fake.calls_to("apps.connections.open")) == 1
    log = served.log
    assert "Traceback" not in log, log
    assert fake.bot_token not in log
    assert fake.app_token not in log
    assert TEST_API_KEY not in log


def _stop_values(message: SentMessage) -> list[str]:
    """The values of the buttons `message` carries now."""
    return [
        element["value"]
        for block in message.blocks or []
        if block["type"] == "actions"
        for element in block["elements"]
    ]


async def test_serve_stops_a_slack_answer_with_stop(
    fake_slack: FakeSlack, fake_anthropic: FakeAnthropic, env: dict[str, str], tmp_path: Path
) -> None:
    """`/stop` (the slash command, over Socket Mode) during a long answer: the model call is
    dropped, the answer keeps its text with a line saying it was stopped (its Stop button
    gone), and the next message is answered."""
    fake = fake_slack
    fake_anthropic.script(Hold("Once upon a time"), Text("Here is the short version."))
    env.update(
        SLACK_APP_TOKEN=fake.app_token,
        SWITCHBOARD_PROVIDER="anthropic",
        ANTHROPIC_API_KEY=TEST_API_KEY,
        ANTHROPIC_BASE_URL=fake_anthropic.url,
    )
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_socket_connected(timeout=START_PATIENCE))
        await fake.wait_for_ack(await fake.send_socket_event(fake.dm("tell me a long story")))
        answer = await reply_containing(fake, DM_CHANNEL, "Once upon a time", REPLY_PATIENCE)
        await fake.until(
            lambda: _stop_values(answer) == [STOP_BUTTON], "the Stop button", REPLY_PATIENCE
        )

        await fake.wait_for_ack(await fake.send_socket_command(fake.slash_command("/stop")))

        await fake.until(lambda: "— stopped" in answer.text, "the stopped answer", REPLY_PATIENCE)
        await reply_containing(fake, DM_CHANNEL, STOPPED, REPLY_PATIENCE)
        await asyncio.wait_for(fake_anthropic.dropped.wait(), REPLY_PATIENCE)
        edits = answer.edits
        await fake.wait_for_ack(await fake.send_socket_event(fake.dm("and the short version?")))
        await reply_containing(fake, DM_CHANNEL, "Here is the short version.", REPLY_PATIENCE)
        assert await served.terminate(STOP_PATIENCE) == 0

    assert answer.text.startswith("Once upon a time")
    assert answer.blocks is None  # the Stop button is gone
    assert answer.edits == edits  # nothing more was streamed into the stopped answer
    [last_edit] = [
        call
        for call in fake.calls_to("chat.update")
        if call.params.get("ts") == answer.ts and "— stopped" in call.params.get("text", "")
    ]
    assert last_edit.params["blocks"] == []  # the Stop button taken away
    assert fake.sent_texts(DM_CHANNEL) == [
        answer.text,
        STOPPED,
        "Here is the short version.",
    ]
    assert len(fake_anthropic.requests) == 2
    log = served.log
    assert "Traceback" not in log, log
    assert fake.bot_token not in log
    assert fake.app_token not in log


async def test_gateway_slack_runs_alone_on_the_bus_with_a_worker(
    fake_slack: FakeSlack, redis_url: str, tmp_path: Path
) -> None:
    fake = fake_slack
    env = clean_env(
        tmp_path,
        redis_url=redis_url,
        SLACK_BOT_TOKEN=fake.bot_token,
        SLACK_APP_TOKEN=fake.app_token,
        SLACK_API_URL=fake.api_url,
    )
    async with Deployment(env, tmp_path) as deployment:
        gateway = await deployment.start("gateway", "slack")
        worker = await deployment.start("worker")
        await deployment.ready(fake.wait_socket_connected(timeout=START_PATIENCE))
        await worker.until_logged("taking work")
        envelope = await fake.send_socket_event(fake.dm("what is 6*7?"))
        await fake.wait_for_ack(envelope)
        answer = await deployment.ready(
            reply_containing(fake, DM_CHANNEL, "calculator", timeout=REPLY_PATIENCE)
        )
        assert await gateway.stop() == 0, deployment.describe()

    assert "42" in answer.text
    assert fake.bot_token not in gateway.log + worker.log
