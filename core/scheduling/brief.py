"""The system-prompt section of a scheduled run: what the run is, for whom, and when it speaks.

A model answering a schedule's prompt sees it as an ordinary message unless told otherwise;
without being told about `[NOTIFY]` it never starts a `conditional` answer with it, so nothing
is ever delivered. The section is a pure function of the schedule (no run time in it), so the
prompt stays byte-stable across the runs of one schedule and provider caches keep hitting.
"""

from __future__ import annotations

from core.scheduling.book import NOTIFY_MARKER
from core.scheduling.models import NotifyPolicy

__all__ = ["scheduled_brief"]


def scheduled_brief(
    *,
    schedule_id: str,
    owner: str,
    chat: str,
    notify: NotifyPolicy,
    cadence: str | None = None,
) -> str:
    """The `## Scheduled run` section for one schedule's runs.

    `owner` is "cli" or "<platform>:<user id>"; `chat` the target chat as people write it;
    `cadence` a short description ("every 5m"), when known.
    """
    when = f" ({cadence})" if cadence else ""
    whom = "the operator, from the command line" if owner == "cli" else f"the user {owner}"
    lines = [
        f"This is a scheduled run of task {schedule_id}{when}, not a live conversation: the "
        "message you are answering is the task's prompt, repeated at each run, and nobody is "
        "waiting to reply to you.",
        f"The task was set up by {whom}. Its answers go to the chat {chat}.",
        _policy_rule(notify),
    ]
    return "\n".join(lines)


def _policy_rule(notify: NotifyPolicy) -> str:
    match notify:
        case "always":
            return (
                "Your final answer is delivered to that chat as a message of its own, so write "
                "it for the people there, complete and to the point."
            )
        case "conditional":
            return (
                f"Your final answer is delivered ONLY if it begins with {NOTIFY_MARKER}. When "
                "there is something the task asks to be told about (its condition is met, or "
                f"there is news worth a message), begin your answer with exactly {NOTIFY_MARKER} "
                "followed by the message for the chat; the marker is removed before delivery. "
                f"Otherwise do not write {NOTIFY_MARKER} at all: answer in one short line why "
                "there is nothing to report; that answer is only recorded in the run history "
                "and nothing is delivered."
            )
        case _:
            return (
                "Your answer is only recorded in the task's run history; nothing is delivered "
                "to the chat."
            )
