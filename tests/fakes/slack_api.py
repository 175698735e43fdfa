"""A loopback fake of Slack for driving the real slack-bolt and slack_sdk: the Web API, file
downloads, Socket Mode, and a sender of signed Events API requests.

Point `AsyncWebClient(base_url=fake.api_url)` at it: methods are `POST /api/<method>` (or
`GET` with query parameters, as slack_sdk sends `conversations.history` and
`conversations.replies`, which show a message's `metadata` with `include_all_metadata`) with the
token in `Authorization: Bearer …`; errors are HTTP 200 with `{"ok": false, "error": …}`, and
rate limits are HTTP 429 with `Retry-After` (see `fail_next`). Files live at `url_private`
and need the bot token, like Slack's. `apps.connections.open` (app token) returns the URL of
the fake's Socket Mode websocket, which says `hello` and then carries the envelopes a test
sends with `send_socket_event`, recording each acknowledgement.

Events are built with `dm`, `channel_message`, `app_mention_for`, … (see `slack_events`), then
delivered by `post_event` (signed HTTP, optionally marked as a retry) or `send_socket_event`.

Files go up Slack's external way, as slack_sdk's `files_upload_v2` sends them:
`files.getUploadURLExternal` (name and length) hands out an upload URL on the fake, the bytes
are POSTed there, and `files.completeUploadExternal` shares them in a channel (and thread) with
an optional comment; each shared file is recorded in `uploads`.

Deviations from Slack, on purpose: message text is stored as sent (no mrkdwn parsing, no
40,000-character truncation; the tests check lengths themselves), and every channel exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from tests.fakes.slack_events import APP_ID, BOT_ID, BOT_USER_ID, TEAM_ID, EventBuilders

DEFAULT_BOT_TOKEN = "xoxb-1111111111-2222222222-FakeBotTokenForTestsOnly"
DEFAULT_APP_TOKEN = "xapp-1-A0APP-3333333333-FakeAppTokenForTestsOnly"
DEFAULT_SIGNING_SECRET = "fake-signing-secret-0123456789abcdef"
MAX_TEXT_LENGTH = 40_000
# The largest request body the fake reads (an upload of a file).
_MAX_BODY = 32 * 1024 * 1024
_LOGIN_PAGE = "<!DOCTYPE html><html><body>Sign in to Slack</body></html>"


@dataclass(frozen=True)
class Call:
    """One Web API request as the fake decoded it; `index` is its position in `calls`."""

    method: str
    params: dict[str, Any]
    token: str | None = None
    index: int = field(default=-1, compare=False)
    at: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class SharedFile:
    """A file uploaded the external way and shared in a channel."""

    file_id: str
    filename: str
    title: str
    data: bytes = field(repr=False)
    channel: str = ""
    thread_ts: str | None = None
    initial_comment: str | None = None


@dataclass
class SentMessage:
    """A message the bot posted, as it stands now; `edits` counts `chat.update`s."""

    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    edits: int = 0
    # Block Kit blocks sent with the message (None: text only).
    blocks: list[dict[str, Any]] | None = None
    # Message metadata sent with it (`event_type`, `event_payload`), if any.
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Fault:
    error: str
    status: int
    retry_after: int | None
    # The call takes effect and only its answer is the error (lost on the way back).
    took_effect: bool = False


class _ApiError(Exception):
    """Ends a method with `{"ok": false, "error": …}`; raised inside the method handlers."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


