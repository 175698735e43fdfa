"""The gateway half of the Discord fake: a websocket session as discord.py expects it.

Plain JSON text frames: HELLO with a long heartbeat interval (so tests never wait for a beat),
heartbeat ACKs, IDENTIFY → READY and a GUILD_CREATE per guild, RESUME → the events the bot
missed and RESUMED, RECONNECT on request. Dispatched events are numbered per session and kept,
so a resume replays what a dropped connection lost, as Discord does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.discord_events import Guild

__all__ = ["HEARTBEAT_INTERVAL_MS", "Changes", "GatewayFake"]

HEARTBEAT_INTERVAL_MS = 45_000
# Dispatches a resume never sends again as "unacknowledged" (see `request_reconnect`).
_LIFECYCLE = frozenset({"READY", "GUILD_CREATE", "RESUMED"})
_MESSAGE_CONTENT_INTENT = 1 << 15


class Changes:
    """Wakes every waiter when the fake's state changes (sync `notify`, async `until`)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._event.wait()


@dataclass
class _Session:
    id: str
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Connection:
    ws: web.WebSocketResponse
    outbox: asyncio.Queue[dict[str, Any] | int] = field(default_factory=asyncio.Queue)
    session: _Session | None = None

    def send(self, frame: dict[str, Any]) -> None:
        self.outbox.put_nowait(frame)

    def close(self, code: int) -> None:
        self.outbox.put_nowait(code)


