"""Conversations in the terminal, and what is stored: `chat`, `sessions`, `cost`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click
from rich.console import Console

from bots.app import embedded, open_store
from bots.commands.common import (
    AS_JSON,
    echo_json,
    listing,
    settings_from,
    stdout,
    whole,
    wrapped,
)
from bots.commands.costs import GROUPINGS, cost_by, cost_document, degraded_line, session_costs
from bots.commands.processes import run_with_gateways
from bots.commands.session_forks import (
    CHAT_HELP,
    chat_key,
    chat_sessions_list,
    sessions_fork,
    sessions_switch,
)
from bots.commands.where import STORE_EPILOG, describe_store, require_data
from bots.loop import stop_on_sigterm
from bots.platforms import command_registry
from bots.profiles import load_profile
from bots.providers import build_registry
from bots.settings import Settings
from channels.gateway import Gateway
from channels.terminal import SPEC as TERMINAL_SPEC
from channels.terminal import TerminalAdapter
from core.clock import utc_now
from core.envelopes import new_id
from core.errors import ConfigError, SwitchboardError
from core.messages import Message
from core.scheduling.outstanding import outstanding
from core.store.ledger import CostGrouping
from core.store.log import ConversationLog, SessionRecord
from core.store.schedules import ScheduleStore

if TYPE_CHECKING:
    pass


__all__ = ["chat", "cost", "sessions"]

# How long a piped chat waits, once its input has ended, for the answers of terminal
# reminders due by then (one model answer, tools included), and how often it looks.
_REMINDER_PATIENCE = 60.0
_REMINDER_POLL = 0.1
_TERMINAL = TERMINAL_SPEC.name
_CHAT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


@click.command()
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
    """Chat in the terminal with the embedded runtime (SQLite, queues of its own).

    Interactive on a terminal: answers stream, tool use shows as dim lines, Ctrl-C stops the
    answer being written, /new starts afresh, /quit leaves. With input piped, every line is one
    turn and each final answer is printed on stdout.
    """
    settings = settings_from(ctx, provider=provider, model=model, profile=profile)
    if provider is not None:
        # Named on the command line: a missing key is an error, not a quiet fall back to demo.
        build_registry(settings).require(provider)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    asyncio.run(stop_on_sigterm(_chat(settings, session_name, interactive)))


async def _chat(settings: Settings, session_name: str | None, interactive: bool) -> None:
    opened = utc_now()
    profile = await asyncio.to_thread(load_profile, settings.profiles_dir, settings.profile)
    # The terminal's work stays in its own queue file; history goes to the store.
    async with embedded(settings, profile, own_queues=True) as parts:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        chat_name = await _terminal_chat(parts.store, session_name, err)

        async def before_leaving() -> None:
            await _await_reminders(parts.store, opened, err)

        adapter = TerminalAdapter(
            chat=chat_name,
            interactive=interactive,
            menu=command_registry().menu(),
            before_leaving=before_leaving,
            files_dir=settings.data_dir / "files",
        )
        # Typing, progress and stream pieces go straight to the terminal; the final answer,
        # notices and files still go through the queue file (decision 0016).
        parts.worker.handler.outbox.show_here(_TERMINAL, adapter)
        if interactive:
            err.print(
                f"Switchboard · {parts.resolved.provider.name} ({parts.resolved.model}) · "
                f"profile {profile.name} · conversation {chat_name}. /help lists commands.",
                style="dim",
                markup=False,
            )
        await run_with_gateways(
            parts,
            [
                Gateway(
                    adapter,
                    parts.bus,
                    mailboxes=parts.mailboxes,
                    readiness=parts.readiness,
                    replies=parts.replies,
                )
            ],
        )
        if interactive:
            # The id, not the chat's name: after /new the name has several conversations.
            current = await parts.store.current_session(adapter.address.session_key)
            err.print(
                f"Resume this conversation with: {_own_command()} chat --session {current.id}",
                style="dim",
                markup=False,
            )
    if adapter.failed_turns and not interactive:
        turns = "turn" if adapter.failed_turns == 1 else "turns"
        raise SwitchboardError(f"{adapter.failed_turns} {turns} could not be answered (see above)")


async def _await_reminders(store: ScheduleStore, opened: datetime, err: Console) -> None:
    """At the end of piped input: wait (at most `_REMINDER_PATIENCE`) until every terminal
    schedule due by now has fired and its answer has been shown, so a reminder is never fired
    and then lost with the process."""
    now = utc_now()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _REMINDER_PATIENCE
    while owing := await outstanding(store, platform=_TERMINAL, since=opened, now=now):
        if loop.time() >= deadline:
            err.print(
                f"Leaving before the answer of scheduled task {', '.join(owing)} came "
                f"(waited {_REMINDER_PATIENCE:.0f} s); see `switchboard schedule runs "
                f"{owing[0]}`.",
                style="yellow",
                markup=False,
            )
            return
        # The answer is the model's; what it waits on is in the store, read again shortly.
        await asyncio.sleep(_REMINDER_POLL)


def _own_command() -> str:
    """How the person can run this command again: `switchboard` when that is on PATH and is
    this program, else the path it was started by (`.venv/bin/switchboard` after `make chat`)."""
    started = Path(sys.argv[0])
    on_path = shutil.which("switchboard")
    if on_path is not None and Path(on_path).resolve() == started.resolve():
        return "switchboard"
    if started.name != "switchboard":
        return "switchboard"  # run as a module or from a test: nothing better to say
    with contextlib.suppress(ValueError):
        return str(started.resolve().relative_to(Path.cwd()))
    return str(started)


async def _terminal_chat(store: ConversationLog, name: str | None, err: Console) -> str:
    """The terminal chat to talk in: a new one, the one of a stored session (made its chat's
    current conversation again, even after `/new`), or one named on the command line."""
    if name is None:
        return new_id()[:8]
    record = await store.get_session(name)
    if record is not None:
        platform, _, rest = record.key.partition(":")
        if platform != "terminal":
            raise ConfigError(f"session {name} is a {platform} conversation, not a terminal one")
        await store.reopen_session(record.id)
        return rest.partition(":")[2]
    if not name or not set(name) <= _CHAT_NAME_CHARS:
        raise ConfigError(f"--session {name!r}: use letters, digits, '_', '.' or '-'")
    current = await store.current_session(f"terminal:local:{name}")
    if current.message_count == 0:
        err.print(
            f"No conversation {name!r} yet: starting a new one by that name "
            "(`switchboard sessions list` shows the stored ones).",
            style="dim",
            markup=False,
        )
    return name


async def find_session(store: ConversationLog, name: str) -> SessionRecord | None:
    """The session `name` means, as `chat --session` reads it: a session id, a session key
    (`telegram:1:42`: that chat's current conversation), or a terminal conversation's name
    (the last part of `terminal:local:NAME`). Never creates one."""
    record = await store.get_session(name)
    if record is not None:
        return record
    if ":" in name:
        return await store.find_current_session(name)
    if name and set(name) <= _CHAT_NAME_CHARS:
        return await store.find_current_session(f"terminal:local:{name}")
    return None


_SESSION_HELP = "a session id, a session key, or the NAME of `chat --session NAME`"


@click.command(epilog=STORE_EPILOG)
@click.option(
    "--session", "session_id", metavar="SESSION", help=f"Only this session: {_SESSION_HELP}."
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--by",
    "group",
    type=click.Choice(GROUPINGS),
    help="Totals per person, chat, UTC day or model instead of per session.",
)
@AS_JSON
@click.pass_context
def cost(
    ctx: click.Context, session_id: str | None, limit: int, group: str | None, as_json: bool
) -> None:
    """Show what conversations have cost: model calls, tokens and USD, from the ledger.

    A model without a known price is counted apart: its calls make the real total higher.
    """
    if group is not None and session_id is not None:
        raise click.UsageError("--by and --session do not go together")
    settings = settings_from(ctx)
    require_data(settings)
    if group is not None:
        asyncio.run(cost_by(settings, cast("CostGrouping", group), limit, as_json=as_json))
        return
    asyncio.run(_cost(settings, session_id, limit, as_json))


async def _cost(settings: Settings, session_id: str | None, limit: int, as_json: bool) -> None:
    async with open_store(settings) as store:
        if session_id is not None:
            found = await find_session(store, session_id)
            if found is None:
                raise ConfigError(f"no session {session_id!r} (see `switchboard sessions list`)")
            session_id = found.id
            rows = [await store.cost_summary(session_id)]
        else:
            rows = await store.costs_by_session(limit=limit)
        total = await store.cost_summary(session_id)
        keys = {r.session_id: await store.get_session(r.session_id or "") for r in rows}
    if as_json:
        echo_json(cost_document(rows, total, keys))
        return
    console = stdout()
    if total.calls == 0:
        console.print(
            "Nothing spent yet: no model calls are recorded. "
            f"The store is {describe_store(settings)}.",
            markup=False,
        )
        return
    console.print(session_costs(rows, total, keys, width=console.width))
    if total.degraded_turns:
        console.print(degraded_line(total.degraded_turns), markup=False)
    if total.unpriced_calls:
        console.print(
            f"{total.unpriced_calls} call(s) used a model without a known price; "
            "their cost is not included.",
            style="yellow",
            markup=False,
        )


@click.group()
def sessions() -> None:
    """Look at stored conversations, fork one, switch a chat."""


@sessions.command("list", epilog=STORE_EPILOG)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--chat", metavar="CHAT", help=f"Only this chat's conversations. {CHAT_HELP}")
@AS_JSON
@click.pass_context
def sessions_list(ctx: click.Context, limit: int, chat: str | None, as_json: bool) -> None:
    """List conversations, most recent first (with --chat: one chat's, its current marked)."""
    settings = settings_from(ctx)
    require_data(settings)
    if chat is not None:
        asyncio.run(chat_sessions_list(settings, chat_key(chat), limit, as_json))
        return
    asyncio.run(_sessions_list(settings, limit, as_json))


async def _sessions_list(settings: Settings, limit: int, as_json: bool) -> None:
    async with open_store(settings) as store:
        records = await store.list_sessions(limit=limit)
    if as_json:
        echo_json([record.model_dump(mode="json") for record in records])
        return
    console = stdout()
    if not records:
        console.print(
            f"No conversations yet. The store is {describe_store(settings)}; "
            "start one with: switchboard chat",
            markup=False,
        )
        return
    table = listing(whole("id"), wrapped("key"), whole("messages"), whole("updated (UTC)"))
    for record in records:
        table.add_row(
            record.id,
            record.key,
            str(record.message_count),
            f"{record.updated_at:%Y-%m-%d %H:%M:%S}",
        )
    console.print(table)


sessions.add_command(sessions_fork)
sessions.add_command(sessions_switch)


@sessions.command("show", epilog=STORE_EPILOG)
@click.argument("session_id", metavar="SESSION")
@click.pass_context
def sessions_show(ctx: click.Context, session_id: str) -> None:
    """Print the messages of one conversation.

    SESSION is a session id, a session key (that chat's current conversation), or the NAME
    of `switchboard chat --session NAME`.
    """
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_sessions_show(settings, session_id))


async def _sessions_show(settings: Settings, session_id: str) -> None:
    async with open_store(settings) as store:
        record = await find_session(store, session_id)
        if record is None:
            raise ConfigError(f"no session {session_id!r} (see `switchboard sessions list`)")
        messages = await store.list_messages(record.id)
    console = Console(highlight=False, soft_wrap=True)
    console.print(
        f"session {record.id} · {record.key} · {len(messages)} messages", style="bold", markup=False
    )
    for message in messages:
        console.print(_render(message), markup=False)


@sessions.command("export", epilog=STORE_EPILOG)
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "markdown"]),
    default="json",
    show_default=True,
    help="json: the stored messages as they are; markdown: a readable transcript.",
)
@click.pass_context
def sessions_export(ctx: click.Context, session_id: str, fmt: str) -> None:
    """Write one conversation to stdout, tool calls and results included.

    SESSION is a session id, a session key (that chat's current conversation), or the NAME
    of `switchboard chat --session NAME`.
    """
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_sessions_export(settings, session_id, fmt))


