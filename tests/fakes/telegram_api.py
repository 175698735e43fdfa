"""A loopback fake of the Telegram Bot API, for driving the real python-telegram-bot (PTB).

Build PTB with `.base_url(f"{fake.url}/bot").base_file_url(f"{fake.url}/file/bot")`: methods are
`POST /bot{token}/{method}` and downloads `GET /file/bot{token}/{file_path}`. Tests push updates
with the builders (`private_text`, `group_text`, …); a held `getUpdates` returns them at once.
Parameters are decoded the way PTB encodes them: form fields with non-strings as JSON text.
`setMessageReaction` keeps the bot's reaction per message in `reactions`, refusing emoji
outside the Bot API's list and messages it does not know. `sendDocument` and `sendPhoto` take
multipart uploads within the Bot API's limits (50 MB a document, 10 MB a photo, which must be
an image) and record each in `uploads`; the sent message carries the file and its caption.

Deviations from the real API, on purpose: sent text is stored as sent (HTML tags are checked,
not turned into entities), and when no `allowed_updates` was given every update type is
delivered (the real default leaves out `chat_member` and the reaction updates).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
import html
import json
import re
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import aiohttp
from aiohttp import web

from tests.fakes.telegram_updates import UpdateBuilders, default_chat, user_object

DEFAULT_TOKEN = "123456789:AAF-test-token-abcdefghijklmnopqrstuv"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_TEXT_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
# What a bot may upload (the Bot API's documented limits).
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024
MAX_PHOTO_BYTES = 10 * 1024 * 1024
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"RIFF", b"GIF8")
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are "
    "exactly the same as a current content and reply markup of the message"
)
POLL_CONFLICT = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)
WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete "
    "the webhook first"
)

# Fields that are strings in the Bot API even when they look like numbers or JSON.
_TEXT_FIELDS = frozenset(
    "text caption parse_mode url secret_token file_id description short_description name title"
    " query emoji question first_name last_name callback_query_id inline_message_id action"
    " business_connection_id message_effect_id custom_emoji_id language_code ip_address".split()
)
_INTEGER = re.compile(r"-?\d+")
_HTML_TAGS = frozenset(
    "a b strong i em u ins s strike del span tg-spoiler tg-emoji code pre blockquote".split()
)
_ANY_TAG = re.compile(r"<[^>]*>")
# The emoji a bot may react with (the Bot API's `ReactionTypeEmoji`); others: REACTION_INVALID.
REACTION_EMOJI = frozenset(
    [
        *"👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡".split(),
        *"🥱 🥴 😍 🐳 🌚 🌭 💯 🤣 ⚡ 🍌 🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 😴".split(),
        *"😭 🤓 👻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 🆒 💘".split(),
        *"🙉 🦄 😘 💊 🙊 😎 👾 🤷 😡".split(),
        # Joined with zero-width joiners (and variation selectors).
        "\u2764\ufe0f\u200d\U0001f525",
        "\U0001f468\u200d\U0001f4bb",
        "\U0001f937\u200d\u2642\ufe0f",
        "\U0001f937\u200d\u2640\ufe0f",
    ]
)


@dataclass(frozen=True)
class Call:
    """One Bot API request as the fake decoded it; `index` is its position in `calls`."""

    method: str
    params: dict[str, Any]
    index: int = field(default=-1, compare=False)


@dataclass(frozen=True)
class UploadedFile:
    """A file part of a multipart request: its name, content type and bytes."""

    filename: str
    content_type: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class Upload:
    """A `sendDocument` or `sendPhoto` the fake accepted."""

    method: str
    chat_id: int
    file: UploadedFile
    caption: str | None
    message_id: int


@dataclass
class SentMessage:
    """A message the bot sent, as it stands now; `edits` counts successful edits."""

    message_id: int
    chat_id: int
    text: str
    parse_mode: str | None = None
    thread_id: int | None = None
    edits: int = 0
    reply_to: int | None = None
    reply_markup: dict[str, Any] | None = None
    entities: list[dict[str, Any]] | None = None
    date: int = 0
    # For an uploaded file: the `document` object or the `photo` sizes, and the caption.
    document: dict[str, Any] | None = None
    photo: list[dict[str, Any]] | None = None
    caption: str | None = None


@dataclass(frozen=True)
class Webhook:
    """What the last `setWebhook` asked for."""

    url: str
    secret_token: str | None = None
    allowed_updates: list[str] | None = None


@dataclass(frozen=True)
class _Fault:
    error_code: int
    description: str
    retry_after: float | None
    stall: bool = False


class _ApiError(Exception):
    """Ends a method with `{"ok": false, ...}`; raised inside the method handlers."""

    def __init__(self, error_code: int, description: str) -> None:
        super().__init__(description)
        self.error_code = error_code
        self.description = description


class _Changes:
    """Wakes every waiter when the fake's state changes.

    `notify` is synchronous so that `push` (called from plain test code) can wake a held
    `getUpdates`; an `asyncio.Condition` would need its lock, which only a coroutine can take.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._event.wait()


