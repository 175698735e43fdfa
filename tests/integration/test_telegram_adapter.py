"""The Telegram channel end to end in one process: the real python-telegram-bot, our adapter,
gateway and worker, against the Bot API fake.

Negatives ("no reply") are shown with a later message in the same chat: a chat is one session,
answered in arrival order, so once the later message's answer is there the earlier message was
handled, and whatever it produced would already be there too.
"""

from __future__ import annotations

import functools
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from pydantic import SecretStr

from bots.logs import configure_logging
from bots.platforms import REGISTERED
from channels.telegram.format import TELEGRAM_LIMIT
from core.backends.sql.store import SqlStore, sqlite_url
from core.messages import Message
from core.policy import AllowList, ChannelPolicy
from core.providers.demo import DemoProvider
from core.providers.scripted import ScriptedProvider, text_reply
from core.redact import REDACTED, Redactor
from core.turns import REFUSAL_TEXT
from tests.fakes.telegram_api import SECRET_HEADER, Call, FakeTelegram
from tests.integration.telegram_helpers import (
    BOT_KEY,
    PacedProvider,
    calls_to,
    pre_contents,
    reply_containing,
    serving,
)

DM = 555  # a private chat: the user's id is the chat's id
GROUP = -100123
FORUM = -100777
ANSWER_42 = "The answer is 42"


def scripted(*answers: str) -> ScriptedProvider:
    """A provider answering each call with the next text."""
    return ScriptedProvider([text_reply(answer) for answer in answers])


def last_user_message(provider: ScriptedProvider | PacedProvider, call: int = -1) -> Message:
    return provider.requests[call].messages[-1]


# --- a private chat ------------------------------------------------------------------------


