"""Tools: what the model may call, with typed arguments and a safety tier."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.clock import Clock, utc_now
from core.envelopes import Address
from core.errors import ToolError
from core.providers.base import ToolSpec

__all__ = [
    "Clock",
    "SafetyTier",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "describe_validation_error",
    "utc_now",
]


class SafetyTier(enum.StrEnum):
    """How much harm a tool can do; decides concurrency and which modes may offer it."""

    READ_ONLY = "read_only"
    SIDE_EFFECTING = "side_effecting"
    PRIVILEGED = "privileged"


class ToolContext(BaseModel):
    """What a tool knows about the turn that called it."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    session_id: str
    user_id: str = ""
    platform: str = ""
    # The chat the turn answers in; None for turns that belong to no chat.
    address: Address | None = None
    is_admin: bool = False
    # The turn is a schedule's run (no person is waiting for the answer).
    scheduled: bool = False
    clock: Clock = Field(default=utc_now)
    # The turn's run id ("" outside a run), for events about the call (confirmations).
    run_id: str = ""
    # The session the turn's spending is charged to (a sub-agent's: its parent's); "": this one.
    charge_session: str = ""
    # Set per call by `core/tool_calls.py` for tools that start a turn of their own
    # (`delegate`, core/subagents.py): the call's id, the turn's capability mode (a
    # `core.modes.CapabilityMode`; typed loosely because core/modes.py imports this module)
    # and where the turn's events go.
    call_id: str = ""
    mode: Any = None
    emit: Callable[[Any], None] | None = None
    # The model the turn calls (set per tool round; "" outside a turn): a sub-agent's runs on it.
    model: str = ""
    # Where `ask_user` finds the person's answer: the turn's own mailbox (a
    # `core.turn_answers.TurnAnswers`, typed loosely as `mode` is); None with no mailbox claim.
    answers: Any = None


class ToolResult(BaseModel):
    """A tool's result with more than its text: `end_turn` asks that the turn end with it.

    When every call of a tool round ends the turn, the runtime stores the results and answers
    the person without calling the model again (`core/tool_rounds.py`): with `answer`, or
    `text` when it is None. A plain `str` result is `ToolResult(text=...)`.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    end_turn: bool = False
    answer: str | None = None


ArgsT = TypeVar("ArgsT", bound=BaseModel)


class Tool(Generic[ArgsT]):
    """A callable the model can use: name, description, argument model, tier and function.

    The function receives validated arguments and returns the text the model will read (or a
    `ToolResult`, to end the turn with it). It raises `ToolError` for failures the model
    should see and correct.
    """

    def __init__(
        self,
        *,
        name: str,
        description: str,
        args: type[ArgsT],
        tier: SafetyTier,
        run: Callable[[ArgsT, ToolContext], Awaitable[str | ToolResult]],
        timeout: float | None = None,
    ) -> None:
        """`timeout`: the seconds one call may take, for a tool that bounds itself (a
        sub-agent); None: the runtime's `tool_timeout`."""
        self.name = name
        self.timeout = timeout
        self.description = description
        self.args = args
        self.tier = tier
        self._run = run
        self.spec = ToolSpec(name=name, description=description, parameters=_schema_for(args))

    def parse(self, arguments: dict[str, Any]) -> ArgsT:
        """Validate raw model arguments; raises `ToolError` with a correctable message."""
        try:
            return self.args.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(
                f"Invalid arguments for {self.name}: {describe_validation_error(exc)}"
            ) from exc

    async def __call__(self, arguments: dict[str, Any], context: ToolContext) -> str:
        return (await self.result(arguments, context)).text

    async def result(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        """Run with raw model arguments: the result, with whether it ends the turn."""
        produced = await self._run(self.parse(arguments), context)
        return produced if isinstance(produced, ToolResult) else ToolResult(text=produced)

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, tier={self.tier.value})"


def _schema_for(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def describe_validation_error(exc: ValidationError) -> str:
    """A short, model-readable summary of what was wrong with the arguments."""
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)


class ToolRegistry:
    """The tools a runtime knows, by name. Built explicitly; nothing registers at import."""

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool[Any]) -> None:
        """Register a tool; a second tool with the same name is a programming error."""
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool

    def remove(self, name: str) -> None:
        """Forget the tool called `name`, if there is one (an MCP server withdrew it)."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool[Any]:
        """The tool called `name`; raises `ToolError` naming the known tools if absent."""
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise ToolError(f"Unknown tool {name!r}. Available tools: {known}.") from None

    def names(self) -> list[str]:
        """Every registered tool name, sorted."""
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
