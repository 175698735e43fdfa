"""Chat commands (`/new`, `/cost`, `/help`, `/schedules`...): one registry, where each is spelled.

A `ChatCommand` is a name, a one-line description, its aliases, whether only admins may use
it, and the handler a worker runs. The help text and every platform's native command menu
(a bot command list, slash commands, application commands) are derived
from the registry's `menu()`, which carries no handlers, so a gateway can build its menu
without a store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from core.budgets import BudgetGuard, Spender, spender_keys
from core.envelopes import Inbound
from core.model_choice import ModelChoices
from core.pricing import format_usd
from core.scheduling.commands import cancel_schedule, list_chat_schedules
from core.stopping import NOTHING_TO_STOP, STOP_COMMAND

if TYPE_CHECKING:
    from core.confirm import Confirm
    from core.fencing import Fence
    from core.ratelimit import RateLimits
    from core.session_compaction import SessionCompaction
    from core.store.base import Store

__all__ = [
    "ChatCommand",
    "CommandContext",
    "CommandHandler",
    "CommandInfo",
    "CommandRegistry",
    "builtin_commands",
]


class CommandInfo(BaseModel):
    """What a platform needs to list a command: no handler, safe to send anywhere."""

    model_config = ConfigDict(frozen=True)

    # Lower-case letters, digits and underscores: the strictest rule among the platforms.
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    description: str = Field(min_length=1, max_length=100)
    aliases: tuple[str, ...] = ()
    admin_only: bool = False
    # The one word the command takes after it (`/unschedule ID`), for menus that ask for it
    # in a field of its own (Discord's options): its name and what to put there.
    argument: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,31}$")
    argument_help: str = Field(default="", max_length=100)
    # Whether the command also works without its word (`/model` lists, `/model NAME` switches).
    argument_optional: bool = False


@dataclass(frozen=True)
class CommandContext:
    """What a command handler gets: the message, who sent it, and the parts it may use."""

    inbound: Inbound
    # The text after the command word, stripped.
    args: str
    is_admin: bool
    store: Store
    registry: CommandRegistry
    # The models this bot's chats may switch to (`/model`); None: the worker has no choice.
    models: ModelChoices | None = None
    # The spending limits (`/cost` says when turns run on the cheaper model); None: none.
    budgets: BudgetGuard | None = None
    # How the chat is asked for a yes (`core/confirm.py`), for a command that needs one
    # (`/forgetme`); None: the worker cannot ask.
    confirm: Confirm | None = None
    # The worker's rate limits, whose counters of a forgotten person go too.
    rate_limits: RateLimits | None = None
    # The worker's claim on the chat's session key, for a command's fenced writes (`/fork`,
    # `/switch`): a worker whose claim was overtaken writes nothing. None: unfenced.
    fence: Fence | None = None
    # Compaction on request (`/compact`, core/session_compaction.py); None: no compactor.
    compaction: SessionCompaction | None = None


CommandHandler = Callable[[CommandContext], Awaitable[str]]
"""Runs the command; returns the text of the notice sent back to the chat."""


@dataclass(frozen=True)
class ChatCommand:
    """One chat command: how it is listed and what it does."""

    info: CommandInfo
    handler: CommandHandler


class CommandRegistry:
    """The chat commands one bot understands, looked up by name or alias."""

    def __init__(self, commands: Iterable[ChatCommand]) -> None:
        self._commands: list[ChatCommand] = []
        self._by_word: dict[str, ChatCommand] = {}
        for command in commands:
            for word in (command.info.name, *command.info.aliases):
                if word in self._by_word:
                    raise ValueError(f"two chat commands answer to /{word}")
                self._by_word[word] = command
            self._commands.append(command)

    def find(self, word: str) -> ChatCommand | None:
        """The command `word` (name or alias, any case) names, or None."""
        return self._by_word.get(word.lower())

    def menu(self) -> tuple[CommandInfo, ...]:
        """Every command's listing, in registration order (admin-only ones marked)."""
        return tuple(command.info for command in self._commands)

    def words(self) -> frozenset[str]:
        """Every name and alias: what a platform parsing plain text should treat as a command."""
        return frozenset(self._by_word)

    def help_text(self, *, admin: bool = False) -> str:
        """The reply to `/help`: what the bot is, then one line per command this person may use."""
        lines = ["Talk to me in plain words. Commands:"]
        for info in self.menu():
            if info.admin_only and not admin:
                continue
            lines.append(f"/{info.name}: {info.description}")
        return "\n".join(lines)

    def unknown_text(self, word: str, *, admin: bool = False) -> str:
        """The reply to a command nobody registered."""
        return f"Unknown command /{word}.\n{self.help_text(admin=admin)}"


async def _new(context: CommandContext) -> str:
    await context.store.create_session(context.inbound.session_key)
    return "Started a new conversation."


