"""Events: what a provider streams to the runtime and what a turn streams to its caller.

`ModelEvent` is what `Provider.stream` yields; `AgentEvent` is what `AgentRuntime.run` yields.
Both are discriminated unions on `kind`. `TextDelta` belongs to both: the runtime passes the
model's text through as it arrives.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from core.messages import ToolCall, Usage

__all__ = [
    "LIFECYCLE_NAMES",
    "AgentEvent",
    "AgentEventAdapter",
    "Cancelled",
    "CheckpointSaved",
    "ChildEvent",
    "Compacted",
    "ConfirmationDecided",
    "ConfirmationRequested",
    "Degraded",
    "FailureKind",
    "Finished",
    "Joined",
    "ModelEvent",
    "Progress",
    "RetryEnded",
    "RetryStarted",
    "RunCompleted",
    "RunFailed",
    "RunStarted",
    "StopReason",
    "TextDelta",
    "ToolFinished",
    "ToolRequested",
    "TurnSettled",
]

StopReason = Literal["end_turn", "tool_use", "max_tokens", "content_filter", "other"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)


class TextDelta(_Event):
    """A piece of the model's answer text, as it streams."""

    kind: Literal["text_delta"] = "text_delta"
    text: str


class Finished(_Event):
    """The model finished one call."""

    kind: Literal["finished"] = "finished"
    stop_reason: StopReason = "end_turn"
    usage: Usage = Field(default_factory=Usage)
    # Who answered: with a fallback chain this may differ from the request's provider.
    provider: str = ""
    model: str = ""


class RetryStarted(_Event):
    """A model call failed before its first event and is tried again after `wait_s`."""

    kind: Literal["retry_started"] = "retry_started"
    provider: str
    # The attempt about to start after the wait (2 for the first retry).
    attempt: int
    wait_s: float
    error_kind: str
    message: str


class RetryEnded(_Event):
    """The retries of a model call ended: an attempt answered, or the last one failed."""

    kind: Literal["retry_ended"] = "retry_ended"
    provider: str
    attempts: int
    outcome: Literal["succeeded", "failed"]


ModelEvent = Annotated[
    TextDelta | ToolCall | Finished | RetryStarted | RetryEnded, Field(discriminator="kind")
]


class RunStarted(_Event):
    """A turn began for a session."""

    kind: Literal["run_started"] = "run_started"
    run_id: str
    session_id: str
    provider: str
    model: str


class Progress(_Event):
    """A human-readable note about what the turn is doing (step n, waiting on a tool...)."""

    kind: Literal["progress"] = "progress"
    step: int
    message: str


class ToolRequested(_Event):
    """The model asked for a tool; it is about to run (or be refused)."""

    kind: Literal["tool_requested"] = "tool_requested"
    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolFinished(_Event):
    """A tool call ended; `is_error` results go back to the model for correction."""

    kind: Literal["tool_finished"] = "tool_finished"
    call_id: str
    name: str
    output: str
    is_error: bool = False
    duration_ms: float = 0.0
    # The operator's tool hook (`[hooks]`, its import path) that blocked the call, if one did.
    blocked_by: str = ""
    # The tool hooks that patched the call's arguments or result, in order.
    patched_by: list[str] = Field(default_factory=list)
    # What the tool ran with when a hook patched its arguments (scrubbed); None: unpatched.
    arguments: dict[str, Any] | None = None


class CheckpointSaved(_Event):
    """A step's results and the turn's checkpoint, moved on to `tool_rounds`, were written."""

    kind: Literal["checkpoint_saved"] = "checkpoint_saved"
    run_key: str
    tool_rounds: int


class TurnSettled(_Event):
    """A person's turn is done for good: its message marked processed, its final reply (if
    any) handed to the outbox; nothing of it runs again after a crash."""

    kind: Literal["turn_settled"] = "turn_settled"
    run_id: str
    outcome: Literal["completed", "failed", "cancelled"]


class Degraded(_Event):
    """The turn runs on the cheaper model from here on: a daily budget scope is past
    `degrade_at` of its limit (`core/budgets.py`). Not shown to the person."""

    kind: Literal["degraded"] = "degraded"
    model: str
    budget: str
    scope: str