class GatewayFake(ABC):
    """The gateway of one bot; the host provides the bot, its guilds and `gateway_url`."""

    token: str
    application_id: int
    bot_user: dict[str, Any]
    guilds: dict[int, Guild]
    privileged_intents: bool

    def __init__(self) -> None:
        super().__init__()
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats = 0
        self._changes = Changes()
        self._sessions: dict[str, _Session] = {}
        self._live: _Connection | None = None
        self._ready_sessions = 0
        self._replay_extra = 0

    @property
    @abstractmethod
    def gateway_url(self) -> str:
        """Where the bot connects (and resumes)."""

    def _recent(self) -> str:
        """What happened lately, for a timeout's message."""
        return f"{self._ready_sessions} session(s) ready, {len(self.resumes)} resume(s)"

    @property
    def ready_count(self) -> int:
        """How many IDENTIFYs were answered with READY and GUILD_CREATE so far."""
        return self._ready_sessions

    def close_gateway(self) -> None:
        """Close the live connection (1001, going away), as a shutting-down Discord would."""
        if self._live is not None:
            self._live.close(1001)
            self._live = None

    def request_reconnect(self, *, replay: int = 0) -> None:
        """Send RECONNECT (op 7): the bot resumes on `resume_gateway_url`.

        On the resume, the last `replay` events the bot had already received (messages,
        interactions; not READY or RESUMED) come again before the missed ones, as if the
        gateway had not seen them acknowledged.
        """
        assert self._live is not None, "no bot is connected"
        self._replay_extra = replay
        self._live.send({"op": 7, "d": None})

    def drop_connection(self, *, replay: int = 0) -> None:
        """Close the gateway socket with 4000 (unknown error): the bot reconnects and resumes."""
        assert self._live is not None, "no bot is connected"
        self._replay_extra = replay
        self._live.close(4000)
        self._live = None

    def dispatch(self, event: str, data: dict[str, Any]) -> int:
        """Number `event` in the session and send it now, or on the next resume."""
        session = self._live.session if self._live is not None else self._latest_session()
        if session is None:
            raise RuntimeError("no bot has identified yet (await fake.wait_ready() first)")
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(frame)
        if self._live is not None and self._live.session is session:
            self._live.send(frame)
        self._changes.notify()
        return session.seq

    async def until(
        self,
        ready: Callable[[], bool],
        what: str = "a condition",
        timeout: float = 5.0,  # noqa: ASYNC109 - a test's deadline, named like asyncio's
    ) -> None:
        """Wait until `ready()` holds, re-checked on every request, frame or event."""
        try:
            async with asyncio.timeout(timeout):
                await self._changes.until(ready)
        except TimeoutError:
            raise TimeoutError(f"timed out waiting for {what}; {self._recent()}") from None

    async def wait_ready(self, timeout: float = 5.0, *, sessions: int = 1) -> None:  # noqa: ASYNC109
        """Return once `sessions` IDENTIFYs were answered with READY and every GUILD_CREATE."""
        await self.until(lambda: self._ready_sessions >= sessions, "the bot to identify", timeout)

    async def wait_resumed(self, count: int = 1, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Return once `count` RESUMEs were answered (missed events sent, RESUMED)."""
        await self.until(
            lambda: len(self.resumes) >= count and self._live is not None, "a resume", timeout
        )

    # -- the websocket -----------------------------------------------------------------------

    def _latest_session(self) -> _Session | None:
        return next(reversed(self._sessions.values()), None)

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        connection = _Connection(ws)
        writer = asyncio.create_task(self._write(connection))
        connection.send({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}})
        try:
            async for message in ws:
                if message.type is WSMsgType.TEXT:
                    self._on_frame(connection, json.loads(message.data))
        finally:
            connection.close(1000)
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await writer
            if self._live is connection:
                self._live = None
            self._changes.notify()
        return ws

    async def _write(self, connection: _Connection) -> None:
        while True:
            frame = await connection.outbox.get()
            if isinstance(frame, int):
                if not connection.ws.closed:
                    await connection.ws.close(code=frame)
                return
            if connection.ws.closed:
                return
            await connection.ws.send_str(json.dumps(frame))

    def _on_frame(self, connection: _Connection, frame: dict[str, Any]) -> None:
        op, data = frame.get("op"), frame.get("d")
        if op == 1:
            self.heartbeats += 1
            connection.send({"op": 11})
        elif op == 2:
            self._identify(connection, data or {})
        elif op == 6:
            self._resume(connection, data or {})
        self._changes.notify()

    def _identify(self, connection: _Connection, data: dict[str, Any]) -> None:
        self.identifies.append(data)
        if data.get("token") != self.token:
            connection.close(4004)  # Authentication failed
            return
        if not self.privileged_intents and int(data.get("intents", 0)) & _MESSAGE_CONTENT_INTENT:
            connection.close(4014)  # Disallowed intent(s)
            return
        session = _Session(uuid.uuid4().hex)
        self._sessions[session.id] = session
        connection.session = session
        self._live = connection
        self.dispatch(
            "READY",
            {
                "v": 10,
                "user": {**self.bot_user, "verified": True, "mfa_enabled": False, "flags": 0},
                "guilds": [{"id": str(g), "unavailable": True} for g in self.guilds],
                "session_id": session.id,
                "resume_gateway_url": self.gateway_url,
                "session_type": "normal",
                "application": {"id": str(self.application_id), "flags": 0},
                "private_channels": [],
                "relationships": [],
                "user_settings": {},
                "presences": [],
                "guild_join_requests": [],
                "geo_ordered_rtc_regions": [],
            },
        )
        for guild in self.guilds.values():
            self.dispatch("GUILD_CREATE", guild.payload(self.bot_user))
        self._ready_sessions += 1

    def _resume(self, connection: _Connection, data: dict[str, Any]) -> None:
        self.resumes.append(data)
        session = self._sessions.get(str(data.get("session_id")))
        if data.get("token") != self.token:
            connection.close(4004)
            return
        if session is None:
            connection.send({"op": 9, "d": False})
            return
        connection.session = session
        self._live = connection
        seen = int(data.get("seq") or 0)
        again = [f for f in session.events if f["s"] <= seen and f["t"] not in _LIFECYCLE]
        replayed = again[len(again) - self._replay_extra :] if self._replay_extra else []
        self._replay_extra = 0
        for frame in [*replayed, *(f for f in session.events if f["s"] > seen)]:
            connection.send(frame)
        self.dispatch("RESUMED", {})
