"""The Slack adapter on slack-bolt's `AsyncApp`: the Events API over HTTP, or Socket Mode.

Slack objects never leave this package: events become `Inbound`, `Outbound` becomes
`chat.postMessage` / `chat.update` calls, and "working" is an assistant thread status where the
app may set one, with the status reactions of every platform on the person's message (`eyes`,
then `white_check_mark` or `warning`; `channels/reactions.py`).

Conversations: one per direct message channel (or per thread in it), and one per channel
thread. In a channel the bot answers mentions in the mention's thread, then every later
message of a thread it takes part in.

Catch-up: before it starts receiving, the adapter reads `conversations.history` of each
conversation it has handed messages over from, after the newest one (`channels/catchup.py`),
and hands over what it would have answered live (DMs, mentions), in order, with a note on how
late it is. The history of a channel leaves thread replies out, so `conversations.replies` is
read too: of each thread the bot was written to in within the catch-up window (a seen mark of
its own, `<channel>:<thread ts>`), and of each thread in the history read with a reply after
where the read began (`latest_reply`), when the bot takes part in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlparse

import aiohttp
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from channels.attachments import DocumentReader, ReceivedDocuments, ReceivedImages
from channels.bad_requests import BadRequestLog
from channels.base import InboundSink
from channels.catchup import CatchUp, SeenLog, with_late_note
from channels.reactions import Emoji, StatusReactions
from channels.slack.buttons import (
    ACTION,
    decision_blocks,
    press_inbound,
    question_blocks,
    stop_blocks,
)
from channels.slack.checks import DEFAULT_API_URL, DEFAULT_PORT
from channels.slack.format import SLACK_LIMIT, mrkdwn_to_text, slack_chunks
from channels.slack.web_api import Refused, call, refusal
from channels.streaming import ReplyStreams, ReplyTarget
from channels.uploads import UploadLimits, upload_each
from core.commands import CommandInfo
from core.envelopes import Address, Attachment, Inbound, Outbound
from core.errors import ChannelError, ConfigError
from core.messages import ImagePart
from core.store.seen import LastSeen, SeenMarks

__all__ = ["SlackAdapter", "SlackSettings"]

log = logging.getLogger(__name__)

# Message subtypes that are a person writing; edits, joins, bot posts and the rest are not.
_USER_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "me_message"})
# Errors that say the assistant status is not for this app: the reactions alone show work.
_NO_STATUS = frozenset({"not_allowed_token_type", "unknown_method", "missing_scope"})
_BAD_TOKEN = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)
# `/new` (after a mention: Slack keeps a message starting with `/` for slash commands) or `!new`
# (`channels/slack/spec.py`'s prefix, which Slack passes through as it is).
_COMMAND = re.compile(r"[/!]([A-Za-z][A-Za-z0-9_]*)(?:\s|$)")
_SLASH = re.compile(r"^/[A-Za-z][A-Za-z0-9_]*$")
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_MAX_IMAGE_BYTES = 10 * 1024 * 1024
_REMEMBERED = 10_000  # event ids and threads kept in memory
_HANDOFF_GRACE = 5.0  # seconds to finish handing over received events at shutdown
_ACK_WITHIN = 2.5  # seconds an event's ack waits for its hand-over (Slack allows 3)
# The message metadata every message of a reply carries: which reply, which message of it.
_REPLY_EVENT = "switchboard_reply"
# How far before a piece was made a message of its reply may have been sent, and how many of
# the conversation's messages a look-up reads.
_LOOK_BACK = timedelta(hours=1)
_LOOK_UP = 100


class SlackSettings(BaseModel):
    """What the adapter needs; built from the environment in `bots/`.

    Socket Mode when `app_token` is set; otherwise the Events API over HTTP, which needs
    `signing_secret`.
    """

    model_config = ConfigDict(frozen=True)

    bot_token: SecretStr
    signing_secret: SecretStr | None = None
    app_token: SecretStr | None = None
    api_url: str = DEFAULT_API_URL
    host: str = "0.0.0.0"  # Slack must be able to reach it (through a proxy)
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    path: str = "/slack/events"
    working_status: str = "is thinking…"
    # Status reactions on the person's message (`channels/reactions.py`): the taken one while
    # the turn runs, then answered or failed. `reactions` False: none at all.
    reactions: bool = True
    working_reaction: str = "eyes"
    answered_reaction: str = "white_check_mark"
    failed_reaction: str = "warning"
    # Slack drops a status after two minutes without a message; tool use renews it after this.
    status_renewal: float = Field(default=60.0, ge=0)
    # Catch-up after downtime: how far back, and how many messages per conversation at most.
    catch_up_hours: float = Field(default=24.0, ge=0)
    catch_up_messages: int = Field(default=100, ge=0, le=999)


@dataclass(frozen=True)
class _Working:
    """A running turn this gateway shows: its conversation and the thread holding the
    assistant status (None: no status, the reaction alone shows it)."""

    channel: str
    thread: str | None = None
    since: float = 0.0  # when the status was set (monotonic)


class SlackAdapter:
    """One Slack app in one workspace, seen as a `ChannelAdapter`."""

    def __init__(
        self,
        settings: SlackSettings,
        *,
        menu: Sequence[CommandInfo],
        replies: ReplyStreams,
        seen: SeenMarks | None = None,
        documents: DocumentReader | None = None,
        uploads: UploadLimits | None = None,
    ) -> None:
        """`menu` is the chat commands to offer; `replies` shows streamed replies through
        records every gateway shares; `seen` keeps where each conversation's catch-up starts
        (None: no catch-up); `documents` reads the documents people send; `uploads` limits
        the files the bot sends."""
        if settings.app_token is None and settings.signing_secret is None:
            raise ConfigError(
                "Slack needs SLACK_SIGNING_SECRET (Events API over HTTP) or SLACK_APP_TOKEN "
                "(Socket Mode)"
            )
        self.settings = settings
        self._documents = documents or DocumentReader()
        self._uploads = uploads or UploadLimits()
        # Commands arrive as message text (`@bot /new`): any name or alias on the menu.
        self._words = frozenset(w for info in menu for w in (info.name, *info.aliases))
        api_url = settings.api_url if settings.api_url.endswith("/") else f"{settings.api_url}/"
        self._api_host = urlparse(api_url).hostname or ""
        # 429s are waited out (Retry-After) and tried again, twice, before a ChannelError.
        retries: list[AsyncRetryHandler] = [AsyncRateLimitErrorRetryHandler(max_retry_count=2)]
        token = settings.bot_token.get_secret_value()
        self._client = AsyncWebClient(token=token, base_url=api_url, retry_handlers=retries)
        self._identity: AuthorizeResult | None = None
        self._app = self._build(AsyncWebClient(base_url=api_url, retry_handlers=retries))
        self._sink: InboundSink | None = None
        self._stopped = asyncio.Event()
        self._replies = replies
        self._working: dict[str, _Working] = {}
        emoji = Emoji(
            settings.working_reaction, settings.answered_reaction, settings.failed_reaction
        )
        self._reactions = StatusReactions("slack", emoji, enabled=settings.reactions, log=log)
        self._status_available = True
        self._seen_events: OrderedDict[str, None] = OrderedDict()
        self._threads: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._receiving: set[asyncio.Task[None]] = set()
        self._last_in_chat: dict[str, asyncio.Task[None]] = {}
        self._runner: web.AppRunner | None = None
        self._bad_requests = BadRequestLog(log)
        self._seen = SeenLog(seen, "slack")
        self._catch_up = CatchUp(settings.catch_up_hours, settings.catch_up_messages)
        secret = settings.signing_secret
        self._verifier = SignatureVerifier(secret.get_secret_value()) if secret else None
        self._socket: AsyncSocketModeHandler | None = None
        self.listening = asyncio.Event()
        """Set once events are being received (the HTTP server or the socket is up)."""
        self.port: int | None = None
        """The port the Events API server listens on (HTTP mode, once listening)."""

    @property
    def platform(self) -> str:
        return "slack"

    @property
    def bot_key(self) -> str:
        """The bot's part of session keys: the workspace (team) id, known after `auth.test`."""
        identity = self._identity
        return (identity.team_id or identity.bot_id or "slack") if identity else "slack"

    def _build(self, client: AsyncWebClient) -> AsyncApp:
        signing_secret = self.settings.signing_secret

        async def authorize() -> AuthorizeResult:
            # Single workspace: `auth.test` ran before events are received; bolt needs no call
            # of its own.
            assert self._identity is not None
            return self._identity

        app = AsyncApp(
            name="switchboard",
            client=client,
            authorize=authorize,
            signing_secret=signing_secret.get_secret_value() if signing_secret else "",
            request_verification_enabled=True,
            # Our listener only hands the event over, so it runs before the ack and every
            # task it starts is ours.
            process_before_response=True,
        )
        app.event("message")(self._on_event)
        app.event("app_mention")(self._on_event)
        app.action(ACTION)(self._on_press)
        # The slash commands deploy/slack-app-manifest.yml registers.
        app.command(_SLASH)(self._on_slash)
        return app

    # --- running ---------------------------------------------------------------------------

    async def run(self, sink: InboundSink) -> None:
        """Receive events until `stop()`."""
        self._sink = sink
        self._seen.hold()
        await self._identify()
        try:
            if not await self._until_stopped(self._catch_up_all()):
                return
            if self.settings.app_token is not None:
                started = await self._until_stopped(self._start_socket_mode())
            else:
                started = await self._until_stopped(self._start_http())
            if started:
                self.listening.set()
                await self._stopped.wait()
        finally:
            await self._shutdown()

    async def stop(self) -> None:
        """Stop receiving; `run()` returns once the server or socket is closed."""
        self._stopped.set()

    async def _until_stopped(self, starting: Awaitable[None]) -> bool:
        """Await `starting` unless `stop()` comes first; whether it finished."""
        task = asyncio.ensure_future(starting)
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in (stopped, task):
                if not waiting.done():
                    waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stopped
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return not task.cancelled()

    async def _identify(self) -> None:
        try:
            response = await self._client.auth_test()
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error in _BAD_TOKEN:
                raise ConfigError(f"Slack rejected SLACK_BOT_TOKEN ({error})") from None
            raise refusal(exc) from exc
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelError(f"cannot reach the Slack Web API: {exc}") from exc
        self._identity = AuthorizeResult.from_auth_test_response(
            auth_test_response=response, bot_token=self.settings.bot_token.get_secret_value()
        )
        log.info(
            "slack bot %s (%s) in workspace %s",
            self._identity.user,
            self._identity.bot_user_id,
            self._identity.team_id,
        )

    async def _start_http(self) -> None:
        settings = self.settings
        server = web.Application(client_max_size=1024 * 1024)
        server.router.add_post(settings.path, self._on_http)
        self._runner = web.AppRunner(server, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, settings.host, settings.port).start()
        sockets = self._runner.addresses
        self.port = int(sockets[0][1]) if sockets else settings.port
        log.info("slack events API listening on port %s at %s", self.port, settings.path)

    async def _on_http(self, request: web.Request) -> web.Response:
        """One Events API request. The signature, the timestamp and the body's shape are checked
        before bolt sees it (bolt parses the body first and answers garbage with a 500); a body
        over the server's size limit gets aiohttp's 413."""
        raw = await request.read()
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not stamp.isdigit() or len(stamp) > 12:
            return self._refuse(request, 401, "no valid request timestamp")
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            return self._refuse(request, 400, "the body is not UTF-8")
        assert self._verifier is not None  # HTTP mode runs with a signing secret
        if not self._verifier.is_valid(text, stamp, signature):
            return self._refuse(request, 401, "no valid signature, or a stale one")
        try:
            if request.content_type == "application/json" and not isinstance(
                json.loads(text), dict
            ):
                return self._refuse(request, 400, "the JSON body is not an object")
            bolt_request = AsyncBoltRequest(
                body=text, query=request.query_string, headers=dict(request.headers)
            )
            response = await self._app.async_dispatch(bolt_request)
        except ValueError:
            return self._refuse(request, 400, "the body is not JSON")
        except Exception as exc:  # whatever bolt trips over in a signed body it did not expect
            return self._refuse(request, 400, f"unreadable event ({type(exc).__name__}: {exc})")
        return await to_aiohttp_response(response)

    def _refuse(self, request: web.Request, status: int, reason: str) -> web.Response:
        self._bad_requests.refused(status, reason, request.remote)
        return web.Response(status=status, text=reason)

    async def _start_socket_mode(self) -> None:
        assert self.settings.app_token is not None
        app_token = self.settings.app_token.get_secret_value()
        handler = self._socket = AsyncSocketModeHandler(self._app, app_token)
        try:
            # Asked here rather than by the client, which would retry a bad token forever.
            opened = await self._app.client.apps_connections_open(app_token=app_token)
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error in _BAD_TOKEN or error == "not_allowed_token_type":
                raise ConfigError(f"Slack rejected SLACK_APP_TOKEN ({error})") from None
            raise refusal(exc) from exc
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelError(f"cannot reach the Slack Web API: {exc}") from exc
        handler.client.wss_uri = opened["url"]
        await handler.connect_async()  # type: ignore[no-untyped-call]
        log.info("slack socket mode connected")

    async def _shutdown(self) -> None:
        if self._socket is not None:
            client = self._socket.client
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            # close() cancels the client's tasks without waiting for them.
            pending = [
                task
                for task in (
                    client.message_processor,
                    client.current_session_monitor,
                    client.message_receiver,
                )
                if task is not None
            ]
            if pending:
                await asyncio.wait(pending, timeout=_HANDOFF_GRACE)
        if self._runner is not None:
            await self._runner.cleanup()
        # Events already acknowledged to Slack are handed over before leaving.
        if self._receiving:
            await asyncio.wait(set(self._receiving), timeout=_HANDOFF_GRACE)
        for task in list(self._receiving):
            task.cancel()
        self._seen.end_catch_up(complete=False)  # a no-op unless stopped while catching up
        await self._seen.flush()

    # --- receiving -------------------------------------------------------------------------

    async def _on_event(self, body: dict[str, Any]) -> None:
        """bolt's listener for `message` and `app_mention`: runs before the ack, so Slack hears
        of the event once it is stored. The hand-over is a task of ours, waited for up to
        `_ACK_WITHIN` (Slack wants an answer within 3 s: a slow image download goes on after
        the ack); a failed hand-over raises, so Slack gets an error and sends the event again."""
        event_id = str(body.get("event_id") or "")
        if event_id and _remember(self._seen_events, event_id):
            log.debug("ignoring a redelivered event %s", event_id)
            return
        event = body.get("event")
        if not isinstance(event, dict) or not self._from_a_person(event):
            return
        inbound = self._inbound(body, event)
        files = [f for f in event.get("files") or [] if isinstance(f, dict)]
        chat = inbound.address.chat
        task = asyncio.create_task(self._hand_over(inbound, files, self._last_in_chat.get(chat)))
        self._receiving.add(task)
        self._last_in_chat[chat] = task
        task.add_done_callback(lambda done: self._handed_over(chat, done))
        await asyncio.wait({task}, timeout=_ACK_WITHIN)
        if task.done() and not task.cancelled() and (error := task.exception()) is not None:
            if event_id:
                self._seen_events.pop(event_id, None)  # Slack's retry must be taken
            raise ChannelError(f"could not store a slack message: {error}") from error

    async def _on_press(self, ack: Any, body: dict[str, Any]) -> None:
        """bolt's listener for presses of our confirmation and Stop buttons: hand the answer or
        stop request over, then ack (a failed hand-over raises, and Slack shows the person an
        error)."""
        inbound = press_inbound(body, self.bot_key)
        if inbound is not None:
            assert self._sink is not None
            await self._sink(inbound)
        await ack()

    async def _on_slash(self, ack: Any, body: dict[str, Any]) -> None:
        """bolt's listener for the app's slash commands: hand the command over as if it had
        been written in the chat, then ack with no text (the answer comes as a message; a
        failed hand-over raises, and Slack shows the person an error)."""
        inbound = self._slash_inbound(body)
        if inbound is not None:
            assert self._sink is not None
            await self._sink(inbound)
        await ack()

    def _slash_inbound(self, body: Mapping[str, Any]) -> Inbound | None:
        """The `command` Inbound of a slash command's payload; None when it is not one."""
        word = str(body.get("command") or "").removeprefix("/").lower()
        channel, user = body.get("channel_id"), body.get("user_id")
        if not word or not isinstance(channel, str) or not isinstance(user, str) or not user:
            return None
        arguments = str(body.get("text") or "").strip()
        is_direct = channel.startswith("D")
        team = body.get("team_id")
        return Inbound(
            kind="command",
            command=word,
            # Slash commands come from a chat, never a thread: the chat's conversation.
            address=Address(platform="slack", bot=self.bot_key, chat=channel),
            user_id=user,
            user_name=str(body.get("user_name") or ""),
            text=f"/{word} {arguments}".strip(),
            is_direct=is_direct,
            mentions_bot=True,
            team=str(team) if team else None,
        )

    def _handed_over(self, chat: str, task: asyncio.Task[None]) -> None:
        self._receiving.discard(task)
        if self._last_in_chat.get(chat) is task:
            del self._last_in_chat[chat]
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("could not hand over a slack message: %s", error, exc_info=error)

    async def _hand_over(
        self, inbound: Inbound, files: list[dict[str, Any]], before: asyncio.Task[None] | None
    ) -> None:
        if files:
            received = await self._images(files)
            documents = await self._read_documents(files)
            inbound = inbound.model_copy(
                update={
                    "images": received.images,
                    "text": received.text_with_note(inbound.text),
                    "documents": documents.documents,
                    "transcriptions": documents.transcriptions,
                }
            )
        if before is not None:  # keep a chat's messages in the order Slack sent them
            await asyncio.wait({before})
        assert self._sink is not None
        await self._sink(inbound)
        self._note_seen(inbound)

    def _note_seen(self, inbound: Inbound) -> None:
        """Catch-up after downtime starts after the newest message handed over: of the
        conversation, and of the thread when it was written to the bot (its replies are not
        in the conversation's history)."""
        ts = inbound.platform_message_id
        if ts is not None and (position := _ts_position(ts)) is not None:
            at = datetime.fromtimestamp(position / 1_000_000, UTC)
            address = inbound.address
            self._seen.note(self.bot_key, address.chat, ts, position, at)
            if address.thread is not None and (inbound.mentions_bot or inbound.is_direct):
                thread = _thread_mark(address.chat, address.thread)
                self._seen.note(self.bot_key, thread, ts, position, at)

    # --- catching up -----------------------------------------------------------------------

    async def _catch_up_all(self) -> None:
        """Hand over what was sent to the bot while no gateway ran, before receiving events."""
        complete = False
        try:
            if self._catch_up.enabled and self._seen.durable:
                marks = await self._seen.begin_catch_up(self.bot_key)
                now = datetime.now(UTC)
                read: set[tuple[str, str]] = set()  # threads read already
                total = 0
                for mark in marks:
                    if ":" not in mark.chat:
                        total += await self._catch_up_in(mark, now, read)
                floor = self._catch_up.since(now)
                for mark in marks:
                    channel, _, thread = mark.chat.partition(":")
                    if thread and mark.at >= floor and (channel, thread) not in read:
                        read.add((channel, thread))
                        total += await self._catch_up_thread(channel, thread, mark, now)
                if total:
                    log.info("slack catch-up handed over %d missed message(s)", total)
            complete = True
        except Exception:
            log.exception("slack catch-up failed")
        finally:
            self._seen.end_catch_up(complete=complete)

    def _oldest(self, mark: LastSeen, now: datetime) -> str:
        """Where a read of `mark`'s conversation starts: after its message, or at the
        catch-up window's start if that is later."""
        floor = int(self._catch_up.since(now).timestamp() * 1_000_000)
        return mark.message_id if mark.position >= floor else _ts_text(floor)

    async def _catch_up_in(self, mark: LastSeen, now: datetime, read: set[tuple[str, str]]) -> int:
        """Hand over the messages of one conversation after its mark, and the replies of its
        threads that have some after it; how many."""
        oldest = self._oldest(mark, now)
        try:
            response = await call(
                self._client.conversations_history(
                    channel=mark.chat,
                    oldest=oldest,
                    inclusive=False,
                    limit=self._catch_up.messages,
                )
            )
        except ChannelError as exc:
            log.warning("could not read the history of slack conversation %s: %s", mark.chat, exc)
            return 0
        handed = 0
        for message in _messages(response):  # oldest first (Slack answers newest first)
            handed += await self._hand_over_missed(mark.chat, message, now)
            thread = str(message.get("ts"))
            latest = _ts_position(str(message.get("latest_reply") or ""))
            after = _ts_position(oldest)
            if (
                latest is None
                or after is None
                or latest <= after
                or not self._takes_part(mark.chat, message)
            ):
                continue
            read.add((mark.chat, thread))
            handed += await self._catch_up_thread(mark.chat, thread, mark, now)
        return handed

    def _takes_part(self, channel: str, parent: Mapping[str, Any]) -> bool:
        """Whether the bot answers in the thread of `parent`: a DM's, the bot's own message's,
        or one the bot answered or was written to in."""
        identity = self._identity
        bot_user = identity.bot_user_id if identity else None
        return (
            channel.startswith("D")
            or (channel, str(parent.get("ts"))) in self._threads
            or (bot_user is not None and parent.get("user") == bot_user)
        )

    async def _catch_up_thread(
        self, channel: str, thread: str, mark: LastSeen, now: datetime
    ) -> int:
        """Hand over the replies of one thread after `mark`; how many."""
        try:
            response = await call(
                self._client.conversations_replies(
                    channel=channel,
                    ts=thread,
                    oldest=self._oldest(mark, now),
                    inclusive=False,
                    limit=self._catch_up.messages,
                )
            )
        except ChannelError as exc:
            log.warning("could not read slack thread %s in %s: %s", thread, channel, exc)
            return 0
        if not channel.startswith("D"):
            _remember(self._threads, (channel, thread))  # its replies are for the bot
        after = _ts_position(mark.message_id) or 0
        handed = 0
        # The parent comes first whatever `oldest` says.
        for message in _messages(response):
            position = _ts_position(str(message.get("ts")))
            if str(message.get("ts")) == thread or position is None or position <= after:
                continue
            handed += await self._hand_over_missed(channel, message, now)
        return handed

    async def _hand_over_missed(
        self, channel: str, message: Mapping[str, Any], now: datetime
    ) -> int:
        """A missed message, handed over like a live one if the bot would have answered it;
        1 if it was."""
        event = {**message, "channel": channel}
        if channel.startswith("D"):
            event["channel_type"] = "im"
        if not self._from_a_person(event):
            return 0
        inbound = self._inbound({}, event)
        if not (inbound.is_direct or inbound.mentions_bot):
            return 0  # read, not answered: not worth a turn now
        sent = _ts_position(str(event["ts"])) or 0
        inbound = with_late_note(inbound, datetime.fromtimestamp(sent / 1_000_000, UTC), now)
        files = [f for f in event.get("files") or [] if isinstance(f, dict)]
        await self._hand_over(inbound, files, None)
        return 1

    def _from_a_person(self, event: Mapping[str, Any]) -> bool:
        """A person's new message: not a bot's (ours included), an edit, a join or hidden."""
        identity = self._identity
        user = event.get("user")
        return (
            event.get("type") in ("message", "app_mention")
            and event.get("subtype") in _USER_SUBTYPES
            and isinstance(user, str)
            and bool(user)
            and not event.get("bot_id")
            and not event.get("hidden")
            and (identity is None or user != identity.bot_user_id)
            and isinstance(event.get("channel"), str)
            and isinstance(event.get("ts"), str)
        )

    def _inbound(self, body: Mapping[str, Any], event: Mapping[str, Any]) -> Inbound:
        bot_user = self._identity.bot_user_id if self._identity else None
        channel, ts = str(event["channel"]), str(event["ts"])
        thread_ts = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else None
        raw_text = str(event.get("text") or "")
        is_direct = event.get("channel_type") == "im" or channel.startswith("D")
        mentioned = event["type"] == "app_mention" or (
            bot_user is not None and f"<@{bot_user}" in raw_text
        )
        if is_direct:
            thread = thread_ts  # one conversation per DM, unless the DM itself is threaded
            addressed = True
        else:
            thread = thread_ts or ts  # the mention's thread, or the one it is in
            addressed = mentioned or (
                thread_ts is not None
                and (
                    (channel, thread_ts) in self._threads
                    or (bot_user is not None and event.get("parent_user_id") == bot_user)
                )
            )
            if addressed:
                _remember(self._threads, (channel, thread))
        text = mrkdwn_to_text(raw_text, drop_user=bot_user)
        command = _command(text, self._words) if addressed or is_direct else None
        if command is not None:
            text = "/" + text.lstrip()[1:]  # `!approve CODE` reads as `/approve CODE`
        team = event.get("user_team") or event.get("team") or body.get("team_id")
        profile = event.get("user_profile")
        name = ""
        if isinstance(profile, dict):
            name = str(profile.get("display_name") or profile.get("real_name") or "")
        return Inbound(
            kind="command" if command else "message",
            command=command,
            address=Address(platform="slack", bot=self.bot_key, chat=channel, thread=thread),
            user_id=str(event["user"]),
            user_name=name,
            text=text,
            is_direct=is_direct,
            mentions_bot=mentioned if is_direct else addressed,
            team=str(team) if team else None,
            platform_message_id=ts,
        )

    async def _images(self, files: list[dict[str, Any]]) -> ReceivedImages:
        received = ReceivedImages()
        for file in files:
            mimetype = str(file.get("mimetype") or "")
            url = str(file.get("url_private_download") or file.get("url_private") or "")
            if mimetype not in _IMAGE_TYPES or not url:
                continue
            if int(file.get("size") or 0) > _MAX_IMAGE_BYTES:
                log.info("not reading a %s-byte image", file.get("size"))
                received.add(None)
                continue
            if not self._trusted(url):
                log.warning("not downloading a file from %s", urlparse(url).hostname)
                received.add(None)
                continue
            data = await self._download(url, _MAX_IMAGE_BYTES, _an_image)
            received.add(None if data is None else ImagePart(media_type=mimetype, data=data))
        return received

    async def _read_documents(self, files: list[dict[str, Any]]) -> ReceivedDocuments:
        """The files that are not images, as the model reads them."""
        received = self._documents.received()
        limit = self._documents.max_download_bytes
        for file in files:
            mimetype = str(file.get("mimetype") or "")
            if mimetype in _IMAGE_TYPES:
                continue
            url = str(file.get("url_private_download") or file.get("url_private") or "")

            async def download(url: str = url) -> bytes | None:
                if not url or not self._trusted(url):
                    log.warning("not downloading a file from %s", urlparse(url).hostname)
                    return None
                return await self._download(url, limit, _not_a_sign_in_page)

            name = str(file.get("name") or file.get("title") or "file")
            size = file.get("size")
            # Slack's audio clips say how long they are.
            length = file.get("duration_ms")
            await received.add(
                name,
                mimetype,
                size if isinstance(size, int) else None,
                download,
                duration=length / 1000 if isinstance(length, int) else None,
            )
        return received

    def _trusted(self, url: str) -> bool:
        """Whether `url` is Slack's (or the configured API's): the bot token goes with it."""
        host = urlparse(url).hostname or ""
        return host == self._api_host or host == "slack.com" or host.endswith(".slack.com")

    async def _download(
        self, url: str, limit: int, expected: Callable[[str], bool]
    ) -> bytes | None:
        """The file at `url`, at most `limit` bytes, of a content type `expected` accepts;
        None (logged) otherwise."""
        headers = {"Authorization": f"Bearer {self.settings.bot_token.get_secret_value()}"}
        timeout = aiohttp.ClientTimeout(total=30)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers) as response,
            ):
                if response.status != 200 or not expected(response.content_type):
                    # Slack answers with its sign-in page when the token may not read files.
                    log.warning(
                        "could not download a file (HTTP %s, %s); does the app have the "
                        "files:read scope?",
                        response.status,
                        response.content_type,
                    )
                    return None
                data = bytearray()
                async for piece in response.content.iter_chunked(64 * 1024):
                    data.extend(piece)
                    if len(data) > limit:
                        break
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not download a file: %s", exc)
            return None
        if len(data) > limit:
            log.info("ignoring a file over %d bytes", limit)
            return None
        return bytes(data)

    # --- delivering ------------------------------------------------------------------------

    async def deliver(self, outbound: Outbound) -> None:
        """Show the working state, stream pieces and final answers in their conversation."""
        key = outbound.reply_to or outbound.id
        match outbound.kind:
            case "typing":
                await self._show_working(key, outbound)
            case "progress":
                # Tool activity would be noise in a channel; the working state shows it.
                await self._renew_working(key)
            case "delta":
                await self._replies.show(outbound, self._reply_for)
            case "reply" | "notice" | "notification" | "question":
                try:
                    await self._replies.show(outbound, self._reply_for)
                except ChannelError as exc:
                    if exc.permanent:  # never shown: the question says so, where it can
                        self._working.pop(key, None)
                        await self._react(outbound.model_copy(update={"failed": True}))
                    raise
                self._working.pop(key, None)
                await self._react(outbound)
            case "decision":
                await self._decide(outbound)
            case "file":
                await self._send_files(outbound)

    async def _send_files(self, outbound: Outbound) -> None:
        """Upload each file Slack's external way (`files_upload_v2`: an upload URL, the
        bytes, then sharing it in the conversation); a refused one becomes a line saying so."""
        channel, thread = outbound.address.chat, outbound.address.thread

        async def upload(attachment: Attachment, caption: str) -> None:
            await call(
                self._client.files_upload_v2(
                    channel=channel,
                    thread_ts=thread,
                    file=attachment.data,
                    filename=attachment.name,
                    title=attachment.name,
                    initial_comment=caption or None,
                )
            )

        async def note(line: str) -> None:
            await call(self._client.chat_postMessage(channel=channel, text=line, thread_ts=thread))

        await upload_each(outbound, self._uploads, upload, note)

    async def _decide(self, outbound: Outbound) -> None:
        """Show a confirmation's decision in place of its question, without the buttons; sent
        anew if the question was never shown."""
        shown = await self._replies.messages(f"question:{outbound.question}")
        text = slack_chunks(outbound.text)[0]
        address = outbound.address
        if shown:
            await call(
                self._client.chat_update(
                    channel=address.chat, ts=shown[0], text=text, blocks=decision_blocks(text)
                )
            )
        else:
            await call(
                self._client.chat_postMessage(
                    channel=address.chat, text=text, thread_ts=address.thread
                )
            )

    def _reply_for(self, outbound: Outbound) -> ReplyTarget:
        address = outbound.address
        channel, thread = address.chat, address.thread
        question = outbound.question

        key = outbound.record_key
        # An answer being written carries a Stop button; the final text's edit takes it away.
        streaming = outbound.kind == "delta"

        async def send(index: int, chunk: str) -> str:
            # A confirmation question carries its Allow / Refuse buttons on its first message.
            blocks = question_blocks(chunk, question) if question and index == 0 else None
            if streaming:
                blocks = stop_blocks(chunk)
            # Stamped, so a send whose answer was lost can be found (`find`).
            stamp = {"event_type": _REPLY_EVENT, "event_payload": {"reply": key, "part": index}}
            response = await call(
                self._client.chat_postMessage(
                    channel=channel, text=chunk, thread_ts=thread, blocks=blocks, metadata=stamp
                )
            )
            if thread is not None and not channel.startswith("D"):
                _remember(self._threads, (channel, thread))
            return str(response["ts"])

        async def edit(ts: str, chunk: str) -> None:
            # Blocks left out stay as they were: an empty list takes the Stop button away.
            blocks = stop_blocks(chunk) if streaming else []
            await call(self._client.chat_update(channel=channel, ts=ts, text=chunk, blocks=blocks))

        async def find(index: int) -> str | None:
            return await self._find_sent(outbound, index)

        return ReplyTarget(
            send=send,
            edit=edit,
            render=slack_chunks,
            part_size=SLACK_LIMIT,
            find=find,
            controls="stop" if streaming else "",
        )

    async def _find_sent(self, outbound: Outbound, index: int) -> str | None:
        """The ts of message `index` of `outbound`'s reply if an earlier send of it reached the
        conversation (found by its metadata among the recent messages), else None."""
        address = outbound.address
        since = outbound.created_at - _LOOK_BACK
        oldest = _ts_text(int(since.timestamp() * 1_000_000))
        try:
            if address.thread is not None:
                response = await call(
                    self._client.conversations_replies(
                        channel=address.chat,
                        ts=address.thread,
                        oldest=oldest,
                        limit=_LOOK_UP,
                        include_all_metadata=True,
                    )
                )
            else:
                response = await call(
                    self._client.conversations_history(
                        channel=address.chat,
                        oldest=oldest,
                        limit=_LOOK_UP,
                        include_all_metadata=True,
                    )
                )
        except Refused as exc:
            if not exc.permanent:
                raise  # tried again with the delivery
            log.info("cannot look for a sent reply in %s (%s); sending it", address.chat, exc)
            return None
        for message in _messages(response):
            metadata = message.get("metadata")
            if not isinstance(metadata, dict) or metadata.get("event_type") != _REPLY_EVENT:
                continue
            payload = metadata.get("event_payload")
            if (
                isinstance(payload, dict)
                and payload.get("reply") == outbound.record_key
                and payload.get("part") == index
            ):
                log.info("message %d of reply %s was sent already", index, outbound.record_key)
                return str(message.get("ts"))
        return None

    async def _show_working(self, key: str, outbound: Outbound) -> None:
        """The assistant status of the thread where the app may set one, and the taken
        reaction on the question."""
        if key in self._working or await self._replies.finished(outbound.record_key):
            return  # shown already, or answered already (by another gateway)
        address = outbound.address
        working = _Working(address.chat)
        if address.thread is not None and await self._set_status(address.chat, address.thread):
            # Slack clears the status when the app replies in the thread.
            working = _Working(address.chat, thread=address.thread, since=time.monotonic())
        self._working[key] = working
        await self._react(outbound)

    async def _renew_working(self, key: str) -> None:
        """Set the status again during a long turn: Slack drops it after two minutes."""
        working = self._working.get(key)
        if working is None or working.thread is None:
            return
        if time.monotonic() - working.since < self.settings.status_renewal:
            return
        if await self._set_status(working.channel, working.thread):
            self._working[key] = replace(working, since=time.monotonic())

    async def _set_status(self, channel: str, thread: str) -> bool:
        """Show the working status in a thread; False if this app cannot."""
        if not self._status_available:
            return False
        try:
            await self._client.assistant_threads_setStatus(
                channel_id=channel, thread_ts=thread, status=self.settings.working_status
            )
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error not in _NO_STATUS:
                raise refusal(exc) from exc
            self._status_available = False
            log.info("no assistant status for this app (%s); the reactions show work", error)
            return False
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelError(f"slack unreachable: {exc}") from exc
        return True

    async def _react(self, outbound: Outbound) -> None:
        """Change the status reaction on the question as `outbound` calls for, whichever
        gateway put the taken one there (a reaction that is not there, or is there already,
        is no error). A refusal is logged, never raised."""
        step = self._reactions.step(outbound)
        if step is None:
            return
        channel, ts = outbound.address.chat, step.message
        try:
            if step.remove is not None:
                remove = self._client.reactions_remove(
                    channel=channel, timestamp=ts, name=step.remove
                )
                await _reaction(remove, harmless="no_reaction")
            if step.add is not None:
                add = self._client.reactions_add(channel=channel, timestamp=ts, name=step.add)
                await _reaction(add, harmless="already_reacted")
        except ChannelError as exc:
            self._reactions.refused(step, exc)


