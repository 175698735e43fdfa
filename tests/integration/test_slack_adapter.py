"""The Slack channel end to end in one process: the real slack-bolt and slack_sdk, our adapter,
gateway and worker, against the Slack fake.

Every event is acknowledged only after the adapter judged it (its listener runs before the
ack), so once `send` returns, an ignored event has been ignored. Negatives ("no reply") are
shown with a later message in the same conversation: a conversation is answered in arrival
order, so once the later message's answer is there the earlier one was handled.
"""

from __future__ import annotations

import functools
import io
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from pydantic import SecretStr

from bots.logs import configure_logging
from bots.platforms import REGISTERED
from channels.slack.adapter import SlackAdapter, SlackSettings
from channels.slack.format import SLACK_LIMIT
from channels.streaming import IncrementalRender, ReplyStreams
from core.backends.sql.store import SqlStore, sqlite_url
from core.envelopes import Inbound
from core.errors import ConfigError
from core.messages import Message
from core.policy import AllowList, ChannelPolicy
from core.providers.demo import DemoProvider
from core.providers.scripted import ScriptedProvider, text_reply
from core.redact import Redactor
from core.store.replies import MemoryReplyRecords
from core.turns import REFUSAL_TEXT
from tests.fakes.slack_api import Call, FakeSlack
from tests.fakes.slack_events import BOB, BOT_USER_ID, DM_CHANNEL, GENERAL, TEAM_ID
from tests.integration.slack_helpers import (
    MENU,
    code_blocks,
    reply_containing,
    serving,
    unescape,
)
from tests.integration.telegram_helpers import PacedProvider

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 1200  # ~300 kB: more than one read
RANDOM = "C0RANDOM"
Mode = Literal["http", "socket"]


def scripted(*answers: str) -> ScriptedProvider:
    """A provider answering each call with the next text."""
    return ScriptedProvider([text_reply(answer) for answer in answers])


def last_user_message(provider: ScriptedProvider, call: int = -1) -> Message:
    return provider.requests[call].messages[-1]


# --- direct messages -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_a_direct_message_is_answered_in_the_dm(
    fake_slack: FakeSlack, store: SqlStore, mode: Mode
) -> None:
    fake = fake_slack
    async with serving(fake, store, DemoProvider(), mode=mode) as bot:
        await bot.send(fake.dm("what is 6*7?"))
        reply = await reply_containing(fake, DM_CHANNEL, "worked out with the calculator")

    assert "42" in reply.text
    assert reply.thread_ts is None  # one conversation per DM: answered in the DM itself
    assert fake.sent_texts(DM_CHANNEL) == [reply.text]
    assert [c.method for c in fake.calls if c.method.startswith("auth.")] == ["auth.test"]
    if mode == "socket":
        assert fake.socket_connections == 1
        assert len(fake.acks) == 1


