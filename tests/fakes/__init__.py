"""Protocol-level fakes of the services Switchboard talks to, for driving the real clients.

Each fake is a loopback server speaking the vendor's wire format; fixtures live in
`tests.fakes.fixtures`.
"""

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.embeddings_api import FakeEmbeddings
from tests.fakes.llm_script import (
    NO_SCRIPT_MESSAGE,
    Cut,
    Error,
    Hold,
    Recorded,
    Reply,
    Stall,
    Step,
    StreamError,
    Text,
    ToolUse,
)
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.search_api import FakeSearch, Hit
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import Call, FakeTelegram, SentMessage, Webhook

__all__ = [
    "NO_SCRIPT_MESSAGE",
    "Call",
    "Cut",
    "Error",
    "FakeAnthropic",
    "FakeDiscord",
    "FakeEmbeddings",
    "FakeOpenAI",
    "FakeSearch",
    "FakeSlack",
    "FakeTelegram",
    "Hit",
    "Hold",
    "Recorded",
    "Reply",
    "SentMessage",
    "Stall",
    "Step",
    "StreamError",
    "Text",
    "ToolUse",
    "Webhook",
]
