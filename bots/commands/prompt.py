"""`switchboard prompt`: the system prompt a turn on a channel would send, for reviewing it."""

from __future__ import annotations

import click

from bots.app import PROMPT_HINTS
from bots.commands.common import settings_from
from bots.platforms import REGISTERED
from bots.profiles import load_profile
from core.clock import utc_now
from core.envelopes import Address
from core.errors import ConfigError
from core.modes import ModeCatalog
from core.policy import ChannelPolicy
from core.profile import Profile

__all__ = ["prompt"]


@click.command()
@click.option(
    "--channel",
    type=click.Choice(list(PROMPT_HINTS)),
    default="terminal",
    show_default=True,
    help="The platform whose capability mode and formatting hint to use.",
)
@click.option("--profile", help="Profile folder under profiles/ (default: default).")
@click.option(
    "--chat",
    metavar="CHAT_ID",
    help="A chat with its own mode in [chat_modes]: its id, or BOT:CHAT_ID when the profile "
    "names the same chat id under several bots.",
)
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    default="<session>",
    show_default=True,
    help="Session id to show in the footer.",
)
@click.pass_context
def prompt(
    ctx: click.Context, channel: str, profile: str | None, chat: str | None, session_id: str
) -> None:
    """Print the system prompt a turn on CHANNEL would send, exactly, with today's date.

    The capability mode comes from the profile's [modes] (or [chat_modes] with --chat), the
    formatting rules from the platform.
    """
    settings = settings_from(ctx, profile=profile)
    loaded = load_profile(settings.profiles_dir, settings.profile)
    mode = ModeCatalog().get(_mode_name(loaded, channel, chat))
    text = loaded.system_prompt(settings.redactor()).build(
        mode=mode,
        platform_hint=PROMPT_HINTS[channel],
        session_id=session_id,
        now=utc_now(),
    )
    click.echo(text)


def _mode_name(profile: Profile, channel: str, chat: str | None) -> str:
    """The mode a chat on `channel` gets, decided as the worker decides it."""
    options = profile.settings
    policy = ChannelPolicy(modes=options.modes, chat_modes=options.chat_modes)
    if chat is None:
        return policy.modes.get(channel, policy.default_mode)
    bot, _, chat_id = chat.strip().rpartition(":")
    if not chat_id:
        raise click.BadParameter("give a chat id (or BOT:CHAT_ID)", param_hint="--chat")
    if not bot:
        # Chat modes are keyed platform:bot:chat; without the bot, any bot's entry for it.
        keys = (key.split(":") for key in policy.chat_modes)
        bots = {k[1] for k in keys if len(k) == 3 and k[0] == channel and k[2] == chat_id}
        modes = {policy.chat_modes[f"{channel}:{b}:{chat_id}"] for b in bots}
        if len(modes) > 1:
            raise ConfigError(
                f"chat {chat_id!r} has different modes under several bots "
                f"({', '.join(sorted(bots))}); pass --chat BOT:{chat_id}"
            )
        bot = min(bots, default=_default_bot(channel))
    return policy.mode_for_address(Address(platform=channel, bot=bot, chat=chat_id))


def _default_bot(channel: str) -> str:
    """The bot part of a chat's session key when the profile names none: a platform whose
    bare address stands for its one local bot uses that bot's name."""
    bare = REGISTERED.get(channel).address.bare
    return bare.bot if bare is not None else "default"
