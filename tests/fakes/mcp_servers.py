"""Small MCP servers for the tests.

`python -m tests.fakes.mcp_servers stdio` or `... http --port N` run a server written with the
official SDK (`MCPServer`); with `--unknown-session-400` the HTTP one answers a session it
does not know with 400 (as server-everything does) instead of the spec's 404. Tools:
`add(a, b)`, `echo(text)`, `slow(seconds)`, `crash()` (the process exits at once),
`exit_soon()` (answers, then exits), `image()` (a 1x1 PNG with a caption) and `fail()` (the
tool reports an error).

`... plain` runs a hand-written stdio server (JSON-RPC lines, no SDK) for what the SDK's
server does not do: `--linger` keeps it running after its input ends (as a server with a
background timer does), `--ignore-sigterm` makes only SIGKILL stop it, `--pid-file` says
which process to look for, `--mute` never answers (its client is forever starting it).
Tools: `echo(text)`, `whoami()` (the client's `clientInfo` as JSON), `research(query)`
(needs MCP tasks: every call fails with -32601, as on servers whose tool declares
`taskSupport: "required"`) and `grow()` (adds the tool `extra` and sends
`notifications/tools/list_changed` before it answers).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ImageContent, TextContent

# A 1x1 transparent PNG.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def build_server() -> MCPServer:
    """The test server with its tools."""
    server: MCPServer = MCPServer("switchboard-test", log_level="WARNING")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Say the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Answer after a while.")
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @server.tool(description="The server process exits.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="Answer, then the process exits a moment later.")
    async def exit_soon() -> str:
        asyncio.get_running_loop().call_later(0.05, os._exit, 3)
        return "bye"

    @server.tool(description="A tiny image.", structured_output=False)
    def image() -> list[TextContent | ImageContent]:
        return [TextContent(text="a pixel"), Image(data=PIXEL_PNG, format="png").to_image_content()]

    @server.tool(description="Always fails.")
    def fail() -> str:
        raise ToolError("this tool always fails")

    return server


# The hand-written server's tools, as `tools/list` gives them.
_PLAIN_TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Say the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {
        "name": "whoami",
        "description": "The client's name and version as it gave them.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "research",
        "description": "A long research job run as an MCP task.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "grow",
        "description": "Offer one more tool.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
_EXTRA_TOOL: dict[str, Any] = {
    "name": "extra",
    "description": "A tool offered only after grow().",
    "inputSchema": {"type": "object", "properties": {}},
}


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


class _PlainServer:
    """The hand-written server's state: the client's introduction and the tools offered."""

    def __init__(self) -> None:
        self.client_info: dict[str, Any] = {}
        self.tools = list(_PLAIN_TOOLS)

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The `result` (or `error`) part of the answer to a request."""
        match method:
            case "initialize":
                self.client_info = params.get("clientInfo", {})
                return {
                    "result": {
                        "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "switchboard-plain", "version": "1.0"},
                    }
                }
            case "ping":
                return {"result": {}}
            case "tools/list":
                return {"result": {"tools": self.tools}}
            case "tools/call":
                return self.call(params.get("name", ""), params.get("arguments") or {})
        return {"error": {"code": -32601, "message": f"Method not found: {method}"}}

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        match name:
            case "echo":
                return {"result": _text(f"echo: {arguments.get('text', '')}")}
            case "whoami":
                return {"result": _text(json.dumps(self.client_info, sort_keys=True))}
            case "grow":
                if _EXTRA_TOOL not in self.tools:
                    self.tools.append(_EXTRA_TOOL)
                _send({"method": "notifications/tools/list_changed"})
                return {"result": _text("grown")}
            case "extra" if _EXTRA_TOOL in self.tools:
                return {"result": _text("the extra tool")}
            case "research":
                # What a server answers when the client calls a task-only tool directly.
                return {"error": {"code": -32601, "message": "research must run as a task"}}
        return {"error": {"code": -32602, "message": f"Unknown tool: {name}"}}


def run_plain(*, linger: bool, ignore_sigterm: bool, pid_file: str | None, mute: bool) -> None:
    """Serve JSON-RPC lines on stdin/stdout until the input ends (and then some, if `linger`)."""
    if ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
    while mute:
        time.sleep(3600)  # never answers, not even `initialize`: its client is still starting
    server = _PlainServer()
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # a notification or a response: nothing to answer
        _send(
            {"id": message["id"], **server.answer(message["method"], message.get("params") or {})}
        )
    while linger:
        time.sleep(3600)  # the timer that keeps the process alive without its input


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("transport", choices=["stdio", "http", "plain"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--linger", action="store_true")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--pid-file")
    parser.add_argument("--unknown-session-400", action="store_true")
    parser.add_argument("--mute", action="store_true")
    options = parser.parse_args()
    if options.transport == "plain":
        run_plain(
            linger=options.linger,
            ignore_sigterm=options.ignore_sigterm,
            pid_file=options.pid_file,
            mute=options.mute,
        )
        return
    server = build_server()
    print(f"switchboard test server ({options.transport}) starting", file=sys.stderr)
    if options.transport == "stdio":
        server.run("stdio")
    elif options.unknown_session_400:
        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.run(
            _unknown_session_400(app), host="127.0.0.1", port=options.port, log_level="warning"
        )
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.port)


def _unknown_session_400(app: Any) -> Any:
    """`app` answering an unknown session as server-everything does: 400, not the spec's 404."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
            "id": None,
        }
    ).encode()

    async def answering(scope: Any, receive: Any, send: Any) -> None:
        replaced = False

        async def sending(message: Any) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 404:
                replaced = True
                headers = [
                    (b"content-type", b"application/json"),
                    (b"content-length", b"%d" % len(body)),
                ]
                await send({"type": "http.response.start", "status": 400, "headers": headers})
            elif replaced and message["type"] == "http.response.body":
                if not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": body})
            else:
                await send(message)

        await app(scope, receive, sending)

    return answering


if __name__ == "__main__":
    main()
