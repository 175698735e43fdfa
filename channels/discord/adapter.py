"""The Discord adapter on discord.py: the gateway for messages and slash commands, REST to answer.

Discord objects never leave this package: messages and interactions become `Inbound`,
`Outbound` becomes sends and edits of channel messages (or of a slash command's response) and
typing indicators.

* DMs are always passed on as addressed; in servers a message is addressed when it mentions
  the bot, replies to it, or is in a thread the bot takes part in. Other server messages are
  passed on too (the worker reads but does not answer them, unless the profile says "all").
* One conversation per DM channel, channel and thread: a thread's address is its parent
  channel with the thread as `thread`. With `reply_in_thread`, a mention in a channel opens a
  thread on the message and the conversation lives there.
* Every send and edit carries `allowed_mentions` that let nothing the model writes ping
  anyone but the person who asked: no @everyone, @here, roles or other users.
* Catch-up: on every new gateway session (a start, a reconnect that could not resume), the
  DM channels and threads it has seen messages in and the server text channels it can read
  are read from the newest message it handed over (`channels/catchup.py`); what it would have
  answered live is handed over in order, with a note on how late it is.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import io
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from channels.attachments import DocumentReader, ReceivedDocuments, ReceivedImages
from channels.base import InboundSink
from channels.catchup import CatchUp, SeenLog, with_late_note
from channels.discord.buttons import custom_id, press_inbound, question_view, stop_view
from channels.discord.checks import DEFAULT_API_URL
from channels.discord.commands import build_tree, sync_commands
from channels.discord.format import DISCORD_LIMIT, discord_chunks
from channels.reactions import Emoji, StatusReactions
from channels.streaming import ReplyStreams, ReplyTarget
from channels.typing import TypingRenewal, stop_renewals
from channels.uploads import UploadLimits, upload_each
from core.commands import CommandInfo
from core.envelopes import Address, Attachment, Inbound, Outbound
from core.errors import ChannelError, ConfigError
from core.messages import ImagePart
from core.store.seen import LastSeen, SeenMarks
from core.tasks import cancel_and_wait

__all__ = ["INTENTS", "DiscordAdapter", "DiscordSettings"]

log = logging.getLogger(__name__)

INTENTS = discord.Intents(guilds=True, guild_messages=True, dm_messages=True, message_content=True)
"""Servers and their channels, messages in servers and DMs, and their text (privileged: the
Message Content intent must be switched on in the developer portal)."""

_T = TypeVar("_T")
_Send = Callable[[int, str], Awaitable[str]]
_Edit = Callable[[str, str], Awaitable[None]]
_MAX_IMAGE_BYTES = 10 * 1024 * 1024
_MAX_IMAGES = 4
# What the model APIs take; other images (SVG, HEIC, …) are left out like other files.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_MAX_TYPING_SECONDS = 300.0
# An interaction's token lasts 15 minutes; after that its response cannot be edited.
_INTERACTION_SECONDS = 14 * 60.0
_REMEMBERED_ASKS = 2048
_THREAD_EXISTS = 160004
_ANSWERED_TYPES = (discord.MessageType.default, discord.MessageType.reply)
_REACTIONS = Emoji(taken="👀", answered="✅", failed="⚠️")


class DiscordSettings(BaseModel):
    """What the adapter needs; built from the environment in `bots/`."""

    model_config = ConfigDict(frozen=True)

    token: SecretStr
    api_url: str = DEFAULT_API_URL
    gateway_url: str | None = None
    reply_in_thread: bool = False
    # Discord shows "typing…" for 10 s per call.
    typing_interval: float = Field(default=8.0, gt=0)
    # Catch-up after downtime: how far back, and how many messages per conversation at most.
    catch_up_hours: float = Field(default=24.0, ge=0)
    catch_up_messages: int = Field(default=100, ge=0)
    # Seconds discord.py waits after the last server arrived before it calls itself ready
    # (and the catch-up starts).
    ready_timeout: float = Field(default=2.0, ge=0)
    # Status reactions on the person's message (`channels/reactions.py`).
    reactions: bool = True


@dataclass
class _Ask:
    """What the adapter remembers of a message or slash command until it is answered."""

    user_id: int
    quote: int | None = None  # the message to reply to (server channels only)
    interaction: discord.Interaction | None = None
    at: float = 0.0

    def live_interaction(self) -> discord.Interaction | None:
        """The slash command's interaction while its token still works."""
        if self.interaction is None or time.monotonic() - self.at > _INTERACTION_SECONDS:
            return None
        return self.interaction


