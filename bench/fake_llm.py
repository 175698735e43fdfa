"""A fake LLM API in its own process, answering every conversation forever.

`python -m bench.fake_llm openai|anthropic [--latency SECONDS]` prints `ready <base_url>` once it
listens on 127.0.0.1 and serves until interrupted (with `--until-stdin-closes`, until its
parent closes its stdin: how the benchmarks run it). Every turn it sees is answered like the
workloads want it: a calculator call first, then, once the tool result is in, a short text.
It runs apart from the measured process so that its work is not counted as ours.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import sys
from typing import Any

from bench.common import ANSWER, API_KEY, EXPRESSION
from tests.fakes import FakeAnthropic, FakeOpenAI, Text, ToolUse
from tests.fakes.llm_script import Reply, ScriptedLLMServer

_calls = itertools.count(1)


def after_tool_result(body: dict[str, Any]) -> bool:
    """Whether the newest message of a request (either vendor's shape) is a tool result."""
    messages = body.get("messages") or []
    if not messages:
        return False
    last = messages[-1]
    if last.get("role") == "tool":
        return True
    content = last.get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )


def answer(body: dict[str, Any]) -> Reply:
    """A calculator call for a new user message, the final text after its result."""
    if after_tool_result(body):
        return Text(ANSWER, input_tokens=40, output_tokens=15)
    call_id = f"call_{next(_calls):08d}"
    return ToolUse([(call_id, "calculator", {"expression": EXPRESSION})], input_tokens=40)


def make_fake(vendor: str, latency: float) -> ScriptedLLMServer:
    kind = {"openai": FakeOpenAI, "anthropic": FakeAnthropic}[vendor]
    return kind(api_key=API_KEY, otherwise=answer, latency=latency, record=False)


async def serve(vendor: str, latency: float, until_stdin_closes: bool) -> None:
    async with make_fake(vendor, latency) as fake:
        print(f"ready {fake.url}", flush=True)
        if until_stdin_closes:
            # The parent closes our stdin when it is done (or dies, which closes it too).
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        else:
            await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fake_llm", description=__doc__)
    parser.add_argument("vendor", choices=["openai", "anthropic"])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--until-stdin-closes", action="store_true", help="stop when stdin closes")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.vendor, args.latency, args.until_stdin_closes))


if __name__ == "__main__":
    main()
