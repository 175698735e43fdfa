"""The SDK floor: the least a Python bot on the official SDK must do per turn.

A bare loop over the official SDK's low-level `client.post` (the raw JSON body, streamed, so
the SDK's auth, errors and SSE decoding still run) that keeps the history in a list, runs the
one tool inline and inserts one SQLite row per message. No prompt, no policy, no events, no
budgets: what is left is the wire and the client library.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from bench.common import API_KEY

TOOL = {
    "name": "calculator",
    "description": "Evaluate an arithmetic expression exactly.",
    "parameters": {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
}


# The providers' own timeout, for every phase: the SDKs' default gives connecting 5 s, which
# 1,000 connections opened at once on a busy 2-core machine can exceed (W2).
TIMEOUT = 600.0


class FloorLoop:
    """One client and one SQLite file shared by every session of a run."""

    def __init__(self, vendor: str, url: str, database: str) -> None:
        # Only the one SDK is imported: each costs tens of MB that would count as ours.
        self.vendor = vendor
        self._openai: Any = None
        self._anthropic: Any = None
        if vendor == "openai":
            import openai

            self._openai = openai.AsyncOpenAI(
                api_key=API_KEY, base_url=url, max_retries=0, timeout=TIMEOUT
            )
        else:
            import anthropic

            self._anthropic = anthropic.AsyncAnthropic(
                api_key=API_KEY, base_url=url, max_retries=0, timeout=TIMEOUT
            )
        self._db = sqlite3.connect(database)
        self._db.execute("CREATE TABLE IF NOT EXISTS messages (session TEXT, role TEXT, body TEXT)")
        self.histories: dict[str, list[dict[str, Any]]] = {}

    async def aclose(self) -> None:
        for client in (self._openai, self._anthropic):
            if client is not None:
                await client.close()
        self._db.close()

    def _keep(self, session: str, message: dict[str, Any]) -> None:
        self.histories.setdefault(session, []).append(message)
        self._db.execute(
            "INSERT INTO messages VALUES (?, ?, ?)", (session, message["role"], json.dumps(message))
        )
        self._db.commit()

    async def turn(self, session: str, text: str) -> str:
        """One user message to the final answer: model, tool, model."""
        if self.vendor == "openai":
            return await self._openai_turn(session, text)
        return await self._anthropic_turn(session, text)

    async def _openai_turn(self, session: str, text: str) -> str:
        import openai
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        self._keep(session, {"role": "user", "content": text})
        while True:
            body = {
                "model": "gpt-4.1",
                "messages": self.histories[session],
                "tools": [{"type": "function", "function": TOOL}],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            stream = await self._openai.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
            answer: list[str] = []
            calls: dict[int, dict[str, str]] = {}
            async for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta.content:
                        answer.append(choice.delta.content)
                    for piece in choice.delta.tool_calls or ():
                        call = calls.setdefault(piece.index, {"id": "", "name": "", "args": ""})
                        call["id"] += piece.id or ""
                        if piece.function is not None:
                            call["name"] += piece.function.name or ""
                            call["args"] += piece.function.arguments or ""
            if not calls:
                final = "".join(answer)
                self._keep(session, {"role": "assistant", "content": final})
                return final
            self._keep(
                session,
                {
                    "role": "assistant",
                    "content": "".join(answer) or None,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["args"]},
                        }
                        for c in calls.values()
                    ],
                },
            )
            for call in calls.values():
                result = calculate(json.loads(call["args"]))
                self._keep(session, {"role": "tool", "tool_call_id": call["id"], "content": result})

    async def _anthropic_turn(self, session: str, text: str) -> str:
        import anthropic
        from anthropic.types import Message, RawMessageStreamEvent

        self._keep(session, {"role": "user", "content": text})
        tool = {
            "name": TOOL["name"],
            "description": TOOL["description"],
            "input_schema": TOOL["parameters"],
        }
        while True:
            body = {
                "model": "claude-sonnet-4-6",
                "max_tokens": 4096,
                "messages": self.histories[session],
                "tools": [tool],
                "stream": True,
            }
            stream = await self._anthropic.post(
                "/v1/messages",
                body=body,
                cast_to=Message,
                stream=True,
                stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
            )
            answer: list[str] = []
            blocks: dict[int, dict[str, str]] = {}
            async for event in stream:
                if event.type == "content_block_start" and event.content_block.type == "tool_use":
                    block = event.content_block
                    blocks[event.index] = {"id": block.id, "name": block.name, "args": ""}
                elif event.type == "content_block_delta":
                    if event.delta.type == "text_delta":
                        answer.append(event.delta.text)
                    elif event.delta.type == "input_json_delta":
                        blocks[event.index]["args"] += event.delta.partial_json
            content: list[dict[str, Any]] = []
            if answer:
                content.append({"type": "text", "text": "".join(answer)})
            for b in blocks.values():
                arguments = json.loads(b["args"] or "{}")
                content.append(
                    {"type": "tool_use", "id": b["id"], "name": b["name"], "input": arguments}
                )
            self._keep(session, {"role": "assistant", "content": content})
            if not blocks:
                return "".join(answer)
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": b["id"],
                    "content": calculate(json.loads(b["args"] or "{}")),
                }
                for b in blocks.values()
            ]
            self._keep(session, {"role": "user", "content": results})


def calculate(arguments: dict[str, Any]) -> str:
    """The one tool of every floor: `A*B` worked out, as the calculator's result text."""
    left, _, right = str(arguments.get("expression", "0*0")).partition("*")
    return f"{arguments.get('expression')} = {int(left or 0) * int(right or 0)}"
