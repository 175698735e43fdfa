"""Processes: `serve`, `gateway`, `worker`, `scheduler`, `health` and `events`."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import TYPE_CHECKING, Any

import click

from bots.app import Components, backends, embedded, worker_for
from bots.commands.common import LOG, on_signals, require_redis, settings_from
from bots.commands.reload import reload_on_hangup
from bots.commands.status import announce
from bots.commands.where import describe_store, log_startup, require_data
from bots.loop import run_process
from bots.platforms import REGISTERED, command_registry
from bots.profiles import load_profile
from bots.settings import Settings
from bots.supervise import PlatformRunner, Runnable, ServedPlatforms, Stoppable
from channels.gateway import Gateway
from channels.streaming import IncrementalRender, ReplyStreams
from core.bus.base import Bus, Subscription
from core.bus.names import EVENTS as EVENTS_TOPIC
from core.bus.names import NOTIFICATIONS as NOTIFICATIONS_TOPIC
from core.envelopes import EventEnvelope, NotificationFailed, NotificationSent
from core.errors import ConfigError, SwitchboardError
from core.mailbox.base import Mailboxes
from core.notifications.receipts import notification_line
from core.readiness import Readiness

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection, Sequence

    from channels.base import ChannelAdapter
    from channels.web import WebSettings
    from core.leader import Leadership
    from core.metrics import Metrics

# How long `health` waits for the store and the bus before it says they do not answer.
_HEALTH_TIMEOUT = 10.0


__all__ = ["events", "gateway", "health", "run_with_gateways", "scheduler", "serve", "worker"]


async def run_with_gateways(
    parts: Components, gateways: Sequence[Runnable], *, fires: Collection[str] | None = None
) -> None:
    """Run the worker, the scheduler and the gateways until every gateway has finished (or the
    worker died).

    The scheduler fires the schedules of `fires`, by default the platforms of `gateways`: a
    process fires only what it can deliver.
    """
    worker = asyncio.create_task(parts.worker.run(), name="worker")
    platforms = (
        fires
        if fires is not None
        else {g.adapter.platform for g in gateways if isinstance(g, Gateway)}
    )
    scheduler = parts.scheduler(platforms)
    scheduling = asyncio.create_task(scheduler.run(), name="scheduler")
    desk = parts.receipt_desk()
    receipts = asyncio.create_task(desk.run(), name="receipts")
    running = [asyncio.create_task(g.run(), name="gateways") for g in gateways]
    all_gateways: asyncio.Future[list[None]] = asyncio.gather(*running)
    try:
        watched: set[asyncio.Future[Any]] = {worker, all_gateways}
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        if worker in done:
            worker.result()  # a crashed worker re-raises here
            raise SwitchboardError("the worker stopped unexpectedly")
        all_gateways.result()
    finally:
        all_gateways.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await all_gateways
        await scheduler.stop()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await scheduling
        await desk.stop()
        receipts.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await receipts
        await parts.worker.stop(grace=10.0)
        with contextlib.suppress(asyncio.CancelledError):
            await worker


@click.command()
@click.option("--profile", help="Profile folder under profiles/ (default: default).")
@click.pass_context
def serve(ctx: click.Context, profile: str | None) -> None:
    """Run every chat platform that has a token, with a worker, in one process.

    Telegram runs when TELEGRAM_BOT_TOKEN is set (long polling, or a webhook when
    TELEGRAM_WEBHOOK_URL is set); Slack when SLACK_BOT_TOKEN is set (Socket Mode with
    SLACK_APP_TOKEN, else the Events API on SLACK_PORT with SLACK_SIGNING_SECRET); Discord when
    DISCORD_BOT_TOKEN is set. The local web page is served too (127.0.0.1:8765, see
    `switchboard web --help`; SWITCHBOARD_WEB_PORT=off turns it off), alone when no platform
    has a token. With REDIS_URL the work goes through Redis, so more
    `switchboard worker` processes can share it. SIGINT or SIGTERM stops taking messages and
    lets running answers finish; SIGHUP (or `switchboard reload`) reads the profile again.
    """
    settings = settings_from(ctx, profile=profile)
    run_process(settings, _serve_platforms(settings), role="serve")


async def _serve_platforms(settings: Settings) -> None:
    # Imported here, not at the top: `switchboard chat` imports this module too, and aiohttp's
    # servers, the web page's renderer and prometheus are a fifth of a second of its start.
    from bots.commands.notify import check_hooks, hooks_listener
    from bots.limits import watching
    from bots.web import web_settings

    profile = await asyncio.to_thread(load_profile, settings.profiles_dir, settings.profile)
    page = web_settings(settings.environ)
    if page is None and not any(
        spec.configured(settings.environ) for spec in REGISTERED.specs if spec.build
    ):
        tokens = [spec.env[0] for spec in REGISTERED.specs if spec.build and spec.env]
        listed = f"{', '.join(tokens[:-1])} or {tokens[-1]}" if len(tokens) > 1 else tokens[0]
        raise ConfigError(
            f"no chat platform is configured: set {listed} "
            "(or use `switchboard chat` for the terminal)"
        )
    check_hooks(settings, profile)  # a bad hooks token stops the start before anything runs
    served = [s.name for s in REGISTERED.specs if s.build and s.configured(settings.environ)]
    async with (
        embedded(settings, profile) as parts,
        operations(settings, parts.readiness, parts.metrics, parts.bus, parts.mailboxes),
        hooks_listener(settings, profile, parts.bus, parts.mailboxes),
        watching(profile.settings, parts.bus, parts.readiness, parts.metrics) as watchdog,
        # Before `announce`: `switchboard reload` signals what the board lists, and SIGHUP
        # would end a process that has no handler for it yet.
        reload_on_hangup(parts.reloader),
        announce(
            settings,
            "serve",
            ", ".join(served),
            platforms=watchdog.health if watchdog is not None else None,
        ),
    ):
        replies = ReplyStreams(parts.replies, IncrementalRender())
        menu = command_registry().menu()
        redactor = settings.redactor()
        adapters = REGISTERED.configured_adapters(
            settings.environ, profile, menu, replies, seen=parts.store, redactor=redactor
        )

        def gateway_of(adapter: ChannelAdapter) -> Callable[[], Gateway]:
            # The first attempt uses the adapter built (and checked) above, later ones a fresh
            # one: an adapter whose run failed may hold half-closed connections.
            built = [adapter]

            def build() -> Gateway:
                fresh = (
                    built.pop()
                    if built
                    else REGISTERED.adapter_for(
                        adapter.platform,
                        settings.environ,
                        profile,
                        menu,
                        replies,
                        seen=parts.store,
                        redactor=redactor,
                    )
                )
                return Gateway(
                    fresh,
                    parts.bus,
                    mailboxes=parts.mailboxes,
                    readiness=parts.readiness,
                    replies=parts.replies,
                    metrics=parts.metrics,
                    watchdog=watchdog,
                )

            return build

        # Each chat platform on its own: one that cannot connect is retried while the others
        # serve (bots/supervise.py).
        gateways: list[Stoppable] = []
        if adapters:
            runners = [PlatformRunner(a.platform, gateway_of(a), parts.readiness) for a in adapters]
            gateways.append(ServedPlatforms(runners))
        async with _web_page(settings, page, parts, optional=bool(gateways)) as page_gateway:
            if page_gateway is not None:
                gateways.append(page_gateway)
            on_signals(lambda: [g.stop() for g in gateways])
            shown = [*served, "web"] if page_gateway is not None else served
            log_startup(settings, "serve", shown)
            # With Redis, gateways of other processes deliver too: fire every chat platform's
            # schedules (a terminal's stay for `switchboard chat`). Embedded: only this one's.
            fires = (*REGISTERED.served(), "web") if settings.redis_url else shown
            await run_with_gateways(parts, gateways, fires=fires)


@contextlib.asynccontextmanager
async def _web_page(
    settings: Settings, page: WebSettings | None, parts: Components, *, optional: bool
) -> AsyncIterator[Gateway | None]:
    """The local web page's gateway for `serve` (None when SWITCHBOARD_WEB_PORT is off)."""
    if page is None:
        yield None
        return
    from bots.web import web_page

    async with web_page(
        page,
        store=parts.store,
        bus=parts.bus,
        mailboxes=parts.mailboxes,
        readiness=parts.readiness,
        profile=parts.profile,
        data_dir=settings.data_dir,
        coordination=settings,
        optional=optional,
        metrics=parts.metrics,
    ) as gateway:
        yield gateway


