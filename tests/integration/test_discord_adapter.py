"""The Discord channel end to end in one process: the real discord.py, our adapter, gateway and
worker, against the Discord fake (gateway websocket and REST).

Negatives ("no reply") are shown with a later message in the same conversation: one session
is answered in arrival order, so once the later message's answer is there the earlier message
was handled, and whatever it produced would already be there too.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
from collections.abc import Iterator

import pytest
from discord.gateway import DiscordWebSocket
from discord.http import Route
from pydantic import SecretStr

from bots.logs import configure_logging
from bots.platforms import REGISTERED
from channels.discord.adapter import INTENTS, DiscordAdapter, DiscordSettings
from channels.discord.format import DISCORD_LIMIT
from channels.streaming import IncrementalRender, ReplyStreams
from core.backends.sql.store import SqlStore
from core.bus.names import outbound_queue
from core.envelopes import Address, Outbound
from core.errors import ConfigError
from core.messages import Message
from core.modes import SAFE_CHAT_TOOLS
from core.policy import AllowList, ChannelPolicy
from core.providers.demo import DemoProvider
from core.providers.scripted import ScriptedProvider, text_reply
from core.redact import Redactor
from core.store.replies import MemoryReplyRecords
from core.turns import REFUSAL_TEXT
from tests.fakes.discord_api import FakeDiscord, Request
from tests.fakes.discord_events import CHANNEL, GUILD, OTHER_CHANNEL, token_for
from tests.integration.discord_helpers import (
    MENU,
    code_blocks,
    fences_balanced,
    reply_containing,
    serving,
)
from tests.integration.serving import PATIENCE
from tests.integration.telegram_helpers import PacedProvider

ALICE = 42
BOB = 43


def scripted(*answers: str) -> ScriptedProvider:
    """A provider answering each call with the next text."""
    return ScriptedProvider([text_reply(answer) for answer in answers])


def last_user_message(provider: ScriptedProvider, call: int = -1) -> Message:
    return provider.requests[call].messages[-1]


def bot_key(fake: FakeDiscord) -> str:
    return f"discord:{fake.bot_id}"


# --- direct messages -----------------------------------------------------------------------


async def test_a_dm_is_answered_after_typing(fake_discord: FakeDiscord, store: SqlStore) -> None:
    fake = fake_discord
    async with serving(fake, store, DemoProvider()):
        fake.dm(ALICE, "what is 6*7?")
        dm = fake.dm_channel_id(ALICE)
        reply = await reply_containing(fake, dm, "worked out with the calculator")

    assert fake.sent_texts(dm) == [reply.content]
    assert "42" in reply.content
    [identify] = fake.identifies
    assert identify["intents"] == INTENTS.value
    assert not INTENTS.members and not INTENTS.presences  # privileged ones we do not need
    typing = fake.requests_named("typing", dm)
    assert typing and typing[0].index < fake.requests_named("create_message", dm)[0].index
    # In a DM nothing is quoted; one session for the DM channel.
    assert reply.reference is None
    assert [s.key for s in await store.list_sessions()] == [f"{bot_key(fake)}:{dm}"]


# --- servers -------------------------------------------------------------------------------


async def test_a_server_message_is_answered_only_when_the_bot_is_mentioned(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = scripted("hello Alice")
    async with serving(fake, store, provider):
        fake.post(CHANNEL, "just chatting among us", user_id=ALICE)
        asked = fake.post(CHANNEL, "are you there?", user_id=ALICE, mention=True)
        reply = await reply_containing(fake, CHANNEL, "hello Alice")

    assert fake.sent_texts(CHANNEL) == ["hello Alice"]
    assert last_user_message(provider).text == "are you there?"  # without the mention
    assert reply.reference is not None and str(reply.reference["message_id"]) == asked["id"]
    assert reply.pings == {f"user:{ALICE}"}  # the reply pings the asker, nobody else
    request = provider.requests[0]
    assert "Discord" in request.system  # the Discord prompt hint and capability mode
    offered = {t.name for t in request.tools}  # the `discord` mode: harmless tools only
    assert "calculator" in offered and offered <= SAFE_CHAT_TOOLS


async def test_a_reply_to_the_bot_is_answered(fake_discord: FakeDiscord, store: SqlStore) -> None:
    fake = fake_discord
    async with serving(fake, store, DemoProvider()):
        fake.post(CHANNEL, "hello bot", user_id=ALICE, mention=True)
        await reply_containing(fake, CHANNEL, "You said: hello bot")
        fake.post(CHANNEL, "and one more thing", user_id=BOB, reply_to_bot=True)
        await reply_containing(fake, CHANNEL, "You said: and one more thing")

    assert len(fake.sent_texts(CHANNEL)) == 2


async def test_threads_the_bot_takes_part_in_are_answered_each_in_its_own_session(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    async with serving(fake, store, DemoProvider()):
        joined = int(fake.start_thread(CHANNEL, "planning")["id"])
        other = int(fake.start_thread(CHANNEL, "gossip")["id"])
        fake.post(joined, "help us plan", mention=True)
        await reply_containing(fake, joined, "You said: help us plan")
        fake.post(other, "not for the bot")
        fake.post(joined, "and the budget?")  # no mention: the bot takes part here
        await reply_containing(fake, joined, "You said: and the budget?")
        fake.post(other, "still not for the bot")
        fake.post(other, "now you", mention=True)
        await reply_containing(fake, other, "You said: now you")

    assert len(fake.sent_texts(joined)) == 2
    assert fake.sent_texts(other) == [fake.messages[other][0].content]
    assert "now you" in fake.sent_texts(other)[0]
    assert fake.sent_texts(CHANNEL) == []
    keys = sorted(s.key for s in await store.list_sessions())
    prefix = bot_key(fake)
    assert keys == sorted([f"{prefix}:{CHANNEL}:{joined}", f"{prefix}:{CHANNEL}:{other}"])


async def test_reply_in_thread_answers_a_mention_in_a_new_thread(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    async with serving(fake, store, DemoProvider(), reply_in_thread=True):
        asked = fake.post(CHANNEL, "plan the offsite", user_id=ALICE, mention=True)
        thread = int(asked["id"])  # a thread started on a message has the message's id
        await reply_containing(fake, thread, "You said: plan the offsite")
        fake.post(thread, "with a budget of 42")
        await reply_containing(fake, thread, "You said: with a budget of 42")
        fake.post(CHANNEL, "unrelated chat")
        elsewhere = int(fake.post(OTHER_CHANNEL, "elsewhere", mention=True)["id"])
        await reply_containing(fake, elsewhere, "You said: elsewhere")

    assert fake.threads_created == [thread, elsewhere]
    [create] = fake.requests_named("create_thread", CHANNEL)
    assert create.body["name"] == "plan the offsite"
    assert fake.sent_texts(CHANNEL) == []  # everything went into threads
    assert fake.messages[thread][0].reference is None  # the thread starts at the question
    sessions = [s.key for s in await store.list_sessions()]
    assert sessions.count(f"{bot_key(fake)}:{CHANNEL}:{thread}") == 1
    assert f"{bot_key(fake)}:{CHANNEL}" not in sessions


async def test_messages_of_bots_and_of_the_bot_itself_are_ignored(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = scripted("only for the human")
    async with serving(fake, store, provider):
        fake.post(CHANNEL, "beep, I am a bot", user_id=900, mention=True, bot=True)
        fake.post(CHANNEL, "echo", user_id=fake.bot_id, mention=True, bot=True)
        fake.post(CHANNEL, "hello", user_id=ALICE, mention=True)
        await reply_containing(fake, CHANNEL, "only for the human")

    assert len(provider.requests) == 1
    assert fake.sent_texts(CHANNEL) == ["only for the human"]


# --- what is sent --------------------------------------------------------------------------


async def test_model_output_pings_nobody_but_the_asker(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    loud = f"@everyone @here <@&{GUILD}> <@{BOB}> and you, <@{ALICE}>"
    async with serving(fake, store, scripted(loud, loud)):
        fake.post(CHANNEL, "shout", user_id=ALICE, mention=True)
        fake.dm(BOB, "shout")
        in_channel = await reply_containing(fake, CHANNEL, "@everyone")
        in_dm = await reply_containing(fake, fake.dm_channel_id(BOB), "@everyone")

    assert in_channel.pings == {f"user:{ALICE}"}
    assert in_dm.pings == {f"user:{BOB}"}
    for request in fake.requests_named("create_message"):
        allowed = request.body["allowed_mentions"]
        assert allowed["parse"] == []  # no @everyone / @here, no roles, no users by default
        assert "roles" not in allowed or allowed["roles"] == []
        assert [int(u) for u in allowed["users"]] in ([ALICE], [BOB])


async def test_a_long_answer_is_split_with_balanced_code_fences(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    code = "\n".join(f"def step_{n:03d}(x):\n    return x * {n}  # `{n}`" for n in range(130))
    prose = "\n\n".join(f"Paragraph {n}: " + "words and more words. " * 12 for n in range(16))
    markdown = f"{prose}\n\n```python\n{code}\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nThe end."
    assert 9_000 <= len(markdown) <= 11_000
    async with serving(fake, store, scripted(markdown)):
        fake.dm(ALICE, "explain everything")
        dm = fake.dm_channel_id(ALICE)
        await reply_containing(fake, dm, "The end.")

    texts = fake.sent_texts(dm)
    assert len(texts) >= 5, [len(t) for t in texts]
    assert all(len(text) <= DISCORD_LIMIT for text in texts)
    assert all(fences_balanced(text) for text in texts)
    blocks = code_blocks(texts)
    assert "\n".join(blocks[:-1]) == code  # cut only at line ends, re-opened as python
    assert blocks[-1].startswith("a | b")  # the table, as a code block


async def test_a_streamed_answer_is_sent_then_edited_piece_by_piece(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    pieces = ["Alpha. ", "Beta. ", "Gamma. ", "Delta."]
    provider = PacedProvider(pieces)

    def arrived(request: Request, wanted: str) -> bool:
        return wanted in request.body["content"]

    async with serving(fake, store, provider, stream_interval=0.3):
        fake.dm(ALICE, "tell me slowly")
        dm = fake.dm_channel_id(ALICE)
        sent = await fake.wait_for_request("create_message", lambda r: arrived(r, "Alpha."))
        after = sent.index + 1
        for gate, piece in zip(provider.gates, pieces[1:], strict=False):
            gate.set()
            edit = await fake.wait_for_request(
                "edit_message", functools.partial(arrived, wanted=piece.strip()), after=after
            )
            after = edit.index + 1
        provider.gates[-1].set()
        fake.dm(ALICE, "and now?")  # answered after the streamed reply was finished
        await fake.until(lambda: len(fake.sent_texts(dm)) == 2, "the second answer")

    final = "Alpha. Beta. Gamma. Delta."
    assert fake.sent_texts(dm)[0] == final
    edits = fake.requests_named("edit_message", dm)
    # The last edit only takes the Stop button away.
    texts = ["Alpha. Beta.", "Alpha. Beta. Gamma.", final, final]
    assert [r.body["content"] for r in edits] == texts
    assert [bool(r.body["components"]) for r in edits] == [True, True, True, False]
    assert all(r.body["allowed_mentions"]["parse"] == [] for r in edits)


async def test_a_rate_limited_reply_waits_and_arrives_once(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    fake.fail_next("create_message", retry_after=0.3)
    async with serving(fake, store, scripted("worth the wait")):
        fake.dm(ALICE, "hello")
        dm = fake.dm_channel_id(ALICE)
        await reply_containing(fake, dm, "worth the wait")

    assert fake.sent_texts(dm) == ["worth the wait"]
    refused, delivered = fake.requests_named("create_message", dm)
    assert refused.body["content"] == delivered.body["content"] == "worth the wait"


async def test_an_image_reaches_the_model_as_an_image_and_other_files_as_text_or_notes(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    image = fake.add_attachment(png, filename="chart.png", content_type="image/png")
    notes = fake.add_attachment(b"plain", filename="notes.txt", content_type="text/plain")
    vector = fake.add_attachment(b"<svg/>", filename="logo.svg", content_type="image/svg+xml")
    provider = scripted("A chart.")
    async with serving(fake, store, provider):
        fake.post(CHANNEL, "what is this?", mention=True, attachments=[image, notes, vector])
        await reply_containing(fake, CHANNEL, "A chart.")

    message = last_user_message(provider)
    assert message.text.startswith("what is this?\n\n[The file notes.txt, which the person sent.")
    assert '"I cannot read logo.svg: I read PDF' in message.text
    [received] = message.images
    assert (received.media_type, received.data) == ("image/png", png)
    assert sorted(fake.downloads) == sorted(a["url"].split("/", 3)[3] for a in (image, notes))


async def test_typing_is_renewed_while_a_turn_runs(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = PacedProvider(["Thought about it."])
    async with serving(fake, store, provider, typing_interval=0.05, stream_interval=0.0):
        fake.dm(ALICE, "think hard")
        dm = fake.dm_channel_id(ALICE)
        await fake.until(lambda: len(fake.requests_named("typing", dm)) >= 3, "typing renewals")
        provider.gates[-1].set()
        await reply_containing(fake, dm, "Thought about it.")

    assert fake.sent_texts(dm) == ["Thought about it."]


async def test_a_scheduled_notification_reaches_its_channel_and_pings_nobody(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    async with serving(fake, store, DemoProvider()) as bot:
        await bot.bus.enqueue(
            outbound_queue("discord"),
            Outbound(
                kind="notification",
                address=Address.parse(f"discord:{CHANNEL}"),
                text="Reminder: stand-up, @everyone",
            ),
        )
        reminder = await reply_containing(fake, CHANNEL, "Reminder: stand-up")

    assert reminder.pings == set()
    assert reminder.reference is None


# --- slash commands ------------------------------------------------------------------------


async def test_slash_commands_are_deferred_then_answered_by_editing_the_response(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = scripted("Because of 42.", "x " * 1500)
    async with serving(fake, store, provider):
        assert [c["name"] for c in fake.commands] == [
            "ask",
            "new",
            "cost",
            "stop",
            "model",
            "help",
            "schedules",
            "unschedule",
            "compact",
            "fork",
            "sessions",
            "switch",
            "forgetme",
        ]
        ask = fake.slash("ask", channel_id=CHANNEL, user_id=ALICE, options={"question": "why?"})
        await reply_containing(fake, CHANNEL, "Because of 42.")
        key = f"{bot_key(fake)}:{CHANNEL}"
        first = await store.current_session(key)
        fake.slash("new", channel_id=CHANNEL, user_id=ALICE)
        await reply_containing(fake, CHANNEL, "Started a new conversation.")
        fake.slash("cost", channel_id=CHANNEL, user_id=ALICE)
        await reply_containing(fake, CHANNEL, "This conversation has cost")
        fake.slash("ask", user_id=BOB, options={"question": "a long one in private"})
        dm = fake.dm_channel_id(BOB)
        await fake.until(lambda: len(fake.sent_texts(dm)) == 2, "the long answer")

    assert last_user_message(provider, 0).text == "why?"
    assert (await store.current_session(key)).id != first.id
    callbacks = fake.requests_named("interaction_callback")
    assert [r.body["type"] for r in callbacks] == [5, 5, 5, 5]  # deferred, "thinking…"
    [answer] = [m for m in fake.messages[CHANNEL] if m.interaction_id == int(ask["id"])]
    # Shown streaming (with the Stop button), then final (without it).
    assert answer.content == "Because of 42." and answer.edits == 2
    assert answer.components is None
    assert fake.requests_named("create_message", CHANNEL) == []  # only edits of responses
    assert fake.requests_named("typing") == []  # "thinking…" instead
    # Past 2,000 characters: the deferred response, then a follow-up message.
    assert [m.loading for m in fake.messages[dm]] == [False, False]
    assert len(fake.requests_named("create_followup")) == 1
    assert all(len(text) <= DISCORD_LIMIT for text in fake.sent_texts(dm))


async def test_slash_commands_are_registered_only_when_they_changed(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    async with serving(fake, store, DemoProvider()) as first:
        assert first.adapter.commands_synced is True
    ids = [c["id"] for c in fake.commands]
    async with serving(fake, store, DemoProvider()) as second:
        assert second.adapter.commands_synced is False
    assert len(fake.requests_named("put_commands")) == 1
    assert [c["id"] for c in fake.commands] == ids

    fake.commands[0]["description"] = "an older description"
    async with serving(fake, store, DemoProvider()) as third:
        assert third.adapter.commands_synced is True
    assert len(fake.requests_named("put_commands")) == 2
    assert fake.commands[0]["description"] == "Ask the bot a question"


# --- duplicates ----------------------------------------------------------------------------


async def test_a_resume_or_reconnect_never_answers_a_message_twice(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = scripted("first answer", "second answer", "third answer")
    async with serving(fake, store, provider):
        fake.dm(ALICE, "hello")
        dm = fake.dm_channel_id(ALICE)
        await reply_containing(fake, dm, "first answer")
        fake.request_reconnect(replay=1)  # "hello" comes again on the resume
        await fake.wait_resumed(1)
        fake.dm(ALICE, "and again")
        await reply_containing(fake, dm, "second answer")

        fake.drop_connection(replay=2)  # both come again, plus what was sent meanwhile
        fake.dm(ALICE, "while you were away")
        await fake.wait_resumed(2)
        await reply_containing(fake, dm, "third answer")
        fake.slash("new", user_id=ALICE)  # commands need no model: shows all was handled
        await reply_containing(fake, dm, "Started a new conversation.")

    assert fake.sent_texts(dm) == [
        "first answer",
        "second answer",
        "third answer",
        "Started a new conversation.",
    ]
    assert [m.text for m in provider.requests[-1].messages if m.role == "user"] == [
        "hello",
        "and again",
        "while you were away",
    ]
    assert len(fake.identifies) == 1  # resumed, never identified again


async def test_a_replayed_slash_command_is_answered_once(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = scripted("once", "next")
    async with serving(fake, store, provider):
        fake.slash("ask", channel_id=CHANNEL, options={"question": "one?"})
        await reply_containing(fake, CHANNEL, "once")
        fake.request_reconnect(replay=1)
        await fake.wait_resumed()
        await fake.wait_for_request(
            "interaction_callback", after=fake.requests_named("interaction_callback")[0].index + 1
        )
        fake.slash("ask", channel_id=CHANNEL, options={"question": "two?"})
        await reply_containing(fake, CHANNEL, "next")

    assert fake.sent_texts(CHANNEL) == ["once", "next"]
    assert len(provider.requests) == 2


async def test_an_answer_taken_over_by_another_gateway_is_not_posted_twice(
    fake_discord: FakeDiscord,
) -> None:
    fake = fake_discord
    dm = fake.dm_channel_id(ALICE)
    first, second = _adapter(fake), _adapter(fake)
    runs = [asyncio.create_task(adapter.run(_sink)) for adapter in (first, second)]
    try:
        await fake.wait_ready(PATIENCE, sessions=2)
        address = Address(platform="discord", bot=str(fake.bot_id), chat=str(dm))
        # The first gateway showed the start of a streamed answer, then stopped; the second
        # takes the final reply off the bus, knowing nothing of the message already shown.
        await first.deliver(Outbound(kind="delta", address=address, text="Half", reply_to="t1"))
        final = Outbound(kind="reply", address=address, text="Half and whole.", reply_to="t1")
        await second.deliver(final)
        await second.deliver(final)  # and once more, as a redelivery would
    finally:
        # Each run restores the endpoints it found: stop them in the reverse order.
        for adapter, run in reversed(list(zip((first, second), runs, strict=True))):
            await adapter.stop()
            await run

    assert fake.sent_texts(dm) == ["Half and whole."]
    assert fake.messages[dm][0].edits == 1
    # The second gateway's send found the first one's message by its nonce; the redelivery
    # was then recognised by the second gateway's reply record and not sent at all.
    assert len(fake.requests_named("create_message", dm)) == 2


# --- who may talk ---------------------------------------------------------------------------


async def test_a_guild_allowlist_answers_that_server_and_refuses_others(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = scripted("hello server", "hello admin")
    policy = ChannelPolicy(
        allow={"discord": AllowList(teams=frozenset({str(GUILD)}), users=frozenset({"7"}))}
    )
    async with serving(fake, store, provider, policy=policy):
        fake.post(CHANNEL, "hi", user_id=ALICE, mention=True)
        await reply_containing(fake, CHANNEL, "hello server")
        fake.dm(ALICE, "let me in")
        await reply_containing(fake, fake.dm_channel_id(ALICE), REFUSAL_TEXT)
        fake.dm(7, "it is me")
        await reply_containing(fake, fake.dm_channel_id(7), "hello admin")

    assert [last_user_message(provider, i).text for i in range(2)] == ["hi", "it is me"]


# --- starting and stopping ------------------------------------------------------------------


def _adapter(fake: FakeDiscord, token: str | None = None) -> DiscordAdapter:
    return DiscordAdapter(
        replies=_replies(),
        settings=DiscordSettings(
            token=SecretStr(token or fake.token),
            api_url=fake.api_url,
            gateway_url=fake.gateway_url,
            ready_timeout=0.05,
        ),
        menu=MENU,
    )


async def _sink(_: object) -> None:
    raise AssertionError("no message expected")


async def test_a_rejected_token_or_intent_is_a_config_error(fake_discord: FakeDiscord) -> None:
    saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    wrong = token_for(fake_discord.bot_id + 1)
    with pytest.raises(ConfigError, match="DISCORD_BOT_TOKEN"):
        await _adapter(fake_discord, wrong).run(_sink)
    fake_discord.privileged_intents = False
    with pytest.raises(ConfigError, match="Message Content intent"):
        await _adapter(fake_discord).run(_sink)
    assert (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY) == saved  # restored


async def test_stopping_restores_discord_py_endpoints(fake_discord: FakeDiscord) -> None:
    saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    adapter = _adapter(fake_discord)
    assert adapter.bot_key == str(fake_discord.bot_id)  # read from the token
    running = asyncio.create_task(adapter.run(_sink))
    await fake_discord.wait_ready(PATIENCE)
    assert Route.BASE == fake_discord.api_url
    await adapter.stop()
    async with asyncio.timeout(PATIENCE):
        await running
    assert (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY) == saved
    assert Route.BASE == "https://discord.com/api/v10"


async def test_a_stop_before_the_ready_event_leaves_no_discord_py_task_behind(
    fake_discord: FakeDiscord,
) -> None:
    adapter = DiscordAdapter(
        replies=_replies(),
        settings=DiscordSettings(
            token=SecretStr(fake_discord.token),
            api_url=fake_discord.api_url,
            gateway_url=fake_discord.gateway_url,
            ready_timeout=0.5,  # the stop below comes while discord.py waits for servers
        ),
        menu=MENU,
    )
    running = asyncio.create_task(adapter.run(_sink))
    await fake_discord.wait_ready(PATIENCE)
    await adapter.stop()
    async with asyncio.timeout(PATIENCE):
        await running

    # discord.py's wait for the servers is a task of its own that close() does not end.
    waiting = [
        task
        for task in asyncio.all_tasks()
        if not task.done() and "_delay_ready" in task.get_coro().__qualname__  # type: ignore[union-attr]
    ]
    assert waiting == []


# --- secrets -------------------------------------------------------------------------------


@pytest.fixture(params=["configured", "by-shape"])
def product_logging(
    request: pytest.FixtureRequest, fake_discord: FakeDiscord
) -> Iterator[io.StringIO]:
    """The product's logging set up as `switchboard` does, at debug, writing into a string.

    "configured": the token is among the secrets, as `serve` passes it; "by-shape": it is not,
    and only the Redactor's pattern for Discord bot tokens can catch it.
    """
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    secrets = [fake_discord.token] if request.param == "configured" else []
    configure_logging(
        "debug,libraries=debug", Redactor(secrets, patterns=REGISTERED.secret_patterns())
    )
    output = io.StringIO()
    for handler in root.handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(output)
    try:
        yield output
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


async def test_the_bot_token_never_reaches_a_log_record(
    fake_discord: FakeDiscord,
    store: SqlStore,
    product_logging: io.StringIO,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fake = fake_discord
    fake.fail_next("create_message", retry_after=0.1)
    async with serving(fake, store, scripted("first", "second")):
        # One after the other: two conversations' turns run side by side, and the model
        # answers in the order it is asked.
        fake.dm(ALICE, "hello")
        await reply_containing(fake, fake.dm_channel_id(ALICE), "first")
        fake.slash("ask", channel_id=CHANNEL, options={"question": "again"})
        await reply_containing(fake, CHANNEL, "second")
        fake.request_reconnect()
        await fake.wait_resumed()

    assert any(r.name.startswith("discord") for r in caplog.records)
    assert fake.token not in caplog.text
    written = product_logging.getvalue()
    assert "rate limited" in written  # the 429 went through the logs too
    assert "RESUMED" in written or "resumed" in written
    assert fake.token not in written


def _replies() -> ReplyStreams:
    return ReplyStreams(MemoryReplyRecords(), IncrementalRender())
