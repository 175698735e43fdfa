"""Buttons on Slack: Allow / Refuse under a confirmation question, read back as an `answer`
Inbound (`core/confirm.py`), and Stop under an answer being written, read back as a `cancel`
Inbound (`core/stopping.py`); a press arrives as `block_actions` (through the Events API
endpoint or Socket Mode)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.confirm import BUTTONS, answer_inbound, button_value
from core.envelopes import Address, Inbound
from core.stopping import STOP_BUTTON, STOP_LABEL, stop_inbound

__all__ = ["ACTION", "decision_blocks", "press_inbound", "question_blocks", "stop_blocks"]

# The action ids of our buttons (bolt routes presses of these to the adapter).
ACTION = re.compile(r"^switchboard_(confirm_(yes|no)|stop)$")
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


def stop_blocks(mrkdwn: str) -> list[dict[str, Any]]:
    """A piece of an answer being written, whole (in sections of what one holds), and a Stop
    button under it."""
    sections: list[str] = []
    for line in mrkdwn.splitlines(keepends=True):
        while len(line) > _SECTION_LIMIT:
            sections.append(line[:_SECTION_LIMIT])
            line = line[_SECTION_LIMIT:]
        if sections and len(sections[-1]) + len(line) <= _SECTION_LIMIT:
            sections[-1] += line
        else:
            sections.append(line)
    button = {
        "type": "button",
        "action_id": "switchboard_stop",
        "text": {"type": "plain_text", "text": STOP_LABEL},
        "value": STOP_BUTTON,
    }
    return [
        *(_section(text) for text in sections if text.strip()),
        {"type": "actions", "block_id": "stop", "elements": [button]},
    ]


def decision_blocks(mrkdwn: str) -> list[dict[str, Any]]:
    """What replaces the question's blocks once decided: its text alone, no buttons."""
    return [_section(mrkdwn)]


def press_inbound(body: Mapping[str, Any], bot_key: str) -> Inbound | None:
    """The answer or stop request a `block_actions` payload gives; None when it is not a press
    of ours."""
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
    address = Address(
        platform="slack",
        bot=bot_key,
        chat=channel,
        thread=thread if isinstance(thread, str) else None,
    )
    user_id = str(user.get("id") or "")
    user_name = str(user.get("name") or user.get("username") or "")
    team_id = str(team["id"]) if isinstance(team, dict) and team.get("id") else None
    is_direct = channel.startswith("D")
    return answer_inbound(
        action["value"],
        address=address,
        user_id=user_id,
        user_name=user_name,
        press_id=f"{container.get('message_ts')}:{action.get('action_ts')}:{user.get('id')}",
        is_direct=is_direct,
        team=team_id,
    ) or stop_inbound(
        action["value"],
        address=address,
        user_id=user_id,
        user_name=user_name,
        is_direct=is_direct,
        team=team_id,
    )