@click.command()
@click.argument("platform", type=click.Choice(REGISTERED.served()))
@click.pass_context
def gateway(ctx: click.Context, platform: str) -> None:
    """Run one platform's adapter alone against the Redis bus (distributed deployment).

    Messages go into their sessions' mailboxes for the workers; answers come back on
    `outbound.<platform>`. A Telegram bot on long polling and a Discord bot are served by one
    gateway at a time: extra replicas stand by and take over when it stops; with a Telegram
    webhook all replicas serve, as do Slack gateways.
    """
    settings = settings_from(ctx)
    require_redis(settings, "gateway")
    run_process(settings, _gateway(settings, platform), role=f"gateway {platform}")


async def _gateway(settings: Settings, platform: str) -> None:
    from bots.limits import watching

    profile = await asyncio.to_thread(load_profile, settings.profiles_dir, settings.profile)
    async with (
        backends(settings) as found,
        operations(settings, found.readiness, found.metrics, found.bus, found.mailboxes),
        watching(profile.settings, found.bus, found.readiness, found.metrics) as watchdog,
        announce(
            settings,
            "gateway",
            platform,
            platforms=watchdog.health if watchdog is not None else None,
        ),
    ):
        replies = ReplyStreams(found.replies, IncrementalRender())
        menu = command_registry().menu()
        adapter = REGISTERED.adapter_for(
            platform,
            settings.environ,
            profile,
            menu,
            replies,
            seen=found.store,
            redactor=settings.redactor(),
        )
        runner = Gateway(
            adapter,
            found.bus,
            mailboxes=found.mailboxes,
            readiness=found.readiness,
            replies=found.replies,
            metrics=found.metrics,
            watchdog=watchdog,
        )
        log_startup(settings, "gateway", [platform])
        role = REGISTERED.leader_role(adapter, settings.environ)
        leadership = _leadership(settings, role, runner.consumer) if role else None
        stopped = asyncio.Event()

        async def stop() -> None:
            stopped.set()
            await runner.stop()

        on_signals(lambda: [stop()])
        if leadership is None:
            await runner.run()
            return
        acquiring = asyncio.create_task(leadership.acquire())
        standing_by = asyncio.create_task(stopped.wait())

        async def leading() -> bool:
            """Whether the lease came before the stop (its failure raises)."""
            await asyncio.wait({acquiring, standing_by}, return_when=asyncio.FIRST_COMPLETED)
            standing_by.cancel()
            if not acquiring.done():
                acquiring.cancel()
                return False
            acquiring.result()
            return not stopped.is_set()

        if REGISTERED.delivers_on_standby(adapter):
            # Answers go out while another gateway holds the lease (after a SIGKILL, until it
            # lapses); receiving starts with the lease.
            running = asyncio.create_task(runner.run(receive_after=leading()))
            await asyncio.wait({acquiring, running}, return_when=asyncio.FIRST_COMPLETED)
            if not acquiring.done() or acquiring.cancelled():
                acquiring.cancel()
                await running  # stopped while standing by
                return
        elif await leading():
            running = asyncio.create_task(runner.run())
        else:
            return
        try:
            lost = asyncio.create_task(leadership.lost.wait())
            done, _ = await asyncio.wait({running, lost}, return_when=asyncio.FIRST_COMPLETED)
            if running not in done:
                await runner.stop()
                await running
                raise SwitchboardError(
                    f"lost {leadership.role} to another gateway; exiting so a supervisor "
                    "restarts this one as a standby"
                )
            running.result()
        finally:
            await leadership.release()


