"""A worker's handling of inbound work, split by job.

* `intake.py`: `InboundHandler`, the rules an `Inbound` goes through (dedupe, refusals,
  commands, over-long input) before it becomes a turn.
* `turn.py`: `TurnRunner`, the one turn path of a person's message and a scheduled run (a
  `Turn`), and `Contexts`, the `ChannelContext` of each.
* `stream.py`: `ReplyStream`, the one coalescer of a streamed answer, and `StreamPolicy`.
* `outbox.py`: `Outbox`, deliveries about an inbound message onto `outbound.<platform>`.
* `lifecycle.py`: `Lifecycle`, lifecycle events on the `events` topic.
* `scheduled.py`: `ScheduledRuns`, a schedule's run and its outcome.
"""

from core.turns.intake import REFUSAL_TEXT, InboundHandler
from core.turns.lifecycle import Lifecycle
from core.turns.outbox import Outbox
from core.turns.scheduled import ScheduledRuns
from core.turns.stream import ReplyStream, StreamPolicy
from core.turns.turn import Contexts, Outcome, Turn, TurnRunner

__all__ = [
    "REFUSAL_TEXT",
    "Contexts",
    "InboundHandler",
    "Lifecycle",
    "Outbox",
    "Outcome",
    "ReplyStream",
    "ScheduledRuns",
    "StreamPolicy",
    "Turn",
    "TurnRunner",
]
