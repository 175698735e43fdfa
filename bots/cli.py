"""The `switchboard` command line."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import click
from pydantic import ValidationError

from bots.commands.chat import chat, cost, sessions
from bots.commands.deadletters import deadletters
from bots.commands.doctor import doctor
from bots.commands.memory import memory
from bots.commands.notify import hooks, notify
from bots.commands.pairing import pairing
from bots.commands.processes import events, gateway, health, scheduler, serve, worker
from bots.commands.prompt import prompt
from bots.commands.recover import recover
from bots.commands.schedule import schedule
from bots.commands.status import status
from bots.commands.web import web
from bots.logs import LogLevels
from core.errors import ConfigError, SwitchboardError

__all__ = ["cli", "main"]

log = logging.getLogger("switchboard")


def _check_log_level(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        try:
            LogLevels.parse(value)
        except ConfigError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    """Switchboard: one LLM agent runtime for Discord, Telegram, Slack and the terminal.

    Settings come from environment variables (and a .env file): SWITCHBOARD_DATA_DIR,
    SWITCHBOARD_PROFILE, SWITCHBOARD_PROVIDER, SWITCHBOARD_MODEL, the providers' API keys and
    the platforms' tokens. Per-bot behaviour lives in profiles/<name>/profile.toml.
    """
    ctx.obj = {"log_level": log_level}


for command in (chat, serve, gateway, worker, scheduler, schedule, sessions, cost, health, events):
    cli.add_command(command)
cli.add_command(prompt)
cli.add_command(memory)
cli.add_command(recover)
cli.add_command(doctor)
cli.add_command(pairing)
cli.add_command(web)
cli.add_command(deadletters)
cli.add_command(notify)
cli.add_command(hooks)
cli.add_command(status)


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
    except ValidationError as exc:
        # A value that got past the options' own checks: one line, not pydantic's report.
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or exc.title
        click.echo(f"switchboard: error: {where}: {first['msg']}", err=True)
        sys.exit(1)
    except Exception as exc:
        log.debug("unexpected failure", exc_info=True)
        click.echo(
            f"switchboard: unexpected error: {type(exc).__name__}: {exc} "
            "(run with --log-level debug for details)",
            err=True,
        )
        sys.exit(1)