class FakeTelegram(UpdateBuilders):
    """The Bot API on 127.0.0.1 for one bot; `url` is the root (PTB adds `/bot` and the token).

    Records every request in `calls`, keeps sent messages in `messages`, serves `getUpdates`
    from updates pushed by the test, and fails chosen calls on demand (`fail_next`).
    """

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        bot_id: int = 999,
        username: str = "switchboard_bot",
    ) -> None:
        super().__init__()
        self.token = token
        self.bot_id = bot_id
        self.username = username
        self.calls: list[Call] = []
        self.messages: dict[int, list[SentMessage]] = defaultdict(list)
        self.webhook: Webhook | None = None
        self.commands: list[dict[str, Any]] = []
        self.allowed_updates: list[str] | None = None
        self.downloads: list[str] = []
        self.uploads: list[Upload] = []
        self._pending: list[dict[str, Any]] = []
        self._last_update_id = 0
        self._sent_ids: dict[int, int] = defaultdict(lambda: 999)
        self._faults: dict[str, deque[_Fault]] = defaultdict(deque)
        self._changes = _Changes()
        self._held_polls = 0
        self._poll_ticket = 0
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._methods: dict[str, Callable[[dict[str, Any]], Any]] = {
            "getme": self._get_me,
            "deletewebhook": self._delete_webhook,
            "setwebhook": self._set_webhook,
            "getwebhookinfo": self._get_webhook_info,
            "getupdates": self._get_updates,
            "setmycommands": self._set_my_commands,
            "getmycommands": lambda _params: self.commands,
            "deletemycommands": self._delete_my_commands,
            "sendmessage": self._send_message,
            "senddocument": lambda params: self._send_file("sendDocument", params),
            "sendphoto": lambda params: self._send_file("sendPhoto", params),
            "editmessagetext": self._edit_message_text,
            "sendchataction": lambda _params: True,
            "getfile": self._get_file,
            "answercallbackquery": self._answer_callback_query,
            "setmessagereaction": self._set_message_reaction,
        }
        # The bot's reaction on each message, `(chat id, message id)` -> emoji (none: cleared).
        self.reactions: dict[tuple[int, int], list[str]] = {}
        # Callback query ids the bot answered (`answerCallbackQuery`), with the text shown.
        self.answered_callbacks: dict[str, str] = {}
        self._callback_ids = 0

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`, the root both PTB base URLs hang from."""
        if self._port is None:
            raise RuntimeError("FakeTelegram is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def bot_user(self) -> dict[str, Any]:
        """The bot as a `User` object, the way `getMe` and sent messages carry it."""
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Switchboard",
            "username": self.username,
        }

    async def start(self) -> None:
        """Bind a free port on 127.0.0.1 and start serving."""
        # Uploads past aiohttp's 1 MB default reach the handlers, which judge their size.
        app = web.Application(client_max_size=2 * MAX_DOCUMENT_BYTES)
        app.router.add_route("*", "/bot{token}/{method}", self._handle_method)
        app.router.add_get("/file/bot{token}/{file_path:.+}", self._handle_download)
        # handler_cancellation: a client that gives up (or is cancelled) ends its held request.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Answer held requests (held polls get no updates) and stop serving."""
        self._closing = True
        self._changes.notify()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- test controls -----------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        error_code: int = 429,
        description: str = "Too Many Requests: retry after 1",
        retry_after: float | None = 1,
        times: int = 1,
        chat_id: int | None = None,
    ) -> None:
        """Make the next `times` calls of `method` fail with this Bot API error.

        `retry_after` goes into `parameters` (PTB then raises `RetryAfter`); None leaves it out.
        `chat_id`: only calls to that chat fail (as Telegram limits one group's messages).
        """
        fault = _Fault(error_code, description, retry_after)
        self._faults[_fault_key(method, chat_id)].extend([fault] * times)

    def stop_failing(self, method: str, *, chat_id: int | None = None) -> None:
        """Drop the faults still waiting for `method` (to `chat_id`, when given)."""
        self._faults.pop(_fault_key(method, chat_id), None)

    def stall_next(self, method: str, *, times: int = 1) -> None:
        """Make the next `times` calls of `method` never get an answer (until `close`).

        PTB then raises `TimedOut` after its read timeout; keep that short in such a test.
        """
        self._faults[method.lower()].extend([_Fault(0, "", None, stall=True)] * times)

    def sent_texts(self, chat_id: int) -> list[str]:
        """The current text of each message the bot sent to `chat_id`, oldest first."""
        return [message.text for message in self.messages.get(chat_id, [])]

    async def wait_for_call(
        self,
        method: str,
        predicate: Callable[[Call], bool] | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109 - a test's deadline, named like asyncio's
        *,
        after: int = 0,
    ) -> Call:
        """The first call of `method` at index `after` or later that `predicate` accepts.

        Calls already recorded count; pass `after=len(fake.calls)` (or `call.index + 1`) to wait
        for the next one. Raises `TimeoutError` naming what was seen instead.
        """
        wanted = method.lower()
        found: list[Call] = []

        def matched() -> bool:
            found.extend(
                call
                for call in self.calls[after:]
                if call.method.lower() == wanted and (predicate is None or predicate(call))
            )
            return bool(found)

        try:
            async with asyncio.timeout(timeout):
                await self._changes.until(matched)
        except TimeoutError:
            seen = [call.method for call in self.calls[after:]]
            raise TimeoutError(f"no matching {method} call within {timeout}s; saw {seen}") from None
        return found[0]

    async def wait_idle_poll(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Return once a `getUpdates` is held with nothing left to deliver: the bot is idle."""
        try:
            async with asyncio.timeout(timeout):
                await self._changes.until(lambda: self._held_polls > 0 and not self._pending)
        except TimeoutError:
            state = f"{self._held_polls} held, {len(self._pending)} pending"
            raise TimeoutError(
                f"the bot was not idle-polling within {timeout}s ({state})"
            ) from None

    async def post_webhook(self, url: str, update: dict[str, Any], *, secret: str | None) -> int:
        """POST `update` to our webhook endpoint as Telegram does; returns the HTTP status."""
        headers = {"Content-Type": "application/json"}
        if secret is not None:
            headers[SECRET_HEADER] = secret
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=json.dumps(update).encode(), headers=headers) as response,
        ):
            await response.read()
            return response.status

    # -- updates -----------------------------------------------------------------------------

    def push(self, update: dict[str, Any]) -> int:
        """Queue `update` for `getUpdates`; assigns `update_id` when missing or None.

        The id is written into `update` and returned. Pushing `dict(update, update_id=None)`
        delivers the same update again under a new id (see `redeliver`).
        """
        if update.get("update_id") is None:
            update["update_id"] = self._last_update_id + 1
        self._last_update_id = max(self._last_update_id, int(update["update_id"]))
        stored = copy.deepcopy(update)
        self._remember(stored)
        bisect.insort(self._pending, stored, key=lambda queued: queued["update_id"])
        self._changes.notify()
        return int(update["update_id"])

    def press_button(
        self, chat_id: int, message_id: int, data: str, *, user_id: int | None = None
    ) -> dict[str, Any]:
        """Push a `callback_query`: someone pressed the inline button carrying `data` under
        the bot's message `message_id` (the presser is the chat's user unless given)."""
        found = [m for m in self.messages.get(chat_id, []) if m.message_id == message_id]
        if not found:
            raise ValueError(f"the bot sent no message {message_id} to {chat_id}")
        self._callback_ids += 1
        query = {
            "id": f"cbq-{self._callback_ids}",
            "from": user_object(user_id if user_id is not None else chat_id),
            "message": self._message_json(found[0]),
            "chat_instance": f"instance-{chat_id}",
            "data": data,
        }
        update: dict[str, Any] = {"callback_query": query}
        self.push(update)
        return update

    def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        query_id = params.get("callback_query_id")
        if not isinstance(query_id, str) or not query_id.startswith("cbq-"):
            raise _ApiError(400, "Bad Request: query is too old and response timeout expired")
        self.answered_callbacks[query_id] = str(params.get("text") or "")
        self._changes.notify()
        return True

    def _set_message_reaction(self, params: dict[str, Any]) -> bool:
        chat_id, message_id = params.get("chat_id"), params.get("message_id")
        if not isinstance(chat_id, int) or not isinstance(message_id, int):
            raise _ApiError(400, "Bad Request: chat_id and message_id are required")
        if self._find_message(chat_id, message_id) is None:
            raise _ApiError(400, "Bad Request: message to react not found")
        reaction = params.get("reaction") or []
        if not isinstance(reaction, list):
            raise _ApiError(400, "Bad Request: can't parse reaction types JSON object")
        if len(reaction) > 1:  # a bot may set one reaction per message
            raise _ApiError(400, "Bad Request: REACTIONS_TOO_MANY")
        emoji = [r.get("emoji") for r in reaction if isinstance(r, dict)]
        if len(emoji) != len(reaction) or any(e not in REACTION_EMOJI for e in emoji):
            raise _ApiError(400, "Bad Request: REACTION_INVALID")
        self.reactions[(chat_id, message_id)] = [str(e) for e in emoji]
        self._changes.notify()
        return True

    def _bot_message_to_reply_to(self, chat_id: int) -> dict[str, Any]:
        """The bot's latest message in the chat, or a stand-in when it has sent none."""
        sent = self.messages.get(chat_id)
        if sent:
            return self._message_json(sent[-1], nested=True)
        stand_in = SentMessage(999, chat_id, "(an earlier message)", date=int(time.time()))
        return self._message_json(stand_in, nested=True)

    # -- HTTP --------------------------------------------------------------------------------

    async def _handle_method(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params = await _read_params(request)
        self.calls.append(Call(method, params, len(self.calls)))
        self._changes.notify()
        if request.match_info["token"] != self.token:
            return _fail(401, "Unauthorized")
        handler = self._methods.get(method.lower())
        if handler is None:
            return _fail(404, "Not Found: method not found")
        chat_id = params.get("chat_id")
        faults = self._faults.get(_fault_key(method, chat_id if isinstance(chat_id, int) else None))
        if not faults:
            faults = self._faults.get(method.lower())
        if faults:
            fault = faults.popleft()
            if fault.stall:
                return await self._stall(request)
            extra = None if fault.retry_after is None else {"retry_after": fault.retry_after}
            return _fail(fault.error_code, fault.description, extra)
        try:
            result = handler(params)
            if asyncio.iscoroutine(result):
                result = await result
        except _ApiError as error:
            return _fail(error.error_code, error.description)
        return web.json_response({"ok": True, "result": result})

    async def _handle_download(self, request: web.Request) -> web.StreamResponse:
        file_path = request.match_info["file_path"]
        self.downloads.append(file_path)
        if request.match_info["token"] != self.token:
            return _fail(401, "Unauthorized")
        for path, data in self._files.values():
            if path == file_path:
                return web.Response(body=data, content_type="application/octet-stream")
        return _fail(404, "Not Found")

    async def _stall(self, request: web.Request) -> web.StreamResponse:
        await self._changes.until(lambda: self._closing)
        # No answer at all is what a dead upstream looks like; aiohttp writes nothing for a
        # handler that ends cancelled.
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError

    # -- methods -----------------------------------------------------------------------------

    def _get_me(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url") or ""
        if params.get("drop_pending_updates") is True:
            self._pending.clear()
        if "allowed_updates" in params:
            self.allowed_updates = params["allowed_updates"] or None
        secret = params.get("secret_token")
        self.webhook = Webhook(url, secret, self.allowed_updates) if url else None
        self._changes.notify()
        return True

    def _delete_webhook(self, params: dict[str, Any]) -> bool:
        if params.get("drop_pending_updates") is True:
            self._pending.clear()
        self.webhook = None
        self._changes.notify()
        return True

    def _get_webhook_info(self, _params: dict[str, Any]) -> dict[str, Any]:
        url = self.webhook.url if self.webhook else ""
        pending = len(self._pending)
        return {"url": url, "has_custom_certificate": False, "pending_update_count": pending}

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook is not None:
            raise _ApiError(409, WEBHOOK_CONFLICT)
        self._confirm(params.get("offset"))
        if "allowed_updates" in params:
            self.allowed_updates = params["allowed_updates"] or None
        self._drop_unwanted()
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        self._poll_ticket += 1
        ticket = self._poll_ticket
        self._held_polls += 1
        self._changes.notify()
        try:
            async with asyncio.timeout(float(params.get("timeout") or 0)):
                await self._changes.until(
                    lambda: bool(self._pending) or ticket != self._poll_ticket or self._closing
                )
        except TimeoutError:
            pass
        finally:
            self._held_polls -= 1
            self._changes.notify()
        if ticket != self._poll_ticket:
            raise _ApiError(409, POLL_CONFLICT)
        self._drop_unwanted()
        return copy.deepcopy(self._pending[:limit])

    def _confirm(self, offset: int | None) -> None:
        """Forget updates the bot confirmed: those below `offset` (or all but the last -offset)."""
        if offset is None:
            return
        if offset < 0:
            del self._pending[: max(len(self._pending) + offset, 0)]
        else:
            self._pending = [update for update in self._pending if update["update_id"] >= offset]

    def _drop_unwanted(self) -> None:
        if self.allowed_updates is None:
            return
        wanted = set(self.allowed_updates)
        self._pending = [
            update for update in self._pending if wanted.intersection(update.keys() - {"update_id"})
        ]

    def _set_my_commands(self, params: dict[str, Any]) -> bool:
        self.commands = list(params.get("commands") or [])
        return True

    def _delete_my_commands(self, _params: dict[str, Any]) -> bool:
        self.commands = []
        return True

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int):
            raise _ApiError(400, "Bad Request: chat not found")
        text, parse_mode = _checked_text(params)
        reply_parameters = params.get("reply_parameters")
        reply_to = params.get("reply_to_message_id")
        if isinstance(reply_parameters, dict):
            reply_to = reply_parameters.get("message_id")
        self._sent_ids[chat_id] += 1
        message = SentMessage(
            message_id=self._sent_ids[chat_id],
            chat_id=chat_id,
            text=text,
            parse_mode=parse_mode,
            thread_id=params.get("message_thread_id"),
            reply_to=reply_to if isinstance(reply_to, int) else None,
            reply_markup=params.get("reply_markup"),
            entities=params.get("entities"),
            date=int(time.time()),
        )
        self.messages[chat_id].append(message)
        self._changes.notify()
        return self._message_json(message)

    def _send_file(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int):
            raise _ApiError(400, "Bad Request: chat not found")
        field_name = "photo" if method == "sendPhoto" else "document"
        file = params.get(field_name)
        if not isinstance(file, UploadedFile):
            raise _ApiError(400, f"Bad Request: there is no {field_name} in the request")
        if len(file.data) > (MAX_PHOTO_BYTES if field_name == "photo" else MAX_DOCUMENT_BYTES):
            raise _ApiError(413, "Request Entity Too Large")
        if field_name == "photo" and not file.data.startswith(_IMAGE_MAGIC):
            raise _ApiError(400, "Bad Request: IMAGE_PROCESS_FAILED")
        caption = params.get("caption")
        caption = caption if isinstance(caption, str) and caption else None
        if caption is not None and len(caption) > MAX_CAPTION_LENGTH:
            raise _ApiError(400, "Bad Request: message caption is too long")
        self._sent_ids[chat_id] += 1
        file_id = f"sent-{chat_id}-{self._sent_ids[chat_id]}"
        described = {"file_id": file_id, "file_unique_id": f"u-{file_id}"}
        message = SentMessage(
            message_id=self._sent_ids[chat_id],
            chat_id=chat_id,
            text="",
            thread_id=params.get("message_thread_id"),
            date=int(time.time()),
            caption=caption,
        )
        if field_name == "photo":
            message.photo = [{**described, "width": 2, "height": 2, "file_size": len(file.data)}]
        else:
            message.document = {
                **described,
                "file_name": file.filename,
                "mime_type": file.content_type,
                "file_size": len(file.data),
            }
        self.messages[chat_id].append(message)
        self.uploads.append(Upload(method, chat_id, file, caption, message.message_id))
        self._changes.notify()
        return self._message_json(message)

    def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, message_id = params.get("chat_id"), params.get("message_id")
        sent = self.messages.get(chat_id, []) if isinstance(chat_id, int) else []
        found = [m for m in sent if m.message_id == message_id]
        if not found:
            raise _ApiError(400, "Bad Request: message to edit not found")
        message = found[0]
        text, parse_mode = _checked_text(params)
        markup = params.get("reply_markup")
        if text == message.text and markup == message.reply_markup:
            raise _ApiError(400, NOT_MODIFIED)
        message.text, message.parse_mode, message.reply_markup = text, parse_mode, markup
        message.entities = params.get("entities")
        message.edits += 1
        self._changes.notify()
        return self._message_json(message)

    def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = params.get("file_id")
        if file_id not in self._files:
            raise _ApiError(400, "Bad Request: invalid file_id")
        path, data = self._files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    def _message_json(self, message: SentMessage, *, nested: bool = False) -> dict[str, Any]:
        """A sent message as the Bot API returns it (`nested`: as a `reply_to_message`)."""
        chat = self._chats.get(message.chat_id) or default_chat(message.chat_id)
        result: dict[str, Any] = {
            "message_id": message.message_id,
            "from": self.bot_user,
            "chat": chat,
            "date": message.date,
        }
        if message.document is not None:
            result["document"] = message.document
        elif message.photo is not None:
            result["photo"] = message.photo
        else:
            result["text"] = message.text
        if message.caption:
            result["caption"] = message.caption
        if message.entities:
            result["entities"] = message.entities
        if message.thread_id is not None:
            result["message_thread_id"] = message.thread_id
            result["is_topic_message"] = True
        if message.edits:
            result["edit_date"] = int(time.time())
        if isinstance(message.reply_markup, dict) and "inline_keyboard" in message.reply_markup:
            result["reply_markup"] = message.reply_markup
        if not nested and message.reply_to is not None:
            if quoted := self._find_message(message.chat_id, message.reply_to):
                result["reply_to_message"] = quoted
        return result

    def _find_message(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        if inbound := self._inbound.get((chat_id, message_id)):
            return inbound
        for sent in self.messages.get(chat_id, []):
            if sent.message_id == message_id:
                return self._message_json(sent, nested=True)
        return None


def _fault_key(method: str, chat_id: int | None) -> str:
    return method.lower() if chat_id is None else f"{method.lower()} {chat_id}"


def _checked_text(params: dict[str, Any]) -> tuple[str, str | None]:
    """The text and parse mode of a send or edit, or the 400 Telegram gives for them."""
    text = params.get("text")
    text = text if isinstance(text, str) else ""
    parse_mode = params.get("parse_mode")
    visible = text
    if isinstance(parse_mode, str) and parse_mode.lower() == "html":
        if problem := _html_problem(text):
            raise _ApiError(400, f"Bad Request: can't parse entities: {problem}")
        visible = html.unescape(_ANY_TAG.sub("", text))
    if not visible.strip():
        raise _ApiError(400, "Bad Request: message text is empty")
    if len(visible) > MAX_TEXT_LENGTH:
        raise _ApiError(400, "Bad Request: message is too long")
    return text, parse_mode if isinstance(parse_mode, str) else None


def _html_problem(text: str) -> str | None:
    """What Telegram's HTML parser would reject in `text` (tags only), in its words."""
    open_tags: list[str] = []
    start = text.find("<")
    while start != -1:
        offset = len(text[:start].encode())
        end = text.find(">", start)
        if end == -1:
            return f"Unclosed start tag at byte offset {offset}"
        inside = text[start + 1 : end]
        if inside.startswith("/"):
            name = inside[1:].strip().lower()
            if not open_tags:
                return f"Unexpected end tag at byte offset {offset}"
            if open_tags[-1] != name:
                expected = open_tags[-1]
                return (
                    f'Unmatched end tag at byte offset {offset}, expected "</{expected}>", '
                    f'found "</{name}>"'
                )
            open_tags.pop()
        else:
            name = inside.split(maxsplit=1)[0].lower() if inside.strip() else ""
            if name not in _HTML_TAGS:
                return f'Unsupported start tag "{name}" at byte offset {offset}'
            open_tags.append(name)
        start = text.find("<", end)
    if open_tags:
        return f'Can\'t find end tag corresponding to start tag "{open_tags[-1]}"'
    return None


async def _read_params(request: web.Request) -> dict[str, Any]:
    """The request's parameters from the query, a form, a multipart body or JSON."""
    params: dict[str, Any] = {key: _decode(key, value) for key, value in request.query.items()}
    if request.content_type == "application/json":
        with contextlib.suppress(ValueError):
            body = await request.json()
            if isinstance(body, dict):
                params.update(body)
    elif request.content_type == "multipart/form-data":
        async for part in await request.multipart():
            if not isinstance(part, aiohttp.BodyPartReader) or part.name is None:
                continue
            if part.filename is not None:
                content_type = part.headers.get("Content-Type", "application/octet-stream")
                data = bytes(await part.read())
                params[part.name] = UploadedFile(part.filename, content_type, data)
            else:
                params[part.name] = _decode(part.name, await part.text())
    elif request.content_type == "application/x-www-form-urlencoded":
        form = await request.post()
        params.update({key: _decode(key, str(value)) for key, value in form.items()})
    return params


def _decode(key: str, value: str) -> Any:
    """A form value as PTB meant it: non-strings arrive JSON-encoded (`chat_id` as "555")."""
    if key in _TEXT_FIELDS:
        return value
    if _INTEGER.fullmatch(value):
        return int(value)
    if value in ("true", "false"):
        return value == "true"
    if value[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            return json.loads(value)
    return value


def _fail(
    error_code: int, description: str, parameters: dict[str, Any] | None = None
) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": error_code, "description": description}
    if parameters is not None:
        body["parameters"] = parameters
    return web.json_response(body, status=error_code)
