"""The `switchboard` command line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from bots.app import Components, backends, configure_logging, embedded, open_store, worker_for
from bots.channels import PLATFORMS, adapter_for, configured_adapters
from bots.profiles import load_profile
from bots.settings import Settings, load_settings
from channels.base import ChannelAdapter
from channels.gateway import Gateway
from channels.terminal import TerminalAdapter
from core.bus.base import Subscription
from core.bus.names import EVENTS as EVENTS_TOPIC
from core.envelopes import EventEnvelope, new_id
from core.errors import ConfigError, SwitchboardError
from core.messages import Message
from core.pricing import format_usd
from core.redact import Redactor
from core.store.base import Store

if TYPE_CHECKING:
    from core.leader import Leadership

__all__ = ["cli", "main"]

log = logging.getLogger("switchboard")

_LOG_LEVELS = click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)
_CHAT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--log-level",
    type=_LOG_LEVELS,
    default=None,
    help="Log detail on stderr (default: SWITCHBOARD_LOG_LEVEL or warning).",
)
@click.version_option(package_name="switchboard", prog_name="switchboard")
@click.pass_context
def cli(ctx: click.Context, log_level: str | None) -> None:
    """Switchboard: one LLM agent runtime for Discord, Telegram, Slack and the terminal.

    Settings come from environment variables (and a .env file): SWITCHBOARD_DATA_DIR,
    SWITCHBOARD_PROFILE, SWITCHBOARD_PROVIDER, SWITCHBOARD_MODEL, the providers' API keys and
    the platforms' tokens. Per-bot behaviour lives in profiles/<name>/profile.toml.
    """
    ctx.obj = {"log_level": log_level}


def _settings(ctx: click.Context, **overrides: object) -> Settings:
    settings = load_settings(**overrides)
    level = ctx.obj.get("log_level") or settings.log_level
    configure_logging(level, Redactor(settings.secrets()))
    return settings


@cli.command()
@click.option(
    "--session",
    "session_name",
    metavar="NAME",
    help="Resume a stored conversation: its name (the last part of terminal:local:NAME) "
    "or a session id from `switchboard sessions list`. Default: a new conversation.",
)
@click.option("--provider", help="Model provider: anthropic, openai or demo.")
@click.option("--model", help="Model name for the provider.")
@click.option("--profile", help="Profile folder under profiles/ (default: default).")
@click.pass_context
def chat(
    ctx: click.Context,
    session_name: str | None,
    provider: str | None,
    model: str | None,
    profile: str | None,
) -> None:
    """Chat in the terminal with the embedded runtime (SQLite, in-process bus).

    Interactive on a terminal: answers stream, tool use shows as dim lines, Ctrl-C stops the
    answer being written, /new starts afresh, /quit leaves. With input piped, every line is one
    turn and each final answer is printed on stdout.
    """
    settings = _settings(ctx, provider=provider, model=model, profile=profile)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    asyncio.run(_chat(settings, session_name, interactive))


async def _chat(settings: Settings, session_name: str | None, interactive: bool) -> None:
    profile = load_profile(settings.profiles_dir, settings.profile)
    # The terminal's work stays in this process; with REDIS_URL its history goes to Redis.
    async with embedded(settings, profile, local_bus=True) as parts:
        chat_name = await _terminal_chat(parts.store, session_name)
        adapter = TerminalAdapter(chat=chat_name, interactive=interactive)
        err = Console(stderr=True, highlight=False)
        if interactive:
            err.print(
                f"Switchboard · {parts.resolved.provider.name} ({parts.resolved.model}) · "
                f"profile {profile.name} · conversation {chat_name}. /help lists commands.",
                style="dim",
                markup=False,
            )
        await _serve(parts, [Gateway(adapter, parts.bus)])
        if interactive:
            err.print(
                f"Resume this conversation with: switchboard chat --session {chat_name}",
                style="dim",
                markup=False,
            )


async def _terminal_chat(store: Store, name: str | None) -> str:
    if name is None:
        return new_id()[:8]
    record = await store.get_session(name)
    if record is not None:
        platform, _, rest = record.key.partition(":")
        if platform != "terminal":
            raise ConfigError(f"session {name} is a {platform} conversation, not a terminal one")
        return rest.partition(":")[2]
    if not name or not set(name) <= _CHAT_NAME_CHARS:
        raise ConfigError(f"--session {name!r}: use letters, digits, '_', '.' or '-'")
    return name


async def _serve(parts: Components, gateways: list[Gateway]) -> None:
    """Run the worker and the gateways until every gateway has finished (or the worker died)."""
    worker = asyncio.create_task(parts.worker.run(), name="worker")
    running = [asyncio.create_task(g.run(), name=f"gateway-{g.adapter.platform}") for g in gateways]
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
        await parts.worker.stop(grace=10.0)
        with contextlib.suppress(asyncio.CancelledError):
            await worker


@cli.command()
@click.option("--profile", help="Profile folder under profiles/ (default: default).")
@click.pass_context
def serve(ctx: click.Context, profile: str | None) -> None:
    """Run every chat platform that has a token, with a worker, in one process.

    Telegram runs when TELEGRAM_BOT_TOKEN is set (long polling, or a webhook when
    TELEGRAM_WEBHOOK_URL is set). With REDIS_URL the work goes through Redis, so more
    `switchboard worker` processes can share it. SIGINT or SIGTERM stops taking messages and
    lets running answers finish.
    """
    settings = _settings(ctx, profile=profile)
    asyncio.run(_serve_platforms(settings))


async def _serve_platforms(settings: Settings) -> None:
    profile = load_profile(settings.profiles_dir, settings.profile)
    adapters = configured_adapters(settings)
    if not adapters:
        raise ConfigError(
            "no chat platform is configured: set TELEGRAM_BOT_TOKEN "
            "(or use `switchboard chat` for the terminal)"
        )
    async with embedded(settings, profile) as parts:
        gateways = [Gateway(adapter, parts.bus) for adapter in adapters]
        _on_signals(lambda: [g.stop() for g in gateways])
        await _serve(parts, gateways)


def _on_signals(stop: Callable[[], list[Coroutine[Any, Any, None]]]) -> None:
    """SIGINT/SIGTERM run `stop`'s coroutines (once) so the process winds down gracefully."""
    loop = asyncio.get_running_loop()
    stopping: set[asyncio.Task[None]] = set()

    def handle() -> None:
        if stopping:
            return
        log.warning("stopping: finishing the answers in progress")
        for coro in stop():
            task = loop.create_task(coro)
            stopping.add(task)

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, handle)


