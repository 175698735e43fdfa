"""The Discord fake speaks Discord: the real discord.py, used directly, accepts it.

Nothing from Switchboard is used here; if one of these fails after a discord.py upgrade, the
fake (not our channel code) needs fixing first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import discord
import pytest
import yarl
from discord import app_commands

from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_events import CHANNEL, GUILD, token_for
from tests.fakes.fixtures import fake_discord

# The shared fixture, named here so this module also runs without the project conftest.
SHARED_FIXTURES = (fake_discord,)

INTENTS = discord.Intents(guilds=True, guild_messages=True, dm_messages=True, message_content=True)


class Recorder(discord.Client):
    """A plain discord.py bot that keeps what it receives and answers /ping."""

    def __init__(self) -> None:
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        super().__init__(intents=INTENTS, guild_ready_timeout=0.05)
        self.received: list[discord.Message] = []
        self.arrived = asyncio.Event()
        self.ready = asyncio.Event()
        self.tree = app_commands.CommandTree(self)

        @self.tree.command(name="ping", description="Ping")
        async def ping(interaction: discord.Interaction, text: str) -> None:
            await interaction.response.defer(thinking=True)
            await interaction.edit_original_response(content=f"pong: {text}")

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        self.received.append(message)
        self.arrived.set()

    async def next_message(self) -> discord.Message:
        count = len(self.received)
        async with asyncio.timeout(5):
            while len(self.received) == count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.received[count]


@pytest.fixture
async def client(
    fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Recorder]:
    """A logged-in, connected discord.py client on the fake."""
    monkeypatch.setattr(discord.http.Route, "BASE", fake_discord.api_url)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake_discord.gateway_url)
    )
    bot = Recorder()
    await bot.login(fake_discord.token)
    running = asyncio.create_task(bot.connect())
    try:
        await fake_discord.wait_ready()
        async with asyncio.timeout(5):
            await bot.ready.wait()
        yield bot
    finally:
        await bot.close()
        await running


async def test_login_identify_ready_and_guilds(client: Recorder, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    assert client.user is not None and client.user.id == fake.bot_id
    assert client.application_id == fake.application_id
    [identify] = fake.identifies
    assert identify["token"] == fake.token
    assert identify["intents"] == INTENTS.value
    assert fake.heartbeats >= 1  # discord.py beats once on HELLO; the fake acknowledges
    guild = client.get_guild(GUILD)
    assert guild is not None
    assert {channel.name for channel in guild.text_channels} == {"general", "random"}
    assert guild.default_role.id == GUILD


async def test_messages_in_and_replies_out(client: Recorder, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    fake.dm(42, "hello in private")
    private = await client.next_message()
    assert private.guild is None and isinstance(private.channel, discord.DMChannel)
    assert private.content == "hello in private" and private.author.id == 42

    fake.post(CHANNEL, "hello bot", mention=True)
    public = await client.next_message()
    assert public.guild is not None and public.guild.id == GUILD
    assert public.channel.id == CHANNEL
    assert client.user in public.mentions

    async with public.channel.typing():
        sent = await public.reply("@everyone hi <@42>", mention_author=True)
    await sent.edit(content="edited", allowed_mentions=discord.AllowedMentions.none())
    [message] = fake.messages[CHANNEL]
    assert message.content == "edited" and message.edits == 1
    assert message.reference is not None and int(message.reference["message_id"]) == public.id
    assert fake.requests_named("typing", CHANNEL)

    fake.post(CHANNEL, "and you said?", reply_to_bot=True)
    reply = await client.next_message()
    assert reply.reference is not None
    assert isinstance(reply.reference.resolved, discord.Message)
    assert reply.reference.resolved.author.id == fake.bot_id


async def test_pings_follow_allowed_mentions(client: Recorder, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    channel = client.get_partial_messageable(CHANNEL)
    loud = "@everyone <@42> <@7> <@&5>"
    await channel.send(loud, allowed_mentions=discord.AllowedMentions.all())
    await channel.send(loud, allowed_mentions=discord.AllowedMentions.none())
    only = discord.AllowedMentions(everyone=False, roles=False, users=[discord.Object(42)])
    await channel.send(loud, allowed_mentions=only)
    assert [m.pings for m in fake.messages[CHANNEL]] == [
        {"everyone", "user:42", "user:7", "role:5"},
        set(),
        {"user:42"},
    ]


async def test_errors_and_rate_limits(client: Recorder, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    channel = client.get_partial_messageable(CHANNEL)
    fake.fail_next("create_message", retry_after=0.3)
    await channel.send("after the wait")  # discord.py waits out the 429 itself and retries
    assert len(fake.requests_named("create_message")) == 2
    assert fake.sent_texts(CHANNEL) == ["after the wait"]

    fake.fail_next("create_message", via=False)  # a 429 without Via: a Cloudflare ban
    with pytest.raises(discord.HTTPException) as banned:
        await channel.send("blocked")
    assert banned.value.status == 429

    with pytest.raises(discord.HTTPException) as too_long:
        await channel.send("x" * 2001)
    assert (too_long.value.status, too_long.value.code) == (400, 50035)
    with pytest.raises(discord.NotFound):
        await client.get_partial_messageable(1).send("nowhere")


async def test_a_wrong_token_fails_login(
    fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discord.http.Route, "BASE", fake_discord.api_url)
    bot = Recorder()
    try:
        with pytest.raises(discord.LoginFailure):
            await bot.login(token_for(1))
    finally:
        await bot.close()


async def test_slash_command_deferred_then_edited(
    client: Recorder, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    assert client.application_id is not None
    await client.tree.sync()
    assert [c["name"] for c in fake.commands] == ["ping"]
    assert fake.commands[0]["options"][0]["required"] is True

    interaction = fake.slash("ping", channel_id=CHANNEL, options={"text": "hi"})
    await fake.until(lambda: any("pong" in m.content for m in fake.messages[CHANNEL]))
    [callback] = fake.requests_named("interaction_callback")
    assert callback.body == {"type": 5}
    [edit] = fake.requests_named("edit_webhook_message")
    assert edit.path.endswith(f"/{interaction['token']}/messages/@original")
    assert fake.sent_texts(CHANNEL) == ["pong: hi"]

    fake.dispatch("INTERACTION_CREATE", interaction)  # the same interaction again
    again = await fake.wait_for_request("interaction_callback", after=callback.index + 1)
    assert again.body == {"type": 5}  # refused with 40060: already acknowledged
    assert fake.sent_texts(CHANNEL) == ["pong: hi"]


async def test_resume_delivers_what_was_missed(client: Recorder, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    fake.dm(42, "before")
    await client.next_message()
    fake.drop_connection()
    fake.dm(42, "while away")  # kept for the resume
    await fake.wait_resumed()
    assert (await client.next_message()).content == "while away"
    [resume] = fake.resumes
    assert resume["token"] == fake.token and resume["session_id"]
    assert len(fake.identifies) == 1

    fake.request_reconnect(replay=1)
    await fake.wait_resumed(2)
    assert (await client.next_message()).content == "while away"  # replayed on purpose


async def test_attachments_download(client: Recorder, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    attachment = fake.add_attachment(b"\x89PNG-bytes", filename="a.png")
    fake.dm(42, "look", attachments=[attachment])
    message = await client.next_message()
    [received] = message.attachments
    assert received.content_type == "image/png"
    assert await received.read() == b"\x89PNG-bytes"