def _leadership(settings: Settings, role: str, owner: str) -> Leadership:
    """The lease of a platform only one gateway at a time may read (its spec names the role)."""
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialWithJitterBackoff

    from core.backends.redis.client import connect_redis
    from core.leader import Leadership

    assert settings.redis_url is not None
    # Without a retry, `from_url` clients fail the first command on a connection that died
    # with a Redis restart; releasing the lease on SIGTERM must not fail for that.
    retry = Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3)
    client = connect_redis(settings.redis_url, retry=retry)
    return Leadership(client, role, owner=owner, keys=settings.redis_keys)


@click.command()
@click.option(
    "--concurrency",
    type=click.IntRange(1, 1000),
    help="Conversations answered at once (default: the profile's `concurrency`).",
)
@click.option("--profile", help="Profile folder under profiles/ (default: default).")
@click.pass_context
def worker(ctx: click.Context, concurrency: int | None, profile: str | None) -> None:
    """Answer messages from the Redis bus (distributed deployment); run as many as needed.

    SIGTERM stops taking work and lets running turns finish (up to 30 s); work not finished
    goes to another worker. SIGHUP (or `switchboard reload`) reads the profile again.
    """
    settings = settings_from(ctx, profile=profile)
    require_redis(settings, "worker")
    run_process(settings, _worker(settings, concurrency), role="worker")


