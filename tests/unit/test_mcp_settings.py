"""MCP settings and tool naming, without a server."""

from __future__ import annotations

import re
from typing import Any

import mcp_types
import pytest
from pydantic import TypeAdapter, ValidationError

from core.errors import ToolError
from core.mcp import McpServerSettings, McpSettings
from core.mcp.tools import McpTool, render_result, tool_name
from core.modes import FULL, NO_TOOLS, SAFE_CHAT, ModeCatalog
from core.tools import SafetyTier, ToolContext

CONTEXT = ToolContext(session_id="s")
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_a_server_needs_exactly_one_transport() -> None:
    with pytest.raises(ValidationError, match="exactly one of"):
        McpServerSettings()
    with pytest.raises(ValidationError, match="exactly one of"):
        McpServerSettings(command=["x"], url="http://127.0.0.1/mcp")
    with pytest.raises(ValidationError, match="apply to a `url` server only"):
        McpServerSettings(command=["x"], headers={"A": "b"})
    with pytest.raises(ValidationError, match="String should match pattern"):
        McpServerSettings(url="file:///etc/passwd")


def test_unknown_keys_are_refused_and_defaults_are_safe() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        McpServerSettings.model_validate({"command": ["x"], "tiers": "read_only"})
    server = McpServerSettings(command=["x"])
    assert server.tier is SafetyTier.PRIVILEGED
    assert server.modes == ["full"]
    assert server.offers("anything")


def test_the_mcp_table_checks_server_names() -> None:
    table = TypeAdapter(McpSettings)
    parsed = table.validate_python({"files": {"command": ["npx", "-y", "server"]}})
    assert parsed["files"].command == ["npx", "-y", "server"]
    with pytest.raises(ValidationError):
        table.validate_python({"bad name": {"command": ["x"]}})


def test_tier_overrides_and_include_exclude() -> None:
    server = McpServerSettings(
        command=["x"],
        tier="read_only",
        tools={"write": {"tier": "privileged"}},
        include=["read", "write", "drop"],
        exclude=["drop"],
    )
    assert server.tier_for("read") is SafetyTier.READ_ONLY
    assert server.tier_for("write") is SafetyTier.PRIVILEGED
    assert [t for t in ("read", "write", "drop", "other") if server.offers(t)] == [
        "read",
        "write",
    ]


def test_tool_names_fit_what_providers_accept() -> None:
    assert tool_name("files", "read_file") == "files__read_file"
    odd = tool_name("files", "read.file/v2")
    assert odd == "files__read_file_v2"
    long = tool_name("files", "x" * 100)
    assert PROVIDER_NAME.match(long) and long.startswith("files__xxx")
    # Two tools that sanitize to the same name stay apart.
    clash = tool_name("files", "read/file", taken=[tool_name("files", "read.file")])
    assert clash != "files__read_file" and PROVIDER_NAME.match(clash)


def test_results_map_text_images_and_errors() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="one"),
            mcp_types.ImageContent(data="AAAA", mime_type="image/png"),
        ]
    )
    assert render_result(result) == "one\n[image: image/png, 3 bytes, not shown]"
    empty = mcp_types.CallToolResult(content=[], structured_content={"result": 3})
    assert render_result(empty) == '{"result": 3}'
    failed = mcp_types.CallToolResult(content=[mcp_types.TextContent(text="no")], is_error=True)
    with pytest.raises(ToolError, match="no"):
        render_result(failed)


def test_modes_admit_extra_names_without_changing_the_builtin_ones() -> None:
    catalog = ModeCatalog(admit={"safe-chat": ["calc__add"], "no-tools": []})
    assert catalog.get("safe-chat").admitted == frozenset({"calc__add"})
    assert SAFE_CHAT.admitted == frozenset()
    assert catalog.get("full") is FULL
    assert catalog.get("no-tools").tools == NO_TOOLS.tools


async def test_odd_schemas_still_give_a_tool() -> None:
    async def call(tool: str, arguments: dict[str, Any]) -> str:
        return f"{tool} {arguments}"

    def tool(schema: dict[str, Any]) -> McpTool:
        return McpTool(
            name="s__t",
            server="s",
            remote_name="t",
            description="d",
            schema=schema,
            tier=SafetyTier.READ_ONLY,
            call=call,
        )

    unknown_draft = tool({"$schema": "https://example.com/my-draft", "type": "object"})
    assert await unknown_draft({"x": 1}, CONTEXT) == "t {'x': 1}"
    invalid = tool({"type": "object", "properties": {"x": {"type": 5}}})
    assert await invalid({"x": 1}, CONTEXT) == "t {'x': 1}"  # the server checks instead
    bare = tool({})
    assert bare.spec.parameters == {"type": "object", "properties": {}}
