"""The bot's slash commands (`/ask`, and one per chat command on the menu) and registering
them with Discord.

Registering is a PUT of every global command, which Discord rate-limits hard (and which makes
clients refresh their command lists), so it happens only when the definitions differ from what
the application already has: the comparison is against Discord's own list, not a local file, so
it holds across restarts, machines and replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import discord
from discord import app_commands

from core.commands import CommandInfo

__all__ = ["SlashHandler", "build_tree", "command_shapes", "sync_commands"]

log = logging.getLogger(__name__)

SlashHandler = Callable[[discord.Interaction, str | None, str], Awaitable[None]]
"""Called with the interaction, the command word (None for `/ask`) and the question."""


def build_tree(
    client: discord.Client, handle: SlashHandler, menu: Sequence[CommandInfo]
) -> app_commands.CommandTree:
    """A command tree on `client`: `/ask`, then every command of `menu` anyone may use (admin-only
    ones are left to `/help`), each passed on to `handle`."""
    tree = app_commands.CommandTree(client)

    @tree.command(name="ask", description="Ask the bot a question")
    @app_commands.describe(question="What you want to ask")
    async def ask(interaction: discord.Interaction, question: str) -> None:
        await handle(interaction, None, question)

    for info in menu:
        # `/ask` is Discord's way to ask in a channel without a mention: it stays ours.
        if not info.admin_only and info.name != "ask":
            tree.add_command(_menu_command(info, handle))

    @tree.error
    async def failed(interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        log.error("slash command %s failed: %s", interaction.data, error, exc_info=error)

    return tree


def _menu_command(info: CommandInfo, handle: SlashHandler) -> app_commands.Command[Any, Any, None]:
    word = info.name
    if info.argument is not None:
        return _command_with_argument(info, handle)

    async def run(interaction: discord.Interaction) -> None:
        await handle(interaction, word, "")

    return app_commands.Command(name=word, description=info.description, callback=run)


def _command_with_argument(
    info: CommandInfo, handle: SlashHandler
) -> app_commands.Command[Any, Any, None]:
    """A command whose one argument (`/unschedule id:<…>`) is an option, required unless
    the command also works without it (`/model`)."""
    word, name = info.name, info.argument or "text"

    @app_commands.rename(value=name)
    @app_commands.describe(value=info.argument_help or name)
    async def run(interaction: discord.Interaction, value: str) -> None:
        await handle(interaction, word, value)

    @app_commands.rename(value=name)
    @app_commands.describe(value=info.argument_help or name)
    async def run_optional(interaction: discord.Interaction, value: str = "") -> None:
        await handle(interaction, word, value)

    if info.argument_optional:
        return app_commands.Command(name=word, description=info.description, callback=run_optional)
    return app_commands.Command(name=word, description=info.description, callback=run)


async def sync_commands(tree: app_commands.CommandTree, client: discord.Client) -> bool:
    """Register the tree's global commands unless Discord has exactly these; True if it did."""
    application_id = client.application_id
    if application_id is None:
        raise RuntimeError("sync_commands needs a logged-in client")
    wanted = [command.to_dict(tree) for command in tree.get_commands()]
    current = await client.http.get_global_commands(application_id)
    if command_shapes(current) == command_shapes(wanted):
        log.info("discord slash commands are up to date")
        return False
    await tree.sync()
    log.info("registered %d discord slash commands", len(wanted))
    return True


def command_shapes(commands: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What matters of command definitions, sorted by name, with Discord's defaults filled in.

    Discord answers with ids, versions and defaults of its own and leaves out false or empty
    option fields, so the raw payloads of equal definitions differ.
    """
    shapes = [
        {
            "name": command["name"],
            "type": command.get("type") or 1,
            "description": command.get("description") or "",
            "options": [_option_shape(option) for option in command.get("options") or []],
            "nsfw": bool(command.get("nsfw")),
            "dm_permission": command.get("dm_permission", True) is not False,
            "default_member_permissions": command.get("default_member_permissions"),
        }
        for command in commands
    ]
    return sorted(shapes, key=lambda shape: (shape["name"], shape["type"]))


def _option_shape(option: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": option["type"],
        "name": option["name"],
        "description": option.get("description") or "",
        "required": bool(option.get("required")),
        "choices": option.get("choices") or [],
        "options": [_option_shape(inner) for inner in option.get("options") or []],
    }