async def _worker(settings: Settings, concurrency: int | None) -> None:
    profile = await asyncio.to_thread(load_profile, settings.profiles_dir, settings.profile)
    async with (
        backends(settings) as found,
        operations(settings, found.readiness, found.metrics, found.bus, found.mailboxes),
    ):
        async with (
            worker_for(settings, profile, found, concurrency=concurrency) as parts,
            reload_on_hangup(parts.reloader),  # before `announce`, as in `serve`
            announce(settings, "worker"),
        ):
            on_signals(lambda: [parts.worker.stop(grace=30.0)])
            LOG.info("worker %s taking work", parts.worker.name)
            log_startup(settings, "worker")
            desk = parts.receipt_desk()
            receipts = asyncio.create_task(desk.run(), name="receipts")
            try:
                await parts.worker.run()
            finally:
                await desk.stop()
                receipts.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await receipts
            await parts.worker.stop(grace=30.0)


@click.command()
@click.pass_context
def scheduler(ctx: click.Context) -> None:
    """Fire due schedules into their sessions' mailboxes in Redis (distributed deployment).

    Several may run: each occurrence fires once. `switchboard serve` runs one in-process.
    Schedules for the terminal are left to `switchboard chat`, which shows their answers.
    """
    settings = settings_from(ctx)
    require_redis(settings, "scheduler")
    run_process(settings, _scheduler(settings), role="scheduler")


async def _scheduler(settings: Settings) -> None:
    from core.scheduling.book import ScheduleBook
    from core.scheduling.scheduler import Scheduler

    async with (
        backends(settings) as found,
        operations(settings, found.readiness, found.metrics, found.bus, found.mailboxes),
        announce(settings, "scheduler"),
    ):
        # Every chat platform's schedules; a terminal's are left to `switchboard chat`.
        runner = Scheduler(
            store=found.store,
            # Moving schedules on and starting runs need no profile: no failure is counted here.
            book=ScheduleBook(found.store),
            bus=found.bus,
            mailboxes=found.mailboxes,
            readiness=found.readiness,
            platforms=(*REGISTERED.served(), "web"),
        )
        on_signals(lambda: [runner.stop()])
        log_startup(settings, "scheduler")
        await runner.run()


@click.command()
@click.pass_context
def health(ctx: click.Context) -> None:
    """Check that the store (and with REDIS_URL, Redis) answers; exit 0 when healthy.

    Meant for container health checks and supervisors: one line, exit 1 on failure.
    """
    settings = settings_from(ctx)
    asyncio.run(_health(settings))


async def _health(settings: Settings) -> None:
    where = describe_store(settings) + (", redis" if settings.redis_url else "")
    try:
        require_data(settings)  # a mistyped SWITCHBOARD_DATA_DIR is not a healthy empty store
        async with asyncio.timeout(_HEALTH_TIMEOUT), backends(settings) as found:
            await found.store.list_sessions(limit=1)
            if found.distributed:
                # A key read too: a cluster node named as one server answers PING and PUBLISH.
                await found.mailboxes.pending()
                await found.bus.publish(EVENTS_TOPIC, _health_event())
    except (SwitchboardError, OSError, TimeoutError) as exc:
        click.echo(f"not ok: {_health_reason(exc)} ({where})", err=True)
        raise SystemExit(1) from None
    click.echo(f"ok: store and bus answer ({where})")


