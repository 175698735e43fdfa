"""The Anthropic request's `messages`, built incrementally from one call of a session to the
next (issue 22, point 2): the same JSON as built from scratch, whatever the history holds."""

from __future__ import annotations

import json
import random

from core.messages import Message, ToolCall
from core.providers.anthropic import AnthropicProvider, _messages_json


def _message(index: int, rng: random.Random) -> Message:
    call = ToolCall(id=f"call_{index}", name="calculator", arguments={"expression": "2*3"})
    kind = rng.choice(["user", "text", "tool_call", "tool_result", "blank", "system"])
    match kind:
        case "user":
            return Message.user(f"question {index}")
        case "text":
            return Message.assistant(f"answer {index}")
        case "tool_call":
            return Message.assistant("", [call])
        case "tool_result":
            return Message.tool_result(call, "2*3 = 6")
        case "blank":
            return Message.assistant("  ")
        case _:
            return Message(role="system")


def test_the_turns_merge_roles_drop_a_leading_answer_and_mark_the_newest_block() -> None:
    call = ToolCall(id="call_1", name="calculator", arguments={"expression": "2*3"})
    messages = [
        Message.assistant("before anyone asked"),
        Message.user("what is 2*3?"),
        Message.assistant("", [call]),
        Message.tool_result(call, "2*3 = 6"),
        Message.user("and?"),
    ]

    turns = json.loads(_messages_json(messages))

    assert [turn["role"] for turn in turns] == ["user", "assistant", "user"]
    assert [block["type"] for block in turns[2]["content"]] == ["tool_result", "text"]
    assert turns[2]["content"][-1] == {
        "type": "text",
        "text": "and?",
        "cache_control": {"type": "ephemeral"},
    }
    assert all("cache_control" not in block for block in turns[0]["content"])


def test_each_call_extends_the_last_one_and_matches_a_fresh_build() -> None:
    provider = AnthropicProvider(api_key="test", base_url="http://127.0.0.1:9")
    rng = random.Random(22)
    for _ in range(40):
        history = [_message(i, rng) for i in range(rng.randint(1, 25))]
        for end in range(len(history) + 1):
            # Fresh Message lists each call, the same objects in them: what the runtime sends.
            assert provider._messages_json(history[:end]) == _messages_json(history[:end])
        changed = [*history[:-1], Message.user("a different last message")]
        assert provider._messages_json(changed) == _messages_json(changed)
        shorter = history[: len(history) // 2]
        assert provider._messages_json(shorter) == _messages_json(shorter)
