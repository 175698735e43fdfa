"""`/model` through the worker: a chat switches model and its next turn's request to the
(fake) OpenAI API names it; `/model reset` goes back to the profile's default; a model whose
provider has no key, and a person who is not an admin in a group, are refused. The providers
and the choices are built the way `bots/app.py` builds them, from settings and a profile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bots.providers import build_model_choices, build_provider
from bots.settings import Settings
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound
from core.model_choice import ModelOption, ModelsSettings
from core.policy import ChannelPolicy
from core.profile import Profile, ProfileSettings
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.fakes import FakeOpenAI, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
DM = Address(platform="telegram", bot="b", chat="42")
GROUP = Address(platform="telegram", bot="b", chat="-100")
DEFAULT, OTHER = "gpt-4o-mini", "gpt-4.1"


@pytest.fixture
async def bot(fake_openai: FakeOpenAI, store: SqlStore) -> AsyncIterator[tuple[Worker, Outbox]]:
    settings = Settings.model_validate(
        {"OPENAI_API_KEY": TEST_API_KEY, "OPENAI_BASE_URL": fake_openai.url}
    )
    profile = Profile(
        name="t",
        settings=ProfileSettings(
            provider="openai",
            model=DEFAULT,
            models=ModelsSettings(
                allowed=[
                    ModelOption(provider="openai", model=OTHER),
                    ModelOption(provider="anthropic", model="claude-opus-4-1"),
                ]
            ),
        ),
    )
    provider, resolved = build_provider(settings, profile)
    choices = build_model_choices(settings, profile, provider, resolved)
    runtime = AgentRuntime(
        provider=provider, model=resolved.model, tools=ToolRegistry([]), store=store, models=choices
    )
    bus = MemoryBus()
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=ChannelPolicy(admins=frozenset({"telegram:boss"})),
    )
    task = asyncio.create_task(worker.run())
    try:
        yield worker, Outbox(bus, "telegram")
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
        await provider.aclose()
        await bus.close()


async def say(
    worker: Worker, outbox: Outbox, text: str, *, chat: Address = DM, user: str = "u1"
) -> str:
    """Send `text` (a command when it starts with a slash); the text of what ends its turn."""
    direct = chat == DM
    if text.startswith("/"):
        inbound = Inbound(
            address=chat,
            user_id=user,
            text=text,
            kind="command",
            command=text[1:].split()[0],
            is_direct=direct,
        )
    else:
        inbound = Inbound(
            address=chat, user_id=user, text=text, is_direct=direct, mentions_bot=True
        )
    await hand_in(worker, inbound)
    sent = await outbox.turn_of(inbound)
    return sent[-1].text


async def test_a_chat_switches_model_and_resets_it(
    bot: tuple[Worker, Outbox], fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    worker, outbox = bot
    fake_openai.script(Text("one"), Text("two"), Text("three"))

    assert await say(worker, outbox, "hello") == "one"
    listing = await say(worker, outbox, "/model")
    assert f"This chat uses {DEFAULT}." in listing
    assert f"{OTHER} (openai), claude-opus-4-1 (anthropic)" in listing

    assert await say(worker, outbox, f"/model {OTHER}") == f"This chat now uses {OTHER} (openai)."
    assert await say(worker, outbox, "again") == "two"
    assert f"Model: {OTHER}." in await say(worker, outbox, "/cost")

    assert (
        await say(worker, outbox, "/model reset")
        == f"This chat is back to the default model, {DEFAULT}."
    )
    assert await say(worker, outbox, "and again") == "three"

    assert [r.json["model"] for r in fake_openai.requests] == [DEFAULT, OTHER, DEFAULT]


async def test_unknown_models_keyless_providers_and_group_members_are_refused(
    bot: tuple[Worker, Outbox], fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    worker, outbox = bot
    fake_openai.script(Text("group answer"))

    refused = await say(worker, outbox, "/model gpt-5")
    assert (
        refused
        == f"gpt-5 is not one of the allowed models: {OTHER} (openai), claude-opus-4-1 (anthropic)."
    )
    keyless = await say(worker, outbox, "/model claude-opus-4-1")
    assert keyless.startswith("claude-opus-4-1 needs the anthropic provider, which cannot be used")
    assert "ANTHROPIC_API_KEY is not set" in keyless
    assert (await store.current_session(DM.session_key)).model is None

    member = await say(worker, outbox, f"/model {OTHER}", chat=GROUP, user="u2")
    assert member == "Only an admin of this bot can switch the model in a group."
    assert OTHER in await say(worker, outbox, "/model", chat=GROUP, user="u2")  # listing is open
    assert await say(worker, outbox, "hi", chat=GROUP, user="u2") == "group answer"
    assert [r.json["model"] for r in fake_openai.requests] == [DEFAULT]

    admin = await say(worker, outbox, f"/model {OTHER}", chat=GROUP, user="boss")
    assert admin == f"This chat now uses {OTHER} (openai)."
    assert (await store.current_session(GROUP.session_key)).model == OTHER


async def test_a_prompt_from_outside_runs_on_the_model_its_chat_chose(
    bot: tuple[Worker, Outbox], fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    worker, outbox = bot
    fake_openai.script(Text("default answer"), Text("chosen answer"))

    for text, answer in (("Any news?", "default answer"), ("Any news now?", "chosen answer")):
        if answer == "chosen answer":
            assert await say(worker, outbox, f"/model {OTHER}") == (
                f"This chat now uses {OTHER} (openai)."
            )
        prompt = Inbound(address=DM, text=text, origin="external", external_session="ci")
        await hand_in(worker, prompt)
        await outbox.until(answer, kind="notification")

    assert [r.json["model"] for r in fake_openai.requests] == [DEFAULT, OTHER]