def _require_redis(settings: Settings, command: str) -> str:
    if settings.redis_url is None:
        raise ConfigError(
            f"`switchboard {command}` needs REDIS_URL (the distributed deployment); "
            "use `switchboard serve` to run everything in one process"
        )
    return settings.redis_url


@cli.command()
@click.argument("platform", type=click.Choice(PLATFORMS))
@click.pass_context
def gateway(ctx: click.Context, platform: str) -> None:
    """Run one platform's adapter alone against the Redis bus (distributed deployment).

    Messages go to the `inbound` queue for the workers; answers come back on
    `outbound.<platform>`. A Telegram bot on long polling is read by one gateway at a time:
    extra replicas stand by and take over when it stops; with a webhook all replicas serve.
    """
    settings = _settings(ctx)
    _require_redis(settings, "gateway")
    asyncio.run(_gateway(settings, platform))


async def _gateway(settings: Settings, platform: str) -> None:
    adapter = adapter_for(platform, settings)
    async with backends(settings) as found:
        runner = Gateway(adapter, found.bus)
        leadership = _poller_leadership(settings, platform, adapter, runner.consumer)
        stopped = asyncio.Event()

        async def stop() -> None:
            stopped.set()
            await runner.stop()

        _on_signals(lambda: [stop()])
        if leadership is None:
            await runner.run()
            return
        acquiring = asyncio.create_task(leadership.acquire())
        await asyncio.wait(
            {acquiring, asyncio.create_task(stopped.wait())}, return_when=asyncio.FIRST_COMPLETED
        )
        if not acquiring.done():
            acquiring.cancel()
            return
        try:
            running = asyncio.create_task(runner.run())
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


