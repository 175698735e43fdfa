"""Small MCP servers for the tests, written with the official SDK (`MCPServer`).

Run as `python -m tests.fakes.mcp_servers stdio` or `... http --port N`. Tools:
`add(a, b)`, `echo(text)`, `slow(seconds)`, `crash()` (the process exits at once),
`exit_soon()` (answers, then exits),
`image()` (a 1x1 PNG with a caption) and `fail()` (the tool reports an error).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    server = build_server()
    print(f"switchboard test server ({options.transport}) starting", file=sys.stderr)
    if options.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.port)


if __name__ == "__main__":
    main()
