"""`switchboard deadletters list|show|replay|drop`: work the bus gave up on.

An entry delivered `max_deliveries` times without an ack (a reply Telegram kept refusing, a
receipt whose handling failed every time) is parked in its queue's dead letters: rows of the
SQLite file in the embedded deployment, a `<queue>:dead` stream in Redis. These commands look
at every queue this bot has: `receipts` and `outbound.<platform>` of each platform. (Inbound
work waits in its session's mailbox instead; a message whose turn failed `attempts` times is
answered with an apology and dropped by the worker.)
"""

from __future__ import annotations

import asyncio
import json

import click

from bots.app import backends
from bots.commands.common import AS_JSON, echo_json, listing, settings_from, stdout, whole, wrapped
from bots.commands.where import require_data
from bots.platforms import REGISTERED
from bots.settings import Settings
from core.bus.base import Bus, DeadLetter
from core.bus.dead_letters import replay_dead_letter
from core.bus.names import RECEIPTS, outbound_queue
from core.envelopes import Inbound, Outbound, Receipt
from core.errors import ConfigError

__all__ = ["deadletters"]

_QUEUE_HELP = "Only this queue (receipts, outbound.<platform>)."


def queues() -> list[str]:
    """Every queue of this bot that can hold dead letters."""
    return [RECEIPTS, *(outbound_queue(spec.name) for spec in REGISTERED.specs)]


def _check_queue(queue: str | None) -> list[str]:
    known = queues()
    if queue is None:
        return known
    if queue not in known:
        raise ConfigError(f"no queue {queue!r}; use one of {', '.join(known)}")
    return [queue]


def summary(entry: DeadLetter) -> tuple[str, str, str]:
    """What the entry is, where it was going, and the start of its text."""
    envelope = entry.envelope
    if envelope is None:
        return "undecodable", "-", ""
    if isinstance(envelope, Outbound):
        return f"outbound {envelope.kind}", str(envelope.address), envelope.text
    if isinstance(envelope, Inbound):
        return f"inbound {envelope.origin}", str(envelope.address), envelope.text
    if isinstance(envelope, Receipt):
        outbound = envelope.outbound
        return f"receipt {envelope.status}", str(outbound.address), outbound.text
    return envelope.type, "-", ""


@click.group()
def deadletters() -> None:
    """List, show, replay or drop entries the bus gave up on (dead letters).

    A queue entry that failed `max_deliveries` times (5) is parked instead of retried forever.
    `replay` queues it again as new work (a notification: delivered again, and its schedule
    run updated from the new receipt); `drop` forgets it.
    """


@deadletters.command("list")
@click.option("--queue", help=_QUEUE_HELP)
@AS_JSON
@click.pass_context
def list_(ctx: click.Context, queue: str | None, as_json: bool) -> None:
    """List the dead letters of every queue (or one), oldest first."""
    settings = settings_from(ctx)
    names = _check_queue(queue)
    require_data(settings)
    asyncio.run(_list(settings, names, as_json))


async def _list(settings: Settings, names: list[str], as_json: bool) -> None:
    scrub = settings.redactor()
    async with backends(settings) as found:
        entries = [entry for name in names for entry in await found.bus.dead_letter_entries(name)]
    if as_json:
        # What the table shows, the text whole; `deadletters show ID` gives the envelope.
        listed = []
        for entry in entries:
            what, where, text = summary(entry)
            listed.append(
                {
                    "queue": entry.queue,
                    "id": entry.id,
                    "deliveries": entry.deliveries,
                    "reason": scrub(entry.reason),
                    "what": what,
                    "to": where,
                    "text": scrub(text),
                }
            )
        echo_json(listed)
        return
    console = stdout()
    if not entries:
        console.print("No dead letters.", markup=False)
        return
    table = listing(
        whole("queue"), whole("id"), whole("tries"), wrapped("what"), wrapped("to"), wrapped("text")
    )
    for entry in entries:
        what, where, text = summary(entry)
        preview = scrub(text)[:60].replace("\n", " ")
        table.add_row(entry.queue, entry.id, str(entry.deliveries), what, where, preview)
    console.print(table)


@deadletters.command()
@click.argument("entry_id", metavar="ID")
@click.option("--queue", help=_QUEUE_HELP)
@click.pass_context
def show(ctx: click.Context, entry_id: str, queue: str | None) -> None:
    """Show one dead letter whole (as JSON, secrets scrubbed)."""
    settings = settings_from(ctx)
    names = _check_queue(queue)
    require_data(settings)
    asyncio.run(_show(settings, entry_id, names))


async def _show(settings: Settings, entry_id: str, names: list[str]) -> None:
    async with backends(settings) as found:
        entry = await _find(found.bus, entry_id, names)
    body = entry.envelope.model_dump(mode="json") if entry.envelope is not None else None
    shown = {
        "queue": entry.queue,
        "id": entry.id,
        "deliveries": entry.deliveries,
        "reason": entry.reason,
        "envelope": settings.redactor().data(body),
    }
    click.echo(json.dumps(shown, indent=2, ensure_ascii=False))


@deadletters.command()
@click.argument("entry_id", metavar="ID")
@click.option("--queue", help=_QUEUE_HELP)
@click.pass_context
def replay(ctx: click.Context, entry_id: str, queue: str | None) -> None:
    """Queue a dead letter again as new work, and remove it from the dead letters."""
    settings = settings_from(ctx)
    names = _check_queue(queue)
    require_data(settings)
    asyncio.run(_replay(settings, entry_id, names))


async def _replay(settings: Settings, entry_id: str, names: list[str]) -> None:
    async with backends(settings) as found:
        entry = await _find(found.bus, entry_id, names)
        try:
            new_id = await replay_dead_letter(found.bus, entry)
        except LookupError as exc:
            raise ConfigError(str(exc)) from None
    click.echo(f"Replayed {entry.id} on {entry.queue} (queued as {new_id}).")


@deadletters.command()
@click.argument("entry_id", metavar="ID")
@click.option("--queue", help=_QUEUE_HELP)
@click.pass_context
def drop(ctx: click.Context, entry_id: str, queue: str | None) -> None:
    """Forget a dead letter for good."""
    settings = settings_from(ctx)
    names = _check_queue(queue)
    require_data(settings)
    asyncio.run(_drop(settings, entry_id, names))


async def _drop(settings: Settings, entry_id: str, names: list[str]) -> None:
    async with backends(settings) as found:
        entry = await _find(found.bus, entry_id, names)
        if not await found.bus.drop_dead_letter(entry.queue, entry.id):
            raise ConfigError(f"dead letter {entry.id} on {entry.queue} is already gone")
    click.echo(f"Dropped {entry.id} from {entry.queue}.")


async def _find(bus: Bus, entry_id: str, names: list[str]) -> DeadLetter:
    """The dead letter with this id; `ConfigError` when none or several queues have it."""
    matches = [
        entry
        for name in names
        for entry in await bus.dead_letter_entries(name)
        if entry.id == entry_id
    ]
    if not matches:
        raise ConfigError(f"no dead letter {entry_id!r} (see `switchboard deadletters list`)")
    if len(matches) > 1:
        where = ", ".join(entry.queue for entry in matches)
        raise ConfigError(f"{entry_id!r} is a dead letter of {where}: say which with --queue")
    return matches[0]
