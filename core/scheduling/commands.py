"""`/schedules` and `/unschedule ID`: a chat's schedules without asking the model.

The same rules as the schedule tools (`core/scheduling/rules.py`): everyone in a chat sees
which schedules deliver there; only a schedule's owner or an admin sees its prompt or may
cancel it. `core/commands.py` registers these on every platform's command menu.
"""

from __future__ import annotations

from core.envelopes import Address
from core.scheduling.rules import may_manage, shows_prompt
from core.scheduling.tools import describe_cadence, schedule_line
from core.store.schedules import ScheduleStore

__all__ = ["cancel_schedule", "list_chat_schedules"]


async def list_chat_schedules(
    store: ScheduleStore, chat: Address, *, requester: str, is_admin: bool
) -> str:
    """The answer to `/schedules`: one line per schedule delivering to `chat`."""
    found = await store.list_schedules(deliver_to=chat)
    if not found:
        return "No schedules deliver to this chat."
    lines = [f"Schedules of this chat ({len(found)}); cancel one with /unschedule ID:"]
    lines += [
        schedule_line(s, with_prompt=shows_prompt(s, requester=requester, is_admin=is_admin))
        for s in found
    ]
    return "\n".join(lines)


async def cancel_schedule(
    store: ScheduleStore, chat: Address, schedule_id: str, *, requester: str, is_admin: bool
) -> str:
    """The answer to `/unschedule ID`: the schedule is removed if `requester` may."""
    wanted = schedule_id.strip().split(maxsplit=1)[0] if schedule_id.strip() else ""
    if not wanted:
        return "Say which: /unschedule ID (/schedules lists this chat's schedules)."
    schedule = await store.get_schedule(wanted)
    # An admin may cancel any schedule; anyone else only sees this chat's.
    if schedule is None or (not is_admin and not _same_chat(schedule.deliver_to, chat)):
        return f"No schedule {wanted!r} in this chat (/schedules lists them)."
    if not may_manage(schedule, requester=requester, is_admin=is_admin):
        return f"Schedule {wanted} was made by someone else: only they or an admin can cancel it."
    await store.delete_schedule(schedule.id)
    return f"Cancelled schedule {schedule.id} ({describe_cadence(schedule.cadence)})."


def _same_chat(target: Address, chat: Address) -> bool:
    # The bot key is left out: schedules made with the CLI name no bot.
    return (target.platform, target.chat, target.thread) == (chat.platform, chat.chat, chat.thread)
