"""Replaying a dead letter: queued again as new work, then removed from the dead letters."""

from __future__ import annotations

from core.bus.base import Bus, DeadLetter

__all__ = ["replay_dead_letter"]


async def replay_dead_letter(bus: Bus, entry: DeadLetter) -> str | None:
    """Enqueue the entry's envelope on its queue again and drop the dead letter.

    Enqueued first and dropped second: a crash in between leaves a copy in both places (one
    more delivery), never none. `LookupError` when the dead letter is no longer there (someone
    replayed or dropped it meanwhile) or cannot be decoded.
    """
    if entry.envelope is None:
        raise LookupError(f"dead letter {entry.id} on {entry.queue} cannot be decoded")
    present = {dead.id for dead in await bus.dead_letter_entries(entry.queue)}
    if entry.id not in present:
        raise LookupError(f"no dead letter {entry.id} on {entry.queue}")
    entry_id = await bus.enqueue(entry.queue, entry.envelope)
    await bus.drop_dead_letter(entry.queue, entry.id)
    return entry_id