class _Client(discord.Client):
    """discord.py's client with its events handed to the adapter."""

    def __init__(self, adapter: DiscordAdapter) -> None:
        # No voice here: without this, every start warns that the voice libraries are missing.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        super().__init__(
            intents=INTENTS,
            # The default for anything sent without its own: ping nobody.
            allowed_mentions=discord.AllowedMentions.none(),
            chunk_guilds_at_startup=False,
            # Longer rate-limit waits come back as `RateLimited`: the gateway then drops a
            # typing or stream update instead of holding every delivery behind it.
            max_ratelimit_timeout=30.0,
            guild_ready_timeout=adapter.settings.ready_timeout,
        )
        self.adapter = adapter

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter.receive_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        # Slash commands reach the adapter through the command tree; this is for buttons.
        if custom_id(interaction) is not None:
            await self.adapter.receive_press(interaction)

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        """discord.py's, which hands each event to its `on_` method in a task of its own; a
        new session is noted at once (its ready event is awaited from that moment on)."""
        if event == "connect":
            self.adapter.session_opened()
        super().dispatch(event, *args, **kwargs)

    async def on_ready(self) -> None:
        log.info("discord bot %s is connected to %d server(s)", self.user, len(self.guilds))
        self.adapter.session_ready()

    async def on_resumed(self) -> None:
        log.info("discord gateway session resumed")
        self.adapter.session_resumed()

    async def on_disconnect(self) -> None:
        self.adapter.session_lost()

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord %s handling failed", event_method)


