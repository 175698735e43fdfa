"""`switchboard chat` with the `ask_user` tool: the question is printed and the next line piped
in is the answer (the real Anthropic SDK against the fake, in a subprocess)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import processes
from tests.fakes import FakeAnthropic, Text, ToolUse

pytestmark = pytest.mark.e2e

KEY = "test-key"


async def test_the_next_line_answers_the_question(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.script(
        ToolUse([("call_ask_1", "ask_user", {"question": "Which colour should the logo be?"})]),
        Text("A blue logo it is."),
    )
    env = processes.clean_env(tmp_path, redis_url=None)
    env.update(
        SWITCHBOARD_PROVIDER="anthropic",
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=fake_anthropic.url,
    )

    code, out, err = await processes.run_once(["chat"], env, tmp_path, "make me a logo\nBlue\n")

    assert code == 0, err
    assert out.splitlines()[-1] == "A blue logo it is."
    assert "Which colour should the logo be?" in out
    assert len(fake_anthropic.requests) == 2  # "Blue" was the answer, not a turn of its own
    results = [
        part
        for message in fake_anthropic.requests[1].json["messages"]
        for part in message["content"]
        if isinstance(part, dict) and part.get("type") == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["call_ask_1"]
    assert "answered: Blue" in str(results[0]["content"])
