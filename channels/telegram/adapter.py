"""The Telegram adapter on python-telegram-bot: long polling or a webhook, HTML replies.

Telegram objects never leave this package: updates become `Inbound`, `Outbound` becomes
`sendMessage` / `editMessageText` / `sendChatAction` calls, and a `file` Outbound becomes
`sendPhoto` (a picture within the photo limit) or `sendDocument` per file.

Catch-up: Telegram keeps a bot's updates for a day and sends what was missed once the bot
polls again (or retries its webhook); a message that arrives late is answered with a note on
how late it is, within the catch-up limits every platform shares (`channels/catchup.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hmac
import json
import logging
import re
import warnings
from collections.abc import Awaitable, Callable, Sequence
from html import escape
from typing import Any, TypeVar
from urllib.parse import urlparse

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from telegram import (
    Audio,
    BotCommand,
    CallbackQuery,
    Document,
    InlineKeyboardMarkup,
    InputFile,
    Message,
    MessageEntity,
    PhotoSize,
    ReplyParameters,
    Update,
    Voice,
)
from telegram.constants import ChatAction, ChatType, ParseMode
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.ext import AIORateLimiter, Application, filters

from channels.attachments import DocumentReader, ReceivedDocuments, ReceivedImages
from channels.bad_requests import BadRequestLog
from channels.base import InboundSink
from channels.catchup import LATE_AFTER, CatchUp, LateMessages, with_late_note
from channels.reactions import Emoji, StatusReactions
from channels.streaming import ReplyStreams, ReplyTarget
from channels.telegram.buttons import press_inbound, question_keyboard, stop_keyboard
from channels.telegram.checks import DEFAULT_API_URL, DEFAULT_WEBHOOK_PORT
from channels.telegram.format import TELEGRAM_LIMIT, telegram_chunks
from channels.typing import TypingRenewal, stop_renewals
from channels.uploads import UploadLimits, upload_each
from core.commands import CommandInfo
from core.envelopes import Address, Attachment, Inbound, Outbound
from core.errors import ChannelError, ConfigError
from core.messages import ImagePart
from core.tasks import cancel_and_wait

__all__ = ["TelegramAdapter", "TelegramSettings", "bot_commands"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
# Telegram accepts 1-256 of these characters; short secrets are guessable and too short for
# the log scrubber to recognise, so at least 16 are required.
_SECRET_SHAPE = re.compile(r"[A-Za-z0-9_-]{16,256}")
# The updates we ask for: messages, and presses of confirmation buttons.
_UPDATES = [Update.MESSAGE, Update.CALLBACK_QUERY]
# The updates we answer: messages with text (commands too), a photo, a document, a voice note
# or an audio file.
_WANTED = filters.UpdateType.MESSAGE & (
    filters.TEXT | filters.PHOTO | filters.Document.ALL | filters.VOICE | filters.AUDIO
)
_MAX_IMAGE_BYTES = 10 * 1024 * 1024
# Images sent as files that the model APIs take; others are files like any other.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# What the Bot API lets a bot download (getFile).
_MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
_MAX_TYPING_SECONDS = 300.0
# Status reactions: bots may only use Telegram's fixed set of reaction emoji, which has no
# check mark or warning sign.
_REACTIONS = Emoji(taken="👀", answered="👍", failed="😢")


class TelegramSettings(BaseModel):
    """What the adapter needs; built from the environment in `bots/`."""

    model_config = ConfigDict(frozen=True)

    token: SecretStr
    api_url: str = DEFAULT_API_URL
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None
    webhook_host: str = "0.0.0.0"  # Telegram must be able to reach it
    webhook_port: int = Field(default=DEFAULT_WEBHOOK_PORT, ge=0, le=65535)
    poll_timeout: int = Field(default=30, ge=0)
    typing_interval: float = Field(default=4.0, gt=0)
    # Catch-up after downtime: how far back a late message is answered, and how many late
    # ones per conversation at most.
    catch_up_hours: float = Field(default=24.0, ge=0)
    catch_up_messages: int = Field(default=100, ge=0)
    # Status reactions on the person's message (`channels/reactions.py`).
    reactions: bool = True


def bot_commands(menu: Sequence[CommandInfo]) -> list[BotCommand]:
    """The `setMyCommands` list: every command anyone may use (admin-only ones are left to
    `/help`, which lists them for admins)."""
    return [BotCommand(info.name, info.description) for info in menu if not info.admin_only]


class TelegramAdapter:
    """One Telegram bot, seen as a `ChannelAdapter`."""

    def __init__(
        self,
        settings: TelegramSettings,
        *,
        menu: Sequence[CommandInfo],
        replies: ReplyStreams,
        documents: DocumentReader | None = None,
        uploads: UploadLimits | None = None,
    ) -> None:
        """`menu` is the chat commands to offer; `replies` shows streamed replies through
        records every gateway shares; `documents` reads the documents people send; `uploads`
        are the Bot API's limits on the files the bot sends."""
        if settings.webhook_url:
            secret = settings.webhook_secret
            if secret is None:
                raise ConfigError("TELEGRAM_WEBHOOK_URL needs TELEGRAM_WEBHOOK_SECRET as well")
            if not _SECRET_SHAPE.fullmatch(secret.get_secret_value()):
                raise ConfigError(
                    "TELEGRAM_WEBHOOK_SECRET must be 16 to 256 letters, digits, '_' or '-'"
                )
        self.settings = settings
        self._commands = bot_commands(menu)
        token = settings.token.get_secret_value()
        # The bot's numeric id is the token's first part: stable, and known without a request.
        self.bot_key = token.partition(":")[0] or "bot"
        self._app = self._build(token)
        self._sink: InboundSink | None = None
        self._stopped = asyncio.Event()
        # Deliveries may come before `run()` (a gateway standing by for the poller lease
        # delivers meanwhile): the first sets the bot's HTTP client up, under this lock.
        self._setting_up = asyncio.Lock()
        self._receiving = False
        self._replies = replies
        self._reactions = StatusReactions(
            "telegram", _REACTIONS, enabled=settings.reactions, log=log
        )
        self._documents = documents or DocumentReader()
        self._uploads = uploads or UploadLimits()
        self._typing: dict[str, TypingRenewal] = {}
        self._webhook_runner: web.AppRunner | None = None
        self._poller: asyncio.Task[None] | None = None
        self._on_poll: Callable[[], None] | None = None
        self._bad_requests = BadRequestLog(log)
        self._late = LateMessages(CatchUp(settings.catch_up_hours, settings.catch_up_messages))
        self.webhook_port: int | None = None
        self.username = ""
        self.bot_id = 0

    @property
    def platform(self) -> str:
        return "telegram"

    def _build(self, token: str) -> Application[Any, Any, Any, Any, Any, Any]:
        api = self.settings.api_url.rstrip("/")
        builder = (
            Application.builder()
            .token(token)
            .base_url(f"{api}/bot")
            .base_file_url(f"{api}/file/bot")
            # Paces sends (30/s overall, 20/min per group). A RetryAfter is not waited out
            # here: the limiter would hold every chat's requests meanwhile; the gateway waits
            # in the lane of the chat that was limited (`channels/gateway.py`).
            .rate_limiter(AIORateLimiter(max_retries=0))
        )
        # No Updater: it confirms updates (the next getUpdates offset) whether or not they were
        # stored; `_poll_forever` confirms each only after the sink took it.
        return builder.updater(None).build()

    async def run(self, sink: InboundSink) -> None:
        """Receive updates until `stop()`."""
        self._sink = sink
        self._receiving = True
        app = self._app
        try:
            await self._set_up()
        except InvalidToken:
            raise ConfigError(
                "Telegram rejected TELEGRAM_BOT_TOKEN (check it with BotFather)"
            ) from None
        try:
            self.username = app.bot.username or ""
            self.bot_id = app.bot.id
            await app.bot.set_my_commands(self._commands)
            if self.settings.webhook_url:
                await self._start_webhook()
            else:
                # Polling fails with a conflict while a webhook is set; pending updates stay.
                await app.bot.delete_webhook()
                self._poller = asyncio.create_task(self._poll_forever())
            await app.start()
            log.info("telegram bot @%s is listening", self.username)
            await self._stopped.wait()
        finally:
            await self._shutdown()

    def on_poll(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every `getUpdates` that answered (the watchdog's poll lag)."""
        self._on_poll = listener

    async def stop(self) -> None:
        """Stop receiving; `run()` returns once PTB has shut down (without a `run()`, as on a
        gateway that stood by and delivered, PTB is shut down here)."""
        self._stopped.set()
        if not self._receiving:
            async with self._setting_up:
                await self._app.shutdown()

    async def _set_up(self) -> None:
        """Initialize PTB (the bot's HTTP client, `getMe`) once; `ChannelError` if Telegram
        cannot be reached (`InvalidToken` for a bad token)."""
        async with self._setting_up:
            if self._stopped.is_set() and not self._receiving:
                raise ChannelError("the telegram adapter is stopping")
            try:
                await self._app.initialize()  # a no-op once done
            except NetworkError as exc:
                raise ChannelError(f"cannot reach the Telegram Bot API: {exc}") from exc

    async def _shutdown(self) -> None:
        # Awaited: a renewal may be inside a query of the reply records, whose database is
        # closed once the adapters have stopped (channels/typing.py).
        await stop_renewals(self._typing.values())
        self._typing.clear()
        if self._poller is not None:
            await cancel_and_wait(self._poller)
        if self._webhook_runner is not None:
            await self._webhook_runner.cleanup()
        app = self._app
        if app.running:
            await app.stop()
        await app.shutdown()

    # --- receiving -------------------------------------------------------------------------

    async def _poll_forever(self) -> None:
        """Long-poll `getUpdates`, confirming an update (the next offset) only once the sink
        took it: a crash before then gets it again from Telegram on the next start."""
        offset: int | None = None
        failures = 0
        while True:
            try:
                updates = await self._app.bot.get_updates(
                    offset=offset,
                    timeout=self.settings.poll_timeout,
                    allowed_updates=_UPDATES,
                )
                if self._on_poll is not None:
                    self._on_poll()
                for update in updates:
                    await self._take(update)
                    offset = update.update_id + 1
            except Exception as exc:  # network, Telegram or sink: not confirmed, asked again
                failures += 1
                self._on_poll_error(exc)
                await asyncio.sleep(min(30.0, 0.5 * 2 ** min(failures, 6)))
                continue
            failures = 0

    async def _take(self, update: Update) -> None:
        """Hand one update's message to the sink; returns once the sink has it.

        An update we cannot read is logged and skipped (retrying would not help); a failing
        sink raises, so the update is not confirmed.
        """
        if update.callback_query is not None:
            await self._press(update.callback_query)
            return
        if not _WANTED.check_update(update):
            return
        try:
            inbound = await self._inbound(update)
        except Exception as exc:
            log.error("telegram update handling failed: %s", exc, exc_info=exc)
            return
        if inbound is not None and update.message is not None:
            inbound = self._in_time(inbound, update.message.date)
        if inbound is not None:
            assert self._sink is not None
            await self._sink(inbound)

    def _in_time(self, inbound: Inbound, sent_at: dt.datetime) -> Inbound | None:
        """`inbound` as it is answered: a late one (sent while the bot was away) with the late
        note, or None past the catch-up limits or when it would not have been answered live."""
        now = dt.datetime.now(dt.UTC)
        if now - sent_at >= LATE_AFTER and not (inbound.is_direct or inbound.mentions_bot):
            return None  # read, not answered: not worth a turn now
        if not self._late.admits(inbound.address.session_key, sent_at, now):
            log.info("not answering a message sent at %s: past the catch-up limits", sent_at)
            return None
        return with_late_note(inbound, sent_at, now)

    async def _press(self, query: CallbackQuery) -> None:
        """A confirmation or Stop button was pressed: hand the answer or stop request over,
        then tell Telegram the press was seen (which stops the button's spinner). The message
        changes once the waiting turn has decided, or the stopped one has ended."""
        inbound = press_inbound(query, self.bot_key)
        if inbound is not None:
            assert self._sink is not None
            await self._sink(inbound)
        with contextlib.suppress(TelegramError):
            await query.answer()

    async def _inbound(self, update: Update) -> Inbound | None:
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return None
        command = self._command(message)
        if command == "":
            return None  # a command for another bot in the same group
        text = message.text or message.caption or ""
        if self.username:
            text = text.replace(f"@{self.username}", "").strip()
        thread = message.message_thread_id if message.is_topic_message else None
        received = await self._images(message)
        documents = await self._read_documents(message)
        inbound = Inbound(
            kind="command" if command else "message",
            command=command,
            address=Address(
                platform="telegram",
                bot=self.bot_key,
                chat=str(message.chat.id),
                thread=str(thread) if thread else None,
            ),
            user_id=str(message.from_user.id),
            user_name=message.from_user.full_name,
            text=received.text_with_note(text),
            images=received.images,
            documents=documents.documents,
            transcriptions=documents.transcriptions,
            is_direct=message.chat.type == ChatType.PRIVATE,
            mentions_bot=command is not None or self._addressed(message),
            platform_message_id=str(message.message_id),
        )
        return inbound

    def _command(self, message: Message) -> str | None:
        """The command word for us; "" for another bot's command; None for no command."""
        for entity, value in message.parse_entities([MessageEntity.BOT_COMMAND]).items():
            if entity.offset != 0:
                continue
            name, _, target = value[1:].partition("@")
            if target and target.lower() != self.username.lower():
                return ""
            return name.lower()
        return None

    def _addressed(self, message: Message) -> bool:
        """Mentioned by @username or by a text mention, or replied to."""
        entities = {**message.parse_entities(), **message.parse_caption_entities()}
        for entity, value in entities.items():
            if entity.type == MessageEntity.MENTION and value[1:].lower() == self.username.lower():
                return True
            if entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
                if entity.user.id == self.bot_id:
                    return True
        replied = message.reply_to_message
        return bool(replied and replied.from_user and replied.from_user.id == self.bot_id)

    async def _images(self, message: Message) -> ReceivedImages:
        """A photo, or an image sent as a file (uncompressed) in a format the model takes."""
        received = ReceivedImages()
        document = message.document
        if message.photo:
            image: PhotoSize | Document = message.photo[-1]
            media_type = "image/jpeg"
        elif document is not None and document.mime_type in _IMAGE_TYPES:
            image, media_type = document, document.mime_type
        else:
            return received
        if image.file_size and image.file_size > _MAX_IMAGE_BYTES:
            log.info("not reading a %d-byte image", image.file_size)
            received.add(None)
            return received
        try:
            file = await image.get_file()
            data = bytes(await file.download_as_bytearray())
        except TelegramError as exc:
            log.warning("could not download an image: %s", exc)
            received.add(None)
            return received
        received.add(ImagePart(media_type=media_type, data=data))
        return received

    async def _read_documents(self, message: Message) -> ReceivedDocuments:
        received = self._documents.received()
        if message.voice is not None or message.audio is not None:
            await self._read_recording(message, received)
            return received
        document = message.document
        if document is None or document.mime_type in _IMAGE_TYPES:
            return received  # none, or an image (`_images`)

        async def download() -> bytes | None:
            try:
                file = await document.get_file()
                return bytes(await file.download_as_bytearray())
            except TelegramError as exc:
                log.warning("could not download a document: %s", exc)
                return None

        await received.add(
            document.file_name or "document",
            document.mime_type or "",
            document.file_size,
            download,
            platform_limit=_MAX_DOWNLOAD_BYTES,
        )
        return received

    async def _read_recording(self, message: Message, received: ReceivedDocuments) -> None:
        """A voice note or an audio file, transcribed (`channels/attachments.py`)."""
        recording: Voice | Audio | None = message.voice
        name = "voice-note.ogg"
        if recording is None:
            recording = message.audio
            assert recording is not None
            name = recording.file_name or "audio"
        length = recording.duration  # a timedelta: PTB_TIMEDELTA is set (spec.py)
        seconds = length.total_seconds() if isinstance(length, dt.timedelta) else float(length)

        async def download() -> bytes | None:
            try:
                file = await recording.get_file()
                return bytes(await file.download_as_bytearray())
            except TelegramError as exc:
                log.warning("could not download a voice note: %s", exc)
                return None

        await received.add(
            name,
            recording.mime_type or "audio/ogg",
            recording.file_size,
            download,
            platform_limit=_MAX_DOWNLOAD_BYTES,
            duration=seconds,
        )

    def _on_poll_error(self, error: Exception) -> None:
        log.warning("telegram polling error: %s", error)

    # --- webhook ---------------------------------------------------------------------------

    async def _start_webhook(self) -> None:
        settings = self.settings
        assert settings.webhook_url is not None and settings.webhook_secret is not None
        path = urlparse(settings.webhook_url).path or "/"
        server = web.Application(client_max_size=1024 * 1024)
        server.router.add_post(path, self._on_webhook)
        self._webhook_runner = web.AppRunner(server, access_log=None)
        await self._webhook_runner.setup()
        site = web.TCPSite(self._webhook_runner, settings.webhook_host, settings.webhook_port)
        await site.start()
        sockets = self._webhook_runner.addresses
        self.webhook_port = int(sockets[0][1]) if sockets else settings.webhook_port
        await self._app.bot.set_webhook(
            settings.webhook_url,
            secret_token=settings.webhook_secret.get_secret_value(),
            allowed_updates=_UPDATES,
        )
        log.info("telegram webhook listening on port %s at %s", self.webhook_port, path)

    async def _on_webhook(self, request: web.Request) -> web.Response:
        """Take one update from Telegram. A bad request is refused with a 4xx decided before
        anything that could raise; a body over the server's size limit gets aiohttp's 413."""
        secret = self.settings.webhook_secret
        assert secret is not None
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
        if not hmac.compare_digest(given.encode(), secret.get_secret_value().encode()):
            return self._refuse(request, 403, "forbidden", "no or a wrong secret token")
        try:
            body = json.loads(await request.read())
        except ValueError:  # UnicodeDecodeError is one too
            return self._refuse(request, 400, "malformed update", "the body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("update_id"), int):
            return self._refuse(request, 400, "malformed update", "not a Telegram update")
        try:
            update = Update.de_json(body, self._app.bot)
        except Exception as exc:  # whatever PTB trips over in a body it did not expect
            return self._refuse(request, 400, "malformed update", f"unreadable update ({exc})")
        try:
            # 200 only once the message is stored: Telegram retries anything else.
            await self._take(update)
        except Exception as exc:
            log.warning("could not take a telegram update (%s); telegram will retry", exc)
            return web.Response(status=503, text="try again")
        return web.Response(text="ok")

    def _refuse(self, request: web.Request, status: int, text: str, reason: str) -> web.Response:
        self._bad_requests.refused(status, reason, request.remote)
        return web.Response(status=status, text=text)

    # --- delivering ------------------------------------------------------------------------

    async def deliver(self, outbound: Outbound) -> None:
        """Show typing, stream pieces and final answers in their chat."""
        if not self._receiving:
            try:
                await self._set_up()
            except InvalidToken as exc:
                raise ChannelError("Telegram rejected TELEGRAM_BOT_TOKEN") from exc
        match outbound.kind:
            case "typing":
                self._start_typing(outbound.address, outbound.record_key)
                await self._react(outbound)
            case "progress":
                pass  # not queued for Telegram (the worker's stream policy); typing shows work
            case "delta":
                await self._replies.show(outbound, self._reply_for)
            case "reply" | "notice" | "notification" | "question":
                self._stop_typing(outbound.address)
                await self._replies.show(outbound, self._reply_for)
                await self._react(outbound)
            case "decision":
                await self._decide(outbound)
            case "file":
                await self._send_files(outbound)

    async def _send_files(self, outbound: Outbound) -> None:
        """Upload each file: a picture as a photo, anything else as a document; a file over
        the limit or refused becomes a line saying so."""
        chat_id = int(outbound.address.chat)
        thread = int(outbound.address.thread) if outbound.address.thread else None
        bot = self._app.bot

        async def upload(attachment: Attachment, caption: str) -> None:
            # The caption as plain text: the model's words, and no HTML to be refused.
            document = InputFile(attachment.data, filename=attachment.name)
            if self._uploads.as_picture(attachment):
                sent = bot.send_photo(
                    chat_id, document, caption=caption or None, message_thread_id=thread
                )
            else:
                sent = bot.send_document(
                    chat_id, document, caption=caption or None, message_thread_id=thread
                )
            await _translate(sent)

        async def note(line: str) -> None:
            await self._send(chat_id, escape(line), thread=thread, reply=None)

        await upload_each(outbound, self._uploads, upload, note)

    async def _decide(self, outbound: Outbound) -> None:
        """Show a confirmation's decision in place of its question; the edit carries no
        keyboard, so the buttons go away. Sent anew if the question was never shown."""
        shown = await self._replies.messages(f"question:{outbound.question}")
        html = telegram_chunks(outbound.text)[0]
        if shown:
            await self._edit(int(outbound.address.chat), int(shown[0]), html)
        else:
            thread = int(outbound.address.thread) if outbound.address.thread else None
            await self._send(int(outbound.address.chat), html, thread=thread, reply=None)

    def _reply_for(self, outbound: Outbound) -> ReplyTarget:
        address = outbound.address
        chat_id = int(address.chat)
        thread = int(address.thread) if address.thread else None
        quote = outbound.reply_to_platform_id if chat_id < 0 else None
        # A confirmation question carries its Allow / Refuse buttons on its first message.
        buttons = question_keyboard(outbound.question) if outbound.question else None
        # An answer being written carries a Stop button; the final text's edit takes it away.
        stop = stop_keyboard() if outbound.kind == "delta" else None

        async def send(index: int, chunk: str) -> str:
            reply = None
            if quote and index == 0:
                reply = ReplyParameters(message_id=int(quote), allow_sending_without_reply=True)
            markup = buttons if buttons is not None and index == 0 else stop
            message = await self._send(chat_id, chunk, thread=thread, reply=reply, markup=markup)
            return str(message.message_id)

        async def edit(message_id: str, chunk: str) -> None:
            await self._edit(chat_id, int(message_id), chunk, markup=stop)

        return ReplyTarget(
            send=send,
            edit=edit,
            render=telegram_chunks,
            part_size=TELEGRAM_LIMIT,
            controls="stop" if stop else "",
        )

    async def _send(
        self,
        chat_id: int,
        html: str,
        *,
        thread: int | None,
        reply: ReplyParameters | None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> Message:
        bot = self._app.bot
        try:
            return await _translate(
                bot.send_message(
                    chat_id,
                    html,
                    parse_mode=ParseMode.HTML,
                    message_thread_id=thread,
                    reply_parameters=reply,
                    reply_markup=markup,
                )
            )
        except _MarkupRejected:
            log.warning("telegram refused the HTML of a reply; sending it as plain text")
            return await _translate(
                bot.send_message(
                    chat_id,
                    _plain(html),
                    message_thread_id=thread,
                    reply_parameters=reply,
                    reply_markup=markup,
                )
            )

    async def _edit(
        self,
        chat_id: int,
        message_id: int,
        html: str,
        *,
        markup: InlineKeyboardMarkup | None = None,
    ) -> None:
        """Edit a message's text; its inline keyboard becomes `markup` (None: none)."""
        bot = self._app.bot
        try:
            await _translate(
                bot.edit_message_text(
                    html,
                    chat_id=chat_id,
                    message_id=message_id,
                    parse_mode=ParseMode.HTML,
                    reply_markup=markup,
                )
            )
        except _MarkupRejected:
            await _translate(
                bot.edit_message_text(
                    _plain(html), chat_id=chat_id, message_id=message_id, reply_markup=markup
                )
            )
        except _NotModified:
            pass

    async def _react(self, outbound: Outbound) -> None:
        """Set the status reaction `outbound` calls for; one call replaces the bot's earlier
        reaction on the message. A refusal is logged, never raised."""
        step = self._reactions.step(outbound)
        if step is None:
            return
        if step.status == "taken" and await self._replies.finished(outbound.record_key):
            return  # answered already (by another gateway): the answered reaction stays
        try:
            await _translate(
                self._app.bot.set_message_reaction(
                    int(outbound.address.chat), int(step.message), step.add
                )
            )
        except (ChannelError, TelegramError, ValueError, _MarkupRejected, _NotModified) as exc:
            self._reactions.refused(step, exc)

    def _start_typing(self, address: Address, reply: str) -> None:
        key = address.session_key
        if key in self._typing and not self._typing[key].done():
            return
        thread = int(address.thread) if address.thread else None

        async def show() -> None:
            with contextlib.suppress(TelegramError):
                await self._app.bot.send_chat_action(
                    int(address.chat), ChatAction.TYPING, message_thread_id=thread
                )

        self._typing[key] = TypingRenewal(
            show,
            lambda: self._replies.finished(reply),
            interval=self.settings.typing_interval,
            limit=_MAX_TYPING_SECONDS,
        )

    def _stop_typing(self, address: Address) -> None:
        renewal = self._typing.pop(address.session_key, None)
        if renewal is not None:
            renewal.stop()


class _MarkupRejected(Exception):
    """Telegram could not parse the HTML of a message."""


class _NotModified(Exception):
    """An edit that would not change the message."""


async def _translate(call: Awaitable[_T]) -> _T:
    """Await a PTB call, turning its errors into `ChannelError` (or the two signals above)."""
    try:
        return await call
    except RetryAfter as exc:
        raise ChannelError(f"telegram flood control: {exc}", retry_after=_seconds(exc)) from exc
    except Forbidden as exc:
        raise ChannelError(f"telegram refused: {exc.message}", permanent=True) from exc
    except BadRequest as exc:
        lowered = exc.message.lower()
        if "can't parse entities" in lowered or "unsupported start tag" in lowered:
            raise _MarkupRejected(exc.message) from exc
        if "message is not modified" in lowered:
            raise _NotModified(exc.message) from exc
        raise ChannelError(f"telegram bad request: {exc.message}", permanent=True) from exc
    except NetworkError as exc:
        raise ChannelError(f"telegram unreachable: {exc.message}") from exc


def _seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():
        # PTB 22 warns that the int form of retry_after is deprecated; both forms are handled.
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def _plain(html: str) -> str:
    """The text of a rendered HTML chunk without its markup."""
    from html.parser import HTMLParser

    class _Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []

        def handle_data(self, data: str) -> None:
            self.parts.append(data)

    parser = _Text()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)
