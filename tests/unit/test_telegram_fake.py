"""The Telegram fake speaks the Bot API: the real python-telegram-bot, used directly, accepts it.

Nothing from Switchboard is used here; if one of these fails after a PTB upgrade, the fake (not
our channel code) needs fixing first.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from telegram import Bot, BotCommand, Message, MessageEntity, Update, User
from telegram.error import (
    BadRequest,
    Conflict,
    EndPointNotFound,
    InvalidToken,
    RetryAfter,
    TimedOut,
)
from telegram.ext import Application, CommandHandler, ContextTypes, MessageHandler, filters

from tests.fakes import Call, FakeTelegram, Webhook
from tests.fakes.fixtures import fake_telegram
from tests.fakes.telegram_api import NOT_MODIFIED, SECRET_HEADER

# The shared fixture, named here so this module also runs without the project conftest.
SHARED_FIXTURES = (fake_telegram,)

ALICE = 555
GROUP = -1001234567890
HTML_REJECTED = 'Bad Request: can\'t parse entities: Unsupported start tag "foo" at byte offset 0'


def _application(
    fake: FakeTelegram, token: str | None = None
) -> Application[Any, Any, Any, Any, Any, Any]:
    return (
        Application.builder()
        .token(token or fake.token)
        .base_url(f"{fake.url}/bot")
        .base_file_url(f"{fake.url}/file/bot")
        .build()
    )


def _bot_user(fake: FakeTelegram) -> User:
    return User(fake.bot_id, "Switchboard", is_bot=True, username=fake.username)


def _bot(fake: FakeTelegram) -> Bot:
    return Bot(fake.token, base_url=f"{fake.url}/bot", base_file_url=f"{fake.url}/file/bot")


async def _echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.message is not None
    await update.message.reply_text(f"echo: {update.message.text}")


async def _ask(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.message is not None
    await update.message.reply_text(f"asked: {' '.join(context.args or [])}")


@pytest.fixture
async def app(
    fake_telegram: FakeTelegram,
) -> AsyncIterator[Application[Any, Any, Any, Any, Any, Any]]:
    """A polling application that echoes texts and answers /ask, as a test would run one."""
    application = _application(fake_telegram)
    application.add_handler(CommandHandler("ask", _ask))
    application.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, _echo))
    await application.initialize()
    assert application.updater is not None
    await application.updater.start_polling(poll_interval=0, timeout=1)
    await application.start()
    yield application
    await application.updater.stop()
    await application.stop()
    await application.shutdown()


@pytest.fixture
async def bot(fake_telegram: FakeTelegram) -> AsyncIterator[Bot]:
    """A bare initialized bot, for calling methods one at a time."""
    async with _bot(fake_telegram) as the_bot:
        yield the_bot


async def test_polling_start_calls_get_me_delete_webhook_then_holds_get_updates(
    app: Application[Any, Any, Any, Any, Any, Any], fake_telegram: FakeTelegram
) -> None:
    await fake_telegram.wait_idle_poll()

    assert [call.method for call in fake_telegram.calls[:3]] == [
        "getMe",
        "deleteWebhook",
        "getUpdates",
    ]
    assert fake_telegram.calls[1].params == {}
    assert fake_telegram.calls[2].params == {"offset": 0, "timeout": 1}
    assert app.bot.username == "switchboard_bot"
    assert app.bot.id == 999


async def test_a_private_message_is_echoed(
    app: Application[Any, Any, Any, Any, Any, Any], fake_telegram: FakeTelegram
) -> None:
    update = fake_telegram.private_text(ALICE, "hello")

    call = await fake_telegram.wait_for_call("sendMessage")

    assert call.params == {"chat_id": ALICE, "text": "echo: hello"}
    assert fake_telegram.sent_texts(ALICE) == ["echo: hello"]
    assert fake_telegram.messages[ALICE][0].message_id == 1000
    # The next poll confirms the update by its offset, so it is not delivered again.
    await fake_telegram.wait_for_call(
        "getUpdates", lambda c: c.params.get("offset") == update["update_id"] + 1
    )
    await fake_telegram.wait_idle_poll()


async def test_the_same_update_redelivered_reaches_the_bot_twice(
    app: Application[Any, Any, Any, Any, Any, Any], fake_telegram: FakeTelegram
) -> None:
    update = fake_telegram.private_text(ALICE, "twice")
    again = fake_telegram.redeliver(update)

    first = await fake_telegram.wait_for_call("sendMessage")
    second = await fake_telegram.wait_for_call("sendMessage", after=first.index + 1)

    assert again == update["update_id"] + 1
    assert first.params == second.params
    assert fake_telegram.sent_texts(ALICE) == ["echo: twice", "echo: twice"]


async def test_a_group_command_addressed_to_the_bot_in_a_topic_is_answered_there(
    app: Application[Any, Any, Any, Any, Any, Any], fake_telegram: FakeTelegram
) -> None:
    update = fake_telegram.group_text(
        GROUP, "/ask the time", user_id=7, mention=True, command=True, thread_id=42
    )

    call = await fake_telegram.wait_for_call("sendMessage")

    assert update["message"]["text"] == "/ask@switchboard_bot the time"
    assert call.params["text"] == "asked: the time"
    assert call.params["message_thread_id"] == 42
    assert call.params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    sent = fake_telegram.messages[GROUP][0]
    assert (sent.thread_id, sent.reply_to) == (42, update["message"]["message_id"])


async def test_a_held_get_updates_returns_as_soon_as_an_update_is_pushed(
    bot: Bot, fake_telegram: FakeTelegram
) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=30))
    await fake_telegram.wait_idle_poll()

    fake_telegram.private_text(ALICE, "wake up")
    async with asyncio.timeout(2):
        updates = await poll

    assert [u.message.text for u in updates if u.message] == ["wake up"]


async def test_a_second_poll_ends_the_held_one_with_a_conflict(
    bot: Bot, fake_telegram: FakeTelegram
) -> None:
    first = asyncio.create_task(bot.get_updates(timeout=30))
    await fake_telegram.wait_idle_poll()

    # A second instance of the bot: one Bot polls over a single connection.
    async with _bot(fake_telegram) as other:
        assert await other.get_updates(timeout=0) == ()
    with pytest.raises(Conflict, match="terminated by other getUpdates request"):
        await first


async def test_send_and_edit_with_html(bot: Bot, fake_telegram: FakeTelegram) -> None:
    sent = await bot.send_message(ALICE, "<b>draft</b>", parse_mode="HTML")
    edited = await bot.edit_message_text(
        "<b>final</b> answer", ALICE, sent.message_id, parse_mode="HTML"
    )

    assert sent.from_user is not None and isinstance(edited, Message)
    assert (sent.message_id, sent.chat.type, sent.from_user.id) == (1000, "private", 999)
    assert edited.text == "<b>final</b> answer"
    assert edited.edit_date is not None
    assert fake_telegram.calls[-1].params == {
        "chat_id": ALICE,
        "message_id": 1000,
        "text": "<b>final</b> answer",
        "parse_mode": "HTML",
    }
    assert fake_telegram.sent_texts(ALICE) == ["<b>final</b> answer"]
    assert fake_telegram.messages[ALICE][0].edits == 1
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text(
            "<b>final</b> answer", ALICE, sent.message_id, parse_mode="HTML"
        )
    assert NOT_MODIFIED.startswith("Bad Request: message is not modified: ")


async def test_text_that_looks_like_json_or_a_number_stays_text(
    bot: Bot, fake_telegram: FakeTelegram
) -> None:
    await bot.send_message(ALICE, "42")
    await bot.send_message(ALICE, '{"a": 1}')

    assert fake_telegram.sent_texts(ALICE) == ["42", '{"a": 1}']
    assert [m.message_id for m in fake_telegram.messages[ALICE]] == [1000, 1001]


async def test_html_telegram_cannot_parse_is_rejected(
    bot: Bot, fake_telegram: FakeTelegram
) -> None:
    with pytest.raises(BadRequest, match=r'(?i)unsupported start tag "foo" at byte offset 3'):
        await bot.send_message(ALICE, "hi <foo>", parse_mode="HTML")
    with pytest.raises(BadRequest, match=r'end tag corresponding to start tag "b"'):
        await bot.send_message(ALICE, "<b>open", parse_mode="HTML")

    await bot.send_message(ALICE, "<b>open", parse_mode=None)
    assert fake_telegram.sent_texts(ALICE) == ["<b>open"]


async def test_an_injected_bad_request_fails_once(bot: Bot, fake_telegram: FakeTelegram) -> None:
    fake_telegram.fail_next(
        "sendMessage",
        error_code=400,
        description=HTML_REJECTED,
        retry_after=None,
    )

    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message(ALICE, "<b>fine</b>", parse_mode="HTML")
    await bot.send_message(ALICE, "fine")

    assert fake_telegram.sent_texts(ALICE) == ["fine"]


async def test_an_injected_429_raises_retry_after(bot: Bot, fake_telegram: FakeTelegram) -> None:
    fake_telegram.fail_next("sendMessage", times=2)

    for _ in range(2):
        with pytest.raises(RetryAfter) as raised:
            await bot.send_message(ALICE, "flood")
        # With PTB_TIMEDELTA=1 (set by the fixture) PTB 22 gives a timedelta, not an int.
        assert raised.value.retry_after == dtm.timedelta(seconds=1)
    await bot.send_message(ALICE, "through")

    assert fake_telegram.sent_texts(ALICE) == ["through"]
    assert [call.method for call in fake_telegram.calls].count("sendMessage") == 3


async def test_a_stalled_call_times_out(bot: Bot, fake_telegram: FakeTelegram) -> None:
    fake_telegram.stall_next("sendMessage")

    with pytest.raises(TimedOut):
        await bot.send_message(ALICE, "anyone?", read_timeout=0.1)


async def test_a_wrong_token_fails_initialize(fake_telegram: FakeTelegram) -> None:
    application = _application(fake_telegram, token="123456789:AAF-wrong-token-abcdefghijklmnopq")

    with pytest.raises(InvalidToken):
        await application.initialize()
    # initialize() opened the HTTP clients before getMe failed; close them.
    await application.bot.shutdown()

    assert fake_telegram.calls == [Call("getMe", {})]


async def test_an_unknown_method_is_not_found(bot: Bot, fake_telegram: FakeTelegram) -> None:
    with pytest.raises(EndPointNotFound):
        await bot.do_api_request("noSuchMethod", api_kwargs={"chat_id": ALICE})

    assert fake_telegram.calls[-1] == Call("noSuchMethod", {"chat_id": ALICE})


async def test_a_registered_file_downloads(bot: Bot, fake_telegram: FakeTelegram) -> None:
    data = bytes(range(256)) * 4
    fake_telegram.add_file("photo-1", data, file_path="photos/x.jpg")
    update = Update.de_json(fake_telegram.photo(ALICE, "photo-1", caption="look"), bot)
    assert update.message is not None

    file = await update.message.photo[-1].get_file()

    assert (file.file_id, file.file_size) == ("photo-1", len(data))
    assert await file.download_as_bytearray() == bytearray(data)
    assert update.message.caption == "look"
    assert fake_telegram.downloads == ["photos/x.jpg"]
    with pytest.raises(BadRequest, match=r"(?i)invalid file_id"):
        await bot.get_file("unknown")


async def test_commands_and_chat_actions_are_recorded(
    bot: Bot, fake_telegram: FakeTelegram
) -> None:
    await bot.set_my_commands(
        [BotCommand("ask", "Ask the assistant"), BotCommand("reset", "Start over")]
    )
    assert await bot.send_chat_action(ALICE, "typing")

    assert fake_telegram.commands == [
        {"command": "ask", "description": "Ask the assistant"},
        {"command": "reset", "description": "Start over"},
    ]
    assert fake_telegram.calls[-1] == Call("sendChatAction", {"chat_id": ALICE, "action": "typing"})
    assert [c.command for c in await bot.get_my_commands()] == ["ask", "reset"]


async def test_set_webhook_is_recorded_and_blocks_polling(
    bot: Bot, fake_telegram: FakeTelegram
) -> None:
    await bot.set_webhook("https://bot.example/telegram", secret_token="s3cret")

    assert fake_telegram.webhook == Webhook("https://bot.example/telegram", "s3cret")
    with pytest.raises(Conflict, match="webhook is active"):
        await bot.get_updates()
    await bot.delete_webhook()
    assert fake_telegram.webhook is None
    assert await bot.get_updates() == ()


async def test_post_webhook_sends_the_update_as_telegram_does(fake_telegram: FakeTelegram) -> None:
    received: list[tuple[str | None, str, dict[str, Any]]] = []

    async def endpoint(request: web.Request) -> web.Response:
        received.append(
            (request.headers.get(SECRET_HEADER), request.content_type, await request.json())
        )
        return web.Response(status=200 if request.headers.get(SECRET_HEADER) == "s3cret" else 403)

    server = web.Application()
    server.router.add_post("/telegram", endpoint)
    runner = web.AppRunner(server, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/telegram"
    try:
        update = fake_telegram.private_text(ALICE, "via webhook")
        assert await fake_telegram.post_webhook(url, update, secret="s3cret") == 200
        assert await fake_telegram.post_webhook(url, update, secret=None) == 403
    finally:
        await runner.cleanup()

    assert received == [
        ("s3cret", "application/json", update),
        (None, "application/json", update),
    ]


async def test_built_updates_parse_as_ptb_objects(fake_telegram: FakeTelegram) -> None:
    bot = Bot(fake_telegram.token)
    private = Update.de_json(fake_telegram.private_text(ALICE, "/start now"), bot)
    mention = Update.de_json(fake_telegram.group_text(GROUP, "hi", user_id=7, mention=True), bot)
    reply = Update.de_json(
        fake_telegram.group_text(GROUP, "and?", user_id=7, reply_to_bot=True), bot
    )
    edited = Update.de_json(fake_telegram.edited_text(ALICE, 1, "/start later"), bot)
    sticker = Update.de_json(fake_telegram.sticker(ALICE), bot)
    post = Update.de_json(fake_telegram.channel_post(-1009, "news"), bot)
    joined = Update.de_json(fake_telegram.member_joined(GROUP, 8), bot)

    assert private.message is not None and private.effective_chat is not None
    assert private.effective_chat.type == "private"
    assert private.message.parse_entities([MessageEntity.BOT_COMMAND]) == {
        private.message.entities[0]: "/start"
    }
    assert mention.message is not None and mention.message.text == "@switchboard_bot hi"
    assert list(mention.message.parse_entities([MessageEntity.MENTION]).values()) == [
        "@switchboard_bot"
    ]
    assert reply.message is not None and reply.message.reply_to_message is not None
    assert reply.message.reply_to_message.from_user == _bot_user(fake_telegram)
    assert edited.edited_message is not None and edited.edited_message.text == "/start later"
    assert edited.edited_message.message_id == private.message.message_id == 1
    assert sticker.message is not None and sticker.message.sticker is not None
    assert post.channel_post is not None and post.channel_post.sender_chat is not None
    assert post.channel_post.sender_chat.type == "channel"
    assert joined.message is not None and [u.id for u in joined.message.new_chat_members] == [8]
    ids = [u.update_id for u in (private, mention, reply, edited, sticker, post, joined)]
    assert ids == list(range(1, 8))