def _poller_leadership(
    settings: Settings, platform: str, adapter: ChannelAdapter, owner: str
) -> Leadership | None:
    if platform != "telegram" or settings.telegram_webhook_url:
        return None
    import redis.asyncio as aioredis

    from core.leader import Leadership

    assert settings.redis_url is not None
    client = aioredis.Redis.from_url(settings.redis_url)
    bot = getattr(adapter, "bot_key", "bot")
    return Leadership(client, f"telegram-poller:{bot}", owner=owner)


@cli.command()
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
    goes to another worker.
    """
    settings = _settings(ctx, profile=profile)
    _require_redis(settings, "worker")
    asyncio.run(_worker(settings, concurrency))


async def _worker(settings: Settings, concurrency: int | None) -> None:
    profile = load_profile(settings.profiles_dir, settings.profile)
    async with backends(settings) as found:
        async with worker_for(settings, profile, found, concurrency=concurrency) as parts:
            _on_signals(lambda: [parts.worker.stop(grace=30.0)])
            log.info("worker %s taking work", parts.worker.name)
            await parts.worker.run()
            await parts.worker.stop(grace=30.0)


@cli.command()
@click.pass_context
def health(ctx: click.Context) -> None:
    """Check that the store (and with REDIS_URL, Redis) answers; exit 0 when healthy.

    Meant for container health checks and supervisors: one line, exit 1 on failure.
    """
    settings = _settings(ctx)
    asyncio.run(_health(settings))


async def _health(settings: Settings) -> None:
    async with backends(settings) as found:
        await found.store.list_sessions(limit=1)
        if found.distributed:
            await found.bus.publish(EVENTS_TOPIC, _health_event())
    where = "redis" if settings.redis_url else str(settings.database_path)
    click.echo(f"ok: store and bus answer ({where})")


def _health_event() -> EventEnvelope:
    return EventEnvelope(name="health.check", session_id="", run_id="")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
def events(ctx: click.Context, as_json: bool) -> None:
    """Print lifecycle events from the Redis bus as they happen (Ctrl-C stops).

    agent.run.start, agent.run.complete (with duration, usage and cost), agent.run.error,
    tool.request and tool.result, from every worker.
    """
    settings = _settings(ctx)
    _require_redis(settings, "events")
    asyncio.run(_events(settings, as_json))


async def _events(settings: Settings, as_json: bool) -> None:
    async with backends(settings) as found:
        subscription = await found.bus.subscribe(EVENTS_TOPIC)
        stopped = asyncio.Event()
        _on_signals(lambda: [_set(stopped)])
        reader = asyncio.create_task(_print_events(subscription, as_json))
        await asyncio.wait(
            {reader, asyncio.create_task(stopped.wait())}, return_when=asyncio.FIRST_COMPLETED
        )
        reader.cancel()
        await subscription.aclose()


async def _set(event: asyncio.Event) -> None:
    event.set()


async def _print_events(subscription: Subscription, as_json: bool) -> None:
    async for envelope in subscription:
        if not isinstance(envelope, EventEnvelope):
            continue
        if as_json:
            click.echo(envelope.model_dump_json())
            continue
        data = envelope.data
        details = " ".join(
            f"{k}={data[k]}" for k in ("platform", "name", "duration_ms", "cost_usd") if k in data
        )
        click.echo(
            f"{envelope.at:%H:%M:%S} {envelope.name:<20} {envelope.session_key} {details}".rstrip()
        )


@cli.command()
@click.option("--session", "session_id", metavar="ID", help="Only this session (an id).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.pass_context
def cost(ctx: click.Context, session_id: str | None, limit: int) -> None:
    """Show what conversations have cost: model calls, tokens and USD, from the ledger.

    A model without a known price is counted apart: its calls make the real total higher.
    """
    settings = _settings(ctx)
    asyncio.run(_cost(settings, session_id, limit))


async def _cost(settings: Settings, session_id: str | None, limit: int) -> None:
    async with open_store(settings) as store:
        if session_id is not None:
            if await store.get_session(session_id) is None:
                raise ConfigError(f"no session {session_id!r} (see `switchboard sessions list`)")
            rows = [await store.cost_summary(session_id)]
        else:
            rows = await store.costs_by_session(limit=limit)
        total = await store.cost_summary(session_id)
        keys = {r.session_id: await store.get_session(r.session_id or "") for r in rows}
    console = _stdout()
    if total.calls == 0:
        console.print("Nothing spent yet: no model calls are recorded.", markup=False)
        return
    table = Table(
        "session",
        "key",
        "calls",
        "tokens in",
        "out",
        "cache read",
        "cache write",
        "USD",
        box=None,
        pad_edge=False,
    )
    for row in [*rows, total]:
        record = keys.get(row.session_id) if row is not total else None
        usage = row.usage
        table.add_row(
            row.session_id if row is not total else "total",
            record.key if record else "",
            str(row.calls),
            f"{usage.input_tokens:,}",
            f"{usage.output_tokens:,}",
            f"{usage.cache_read_tokens:,}",
            f"{usage.cache_write_tokens:,}",
            _money(row.cost_usd, row.unpriced_calls),
        )
    console.print(table)
    if total.unpriced_calls:
        console.print(
            f"{total.unpriced_calls} call(s) used a model without a known price; "
            "their cost is not included.",
            style="yellow",
            markup=False,
        )


def _money(amount: float, unpriced: int) -> str:
    text = format_usd(amount)
    return f"{text} + unknown" if unpriced else text


def _stdout() -> Console:
    """A console for tables: the terminal's width, or wide enough not to cut when piped."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


