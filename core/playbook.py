"""The playbook: tool sequences that worked before, offered as hints for similar requests.

When a turn that called tools ends with an answer, no tool result an error and not stopped,
`Playbook.learn` records the names of the tools in call order (a tool called several times in
a row counts once) with the keywords of the person's message, per bot. Before a turn,
`Playbook.hints` finds the sequences recorded with the most of the new message's keywords and
puts the best few, within a small budget, into the turn's context. A sequence that worked
`proven` times (three by default, as seed 000 flags for promotion) is offered before the others
and marked proven; the records of a bot are kept to `keep` rows, the least used and oldest
pruned as a turn is recorded (decision 0031).

Keywords are stored as keyed digests, never as words, and nothing names the person or the
chat: the records hold no one's text, so erasing a person has nothing to reach here
(docs/decisions/0026-playbook-and-attention.md).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.attention import keywords
from core.errors import StoreError
from core.messages import Message
from core.store.playbook import PlaybookEntry, PlaybookRecords
from core.turn_state import ChannelContext

__all__ = ["PLAYBOOK_HEADING", "Playbook", "PlaybookSettings", "digest", "sequence_of"]

log = logging.getLogger(__name__)

PLAYBOOK_HEADING: Final = "## Tool sequences that worked before"
_INTRO: Final = (
    "For requests like this one, these tools were called in this order and the turn ended "
    "well (a hint, not a rule):"
)
# The longest sequence recorded: a longer one is a turn's wandering, not a pattern.
_MAX_TOOLS: Final = 8
_DIGEST_KEY: Final = b"switchboard-playbook"


class PlaybookSettings(BaseModel):
    """The profile's `[playbook]` table (docs/memory.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Record the tool sequences of turns that ended well, and offer them as hints.
    enabled: bool = True
    # How many sequences one turn is offered at most.
    hints: int = Field(default=3, ge=1, le=10)
    # The hints' length at most, in characters (heading included).
    max_chars: int = Field(default=600, ge=100, le=4000)
    # Successes after which a sequence is proven: offered first and marked so.
    proven: int = Field(default=3, ge=2, le=100)
    # The bot's records kept at most (one per sequence and keyword); the least used and
    # oldest go first.
    keep: int = Field(default=5000, ge=100, le=1_000_000)


def digest(word: str) -> str:
    """What the playbook keeps of a keyword: a keyed digest, the same in every process."""
    return hashlib.blake2b(word.encode(), digest_size=8, key=_DIGEST_KEY).hexdigest()


def sequence_of(turn: Sequence[Message]) -> list[str] | None:
    """The tools a turn's messages called, in order, a run of one tool counted once; None
    when a tool result was an error or the turn called more than `_MAX_TOOLS` in sequence."""
    names: list[str] = []
    for message in turn:
        if message.role == "tool" and message.is_error:
            return None
        for call in message.tool_calls if message.role == "assistant" else ():
            if not names or names[-1] != call.name:
                names.append(call.name)
    return names if len(names) <= _MAX_TOOLS else None


class Playbook:
    """The playbook of one bot (a profile), kept in `store`."""

    def __init__(
        self, store: PlaybookRecords, bot: str, settings: PlaybookSettings | None = None
    ) -> None:
        self.store = store
        self.bot = bot
        self.settings = settings or PlaybookSettings()

    async def hints(self, context: ChannelContext, asked: str) -> str:
        """The sequences that worked for requests like `asked`, as a prompt section; "" for
        none (a `TurnContext`)."""
        wanted = [digest(word) for word in keywords(asked)]
        if not wanted:
            return ""
        found = await self.store.find_sequences(
            self.bot, wanted, limit=self.settings.hints, proven=self.settings.proven
        )
        return self._section(found)

    async def learn(self, turn: Sequence[Message]) -> bool:
        """Record the turn (its messages, the person's first) if it called tools without an
        error; whether it was recorded. A store failure is logged, not raised: the turn's
        answer stands either way, and so does it for any other failure (logged)."""
        tools = sequence_of(turn)
        asked = next((m.text for m in turn if m.role == "user"), "")
        words = keywords(asked)
        if not tools or not words:
            return False
        try:
            await self.store.record_sequence(
                self.bot, tools, [digest(w) for w in words], keep=self.settings.keep
            )
        except StoreError as exc:
            log.warning("could not record a tool sequence in the playbook: %s", exc)
            return False
        except Exception:
            # Called as the turn ends: a bug here must not keep the turn from ending.
            log.exception("recording a tool sequence in the playbook failed")
            return False
        return True

    def _section(self, found: Sequence[PlaybookEntry]) -> str:
        lines = [PLAYBOOK_HEADING, _INTRO]
        used = sum(len(line) + 1 for line in lines)
        shown = 0
        for entry in found:
            times = "once" if entry.successes == 1 else f"{entry.successes} times"
            proven = "proven: " if entry.successes >= self.settings.proven else ""
            line = f"- {' → '.join(entry.tools)} ({proven}worked {times})"
            if used + len(line) + 1 > self.settings.max_chars:
                break
            lines.append(line)
            used += len(line) + 1
            shown += 1
        return "\n".join(lines) if shown else ""
