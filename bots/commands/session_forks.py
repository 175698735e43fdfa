"""`sessions fork` and `sessions switch`, and `sessions list --chat`: what `/fork`, `/switch`
and `/sessions` do in a chat (`core/forking.py`), for an operator at the command line."""

from __future__ import annotations

import asyncio

import click

from bots.app import open_store
from bots.commands.common import echo_json, listing, settings_from, stdout, whole
from bots.commands.where import STORE_EPILOG, describe_store, require_data
from bots.settings import Settings
from core.errors import ConfigError
from core.forking import SESSION_NAME, describe, pick_session

__all__ = ["CHAT_HELP", "chat_key", "chat_sessions_list", "sessions_fork", "sessions_switch"]

CHAT_HELP = (
    "CHAT is a chat's session key (`telegram:BOT:CHAT`, as `sessions list` shows it), or the "
    "NAME of `chat --session NAME`."
)
# Every session of one chat `switch` looks among.
_SEARCHED = 1_000


def chat_key(chat: str) -> str:
    """The session key `chat` means: itself when it has a colon, else a terminal chat's name."""
    chat = chat.strip()
    if not chat:
        raise ConfigError("--chat: give a chat's session key, as `sessions list` shows it")
    return chat if ":" in chat else f"terminal:local:{chat}"


async def chat_sessions_list(settings: Settings, key: str, limit: int, as_json: bool) -> None:
    """`sessions list --chat KEY`: the chat's sessions, newest first, its current marked."""
    async with open_store(settings) as store:
        records = await store.sessions_of(key, limit=limit)
        current = await store.find_current_session(key)
    current_id = None if current is None else current.id
    if as_json:
        echo_json([r.model_dump(mode="json") | {"current": r.id == current_id} for r in records])
        return
    if not records:
        raise ConfigError(f"no conversations of {key!r} in {describe_store(settings)}")
    table = listing(
        whole("id"), whole("name"), whole("messages"), whole("started (UTC)"), whole("forked from")
    )
    for record in records:
        table.add_row(
            record.id + (" *" if record.id == current_id else ""),
            record.name or "",
            str(record.message_count),
            f"{record.created_at:%Y-%m-%d %H:%M:%S}",
            record.forked_from or "",
        )
    console = stdout()
    console.print(table)
    console.print("* the chat's current conversation", markup=False)


@click.command("fork", epilog=STORE_EPILOG)
@click.option("--chat", metavar="CHAT", required=True, help="The chat whose conversation to fork.")
@click.option("--name", metavar="NAME", help="A name for the fork, to switch to it by.")
@click.pass_context
def sessions_fork(ctx: click.Context, chat: str, name: str | None) -> None:
    """Fork a chat's current conversation: a new one starting as a copy of its history, the
    chat's current conversation from now on (the original is kept).

    CHAT is a chat's session key (`telegram:BOT:CHAT`, as `sessions list` shows it), or the
    NAME of `chat --session NAME`.
    """
    settings = settings_from(ctx)
    require_data(settings)
    if name is not None:
        name = name.lower()
        if not SESSION_NAME.match(name):
            raise ConfigError(
                f"--name {name!r}: a letter, then letters, digits, '-' or '_' (32 at most)"
            )
    asyncio.run(_fork(settings, chat_key(chat), name))


async def _fork(settings: Settings, key: str, name: str | None) -> None:
    async with open_store(settings) as store:
        current = await store.find_current_session(key)
        if current is None:
            raise ConfigError(f"no conversation of {key!r} in {describe_store(settings)}")
        taken = [s for s in await store.sessions_of(key, limit=_SEARCHED) if s.name == name]
        if name is not None and taken:
            raise ConfigError(f"{key} has a conversation named {name!r} already")
        fork = await store.fork_session(current.id, name=name)
    click.echo(
        f"Forked {current.id} ({current.message_count} messages) into {describe(fork)}, "
        f"now the current conversation of {key}."
    )


@click.command("switch", epilog=STORE_EPILOG)
@click.option("--chat", metavar="CHAT", required=True, help="The chat to switch.")
@click.argument("session", metavar="SESSION")
@click.pass_context
def sessions_switch(ctx: click.Context, chat: str, session: str) -> None:
    """Make another of a chat's conversations its current one: the chat's next message
    continues it.

    SESSION is the id or the name of one of the chat's conversations (`sessions list --chat
    CHAT`). CHAT is a chat's session key (`telegram:BOT:CHAT`), or the NAME of `chat
    --session NAME`.
    """
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_switch(settings, chat_key(chat), session))


async def _switch(settings: Settings, key: str, wanted: str) -> None:
    async with open_store(settings) as store:
        chosen = pick_session(await store.sessions_of(key, limit=_SEARCHED), wanted)
        switched = None if chosen is None else await store.switch_session(key, chosen.id)
    if switched is None:
        raise ConfigError(f"{key} has no conversation {wanted!r} (see `sessions list --chat`)")
    click.echo(f"{key} now continues {describe(switched)} ({switched.message_count} messages).")
