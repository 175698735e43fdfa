"""What a person is told when a turn fails: the sentences of `RunFailed`, one place for all.

The runtime (`core/runtime.py`) decides that a turn failed; this module words it. Details for
the operator's log go in `detail`, redacted; the person reads `message`.
"""

from __future__ import annotations

from typing import Literal

from core.errors import BudgetExceeded, ProviderError
from core.events import RunFailed
from core.redact import Redactor

__all__ = [
    "ANSWER_CUT_OFF",
    "INTERNAL_ERROR",
    "MODEL_TOO_SLOW",
    "MODEL_UNAVAILABLE",
    "provider_failure",
    "too_long",
]

MODEL_UNAVAILABLE = "The model is unavailable right now, please try again in a minute."
MODEL_TOO_SLOW = "The model took too long to answer. Please try again."
ANSWER_CUT_OFF = "My answer was cut off before it ended; please ask again."
INTERNAL_ERROR = "Something went wrong on my side while answering. Please try again."


def provider_failure(
    run_id: str, exc: ProviderError, *, provider: str, redact: Redactor, cut_off: bool = False
) -> RunFailed:
    """The failure of a turn whose model call failed with `exc` (of `provider`); `cut_off`:
    part of the answer was shown already."""
    message = MODEL_UNAVAILABLE
    failure: Literal["provider", "timeout"] = "provider"
    if cut_off and exc.retryable:
        # Part of the answer was shown: say that it stopped, not that nothing came.
        message = ANSWER_CUT_OFF
    elif exc.kind == "timeout":
        message = MODEL_TOO_SLOW
        failure = "timeout"
    elif exc.kind in ("auth", "billing", "model_not_found"):
        # Waiting will not help here; the operator has to act.
        message = (
            "I cannot reach my model because of a setup problem on the bot's side; "
            "the operator can find the details in the log."
        )
    elif exc.kind == "content_blocked":
        message = "The model declined to answer that request."
    elif exc.kind == "context_overflow":
        message = "This conversation is too long for the model. Send /new to start afresh."
    return RunFailed(
        run_id=run_id,
        failure=failure,
        message=message,
        detail=redact(f"{provider} {exc.kind}: {exc}"),
    )


def too_long(run_id: str, exc: BudgetExceeded) -> RunFailed:
    """The failure of a turn whose message does not fit the model's context window."""
    return RunFailed(
        run_id=run_id,
        failure="budget",
        message=(
            "This message (with what it brought along) is too long for the model's context "
            "window. Please send something shorter, or /new to start afresh."
        ),
        detail=str(exc),
    )
