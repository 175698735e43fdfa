"""`/fork`, `/sessions` and `/switch`: a chat's conversation forked, its sessions listed, and
another of them made current (seed 004's `fork` and `switch_session`).

A chat (a session key: one DM, group or thread) has one current session; `/new` starts an
empty one and keeps the old. `/fork [NAME]` starts one whose history is a copy of the current
one's (`core/store/forks.py`), so the conversation can go another way while the original
stays as it was; `/switch ID|NAME` makes any session of the same chat current again, and the
next message continues it with its own history. A session is named by its id, by the name
`/fork NAME` gave it, or by the start of its id (four characters at least, when only one
session of the chat starts so). Only the chat's own sessions are ever listed or reached.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.commands import ChatCommand, CommandContext, CommandInfo
from core.store.log import SessionRecord

__all__ = ["SESSION_NAME", "describe", "pick_session", "session_commands"]

# A name `/fork NAME` may give: a letter, then letters, digits, '-' or '_'; kept lower-case.
SESSION_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
# How many of a chat's sessions `/sessions` lists and `/switch` looks among.
_LISTED = 20
_SEARCHED = 1_000
_MIN_PREFIX = 4


def session_commands() -> Sequence[ChatCommand]:
    """`/fork`, `/sessions`, `/switch`."""
    return (
        ChatCommand(
            CommandInfo(
                name="fork",
                description="Continue in a copy of this conversation: /fork or /fork NAME",
                argument="name",
                argument_help="A name for the copy, to /switch to it by",
                argument_optional=True,
            ),
            _fork,
        ),
        ChatCommand(
            CommandInfo(name="sessions", description="The conversations of this chat"),
            _sessions,
        ),
        ChatCommand(
            CommandInfo(
                name="switch",
                description="Go back to another conversation of this chat: /switch ID or NAME",
                argument="session",
                argument_help="The session's id or name, as /sessions lists it",
            ),
            _switch,
        ),
    )


def pick_session(sessions: Sequence[SessionRecord], wanted: str) -> SessionRecord | None:
    """The session of `sessions` that `wanted` names: its id, its name (any case), or the
    start of its id when no other session's starts so; None otherwise."""
    wanted = wanted.strip()
    for session in sessions:
        if session.id == wanted:
            return session
    for session in sessions:
        if session.name is not None and session.name == wanted.lower():
            return session
    if len(wanted) >= _MIN_PREFIX:
        starting = [session for session in sessions if session.id.startswith(wanted)]
        if len(starting) == 1:
            return starting[0]
    return None


def describe(session: SessionRecord) -> str:
    """How a session is shown: its id, its name in quotes if it has one."""
    return f'{session.id} "{session.name}"' if session.name else session.id


async def _fork(context: CommandContext) -> str:
    store = context.store
    key = context.inbound.session_key
    words = context.args.split()
    name = words[0].lower() if words else None
    if len(words) > 1 or (name is not None and not SESSION_NAME.match(name)):
        return (
            "A fork's name is one word: a letter, then letters, digits, '-' or '_' "
            "(32 at most). Send /fork or /fork NAME."
        )
    current = await store.find_current_session(key)
    if current is None or current.message_count == 0:
        return "There is no conversation here to fork yet: just write."
    if name is not None and any(
        s.name == name for s in await store.sessions_of(key, limit=_SEARCHED)
    ):
        return f'This chat has a conversation named "{name}" already; /sessions lists them.'
    fork = await store.fork_session(current.id, name=name, fence=context.fence)
    return (
        f"Forked this conversation ({current.message_count} messages) into {describe(fork)}; "
        f"you are in the fork now. /switch {current.name or current.id} goes back."
    )


async def _sessions(context: CommandContext) -> str:
    key = context.inbound.session_key
    current = await context.store.find_current_session(key)
    sessions = await context.store.sessions_of(key, limit=_LISTED)
    if not sessions:
        return "This chat has no conversations yet."
    lines = ["Conversations of this chat (/switch ID or NAME):"]
    for session in sessions:
        line = (
            f"{describe(session)}: started {session.created_at:%Y-%m-%d %H:%M} UTC, "
            f"{session.message_count} message{'' if session.message_count == 1 else 's'}"
        )
        if session.forked_from:
            line += f", forked from {session.forked_from}"
        if current is not None and session.id == current.id:
            line += " (current)"
        lines.append(line)
    return "\n".join(lines)


async def _switch(context: CommandContext) -> str:
    store = context.store
    key = context.inbound.session_key
    wanted = context.args.strip()
    if not wanted:
        return "Say which conversation: /switch ID or NAME (/sessions lists them)."
    chosen = pick_session(await store.sessions_of(key, limit=_SEARCHED), wanted)
    if chosen is None:
        return f"This chat has no conversation {wanted!r}; /sessions lists them."
    current = await store.find_current_session(key)
    if current is not None and current.id == chosen.id:
        return f"You are in {describe(chosen)} already."
    switched = await store.switch_session(key, chosen.id, fence=context.fence)
    if switched is None:
        return f"This chat has no conversation {wanted!r}; /sessions lists them."
    return (
        f"Switched to {describe(switched)} ({switched.message_count} messages); "
        "your next message continues it."
    )