async def _cost(context: CommandContext) -> str:
    session = await context.store.current_session(context.inbound.session_key)
    spent = await context.store.cost_summary(session.id)
    usage = spent.usage
    calls = f"{spent.calls} model call{'' if spent.calls == 1 else 's'}"
    if spent.unpriced_calls:
        money = f"at least {format_usd(spent.cost_usd)} over {calls} "
        money += f"({spent.unpriced_calls} with a model that has no known price)"
    else:
        money = f"{format_usd(spent.cost_usd)} over {calls}"
    text = (
        f"This conversation has cost {money}: {usage.input_tokens:,} tokens in, "
        f"{usage.output_tokens:,} out, {usage.cache_read_tokens:,} read from cache, "
        f"{usage.cache_write_tokens:,} written to cache."
    )
    if context.models is not None:
        text += f" Model: {context.models.current(session.model)}."
    if context.budgets is not None:
        inbound = context.inbound
        user, chat = spender_keys(
            inbound.address.platform, inbound.user_id, inbound.address, scheduled=False
        )
        spender = Spender(session_id=session.id, user=user, chat=chat)
        degrade = (await context.budgets.assess(spender)).degrade
        if degrade is not None:
            text += " " + degrade.sentence()
    return text


async def _model(context: CommandContext) -> str:
    """`/model` lists, `/model NAME` switches this chat's model, `/model reset` undoes it."""
    models = context.models
    session = await context.store.current_session(context.inbound.session_key)
    if models is None or not models.allowed:
        current = models.current(session.model) if models is not None else "the default"
        return f"Switching models is not set up for this bot; this chat uses {current}."
    wanted = context.args.split()[0] if context.args.split() else ""
    if not wanted:
        return (
            f"This chat uses {models.current(session.model)}. Models you can switch to: "
            f"{models.names()}. Send /model NAME to switch, /model reset for the default."
        )
    if not context.inbound.is_direct and not context.is_admin:
        return "Only an admin of this bot can switch the model in a group."
    if wanted.lower() == "reset":
        await context.store.set_session_model(session.id, None)
        return f"This chat is back to the default model, {models.default_model}."
    option = models.find(wanted)
    if option is None:
        return f"{wanted} is not one of the allowed models: {models.names()}."
    if option.provider not in models.providers:
        reason = models.unavailable.get(option.provider, "it is not configured")
        return (
            f"{option.model} needs the {option.provider} provider, which cannot be used: {reason}."
        )
    await context.store.set_session_model(session.id, option.model)
    return f"This chat now uses {option.model} ({option.provider})."


async def _stop(context: CommandContext) -> str:
    # Reached only when no turn was stopped by it: the worker that stops one marks the
    # command processed first (`core/stopping.py`).
    return NOTHING_TO_STOP


async def _compact(context: CommandContext) -> str:
    """`/compact`: summarize the older messages of this chat's conversation now."""
    if context.compaction is None:
        return "Compacting is not set up for this bot."
    report = await context.compaction.compact(context.inbound)
    return report.sentence()


async def _help(context: CommandContext) -> str:
    return context.registry.help_text(admin=context.is_admin)


def _requester(context: CommandContext) -> str:
    """Who asks, as schedules record their owners: "<platform>:<user id>"."""
    return f"{context.inbound.address.platform}:{context.inbound.user_id}"


async def _schedules(context: CommandContext) -> str:
    return await list_chat_schedules(
        context.store,
        context.inbound.address,
        requester=_requester(context),
        is_admin=context.is_admin,
    )


async def _unschedule(context: CommandContext) -> str:
    return await cancel_schedule(
        context.store,
        context.inbound.address,
        context.args,
        requester=_requester(context),
        is_admin=context.is_admin,
    )


def builtin_commands() -> Sequence[ChatCommand]:
    """The commands every bot has; later parts of the product add theirs beside these."""
    return (
        ChatCommand(
            CommandInfo(name="new", description="Start a fresh conversation", aliases=("reset",)),
            _new,
        ),
        ChatCommand(
            CommandInfo(
                name="cost", description="What this conversation has cost", aliases=("usage",)
            ),
            _cost,
        ),
        ChatCommand(
            CommandInfo(name=STOP_COMMAND, description="Stop the answer being written"),
            _stop,
        ),
        ChatCommand(
            CommandInfo(
                name="model",
                description="Show or switch this chat's model: /model NAME, /model reset",
                argument="name",
                argument_help="A model the bot allows, or reset for the default",
                argument_optional=True,
            ),
            _model,
        ),
        ChatCommand(
            CommandInfo(name="help", description="How to talk to this bot", aliases=("start",)),
            _help,
        ),
        ChatCommand(
            CommandInfo(name="schedules", description="The scheduled tasks of this chat"),
            _schedules,
        ),
        ChatCommand(
            CommandInfo(
                name="unschedule",
                description="Cancel a scheduled task: /unschedule ID",
                argument="id",
                argument_help="The schedule's id, as /schedules lists it",
            ),
            _unschedule,
        ),
        ChatCommand(
            CommandInfo(name="compact", description="Summarize the older part of this chat now"),
            _compact,
        ),
    )