async def _sessions_export(settings: Settings, session_id: str, fmt: str) -> None:
    async with open_store(settings) as store:
        record = await find_session(store, session_id)
        if record is None:
            raise ConfigError(f"no session {session_id!r} (see `switchboard sessions list`)")
        messages = await store.list_messages(record.id)
    if fmt == "json":
        document = {
            "session": record.model_dump(mode="json"),
            # Image bytes stay out: the export is for reading and archiving text.
            "messages": [
                m.model_dump(mode="json", exclude={"content"}) | {"text": m.text} for m in messages
            ],
        }
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    lines = [f"# {record.key}", "", f"Session {record.id}, {len(messages)} messages.", ""]
    for message in messages:
        lines.extend(_markdown(message))
    click.echo("\n".join(lines).rstrip())


@sessions.command("delete", epilog=STORE_EPILOG)
@click.argument("session_id", metavar="SESSION")
@click.option("--yes", is_flag=True, help="Delete without asking first.")
@click.pass_context
def sessions_delete(ctx: click.Context, session_id: str, yes: bool) -> None:
    """Delete one conversation: its messages and summaries. What it cost stays in the ledger;
    the chat's next message starts a new conversation.

    SESSION is a session id, a session key (that chat's current conversation), or the NAME
    of `switchboard chat --session NAME`.
    """
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_sessions_delete(settings, session_id, yes))


