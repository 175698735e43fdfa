"""The web page's takeover routes: take a stored conversation's chat over, write in it as the
operator, hand it back (`core/takeover.py`).

`GET /api/sessions/{session}/takeover` (whether its chat is taken over),
`POST /api/sessions/{session}/takeover` (`{"for": "2h"}`, optional),
`POST /api/sessions/{session}/handback` (`{"quiet": true}`, optional) and
`POST /api/sessions/{session}/say` (`{"text": ...}`: sent through the bot's account and kept
as the operator's; 409 when the chat is not taken over). Bad bodies are 400, unknown sessions
404, sessions that are no chat (a schedule's, `notify`'s) 400.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from channels.web.api import bad_request, json_body
from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.envelopes import Address, NotificationSource, Outbound, new_id
from core.store.base import Store
from core.store.takeovers import Takeover
from core.takeover import DEFAULT_DURATION, Takeovers, parse_takeover_duration

__all__ = ["TakeoverApi", "chat_of_session_key"]

_MAX_TEXT = 4_000


def chat_of_session_key(key: str) -> Address | None:
    """The chat a session key (`<platform>:<bot>:<chat>[:<thread>]`) is of; None for a key of
    no chat (`scheduled:<id>`, `notify:<name>`)."""
    parts = key.split(":")
    if len(parts) not in (3, 4) or parts[0] in ("scheduled", "notify") or not all(parts):
        return None
    platform, bot, chat, *thread = parts
    return Address(platform=platform, bot=bot, chat=chat, thread=thread[0] if thread else None)


class TakeoverApi:
    """Routes that take a conversation's chat over from the page."""

    def __init__(self, *, store: Store, bus: Bus) -> None:
        self.store = store
        self.bus = bus
        self.takeovers = Takeovers(store)

    def add_routes(self, router: web.UrlDispatcher) -> None:
        """Register the routes on `router`."""
        router.add_get("/api/sessions/{session}/takeover", self.status)
        router.add_post("/api/sessions/{session}/takeover", self.take_over)
        router.add_post("/api/sessions/{session}/handback", self.hand_back)
        router.add_post("/api/sessions/{session}/say", self.say)

    async def status(self, request: web.Request) -> web.Response:
        """The chat and its running takeover (null when the bot answers)."""
        chat = await self._chat(request)
        running = await self.takeovers.running_in(chat)
        return web.json_response({"chat": str(chat), "takeover": _shown(running)})

    async def take_over(self, request: web.Request) -> web.Response:
        """Take the chat over for `for` (default 4h)."""
        chat = await self._chat(request)
        body = await json_body(request) if request.can_read_body else {}
        duration = DEFAULT_DURATION
        if body.get("for") not in (None, ""):
            if not isinstance(body["for"], str):
                raise bad_request("`for` must be a duration like 30m or 2h")
            try:
                duration = parse_takeover_duration(body["for"])
            except ValueError as exc:
                raise bad_request(f"`for`: {exc}") from None
        kept = await self.takeovers.take_over(chat, by="web", duration=duration)
        return web.json_response({"chat": str(chat), "takeover": _shown(kept)})

    async def hand_back(self, request: web.Request) -> web.Response:
        """Give the chat back (with the note in its history unless `quiet`)."""
        chat = await self._chat(request)
        body = await json_body(request) if request.can_read_body else {}
        quiet = body.get("quiet", False)
        if not isinstance(quiet, bool):
            raise bad_request("`quiet` must be true or false")
        ended = await self.takeovers.hand_back(chat, quiet=quiet)
        return web.json_response({"chat": str(chat), "ended": _shown(ended)})

    async def say(self, request: web.Request) -> web.Response:
        """Send `text` to the chat through the bot's account; kept as the operator's."""
        chat = await self._chat(request)
        body = await json_body(request)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise bad_request("`text` must be the message to send")
        if len(text) > _MAX_TEXT:
            raise bad_request(f"`text` is longer than {_MAX_TEXT} characters")
        if await self.takeovers.running_in(chat) is None:
            raise web.HTTPConflict(
                text=json.dumps({"error": "take the chat over first"}),
                content_type="application/json",
            )
        ident = new_id()
        await self.bus.enqueue(
            outbound_queue(chat.platform),
            Outbound(
                id=ident,
                kind="notification",
                address=chat,
                text=text,
                source=NotificationSource(kind="cli", name="web"),
            ),
            dedupe_id=f"notify:{ident}",
        )
        kept = await self.takeovers.operator_said(chat, text, ident=ident)
        return web.json_response({"chat": str(chat), "seq": kept.seq if kept else None})

    async def _chat(self, request: web.Request) -> Address:
        session_id = request.match_info["session"]
        record = await self.store.get_session(session_id)
        if record is None:
            raise web.HTTPNotFound(
                text=json.dumps({"error": f"no session {session_id!r}"}),
                content_type="application/json",
            )
        chat = chat_of_session_key(record.key)
        if chat is None:
            raise bad_request(f"{record.key} is not a chat: there is nobody to answer")
        return chat


def _shown(takeover: Takeover | None) -> dict[str, Any] | None:
    return None if takeover is None else takeover.model_dump(mode="json")