class Compacted(_Event):
    """Older turns were summarized to fit the context window."""

    kind: Literal["compacted"] = "compacted"
    summarized_messages: int
    summary_tokens: int


class Joined(_Event):
    """A person's message that came while the turn ran joined it: the model reads it before
    its next call, and the turn's one answer covers it (`busy = "steer"`, docs/telegram.md)."""

    kind: Literal["joined"] = "joined"
    inbound_id: str
    text: str


class RunCompleted(_Event):
    """The turn ended with a final answer."""

    kind: Literal["run_completed"] = "run_completed"
    run_id: str
    text: str
    usage: Usage = Field(default_factory=Usage)
    # None when some call of the turn used a model without a known price.
    cost_usd: float | None = 0.0
    steps: int = 1


FailureKind = Literal[
    "budget",
    "provider",
    "timeout",
    "internal",
    "bad_input",
    # The model kept making the same tool calls (`core.safety.ToolCallMonitor`).
    "loop",
]


class RunFailed(_Event):
    """The turn ended without an answer. `message` is safe to show to the user."""

    kind: Literal["run_failed"] = "run_failed"
    run_id: str
    failure: FailureKind
    message: str
    detail: str = ""


class Cancelled(_Event):
    """The turn was cancelled before it finished."""

    kind: Literal["cancelled"] = "cancelled"
    run_id: str


class ConfirmationRequested(_Event):
    """A privileged call waits for its asker's yes or no (published by `core/confirm.py`)."""

    kind: Literal["confirmation_requested"] = "confirmation_requested"
    question_id: str
    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # Who may answer (the person whose turn it is).
    user_id: str = ""
    timeout_s: float = 0.0


class ConfirmationDecided(_Event):
    """The answer to a `ConfirmationRequested`: allowed or not, and why."""

    kind: Literal["confirmation_decided"] = "confirmation_decided"
    question_id: str
    call_id: str
    name: str
    allowed: bool
    # "answered": someone allowed to answer did; "timeout": nobody did in time (a refusal).
    reason: Literal["answered", "timeout"]
    # Who answered, and how ("button" or "text"); empty on a timeout.
    answered_by: str = ""
    via: Literal["button", "text", ""] = ""


class ChildEvent(_Event):
    """An event of a sub-agent's turn (`delegate`, core/subagents.py), nested in its parent's
    stream: its run and session, the parent's run and the call that started it, and its depth
    (1: a child of a person's turn). Lifecycle readers see the inner event under its own name
    with `parent_run_id` and `depth` added; a chat shows none of it."""

    kind: Literal["child_event"] = "child_event"
    parent_run_id: str
    call_id: str
    run_id: str
    session_id: str
    depth: int = Field(default=1, ge=1)
    event: AgentEvent


AgentEvent = Annotated[
    RunStarted
    | Progress
    | TextDelta
    | ToolRequested
    | ToolFinished
    | Compacted
    | Joined
    | Degraded
    | RunCompleted
    | RunFailed
    | Cancelled
    | RetryStarted
    | RetryEnded
    | CheckpointSaved
    | TurnSettled
    | ChildEvent,
    Field(discriminator="kind"),
]

ChildEvent.model_rebuild()

AgentEventAdapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)

# The names lifecycle events carry on the bus topic `events`, as the seed runtimes use them.
LIFECYCLE_NAMES: dict[type[_Event], str] = {
    RunStarted: "agent.run.start",
    RunCompleted: "agent.run.complete",
    RunFailed: "agent.run.error",
    Cancelled: "agent.run.cancelled",
    ToolRequested: "tool.request",
    ToolFinished: "tool.result",
    Compacted: "agent.compacted",
    Joined: "agent.run.joined",
    ConfirmationRequested: "confirm.request",
    ConfirmationDecided: "confirm.decision",
    RetryStarted: "retry.start",
    RetryEnded: "retry.end",
    CheckpointSaved: "checkpoint.saved",
    TurnSettled: "turn.settled",
}
