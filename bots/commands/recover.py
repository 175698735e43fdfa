"""`switchboard recover`: turns a crash cut off, listed, resumed here, or abandoned."""

from __future__ import annotations

import asyncio

import click

from bots.app import embedded, open_store
from bots.commands.common import listing, settings_from, stdout, whole, wrapped
from bots.commands.where import STORE_EPILOG, describe_store, require_data
from bots.loop import stop_on_sigterm
from bots.profiles import load_profile
from bots.settings import Settings
from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.checkpoints import Checkpoint
from core.envelopes import Outbound
from core.errors import ConfigError
from core.store.checkpoints import CheckpointStore

__all__ = ["recover"]


@click.command(epilog=STORE_EPILOG)
@click.option(
    "--resume",
    "run_key",
    metavar="RUN_KEY",
    help="Finish this turn here, through the runtime, and print its answer.",
)
@click.option(
    "--abandon-all", is_flag=True, help="Mark every unfinished turn abandoned (no notice sent)."
)
@click.option("--provider", help="Model provider for --resume: anthropic, openai or demo.")
@click.option("--model", help="Model name for --resume.")
@click.option("--profile", help="Profile folder under profiles/ (default: default).")
@click.pass_context
def recover(
    ctx: click.Context,
    run_key: str | None,
    abandon_all: bool,
    provider: str | None,
    model: str | None,
    profile: str | None,
) -> None:
    """List the turns a crash left unfinished, finish one, or abandon them all.

    A worker that starts does this by itself, per the profile's `on_crash` (resume or
    abandon); this command is for doing it by hand.
    """
    if run_key is not None and abandon_all:
        raise click.UsageError("--resume and --abandon-all cannot be used together")
    settings = settings_from(ctx, provider=provider, model=model, profile=profile)
    require_data(settings)
    if run_key is not None:
        asyncio.run(stop_on_sigterm(_resume(settings, run_key)))  # it may start MCP servers
    elif abandon_all:
        asyncio.run(_abandon_all(settings))
    else:
        asyncio.run(_list(settings))


async def _list(settings: Settings) -> None:
    async with open_store(settings) as store:
        found = await store.incomplete_checkpoints()
    console = stdout()
    if not found:
        console.print(
            f"No unfinished turns. The store is {describe_store(settings)}.", markup=False
        )
        return
    table = listing(
        whole("run key"),
        wrapped("session key"),
        whole("started (UTC)"),
        whole("tool rounds"),
        wrapped("message"),
    )
    for checkpoint in found:
        table.add_row(
            checkpoint.run_key,
            checkpoint.inbound.session_key,
            f"{checkpoint.started_at:%Y-%m-%d %H:%M:%S}",
            str(checkpoint.tool_rounds),
            _excerpt(checkpoint.inbound.text),
        )
    console.print(table)


async def _abandon_all(settings: Settings) -> None:
    async with open_store(settings) as store:
        found = await store.incomplete_checkpoints()
        for checkpoint in found:
            await store.finish_checkpoint(checkpoint.run_key, "abandoned")
    click.echo(
        f"Abandoned {len(found)} unfinished turn{'' if len(found) == 1 else 's'}. "
        "Their users were not told: this command has no connection to the chat platforms."
    )


async def _resume(settings: Settings, run_key: str) -> None:
    async with open_store(settings) as store:
        inbound = (await _running(store, run_key)).inbound
    profile = await asyncio.to_thread(load_profile, settings.profiles_dir, settings.profile)
    # The work stays in this process: its queues are the chat's own even with REDIS_URL.
    async with embedded(settings, profile, own_queues=True) as parts:
        if await parts.store.is_processed(run_key):
            await parts.store.finish_checkpoint(run_key, "completed")
            click.echo(f"Turn {run_key} was already answered; marked completed.")
            return
        await parts.worker.handler.handle(inbound, cancel=asyncio.Event())
        answer = await _answer(parts.bus, inbound.address.platform, inbound.id)
        finished = await parts.store.get_checkpoint(run_key)
    if answer is None or finished is None or finished.status == "running":
        raise ConfigError(f"turn {run_key} did not finish; it stays unfinished")
    click.echo(answer.text)
    if inbound.address.platform != "terminal":
        click.echo(
            f"(printed here only: this process does not deliver to {inbound.address.platform})",
            err=True,
        )


async def _running(store: CheckpointStore, run_key: str) -> Checkpoint:
    """The unfinished turn `run_key`; `ConfigError` when there is none."""
    found = await store.get_checkpoint(run_key)
    if found is None:
        raise ConfigError(f"no turn {run_key!r} (see `switchboard recover`)")
    if found.status != "running":
        raise ConfigError(f"turn {run_key!r} is not unfinished: it was {found.status}")
    return found


async def _answer(bus: Bus, platform: str, inbound_id: str) -> Outbound | None:
    """The last reply or notice the turn sent, read off this process's own outbound queue."""
    queue = outbound_queue(platform)
    answer: Outbound | None = None
    while (delivery := await bus.receive(queue, consumer="recover", timeout=0)) is not None:
        await delivery.ack()
        sent = delivery.envelope
        if isinstance(sent, Outbound) and sent.reply_to == inbound_id and sent.ends_turn:
            answer = sent
    return answer


def _excerpt(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
