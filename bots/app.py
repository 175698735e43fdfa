"""Wiring: settings and profile in; store, bus, mailboxes, runtime and worker out.

The records (history, costs, schedules, facts, access, reply records...) are always in the
SQL store (`core/backends/sql/store/`) on `DATABASE_URL`, by default the SQLite file in the data
directory (with `REDIS_URL` too, which is fine only while every process runs on one machine:
`switchboard doctor` says so). How work moves depends on `REDIS_URL`: set, Redis coordinates
every process (the bus, the mailboxes and their leases, the holds on replies, the rate-limit
counters), and holds nothing that must outlive a Redis restart; unset, the bus and mailboxes
live in the SQLite file and this process. The terminal chat keeps its bus and mailboxes in a
SQLite queue file of its own either way (`chat_queue_path`). On Redis, every key is in the
namespace of `SWITCHBOARD_BOT_ID`, so several bots can share one server. The backends
themselves are packages of `core/backends/`; `backends()` picks one and passes the settings.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
from collections.abc import AsyncIterator, Collection, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bots.embeddings import fact_embedder
from bots.images import image_generator
from bots.limits import admin_dms, budget_guard, open_rate_limits
from bots.platforms import REGISTERED, command_registry
from bots.profiles import load_profile
from bots.providers import build_model_choices, build_provider
from bots.settings import Settings
from core.access import Gate, Pairing
from core.arrivals import BusyMode
from core.backends import Backends
from core.backends.redis import open_distributed
from core.backends.sql import open_embedded
from core.bus.base import Bus
from core.bus.names import NOTIFICATIONS
from core.checkpoints import CrashPolicy
from core.commands import CommandRegistry
from core.compaction import Compactor
from core.confirm import Confirmations
from core.consolidation import Consolidator, QuietConsolidation
from core.errors import ConfigError
from core.facts import memory_block, memory_scope
from core.hybrid_facts import HybridFacts
from core.mailbox.base import Mailboxes
from core.mcp import McpSettings
from core.metering import ModelMetering, breaker_probe, breakers_of
from core.metrics import Metrics
from core.modes import ModeCatalog
from core.notifications.external import ExternalRuns
from core.notifications.receipts import ReceiptDesk
from core.playbook import Playbook
from core.policy import ChannelPolicy, PlatformAccess
from core.pricing import PriceBook
from core.profile import Profile
from core.providers.registry import Resolved
from core.ratelimit import RateLimits
from core.readiness import Readiness
from core.redact import Redactor
from core.reload import ProfileReloader
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits, TurnContext
from core.scheduling.book import ScheduleBook
from core.scheduling.rules import ScheduleLimits
from core.scheduling.scheduler import Scheduler
from core.scheduling.tools import schedule_tools
from core.session_reset import SessionReset
from core.store.base import Store
from core.store.facts import FactStore
from core.store.replies import ReplyRecords
from core.subagents import Subagents
from core.takeover import Takeovers
from core.tool_rounds import verification
from core.tools import (
    Browsing,
    FileDrop,
    WorkspaceSettings,
    browser_tool,
    generate_image_tool,
    send_file_tool,
    web_fetch_tool,
    web_search_tool,
    workspace_tools,
)
from core.tools.ask_user import ask_user_tool
from core.tools.base import Tool, ToolRegistry
from core.tools.browser import unavailable
from core.tools.builtin import builtin_tools
from core.tools.facts import memory_tools
from core.tools.skills import read_skill_tool
from core.tools.tool_output import read_tool_output_tool
from core.turns import (
    Contexts,
    InboundHandler,
    Lifecycle,
    Outbox,
    ScheduledRuns,
    StreamPolicy,
    TurnRunner,
)
from core.turns.steering import Pause
from core.worker import Worker

__all__ = [
    "PROMPT_HINTS",
    "STREAM_POLICIES",
    "Backends",
    "Components",
    "assemble_worker",
    "backends",
    "chat_queue_path",
    "embedded",
    "open_store",
    "worker_for",
]

if TYPE_CHECKING:
    from core.backends.sql.store import SqlStore
    from core.mcp.servers import McpServers

log = logging.getLogger(__name__)

# Each platform's formatting rules for the system prompt, keyed by platform.
PROMPT_HINTS: dict[str, str] = REGISTERED.prompt_hints()

# How each platform shows a running turn (its ChannelSpec's stream interval and progress).
STREAM_POLICIES: dict[str, StreamPolicy] = REGISTERED.stream_policies()

# Leases of the distributed deployment: a worker that dies holds a session for at most
# TURN_LEASE seconds, and a delivery a gateway took off the bus comes back after BUS_LEASE
# seconds.
TURN_LEASE_SECONDS = 10.0
BUS_LEASE_SECONDS = 30.0


@dataclass
class Components:
    """The parts of a process that answers messages."""

    settings: Settings
    profile: Profile
    store: Store
    bus: Bus
    resolved: Resolved
    runtime: AgentRuntime
    worker: Worker
    book: ScheduleBook
    replies: ReplyRecords
    readiness: Readiness
    mailboxes: Mailboxes
    metrics: Metrics | None = None
    # Reads the profile again into the runtime (SIGHUP, `switchboard reload`; decision 0025).
    reloader: ProfileReloader | None = None

    def scheduler(self, platforms: Collection[str] | None = None) -> Scheduler:
        """A scheduler over this process's store and bus, firing the schedules of `platforms`
        (None: every platform)."""
        return Scheduler(
            store=self.store,
            book=self.book,
            bus=self.bus,
            mailboxes=self.mailboxes,
            readiness=self.readiness,
            platforms=platforms,
        )

    def receipt_desk(self) -> ReceiptDesk:
        """The consumer of the `receipts` queue: delivery receipts onto schedule runs, and the
        `notifications` fan-out."""
        return ReceiptDesk(
            bus=self.bus,
            store=self.store,
            book=self.book,
            redactor=self.settings.redactor(),
            readiness=self.readiness,
        )


@asynccontextmanager
async def backends(
    settings: Settings, *, own_queues: bool = False, take_over: bool = False
) -> AsyncIterator[Backends]:
    """The store, bus and mailboxes the settings call for: `open_embedded`
    (`core/backends/sql/`) without `REDIS_URL`, `open_distributed` (`core/backends/redis/`) with.

    `own_queues` (the terminal chat and `switchboard recover`): the bus and mailboxes are a
    SQLite queue file of this process's own, `chat-queues.db` next to the data file
    (`chat_queue_path`), even with Redis, so the work stays durable yet a `serve` on the same
    data file never picks it up; history still goes to the store. One such process at a time
    holds that file (a second gets `ConfigError`), and it takes over the leases a crashed one
    left. `take_over` (embedded only): this process is the one that works the data file's
    queues, so leases a crashed run left on them are released at once.
    """
    if own_queues or settings.redis_url is None:
        async with AsyncExitStack() as stack:
            if own_queues:
                path = chat_queue_path(settings)
                stack.enter_context(_sole_user(path))
                # Topics stay in this process: nobody else reads the chat's events.
                shared: frozenset[str] = frozenset()
            else:
                path = settings.database_path
                # `switchboard events --topic notifications` reads them from another process.
                shared = frozenset({NOTIFICATIONS})
            yield await stack.enter_async_context(
                open_embedded(
                    settings.store_url,
                    path,
                    lease_seconds=BUS_LEASE_SECONDS,
                    take_over=take_over or own_queues,
                    shared_topics=shared,
                )
            )
        return
    async with open_distributed(
        settings.store_url,
        settings.redis_url,
        settings.redis_keys,
        bus_lease_seconds=BUS_LEASE_SECONDS,
        turn_lease_seconds=TURN_LEASE_SECONDS,
    ) as found:
        yield found


def chat_queue_path(settings: Settings) -> Path:
    """The queue file of the terminal chat (and `recover`): beside the data file, never the
    data file itself, so a `serve` on that file does not take the chat's work."""
    return settings.data_dir / "chat-queues.db"


