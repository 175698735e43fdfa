"""Buttons on Discord: Allow / Refuse under a confirmation question, read back as an `answer`
Inbound (`core/confirm.py`), and Stop under an answer being written, read back as a `cancel`
Inbound (`core/stopping.py`); a press arrives as a component interaction."""

from __future__ import annotations

from typing import Any

import discord

from core.confirm import BUTTONS, answer_inbound, button_value
from core.envelopes import Address, Inbound
from core.stopping import STOP_BUTTON, STOP_LABEL, stop_inbound

__all__ = ["press_inbound", "question_view", "stop_view"]


def question_view(question_id: str) -> discord.ui.View:
    """Allow / Refuse buttons for question `question_id`.

    The view is stopped before it is sent: discord.py then only renders its components and
    keeps no callbacks or timers for it; presses reach the adapter as interactions (any
    gateway may get them, and a restarted one still understands the buttons).
    """
    view = discord.ui.View(timeout=None)
    for label, allowed in BUTTONS:
        view.add_item(
            discord.ui.Button(
                label=label,
                custom_id=button_value(question_id, allowed),
                style=discord.ButtonStyle.success if allowed else discord.ButtonStyle.danger,
            )
        )
    view.stop()
    return view


def stop_view() -> discord.ui.View:
    """The Stop button under an answer while it is written (stopped before it is sent, as
    `question_view` says)."""
    view = discord.ui.View(timeout=None)
    view.add_item(
        discord.ui.Button(
            label=STOP_LABEL, custom_id=STOP_BUTTON, style=discord.ButtonStyle.secondary
        )
    )
    view.stop()
    return view


def custom_id(interaction: discord.Interaction) -> str | None:
    """The custom id of a pressed button; None for any other interaction."""
    if interaction.type is not discord.InteractionType.component:
        return None
    data: dict[str, Any] = dict(interaction.data or {})
    value = data.get("custom_id")
    return value if isinstance(value, str) else None


def press_inbound(interaction: discord.Interaction, address: Address) -> Inbound | None:
    """The answer or stop request a button press in `address` gives; None when it is not a
    press of ours."""
    value = custom_id(interaction)
    if value is None:
        return None
    user_id, user_name = str(interaction.user.id), interaction.user.display_name
    is_direct = interaction.guild_id is None
    team = str(interaction.guild_id) if interaction.guild_id else None
    return answer_inbound(
        value,
        address=address,
        user_id=user_id,
        user_name=user_name,
        press_id=str(interaction.id),
        is_direct=is_direct,
        team=team,
    ) or stop_inbound(
        value,
        address=address,
        user_id=user_id,
        user_name=user_name,
        is_direct=is_direct,
        team=team,
    )
