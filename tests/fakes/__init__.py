"""Protocol-level fakes of the services Switchboard talks to, for driving the real clients.

Each fake is a loopback server speaking the vendor's wire format; fixtures live in
`tests.fakes.fixtures`.
"""

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.llm_script import (
    NO_SCRIPT_MESSAGE,
    Error,
    Recorded,
    Reply,
    Stall,
    Step,
    StreamError,
    Text,
    ToolUse,
)
from tests.fakes.openai_api import FakeOpenAI

__all__ = [
    "NO_SCRIPT_MESSAGE",
    "Error",
    "FakeAnthropic",
    "FakeOpenAI",
    "Recorded",
    "Reply",
    "Stall",
    "Step",
    "StreamError",
    "Text",
    "ToolUse",
]