class DiscordAdapter:
    """One Discord bot, seen as a `ChannelAdapter`."""

    def __init__(
        self,
        settings: DiscordSettings,
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
        self.settings = settings
        self._documents = documents or DocumentReader()
        self._uploads = uploads or UploadLimits()
        self._menu = tuple(menu)
        # A bot token starts with the bot's user id in base64: known without a request.
        self.bot_key = _bot_id_from_token(settings.token.get_secret_value()) or "bot"
        self.bot_id = 0
        self.commands_synced: bool | None = None
        self._client: _Client | None = None
        self._sink: InboundSink | None = None
        self._stopped = asyncio.Event()
        self._logged_in = asyncio.Event()
        self._intake = asyncio.Lock()
        self._asks: OrderedDict[str, _Ask] = OrderedDict()
        self._replies = replies
        self._typing: dict[str, TypingRenewal] = {}
        self._reactions = StatusReactions(
            "discord", _REACTIONS, enabled=settings.reactions, log=log
        )
        self._threads: set[int] = set()  # threads the bot wrote in or opened
        self._seen = SeenLog(seen, "discord")
        self._catch_up = CatchUp(settings.catch_up_hours, settings.catch_up_messages)
        self._catching_up: asyncio.Task[None] | None = None
        self._closing = False
        # Between a new gateway session and its ready event: discord.py waits for the
        # servers in a task of its own, which `close()` does not end.
        self._awaiting_ready = False
        self._read_again = False
        self.caught_up = asyncio.Event()
        """Set when the catch-up of the latest gateway session has finished."""

    @property
    def platform(self) -> str:
        return "discord"

    # --- running ---------------------------------------------------------------------------

    async def run(self, sink: InboundSink) -> None:
        """Log in, register the slash commands if they changed, and listen until `stop()`."""
        self._sink = sink
        saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
        # discord.py keeps its endpoints in class attributes: set for this run, restored after.
        Route.BASE = self.settings.api_url.rstrip("/")
        if self.settings.gateway_url:
            DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.settings.gateway_url)
        client = self._client = _Client(self)
        self._closing = False
        tree = build_tree(client, self._on_slash, self._menu)
        connecting: asyncio.Task[None] | None = None
        try:
            await self._login(client)
            await self._sync_commands(tree, client)
            self._seen.hold()  # live messages must not move marks before the catch-up
            connecting = asyncio.create_task(client.connect(reconnect=True), name="discord")
            stopping = asyncio.create_task(self._stopped.wait())
            try:
                await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await cancel_and_wait(stopping)
            if connecting.done():
                _raise_connect_error(connecting)
        finally:
            await self._shutdown(client, connecting)
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = saved

    async def stop(self) -> None:
        """Stop receiving; `run()` returns once discord.py has closed."""
        self._stopped.set()

    async def _login(self, client: _Client) -> None:
        try:
            await client.login(self.settings.token.get_secret_value())
        except discord.LoginFailure:
            raise ConfigError(
                "Discord rejected DISCORD_BOT_TOKEN (reset it under Bot in the developer portal)"
            ) from None
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise ChannelError(f"cannot reach the Discord API: {exc}") from exc
        assert client.user is not None
        self.bot_id = client.user.id
        self._logged_in.set()

    async def _sync_commands(self, tree: discord.app_commands.CommandTree, client: _Client) -> None:
        try:
            self.commands_synced = await sync_commands(tree, client)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            # The bot still answers messages; the commands are tried again at the next start.
            log.warning("could not register the discord slash commands: %s", exc)

    async def _shutdown(self, client: _Client, connecting: asyncio.Task[None] | None) -> None:
        # No catch-up starts from here on; messages waiting for one that will not come are
        # left for the next start's.
        self._closing = True
        if self._awaiting_ready:
            # Let discord.py's wait for the servers end (at most about `ready_timeout` after
            # the last one arrived) rather than leave its task running past close().
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(client.wait_until_ready(), self.settings.ready_timeout + 1)
        # Awaited: a renewal may be inside a query of the reply records, whose database is
        # closed once the adapters have stopped (channels/typing.py).
        await stop_renewals(self._typing.values())
        self._typing.clear()
        if self._catching_up is not None:
            await cancel_and_wait(self._catching_up)
        await self._seen.flush()
        self.caught_up.set()
        await client.close()
        if connecting is not None:
            with contextlib.suppress(Exception):  # the error, if any, was raised already
                await cancel_and_wait(connecting)
        self._logged_in.clear()

    # --- receiving -------------------------------------------------------------------------

    async def receive_message(self, message: discord.Message) -> None:
        """A message discord.py received: to the bus, in the order the gateway sent them."""
        if self._catches_up:
            # What was missed comes first: a conversation stays in order across a restart.
            await self.caught_up.wait()
            if self._closing:
                return
        # The lock is taken before anything else is awaited: messages reach the bus in the
        # order the gateway sent them, even when one waits for its images.
        async with self._intake:
            inbound = await self._inbound(message)
            if inbound is not None:
                assert self._sink is not None
                await self._sink(inbound)
                self._note_seen(message)

    def _note_seen(self, message: discord.Message) -> None:
        """Catch-up after downtime starts after the newest message handed over."""
        channel_id = getattr(message.channel, "id", None)
        if channel_id is not None:
            at = message.created_at
            self._seen.note(str(self.bot_id), str(channel_id), str(message.id), message.id, at)

    # --- catching up -----------------------------------------------------------------------

    @property
    def _catches_up(self) -> bool:
        return self._catch_up.enabled and self._seen.durable

    def session_opened(self) -> None:
        """A new gateway session: its ready event follows once the servers arrived."""
        self._awaiting_ready = True

    def session_lost(self) -> None:
        """The gateway connection dropped. Until a resume (Discord replays what was missed)
        or a catch-up, hold marks back and live messages too."""
        if self._catches_up:
            self._seen.hold()
            self.caught_up.clear()

    def session_resumed(self) -> None:
        """Discord sends what a resumed session missed: no catch-up."""
        if self._catching_up is None or self._catching_up.done():
            self._seen.end_catch_up(complete=True)
            self.caught_up.set()

    def session_ready(self) -> None:
        """A new gateway session is ready: read what was missed, in the background (a resumed
        one gets the missed events from Discord itself)."""
        self._awaiting_ready = False
        if self._closing:
            return
        if self._catching_up is not None and not self._catching_up.done():
            self._read_again = True  # a new session while reading: what it missed too
            return
        self.caught_up.clear()
        self._catching_up = asyncio.create_task(self._catch_up_all(), name="discord-catch-up")

    async def _catch_up_all(self) -> None:
        complete = False
        try:
            self._read_again = self._catches_up
            while self._read_again:
                self._read_again = False
                marks = await self._seen.begin_catch_up(str(self.bot_id))
                await self._catch_up_from(marks)
            complete = True
        except Exception:
            log.exception("discord catch-up failed")
        finally:
            self._seen.end_catch_up(complete=complete)
            self.caught_up.set()

    async def _catch_up_from(self, marks: list[LastSeen]) -> None:
        assert self._client is not None
        if not marks:
            return  # the first start: nothing was missed
        now = discord.utils.utcnow()
        floor = discord.utils.time_snowflake(self._catch_up.since(now))
        # A conversation without a mark had nothing to hand over while the bot last ran: what
        # it holds after the bot's newest mark was sent while the bot was away.
        starts = {int(mark.chat): max(mark.position, floor) for mark in marks}
        alive_until = max(max(mark.position for mark in marks), floor)
        for channel in self._readable_channels():
            starts.setdefault(channel.id, alive_until)
        total = 0
        for channel_id, after in starts.items():
            total += await self._catch_up_in(channel_id, after, now)
        if total:
            log.info("discord catch-up handed over %d missed message(s)", total)

    def _readable_channels(self) -> list[discord.TextChannel]:
        """The server text channels whose history the bot may read."""
        assert self._client is not None
        found = []
        for guild in self._client.guilds:
            for channel in guild.text_channels:
                allowed = channel.permissions_for(guild.me)
                if allowed.view_channel and allowed.read_message_history:
                    found.append(channel)
        return found

    async def _catch_up_in(self, channel_id: int, after: int, now: datetime) -> int:
        """Hand over the messages of one conversation after `after`; how many."""
        assert self._client is not None
        handed = 0
        try:
            # DM channels (and threads no longer active) are not kept by discord.py: ask.
            channel = self._client.get_channel(channel_id) or await self._client.fetch_channel(
                channel_id
            )
            if not isinstance(channel, discord.TextChannel | discord.Thread | discord.DMChannel):
                return 0
            async for message in channel.history(
                after=discord.Object(id=after), limit=self._catch_up.messages, oldest_first=True
            ):
                if await self._hand_over_missed(message, now):
                    handed += 1
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.warning("could not read the history of discord channel %s: %s", channel_id, exc)
        return handed

    async def _hand_over_missed(self, message: discord.Message, now: datetime) -> bool:
        """A missed message, passed on like a live one if the bot would have answered it."""
        async with self._intake:
            inbound = await self._inbound(message)
            if inbound is None or not inbound.mentions_bot:
                return False  # read, not answered: not worth a turn now
            inbound = with_late_note(inbound, message.created_at, now)
            assert self._sink is not None
            await self._sink(inbound)
            self._note_seen(message)
            return True

    async def _inbound(self, message: discord.Message) -> Inbound | None:
        author = message.author
        if author.bot or message.webhook_id is not None or message.type not in _ANSWERED_TYPES:
            return None
        is_direct = message.guild is None
        chat, thread = _place(message.channel)
        addressed = is_direct or self._mentioned(message) or self._replied_to(message)
        if thread is not None and self._takes_part(message.channel):
            addressed = True
        text = self._readable(message)
        quote: int | None = None if is_direct else message.id
        if addressed and not is_direct and thread is None and self.settings.reply_in_thread:
            thread = await self._open_thread(message, text)
            if thread is not None:
                quote = None  # the thread starts at the message
        received = await self._images(message)
        documents = await self._read_documents(message)
        inbound = Inbound(
            kind="message",
            address=self._address(chat, thread),
            user_id=str(author.id),
            user_name=author.display_name,
            text=received.text_with_note(text),
            images=received.images,
            documents=documents.documents,
            transcriptions=documents.transcriptions,
            is_direct=is_direct,
            mentions_bot=addressed,
            team=str(message.guild.id) if message.guild else None,
            platform_message_id=str(message.id),
        )
        self._remember(inbound.id, _Ask(author.id, quote=quote))
        return inbound

    async def _on_slash(
        self, interaction: discord.Interaction, command: str | None, text: str
    ) -> None:
        try:
            await interaction.response.defer(thinking=True)
        except discord.HTTPException as exc:
            # Already acknowledged (the gateway sent it again) or expired: nothing to answer.
            log.info("could not acknowledge discord interaction %s: %s", interaction.id, exc)
            return
        chat, thread = _place(interaction.channel)
        if thread is not None:
            self._threads.add(thread)
        inbound = Inbound(
            kind="command" if command else "message",
            command=command,
            address=self._address(chat or interaction.channel_id or 0, thread),
            user_id=str(interaction.user.id),
            user_name=interaction.user.display_name,
            text=text,
            is_direct=interaction.guild_id is None,
            mentions_bot=True,
            team=str(interaction.guild_id) if interaction.guild_id else None,
            platform_message_id=str(interaction.id),
        )
        ask = _Ask(interaction.user.id, interaction=interaction, at=time.monotonic())
        self._remember(inbound.id, ask)
        async with self._intake:
            assert self._sink is not None
            await self._sink(inbound)

    async def receive_press(self, interaction: discord.Interaction) -> None:
        """A confirmation or Stop button was pressed: acknowledge it at once (Discord wants an
        answer within 3 s; the message changes when the waiting turn has decided, or the
        stopped one has ended), then hand the answer or stop request over."""
        chat, thread = _place(interaction.channel)
        address = self._address(chat or interaction.channel_id or 0, thread)
        inbound = press_inbound(interaction, address)
        if inbound is None:
            return
        try:
            await interaction.response.defer()
        except discord.HTTPException as exc:
            log.info("could not acknowledge discord interaction %s: %s", interaction.id, exc)
            return
        async with self._intake:
            assert self._sink is not None
            await self._sink(inbound)

    def _address(self, chat: int, thread: int | None) -> Address:
        return Address(
            platform="discord",
            bot=str(self.bot_id),
            chat=str(chat),
            thread=str(thread) if thread is not None else None,
        )

    def _mentioned(self, message: discord.Message) -> bool:
        if any(user.id == self.bot_id for user in message.mentions):
            return True
        role = message.guild.self_role if message.guild else None
        return role is not None and role in message.role_mentions

    def _replied_to(self, message: discord.Message) -> bool:
        reference = message.reference
        if reference is None:
            return False
        quoted = reference.resolved or reference.cached_message
        return isinstance(quoted, discord.Message) and quoted.author.id == self.bot_id

    def _takes_part(self, channel: object) -> bool:
        """A thread the bot opened, was added to, or has written in."""
        if not isinstance(channel, discord.Thread):
            return False
        return (
            channel.id in self._threads or channel.owner_id == self.bot_id or channel.me is not None
        )

    def _readable(self, message: discord.Message) -> str:
        """The text without the bot's own mention; other mentions by name."""
        text = re.sub(rf"<@!?{self.bot_id}>", "", message.content)
        role = message.guild.self_role if message.guild else None
        if role is not None:
            text = text.replace(role.mention, "")
        for user in message.mentions:
            text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
        for mentioned in message.role_mentions:
            text = text.replace(mentioned.mention, f"@{mentioned.name}")
        for channel in message.channel_mentions:
            text = text.replace(channel.mention, f"#{channel.name}")
        return text.strip()

    async def _images(self, message: discord.Message) -> ReceivedImages:
        received = ReceivedImages()
        for attachment in message.attachments:
            media_type = (attachment.content_type or "").split(";")[0].strip().lower()
            if media_type not in _IMAGE_TYPES or len(received.images) >= _MAX_IMAGES:
                continue
            if attachment.size > _MAX_IMAGE_BYTES:
                log.info("not reading a %d-byte image", attachment.size)
                received.add(None)
                continue
            try:
                data = await attachment.read()
            except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                log.warning("could not download an image: %s", exc)
                received.add(None)
                continue
            received.add(ImagePart(media_type=media_type, data=data))
        return received

    async def _read_documents(self, message: discord.Message) -> ReceivedDocuments:
        """The attachments that are not images, as the model reads them."""
        received = self._documents.received()
        for attachment in message.attachments:
            media_type = (attachment.content_type or "").split(";")[0].strip().lower()
            if media_type in _IMAGE_TYPES:
                continue

            async def download(attachment: discord.Attachment = attachment) -> bytes | None:
                try:
                    return await attachment.read()
                except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                    log.warning("could not download an attachment: %s", exc)
                    return None

            # A voice message says how long it is.
            await received.add(
                attachment.filename,
                media_type,
                attachment.size,
                download,
                duration=attachment.duration,
            )
        return received

    async def _open_thread(self, message: discord.Message, text: str) -> int | None:
        """A thread started on `message` for the answer; None if Discord would not."""
        name = " ".join(text.split())[:90] or f"Question from {message.author.display_name}"
        try:
            thread = await message.create_thread(name=name, auto_archive_duration=1440)
        except discord.HTTPException as exc:
            if exc.code == _THREAD_EXISTS:  # the same message again: its thread has its id
                return message.id
            log.warning("could not open a thread for a discord message: %s", exc)
            return None
        self._threads.add(thread.id)
        return thread.id

    def _remember(self, inbound_id: str, ask: _Ask) -> None:
        self._asks[inbound_id] = ask
        while len(self._asks) > _REMEMBERED_ASKS:
            self._asks.popitem(last=False)

    # --- delivering ------------------------------------------------------------------------

    async def deliver(self, outbound: Outbound) -> None:
        """Show typing, stream pieces and final answers in their channel."""
        await self._logged_in.wait()
        key = outbound.reply_to or outbound.id
        match outbound.kind:
            case "typing":
                ask = self._asks.get(key)
                if ask is None or ask.live_interaction() is None:  # "thinking…" shows already
                    await self._start_typing(outbound.address, outbound.record_key)
                await self._react(outbound)
            case "progress":
                pass  # not queued for Discord (the worker's stream policy); typing shows work
            case "delta":
                await self._replies.show(outbound, self._reply_for)
            case "reply" | "notice" | "notification" | "question":
                self._stop_typing(outbound.address)
                await self._replies.show(outbound, self._reply_for)
                await self._react(outbound)
                self._asks.pop(key, None)
            case "decision":
                await self._decide(outbound)
            case "file":
                await self._send_files(outbound)

    async def _send_files(self, outbound: Outbound) -> None:
        """Each file as a message's attachment (`discord.File`); one over the limit or refused
        becomes a line saying so."""
        assert self._client is not None
        address = outbound.address
        channel = self._client.get_partial_messageable(int(address.thread or address.chat))
        nobody = discord.AllowedMentions.none()

        async def upload(attachment: Attachment, caption: str) -> None:
            file = discord.File(io.BytesIO(attachment.data), filename=attachment.name)
            content = discord_chunks(caption)[0] if caption.strip() else None
            await _translate(channel.send(content, file=file, allowed_mentions=nobody))

        async def note(line: str) -> None:
            await _translate(channel.send(line, allowed_mentions=nobody))

        await upload_each(outbound, self._uploads, upload, note)

    async def _decide(self, outbound: Outbound) -> None:
        """Show a confirmation's decision in place of its question, its buttons taken away;
        sent anew if the question was never shown."""
        assert self._client is not None
        address = outbound.address
        channel = self._client.get_partial_messageable(int(address.thread or address.chat))
        shown = await self._replies.messages(f"question:{outbound.question}")
        text = discord_chunks(outbound.text)[0]
        nobody = discord.AllowedMentions.none()
        if shown:
            partial = channel.get_partial_message(int(shown[0]))
            await _translate(partial.edit(content=text, view=None, allowed_mentions=nobody))
        else:
            await _translate(channel.send(text, allowed_mentions=nobody))

    def _reply_for(self, outbound: Outbound) -> ReplyTarget:
        ask = self._asks.get(outbound.reply_to) if outbound.reply_to else None
        # Only the asker may be pinged, by the reply itself or by a mention the model wrote.
        mentions = discord.AllowedMentions(
            everyone=False,
            roles=False,
            users=[discord.Object(ask.user_id)] if ask else False,
            replied_user=True,
        )
        interaction = ask.live_interaction() if ask else None
        # An answer being written carries a Stop button; the final text's edit takes it away.
        streaming = outbound.kind == "delta"
        if interaction is not None:
            send, edit = _interaction_calls(interaction, mentions, stop=streaming)
        else:
            key = outbound.reply_to or outbound.id
            send, edit = self._channel_calls(
                outbound.address, key, ask, mentions, question=outbound.question, stop=streaming
            )
        return ReplyTarget(
            send=send,
            edit=edit,
            render=discord_chunks,
            part_size=DISCORD_LIMIT,
            controls="stop" if streaming else "",
        )

    def _channel_calls(
        self,
        address: Address,
        key: str,
        ask: _Ask | None,
        mentions: discord.AllowedMentions,
        *,
        question: str | None = None,
        stop: bool = False,
    ) -> tuple[_Send, _Edit]:
        """Send and edit in a channel; a confirmation `question` gets its buttons on its first
        message; with `stop`, every message gets the Stop button (without, an edit takes it
        away)."""
        assert self._client is not None
        target = int(address.thread or address.chat)
        channel = self._client.get_partial_messageable(target)
        quoted = ask.quote if ask else None

        async def send(index: int, chunk: str) -> str:
            # The same nonce for the same message of the same answer: Discord creates it once,
            # however often it is sent (a retry after a lost response, another gateway taking
            # over a half-shown answer) and returns the one it has.
            nonce = _nonce(key, index)
            quote = quoted if index == 0 else None  # only the first message quotes the question
            if question is not None and index == 0:
                view = question_view(question)
                sending = channel.send(chunk, allowed_mentions=mentions, nonce=nonce, view=view)
            elif quote is None:
                sending = channel.send(
                    chunk, allowed_mentions=mentions, nonce=nonce, **_with_stop(stop)
                )
            else:
                reference = discord.MessageReference(
                    message_id=quote, channel_id=target, fail_if_not_exists=False
                )
                sending = channel.send(
                    chunk,
                    allowed_mentions=mentions,
                    reference=reference,
                    nonce=nonce,
                    **_with_stop(stop),
                )
            message = await _translate(sending)
            if message.content != chunk:  # the one sent before shows an earlier text
                # (A question's buttons stay; an answer's Stop button comes or goes.)
                if question is not None and index == 0:
                    fixing = message.edit(content=chunk, allowed_mentions=mentions)
                else:
                    fixing = message.edit(
                        content=chunk, allowed_mentions=mentions, view=_stop_or_none(stop)
                    )
                await _translate(fixing)
            if address.thread:
                self._threads.add(target)
            return str(message.id)

        async def edit(message_id: str, chunk: str) -> None:
            partial = channel.get_partial_message(int(message_id))
            await _translate(
                partial.edit(content=chunk, allowed_mentions=mentions, view=_stop_or_none(stop))
            )

        return send, edit

    async def _react(self, outbound: Outbound) -> None:
        """Change the status reaction on the question as `outbound` calls for; a refusal is
        logged, never raised. A slash command has no message to react on."""
        step = self._reactions.step(outbound)
        ask = self._asks.get(outbound.reply_to or outbound.id)
        if step is None or (ask is not None and ask.interaction is not None):
            return
        if step.status == "taken" and await self._replies.finished(outbound.record_key):
            return  # answered already (by another gateway): the answered reaction stays
        assert self._client is not None and self._client.user is not None
        address = outbound.address
        # A thread opened from the message has the message's id; the message is in its parent.
        where = address.chat if address.thread in (None, step.message) else address.thread
        channel = self._client.get_partial_messageable(int(where))
        message = channel.get_partial_message(int(step.message))
        try:
            if step.remove is not None:
                await message.remove_reaction(step.remove, self._client.user)
            if step.add is not None:
                await message.add_reaction(step.add)
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            self._reactions.refused(step, exc)

    async def _start_typing(self, address: Address, reply: str) -> None:
        key = address.session_key
        if key in self._typing and not self._typing[key].done():
            return
        assert self._client is not None
        channel = self._client.get_partial_messageable(int(address.thread or address.chat))
        # The first indicator before anything else is delivered; renewals in the background.
        await self._typing_once(channel)
        self._typing[key] = TypingRenewal(
            lambda: self._typing_once(channel),
            lambda: self._replies.finished(reply),
            interval=self.settings.typing_interval,
            limit=_MAX_TYPING_SECONDS,
            wait_first=True,
        )

    def _stop_typing(self, address: Address) -> None:
        renewal = self._typing.pop(address.session_key, None)
        if renewal is not None:
            renewal.stop()

    async def _typing_once(self, channel: discord.PartialMessageable) -> None:
        with contextlib.suppress(discord.HTTPException, aiohttp.ClientError, OSError):
            await channel.typing()


