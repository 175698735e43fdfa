"""`switchboard schedule`: add, list, pause, resume, remove schedules and see their runs."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any, Final

import click

from bots.app import open_store
from bots.commands.common import AS_JSON, echo_json, listing, settings_from, stdout, whole, wrapped
from bots.commands.where import STORE_EPILOG, describe_store, require_data
from bots.platforms import REGISTERED
from bots.settings import Settings
from core.clock import utc_now
from core.envelopes import Address
from core.errors import ConfigError, StoreError
from core.notifications.receipts import delivery_summary
from core.scheduling.book import ScheduleBook
from core.scheduling.cadence import (
    CadenceError,
    make_cron,
    parse_at,
    parse_duration,
    parse_timezone,
)
from core.scheduling.misses import miss_window
from core.scheduling.models import Cadence, IntervalCadence, OnceCadence, Schedule, ScheduleRun
from core.scheduling.rules import FLOOR_SECONDS, ScheduleRefused, check_gap
from core.scheduling.tools import describe_cadence

__all__ = ["schedule"]

# Delivery addresses as each registered platform writes them.
_ADDRESSES = REGISTERED.addresses()

# `schedule list` narrower than this leaves out these columns.
_WIDE: Final = 100
_NARROW_OUT: Final = frozenset({"policy", "failures"})


@click.group(
    help="Run a prompt later or again and again; its answers go to a chat.\n\n"
    f"Addresses: {_ADDRESSES.usage()}. `switchboard serve` (or `switchboard scheduler` with "
    "Redis) fires them; `terminal` ones fire in `switchboard chat`."
)
def schedule() -> None:
    """Run a prompt later or again and again; its answers go to a chat."""


@schedule.command("add", epilog=STORE_EPILOG)
@click.option(
    "--at",
    "at",
    metavar="TIME",
    help="Once, at this time, read in --tz: 2026-06-01T09:00, 'tomorrow 9:00', 'friday 17:30'.",
)
@click.option("--in", "after", metavar="DURATION", help="Once, after this long: 10m, 2h, 1.5h...")
@click.option("--every", metavar="DURATION", help="Repeatedly: every 30s, 5m, 90m, 2 hours, 1d...")
@click.option("--cron", metavar="EXPR", help="At the times of a 5-field cron expression.")
@click.option(
    "--tz",
    metavar="ZONE",
    help="IANA timezone for --at and --cron (default UTC); refused with --every and --in, "
    "which count from now.",
)
@click.option("--prompt", required=True, help="What to ask the model at each run.")
@click.option(
    "--deliver-to",
    "deliver_to",
    required=True,
    metavar="ADDRESS",
    help=f"Chat: {_ADDRESSES.usage()}.",
)
@click.option(
    "--policy",
    type=click.Choice(["always", "conditional", "never"]),
    default="always",
    show_default=True,
    help="conditional: deliver only answers starting with [NOTIFY].",
)
@click.option(
    "--misfire",
    type=click.Choice(["skip", "run_once"]),
    help="A run due while nothing could fire it: run_once runs it late (once) within the "
    "grace window, skip drops it. Default: run_once for --at and --in, skip for --every "
    "and --cron.",
)
@click.option(
    "--grace",
    metavar="DURATION",
    help="How late a run_once run may still start (default 24h for --at and --in, 5m for "
    "--every and --cron).",
)
@click.pass_context
def add(ctx: click.Context, /, **options: Any) -> None:
    """Add a schedule."""
    settings = settings_from(ctx)
    if not options["prompt"].strip():
        raise ConfigError("--prompt: the prompt is empty; say what to ask at each run")
    _cadence(options)  # bad input is refused before the store is opened
    try:
        address = _ADDRESSES.parse(options["deliver_to"])
    except ValueError as exc:
        raise ConfigError(f"--deliver-to: {exc}") from None
    if options["grace"] is not None:
        if options["misfire"] == "skip":
            raise ConfigError("--grace applies to --misfire run_once; skip runs only on time")
        try:
            options["grace"] = parse_duration(options["grace"])
        except CadenceError as exc:
            raise ConfigError(f"--grace: {exc}") from None
        options["misfire"] = "run_once"  # a grace is only for runs that may come late
    asyncio.run(_add(settings, options, address))


def _cadence(options: dict[str, Any]) -> Cadence:
    """The cadence `--at`, `--in`, `--every` or `--cron` asks for, counted from now."""
    at, after, every, cron, tz = (options[name] for name in ("at", "after", "every", "cron", "tz"))
    choices = (("--at", at), ("--in", after), ("--every", every), ("--cron", cron))
    given = [name for name, value in choices if value is not None]
    if len(given) != 1:
        raise ConfigError("give exactly one of --at, --in, --every or --cron")
    try:
        zone = parse_timezone(tz if tz is not None else "UTC").key
    except CadenceError as exc:
        raise ConfigError(f"--tz: {exc}") from None
    if tz is not None and given[0] in ("--every", "--in"):
        # Refused rather than ignored: a duration counts from now, whatever the zone.
        raise ConfigError(f"--tz applies to --at and --cron only; {given[0]} counts from now")
    now = utc_now()
    try:
        cadence: Cadence
        if every is not None:
            cadence = IntervalCadence(seconds=parse_duration(every), start=now)
        elif at is not None:
            cadence = OnceCadence(at=parse_at(at, tz=zone, now=now), timezone=zone)
        elif after is not None:
            cadence = OnceCadence(at=now + timedelta(seconds=parse_duration(after)))
        else:
            assert cron is not None
            cadence = make_cron(cron, zone)
        # The operator may schedule closer than chat users, down to the floor.
        check_gap(cadence, FLOOR_SECONDS, now)
    except (CadenceError, ScheduleRefused) as exc:
        raise ConfigError(f"{given[0]}: {exc}") from None
    return cadence


async def _add(settings: Settings, options: dict[str, Any], to: Address) -> None:
    async with open_store(settings) as store:
        # Counted from now that the store is open: `--in 1s` is not past already because
        # opening (and upgrading) the database took a second.
        cadence = _cadence(options)
        try:
            made = await ScheduleBook(store).create(
                cadence=cadence,
                prompt=options["prompt"],
                deliver_to=to,
                owner="cli",
                notify=options["policy"],
                misfire=options["misfire"],
                grace_seconds=options["grace"],
            )
        except CadenceError as exc:
            raise ConfigError(str(exc)) from None
    where = _ADDRESSES.format(to)
    click.echo(
        f"Added schedule {made.id}: {describe_cadence(made.cadence)}, delivered to {where}; "
        f"next run {made.next_run_at:%Y-%m-%d %H:%M:%S} UTC."
    )


@schedule.command("list", epilog=STORE_EPILOG)
@AS_JSON
@click.pass_context
def list_schedules(ctx: click.Context, as_json: bool) -> None:
    """List every schedule."""
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_list(settings, as_json))


async def _list(settings: Settings, as_json: bool) -> None:
    async with open_store(settings) as store:
        found = await store.list_schedules()
    if as_json:
        echo_json([item.model_dump(mode="json") for item in found])
        return
    console = stdout()
    if not found:
        console.print(
            f"No schedules. The store is {describe_store(settings)}; "
            "add one with: switchboard schedule add --help",
            markup=False,
        )
        return
    # Narrower than _WIDE, the least needed columns give way (`--json` has them), so that the
    # ids and times stay whole and the text keeps some room.
    columns = {
        "id": whole,
        "cadence": wrapped,
        "deliver to": wrapped,
        "policy": wrapped,
        "status": whole,
        "next run (UTC)": whole,
        "failures": whole,
        "prompt": wrapped,
    }
    shown = [name for name in columns if console.width >= _WIDE or name not in _NARROW_OUT]
    table = listing(*(columns[name](name) for name in shown))
    for item in found:
        cells = {
            "id": item.id,
            "cadence": describe_cadence(item.cadence),
            "deliver to": _ADDRESSES.format(item.deliver_to),
            "policy": item.notify,
            "status": item.status,
            # A paused schedule keeps its stored time for resuming, but will not run then.
            "next run (UTC)": f"{item.next_run_at:%Y-%m-%d %H:%M:%S}"
            if item.next_run_at and item.status == "active"
            else "-",
            "failures": str(item.consecutive_failures),
            "prompt": item.prompt[:50],
        }
        table.add_row(*(cells[name] for name in shown))
    console.print(table)


@schedule.command("remove", epilog=STORE_EPILOG)
@click.argument("schedule_id")
@click.pass_context
def remove(ctx: click.Context, schedule_id: str) -> None:
    """Remove a schedule and its run history."""
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_remove(settings, schedule_id))


async def _remove(settings: Settings, schedule_id: str) -> None:
    async with open_store(settings) as store:
        if not await store.delete_schedule(schedule_id):
            raise ConfigError(f"no schedule {schedule_id!r} (see `switchboard schedule list`)")
    click.echo(f"Removed schedule {schedule_id}.")


@schedule.command("pause", epilog=STORE_EPILOG)
@click.argument("schedule_id")
@click.pass_context
def pause(ctx: click.Context, schedule_id: str) -> None:
    """Stop a schedule from running until it is resumed."""
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_set_status(settings, schedule_id, "paused"))


@schedule.command("resume", epilog=STORE_EPILOG)
@click.argument("schedule_id")
@click.pass_context
def resume(ctx: click.Context, schedule_id: str) -> None:
    """Run a paused (or disabled) schedule again, from its next occurrence."""
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_set_status(settings, schedule_id, "active"))


async def _set_status(settings: Settings, schedule_id: str, status: str) -> None:
    async with open_store(settings) as store:
        try:
            changed = await ScheduleBook(store).set_status(
                schedule_id, "active" if status == "active" else "paused"
            )
        except StoreError:
            raise ConfigError(
                f"no schedule {schedule_id!r} (see `switchboard schedule list`)"
            ) from None
        except CadenceError as exc:
            raise ConfigError(f"cannot resume schedule {schedule_id}: {exc}") from None
    upcoming = (
        f"; next run {changed.next_run_at:%Y-%m-%d %H:%M:%S} UTC" if changed.next_run_at else ""
    )
    click.echo(f"Schedule {schedule_id} is {changed.status}{upcoming}.")


@schedule.command("runs", epilog=STORE_EPILOG)
@click.argument("schedule_id")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.option(
    "--full",
    is_flag=True,
    help="Print each run's whole output and error as plain text instead of the table "
    "(with --limit 1, the latest run's).",
)
@AS_JSON
@click.pass_context
def runs(ctx: click.Context, schedule_id: str, limit: int, full: bool, as_json: bool) -> None:
    """Show the latest runs of a schedule with their output, runs it missed and why, and
    when it runs next (or why it does not)."""
    settings = settings_from(ctx)
    require_data(settings)
    if full and as_json:
        raise ConfigError("--full and --json cannot go together (--json has the whole output)")
    asyncio.run(_runs(settings, schedule_id, limit, as_json=as_json, full=full))


async def _runs(
    settings: Settings, schedule_id: str, limit: int, *, as_json: bool, full: bool
) -> None:
    async with open_store(settings) as store:
        schedule = await store.get_schedule(schedule_id)
        if schedule is None:
            raise ConfigError(f"no schedule {schedule_id!r} (see `switchboard schedule list`)")
        found = await store.list_runs(schedule_id, limit=limit)
    if as_json:
        echo_json([run.model_dump(mode="json") for run in found])
        return
    console = stdout()
    standing = _standing(schedule, utc_now())
    if not found:
        click.echo(f"Schedule {schedule_id} has not run yet. {standing}")
        return
    if full:
        _print_whole(found)
        click.echo(standing)
        return
    table = listing(
        whole("started (UTC)"),
        whole("status"),
        whole("ms"),
        whole("USD"),
        wrapped("delivered"),
        wrapped("output / error"),
    )
    for run in found:
        table.add_row(
            f"{run.started_at:%Y-%m-%d %H:%M:%S}",
            run.status,
            f"{run.duration_ms:.0f}" if run.duration_ms is not None else "-",
            f"{run.cost_usd:.6f}" if run.cost_usd is not None else "-",
            delivery_summary(run) if run.status != "missed" else "-",
            (run.error or run.output)[:80].replace("\n", " "),
        )
    console.print(table)
    click.echo(standing)  # not wrapped: a reason may be long


def _print_whole(found: list[ScheduleRun]) -> None:
    """Each run as a heading line and its whole output and error, as stored: plain text, no
    table or markup, nothing cut (`schedule runs --full`)."""
    for run in found:
        delivered = f", delivered: {delivery_summary(run)}" if run.status != "missed" else ""
        click.echo(
            f"== run {run.id}, {run.started_at:%Y-%m-%d %H:%M:%S} UTC: {run.status}{delivered}"
        )
        if run.error:
            click.echo(f"error: {run.error}")
        if run.output:
            click.echo(run.output)
        click.echo()


def _standing(schedule: Schedule, now: datetime) -> str:
    """One sentence on the schedule's state: when it runs next, or why it does not."""
    name = f"Schedule {schedule.id}"
    reason = f" ({schedule.status_reason})" if schedule.status_reason else ""
    match schedule.status:
        case "paused" if schedule.next_run_at is None or (
            schedule.cadence.kind == "once" and schedule.next_run_at <= now
        ):
            return f"{name} is paused{reason}, and its time has passed: it will not run."
        case "paused":
            return (
                f"{name} is paused{reason}: it runs again after "
                f"`switchboard schedule resume {schedule.id}`."
            )
        case "disabled":
            again = (
                ""
                if schedule.cadence.kind == "once"
                else f"; `switchboard schedule resume {schedule.id}` turns it back on"
            )
            return f"{name} is disabled{reason}{again}."
        case "completed":
            return f"{name} is completed: its run is done."
    if schedule.next_run_at is None:
        return f"{name} has nothing left to run."
    when = f"{schedule.next_run_at:%Y-%m-%d %H:%M:%S} UTC"
    if schedule.next_run_at > now:
        return f"Next run {when}."
    fired_by = (
        "`switchboard chat` opens"
        if schedule.deliver_to.platform == "terminal"
        else "`switchboard serve` (or `switchboard scheduler`) runs"
    )
    deadline = schedule.next_run_at + miss_window(schedule)
    return (
        f"It was due at {when} and runs when {fired_by}, if that is by "
        f"{deadline:%Y-%m-%d %H:%M} UTC; later it is skipped as missed."
    )