@contextlib.asynccontextmanager
async def operations(
    settings: Settings,
    readiness: Readiness,
    metrics: Metrics | None = None,
    bus: Bus | None = None,
    mailboxes: Mailboxes | None = None,
) -> AsyncIterator[None]:
    """`/metrics`, `/healthz` and `/readyz` (`bots/operations.py`) while the process runs,
    when SWITCHBOARD_METRICS_PORT is set; with `bus`, the scrape reads its queues' sizes, with
    `mailboxes` the work waiting in them."""
    if settings.metrics_port is None:
        yield
        return
    from bots.operations import OperationsServer, operations_settings, watched_queues
    from core.metering import mailbox_probe, queue_probe
    from core.metrics import Metrics

    checked = operations_settings(settings)
    assert checked is not None  # the port is set
    metrics = metrics or Metrics()
    if bus is not None:
        metrics.add_probe(queue_probe(bus, watched_queues))
    if mailboxes is not None:
        metrics.add_probe(mailbox_probe(mailboxes))
    server = OperationsServer(checked, metrics=metrics, readiness=readiness)
    await server.start()
    try:
        yield
    finally:
        await server.close()


def _health_reason(exc: BaseException) -> str:
    """One line saying why `health` failed; a Redis error behind it is told as what it means
    (a cluster redirection reads as a bare `9360 127.0.0.1:34483` otherwise)."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"no answer within {_HEALTH_TIMEOUT:g} s"
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "redis" not in sys.modules:
        return reason  # no Redis error can be behind it (redis-py is loaded only with Redis)
    from redis.exceptions import RedisError

    from core.backends.redis.client import describe_redis_error

    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        if isinstance(cause, RedisError):
            bare, described = str(cause), describe_redis_error(cause)
            if bare and bare in reason:
                return reason.replace(bare, described)
            return f"{reason}: {described}"
        cause = cause.__cause__ or cause.__context__
    return reason


def _health_event() -> EventEnvelope:
    return EventEnvelope(name="health.check", session_id="", run_id="")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option(
    "--topic",
    type=click.Choice([EVENTS_TOPIC, NOTIFICATIONS_TOPIC]),
    default=EVENTS_TOPIC,
    show_default=True,
    help="`notifications`: every proactive delivery once its receipt is known "
    "(notification.sent, notification.failed); also without REDIS_URL.",
)
@click.pass_context
def events(ctx: click.Context, as_json: bool, topic: str) -> None:
    """Print lifecycle events from the Redis bus as they happen (Ctrl-C stops).

    agent.run.start, agent.run.complete (with duration, usage and cost), agent.run.error,
    tool.request, tool.result, agent.run.joined, retry.start / retry.end (a model call
    retried), checkpoint.saved (after each tool round) and turn.settled, from every worker;
    a sub-agent's (`delegate`) with depth= and parent_run_id= of the turn that started it.
    With `--topic notifications`: each scheduled answer, failure alert and external notification,
    delivered or not.
    """
    settings = settings_from(ctx)
    if topic == EVENTS_TOPIC:
        require_redis(settings, "events")
    asyncio.run(_events(settings, as_json, topic))


async def _events(settings: Settings, as_json: bool, topic: str = EVENTS_TOPIC) -> None:
    async with backends(settings) as found:
        subscription = await found.bus.subscribe(topic)
        stopped = asyncio.Event()
        on_signals(lambda: [_set(stopped)])
        reader = asyncio.create_task(_print_events(subscription, as_json))
        await asyncio.wait(
            {reader, asyncio.create_task(stopped.wait())}, return_when=asyncio.FIRST_COMPLETED
        )
        reader.cancel()
        await subscription.aclose()


async def _set(event: asyncio.Event) -> None:
    event.set()


# What a lifecycle event's line shows of its data (`--json` shows all of it).
_SHOWN_KEYS = (
    "platform",
    "name",
    "duration_ms",
    "cost_usd",
    "attempt",
    "wait_s",
    "error_kind",
    "attempts",
    "outcome",
    "tool_rounds",
    # A sub-agent's event: the turn that delegated it, and how deep it runs.
    "depth",
    "parent_run_id",
)


async def _print_events(subscription: Subscription, as_json: bool) -> None:
    async for envelope in subscription:
        if isinstance(envelope, NotificationSent | NotificationFailed):
            click.echo(envelope.model_dump_json() if as_json else notification_line(envelope))
            continue
        if not isinstance(envelope, EventEnvelope):
            continue
        if as_json:
            click.echo(envelope.model_dump_json())
            continue
        data = envelope.data
        details = " ".join(f"{k}={data[k]}" for k in _SHOWN_KEYS if k in data)
        click.echo(
            f"{envelope.at:%H:%M:%S} {envelope.name:<20} {envelope.session_key} {details}".rstrip()
        )