async def test_every_dm_is_one_conversation_and_each_thread_another(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    async with serving(fake, store, DemoProvider()) as bot:
        await bot.send(fake.dm("first"))
        await reply_containing(fake, DM_CHANNEL, "You said: first")
        await bot.send(fake.dm("second"))
        await reply_containing(fake, DM_CHANNEL, "You said: second")
        one = fake.channel_message("thread one", mention=True)
        two = fake.channel_message("thread two", mention=True)
        await bot.send(one)
        await bot.send(two)
        await reply_containing(fake, GENERAL, "You said: thread one")
        await reply_containing(fake, GENERAL, "You said: thread two")

    keys = sorted(s.key for s in await store.list_sessions())
    prefix = f"slack:{TEAM_ID}"
    assert keys == sorted(
        [
            f"{prefix}:{DM_CHANNEL}",
            f"{prefix}:{GENERAL}:{one['event']['ts']}",
            f"{prefix}:{GENERAL}:{two['event']['ts']}",
        ]
    )


# --- channels ------------------------------------------------------------------------------


async def test_a_mention_is_answered_in_its_thread_once_for_both_events(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = scripted("Hello from the thread", "Still here")
    async with serving(fake, store, provider) as bot:
        message = fake.channel_message("are you there?", mention=True)
        root = message["event"]["ts"]
        # Slack sends a mention twice: as a channel message and as `app_mention`.
        await bot.send(message)
        await bot.send(fake.app_mention_for(message))
        reply = await reply_containing(fake, GENERAL, "Hello from the thread")
        await bot.send(fake.channel_message("still?", thread_ts=root))
        await reply_containing(fake, GENERAL, "Still here")

    assert reply.thread_ts == root
    assert fake.sent_texts(GENERAL) == ["Hello from the thread", "Still here"]
    assert [last_user_message(provider, i).text for i in range(2)] == [
        "are you there?",  # the mention taken out
        "still?",
    ]


async def test_a_channel_message_without_a_mention_is_not_answered(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    async with serving(fake, store, DemoProvider()) as bot:
        chatter = fake.channel_message("just chatting among us")
        await bot.send(chatter)
        # Someone mentions the bot in the thread of that message: the same conversation.
        root = chatter["event"]["ts"]
        await bot.send(fake.channel_message("what do you think?", mention=True, thread_ts=root))
        reply = await reply_containing(fake, GENERAL, "You said: what do you think?")

    assert fake.sent_texts(GENERAL) == [reply.text]
    assert reply.thread_ts == root


async def test_later_messages_in_a_thread_with_the_bot_need_no_mention(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    async with serving(fake, store, DemoProvider()) as bot:
        mention = fake.channel_message("hello bot", mention=True)
        await bot.send(fake.app_mention_for(mention))
        root = mention["event"]["ts"]
        await reply_containing(fake, GENERAL, "You said: hello bot")
        await bot.send(fake.channel_message("and a follow-up", user=BOB, thread_ts=root))
        await reply_containing(fake, GENERAL, "You said: and a follow-up")
        # A thread under a message the bot posted (a scheduled notification, say) counts too,
        # even when this process has never seen it.
        await bot.send(
            fake.channel_message(
                "about your reminder",
                channel=RANDOM,
                thread_ts="1.000001",
                parent_user_id=BOT_USER_ID,
            )
        )
        answer = await reply_containing(fake, RANDOM, "You said: about your reminder")

    assert {m.thread_ts for m in fake.sent(GENERAL)} == {root}
    assert len(fake.sent(GENERAL)) == 2
    assert answer.thread_ts == "1.000001"
    keys = {s.key for s in await store.list_sessions()}
    assert f"slack:{TEAM_ID}:{GENERAL}:{root}" in keys


async def test_bots_edits_and_joins_are_ignored(
    fake_slack: FakeSlack, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    fake = fake_slack
    provider = scripted("only this", "and this")
    async with serving(fake, store, provider) as bot:
        first = fake.dm("hello")
        await bot.send(first)
        await reply_containing(fake, DM_CHANNEL, "only this")
        await bot.send(fake.own_message(DM_CHANNEL, "only this"))
        await bot.send(fake.bot_message(DM_CHANNEL, "I am another app"))
        await bot.send(fake.edited(first, "hello, edited"))
        await bot.send(fake.joined(GENERAL, BOB))
        await bot.send(fake.bot_message(GENERAL, f"<@{BOT_USER_ID}> from a bot"))
        await bot.send(fake.dm("still there?"))
        await reply_containing(fake, DM_CHANNEL, "and this")

    assert [last_user_message(provider, i).text for i in range(2)] == ["hello", "still there?"]
    assert set(fake.messages) == {DM_CHANNEL}
    assert [r.getMessage() for r in caplog.records] == []


# --- duplicates ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_a_retried_event_gets_no_second_reply(
    fake_slack: FakeSlack, store: SqlStore, mode: Mode
) -> None:
    fake = fake_slack
    provider = scripted("first answer", "second answer")
    async with serving(fake, store, provider, mode=mode) as bot:
        event = fake.dm("hello")
        await bot.send(event)
        await bot.send(event, retry_num=1)
        await bot.send(event, retry_num=2)
        await bot.send(fake.dm("and again"))
        await reply_containing(fake, DM_CHANNEL, "second answer")

    assert fake.sent_texts(DM_CHANNEL) == ["first answer", "second answer"]
    assert len(provider.requests) == 2


async def test_a_retry_after_a_restart_is_not_answered_again(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    fake = fake_slack
    path = tmp_path / "switchboard.db"
    first_store = await SqlStore.open(sqlite_url(path))
    try:
        async with serving(fake, first_store, scripted("before the restart")) as bot:
            event = fake.dm("hello")
            await bot.send(event)
            await reply_containing(fake, DM_CHANNEL, "before the restart")
    finally:
        await first_store.close()

    second_store = await SqlStore.open(sqlite_url(path))
    try:
        async with serving(fake, second_store, scripted("after the restart")) as bot:
            await bot.send(event, retry_num=1)  # the new process has not seen its event id
            await bot.send(fake.dm("new question"))
            await reply_containing(fake, DM_CHANNEL, "after the restart")
    finally:
        await second_store.close()

    assert fake.sent_texts(DM_CHANNEL) == ["before the restart", "after the restart"]


# --- starting --------------------------------------------------------------------------------


async def _no_sink(inbound: Inbound) -> None:
    raise AssertionError(f"nothing should be received: {inbound}")


async def test_a_rejected_token_stops_the_adapter_with_a_clear_error(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    wrong_bot = SlackAdapter(
        replies=_replies(),
        settings=SlackSettings(
            bot_token=SecretStr("xoxb-0000-wrong"),
            signing_secret=SecretStr(fake.signing_secret),
            api_url=fake.api_url,
            port=0,
        ),
        menu=MENU,
    )
    with pytest.raises(ConfigError, match=r"SLACK_BOT_TOKEN \(invalid_auth\)"):
        await wrong_bot.run(_no_sink)
    wrong_app = SlackAdapter(
        replies=_replies(),
        settings=SlackSettings(
            bot_token=SecretStr(fake.bot_token),
            app_token=SecretStr(fake.bot_token),  # a bot token where the app token belongs
            api_url=fake.api_url,
        ),
        menu=MENU,
    )
    with pytest.raises(ConfigError, match=r"SLACK_APP_TOKEN \(not_allowed_token_type\)"):
        await wrong_app.run(_no_sink)
    assert not wrong_bot.listening.is_set() and not wrong_app.listening.is_set()
    assert fake.socket_connections == 0


# --- HTTP requests ---------------------------------------------------------------------------


async def test_requests_without_a_valid_signature_are_refused(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = scripted("only for the signed one")
    async with serving(fake, store, provider) as bot:
        url = bot.events_url
        assert await fake.url_verification(url, "3eZbrw1aBm2rZgRNFdxV") == (
            200,
            '{"challenge": "3eZbrw1aBm2rZgRNFdxV"}',
        )
        forged = fake.dm("from an intruder")
        assert (await fake.post_event(url, forged, secret="not-the-secret"))[0] == 401
        assert (await fake.post_event(url, forged, signature="v0=00"))[0] == 401
        stale = int(time.time()) - 10 * 60
        assert (await fake.post_event(url, forged, timestamp=stale))[0] == 401
        await bot.send(fake.dm("signed properly"))
        await reply_containing(fake, DM_CHANNEL, "only for the signed one")

    assert [m.text for m in provider.requests[0].messages if m.role == "user"] == [
        "signed properly"
    ]


# --- showing work --------------------------------------------------------------------------


async def test_the_assistant_status_shows_work_in_a_thread(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    async with serving(fake, store, scripted("done")) as bot:
        mention = fake.channel_message("work on this", mention=True)
        await bot.send(mention)
        await reply_containing(fake, GENERAL, "done")
        key = (GENERAL, mention["event"]["ts"])
        await fake.until(lambda: fake.reactions[key] == {"white_check_mark"}, "answered mark")

    ts = mention["event"]["ts"]
    [status] = fake.calls_to("assistant.threads.setStatus")
    assert status.params == {"channel_id": GENERAL, "thread_ts": ts, "status": "is thinking…"}
    [post] = fake.calls_to("chat.postMessage")
    assert status.index < post.index
    assert fake.statuses == {}  # the reply cleared it
    # The status reactions show beside it: taken while the turn ran.
    [taken, answered] = fake.calls_to("reactions.add")
    assert (taken.params["name"], answered.params["name"]) == ("eyes", "white_check_mark")
    assert taken.index < post.index < answered.index


async def test_tool_use_renews_the_status_slack_would_drop_after_two_minutes(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    async with serving(fake, store, DemoProvider(), status_renewal=0.0) as bot:
        await bot.send(fake.channel_message("what is 6*7?", mention=True))
        reply = await reply_containing(fake, GENERAL, "worked out with the calculator")

    assert "42" in reply.text
    typing, tool_use = fake.calls_to("assistant.threads.setStatus")
    assert typing.params == tool_use.params


@pytest.mark.parametrize("error", ["missing_scope", "not_allowed_token_type", "unknown_method"])
async def test_without_the_assistant_feature_the_reactions_show_work(
    store: SqlStore, error: str
) -> None:
    async with (
        FakeSlack(assistant_error=error) as fake,
        serving(fake, store, scripted("first", "second")) as bot,
    ):
        one = fake.channel_message("one", mention=True)
        await bot.send(one)
        await reply_containing(fake, GENERAL, "first")
        two = fake.channel_message("two", mention=True)
        await bot.send(two)
        await reply_containing(fake, GENERAL, "second")
        marks = [(GENERAL, one["event"]["ts"]), (GENERAL, two["event"]["ts"])]
        await fake.until(
            lambda: all(fake.reactions[key] == {"white_check_mark"} for key in marks),
            "both answered marks",
        )

    assert len(fake.calls_to("assistant.threads.setStatus")) == 1  # not asked again
    added, removed = fake.calls_to("reactions.add"), fake.calls_to("reactions.remove")
    first, second = one["event"]["ts"], two["event"]["ts"]
    # On each question the taken reaction, then in its place the answered one. Two mentions
    # are two threads, answered side by side: their calls may interleave.
    for ts in (first, second):
        on = [c for c in [*added, *removed] if c.params["timestamp"] == ts]
        steps = [(c.method, c.params["name"]) for c in sorted(on, key=lambda c: c.index)]
        assert steps == [
            ("reactions.add", "eyes"),
            ("reactions.remove", "eyes"),
            ("reactions.add", "white_check_mark"),
        ]
    posts = fake.calls_to("chat.postMessage")
    assert added[0].index < posts[0].index  # seen before the answer
    assert (
        fake.reactions[(GENERAL, first)]
        == fake.reactions[(GENERAL, second)]
        == {"white_check_mark"}
    )


async def test_a_dm_shows_work_with_a_reaction(fake_slack: FakeSlack, store: SqlStore) -> None:
    fake = fake_slack
    async with serving(fake, store, scripted("done")) as bot:
        event = fake.dm("work on this")
        await bot.send(event)
        await reply_containing(fake, DM_CHANNEL, "done")
        key = (DM_CHANNEL, event["event"]["ts"])
        await fake.until(lambda: fake.reactions[key] == {"white_check_mark"}, "answered mark")

    # A DM without a thread has no thread to hold a status.
    assert fake.calls_to("assistant.threads.setStatus") == []
    added = [(c.params["timestamp"], c.params["name"]) for c in fake.calls_to("reactions.add")]
    assert added == [(key[1], "eyes"), (key[1], "white_check_mark")]


# --- answers ---------------------------------------------------------------------------------


async def test_markdown_becomes_mrkdwn(fake_slack: FakeSlack, store: SqlStore) -> None:
    fake = fake_slack
    answer = "**Bold** _it_ ~~gone~~ `x < y` & [docs](https://example.org/a?b=1&c=2)"
    async with serving(fake, store, scripted(answer)) as bot:
        await bot.send(fake.dm("format please"))
        reply = await reply_containing(fake, DM_CHANNEL, "Bold")

    assert reply.text == (
        "*Bold* _it_ ~gone~ `x &lt; y` &amp; <https://example.org/a?b=1&amp;c=2|docs>"
    )


def _long_markdown() -> tuple[str, str]:
    """A ~10,000-character answer: prose paragraphs around a ~3,000-character code block."""
    prose = [
        f"Paragraph {n} explains **step {n}** of the plan in plain words, with `inline code` "
        f"and a <note> & an ampersand, so that escaping matters. " * 5
        for n in range(1, 11)
    ]
    code = "\n".join(
        f"def step_{n:03d}(value):\n    return value * {n} if value < {n} else value & {n}"
        for n in range(42)
    )
    markdown = "\n\n".join([*prose[:5], f"```python\n{code}\n```", *prose[5:], "The end."])
    return markdown, code


async def test_a_long_answer_is_split_with_its_code_block_intact(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    markdown, code = _long_markdown()
    assert 9_500 <= len(markdown) <= 11_000 and 2_800 <= len(code) <= 3_500
    async with serving(fake, store, scripted(markdown)) as bot:
        mention = fake.channel_message("explain the whole plan", mention=True)
        await bot.send(mention)
        await reply_containing(fake, GENERAL, "The end.")

    texts = fake.sent_texts(GENERAL)
    assert len(texts) >= 3
    assert all(len(text) <= SLACK_LIMIT for text in texts), [len(t) for t in texts]
    assert all(text.count("```") % 2 == 0 for text in texts)
    assert "\n".join(unescape(block) for block in code_blocks(texts)) == code
    assert texts[0].startswith("Paragraph 1 explains *step 1*")
    assert "&lt;note&gt; &amp; an ampersand" in texts[0]
    assert {m.thread_ts for m in fake.sent(GENERAL)} == {mention["event"]["ts"]}


async def test_a_streamed_answer_is_posted_then_updated_piece_by_piece(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    pieces = ["Alpha. ", "Beta. ", "Gamma. ", "Delta."]
    provider = PacedProvider(pieces)

    def arrived(call: Call, wanted: str) -> bool:
        return wanted in call.params.get("text", "")

    # The worker paces the pieces (the platform's edit interval); the gateway shows each.
    async with serving(fake, store, provider, stream_interval=0.3) as bot:
        await bot.send(fake.dm("tell me slowly"))
        sent = await fake.wait_for_call("chat.postMessage", lambda c: arrived(c, "Alpha."))
        after = sent.index + 1
        for gate, piece in zip(provider.gates, pieces[1:], strict=False):
            gate.set()
            update = await fake.wait_for_call(
                "chat.update", functools.partial(arrived, wanted=piece.strip()), after=after
            )
            after = update.index + 1
        provider.gates[-1].set()
        await fake.wait_for_call("reactions.remove")  # the turn is over

    final = "Alpha. Beta. Gamma. Delta."
    assert fake.sent_texts(DM_CHANNEL) == [final]
    updates = fake.calls_to("chat.update")
    # The last update only takes the Stop button away.
    texts = ["Alpha. Beta.", "Alpha. Beta. Gamma.", final, final]
    assert [c.params["text"] for c in updates] == texts
    assert fake.sent(DM_CHANNEL)[0].blocks is None
    assert {c.params["ts"] for c in updates} == {fake.sent(DM_CHANNEL)[0].ts}


# --- Slack refusing ------------------------------------------------------------------------


async def test_a_rate_limited_reply_waits_for_retry_after(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    fake.fail_next("chat.postMessage", retry_after=1)
    async with serving(fake, store, scripted("worth the wait")) as bot:
        await bot.send(fake.dm("hello"))
        await reply_containing(fake, DM_CHANNEL, "worth the wait")

    assert fake.sent_texts(DM_CHANNEL) == ["worth the wait"]
    refused, delivered = fake.calls_to("chat.postMessage")
    assert refused.params["text"] == delivered.params["text"]
    assert delivered.at - refused.at >= 1.0


async def test_a_reply_slack_refuses_for_good_is_not_retried(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    # The streamed start of the answer and the final answer each try once, and give up.
    fake.fail_next(
        "chat.postMessage", error="not_in_channel", status=200, retry_after=None, times=2
    )
    async with serving(fake, store, scripted("lost", "found")) as bot:
        await bot.send(fake.channel_message("first", mention=True))
        await fake.until(lambda: len(fake.calls_to("chat.postMessage")) == 2, "two tries")
        await bot.send(fake.channel_message("second", mention=True))
        await reply_containing(fake, GENERAL, "found")

    texts = [c.params["text"] for c in fake.calls_to("chat.postMessage")]
    assert texts == ["lost", "lost", "found"]
    assert fake.sent_texts(GENERAL) == ["found"]


# --- what comes in ---------------------------------------------------------------------------


async def test_an_image_reaches_the_model_downloaded_with_the_bot_token(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    file = fake.add_file("F0IMG", PNG, mimetype="image/png")
    provider = scripted("A test pattern.")
    async with serving(fake, store, provider) as bot:
        await bot.send(fake.dm("what is this?", files=[file]))
        await reply_containing(fake, DM_CHANNEL, "A test pattern.")

    message = last_user_message(provider)
    assert message.text == "what is this?"
    [image] = message.images
    assert (image.media_type, image.data) == ("image/png", PNG)
    assert fake.downloads == [("F0IMG", True)]


async def test_the_allowlist_admits_a_workspace_and_refuses_others(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = scripted("welcome, colleague")
    policy = ChannelPolicy(allow={"slack": AllowList(teams=frozenset({TEAM_ID}))})
    async with serving(fake, store, provider, policy=policy) as bot:
        await bot.send(fake.dm("hi from inside"))
        await reply_containing(fake, DM_CHANNEL, "welcome, colleague")
        # A Slack Connect guest from another organisation.
        guest = fake.message("D0GUEST", "let me in", user="U0GUEST", channel_type="im")
        guest["event"]["user_team"] = "T0OTHER"
        await bot.send(guest)
        await reply_containing(fake, "D0GUEST", REFUSAL_TEXT)

    assert len(provider.requests) == 1


async def test_slack_chats_get_safe_chat_and_the_slack_hint(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = scripted("noted")
    async with serving(fake, store, provider) as bot:
        await bot.send(fake.dm("what can you do?"))
        await reply_containing(fake, DM_CHANNEL, "noted")

    [request] = provider.requests
    assert {t.name for t in request.tools} == {"calculator", "current_time"}
    assert "You are answering in Slack" in request.system


async def test_a_command_after_a_mention_runs(fake_slack: FakeSlack, store: SqlStore) -> None:
    fake = fake_slack
    async with serving(fake, store, DemoProvider()) as bot:
        mention = fake.channel_message("/help", mention=True)
        await bot.send(mention)
        reply = await reply_containing(fake, GENERAL, "/new: Start a fresh conversation")

    assert reply.thread_ts == mention["event"]["ts"]


# --- secrets -------------------------------------------------------------------------------


@pytest.fixture
def product_logging() -> Iterator[io.StringIO]:
    """The product's logging set up as `switchboard` does, at debug, writing into a string.

    The tokens are not among the configured secrets: only the Redactor's patterns can catch
    them, the harder case.
    """
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("debug,libraries=debug", Redactor([], patterns=REGISTERED.secret_patterns()))
    output = io.StringIO()
    for handler in root.handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(output)
    try:
        yield output
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_the_tokens_never_reach_the_logs(
    fake_slack: FakeSlack, store: SqlStore, product_logging: io.StringIO, mode: Mode
) -> None:
    fake = fake_slack
    fake.fail_next("chat.postMessage", retry_after=0)
    file = fake.add_file("F0IMG", PNG)
    async with serving(fake, store, scripted("first"), mode=mode) as bot:
        await bot.send(fake.dm("hello", files=[file]))
        await reply_containing(fake, DM_CHANNEL, "first")

    written = product_logging.getvalue()
    assert "chat.postMessage" in written  # slack_sdk logged its requests
    assert fake.bot_token not in written
    assert fake.app_token not in written
    assert fake.signing_secret not in written


def _replies() -> ReplyStreams:
    return ReplyStreams(MemoryReplyRecords(), IncrementalRender())
