"""A chat command is one entry in the registry: every platform's menu and parser follow it.

A registry with one more public command (`/ping`) and one admin-only command (`/shutdown`) is
served on each platform against its fake: Telegram's `setMyCommands`, Discord's PUT of
application commands and Slack's text parsing all pick `/ping` up, and the worker answers it;
the admin-only command stays out of the public menus.
"""

from __future__ import annotations

from core.backends.sql.store import SqlStore
from core.commands import (
    ChatCommand,
    CommandContext,
    CommandInfo,
    CommandRegistry,
    builtin_commands,
)
from core.providers.demo import DemoProvider
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import GENERAL
from tests.fakes.telegram_api import FakeTelegram
from tests.integration import discord_helpers, slack_helpers, telegram_helpers

DM = 555


async def _pong(context: CommandContext) -> str:
    return f"pong {context.args}".strip()


async def _shutdown(context: CommandContext) -> str:
    return "shutting down" if context.is_admin else "admins only"


def extended() -> CommandRegistry:
    """The built-in commands plus one for everyone and one for admins."""
    return CommandRegistry(
        [
            *builtin_commands(),
            ChatCommand(CommandInfo(name="ping", description="Check the bot answers"), _pong),
            ChatCommand(
                CommandInfo(name="shutdown", description="Stop the bot", admin_only=True),
                _shutdown,
            ),
        ]
    )


async def test_telegram_lists_a_new_command_and_runs_it(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with telegram_helpers.serving(fake, store, DemoProvider(), commands=extended()):
        assert [c["command"] for c in fake.commands] == [
            "new",
            "cost",
            "stop",
            "model",
            "help",
            "schedules",
            "unschedule",
            "compact",
            "ping",
        ]
        assert fake.commands[-1]["description"] == "Check the bot answers"
        fake.private_text(DM, "/ping")
        await telegram_helpers.reply_containing(fake, DM, "pong")


async def test_discord_registers_a_new_command_and_runs_it(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    async with discord_helpers.serving(fake, store, DemoProvider(), commands=extended()):
        assert [c["name"] for c in fake.commands] == [
            "ask",
            "new",
            "cost",
            "stop",
            "model",
            "help",
            "schedules",
            "unschedule",
            "compact",
            "ping",
        ]
        assert len(fake.requests_named("put_commands")) == 1
        fake.slash("ping", user_id=42)
        await discord_helpers.reply_containing(fake, fake.dm_channel_id(42), "pong")
    # The same menu again: Discord already has it, so nothing is registered.
    async with discord_helpers.serving(fake, store, DemoProvider(), commands=extended()) as again:
        assert again.adapter.commands_synced is False
    assert len(fake.requests_named("put_commands")) == 1


async def test_slack_parses_a_new_command_from_text(fake_slack: FakeSlack, store: SqlStore) -> None:
    fake = fake_slack
    async with slack_helpers.serving(fake, store, DemoProvider(), commands=extended()) as bot:
        await bot.send(fake.channel_message("/ping there", mention=True))
        await slack_helpers.reply_containing(fake, GENERAL, "pong there")
        await bot.send(fake.channel_message("/help", mention=True))
        reply = await slack_helpers.reply_containing(fake, GENERAL, "/ping: Check the bot answers")
    # Help for someone who is not an admin leaves the admin-only command out.
    assert "/shutdown" not in reply.text


async def test_a_command_not_on_the_menu_is_plain_text_on_slack(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    async with slack_helpers.serving(fake, store, DemoProvider()) as bot:
        await bot.send(fake.channel_message("/ping", mention=True))
        reply = await slack_helpers.reply_containing(fake, GENERAL, "")
    assert "pong" not in reply.text and "Unknown command" not in reply.text
