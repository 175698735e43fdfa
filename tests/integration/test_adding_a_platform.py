"""Adding a platform needs no change outside its package and one registration line.

"pager" is a platform defined entirely in this module: an in-memory adapter and its
`ChannelSpec`. Registered into a spec list beside the product's, it is configured from the
environment, gets its default capability mode, prompt hint, address grammar, secret shape,
lease and command menu from the wiring in `bots/`, and a real turn runs through it end to end:
the adapter's Inbound goes over the bus to a worker and its answer comes back as an Outbound.
`switchboard doctor` runs its checks and budget alerts reach its admins' DMs, from what its
spec says: `bots/doctor.py` and `bots/limits.py` know no platform by name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from bots.doctor import diagnose
from bots.limits import budget_guard
from bots.platforms import PLATFORMS, Platforms, command_registry
from bots.profiles import load_profile
from bots.settings import Settings
from channels.base import ChannelSetup, ChannelSpec, InboundSink
from channels.checks import Finding, PlatformChecks, listening
from channels.gateway import Gateway
from channels.streaming import IncrementalRender, ReplyStreams
from core.addresses import AddressGrammar
from core.backends.sql.store import SqlStore
from core.budgets import Spender
from core.clock import utc_now
from core.commands import CommandInfo
from core.envelopes import Address, Inbound, Outbound
from core.messages import Usage
from core.policy import ChannelPolicy
from core.providers.scripted import ScriptedProvider, text_reply
from core.readiness import Readiness
from core.redact import REDACTED, Redactor
from core.runtime import AgentRuntime
from core.store.ledger import CostEntry
from core.store.replies import MemoryReplyRecords
from core.tools import ToolRegistry, builtin_tools
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
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

    async def wait_shown(self, count: int) -> None:
        async with asyncio.timeout(PATIENCE), self._changed:
            await self._changed.wait_for(lambda: len(self.shown) >= count)

    async def answer_to(self, inbound: Inbound) -> Outbound:
        def ended() -> Outbound | None:
            return next((o for o in self.shown if o.reply_to == inbound.id and o.ends_turn), None)

        async with asyncio.timeout(PATIENCE), self._changed:
            await self._changed.wait_for(lambda: ended() is not None)
        found = ended()
        assert found is not None
        return found


async def reach_pager(env: Mapping[str, str]) -> Finding:
    """The pager network's doctor check (in memory: a real one would ask the network)."""
    if env["PAGER_TOKEN"].startswith("pgr_"):
        return Finding("ok", "pager", "the pager network knows the token")
    return Finding("critical", "pager", "the network refused the token", "check PAGER_TOKEN")


def pager_exposure(env: Mapping[str, str]) -> list[Finding]:
    if env.get("PAGER_RELAY_PORT") and not env.get("PAGER_RELAY_SECRET"):
        return [
            Finding("critical", "pager", "a relay without its secret", "set PAGER_RELAY_SECRET")
        ]
    return []


def pager_listeners(env: Mapping[str, str]) -> list[Finding]:
    if port := env.get("PAGER_RELAY_PORT"):
        return [listening("pager", "the pager relay", "0.0.0.0", port, "anyone can page the bot")]
    return []


SPEC = ChannelSpec(
    name="pager",
    prompt_hint=HINT,
    default_mode="no-tools",
    address=AddressGrammar(platform="pager", usage="pager:<pager number>", chat=r"\d{4}"),
    build=PagerAdapter,
    env=("PAGER_TOKEN", "PAGER_RELAY_PORT", "PAGER_RELAY_SECRET"),
    secret_env=("PAGER_TOKEN",),
    secret_patterns=(r"pgr_[a-z0-9]{20}",),
    leader_role=lambda env: "pager-reader",
    stream_interval=2.0,
    shows_progress=False,
    checks=PlatformChecks(reach=reach_pager, exposure=pager_exposure, listeners=pager_listeners),
    # A pager's number is where the bot reaches its person.
    admin_dm=lambda number: Address(platform="pager", chat=number),
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
    gateway = Gateway(adapter, bus, mailboxes=worker.mailboxes, readiness=Readiness())
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


async def test_doctor_checks_a_platform_defined_in_a_test(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,
        SWITCHBOARD_DATA_DIR=tmp_path / "data",
        SWITCHBOARD_PROVIDER="demo",
        REDIS_URL=None,
        DATABASE_URL=None,
    ).with_environ({"PAGER_TOKEN": TOKEN, "PAGER_RELAY_PORT": "7070"})
    (tmp_path / "bot").mkdir()
    profile = load_profile(tmp_path, "bot", WITH_PAGER)

    findings = await diagnose(settings, profile, None, platforms=WITH_PAGER)

    pager = [(f.severity, f.text) for f in findings if f.area == "pager"]
    assert ("ok", "the pager network knows the token") in pager
    assert ("critical", "a relay without its secret") in pager
    assert (
        "warning",
        "the pager relay listens on 0.0.0.0:7070, reachable from other machines: "
        "anyone can page the bot",
    ) in pager
    # Not configured, not checked.
    unset = await diagnose(settings.with_environ({}), profile, None, platforms=WITH_PAGER)
    assert [f for f in unset if f.area == "pager"] == []


async def test_a_budget_reached_is_told_in_a_pager_admin_s_dm(
    tmp_path: Path, store: SqlStore
) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "profile.toml").write_text(
        'admins = ["pager:5678"]\n[budgets]\nglobal_daily = 1.0\n', encoding="utf-8"
    )
    profile = load_profile(tmp_path, "bot", WITH_PAGER)
    bus = MemoryBus()
    guard = budget_guard(profile.settings, store, bus, WITH_PAGER)
    [adapter] = WITH_PAGER.configured_adapters(
        {"PAGER_TOKEN": TOKEN},
        profile,
        (),
        ReplyStreams(MemoryReplyRecords(), IncrementalRender()),
    )
    assert isinstance(adapter, PagerAdapter)
    gateway = Gateway(adapter, bus, mailboxes=MemoryMailboxes(), readiness=Readiness())
    task = asyncio.create_task(gateway.run())
    session = await store.create_session("pager:net1:1234")
    await store.record_cost(
        CostEntry(
            session_id=session.id,
            run_id="r",
            provider="p",
            model="m",
            usage=Usage(),
            cost_usd=2.0,
            at=utc_now(),
            user="pager:1234",
            chat="pager:net1:1234",
        )
    )
    try:
        hit = await guard.check(Spender(session_id=session.id, user="pager:1234"))
        assert hit is not None
        await adapter.wait_shown(1)
    finally:
        await gateway.stop()
        await asyncio.wait_for(task, PATIENCE)
        await bus.close()

    [note] = adapter.shown
    assert (note.kind, note.address) == ("notification", Address(platform="pager", chat="5678"))
    assert note.text.startswith("Budget reached: global_daily ($1.00) by all")