async def _sessions_delete(settings: Settings, session_id: str, yes: bool) -> None:
    where = describe_store(settings)
    async with open_store(settings) as store:
        record = await find_session(store, session_id)
        if record is None:
            raise ConfigError(f"no session {session_id!r} in {where} (see `sessions list`)")
        what = f"session {record.id} ({record.key}, {record.message_count} messages)"
        if not yes:
            if not sys.stdin.isatty():
                raise ConfigError(f"not deleting {what} without asking: pass --yes")
            asked = f"Delete {what} from {where}?"
            if not await asyncio.to_thread(click.confirm, asked, default=False):
                click.echo("Nothing deleted.")
                return
        await store.delete_session(record.id)
    click.echo(f"Deleted {what} from {where}.")


def _markdown(message: Message) -> list[str]:
    stamp = f" ({message.created_at:%Y-%m-%d %H:%M:%S} UTC)" if message.created_at else ""
    title = message.role if message.role != "tool" else f"tool {message.name}"
    lines = [f"## {title}{stamp}", ""]
    if message.text:
        lines += [message.text, ""]
    lines += [
        f"- calls `{call.name}` with `{json.dumps(call.arguments)}`" for call in message.tool_calls
    ]
    if message.images:
        lines.append(f"({len(message.images)} image(s) not exported)")
    return [*lines, ""] if message.tool_calls or message.images else lines


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