async def _reaction(request: Awaitable[AsyncSlackResponse], *, harmless: str) -> None:
    """A reaction call; the error saying it was not needed (`harmless`) is no error."""
    try:
        await call(request)
    except Refused as exc:
        if exc.error != harmless:
            raise


def _messages(response: AsyncSlackResponse) -> list[dict[str, Any]]:
    """The messages of a `conversations.*` answer, oldest first."""
    found = response.get("messages")
    messages = [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []
    return sorted(messages, key=lambda m: _ts_position(str(m.get("ts"))) or 0)


def _thread_mark(channel: str, thread: str) -> str:
    """The seen mark's conversation for a thread (a channel's history leaves replies out)."""
    return f"{channel}:{thread}"


def _ts_position(ts: str) -> int | None:
    """A message `ts` (`1700000000.000100`) in microseconds, which orders a conversation."""
    seconds, _, fraction = ts.partition(".")
    if not seconds.isdigit() or not (fraction.isdigit() or not fraction):
        return None
    return int(seconds) * 1_000_000 + int(fraction.ljust(6, "0")[:6])


def _ts_text(position: int) -> str:
    """The `ts` of a position in microseconds."""
    return f"{position // 1_000_000}.{position % 1_000_000:06d}"


def _command(text: str, words: frozenset[str]) -> str | None:
    match = _COMMAND.match(text)
    if match is None or match.group(1).lower() not in words:
        return None
    return match.group(1).lower()


def _remember(seen: OrderedDict[Any, None], key: Any) -> bool:
    """Add `key` to a bounded memory; whether it was there already."""
    if key in seen:
        seen.move_to_end(key)
        return True
    seen[key] = None
    if len(seen) > _REMEMBERED:
        seen.popitem(last=False)
    return False


def _an_image(content_type: str) -> bool:
    return content_type.startswith("image/")


def _not_a_sign_in_page(content_type: str) -> bool:
    # A document may come as any type, but never as Slack's HTML sign-in page.
    return content_type != "text/html"
