"""The web page's read routes and schedule routes: sessions, conversations, costs, schedules.

Every answer is JSON. Bad bodies and unknown ids are 4xx with `{"error": ...}`, never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from aiohttp import web

from channels.web.costs import cost_report
from channels.web.render import to_html
from channels.web.spec import BOT, SPEC, USER
from core.addresses import AddressBook
from core.clock import utc_now
from core.errors import StoreError
from core.messages import Message
from core.scheduling.book import ScheduleBook
from core.scheduling.cadence import (
    CadenceError,
    make_cron,
    parse_at,
    parse_duration,
    parse_timezone,
)
from core.scheduling.models import Cadence, IntervalCadence, OnceCadence, Schedule
from core.scheduling.tools import describe_cadence
from core.store.base import Store

__all__ = ["ReadApi", "bad_request", "json_body"]


_WEB_KEYS = f"{SPEC.name}:{BOT}:"
_POLICIES = ("always", "conditional", "never")
_CADENCES = ("every", "in", "at", "cron")


def bad_request(message: str) -> web.HTTPBadRequest:
    """A 400 with a JSON body naming what was wrong."""
    return web.HTTPBadRequest(text=json.dumps({"error": message}), content_type="application/json")


def _not_found(message: str) -> web.HTTPNotFound:
    return web.HTTPNotFound(text=json.dumps({"error": message}), content_type="application/json")


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; 400 when it is not one."""
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise bad_request("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


class ReadApi:
    """Routes over the store: what the page shows besides the chat."""

    def __init__(
        self,
        *,
        store: Store,
        book: ScheduleBook,
        addresses: AddressBook,
        budgets: Mapping[str, float] | None = None,
    ) -> None:
        """`budgets`: the profile's spending limits in USD by name (`per_session`...)."""
        self.store = store
        self.book = book
        self.addresses = addresses
        self.budgets = dict(budgets or {})

    def add_routes(self, router: web.UrlDispatcher) -> None:
        """Register the routes on `router`."""
        router.add_get("/api/conversations", self.conversations)
        router.add_get("/api/conversations/{conversation}", self.conversation)
        router.add_get("/api/sessions", self.sessions)
        router.add_get("/api/sessions/{session}", self.session)
        router.add_get("/api/costs", self.costs)
        router.add_get("/api/schedules", self.schedules)
        router.add_post("/api/schedules", self.create_schedule)
        router.add_get("/api/schedules/{schedule}/runs", self.runs)
        router.add_post("/api/schedules/{schedule}/pause", self.pause)
        router.add_post("/api/schedules/{schedule}/resume", self.resume)
        router.add_delete("/api/schedules/{schedule}", self.delete_schedule)

    async def conversations(self, _request: web.Request) -> web.Response:
        """The web conversations, newest first: id, session, messages, last change."""
        records = await self.store.list_sessions(limit=500)
        seen: set[str] = set()
        found = []
        for record in records:
            if not record.key.startswith(_WEB_KEYS) or record.key in seen:
                continue
            seen.add(record.key)
            found.append(
                {
                    "conversation": record.key[len(_WEB_KEYS) :],
                    "session": record.id,
                    "messages": record.message_count,
                    "updated_at": record.updated_at.isoformat(),
                    "title": await self._title(record.id),
                }
            )
        return web.json_response({"conversations": found})

    async def conversation(self, request: web.Request) -> web.Response:
        """One web conversation's newest session with its messages."""
        key = _WEB_KEYS + request.match_info["conversation"]
        for record in await self.store.list_sessions(limit=500):
            if record.key == key:
                messages = await self.store.list_messages(record.id)
                return web.json_response(
                    {
                        "conversation": request.match_info["conversation"],
                        "session": record.id,
                        "messages": [_message(m) for m in messages],
                    }
                )
        raise _not_found("no such conversation")

    async def sessions(self, request: web.Request) -> web.Response:
        """Stored sessions of every platform, most recently updated first."""
        limit = _limit(request, default=50)
        records = await self.store.list_sessions(limit=limit)
        return web.json_response({"sessions": [r.model_dump(mode="json") for r in records]})

    async def session(self, request: web.Request) -> web.Response:
        """One session: its record, messages (tool calls and results too) and cost."""
        session_id = request.match_info["session"]
        record = await self.store.get_session(session_id)
        if record is None:
            raise _not_found(f"no session {session_id!r}")
        messages = await self.store.list_messages(session_id)
        cost = await self.store.cost_summary(session_id)
        return web.json_response(
            {
                "session": record.model_dump(mode="json"),
                "messages": [_message(m) for m in messages],
                "cost": cost.model_dump(mode="json"),
            }
        )

    async def costs(self, _request: web.Request) -> web.Response:
        """Totals, per conversation, per day and per model, and the budgets with what is left."""
        report = await cost_report(self.store)
        return web.json_response(report.as_json(self.budgets))

    async def schedules(self, _request: web.Request) -> web.Response:
        """Every schedule with its next run and last result."""
        listed = []
        for schedule in await self.store.list_schedules():
            runs = await self.store.list_runs(schedule.id, limit=1)
            listed.append(
                self._schedule(schedule)
                | {"last_run": runs[0].model_dump(mode="json") if runs else None}
            )
        return web.json_response({"schedules": listed})

    async def create_schedule(self, request: web.Request) -> web.Response:
        """A new schedule from `{prompt, deliver_to, policy?, every|in|at|cron, tz?}`."""
        body = await json_body(request)
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise bad_request("`prompt` must say what to ask at each run")
        policy = body.get("policy", "always")
        if policy not in _POLICIES:
            raise bad_request(f"`policy` must be one of {', '.join(_POLICIES)}")
        target = body.get("deliver_to")
        if not isinstance(target, str):
            raise bad_request(f"`deliver_to` must be an address: {self.addresses.usage()}")
        try:
            address = self.addresses.parse(target)
        except ValueError as exc:
            raise bad_request(f"`deliver_to`: {exc}") from None
        cadence = _cadence(body)
        try:
            made = await self.book.create(
                cadence=cadence,
                prompt=prompt,
                deliver_to=address,
                owner=f"{SPEC.name}:{USER}",
                notify=policy,
            )
        except CadenceError as exc:
            raise bad_request(str(exc)) from None
        return web.json_response({"schedule": self._schedule(made)}, status=201)

    async def runs(self, request: web.Request) -> web.Response:
        """A schedule's runs with their full output, newest first."""
        schedule = await self._existing(request)
        runs = await self.store.list_runs(schedule.id, limit=_limit(request, default=20))
        return web.json_response({"runs": [r.model_dump(mode="json") for r in runs]})

    async def pause(self, request: web.Request) -> web.Response:
        """Pause a schedule; 409 for one that has finished (completed or disabled)."""
        schedule = await self._existing(request)
        if schedule.status not in ("active", "paused"):
            raise web.HTTPConflict(
                text=json.dumps({"error": f"it is {schedule.status}: there is nothing to pause"}),
                content_type="application/json",
            )
        changed = await self.book.set_status(schedule.id, "paused")
        return web.json_response({"schedule": self._schedule(changed)})

    async def resume(self, request: web.Request) -> web.Response:
        """Resume a schedule from its next occurrence; 409 when nothing is left to run."""
        schedule = await self._existing(request)
        try:
            changed = await self.book.set_status(schedule.id, "active")
        except CadenceError as exc:
            raise web.HTTPConflict(
                text=json.dumps({"error": str(exc)}), content_type="application/json"
            ) from None
        return web.json_response({"schedule": self._schedule(changed)})

    async def delete_schedule(self, request: web.Request) -> web.Response:
        """Delete a schedule and its runs."""
        schedule = await self._existing(request)
        await self.store.delete_schedule(schedule.id)
        return web.json_response({"deleted": schedule.id})

    async def _existing(self, request: web.Request) -> Schedule:
        try:
            return await self.book.get(request.match_info["schedule"])
        except StoreError:
            raise _not_found("no such schedule") from None

    async def _title(self, session_id: str) -> str:
        """The first thing the operator said in a session, cut short."""
        first = await self.store.list_messages(session_id, limit=1)
        return first[0].text[:80] if first else ""

    def _schedule(self, schedule: Schedule) -> dict[str, Any]:
        shown = schedule.model_dump(mode="json")
        shown["cadence_text"] = describe_cadence(schedule.cadence)
        shown["deliver_to_text"] = self.addresses.format(schedule.deliver_to)
        return shown


def _cadence(body: dict[str, Any]) -> Cadence:
    """The cadence of a create request: exactly one of every, in, at, cron (with tz)."""
    given = [name for name in _CADENCES if body.get(name) not in (None, "")]
    if len(given) != 1:
        raise bad_request("give exactly one of `every`, `in`, `at` or `cron`")
    which = given[0]
    value = body[which]
    tz = body.get("tz") or "UTC"
    if not isinstance(value, str) or not isinstance(tz, str):
        raise bad_request(f"`{which}` and `tz` must be strings")
    now = utc_now()
    try:
        parse_timezone(tz)
        if which == "every":
            return IntervalCadence(seconds=parse_duration(value), start=now)
        if which == "in":
            return OnceCadence(at=now + timedelta(seconds=parse_duration(value)))
        if which == "at":
            return OnceCadence(at=parse_at(value, tz=tz, now=now))
        return make_cron(value, tz)
    except CadenceError as exc:
        raise bad_request(f"`{which}`: {exc}") from None


def _limit(request: web.Request, *, default: int) -> int:
    raw = request.query.get("limit")
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise bad_request("`limit` must be a whole number from 1 to 1000")
    return int(raw)


def _message(message: Message) -> dict[str, Any]:
    """A stored message for the page: text, safe HTML of answers, tool calls and results."""
    shown: dict[str, Any] = {
        "seq": message.seq,
        "role": message.role,
        "text": message.text,
        "created_at": message.created_at.isoformat() if message.created_at else None,
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls],
    }
    if message.role == "assistant" and message.text:
        shown["html"] = to_html(message.text)
    if message.role == "tool":
        shown |= {"name": message.name, "is_error": message.is_error}
    if message.images:
        shown["images"] = len(message.images)
    if message.speaker is not None:
        shown["speaker"] = message.speaker  # the operator's words, or the handback's note
    return shown
