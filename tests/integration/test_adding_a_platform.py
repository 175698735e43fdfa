"""Adding a platform needs no change outside its package and one registration line.

"pager" is a platform defined entirely in this module: an in-memory adapter and its
`ChannelSpec`. Registered into a spec list beside the product's, it is configured from the
environment, gets its default capability mode, prompt hint, address grammar, secret shape,
lease and command menu from the wiring in `bots/`, and a real turn runs through it end to end:
the adapter's Inbound goes over the bus to a worker and its answer comes back as an Outbound.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bots.platforms import PLATFORMS, Platforms, command_registry
from bots.profiles import load_profile
from channels.base import ChannelSetup, ChannelSpec, InboundSink
from channels.gateway import Gateway
from channels.streaming import IncrementalRender, ReplyStreams
from core.addresses import AddressGrammar
from core.bus.memory import MemoryBus
from core.commands import CommandInfo
from core.envelopes import Address, Inbound, Outbound
from core.policy import ChannelPolicy
from core.providers.scripted import ScriptedProvider, text_reply
from core.readiness import Readiness
from core.redact import REDACTED, Redactor
from core.runtime import AgentRuntime
from core.store.replies import MemoryReplyRecords
from core.store.sql import SqlStore
from core.tools import ToolRegistry, builtin_tools
from tests.workers import build_worker

PATIENCE = 5.0
TOKEN = "pgr_0123456789abcdefghij"
HINT = "You are answering on a pager: one line of at most 80 characters, no Markdown."


class PagerAdapter:
    """A pager network in memory: `page()` is a person typing, `shown` what the pagers show."""

    def __init__(self, setup: ChannelSetup) -> None:
        self.token = setup.env["PAGER_TOKEN"]
        self.menu: tuple[CommandInfo, ...] = setup.menu
        self.shown: list[Outbound] = []
        self._typed: asyncio.Queue[Inbound | None] = asyncio.Queue()
        self._changed = asyncio.Condition()

    @property
    def platform(self) -> str:
        return "pager"

    @property
    def bot_key(self) -> str:
        return "net1"

    def page(self, pager: str, text: str) -> Inbound:
        command = text[1:] if text.startswith("/") else None
        inbound = Inbound(
            kind="command" if command else "message",
            command=command,
            address=Address(platform="pager", bot=self.bot_key, chat=pager),
            user_id=pager,
            text=text,
            is_direct=True,
        )
        self._typed.put_nowait(inbound)
        return inbound

    async def run(self, sink: InboundSink) -> None:
        while (inbound := await self._typed.get()) is not None:
            await sink(inbound)

    async def deliver(self, outbound: Outbound) -> None:
        async with self._changed:
            self.shown.append(outbound)
            self._changed.notify_all()

    async def stop(self) -> None:
        self._typed.put_nowait(None)

    async def answer_to(self, inbound: Inbound) -> Outbound:
        def ended() -> Outbound | None:
            return next((o for o in self.shown if o.reply_to == inbound.id and o.ends_turn), None)

        async with asyncio.timeout(PATIENCE), self._changed:
            await self._changed.wait_for(lambda: ended() is not None)
        found = ended()
        assert found is not None
        return found


SPEC = ChannelSpec(
    name="pager",
    prompt_hint=HINT,
    default_mode="no-tools",
    address=AddressGrammar(platform="pager", usage="pager:<pager number>", chat=r"\d{4}"),
    build=PagerAdapter,
    env=("PAGER_TOKEN",),
    secret_env=("PAGER_TOKEN",),
    secret_patterns=(r"pgr_[a-z0-9]{20}",),
    leader_role=lambda env: "pager-reader",
    stream_interval=2.0,
    shows_progress=False,
)

# The one registration line.
WITH_PAGER = Platforms((*PLATFORMS, SPEC))


async def test_a_platform_defined_in_a_test_answers_a_turn_end_to_end(
    tmp_path: Path, store: SqlStore
) -> None:
    env = {"PAGER_TOKEN": TOKEN}
    (tmp_path / "bot").mkdir()
    profile = load_profile(tmp_path, "bot", WITH_PAGER)  # a profile without [modes]
    commands = command_registry()
    replies = ReplyStreams(MemoryReplyRecords(), IncrementalRender())
    [adapter] = WITH_PAGER.configured_adapters(env, profile, commands.menu(), replies)
    assert isinstance(adapter, PagerAdapter)
    assert adapter.menu == commands.menu()

    provider = ScriptedProvider([text_reply("Meeting moved to 3pm.")])
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry(builtin_tools()), store=store
    )
    bus = MemoryBus()
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=ChannelPolicy(
            modes=profile.settings.modes, admins=frozenset(profile.settings.admins)
        ),
        prompt_hints=WITH_PAGER.prompt_hints(),
        streaming=WITH_PAGER.stream_policies(),
        commands=commands,
    )
    gateway = Gateway(adapter, bus, readiness=Readiness())
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(gateway.run())]
    try:
        asked = adapter.page("1234", "when is the meeting?")
        answer = await adapter.answer_to(asked)
        helped = await adapter.answer_to(adapter.page("1234", "/help"))
    finally:
        await gateway.stop()
        await worker.stop(grace=PATIENCE)
        await asyncio.wait_for(asyncio.gather(*tasks), PATIENCE)
        await bus.close()

    assert (answer.kind, answer.text) == ("reply", "Meeting moved to 3pm.")
    assert answer.address == Address(platform="pager", bot="net1", chat="1234")
    assert "/new: Start a fresh conversation" in helped.text
    [request] = provider.requests
    assert HINT in request.system
    assert request.tools == []  # the pager's default mode is no-tools

    # The rest of the wiring knows it too.
    assert WITH_PAGER.leader_role(adapter, env) == "pager-reader:net1"
    addresses = WITH_PAGER.addresses()
    assert addresses.parse("pager:1234") == Address(platform="pager", chat="1234")
    assert "pager:<pager number>" in addresses.usage()
    assert WITH_PAGER.secrets(env) == [TOKEN]
    scrub = Redactor(patterns=WITH_PAGER.secret_patterns())
    assert scrub(f"paged with {TOKEN}") == f"paged with {REDACTED}"
    assert (SPEC.stream_interval, SPEC.shows_progress) == (2.0, False)
