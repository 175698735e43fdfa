"""A loopback fake of Discord's gateway and REST API, for driving the real discord.py.

Point discord.py at it with `discord.http.Route.BASE = fake.api_url` and
`discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)`.

The gateway (`discord_gateway`) carries the events the test makes (`dm`, `post`, `slash`, …
from `discord_events`) and replays them on a resume as Discord does. REST covers what a chat
bot calls: `/users/@me`, `/oauth2/applications/@me`, channel messages (POST, PATCH, and GET
for the history, with `after`, `before` and `limit` as Discord reads them), a channel (GET),
typing, the bot's own reactions on a message (PUT and DELETE `…/reactions/{emoji}/@me`, kept
in `reactions`), threads from a message, interaction callbacks, follow-ups and edits of the
original response, and the application's global commands (GET, PUT).

A message may carry files (multipart: `payload_json` and `files[n]` parts, as discord.py
sends a `discord.File`), at most `MAX_ATTACHMENT_BYTES` each (a bot's upload limit without
boosts); each is recorded in `uploads` and shown in the message's `attachments`.

Every REST request is recorded in `requests`; messages the bot sent are kept (as they stand
now) in `messages`; `SentMessage.pings` says whom Discord would notify, from the content and
`allowed_mentions`. `fail_next` injects errors, a 429 with a `Via` header by default (without
one discord.py takes a 429 for a Cloudflare ban). Responses carry exactly
`Content-Type: application/json`: discord.py reads anything else as text.

A message sent with a `nonce` and `enforce_nonce` that the bot already used in that channel
is not created again: the earlier one is returned, as Discord does for a few minutes.

Deviations, on purpose: no permissions are checked, every user may run every command, and an
interaction's token never expires.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self
from urllib.parse import unquote

from aiohttp import web

from tests.fakes.discord_events import (
    CHANNEL,
    DEFAULT_BOT_ID,
    DEFAULT_TOKEN,
    GUILD,
    OTHER_CHANNEL,
    EventBuilders,
    Guild,
    Snowflakes,
    now_iso,
    text_channel,
    thread_channel,
)
from tests.fakes.discord_gateway import GatewayFake

__all__ = ["FakeDiscord", "Request", "SentMessage", "UploadedFile"]

MAX_CONTENT = 2000
MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024
# Where a multipart body's files go in the decoded body (never a field Discord sends).
_FILES = "__files__"
_MENTION = re.compile(r"<@(!|&)?(\d+)>")
# The bot's own reaction on a message: put on (PUT) and taken off (DELETE).
_OWN_REACTION = re.compile(
    r"/channels/(?P<channel>\d+)/messages/(?P<message>\d+)/reactions/(?P<emoji>[^/]+)/@me"
)
_Handler = Callable[[dict[str, str], Any], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Request:
    """One REST request as the fake decoded it; `index` is its position in `requests`."""

    name: str
    method: str
    path: str
    body: Any
    query: dict[str, str]
    index: int


@dataclass(frozen=True)
class UploadedFile:
    """A file a message carried: its form field, name, content type and bytes."""

    field: str
    filename: str
    content_type: str
    data: bytes = dataclasses.field(repr=False)


@dataclass
class SentMessage:
    """A message the bot sent (or an interaction's response), as it stands now."""

    id: int
    channel_id: int
    content: str
    allowed_mentions: dict[str, Any] | None
    reference: dict[str, Any] | None = None
    interaction_id: int | None = None
    loading: bool = False
    edits: int = 0
    pings: frozenset[str] = frozenset()
    nonce: str | None = None
    # Message components (rows of buttons), as sent or last edited; None: none.
    components: list[dict[str, Any]] | None = None
    # Files it carries.
    files: list[UploadedFile] = dataclasses.field(default_factory=list)


@dataclass
class _Fault:
    status: int
    retry_after: float
    via: bool
    is_global: bool
    code: int
    message: str


class _ApiError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class FakeDiscord(GatewayFake, EventBuilders):
    """Discord for one bot on 127.0.0.1, with one guild (`GUILD`: `CHANNEL`, `OTHER_CHANNEL`)."""

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        bot_id: int = DEFAULT_BOT_ID,
        privileged_intents: bool = True,
    ) -> None:
        super().__init__()
        self.token = token
        self.bot_id = bot_id
        self.application_id = bot_id
        # False: the portal has the Message Content intent off; asking for it closes with 4014.
        self.privileged_intents = privileged_intents
        self.snowflake = Snowflakes()
        guild = Guild(GUILD, "Switchboard Test")
        guild.channels[CHANNEL] = text_channel(CHANNEL, GUILD, "general", 0)
        guild.channels[OTHER_CHANNEL] = text_channel(OTHER_CHANNEL, GUILD, "random", 1)
        self.guilds: dict[int, Guild] = {GUILD: guild}
        self.requests: list[Request] = []
        self.messages: dict[int, list[SentMessage]] = defaultdict(list)
        self.commands: list[dict[str, Any]] = []
        self.threads_created: list[int] = []
        self.downloads: list[str] = []
        # Files the bot sent, with the channel and the message carrying them.
        self.uploads: list[tuple[int, int, UploadedFile]] = []
        self._responded: dict[int, SentMessage] = {}  # interaction id -> original response
        # Component interactions acknowledged without a message of their own (type 6).
        self.deferred_updates: list[int] = []
        self._faults: dict[str, deque[_Fault]] = defaultdict(deque)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._routes: list[tuple[str, re.Pattern[str], str, _Handler, bool]] = [
            # (method, path, name, handler, needs the bot token)
            ("GET", re.compile(r"/users/@me"), "get_me", self._get_me, True),
            ("GET", re.compile(r"/oauth2/applications/@me"), "get_application", self._app, True),
            ("GET", re.compile(r"/gateway(?:/bot)?"), "get_gateway", self._get_gateway, True),
            ("POST", re.compile(r"/channels/(?P<channel>\d+)/messages"), "create_message",
             self._create_message, True),
            ("GET", re.compile(r"/channels/(?P<channel>\d+)/messages"), "history",
             self._history, True),
            ("PATCH", re.compile(r"/channels/(?P<channel>\d+)/messages/(?P<message>\d+)"),
             "edit_message", self._edit_message, True),
            ("GET", re.compile(r"/channels/(?P<channel>\d+)"), "get_channel", self._get_channel,
             True),
            ("POST", re.compile(r"/channels/(?P<channel>\d+)/typing"), "typing", self._typing,
             True),
            ("POST", re.compile(r"/channels/(?P<channel>\d+)/messages/(?P<message>\d+)/threads"),
             "create_thread", self._create_thread, True),
            ("POST", re.compile(r"/interactions/(?P<interaction>\d+)/(?P<token>[^/]+)/callback"),
             "interaction_callback", self._callback, False),
            ("POST", re.compile(r"/webhooks/(?P<app>\d+)/(?P<token>[^/]+)"), "create_followup",
             self._create_followup, False),
            ("PATCH",
             re.compile(r"/webhooks/(?P<app>\d+)/(?P<token>[^/]+)/messages/(?P<message>[^/]+)"),
             "edit_webhook_message", self._edit_webhook_message, False),
            ("GET", re.compile(r"/applications/(?P<app>\d+)/commands"), "get_commands",
             self._get_commands, True),
            ("PUT", re.compile(r"/applications/(?P<app>\d+)/commands"), "put_commands",
             self._put_commands, True),
            ("PUT", _OWN_REACTION, "add_reaction", self._add_reaction, True),
            ("DELETE", _OWN_REACTION, "remove_own_reaction", self._remove_own_reaction, True),
        ]  # fmt: skip
        # The bot's reactions on each message, `(channel id, message id)` -> emoji.
        self.reactions: dict[tuple[int, int], set[str]] = defaultdict(set)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeDiscord is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def api_url(self) -> str:
        """The REST base, like `https://discord.com/api/v10`."""
        return f"{self.url}/api/v10"

    @property
    def gateway_url(self) -> str:
        """The gateway websocket, like `wss://gateway.discord.gg/`."""
        return f"ws://127.0.0.1:{self._port}/gateway"

    def base_url(self) -> str:
        return self.url

    async def start(self) -> None:
        # Uploads past aiohttp's 1 MB default reach the handlers, which judge their size.
        app = web.Application(client_max_size=2 * MAX_ATTACHMENT_BYTES)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{path:.+}", self._download)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        self.close_gateway()
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
        name: str,
        *,
        status: int = 429,
        retry_after: float = 0.2,
        via: bool = True,
        is_global: bool = False,
        code: int = 0,
        message: str = "",
        times: int = 1,
    ) -> None:
        """Fail the next `times` requests of route `name` (see `requests`) with `status`.

        A 429 carries `retry_after` and, unless `via=False`, the `Via` header of Discord's
        proxies; other statuses carry `{"code", "message"}`.
        """
        text = message or ("You are being rate limited." if status == 429 else "Fake error")
        self._faults[name].extend([_Fault(status, retry_after, via, is_global, code, text)] * times)

    def _recent(self) -> str:
        return f"last requests: {[f'{r.method} {r.path}' for r in self.requests[-20:]]}"

    def bot_message(self, channel_id: int) -> dict[str, Any] | None:
        sent = self.messages.get(channel_id)
        return self._message_json(sent[-1]) if sent else None

    def sent_texts(self, channel_id: int) -> list[str]:
        """The current content of each message the bot has in `channel_id`, oldest first."""
        return [message.content for message in self.messages.get(channel_id, [])]

    def inbound_ids(self, content: str) -> list[str]:
        """The ids of the people's messages whose text is `content`, oldest first."""
        return [str(i) for i, m in sorted(self.inbound.items()) if m["content"] == content]

    def requests_named(self, name: str, channel_id: int | None = None) -> list[Request]:
        """The recorded requests of route `name` (to `channel_id`, when given), in order."""
        return [
            r
            for r in self.requests
            if r.name == name and (channel_id is None or f"/channels/{channel_id}/" in r.path)
        ]

    async def wait_for_request(
        self,
        name: str,
        predicate: Callable[[Request], bool] | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109
        *,
        after: int = 0,
    ) -> Request:
        """The first request of route `name` at index `after` or later that `predicate` takes."""
        found: list[Request] = []

        def matched() -> bool:
            found.extend(
                r
                for r in self.requests[after:]
                if r.name == name and (predicate is None or predicate(r))
            )
            return bool(found)

        await self.until(matched, f"a {name} request", timeout)
        return found[0]

    # -- REST --------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body = await _read_body(request)
        for method, pattern, name, handler, needs_token in self._routes:
            match = pattern.fullmatch(path)
            if match is None or method != request.method:
                continue
            self.requests.append(
                Request(name, request.method, path, body, dict(request.query), len(self.requests))
            )
            self._changes.notify()
            if needs_token and request.headers.get("Authorization") != f"Bot {self.token}":
                return _error(401, 0, "401: Unauthorized")
            if faults := self._faults.get(name):
                return _fault(faults.popleft())
            try:
                # The path's parts, and the query's for a GET (`after`, `limit`, …).
                response = await handler({**request.query, **match.groupdict()}, body)
            except _ApiError as error:
                return _error(error.status, error.code, error.message)
            self._changes.notify()
            return response
        self.requests.append(Request("unknown", request.method, path, body, {}, len(self.requests)))
        return _error(404, 0, "404: Not Found")

    async def _download(self, request: web.Request) -> web.StreamResponse:
        path = f"attachments/{request.match_info['path']}"
        self.downloads.append(path)
        self._changes.notify()
        if path not in self.attachments:
            return web.Response(status=404, text="Not Found")
        content_type, data = self.attachments[path]
        return web.Response(body=data, headers={"Content-Type": content_type})

    async def _get_me(self, _: dict[str, str], __: Any) -> web.StreamResponse:
        return _json({**self.bot_user, "verified": True, "mfa_enabled": False, "flags": 0})

    async def _app(self, _: dict[str, str], __: Any) -> web.StreamResponse:
        return _json(
            {
                "id": str(self.application_id),
                "name": "Switchboard",
                "icon": None,
                "description": "",
                "summary": "",
                "type": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "verify_key": "0" * 64,
                "owner": {"id": "1", "username": "owner", "discriminator": "0", "avatar": None},
                "flags": 0,
                "bot": self.bot_user,
                "interactions_endpoint_url": None,
                "redirect_uris": [],
            }
        )

    async def _get_gateway(self, _: dict[str, str], __: Any) -> web.StreamResponse:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return _json({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})

    async def _create_message(self, match: dict[str, str], body: Any) -> web.StreamResponse:
        channel_id = self._known_channel(match["channel"])
        files: list[UploadedFile] = body.pop(_FILES, []) if isinstance(body, dict) else []
        for file in files:
            if len(file.data) > MAX_ATTACHMENT_BYTES:
                raise _ApiError(413, 40005, "Request entity too large")
        content = _checked_content(body) if not files else str(body.get("content") or "")
        reference = body.get("message_reference")
        if reference and reference.get("fail_if_not_exists", True):
            if self._find(channel_id, int(reference["message_id"])) is None:
                raise _ApiError(400, 50035, "Invalid Form Body: Unknown message")
        nonce = body.get("nonce")
        if nonce is not None and body.get("enforce_nonce"):
            for earlier in self.messages[channel_id]:
                if earlier.nonce == str(nonce):  # created already: returned, not made again
                    return _json(self._message_json(earlier))
        message = SentMessage(
            self.snowflake(), channel_id, content, body.get("allowed_mentions"), reference
        )
        message.nonce = None if nonce is None else str(nonce)
        message.components = body.get("components") or None
        message.files = files
        stored = self._store(message)
        self.uploads.extend((channel_id, message.id, file) for file in files)
        return _json(stored)

    async def _add_reaction(self, match: dict[str, str], _: Any) -> web.StreamResponse:
        key, emoji = self._reaction_target(match)
        self.reactions[key].add(emoji)
        return web.Response(status=204)

    async def _remove_own_reaction(self, match: dict[str, str], _: Any) -> web.StreamResponse:
        key, emoji = self._reaction_target(match)
        self.reactions[key].discard(emoji)  # one that is not there: 204 all the same
        return web.Response(status=204)

    def _reaction_target(self, match: dict[str, str]) -> tuple[tuple[int, int], str]:
        channel_id = self._known_channel(match["channel"])
        message_id = int(match["message"])
        if self._find(channel_id, message_id) is None:
            raise _ApiError(404, 10008, "Unknown Message")
        emoji = unquote(match["emoji"])
        if emoji.isascii():  # a custom emoji (`name:id`) is not served; words are no emoji
            raise _ApiError(400, 10014, "Unknown Emoji")
        return (channel_id, message_id), emoji

    async def _get_channel(self, match: dict[str, str], _: Any) -> web.StreamResponse:
        found = self.channel_payload(int(match["channel"]))
        if found is None:
            raise _ApiError(404, 10003, "Unknown Channel")
        return _json(found)

    async def _history(self, match: dict[str, str], _: Any) -> web.StreamResponse:
        """A channel's messages (people's and the bot's): with `after`, the `limit` oldest after
        it; else the newest (before `before`); newest first either way, as Discord answers."""
        channel_id = self._known_channel(match["channel"])
        limit = int(match.get("limit", "50"))
        if not 1 <= limit <= 100:
            raise _ApiError(400, 50035, "Invalid Form Body (limit)")
        found = [m for m in self.inbound.values() if int(m["channel_id"]) == channel_id]
        found += [self._message_json(m) for m in self.messages.get(channel_id, [])]
        found.sort(key=lambda m: int(m["id"]))
        if "after" in match:
            found = [m for m in found if int(m["id"]) > int(match["after"])][:limit]
        else:
            if "before" in match:
                found = [m for m in found if int(m["id"]) < int(match["before"])]
            found = found[-limit:]
        return _json(found[::-1])

    async def _edit_message(self, match: dict[str, str], body: Any) -> web.StreamResponse:
        channel_id = self._known_channel(match["channel"])
        found = [m for m in self.messages[channel_id] if m.id == int(match["message"])]
        if not found:
            if self._find(channel_id, int(match["message"])) is not None:
                raise _ApiError(403, 50005, "Cannot edit a message authored by another user")
            raise _ApiError(404, 10008, "Unknown Message")
        return _json(self._edit(found[0], body))

    async def _typing(self, match: dict[str, str], _: Any) -> web.StreamResponse:
        self._known_channel(match["channel"])
        return web.Response(status=204)

    async def _create_thread(self, match: dict[str, str], body: Any) -> web.StreamResponse:
        channel_id = self._known_channel(match["channel"])
        message_id = int(match["message"])
        guild = self.guild_of(channel_id)
        if guild is None or channel_id not in guild.channels:
            raise _ApiError(400, 50024, "Cannot execute action on this channel type")
        if self._find(channel_id, message_id) is None:
            raise _ApiError(404, 10008, "Unknown Message")
        if message_id in guild.threads:
            raise _ApiError(400, 160004, "A thread has already been created for this message")
        name = str(body.get("name") or "")
        if not 1 <= len(name) <= 100:
            raise _ApiError(400, 50035, "Invalid Form Body: name")
        thread = thread_channel(message_id, guild.id, channel_id, name, self.bot_id)
        guild.threads[message_id] = thread
        self.threads_created.append(message_id)
        self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return _json(thread)

    async def _callback(self, match: dict[str, str], body: Any) -> web.StreamResponse:
        interaction = self._interaction(int(match["interaction"]), match["token"])
        interaction_id = int(interaction["id"])
        if interaction_id in self._responded or interaction_id in self.deferred_updates:
            raise _ApiError(400, 40060, "Interaction has already been acknowledged.")
        kind = int(body.get("type", 0))
        if kind == 6 and interaction["type"] == 3:  # a button press, acknowledged silently
            self.deferred_updates.append(interaction_id)
            acknowledged = {"id": str(interaction_id), "type": 3, "response_message_loading": False}
            return _json({"interaction": acknowledged})
        if kind not in (4, 5):
            raise _ApiError(400, 50035, f"Invalid Form Body: unsupported callback type {kind}")
        data = body.get("data") or {}
        loading = kind == 5
        content = "" if loading else _checked_content(data)
        original = SentMessage(
            self.snowflake(),
            int(interaction["channel_id"]),
            content,
            data.get("allowed_mentions"),
            interaction_id=interaction_id,
            loading=loading,
        )
        self._responded[interaction_id] = original
        message = self._store(original)
        return _json(
            {
                "interaction": {
                    "id": str(interaction_id),
                    "type": 2,
                    "response_message_id": str(original.id),
                    "response_message_loading": loading,
                    "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
                },
                "resource": {"type": kind, "message": message},
            }
        )

    async def _create_followup(self, match: dict[str, str], body: Any) -> web.StreamResponse:
        interaction = self._webhook_interaction(match)
        interaction_id = int(interaction["id"])
        if interaction_id not in self._responded:
            raise _ApiError(404, 10015, "Unknown Webhook")
        message = SentMessage(
            self.snowflake(),
            int(interaction["channel_id"]),
            _checked_content(body),
            body.get("allowed_mentions"),
            interaction_id=interaction_id,
        )
        return _json(self._store(message))

    async def _edit_webhook_message(self, match: dict[str, str], body: Any) -> web.StreamResponse:
        interaction = self._webhook_interaction(match)
        interaction_id = int(interaction["id"])
        if match["message"] == "@original":
            target = self._responded.get(interaction_id)
        else:
            target = next(
                (
                    m
                    for m in self.messages[int(interaction["channel_id"])]
                    if m.id == int(match["message"]) and m.interaction_id == interaction_id
                ),
                None,
            )
        if target is None:
            raise _ApiError(404, 10008, "Unknown Message")
        return _json(self._edit(target, body))

    async def _get_commands(self, match: dict[str, str], _: Any) -> web.StreamResponse:
        self._check_application(match)
        return _json(self.commands)

    async def _put_commands(self, match: dict[str, str], body: Any) -> web.StreamResponse:
        self._check_application(match)
        if not isinstance(body, list):
            raise _ApiError(400, 50035, "Invalid Form Body")
        by_name = {c["name"]: c for c in self.commands}
        self.commands = [self._registered(c, by_name.get(c["name"])) for c in body]
        return _json(self.commands)

    # -- helpers -----------------------------------------------------------------------------

    def _registered(self, command: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        """A command as Discord stores and lists it: ids, defaults filled, falsy options gone."""
        options = [_stored_option(o) for o in command.get("options") or []]
        stored: dict[str, Any] = {
            "id": old["id"] if old else str(self.snowflake()),
            "application_id": str(self.application_id),
            "version": str(self.snowflake()),
            "default_member_permissions": command.get("default_member_permissions"),
            "type": command.get("type", 1),
            "name": command["name"],
            "description": command.get("description", ""),
            "dm_permission": command.get("dm_permission", True),
            "contexts": command.get("contexts"),
            "integration_types": command.get("integration_types") or [0],
            "nsfw": command.get("nsfw", False),
        }
        if options:
            stored["options"] = options
        return stored

    def _check_application(self, match: dict[str, str]) -> None:
        if int(match["app"]) != self.application_id:
            raise _ApiError(403, 50001, "Missing Access")

    def _known_channel(self, raw: str) -> int:
        channel_id = int(raw)
        if self.channel_payload(channel_id) is None:
            raise _ApiError(404, 10003, "Unknown Channel")
        return channel_id

    def _interaction(self, interaction_id: int, token: str) -> dict[str, Any]:
        interaction = self.interactions.get(interaction_id)
        if interaction is None or interaction["token"] != token:
            raise _ApiError(404, 10062, "Unknown interaction")
        return interaction

    def _webhook_interaction(self, match: dict[str, str]) -> dict[str, Any]:
        self._check_application(match)
        for interaction in self.interactions.values():
            if interaction["token"] == match["token"]:
                return interaction
        raise _ApiError(401, 50027, "Invalid Webhook Token")

    def _find(self, channel_id: int, message_id: int) -> dict[str, Any] | None:
        inbound = self.inbound.get(message_id)
        if inbound is not None and int(inbound["channel_id"]) == channel_id:
            return inbound
        for sent in self.messages.get(channel_id, []):
            if sent.id == message_id:
                return self._message_json(sent)
        return None

    def _store(self, message: SentMessage) -> dict[str, Any]:
        message.pings = self._pings(message)
        self.messages[message.channel_id].append(message)
        return self._message_json(message)

    def _edit(self, message: SentMessage, body: Any) -> dict[str, Any]:
        message.content = _checked_content(body)
        if "allowed_mentions" in body:
            message.allowed_mentions = body["allowed_mentions"]
        if "components" in body:
            message.components = body["components"] or None
        message.loading = False
        message.edits += 1
        message.pings = message.pings | self._pings(message)
        return self._message_json(message)

    def _pings(self, message: SentMessage) -> frozenset[str]:
        """Whom Discord notifies for this content: "everyone", "user:<id>", "role:<id>"."""
        allowed = message.allowed_mentions
        parse = set(allowed.get("parse", [])) if allowed is not None else {"everyone", "users"}
        if allowed is None:
            parse.add("roles")
        users = {str(u) for u in (allowed or {}).get("users", [])}
        roles = {str(r) for r in (allowed or {}).get("roles", [])}
        pings: set[str] = set()
        if ("@everyone" in message.content or "@here" in message.content) and "everyone" in parse:
            pings.add("everyone")
        for kind, ident in _MENTION.findall(message.content):
            if kind == "&" and ("roles" in parse or ident in roles):
                pings.add(f"role:{ident}")
            elif kind != "&" and ("users" in parse or ident in users):
                pings.add(f"user:{ident}")
        reference = message.reference
        replied_user = allowed is None or allowed.get("replied_user", False)
        if reference and replied_user:
            quoted = self._find(message.channel_id, int(reference["message_id"]))
            if quoted is not None:
                pings.add(f"user:{quoted['author']['id']}")
        return frozenset(pings)

    def _message_json(self, message: SentMessage) -> dict[str, Any]:
        guild = self.guild_of(message.channel_id)
        payload: dict[str, Any] = {
            "id": str(message.id),
            "channel_id": str(message.channel_id),
            "author": self.bot_user,
            "content": message.content,
            "timestamp": now_iso(),
            "edited_timestamp": now_iso() if message.edits else None,
            "tts": False,
            "mention_everyone": "everyone" in message.pings,
            "mentions": [],
            "mention_roles": [],
            "attachments": [
                {
                    "id": str(message.id + index),
                    "filename": file.filename,
                    "size": len(file.data),
                    "content_type": file.content_type,
                    "url": f"{self.url}/attachments/{message.channel_id}/{message.id}/"
                    f"{file.filename}",
                    "proxy_url": f"{self.url}/attachments/{message.channel_id}/{message.id}/"
                    f"{file.filename}",
                }
                for index, file in enumerate(message.files)
            ],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 128 if message.loading else 0,
            "components": message.components or [],
        }
        if guild is not None:
            payload["guild_id"] = str(guild.id)
        if message.reference:
            payload["type"] = 19
            payload["message_reference"] = {"type": 0, **message.reference}
            quoted = self.inbound.get(int(message.reference["message_id"]))
            if quoted is not None:
                payload["referenced_message"] = quoted
        if message.interaction_id is not None:
            payload["type"] = 20
            payload["application_id"] = str(self.application_id)
        return payload


async def _read_body(request: web.Request) -> Any:
    """JSON, or the `payload_json` part of a multipart body; None without a body."""
    if request.content_type == "application/json":
        with contextlib.suppress(ValueError):
            return await request.json()
        return None
    if request.content_type == "multipart/form-data":
        form = await request.post()
        raw = form.get("payload_json")
        body = json.loads(str(raw)) if raw is not None else {}
        files = [
            UploadedFile(name, value.filename, value.content_type, value.file.read())
            for name, value in form.items()
            if isinstance(value, web.FileField)
        ]
        if files:
            body[_FILES] = files
        return body
    return None


def _checked_content(body: Any) -> str:
    content = body.get("content") if isinstance(body, dict) else None
    content = content if isinstance(content, str) else ""
    if not content.strip() and not (isinstance(body, dict) and body.get("embeds")):
        raise _ApiError(400, 50006, "Cannot send an empty message")
    if len(content) > MAX_CONTENT:
        raise _ApiError(
            400, 50035, f"Invalid Form Body: content must be {MAX_CONTENT} or fewer in length."
        )
    return content


def _stored_option(option: dict[str, Any]) -> dict[str, Any]:
    stored = {k: v for k, v in option.items() if v not in (None, False, [])}
    if "options" in stored:
        stored["options"] = [_stored_option(o) for o in stored["options"]]
    return stored


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly "application/json": discord.py reads a body with "; charset=..." as text.
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _error(status: int, code: int, message: str) -> web.Response:
    return _json({"message": message, "code": code}, status)


def _fault(fault: _Fault) -> web.Response:
    if fault.status != 429:
        return _error(fault.status, fault.code, fault.message)
    headers = {
        "Retry-After": str(math.ceil(fault.retry_after)),
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": f"{time.time() + fault.retry_after:.3f}",
        "X-RateLimit-Reset-After": f"{fault.retry_after:.3f}",
        "X-RateLimit-Bucket": "fake-bucket",
        "X-RateLimit-Scope": "global" if fault.is_global else "user",
    }
    if fault.via:
        headers["Via"] = "1.1 google"
    body = {"message": fault.message, "retry_after": fault.retry_after, "global": fault.is_global}
    return _json({**body, "code": fault.code}, 429, headers)
