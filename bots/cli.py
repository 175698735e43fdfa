"""The `switchboard` command line.

Commands are imported when they run, not when the program starts: `switchboard --help` and
`switchboard chat` would otherwise import every command's dependencies (the SDKs, aiohttp,
redis, the web page...) before doing anything. A new command goes in `LAZY_COMMANDS` (its
module, the object's name, and the first paragraph of its help, which `--help` lists without
importing it; a test checks the copy matches). `cli.add_command(...)` still works for a
command already imported, but puts its module's imports back on every start.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence
from typing import NamedTuple

import click

from bots.logs import LogLevels
from core.errors import ConfigError, SwitchboardError

__all__ = ["LAZY_COMMANDS", "LazyCommand", "LazyGroup", "cli", "main"]

log = logging.getLogger("switchboard")


class LazyCommand(NamedTuple):
    """Where a command lives, and its summary for the command list of `--help`."""

    module: str
    name: str
    summary: str


LAZY_COMMANDS: dict[str, LazyCommand] = {
    "chat": LazyCommand(
        "bots.commands.chat",
        "chat",
        "Chat in the terminal with the embedded runtime (SQLite, queues of its own).",
    ),
    "cost": LazyCommand(
        "bots.commands.chat",
        "cost",
        "Show what conversations have cost: model calls, tokens and USD, from the ledger.",
    ),
    "db": LazyCommand(
        "bots.commands.db",
        "db",
        "Look at or upgrade the schema of the records' database.",
    ),
    "deadletters": LazyCommand(
        "bots.commands.deadletters",
        "deadletters",
        "List, show, replay or drop entries the bus gave up on (dead letters).",
    ),
    "doctor": LazyCommand(
        "bots.commands.doctor",
        "doctor",
        "Check that this bot can run and is safe to put in front of strangers.",
    ),
    "events": LazyCommand(
        "bots.commands.processes",
        "events",
        "Print lifecycle events from the Redis bus as they happen (Ctrl-C stops).",
    ),
    "gateway": LazyCommand(
        "bots.commands.processes",
        "gateway",
        "Run one platform's adapter alone against the Redis bus (distributed deployment).",
    ),
    "health": LazyCommand(
        "bots.commands.processes",
        "health",
        "Check that the store (and with REDIS_URL, Redis) answers; exit 0 when healthy.",
    ),
    "handback": LazyCommand(
        "bots.commands.takeover",
        "handback",
        "Give the chat ADDRESS back to the bot.",
    ),
    "hooks": LazyCommand(
        "bots.commands.notify",
        "hooks",
        "Run the HTTP hooks listener alone (POST /hooks/notify and /hooks/agent).",
    ),
    "memory": LazyCommand(
        "bots.commands.memory",
        "memory",
        "Look at and forget what the bot remembers about a person (`remember` in a chat).",
    ),
    "notify": LazyCommand(
        "bots.commands.notify",
        "notify",
        "Deliver TEXT to ADDRESS as it is, or with --prompt the answer of a turn.",
    ),
    "pairing": LazyCommand(
        "bots.commands.pairing",
        "pairing",
        "Let people in who asked with a pairing code, or keep them out.",
    ),
    "people": LazyCommand(
        "bots.commands.people",
        "people",
        "Export or erase everything kept about one person (a data request).",
    ),
    "playbook": LazyCommand(
        "bots.commands.playbook",
        "playbook",
        "List or clear the tool sequences a bot learned worked (its playbook).",
    ),
    "prompt": LazyCommand(
        "bots.commands.prompt",
        "prompt",
        "Print the system prompt a turn on CHANNEL would send, exactly, with today's date.",
    ),
    "recover": LazyCommand(
        "bots.commands.recover",
        "recover",
        "List the turns a crash left unfinished, finish one, or abandon them all.",
    ),
    "schedule": LazyCommand(
        "bots.commands.schedule",
        "schedule",
        "Run a prompt later or again and again; its answers go to a chat.",
    ),
    "scheduler": LazyCommand(
        "bots.commands.processes",
        "scheduler",
        "Fire due schedules into their sessions' mailboxes in Redis (distributed deployment).",
    ),
    "reload": LazyCommand(
        "bots.commands.reload",
        "reload",
        "Make the running processes read their profile again (SOUL.md, skills, knowledge...).",
    ),
    "serve": LazyCommand(
        "bots.commands.processes",
        "serve",
        "Run every chat platform that has a token, with a worker, in one process.",
    ),
    "sessions": LazyCommand(
        "bots.commands.chat", "sessions", "Look at stored conversations, fork one, switch a chat."
    ),
    "status": LazyCommand(
        "bots.commands.status",
        "status",
        "List the running processes (role, host, pid, version, last heartbeat) and the queues.",
    ),
    "takeover": LazyCommand(
        "bots.commands.takeover",
        "takeover",
        "Take the chat ADDRESS over: the bot stores what people write there and answers nothing.",
    ),
    "web": LazyCommand(
        "bots.commands.web",
        "web",
        "Serve the local web page: chat, live events, schedules, sessions and costs.",
    ),
    "worker": LazyCommand(
        "bots.commands.processes",
        "worker",
        "Answer messages from the Redis bus (distributed deployment); run as many as needed.",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands in `LAZY_COMMANDS` are imported the first time they are used;
    its `--help` lists them from their summaries without importing any."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            where = LAZY_COMMANDS[cmd_name]
            command = getattr(importlib.import_module(where.module), where.name)
            if not isinstance(command, click.Command):
                raise TypeError(f"{where.module}.{where.name} is not a click command")
            self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None and name in LAZY_COMMANDS:
                # A stand-in with the same first paragraph gives the same shortened line.
                command = click.Command(name, help=LAZY_COMMANDS[name].summary)
            if command is not None and not command.hidden:
                listed.append((name, command))
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        with formatter.section("Commands"):
            formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in listed])


def _check_log_level(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        try:
            LogLevels.parse(value)
        except ConfigError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--log-level",
    metavar="LEVEL[,NAME=LEVEL]",
    callback=_check_log_level,
    default=None,
    help="Log detail on stderr: debug, info, warning or error, then optional NAME=LEVEL "
    "pairs (libraries=debug for third-party libraries). Default: SWITCHBOARD_LOG_LEVEL or "
    "warning.",
)
@click.version_option(package_name="switchboard", prog_name="switchboard")
@click.pass_context
def cli(ctx: click.Context, log_level: str | None) -> None:
    """Switchboard: one LLM agent runtime for Discord, Telegram, Slack, the terminal and a web page.

    Settings come from environment variables (and a .env file): SWITCHBOARD_DATA_DIR,
    SWITCHBOARD_PROFILE, SWITCHBOARD_PROVIDER, SWITCHBOARD_MODEL, the providers' API keys and
    the platforms' tokens. Per-bot behaviour lives in profiles/<name>/profile.toml.
    """
    ctx.obj = {"log_level": log_level}


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
        invalid = _invalid_value(exc)
        if invalid is not None:
            # A value that got past the options' own checks: one line, not pydantic's report.
            click.echo(f"switchboard: error: {invalid}", err=True)
            sys.exit(1)
        log.debug("unexpected failure", exc_info=True)
        click.echo(
            f"switchboard: unexpected error: {type(exc).__name__}: {exc} "
            "(run with --log-level debug for details)",
            err=True,
        )
        sys.exit(1)


def _invalid_value(exc: Exception) -> str | None:
    """`where: what` when `exc` is pydantic's ValidationError, else None. Pydantic is only
    looked at if a command imported it (one that did not cannot have raised its error), so
    the commands that never need it do not pay for importing it."""
    if "pydantic" not in sys.modules:
        return None
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or exc.title
    return f"{where}: {first['msg']}"