@cli.group()
def sessions() -> None:
    """Look at stored conversations."""


@sessions.command("list")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.pass_context
def sessions_list(ctx: click.Context, limit: int) -> None:
    """List conversations, most recent first."""
    settings = _settings(ctx)
    asyncio.run(_sessions_list(settings, limit))


async def _sessions_list(settings: Settings, limit: int) -> None:
    async with open_store(settings) as store:
        records = await store.list_sessions(limit=limit)
    console = _stdout()
    if not records:
        console.print("No conversations yet. Start one with: switchboard chat", markup=False)
        return
    table = Table("id", "key", "messages", "updated (UTC)", box=None, pad_edge=False)
    for record in records:
        table.add_row(
            record.id,
            record.key,
            str(record.message_count),
            f"{record.updated_at:%Y-%m-%d %H:%M:%S}",
        )
    console.print(table)


@sessions.command("show")
@click.argument("session_id")
@click.pass_context
def sessions_show(ctx: click.Context, session_id: str) -> None:
    """Print the messages of one conversation."""
    settings = _settings(ctx)
    asyncio.run(_sessions_show(settings, session_id))


async def _sessions_show(settings: Settings, session_id: str) -> None:
    async with open_store(settings) as store:
        record = await store.get_session(session_id)
        if record is None:
            raise ConfigError(f"no session {session_id!r} (see `switchboard sessions list`)")
        messages = await store.list_messages(session_id)
    console = Console(highlight=False, soft_wrap=True)
    console.print(
        f"session {record.id} · {record.key} · {len(messages)} messages", style="bold", markup=False
    )
    for message in messages:
        console.print(_render(message), markup=False)


def _render(message: Message) -> str:
    stamp = f"{message.created_at:%H:%M:%S}" if message.created_at else ""
    head = f"[{message.seq}] {stamp} {message.role}"
    lines = []
    if message.text:
        lines.append(message.text)
    lines.extend(f"→ {call.name}({call.arguments})" for call in message.tool_calls)
    if message.images:
        lines.append(f"({len(message.images)} image(s))")
    if message.role == "tool":
        head += f" {message.name}{' (error)' if message.is_error else ''}"
    return f"{head}: " + "\n    ".join(lines or ["(empty)"])


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: runs the CLI and turns every failure into one line and an exit code."""
    try:
        cli.main(args=argv, prog_name="switchboard", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(0)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "switchboard"
        click.echo(f"{where}: {exc.format_message()} (see '{where} --help')", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"switchboard: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("", err=True)
        sys.exit(130)
    except SwitchboardError as exc:
        click.echo(f"switchboard: error: {exc}", err=True)
        sys.exit(1)
    except Exception as exc:
        log.debug("unexpected failure", exc_info=True)
        click.echo(
            f"switchboard: unexpected error: {type(exc).__name__}: {exc} "
            "(run with --log-level debug for details)",
            err=True,
        )
        sys.exit(1)
