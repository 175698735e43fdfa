"""Confirmation buttons on Slack: Block Kit buttons under the question, and the
`block_actions` a press sends (through the Events API endpoint or Socket Mode), read as an
`answer` Inbound (`core/confirm.py`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.confirm import BUTTONS, answer_inbound, button_value
from core.envelopes import Address, Inbound

__all__ = ["ACTION", "decision_blocks", "press_inbound", "question_blocks"]

# The action ids of our buttons (bolt routes presses of these to the adapter).
ACTION = re.compile(r"^switchboard_confirm_(yes|no)$")
# Slack refuses a section whose text is longer.
_SECTION_LIMIT = 3000


def _section(mrkdwn: str) -> dict[str, Any]:
    if len(mrkdwn) > _SECTION_LIMIT:
        mrkdwn = mrkdwn[: _SECTION_LIMIT - 1] + "…"
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}}


def question_blocks(mrkdwn: str, question_id: str) -> list[dict[str, Any]]:
    """The question's text and a row of Allow / Refuse buttons."""
    return [
        _section(mrkdwn),
        {
            "type": "actions",
            "block_id": "confirm",
            "elements": [
                {
                    "type": "button",
                    "action_id": f"switchboard_confirm_{'yes' if allowed else 'no'}",
                    "text": {"type": "plain_text", "text": label},
                    "value": button_value(question_id, allowed),
                    "style": "primary" if allowed else "danger",
                }
                for label, allowed in BUTTONS
            ],
        },
    ]


def decision_blocks(mrkdwn: str) -> list[dict[str, Any]]:
    """What replaces the question's blocks once decided: its text alone, no buttons."""
    return [_section(mrkdwn)]


def press_inbound(body: Mapping[str, Any], bot_key: str) -> Inbound | None:
    """The answer a `block_actions` payload gives; None when it is not a press of ours."""
    actions = body.get("actions")
    user = body.get("user")
    container = body.get("container")
    if not (isinstance(actions, list) and actions and isinstance(actions[0], dict)):
        return None
    if not isinstance(user, dict) or not isinstance(container, dict):
        return None
    action = actions[0]
    channel = container.get("channel_id")
    if not isinstance(channel, str) or not isinstance(action.get("value"), str):
        return None
    thread = container.get("thread_ts")
    team = body.get("team")
    return answer_inbound(
        action["value"],
        address=Address(
            platform="slack",
            bot=bot_key,
            chat=channel,
            thread=thread if isinstance(thread, str) else None,
        ),
        user_id=str(user.get("id") or ""),
        user_name=str(user.get("name") or user.get("username") or ""),
        press_id=f"{container.get('message_ts')}:{action.get('action_ts')}:{user.get('id')}",
        is_direct=channel.startswith("D"),
        team=str(team["id"]) if isinstance(team, dict) and team.get("id") else None,
    )