async def test_private_question_is_answered_in_html_after_typing(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, DemoProvider()):
        assert [c["command"] for c in fake.commands] == [
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
        fake.private_text(DM, "what is 6*7?")
        reply = await reply_containing(fake, DM, "worked out with the calculator).")

    assert fake.sent_texts(DM) == [reply.text]
    assert f"{ANSWER_42} (6*7 = 42" in reply.text
    assert reply.parse_mode == "HTML"
    assert all(c.params.get("parse_mode") == "HTML" for c in calls_to(fake, "sendMessage"))
    typing = calls_to(fake, "sendChatAction", DM)
    assert typing and typing[0].params["action"] == "typing"
    assert typing[0].index < calls_to(fake, "sendMessage", DM)[0].index


# --- groups --------------------------------------------------------------------------------


async def test_group_message_without_mention_is_read_but_not_answered(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, DemoProvider()):
        fake.group_text(GROUP, "just chatting among us", user_id=7)
        asked = fake.group_text(GROUP, "are you there?", user_id=7, mention=True)
        reply = await reply_containing(fake, GROUP, "You said: are you there?")

    assert fake.sent_texts(GROUP) == [reply.text]  # nothing for the first message
    assert "@switchboard_bot" not in reply.text
    # Quoting the message it answers, so the group sees which one.
    [send] = calls_to(fake, "sendMessage", GROUP)
    assert send.params["reply_parameters"]["message_id"] == asked["message"]["message_id"]
    assert reply.reply_to == asked["message"]["message_id"]


async def test_group_reply_to_the_bot_is_answered(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, DemoProvider()):
        fake.group_text(GROUP, "hello bot", user_id=7, mention=True)
        await reply_containing(fake, GROUP, "You said: hello bot")
        fake.group_text(GROUP, "and one more thing", user_id=8, reply_to_bot=True)
        await reply_containing(fake, GROUP, "You said: and one more thing")

    assert len(fake.sent_texts(GROUP)) == 2


async def test_group_commands_for_us_run_and_for_other_bots_are_ignored(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    key = f"telegram:{BOT_KEY}:{GROUP}"
    async with serving(fake, store, DemoProvider()):
        fake.group_text(GROUP, "hello", user_id=7, mention=True)
        await reply_containing(fake, GROUP, "You said: hello")
        first = await store.current_session(key)

        fake.group_text(GROUP, "/new", user_id=7, command=True, mention=True)
        await reply_containing(fake, GROUP, "Started a new conversation.")
        second = await store.current_session(key)

        fake.group_text(GROUP, "/new@other_bot", user_id=7, command=True)
        fake.group_text(GROUP, "still here?", user_id=7, mention=True)
        await reply_containing(fake, GROUP, "You said: still here?")

    assert second.id != first.id
    assert (await store.current_session(key)).id == second.id  # the other bot's /new: nothing
    assert [s.key for s in await store.list_sessions()].count(key) == 2
    texts = fake.sent_texts(GROUP)
    assert len(texts) == 3, texts
    assert texts[1] == "Started a new conversation."
    # A fresh session: the demo introduces itself again.
    assert texts[2].startswith("(Demo mode")


async def test_group_replies_all_answers_every_group_message(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, DemoProvider(), policy=ChannelPolicy(group_replies="all")):
        fake.group_text(GROUP, "first without mention", user_id=7)
        fake.group_text(GROUP, "second without mention", user_id=8)
        await reply_containing(fake, GROUP, "You said: second without mention")

    texts = fake.sent_texts(GROUP)
    assert len(texts) == 2
    assert "You said: first without mention" in texts[0]


# --- sessions and duplicates ---------------------------------------------------------------


async def test_one_session_per_private_chat_group_and_forum_topic(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, DemoProvider()):
        fake.private_text(DM, "in private")
        fake.group_text(GROUP, "in the group", user_id=7, mention=True)
        fake.group_text(FORUM, "in topic five", user_id=7, mention=True, thread_id=5)
        fake.group_text(FORUM, "in topic nine", user_id=8, mention=True, thread_id=9)
        fake.group_text(FORUM, "topic five again", user_id=8, mention=True, thread_id=5)
        await reply_containing(fake, DM, "You said: in private")
        await reply_containing(fake, GROUP, "You said: in the group")
        await reply_containing(fake, FORUM, "You said: in topic nine")
        await reply_containing(fake, FORUM, "You said: topic five again")

    keys = sorted(s.key for s in await store.list_sessions())
    prefix = f"telegram:{BOT_KEY}"
    assert keys == sorted(
        [f"{prefix}:{DM}", f"{prefix}:{GROUP}", f"{prefix}:{FORUM}:5", f"{prefix}:{FORUM}:9"]
    )
    by_text = {m.text: m for m in fake.messages[FORUM]}
    threads = {m.thread_id for t, m in by_text.items() if "topic five" in t}
    assert threads == {5}
    assert {m.thread_id for t, m in by_text.items() if "topic nine" in t} == {9}


async def test_a_message_delivered_twice_is_answered_once(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, scripted("first answer", "second answer")) as bot:
        update = fake.private_text(DM, "hello")
        fake.redeliver(update)
        fake.private_text(DM, "and again")
        await reply_containing(fake, DM, "second answer")

    assert fake.sent_texts(DM) == ["first answer", "second answer"]
    assert len(bot.provider.requests) == 2  # type: ignore[attr-defined]


async def test_a_redelivered_update_after_a_restart_is_not_answered_again(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake = fake_telegram
    path = tmp_path / "switchboard.db"
    first_store = await SqlStore.open(sqlite_url(path))
    try:
        async with serving(fake, first_store, scripted("before the restart")):
            old = fake.private_text(DM, "hello")
            await reply_containing(fake, DM, "before the restart")
    finally:
        await first_store.close()

    second_store = await SqlStore.open(sqlite_url(path))
    provider = scripted("after the restart")
    try:
        async with serving(fake, second_store, provider):
            fake.redeliver(old)
            fake.private_text(DM, "new question")
            await reply_containing(fake, DM, "after the restart")
    finally:
        await second_store.close()

    assert fake.sent_texts(DM) == ["before the restart", "after the restart"]
    assert [m.text for m in provider.requests[0].messages if m.role == "user"] == [
        "hello",
        "new question",
    ]


# --- long and streamed answers -------------------------------------------------------------


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


async def test_a_long_markdown_answer_is_split_with_its_code_block_intact(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    markdown, code = _long_markdown()
    assert 9_500 <= len(markdown) <= 11_000 and 2_800 <= len(code) <= 3_500
    async with serving(fake, store, scripted(markdown)):
        fake.private_text(DM, "explain the whole plan")
        await reply_containing(fake, DM, "The end.")

    texts = fake.sent_texts(DM)
    assert len(texts) >= 3
    assert all(len(text) <= TELEGRAM_LIMIT for text in texts), [len(t) for t in texts]
    assert all(m.parse_mode == "HTML" for m in fake.messages[DM])
    # Whole, or (were it cut between messages) cut at line ends, each part closed and re-opened.
    assert "\n".join(pre_contents(texts)) == code
    assert texts[0].startswith("Paragraph 1 explains <b>step 1</b>")
    assert "&lt;note&gt; &amp; an ampersand" in texts[0]


async def test_a_streamed_answer_is_sent_then_edited_piece_by_piece(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    pieces = ["Alpha. ", "Beta. ", "Gamma. ", "Delta."]
    provider = PacedProvider(pieces)

    def arrived(call: Call, wanted: str) -> bool:
        return wanted in call.params["text"]

    # The worker paces the pieces (the platform's edit interval); the gateway shows each.
    async with serving(fake, store, provider, stream_interval=0.3):
        fake.private_text(DM, "tell me slowly")
        sent = await fake.wait_for_call("sendMessage", lambda c: arrived(c, "Alpha."))
        after = sent.index + 1
        for gate, piece in zip(provider.gates, pieces[1:], strict=False):
            gate.set()
            edit = await fake.wait_for_call(
                "editMessageText", functools.partial(arrived, wanted=piece.strip()), after=after
            )
            after = edit.index + 1
        provider.gates[-1].set()  # the answer ends: its final text only takes the Stop away
        fake.private_text(DM, "/help")  # answered after the reply was delivered
        await reply_containing(fake, DM, "/new: Start a fresh conversation")

    final = "Alpha. Beta. Gamma. Delta."
    assert fake.sent_texts(DM)[0] == final
    assert len(fake.sent_texts(DM)) == 2
    edits = calls_to(fake, "editMessageText", DM)
    assert [c.params["text"] for c in edits] == [
        "Alpha. Beta.",
        "Alpha. Beta. Gamma.",
        final,
        final,
    ]
    assert ["reply_markup" in c.params for c in edits] == [True, True, True, False]
    assert fake.messages[DM][0].reply_markup is None
    assert {c.params["message_id"] for c in edits} == {fake.messages[DM][0].message_id}


# --- the Bot API refusing ------------------------------------------------------------------


async def test_flood_control_delays_a_reply_without_losing_it(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.fail_next("sendMessage", retry_after=1)
    async with serving(fake, store, scripted("worth the wait")):
        fake.private_text(DM, "hello")
        await reply_containing(fake, DM, "worth the wait")

    assert fake.sent_texts(DM) == ["worth the wait"]
    refused, delivered = calls_to(fake, "sendMessage", DM)[:2]
    assert refused.params["text"] == delivered.params["text"] == "worth the wait"


async def test_html_telegram_cannot_parse_is_sent_again_as_plain_text(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.fail_next(
        "sendMessage",
        error_code=400,
        description="Bad Request: can't parse entities: Unsupported start tag at byte offset 0",
        retry_after=None,
    )
    async with serving(fake, store, scripted("**Bold** claim with `code` & more")):
        fake.private_text(DM, "hello")
        reply = await reply_containing(fake, DM, "claim")

    assert reply.text == "Bold claim with code & more"
    assert reply.parse_mode is None
    html_try, plain = calls_to(fake, "sendMessage", DM)
    assert html_try.params["parse_mode"] == "HTML"
    assert html_try.params["text"] == "<b>Bold</b> claim with <code>code</code> &amp; more"
    assert "parse_mode" not in plain.params


# --- what comes in ---------------------------------------------------------------------------


async def test_a_photo_reaches_the_model_as_image_bytes(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    jpeg = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8 + b"\xff\xd9"
    fake.add_file("photo-1", jpeg)
    provider = scripted("A test pattern.")
    async with serving(fake, store, provider):
        fake.photo(DM, "photo-1", caption="what is this?")
        await reply_containing(fake, DM, "A test pattern.")

    message = last_user_message(provider)
    assert message.text == "what is this?"
    [image] = message.images
    assert image.data == jpeg
    assert image.media_type == "image/jpeg"
    assert len(fake.downloads) == 1


async def test_stickers_edits_channel_posts_and_joins_are_ignored_quietly(
    fake_telegram: FakeTelegram, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    fake = fake_telegram
    provider = scripted("only this")
    async with serving(fake, store, provider):
        first = fake.private_text(DM, "hello")
        await reply_containing(fake, DM, "only this")
        fake.sticker(DM)
        fake.edited_text(DM, first["message"]["message_id"], "hello, edited")
        fake.channel_post(-100999, "news of the day")
        fake.member_joined(GROUP, 8)
        fake.group_text(GROUP, "nobody asked you", user_id=8)
        # Commands need no model: one in each chat shows the updates before it were handled.
        fake.private_text(DM, "/help")
        fake.group_text(GROUP, "/help", user_id=8, command=True, mention=True)
        await reply_containing(fake, DM, "/new: Start a fresh conversation")
        await reply_containing(fake, GROUP, "/new: Start a fresh conversation")

    assert len(provider.requests) == 1
    assert set(fake.messages) == {DM, GROUP}
    assert len(fake.sent_texts(DM)) == 2
    assert len(fake.sent_texts(GROUP)) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_an_over_long_message_gets_a_notice_and_no_model_call(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = ScriptedProvider([])
    async with serving(fake, store, provider, policy=ChannelPolicy(max_input_chars=100)):
        fake.private_text(DM, "x" * 300)
        reply = await reply_containing(fake, DM, "too long")

    assert "(300 characters; the limit is 100)" in reply.text
    assert provider.requests == []


async def test_the_allowlist_answers_allowed_users_and_refuses_others_once(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = scripted("hello 42", "hello again 42")
    policy = ChannelPolicy(allow={"telegram": AllowList(users=frozenset({"42"}))})
    async with serving(fake, store, provider, policy=policy):
        fake.private_text(42, "hi, I am allowed")
        await reply_containing(fake, 42, "hello 42")
        fake.private_text(7, "let me in")
        await reply_containing(fake, 7, REFUSAL_TEXT)
        # In a group: two tries from user 7, then user 42 in the same chat (answered in order).
        fake.group_text(GROUP, "me too", user_id=7, mention=True)
        fake.group_text(GROUP, "please?", user_id=7, mention=True)
        fake.group_text(GROUP, "it is me again", user_id=42, mention=True)
        await reply_containing(fake, GROUP, "hello again 42")

    assert fake.sent_texts(7) == [REFUSAL_TEXT]
    assert fake.sent_texts(GROUP) == [REFUSAL_TEXT, "hello again 42"]
    assert [last_user_message(provider, i).text for i in range(2)] == [
        "hi, I am allowed",
        "it is me again",
    ]


async def test_a_chat_mode_override_takes_the_tools_away(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = scripted("no tools here", "tools here")
    policy = ChannelPolicy(chat_modes={f"telegram:{BOT_KEY}:{DM}": "no-tools"})
    async with serving(fake, store, provider, policy=policy):
        fake.private_text(DM, "what can you do?")
        await reply_containing(fake, DM, "no tools here")
        fake.private_text(556, "what can you do?")
        await reply_containing(fake, 556, "tools here")

    no_tools, default = provider.requests
    assert no_tools.tools == []
    assert "no tools are available" in no_tools.system
    # Telegram's default mode is safe-chat: the harmless tools only.
    assert {t.name for t in default.tools} == {"calculator", "current_time"}


# --- webhook -------------------------------------------------------------------------------


async def test_webhook_mode_checks_the_secret_and_answers(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = scripted("answered by webhook")
    async with serving(
        fake,
        store,
        provider,
        webhook_url="http://127.0.0.1/tg-hook",
        webhook_secret=SecretStr("s3cret-webhook-token"),
        webhook_host="127.0.0.1",
        webhook_port=0,
    ) as bot:
        assert fake.webhook is not None
        assert fake.webhook.url == "http://127.0.0.1/tg-hook"
        assert fake.webhook.secret_token == "s3cret-webhook-token"
        assert calls_to(fake, "getUpdates") == []
        url = f"http://127.0.0.1:{bot.adapter.webhook_port}/tg-hook"

        intruder = fake.private_text(DM, "from an intruder")
        assert await fake.post_webhook(url, intruder, secret="wrong") == 403
        assert await fake.post_webhook(url, intruder, secret=None) == 403
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                url,
                data=b'{"update_id": 1, "message": {',
                headers={"Content-Type": "application/json", SECRET_HEADER: "s3cret-webhook-token"},
            ) as response,
        ):
            assert response.status == 400
        update = fake.private_text(DM, "hello through the hook")
        assert await fake.post_webhook(url, update, secret="s3cret-webhook-token") == 200
        await reply_containing(fake, DM, "answered by webhook")

    assert fake.sent_texts(DM) == ["answered by webhook"]
    assert [last_user_message(provider).text] == ["hello through the hook"]


# --- secrets -------------------------------------------------------------------------------


@pytest.fixture(params=["configured", "by-shape"])
def product_logging(
    request: pytest.FixtureRequest, fake_telegram: FakeTelegram
) -> Iterator[io.StringIO]:
    """The product's logging set up as `switchboard` does, at debug, writing into a string.

    "configured": the token is among the secrets, as `serve` passes it; "by-shape": it is not,
    and only the Redactor's pattern for bot tokens can catch it.
    """
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    secrets = [fake_telegram.token] if request.param == "configured" else []
    configure_logging(
        "debug,libraries=debug", Redactor(secrets, patterns=REGISTERED.secret_patterns())
    )
    output = io.StringIO()
    for handler in root.handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(output)
    try:
        yield output
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


async def test_the_bot_token_never_reaches_a_log_record(
    fake_telegram: FakeTelegram,
    store: SqlStore,
    product_logging: io.StringIO,
    caplog: pytest.LogCaptureFixture,  # after product_logging: torn down before it
) -> None:
    caplog.set_level(logging.DEBUG)
    fake = fake_telegram
    fake.fail_next("sendMessage", retry_after=1)
    async with serving(fake, store, scripted("first", "second")):
        fake.private_text(DM, "hello")
        fake.private_text(DM, "again")
        await reply_containing(fake, DM, "second")

    # The request lines of httpx carry the token in their URLs: they were logged, scrubbed.
    assert any(r.name == "httpx" and REDACTED in r.getMessage() for r in caplog.records)
    assert fake.token not in caplog.text
    written = product_logging.getvalue()
    assert "flood control" in written  # the 429 went through the logs too
    assert fake.token not in written