def _interaction_calls(
    interaction: discord.Interaction, mentions: discord.AllowedMentions, *, stop: bool = False
) -> tuple[_Send, _Edit]:
    """Send and edit for a slash command's answer: its deferred response first, then
    follow-up messages for what does not fit; with `stop`, each carries the Stop button
    (without, an edit takes it away)."""
    original = "@original"

    async def send(index: int, chunk: str) -> str:
        if index == 0:
            await _translate(
                interaction.edit_original_response(
                    content=chunk, allowed_mentions=mentions, view=_stop_or_none(stop)
                )
            )
            return original
        message = await _translate(
            interaction.followup.send(
                chunk, allowed_mentions=mentions, wait=True, **_with_stop(stop)
            )
        )
        return str(message.id)

    async def edit(message_id: str, chunk: str) -> None:
        if message_id == original:
            await _translate(
                interaction.edit_original_response(
                    content=chunk, allowed_mentions=mentions, view=_stop_or_none(stop)
                )
            )
        else:
            await _translate(
                interaction.followup.edit_message(
                    int(message_id),
                    content=chunk,
                    allowed_mentions=mentions,
                    view=_stop_or_none(stop),
                )
            )

    return send, edit


def _stop_or_none(stop: bool) -> discord.ui.View | None:
    """The Stop button for an edit, or None, which takes any button away."""
    return stop_view() if stop else None


