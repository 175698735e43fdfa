"""What a turn runs with: the channel's context and limits, and the state it accumulates.

`ChannelContext` is what a channel tells the runtime about a turn (where, who, under which
capability mode), `RuntimeLimits` its budgets of steps, time and tokens, and `TurnState`
what `AgentRuntime` (`core/runtime.py`) keeps while the turn runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from core.arrivals import Arrivals
from core.checkpoints import Checkpoint
from core.context import Sanitizer
from core.envelopes import Address
from core.event_buffer import DEFAULT_STREAM_BUFFER_SIZE
from core.fencing import Fence
from core.messages import Message, Usage
from core.modes import CapabilityMode
from core.providers.base import ModelRequest, Provider
from core.safety import ToolCallMonitor
from core.store.log import CompactionSummary
from core.window import TurnWindow

__all__ = ["ChannelContext", "RuntimeLimits", "TurnRequests", "TurnState"]


class RuntimeLimits(BaseModel):
    """Budgets of one turn, and how its model's answers are read."""

    model_config = ConfigDict(frozen=True)

    max_steps: int = Field(default=8, ge=1, le=100)
    tool_timeout: float = Field(default=30.0, gt=0)
    max_tokens: int = Field(default=4096, ge=1)
    # Spending limit per session in USD, checked before every model call; None: no limit.
    max_spend_usd: float | None = Field(default=None, ge=0)
    # What one turn's own model calls may cost in USD (a sub-agent's `max_cost_usd`), checked
    # before each call besides the budgets; None: no such limit.
    max_turn_cost_usd: float | None = Field(default=None, ge=0)
    # Events of a turn its consumer may leave unread before the model stream waits for it.
    stream_buffer_size: int = Field(default=DEFAULT_STREAM_BUFFER_SIZE, ge=1, le=65_536)
    # Tool calls the model writes out as text (`<tool_call>{...}</tool_call>`, a ```json
    # block) run as real calls when it made none natively (core/text_tool_calls.py).
    text_tool_calls: bool = False


class ChannelContext(BaseModel):
    """Where a turn happens and under which policy."""

    model_config = ConfigDict(frozen=True)

    platform: str
    mode: CapabilityMode
    prompt_hint: str = ""
    session_key: str = ""
    user_id: str = ""
    user_name: str = ""
    # The chat the turn answers in (tools that deliver there later need it).
    address: Address | None = None
    # A direct conversation with the person (a DM), not a group.
    is_direct: bool = False
    # Whether the person is one of the profile's admins.
    is_admin: bool = False
    # A run of a schedule rather than a person's message.
    scheduled: bool = False
    # For a scheduled run: the system-prompt section saying what the run is and when its
    # answer is delivered (`core/scheduling/brief.py`).
    schedule_brief: str = ""
    # The session whose ledger and `per_session` budget the turn's model calls count to: a
    # sub-agent's, its parent's (core/subagents.py); "": the turn's own.
    charge_session: str = ""


@dataclass
class TurnRequests:
    """What extensions asked of the turn (`core/extensions.py`): to end it (`abort`, the
    reason), to compact the session, to reload; and an answer given without a model call."""

    abort: str | None = None
    compact: bool = False
    reload: bool = False
    reply: str | None = None

    def take_compaction(self) -> bool:
        """Whether a compaction was asked for since the last time this said so."""
        asked, self.compact = self.compact, False
        return asked


class TurnState:
    """What a turn has accumulated so far."""

    def __init__(self, fence: Fence | None = None, checkpoint: Checkpoint | None = None) -> None:
        self.fence = fence
        # The turn's run id (its ledger entries carry it).
        self.run_id = ""
        # A person's turn's checkpoint, as last saved.
        self.checkpoint = checkpoint
        # The session the turn runs in (once opened, the one the store opened it in) and its
        # messages after the summary's marker, as far as the turn knows them.
        self.session_id = ""
        self.history: list[Message] = []
        self.usage = Usage()
        self.texts: list[str] = []
        self.first_seq = 0
        # Known cost of this turn, and whether some call had no price.
        self.cost = 0.0
        self.unpriced = False
        self.turn_context = ""
        # The session's summary when the turn began (and its marker), and the turn's view of
        # the window.
        self.summary: CompactionSummary | None = None
        self.after = 0
        # The session's revision when the turn began (`HistoryCache` keeps it with the history).
        self.revision = 0
        self.view: TurnWindow
        # The well-formed view of the history a previous turn left (see HistoryCache), and
        # this turn's once its window exists.
        self.ready: Sanitizer | None = None
        self.monitor = ToolCallMonitor()
        # The model call under way: its request and the text it streamed so far, kept so a
        # call cut short (cancelled, or its stream broken) is charged and its text kept.
        self.in_flight: ModelRequest | None = None
        self.streamed: list[str] = []
        # Whose spending the turn's calls count to, in the ledger (`core/budgets.py`).
        self.user: str | None = None
        self.chat: str | None = None
        # The session charged in the ledger ("" until the turn is prepared: its own).
        self.charged = ""
        # Where messages that come while the turn runs are found, to join it (None: none do).
        self.arrivals: Arrivals | None = None
        # The provider and model this turn calls (the session's `/model` choice, or the default).
        self.provider: Provider
        self.model: str
        # Waits while the turn's consumer has `stream_buffer_size` events unread (None: never).
        self.room: Callable[[], Awaitable[None]] | None = None
        # Set once the budgets sent the turn to the cheaper model (`[budgets] degrade_model`);
        # its ledger entries say so. `max_steps`: the turn's step limit, fewer once degraded.
        self.degraded = False
        self.max_steps = 0
        self.requests = TurnRequests()
