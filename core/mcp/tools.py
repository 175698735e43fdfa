"""MCP tools as Switchboard tools: names, argument validation and results.

The model sees each tool of server `files` called `read` as `files__read`, with the server's
description and JSON schema. Arguments are checked against that schema (`jsonschema`) before
anything goes to the server, so a bad call comes back at once as an error the model can
correct. Results keep their text; images become a short note (a tool result is text here).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import mcp_types
from jsonschema import Draft202012Validator, validators
from jsonschema import exceptions as schema_errors
from jsonschema.protocols import Validator
from pydantic import BaseModel, ConfigDict

from core.errors import ToolError
from core.providers.base import ToolSpec
from core.tools.base import SafetyTier, Tool, ToolContext, ToolResult

__all__ = ["McpTool", "render_result", "tool_name"]

_NAME_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NAME_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME = 64
# At most this many schema problems are named in one error message.
_MAX_PROBLEMS = 3

# Calls a server's tool by its own name with validated arguments; returns the result text.
CallServer = Callable[[str, dict[str, Any]], Awaitable[str]]


def tool_name(server: str, tool: str, taken: Iterable[str] = ()) -> str:
    """`<server>__<tool>` in the characters and length providers accept, unique in `taken`."""
    name = _NAME_BAD_CHARS.sub("_", f"{server}__{tool}")
    taken = set(taken)
    if len(name) <= _MAX_NAME and name not in taken and _NAME_OK.match(name):
        return name
    # Too long, or two tools collapse to one name: keep a readable prefix and a digest.
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9]}_{digest}"


class _AnyArguments(BaseModel):
    """Placeholder argument model: MCP tools validate against the server's JSON schema."""

    model_config = ConfigDict(extra="allow")


class McpTool(Tool[_AnyArguments]):
    """One tool of an MCP server, as the runtime and the model see it."""

    def __init__(
        self,
        *,
        name: str,
        server: str,
        remote_name: str,
        description: str,
        schema: dict[str, Any],
        tier: SafetyTier,
        call: CallServer,
    ) -> None:
        super().__init__(
            name=name,
            description=description,
            args=_AnyArguments,
            tier=tier,
            run=self._run_validated,
        )
        self.server = server
        self.remote_name = remote_name
        self._call = call
        self.spec = ToolSpec(name=name, description=description, parameters=_clean(schema))
        self._validator = _validator_for(self.spec.parameters)

    async def __call__(self, arguments: dict[str, Any], context: ToolContext) -> str:
        self.check(arguments)
        return await self._call(self.remote_name, arguments)

    async def result(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        """The server's text as the result (checked against its schema, not parsed again)."""
        return ToolResult(text=await self(arguments, context))

    def check(self, arguments: dict[str, Any]) -> None:
        """Raise `ToolError` naming the failing fields when `arguments` break the schema."""
        if self._validator is None:
            return
        errors = sorted(
            self._validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.path]
        )
        if not errors:
            return
        problems = []
        for error in errors[:_MAX_PROBLEMS]:
            where = ".".join(str(p) for p in error.absolute_path) or "arguments"
            problems.append(f"{where}: {error.message}")
        raise ToolError(f"Invalid arguments for {self.name}: {'; '.join(problems)}")

    async def _run_validated(self, args: _AnyArguments, context: ToolContext) -> str:
        return await self(args.model_dump(), context)


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as providers want it: an object with properties, no top-level title."""
    cleaned = {k: v for k, v in schema.items() if k != "title"}
    cleaned.setdefault("type", "object")
    cleaned.setdefault("properties", {})
    return cleaned


def _validator_for(schema: dict[str, Any]) -> Validator | None:
    """A validator for `schema`, or None when the server sent a schema that is not valid."""
    # An unknown `$schema` falls back to the newest draft (and no warning about it).
    cls: type[Validator] = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except schema_errors.SchemaError:
        return None  # the server's own check still applies
    return cls(schema)


def render_result(result: mcp_types.CallToolResult) -> str:
    """The text of a tool result: text blocks joined, other content as short notes.

    Raises `ToolError` with that text when the server marks the result as an error.
    """
    parts: list[str] = []
    for block in result.content:
        match block:
            case mcp_types.TextContent(text=text):
                parts.append(text)
            case mcp_types.ImageContent(mime_type=mime, data=data):
                parts.append(f"[image: {mime}, {len(data) * 3 // 4} bytes, not shown]")
            case mcp_types.AudioContent(mime_type=mime):
                parts.append(f"[audio: {mime}, not played]")
            case mcp_types.ResourceLink(uri=uri, name=name):
                parts.append(f"[resource link: {name} {uri}]")
            case mcp_types.EmbeddedResource(resource=mcp_types.TextResourceContents() as res):
                parts.append(res.text)
            case mcp_types.EmbeddedResource(resource=res):
                parts.append(f"[embedded resource: {res.uri}, {res.mime_type or 'binary'}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts) if parts else "(no output)"
    if result.is_error:
        raise ToolError(text)
    return text
