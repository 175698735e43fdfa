"""The no-SDK floor: the same turns as `bench.floor` with nothing but one plain HTTP client.

One long-lived `httpx.AsyncClient` posts the raw JSON body (streamed, the SSE read line by
line, or not streamed, one JSON answer), keeps the history in a list, runs the one tool inline
and inserts one SQLite row per message. No SDK, no models, no retries: the least any Python
loop can do per turn against the same API, so ours over this is what the SDK and the runtime
cost together.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import httpx

from bench.common import API_KEY
from bench.floor import TIMEOUT, TOOL, calculate

_ANTHROPIC_TOOL = {
    "name": TOOL["name"],
    "description": TOOL["description"],
    "input_schema": TOOL["parameters"],
}


class BareLoop:
    """One HTTP client and one SQLite file shared by every session of a run."""

    def __init__(self, vendor: str, url: str, database: str, *, stream: bool = True) -> None:
        self.vendor = vendor
        self.stream = stream
        if vendor == "openai":
            headers = {"authorization": f"Bearer {API_KEY}"}
            self._path = "/chat/completions"
        else:
            headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
            self._path = "/v1/messages"
        headers["content-type"] = "application/json"
        # The SDKs' connection limits (httpx's own default of 100 connections would hold the
        # floor back when 1,000 sessions call at once, W2).
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        self._http = httpx.AsyncClient(
            base_url=url.rstrip("/"), headers=headers, timeout=TIMEOUT, limits=limits
        )
        self._db = sqlite3.connect(database)
        self._db.execute("CREATE TABLE IF NOT EXISTS messages (session TEXT, role TEXT, body TEXT)")
        self.histories: dict[str, list[dict[str, Any]]] = {}

    async def aclose(self) -> None:
        await self._http.aclose()
        self._db.close()

    def _keep(self, session: str, message: dict[str, Any]) -> None:
        self.histories.setdefault(session, []).append(message)
        self._db.execute(
            "INSERT INTO messages VALUES (?, ?, ?)", (session, message["role"], json.dumps(message))
        )
        self._db.commit()

    async def turn(self, session: str, text: str) -> str:
        """One user message to the final answer: model, tool, model."""
        self._keep(session, {"role": "user", "content": text})
        while True:
            answer, calls = await self._call(self.histories[session])
            if self.vendor == "openai":
                done = self._keep_openai(session, answer, calls)
            else:
                done = self._keep_anthropic(session, answer, calls)
            if done:
                return answer

    async def _call(self, history: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
        """One model call: the answer's text and its tool calls (id, name, args as JSON)."""
        body: dict[str, Any] = {"messages": history, "stream": self.stream}
        if self.vendor == "openai":
            body |= {"model": "gpt-4.1", "tools": [{"type": "function", "function": TOOL}]}
            if self.stream:
                body["stream_options"] = {"include_usage": True}
        else:
            body |= {"model": "claude-sonnet-4-6", "max_tokens": 4096, "tools": [_ANTHROPIC_TOOL]}
        content = json.dumps(body)
        if not self.stream:
            response = await self._http.post(self._path, content=content)
            response.raise_for_status()
            return _whole(self.vendor, response.json())
        async with self._http.stream("POST", self._path, content=content) as response:
            response.raise_for_status()
            if self.vendor == "openai":
                return await _openai_stream(_sse(response))
            return await _anthropic_stream(_sse(response))

    def _keep_openai(self, session: str, answer: str, calls: list[dict[str, str]]) -> bool:
        if not calls:
            self._keep(session, {"role": "assistant", "content": answer})
            return True
        wire = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["args"]},
            }
            for c in calls
        ]
        self._keep(session, {"role": "assistant", "content": answer or None, "tool_calls": wire})
        for c in calls:
            result = calculate(json.loads(c["args"] or "{}"))
            self._keep(session, {"role": "tool", "tool_call_id": c["id"], "content": result})
        return False

    def _keep_anthropic(self, session: str, answer: str, calls: list[dict[str, str]]) -> bool:
        content: list[dict[str, Any]] = [{"type": "text", "text": answer}] if answer else []
        for c in calls:
            args = json.loads(c["args"] or "{}")
            content.append({"type": "tool_use", "id": c["id"], "name": c["name"], "input": args})
        self._keep(session, {"role": "assistant", "content": content})
        if not calls:
            return True
        results = [
            {
                "type": "tool_result",
                "tool_use_id": c["id"],
                "content": calculate(json.loads(c["args"] or "{}")),
            }
            for c in calls
        ]
        self._keep(session, {"role": "user", "content": results})
        return False


async def _sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON payload of each `data:` line of a server-sent event stream."""
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                yield json.loads(data)


async def _openai_stream(
    events: AsyncIterator[dict[str, Any]],
) -> tuple[str, list[dict[str, str]]]:
    answer: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    async for chunk in events:
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                answer.append(delta["content"])
            for piece in delta.get("tool_calls") or ():
                call = calls.setdefault(piece.get("index", 0), {"id": "", "name": "", "args": ""})
                call["id"] += piece.get("id") or ""
                function = piece.get("function") or {}
                call["name"] += function.get("name") or ""
                call["args"] += function.get("arguments") or ""
    return "".join(answer), list(calls.values())


async def _anthropic_stream(
    events: AsyncIterator[dict[str, Any]],
) -> tuple[str, list[dict[str, str]]]:
    answer: list[str] = []
    blocks: dict[int, dict[str, str]] = {}
    async for event in events:
        kind = event.get("type")
        if kind == "content_block_start" and event["content_block"]["type"] == "tool_use":
            block = event["content_block"]
            blocks[event["index"]] = {"id": block["id"], "name": block["name"], "args": ""}
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                answer.append(delta["text"])
            elif delta["type"] == "input_json_delta":
                blocks[event["index"]]["args"] += delta["partial_json"]
    return "".join(answer), list(blocks.values())


def _whole(vendor: str, body: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    """The text and tool calls of a non-streamed answer."""
    if vendor == "openai":
        message = body["choices"][0]["message"]
        calls = [
            {"id": c["id"], "name": c["function"]["name"], "args": c["function"]["arguments"]}
            for c in message.get("tool_calls") or ()
        ]
        return message.get("content") or "", calls
    text = "".join(b["text"] for b in body["content"] if b["type"] == "text")
    calls = [
        {"id": b["id"], "name": b["name"], "args": json.dumps(b["input"])}
        for b in body["content"]
        if b["type"] == "tool_use"
    ]
    return text, calls