def _with_stop(stop: bool) -> dict[str, Any]:
    """The Stop button for a send, if it gets one."""
    return {"view": stop_view()} if stop else {}


def _place(channel: object) -> tuple[int, int | None]:
    """(chat, thread) of a channel: a thread counts as its parent channel plus itself."""
    if isinstance(channel, discord.Thread):
        return channel.parent_id, channel.id
    channel_id = getattr(channel, "id", None)
    return (int(channel_id) if channel_id is not None else 0), None


def _raise_connect_error(connecting: asyncio.Task[None]) -> None:
    """The error `client.connect()` ended with, in our terms (nothing if it just returned)."""
    try:
        connecting.result()
    except discord.PrivilegedIntentsRequired:
        raise ConfigError(
            "Discord refused the Message Content intent: switch it on under Bot → Privileged "
            "Gateway Intents in the developer portal"
        ) from None
    except discord.ConnectionClosed as exc:
        if exc.code == 4004:
            raise ConfigError("Discord rejected DISCORD_BOT_TOKEN at the gateway") from None
        raise ChannelError(f"the Discord gateway closed the connection ({exc.code})") from exc
    except (discord.HTTPException, discord.GatewayNotFound, aiohttp.ClientError, OSError) as exc:
        raise ChannelError(f"cannot reach the Discord gateway: {exc}") from exc


