"""`WebServer`: the page, its static files and its JSON API on aiohttp, behind `WebAuth`.

Routes (docs/web.md has their bodies): `/login` (sign in), `/` and `/static/*` (the page),
`POST /api/chat` (a turn, answered as server-sent events), `POST /api/stop`,
`POST /api/answer` (a confirmation's yes or no, or the typed answer to an `ask_user`
question), `GET /api/events` (the bus topics live), and the read and schedule routes of
`channels/web/api.py`, the takeover routes of `channels/web/takeover.py`, `GET
/api/platforms` (`channels/web/platforms.py`). Nothing changes state on GET.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from channels.web.adapter import WebAdapter
from channels.web.api import ReadApi, bad_request, json_body
from channels.web.auth import WebAuth
from channels.web.platforms import PlatformsApi
from channels.web.render import to_html
from channels.web.sse import EventStream
from channels.web.takeover import TakeoverApi
from core.bus.base import Bus
from core.envelopes import (
    EventEnvelope,
    Inbound,
    NotificationFailed,
    NotificationSent,
    Outbound,
    new_id,
)
from core.errors import BusError, ChannelError, StoreError
from core.heartbeat import HeartbeatBoard
from core.throttle import TokenThrottle
from core.tools.outgoing import size_text

__all__ = ["CONVERSATION", "WebServer"]

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
# A conversation id: what the page and API clients may name a chat with.
CONVERSATION = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_TEXT = 20_000
# Files are offered as a download of opaque bytes: a data URL never opens as a page here.
_DOWNLOAD = "application/octet-stream"
# Seconds between keep-alive comments of an idle event stream.
_KEEP_ALIVE = 15.0
# Reachable without the token: the sign-in page and what it needs.
_PUBLIC = frozenset({"/login", "/static/login.js", "/static/app.css"})
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: with it a browser sends `Origin: null` on form posts (the sign-in).
    "Referrer-Policy": "same-origin",
}


class WebServer:
    """The page's HTTP server; `start()` listens, `close()` stops."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        auth: WebAuth,
        adapter: WebAdapter,
        bus: Bus,
        topics: Sequence[str],
        api: ReadApi,
        board: HeartbeatBoard,
        throttle: TokenThrottle | None = None,
    ) -> None:
        """`topics` are the bus topics `GET /api/events` streams (lifecycle, notifications);
        `board` the deployment's heartbeats (`GET /api/platforms`); `throttle` bounds wrong
        tokens per client address (`TokenThrottle()` when None)."""
        self.host = host
        self.port = port
        self.auth = auth
        self.adapter = adapter
        self.bus = bus
        self.topics = tuple(topics)
        self.api = api
        self.board = board
        self.throttle = throttle or TokenThrottle()
        self._runner: web.AppRunner | None = None
        self._streams: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        """The page's address (with the port actually bound)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def login_link(self) -> str:
        """The sign-in address with the token after `#` (a fragment never reaches a server)."""
        return f"{self.url}login#token={self.auth.token}"

    def application(self) -> web.Application:
        """The aiohttp application (tests may serve it themselves)."""
        app = web.Application(middlewares=[self._guard], client_max_size=1024 * 1024)
        app.router.add_get("/login", self._login_page)
        app.router.add_post("/login", self._sign_in)
        app.router.add_post("/logout", self._sign_out)
        app.router.add_get("/", self._index)
        app.router.add_static("/static", STATIC, follow_symlinks=False)
        app.router.add_post("/api/chat", self._chat)
        app.router.add_post("/api/stop", self._stop)
        app.router.add_post("/api/answer", self._answer)
        app.router.add_get("/api/events", self._events)
        self.api.add_routes(app.router)
        TakeoverApi(store=self.api.store, bus=self.bus).add_routes(app.router)
        PlatformsApi(self.board).add_routes(app.router)
        app.on_shutdown.append(self._end_streams)
        return app

    async def start(self) -> None:
        """Listen; `OSError` when the address is taken."""
        runner = web.AppRunner(self.application(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        if runner.addresses:
            self.port = int(runner.addresses[0][1])  # the port chosen when 0 was asked

    async def close(self) -> None:
        """Stop listening and end open event streams."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.throttle.close()

    async def _end_streams(self, _app: web.Application) -> None:
        for task in list(self._streams):
            task.cancel()

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        address = request.remote or ""
        bearer = "Authorization" in request.headers
        if bearer or (request.method == "POST" and request.path == "/login"):
            wait = await self.throttle.wait(address)
            if wait is not None:
                return _throttled(wait)
        credential = self.auth.credential(request)
        if bearer and credential != "bearer":
            await self.throttle.wrong(address)
        refused = self.auth.foreign_write(request, credential)
        if refused is not None:
            return _error(403, f"refused: {refused}")
        if credential is None and request.path not in _PUBLIC:
            if request.path.startswith("/api/"):
                return _error(401, "sign in first: a session cookie or a bearer token")
            page = web.FileResponse(STATIC / "login.html", status=401)
            page.headers.update(_HEADERS)
            return page
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            exc.headers.update(_HEADERS)
            raise
        except (StoreError, BusError) as exc:
            log.warning("web request %s %s failed: %s", request.method, request.path, exc)
            return _error(503, "the store or the bus is not answering; try again shortly")
        response.headers.update(_HEADERS)
        if request.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    async def _login_page(self, _request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "login.html")

    async def _sign_in(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        given = form.get("token")
        if not isinstance(given, str) or not self.auth.matches(given.strip()):
            await self.throttle.wrong(request.remote or "")
            return _see_other("/login#failed")
        response = _see_other("/")
        self.auth.sign_in(response)
        return response

    async def _sign_out(self, _request: web.Request) -> web.StreamResponse:
        response = _see_other("/login")
        self.auth.sign_out(response)
        return response

    async def _index(self, _request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise bad_request("`text` must be a non-empty string")
        if len(text) > _MAX_TEXT:
            raise bad_request(f"`text` is longer than {_MAX_TEXT} characters")
        conversation = _conversation(body.get("conversation"), new=True)
        inbound = self.adapter.inbound(conversation, text.strip())
        with self._open_stream(), self.adapter.watch(conversation) as deliveries:
            try:
                await self.adapter.submit(inbound)
            except ChannelError as exc:
                return _error(503, str(exc))
            stream = await EventStream.open(request)
            try:
                await self._follow(stream, inbound.id, conversation, deliveries)
            except ConnectionResetError:
                # The page went away; the turn goes on and is stored as usual.
                return stream.response
        await stream.response.write_eof()
        return stream.response

    async def _follow(
        self,
        stream: EventStream,
        inbound_id: str,
        conversation: str,
        deliveries: asyncio.Queue[Outbound],
    ) -> None:
        """Send the turn's deliveries until its final one."""
        await stream.send("conversation", {"conversation": conversation, "id": inbound_id})
        async for outbound in _until_closed(deliveries):
            if outbound is None:
                await stream.keep_alive()
                continue
            if outbound.reply_to not in (None, inbound_id) or outbound.kind == "typing":
                continue
            await stream.send(outbound.kind, _shown(outbound))
            if outbound.ends_turn and outbound.reply_to == inbound_id:
                return

    async def _stop(self, request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        conversation = _conversation(body.get("conversation"), new=False)
        try:
            await self.adapter.submit(self.adapter.cancel(conversation))
        except ChannelError as exc:
            return _error(503, str(exc))
        return web.json_response({"stopping": conversation}, status=202)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        conversation = _conversation(body.get("conversation"), new=False)
        if "text" in body:
            return await self._typed_answer(conversation, body.get("text"))
        answer = body.get("answer")
        if answer not in ("yes", "no"):
            raise bad_request("`answer` must be yes or no")
        question = body.get("question")
        if question is None:
            # No question named: the answer is typed, as in any chat.
            inbound: Inbound | None = self.adapter.inbound(conversation, str(answer))
        elif isinstance(question, str):
            inbound = self.adapter.answer(conversation, question, answer == "yes")
        else:
            inbound = None
        if inbound is None:
            raise bad_request("`question` must be the id the question event carried")
        try:
            await self.adapter.submit(inbound)
        except ChannelError as exc:
            return _error(503, str(exc))
        return web.json_response({"answered": answer}, status=202)

    async def _typed_answer(self, conversation: str, text: object) -> web.StreamResponse:
        """A free answer typed for an `ask_user` question: the person's next message."""
        if not isinstance(text, str) or not text.strip():
            raise bad_request("`text` must be a non-empty string")
        if len(text) > _MAX_TEXT:
            raise bad_request(f"`text` is longer than {_MAX_TEXT} characters")
        try:
            await self.adapter.submit(self.adapter.inbound(conversation, text.strip()))
        except ChannelError as exc:
            return _error(503, str(exc))
        return web.json_response({"answered": text.strip()}, status=202)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        merged: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        stream = await EventStream.open(request)
        await stream.send("ready", {"topics": list(self.topics)})
        readers = [
            asyncio.create_task(self._read_topic(topic, merged), name=f"web-events-{topic}")
            for topic in self.topics
        ]
        try:
            with self._open_stream(), self.adapter.feed() as feed:
                readers.append(asyncio.create_task(_read_feed(feed, merged)))
                while True:
                    try:
                        async with asyncio.timeout(_KEEP_ALIVE):
                            item = await merged.get()
                    except TimeoutError:
                        await stream.keep_alive()
                        continue
                    await stream.send("event", item)
        except ConnectionResetError:
            return stream.response  # the page went away
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)

    @contextlib.contextmanager
    def _open_stream(self) -> Iterator[None]:
        """Count the running handler as an open stream, ended when the server closes (an
        event stream never ends by itself, and closing waits for open requests)."""
        current = asyncio.current_task()
        if current is None:
            yield
            return
        self._streams.add(current)
        try:
            yield
        finally:
            self._streams.discard(current)

    async def _read_topic(self, topic: str, into: asyncio.Queue[dict[str, Any]]) -> None:
        subscription = await self.bus.subscribe(topic)
        try:
            async for payload in subscription:
                into.put_nowait(_event_item(topic, payload))
        finally:
            await subscription.aclose()


async def _read_feed(feed: asyncio.Queue[Outbound], into: asyncio.Queue[dict[str, Any]]) -> None:
    while True:
        outbound = await feed.get()
        into.put_nowait(_event_item("web", outbound))


async def _until_closed(
    deliveries: asyncio.Queue[Outbound],
) -> AsyncIterator[Outbound | None]:
    """Deliveries as they come; None after each quiet spell (time for a keep-alive)."""
    while True:
        try:
            async with asyncio.timeout(_KEEP_ALIVE):
                yield await deliveries.get()
        except TimeoutError:
            yield None


def _conversation(value: object, *, new: bool) -> str:
    if value is None and new:
        return new_id()[:12]
    if not isinstance(value, str) or not CONVERSATION.fullmatch(value):
        raise bad_request("`conversation` must be 1-64 letters, digits, _ or -")
    return value


def _shown(outbound: Outbound) -> dict[str, Any]:
    """What the page gets of a delivery: the text, and safe HTML of Markdown answers."""
    shown: dict[str, Any] = {"kind": outbound.kind, "text": outbound.text, "seq": outbound.seq}
    if outbound.kind in ("delta", "reply", "notification"):
        shown["html"] = to_html(outbound.text)
    if outbound.question is not None:
        shown["question"] = outbound.question
    if outbound.failed:
        shown["failed"] = True
    if outbound.attachments:
        # Offered as download links; the bytes come along (the page keeps no files).
        shown["files"] = [
            {
                "name": file.name,
                "size": size_text(file.size),
                "href": f"data:{_DOWNLOAD};base64,{base64.b64encode(file.data).decode()}",
            }
            for file in outbound.attachments
        ]
    return shown


def _event_item(topic: str, payload: BaseModel) -> dict[str, Any]:
    """One line of the live feed: topic, kind, platform, chat, time and details."""
    if isinstance(payload, EventEnvelope):
        key = payload.session_key
        parts = key.split(":")
        return {
            "topic": topic,
            "kind": payload.name,
            "platform": str(payload.data.get("platform") or parts[0] if key else ""),
            "chat": parts[2] if len(parts) > 2 else "",
            "session_key": key,
            "at": payload.at.isoformat(),
            "data": payload.data,
        }
    if isinstance(payload, Outbound):
        return {
            "topic": topic,
            "kind": payload.kind,
            "platform": payload.address.platform,
            "chat": payload.address.chat,
            "session_key": payload.address.session_key,
            "at": payload.created_at.isoformat(),
            "data": {"text": payload.text},
        }
    if isinstance(payload, NotificationSent | NotificationFailed):
        return {
            "topic": topic,
            "kind": payload.type,
            "platform": payload.address.platform,
            "chat": payload.address.chat,
            "session_key": payload.address.session_key,
            "at": payload.at.isoformat(),
            "data": json.loads(
                payload.model_dump_json(
                    include={"source", "text", "status", "platform_message_id", "reason"}
                )
            ),
        }
    dumped = json.loads(payload.model_dump_json())
    return {
        "topic": topic,
        "kind": str(dumped.get("name") or dumped.get("kind") or dumped.get("type") or topic),
        "platform": "",
        "chat": "",
        "session_key": "",
        "at": "",
        "data": dumped,
    }


def _see_other(location: str) -> web.Response:
    # Returned, not raised: the response carries the sign-in cookie and the page's headers.
    return web.Response(status=303, headers={"Location": location})


def _throttled(wait: int) -> web.Response:
    response = _error(429, f"too many wrong tokens from this address; try again in {wait} s")
    response.headers["Retry-After"] = str(wait)
    return response


def _error(status: int, message: str) -> web.Response:
    response = web.json_response({"error": message}, status=status)
    response.headers.update(_HEADERS)
    return response
