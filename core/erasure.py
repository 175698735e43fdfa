"""`/forgetme`: a person asks the bot, in a direct message, to erase everything it keeps about
them (`core/store/people.py` says what that is and how it goes).

The bot asks once, with the confirmation gate privileged tools use (`core/confirm.py`: Allow
and Refuse buttons, or a typed yes/no, from the asker only; silence is no), then erases. In a
group it erases nothing and says to ask in a DM: a group is where other people read along, and
the answer (what was erased) is about one person.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import ValidationError

from core.commands import ChatCommand, CommandContext, CommandInfo
from core.envelopes import new_id
from core.messages import ToolCall
from core.store.people import Person
from core.tools.base import ToolContext

__all__ = ["FORGET_ME", "erasure_commands"]

log = logging.getLogger(__name__)

FORGET_ME = "forgetme"
_WHAT = (
    "everything I keep about you: our direct conversations, your messages in groups, what I "
    "remember about you, your schedules and your access records; this cannot be undone"
)


def erasure_commands() -> Sequence[ChatCommand]:
    """`/forgetme`."""
    return (
        ChatCommand(
            CommandInfo(name=FORGET_ME, description="Erase everything I keep about you (in a DM)"),
            _forget_me,
        ),
    )


async def _forget_me(context: CommandContext) -> str:
    inbound = context.inbound
    if not inbound.is_direct:
        return f"To have me forget you, send /{FORGET_ME} to me in a direct message."
    try:
        person = Person(platform=inbound.address.platform, user_id=inbound.user_id)
    except ValidationError:
        return "I cannot tell who you are here, so nothing was erased."
    if context.confirm is None:
        return "I cannot ask you to confirm here, so nothing was erased."
    session = await context.store.find_current_session(inbound.session_key)
    asked = ToolCall(id=new_id(), name="forget_me", arguments={"erase": _WHAT})
    where = ToolContext(
        session_id=session.id if session is not None else "",
        user_id=inbound.user_id,
        platform=inbound.address.platform,
        address=inbound.address,
        is_admin=context.is_admin,
    )
    if not await context.confirm(asked, where):
        return "Nothing was erased."
    erased = await context.store.erase_person(person)
    if context.rate_limits is not None:
        await context.rate_limits.forget(person.platform, person.user_id)
    log.info(
        "erased %s at their request: %d conversations, %d group messages",
        person,
        erased.sessions_deleted,
        erased.messages_tombstoned,
    )
    return "Done: I no longer keep anything about you. Write again any time to start afresh."