async def _translate(call: Awaitable[_T]) -> _T:
    """Await a discord.py call, turning its errors into `ChannelError`."""
    try:
        return await call
    except discord.RateLimited as exc:
        raise ChannelError(
            f"discord rate limit ({exc.retry_after:.1f}s)", retry_after=exc.retry_after
        ) from exc
    except (discord.Forbidden, discord.NotFound) as exc:
        raise ChannelError(f"discord refused: {exc.text or exc.status}", permanent=True) from exc
    except discord.HTTPException as exc:
        if exc.status == 429:  # without Discord's Via header: a block by its proxy
            raise ChannelError("discord refused with 429 (blocked?)", retry_after=60.0) from exc
        if exc.status >= 500:
            raise ChannelError(f"discord server error {exc.status}") from exc
        raise ChannelError(
            f"discord bad request: {exc.text or exc.status}", permanent=True
        ) from exc
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ChannelError(f"discord unreachable: {exc}") from exc


def _nonce(key: str, index: int) -> str:
    """A message nonce (Discord takes up to 25 characters) for piece `index` of answer `key`."""
    return hashlib.blake2b(f"{key}:{index}".encode(), digest_size=12).hexdigest()


def _bot_id_from_token(token: str) -> str | None:
    head = token.partition(".")[0]
    try:
        decoded = base64.b64decode(head + "=" * (-len(head) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return decoded if decoded.isdigit() else None