@contextmanager
def _sole_user(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`'s lock file while the block runs; `ConfigError` if
    another process holds it (two chats on one queue file would print each other's answers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"another `switchboard chat` or `recover` is running on {path.parent}"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _web_search(settings: Settings) -> list[Tool[Any]]:
    """`web_search` when a search API is configured; otherwise no tool at all."""
    search = settings.web_search()
    return [web_search_tool(search)] if search is not None else []


def _browsing(profile: Profile, redactor: Redactor) -> Browsing | None:
    """The browser behind the `browser` tool when `[browser] enabled` and it can run here;
    otherwise None (and one WARNING saying why; `switchboard doctor` says so too)."""
    options = profile.settings.browser
    if not options.enabled:
        return None
    why = unavailable(options)
    if why is not None:
        log.warning("[browser] is enabled but the browser tool is not offered: %s", why)
        return None
    return Browsing(options, redactor=redactor)


def _file_tools(
    settings: Settings, profile: Profile, found: Backends, workspace: WorkspaceSettings
) -> list[Tool[Any]]:
    """`send_file` (privileged, from the workspace) and, when an image endpoint is configured,
    `generate_image`; both hand their files to the chat's gateway through the bus."""
    drop = FileDrop(found.bus)
    tools: list[Tool[Any]] = [send_file_tool(workspace, drop)]
    options = profile.settings.images
    images = image_generator(settings.environ, options)
    if images is not None:
        tools.append(generate_image_tool(images, drop, found.store, price=options.price_per_image))
    return tools


@asynccontextmanager
async def worker_for(
    settings: Settings,
    profile: Profile,
    found: Backends,
    *,
    concurrency: int | None = None,
    recover: bool = True,
) -> AsyncIterator[Components]:
    """A runtime and a worker over the given backends.

    With `recover`, the worker applies the profile's `on_crash` to turns a crash cut off.
    """
    redactor = settings.redactor()
    options = profile.settings
    # First: a bad [embeddings] table fails before anything is opened (no client is, yet).
    embedder = fact_embedder(settings.environ, options.embeddings)
    facts: FactStore = (
        found.store
        if embedder is None
        else HybridFacts(found.store, embedder, min_similarity=options.embeddings.min_similarity)
    )
    mcp, mcp_log = await _mcp_servers(settings, options.mcp)
    modes = ModeCatalog(admit=mcp.mode_tools() if mcp else None)
    for mode in {*options.modes.values(), *options.chat_modes.values()}:
        modes.get(mode)  # unknown mode names fail here, at start, not on the first message
    provider, resolved = build_provider(settings, profile)
    choices = build_model_choices(settings, profile, provider, resolved)
    price = PriceBook(extra=options.prices).cost
    found.metrics.add_probe(breaker_probe(breakers_of(provider)))
    book = ScheduleBook(
        found.store,
        limits=ScheduleLimits(
            min_interval=options.min_schedule_interval,
            max_per_person=options.max_schedules_per_person,
            max_per_chat=options.max_schedules_per_chat,
        ),
    )
    # Privileged tools ask the chat first (`full` mode); no answer within a minute means no.
    gate = Confirmations(bus=found.bus, timeout=60.0, marks=found.store, redactor=redactor)
    limiter, close_limiter = open_rate_limits(settings, options, found.redis)
    workspace = _workspace(settings, profile)
    consolidator = (
        Consolidator(
            profile=profile.name,
            provider=provider,
            model=resolved.model,
            facts=facts,
            ledger=found.store,
            redactor=redactor,
            cost=price,
            budgets=budget_guard(options, found.store, found.bus),
            max_tokens=options.memory.consolidate_max_tokens,
            timeout=options.provider_timeout,
        )
        if options.memory.consolidate
        else None
    )
    browsing = _browsing(profile, redactor)
    try:
        runtime = AgentRuntime(
            provider=provider,
            model=resolved.model,
            tools=ToolRegistry(
                [
                    *builtin_tools(),
                    *schedule_tools(book),
                    *memory_tools(facts, profile.name, redactor),
                    read_skill_tool(profile.skills),
                    read_tool_output_tool(found.store),
                    web_fetch_tool(),
                    *_web_search(settings),
                    *workspace_tools(workspace),
                    *_file_tools(settings, profile, found, workspace),
                    *(mcp.tools() if mcp else []),
                    *([browser_tool(browsing)] if browsing else []),
                    ask_user_tool(gate, timeout=options.ask_timeout),
                ]
            ),
            store=found.store,
            limits=RuntimeLimits(
                max_steps=options.max_steps,
                tool_timeout=options.tool_timeout,
                max_tokens=options.max_tokens,
                max_spend_usd=options.max_spend_usd,
                stream_buffer_size=options.stream_buffer_size,
                text_tool_calls=options.text_tool_calls,
            ),
            cost=price,
            prompt=profile.system_prompt(redactor),
            temperature=options.temperature,
            redactor=redactor,
            turn_context=_memory_context(facts, profile.name),
            confirm=gate.confirm,
            compactor=Compactor(
                provider,
                resolved.model,
                keep_last=options.compaction_keep,
                trigger_ratio=options.compaction_trigger,
                timeout=options.provider_timeout,
            ),
            context_window=options.context_window,
            budgets=budget_guard(options, found.store, found.bus),
            hooks=ModelMetering(found.metrics, provider=provider.name, cost=price),
            models=choices,
            tool_hooks=options.hooks.tool_hooks(redactor=redactor),
            tool_outputs=found.store,
            consolidator=consolidator,
            playbook=_playbook(found.store, profile),
            attention=options.attention if options.attention.enabled else None,
            verify=verification(options.verify_criteria) if options.verify_after_tools else None,
            extensions=options.hooks.extensions(redactor=redactor),
            step_state=browsing,
        )
        runtime.tools.add(Subagents(runtime, options.subagents, modes).tool())
        if mcp is not None:
            mcp.keep_current(runtime.tools, modes)  # a server's later tools are offered too
        policy = ChannelPolicy(
            modes=options.modes,
            chat_modes=options.chat_modes,
            max_input_chars=options.max_input_chars,
            allow=options.allow,
            group_replies=options.group_replies,
            admins=frozenset(options.admins),
            access=options.access,
            # The product's default for a platform without an [access] table.
            default_access=PlatformAccess(),
            local_platforms=REGISTERED.local_platforms(),
        )
        reloader = ProfileReloader(
            profile, partial(load_profile, settings.profiles_dir, profile.name), runtime, redactor
        )
        runtime.extensions.reload = reloader.reload  # an extension's `ctx.reload()`
        worker = assemble_worker(
            bus=found.bus,
            store=found.store,
            mailboxes=found.mailboxes,
            runtime=runtime,
            policy=policy,
            modes=modes,
            prompt_hints=PROMPT_HINTS,
            streaming=STREAM_POLICIES,
            book=book,
            commands=command_registry(reloader.reload),
            confirmations=gate,
            redactor=redactor,
            on_crash=options.on_crash if recover else None,
            busy=options.busy,
            busy_window=options.busy_window,
            readiness=found.readiness,
            metrics=found.metrics,
            concurrency=concurrency or options.concurrency,
            # Embedded, the sweep is also how work another process put in the SQLite file
            # (`switchboard notify --prompt`) is found: no wake crosses processes there.
            sweep_interval=2.0 if found.distributed else 1.0,
            crash_age=_crash_age(settings, options.provider_timeout, options.tool_timeout),
            rate_limits=limiter,
            session_reset=options.sessions if options.sessions.enabled else None,
            takeovers=Takeovers(found.store, bus=found.bus, admin_dms=admin_dms(options.admins)),
            quiet=_quiet_pass(consolidator, options.memory.quiet_pass, found.store),
        )
        yield Components(
            settings,
            profile,
            found.store,
            found.bus,
            resolved,
            runtime,
            worker,
            book,
            found.replies,
            found.readiness,
            found.mailboxes,
            found.metrics,
            reloader,
        )
    finally:
        await provider.aclose()
        for extra in choices.providers.values():
            if extra is not provider:  # the providers `/model` may switch to
                await extra.aclose()
        await close_limiter()
        if embedder is not None:
            await embedder.aclose()
        if mcp is not None:
            await mcp.aclose()
        if mcp_log is not None:
            await asyncio.to_thread(mcp_log.close)
        if browsing is not None:
            await browsing.aclose()  # no chromium outlives the worker


def _quiet_pass(
    consolidator: Consolidator | None, after: timedelta | None, store: Store
) -> QuietConsolidation | None:
    """The quiet-period consolidation the worker's sweep runs (`[memory] consolidate_after`)."""
    if consolidator is None or after is None:
        return None
    return QuietConsolidation(store=store, consolidator=consolidator, after=after)


async def _mcp_servers(
    settings: Settings, servers: McpSettings
) -> tuple[McpServers | None, TextIO | None]:
    """The profile's MCP servers, started (one WARNING for each that cannot start), and the
    file their stderr goes to (not into a terminal chat); None without any, so the MCP SDK is
    not even loaded."""
    if not servers:
        return None, None
    from core.mcp.servers import McpServers

    path = settings.data_dir / "mcp-servers.log"
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    errlog = await asyncio.to_thread(path.open, "a", encoding="utf-8")
    mcp = McpServers(servers, errlog=errlog)
    await mcp.start()
    return mcp, errlog


def _workspace(settings: Settings, profile: Profile) -> WorkspaceSettings:
    """Where the privileged `shell` and `files` tools work: a folder per profile."""
    return WorkspaceSettings(
        root=settings.data_dir / "workspaces" / profile.name,
        path=settings.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        home=Path(home) if (home := settings.environ.get("HOME")) else None,
    )


def assemble_worker(
    *,
    bus: Bus,
    store: Store,
    mailboxes: Mailboxes,
    runtime: AgentRuntime,
    policy: ChannelPolicy,
    modes: ModeCatalog,
    prompt_hints: Mapping[str, str],
    streaming: Mapping[str, StreamPolicy],
    book: ScheduleBook,
    commands: CommandRegistry,
    confirmations: Confirmations | None,
    on_crash: CrashPolicy | None,
    redactor: Redactor,
    rate_limits: RateLimits | None = None,
    metrics: Metrics | None = None,
    busy: BusyMode = "queue",
    busy_window: float = 1.5,
    pause: Pause = asyncio.sleep,
    session_reset: SessionReset | None = None,
    **options: Any,
) -> Worker:
    """A worker and the turn path it runs, from their parts: the one place they are put
    together (tests build theirs with it too). `busy`: the profile's (tests that do not
    say queue each message; `pause`: how "collect" waits). `options` go to `Worker`."""
    contexts = Contexts(modes=modes, policy=policy, prompt_hints=prompt_hints)
    # One patience for the whole turn path: an outage is logged once, when it starts and ends.
    patience = runtime.patience
    outbox = Outbox(bus, streaming, patience=patience)
    lifecycle = Lifecycle(bus, redactor, metrics, patience=patience)
    turns = TurnRunner(runtime=runtime, store=store, outbox=outbox, lifecycle=lifecycle)
    external = ExternalRuns(bus=bus, store=store, contexts=contexts, turns=turns)
    handler = InboundHandler(
        store=store,
        policy=policy,
        commands=commands,
        contexts=contexts,
        turns=turns,
        scheduled=ScheduledRuns(
            bus=bus, store=store, book=book, contexts=contexts, turns=turns, metrics=metrics
        ),
        outbox=outbox,
        rate_limits=rate_limits,
        gate=Gate(
            policy=policy,
            pairing=Pairing(store, command_prefixes=REGISTERED.command_prefixes()),
            modes=modes,
        ),
        external=external,
        busy=busy,
        busy_window=busy_window,
        pause=pause,
        session_reset=session_reset,
    )
    return Worker(
        bus=bus,
        store=store,
        mailboxes=mailboxes,
        handler=handler,
        confirmations=confirmations,
        on_crash=on_crash,
        **options,
    )


def _crash_age(settings: Settings, provider_timeout: float, tool_timeout: float) -> timedelta:
    """How long a `running` checkpoint must not have moved before a starting worker takes it
    for a crash's leftover.

    Without Redis every turn runs in this process, so at start-up any is a leftover. With Redis
    the store is shared with workers that may be in the middle of one: wait out a whole model
    call and tool round (a checkpoint moves once per round), twice over.
    """
    if settings.redis_url is None:
        return timedelta(0)
    return timedelta(seconds=2 * (provider_timeout + tool_timeout))


def _playbook(store: Store, profile: Profile) -> Playbook | None:
    """The profile's playbook, kept under its name; None when `[playbook] enabled = false`."""
    options = profile.settings.playbook
    return Playbook(store, profile.name, options) if options.enabled else None


def _memory_context(store: FactStore, profile: str) -> TurnContext:
    """The asking person's most relevant remembered facts, for each turn."""

    async def relevant(context: ChannelContext, asked: str) -> str:
        if not context.platform or not context.user_id:
            return ""
        scope = memory_scope(
            profile, context.platform, context.user_id, scheduled=context.scheduled
        )
        return await memory_block(store, scope, asked)

    return relevant


@asynccontextmanager
async def embedded(
    settings: Settings, profile: Profile, *, own_queues: bool = False
) -> AsyncIterator[Components]:
    """Backends plus a worker: everything one `chat` or `serve` process needs (`own_queues`:
    see `backends`)."""
    async with backends(settings, own_queues=own_queues, take_over=not own_queues) as found:
        # A terminal chat only answers its own conversation; turns a crash cut off are left to
        # `serve`, `worker` or `switchboard recover` rather than printed into a new chat.
        async with worker_for(settings, profile, found, recover=not own_queues) as parts:
            yield parts


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    """Just the store (for commands that only read history or costs)."""
    store = await _open_sql_store(settings)
    try:
        yield store
    finally:
        await store.close()


async def _open_sql_store(settings: Settings) -> SqlStore:
    """The records' database (`Settings.store_url`), its schema upgraded."""
    from core.backends.sql.store import SqlStore

    return await SqlStore.open(settings.store_url)