class _Changes:
    """Wakes every waiter when the fake's state changes (see the Telegram fake)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._event.wait()


class FakeSlack(EventBuilders):
    """Slack on 127.0.0.1 for one workspace with one bot user (`BOT_USER_ID`).

    `assistant_error`: None lets `assistant.threads.setStatus` work (a post in the thread
    clears the status, as in Slack); an error code makes it fail that way, as for an app
    without the assistant feature.
    """

    def __init__(
        self,
        *,
        bot_token: str = DEFAULT_BOT_TOKEN,
        app_token: str = DEFAULT_APP_TOKEN,
        signing_secret: str = DEFAULT_SIGNING_SECRET,
        team_id: str = TEAM_ID,
        assistant_error: str | None = None,
    ) -> None:
        super().__init__(team_id)
        self.bot_token = bot_token
        self.app_token = app_token
        self.signing_secret = signing_secret
        self.assistant_error = assistant_error
        self.calls: list[Call] = []
        self.messages: dict[str, list[SentMessage]] = defaultdict(list)
        self.reactions: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.statuses: dict[tuple[str, str], str] = {}
        self.downloads: list[tuple[str, bool]] = []  # (file id, with the bot token)
        self.acks: list[dict[str, Any]] = []
        self.socket_connections = 0
        self._files: dict[str, tuple[str, str, bytes]] = {}
        self.uploads: list[SharedFile] = []
        # Upload URLs handed out: file id -> (name, announced length, bytes once POSTed).
        self._pending_uploads: dict[str, tuple[str, int, bytes | None]] = {}
        self._faults: dict[str, deque[_Fault]] = defaultdict(deque)
        self._sockets: list[web.WebSocketResponse] = []
        self._changes = _Changes()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "assistant.threads.setStatus": self._set_status,
            "apps.connections.open": self._connections_open,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "files.getUploadURLExternal": self._upload_url,
            "files.completeUploadExternal": self._complete_upload,
        }

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`, the fake's root."""
        if self._port is None:
            raise RuntimeError("FakeSlack is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def api_url(self) -> str:
        """The Web API base, as `AsyncWebClient(base_url=…)` and `SLACK_API_URL` take it."""
        return f"{self.url}/api/"

    async def start(self) -> None:
        """Bind a free port on 127.0.0.1 and start serving."""
        # Uploads past aiohttp's 1 MB default reach the handlers, which judge their size.
        app = web.Application(client_max_size=2 * _MAX_BODY)
        app.router.add_post("/api/{method}", self._handle_method)
        app.router.add_get("/api/{method}", self._handle_method)
        app.router.add_get("/files-pri/{team}-{file_id}/{name}", self._handle_download)
        app.router.add_get("/link/", self._handle_socket)
        app.router.add_post("/upload/v1/{file_id}", self._handle_upload)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Close Socket Mode connections and stop serving."""
        for socket in list(self._sockets):
            await socket.close()
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
        error: str = "ratelimited",
        status: int = 429,
        retry_after: int | None = 1,
        times: int = 1,
    ) -> None:
        """Make the next `times` calls of `method` fail: by default a 429 with `Retry-After`.

        For a Web API error give `error="not_in_channel", status=200, retry_after=None`.
        """
        self._faults[method].extend([_Fault(error, status, retry_after)] * times)

    def lose_next_answer(self, method: str, *, times: int = 1) -> None:
        """Let the next `times` calls of `method` take effect, but answer each with an HTTP
        500, as when Slack's answer is lost on the way back (the caller cannot tell)."""
        self._faults[method].extend([_Fault("internal_error", 500, None, took_effect=True)] * times)

    def add_file(
        self, file_id: str, data: bytes, *, mimetype: str = "image/png", name: str = "image.png"
    ) -> dict[str, Any]:
        """Store a file for download; returns its object as a message's `files` carry it."""
        self._files[file_id] = (name, mimetype, data)
        url = f"{self.url}/files-pri/{self.team_id}-{file_id}/{name}"
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": mimetype.rpartition("/")[2],
            "size": len(data),
            "url_private": url,
            "url_private_download": f"{url}?download=1",
        }

    def sent(self, channel: str) -> list[SentMessage]:
        """The bot's messages in `channel`, oldest first."""
        return list(self.messages.get(channel, []))

    def sent_texts(self, channel: str) -> list[str]:
        """The current text of each message the bot posted in `channel`, oldest first."""
        return [message.text for message in self.messages.get(channel, [])]

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of `method`, in order."""
        return [call for call in self.calls if call.method == method]

    async def until(
        self,
        ready: Callable[[], bool],
        what: str,
        timeout: float = 5.0,  # noqa: ASYNC109 - a test's deadline, named like asyncio's
    ) -> None:
        """Wait until `ready()` holds, re-checked whenever the fake's state changes."""
        try:
            async with asyncio.timeout(timeout):
                await self._changes.until(ready)
        except TimeoutError:
            seen = [f"{c.method}({c.params.get('channel', '')})" for c in self.calls]
            raise AssertionError(f"timed out waiting for {what}; calls: {seen}") from None

    async def wait_for_call(
        self,
        method: str,
        predicate: Callable[[Call], bool] | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109
        *,
        after: int = 0,
    ) -> Call:
        """The first call of `method` at index `after` or later that `predicate` accepts."""
        found: list[Call] = []

        def matched() -> bool:
            found.extend(
                call
                for call in self.calls[after:]
                if call.method == method and (predicate is None or predicate(call))
            )
            return bool(found)

        await self.until(matched, f"a matching {method} call", timeout)
        return found[0]

    async def wait_for_ack(self, envelope_id: str, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Return once the Socket Mode client acknowledged `envelope_id`."""
        await self.until(
            lambda: any(ack.get("envelope_id") == envelope_id for ack in self.acks),
            f"the ack of envelope {envelope_id}",
            timeout,
        )

    async def wait_socket_connected(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Return once a Socket Mode client is connected (and was sent `hello`)."""
        await self.until(lambda: bool(self._sockets), "a Socket Mode connection", timeout)

    # -- sending events ----------------------------------------------------------------------

    def signature(self, timestamp: str, body: bytes, secret: str | None = None) -> str:
        """`X-Slack-Signature` for a request body sent at `timestamp`."""
        key = (secret or self.signing_secret).encode()
        base = b"v0:" + timestamp.encode() + b":" + body
        return "v0=" + hmac.new(key, base, hashlib.sha256).hexdigest()

    async def post_event(
        self,
        url: str,
        body: dict[str, Any],
        *,
        retry_num: int | None = None,
        timestamp: int | None = None,
        secret: str | None = None,
        signature: str | None = None,
    ) -> tuple[int, str]:
        """POST `body` to an Events API endpoint as Slack does; returns status and body text.

        Signed with the fake's signing secret (or `secret`) at `timestamp` (default now);
        `signature` replaces the computed one. `retry_num` marks a redelivery.
        """
        raw = json.dumps(body).encode()
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature or self.signature(stamp, raw, secret),
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        }
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=raw, headers=headers) as response,
        ):
            return response.status, await response.text()

    async def url_verification(self, url: str, challenge: str) -> tuple[int, str]:
        """The handshake Slack makes when the Request URL is saved."""
        body = {"token": "fake-verification-token", "challenge": challenge}
        return await self.post_event(url, {**body, "type": "url_verification"})

    async def send_socket_event(
        self, body: dict[str, Any], *, retry_attempt: int = 0, retry_reason: str = ""
    ) -> str:
        """Send `body` (an event callback) over the Socket Mode connection; its envelope id."""
        if not self._sockets:
            raise RuntimeError("no Socket Mode client is connected")
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
            "payload": body,
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    # -- HTTP --------------------------------------------------------------------------------

    async def _handle_method(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params = await _read_params(request)
        token = _bearer(request) or params.pop("token", None)
        self.calls.append(Call(method, params, token, len(self.calls), time.monotonic()))
        self._changes.notify()
        if faults := self._faults.get(method):
            fault = faults.popleft()
            if fault.took_effect and method in self._methods:
                self._methods[method](params)
            headers = {}
            if fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
            body = {"ok": False, "error": fault.error}
            return web.json_response(body, status=fault.status, headers=headers)
        handler = self._methods.get(method)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        try:
            if not token:
                raise _ApiError("not_authed")
            if token not in (self.bot_token, self.app_token):
                raise _ApiError("invalid_auth")
            if token != wanted:
                raise _ApiError("not_allowed_token_type")
            result = handler(params)
        except _ApiError as error:
            return web.json_response({"ok": False, "error": error.error, **error.extra})
        finally:
            self._changes.notify()
        return web.json_response({"ok": True, **result})

    async def _handle_download(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        authorized = _bearer(request) == self.bot_token
        self.downloads.append((file_id, authorized))
        self._changes.notify()
        if file_id not in self._files:
            return web.Response(status=404, text="file not found")
        if not authorized:  # Slack answers a download without the token with its login page
            return web.Response(text=_LOGIN_PAGE, content_type="text/html")
        _name, mimetype, data = self._files[file_id]
        return web.Response(body=data, content_type=mimetype)

    async def _handle_upload(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        if file_id not in self._pending_uploads:
            return web.Response(status=404, text="unknown upload")
        name, length, _ = self._pending_uploads[file_id]
        self._pending_uploads[file_id] = (name, length, await request.read())
        self._changes.notify()
        return web.Response(text=f"OK - {length}")

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.append(socket)
        self.socket_connections += 1
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "debug_info": {"host": "fake-socket", "approximate_connection_time": 18060},
            "connection_info": {"app_id": APP_ID},
        }
        await socket.send_str(json.dumps(hello))
        self._changes.notify()
        try:
            async for message in socket:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue
                with contextlib.suppress(ValueError):
                    data = json.loads(message.data)
                    if isinstance(data, dict) and "envelope_id" in data:
                        self.acks.append(data)
                        self._changes.notify()
        finally:
            self._sockets.remove(socket)
            self._changes.notify()
        return socket

    # -- methods -----------------------------------------------------------------------------

    def _auth_test(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://switchboard-test.slack.com/",
            "team": "Switchboard Test",
            "user": "switchboard",
            "team_id": self.team_id,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = params.get("channel")
        if not isinstance(channel, str) or not channel:
            raise _ApiError("channel_not_found")
        text = _checked_text(params)
        thread_ts = params.get("thread_ts") or None
        message = SentMessage(
            channel,
            self.next_ts(),
            text,
            thread_ts,
            blocks=_blocks(params),
            metadata=_metadata(params),
        )
        self.messages[channel].append(message)
        # Slack clears an assistant status when the app replies in that thread.
        if thread_ts is not None:
            self.statuses.pop((channel, thread_ts), None)
        return {"channel": channel, "ts": message.ts, "message": self._message_json(message)}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel"), params.get("ts")
        found = [m for m in self.messages.get(str(channel), []) if m.ts == ts]
        if not found:
            raise _ApiError("message_not_found")
        message = found[0]
        message.text = _checked_text(params)
        if "blocks" in params:  # left out, the message keeps its blocks; [] removes them
            message.blocks = _blocks(params) or None
        message.edits += 1
        return {"channel": channel, "ts": ts, "text": message.text}

    def _reactions_add(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (str(params.get("channel")), str(params.get("timestamp")))
        name = str(params.get("name"))
        if name in self.reactions[key]:
            raise _ApiError("already_reacted")
        self.reactions[key].add(name)
        return {}

    def _reactions_remove(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (str(params.get("channel")), str(params.get("timestamp")))
        name = str(params.get("name"))
        if name not in self.reactions[key]:
            raise _ApiError("no_reaction")
        self.reactions[key].discard(name)
        return {}

    def _set_status(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.assistant_error is not None:
            extra = {"needed": "assistant:write"} if self.assistant_error == "missing_scope" else {}
            raise _ApiError(self.assistant_error, **extra)
        key = (str(params.get("channel_id")), str(params.get("thread_ts")))
        status = str(params.get("status") or "")
        if status:
            self.statuses[key] = status
        else:
            self.statuses.pop(key, None)
        return {}

    def _history(self, params: dict[str, Any]) -> dict[str, Any]:
        """A channel's messages (people's and the bot's, no thread replies) between `oldest`
        and `latest` (exclusive unless `inclusive`), the newest `limit` first, as Slack pages."""
        channel = str(params.get("channel") or "")
        if not channel:
            raise _ApiError("channel_not_found")
        inclusive = _flag(params, "inclusive")
        oldest = _ts_key(str(params.get("oldest") or "0"))
        latest = _ts_key(str(params.get("latest") or "9999999999.999999"))
        limit = int(params.get("limit") or 100)
        metadata = _flag(params, "include_all_metadata")
        found = list(self.history.get(channel, []))
        found += [
            self._message_json(m, metadata=metadata)
            for m in self.messages.get(channel, [])
            if not m.thread_ts
        ]

        def inside(message: dict[str, Any]) -> bool:
            key = _ts_key(message["ts"])
            if inclusive:
                return oldest <= key <= latest
            return oldest < key < latest

        found = sorted(filter(inside, found), key=lambda m: _ts_key(m["ts"]), reverse=True)
        return {
            "messages": found[:limit],
            "has_more": len(found) > limit,
            "pin_count": 0,
            "response_metadata": {"next_cursor": ""},
        }

    def _replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread: its parent first, then its replies (people's and the bot's) between
        `oldest` and `latest` (exclusive unless `inclusive`), the oldest `limit` of them."""
        channel, thread = str(params.get("channel") or ""), str(params.get("ts") or "")
        if not channel:
            raise _ApiError("channel_not_found")
        metadata = _flag(params, "include_all_metadata")
        parents = [m for m in self.history.get(channel, []) if m.get("ts") == thread]
        parents += [
            self._message_json(m, metadata=metadata)
            for m in self.messages.get(channel, [])
            if m.ts == thread
        ]
        replies = list(self.replies.get((channel, thread), []))
        replies += [
            self._message_json(m, metadata=metadata)
            for m in self.messages.get(channel, [])
            if m.thread_ts == thread and m.ts != thread
        ]
        if not parents and not replies:
            raise _ApiError("thread_not_found")
        inclusive = _flag(params, "inclusive")
        oldest = _ts_key(str(params.get("oldest") or "0"))
        latest = _ts_key(str(params.get("latest") or "9999999999.999999"))
        limit = int(params.get("limit") or 1000)

        def inside(message: dict[str, Any]) -> bool:
            key = _ts_key(message["ts"])
            return oldest <= key <= latest if inclusive else oldest < key < latest

        found = sorted(filter(inside, replies), key=lambda m: _ts_key(m["ts"]))
        return {
            "messages": parents[:1] + found[:limit],
            "has_more": len(found) > limit,
            "response_metadata": {"next_cursor": ""},
        }

    def _connections_open(self, _params: dict[str, Any]) -> dict[str, Any]:
        ticket = uuid.uuid4().hex
        return {"url": f"ws://127.0.0.1:{self._port}/link/?ticket={ticket}&app_id={APP_ID}"}

    def _upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        name, length = params.get("filename"), params.get("length")
        if not name:
            raise _ApiError("invalid_arguments")
        try:
            size = int(str(length))
        except ValueError:
            raise _ApiError("invalid_arguments") from None
        if size <= 0:
            raise _ApiError("invalid_arguments")
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        self._pending_uploads[file_id] = (str(name), size, None)
        return {"upload_url": f"{self.url}/upload/v1/{file_id}", "file_id": file_id}

    def _complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            files = json.loads(str(params.get("files", "")))
        except ValueError:
            raise _ApiError("invalid_arguments") from None
        if not isinstance(files, list) or not files:
            raise _ApiError("invalid_arguments")
        channel = params.get("channel_id") or None
        shared = []
        for item in files:
            pending = self._pending_uploads.get(str(item.get("id")))
            if pending is None:
                raise _ApiError("file_not_found")
            name, length, data = pending
            if data is None or len(data) != length:
                raise _ApiError("upload_incomplete" if data is None else "file_size_mismatch")
            shared.append(SharedFile(str(item["id"]), name, str(item.get("title") or name), data))
        for file in shared:
            del self._pending_uploads[file.file_id]
            self.uploads.append(
                SharedFile(
                    file.file_id,
                    file.filename,
                    file.title,
                    file.data,
                    channel=str(channel or ""),
                    thread_ts=params.get("thread_ts") or None,
                    initial_comment=params.get("initial_comment") or None,
                )
            )
        return {
            "files": [
                {"id": f.file_id, "name": f.filename, "title": f.title, "size": len(f.data)}
                for f in shared
            ]
        }

    def _message_json(self, message: SentMessage, *, metadata: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "text": message.text,
            "ts": message.ts,
            "team": self.team_id,
        }
        if message.thread_ts:
            result["thread_ts"] = message.thread_ts
        if message.blocks:
            result["blocks"] = message.blocks
        if metadata and message.metadata:
            result["metadata"] = message.metadata
        return result

    # -- interactions ------------------------------------------------------------------------

    def block_actions(
        self, message: SentMessage, value: str, *, user: str, action_id: str | None = None
    ) -> dict[str, Any]:
        """The `block_actions` payload Slack sends when `user` presses the button of `message`
        whose value is `value`."""
        button = next(
            (
                element
                for block in message.blocks or []
                if block.get("type") == "actions"
                for element in block.get("elements", [])
                if element.get("value") == value
            ),
            None,
        )
        if button is None:
            raise ValueError(f"no button with value {value!r} on {message.text!r}")
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
        }
        if message.thread_ts:
            container["thread_ts"] = message.thread_ts
        return {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": user.lower(),
                "name": user.lower(),
                "team_id": self.team_id,
            },
            "api_app_id": APP_ID,
            "token": "fake-verification-token",
            "container": container,
            "trigger_id": f"trigger-{uuid.uuid4().hex[:12]}",
            "team": {"id": self.team_id, "domain": "switchboard-test"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": message.channel, "name": "directmessage"},
            "message": self._message_json(message),
            "state": {"values": {}},
            "response_url": f"{self.url}/actions/{uuid.uuid4().hex[:8]}",
            "actions": [
                {
                    "action_id": action_id or button.get("action_id"),
                    "block_id": "confirm",
                    "text": button.get("text"),
                    "value": value,
                    "type": "button",
                    "action_ts": self.next_ts(),
                }
            ],
        }

    async def post_interaction(self, url: str, payload: dict[str, Any]) -> tuple[int, str]:
        """POST an interaction payload as Slack does (a signed form with one `payload` field)."""
        raw = urlencode({"payload": json.dumps(payload)}).encode()
        stamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": self.signature(stamp, raw),
        }
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=raw, headers=headers) as response,
        ):
            return response.status, await response.text()

    async def post_command(self, url: str, payload: dict[str, str]) -> tuple[int, str]:
        """POST a slash command's payload as Slack does (a signed form of its fields)."""
        raw = urlencode(payload).encode()
        stamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": self.signature(stamp, raw),
        }
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=raw, headers=headers) as response,
        ):
            return response.status, await response.text()

    async def send_socket_command(self, payload: dict[str, str]) -> str:
        """Send a slash command's payload over the Socket Mode connection; its envelope id."""
        if not self._sockets:
            raise RuntimeError("no Socket Mode client is connected")
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": "slash_commands",
            "accepts_response_payload": True,
            "payload": payload,
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def send_socket_interaction(self, payload: dict[str, Any]) -> str:
        """Send an interaction payload over the Socket Mode connection; its envelope id."""
        if not self._sockets:
            raise RuntimeError("no Socket Mode client is connected")
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": "interactive",
            "accepts_response_payload": False,
            "payload": payload,
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id


def _ts_key(ts: str) -> tuple[int, int]:
    """A message timestamp as a number pair, so `1.000010` sorts after `1.000009`."""
    seconds, _, fraction = ts.partition(".")
    return int(seconds), int(fraction.ljust(6, "0")[:6])


def _checked_text(params: dict[str, Any]) -> str:
    text = params.get("text")
    if not isinstance(text, str) or not text.strip():
        raise _ApiError("no_text")
    if len(text) > MAX_TEXT_LENGTH:
        raise _ApiError("msg_too_long")
    return text


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The `blocks` of a call: a list in a JSON body, JSON text in a form."""
    blocks = params.get("blocks")
    if isinstance(blocks, str):
        with contextlib.suppress(ValueError):
            blocks = json.loads(blocks)
    return [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else None


def _metadata(params: dict[str, Any]) -> dict[str, Any] | None:
    """The `metadata` of a call: an object in a JSON body, JSON text in a form."""
    metadata = params.get("metadata")
    if isinstance(metadata, str):
        with contextlib.suppress(ValueError):
            metadata = json.loads(metadata)
    return metadata if isinstance(metadata, dict) else None


def _flag(params: dict[str, Any], name: str) -> bool:
    return str(params.get(name, "0")).lower() in ("1", "true")


def _bearer(request: web.Request) -> str | None:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


async def _read_params(request: web.Request) -> dict[str, Any]:
    """The request's parameters from the query, a form or a JSON body."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        with contextlib.suppress(ValueError):
            body = await request.json()
            if isinstance(body, dict):
                params.update(body)
    elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        params.update({key: str(value) for key, value in form.items()})
    return params
