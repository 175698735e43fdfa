"""Tool calls an open model wrote out as text instead of calling natively (seed 003).

Many open models, served behind an OpenAI-compatible API without a tool-call parser, answer a
tool call as text. The shapes picked up, each holding a JSON object `{"name": ...,
"arguments": {...}}` (or a list of them; `parameters` for `arguments`, arguments as a JSON
string, and OpenAI's `{"type": "function", "function": {...}}` are taken too):

- `<tool_call>{...}</tool_call>` (Hermes, Qwen); a closing tag missing at the answer's end is
  forgiven;
- a fenced block: a ```json, ```tool_call or bare ``` fence;
- an answer that is nothing but the JSON object.

A block becomes calls only when it parses and every name in it is a tool offered in the turn;
otherwise it stays in the text as written. `TextToolCalls` works on the streamed answer: it
holds back a block from its opening marker until it can tell, so a picked-up call is never
shown; text outside blocks is shown as it comes (docs/decisions/0021-text-tool-calls.md).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from core.envelopes import new_id
from core.messages import ToolCall

__all__ = ["TextToolCalls", "parse_block", "pick_up"]

_TAG_OPEN, _TAG_CLOSE = "<tool_call>", "</tool_call>"
_FENCE = "```"
_OPENERS = (_TAG_OPEN, _FENCE)
# A fence's info string that may hold a call; other fences (```python) are code, shown as is.
_CALL_FENCES = frozenset({"", "json", "tool_call"})


def _one(item: Any, offered: Collection[str]) -> ToolCall | None:
    """One call from a parsed JSON value; None when it is not a call of an offered tool."""
    if not isinstance(item, dict):
        return None
    if item.get("type") == "function" and isinstance(item.get("function"), dict):
        item = item["function"]
    name = item.get("name")
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(name, str) or name not in offered or not isinstance(arguments, dict):
        return None
    return ToolCall(id=f"text_{new_id()}", name=name, arguments=arguments)


def _calls_in(body: str, offered: Collection[str]) -> list[ToolCall] | None:
    """The calls a JSON text holds (an object or a list of them), all of offered tools;
    None for anything else."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_one(item, offered) for item in items]
    if not calls or any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def parse_block(block: str, offered: Collection[str]) -> list[ToolCall] | None:
    """The calls of one block as written (`<tool_call>…</tool_call>`, a fenced block, or a
    bare JSON object); None when it is not one, its JSON is bad or a name is not offered."""
    text = block.strip()
    if text.startswith(_TAG_OPEN):
        body = text.removeprefix(_TAG_OPEN).removesuffix(_TAG_CLOSE)
        return _calls_in(body, offered)
    if text.startswith(_FENCE):
        info, _, rest = text.removeprefix(_FENCE).partition("\n")
        if info.strip().lower() not in _CALL_FENCES or not rest.rstrip().endswith(_FENCE):
            return None
        return _calls_in(rest.rstrip().removesuffix(_FENCE), offered)
    if text.startswith("{"):
        return _calls_in(text, offered)
    return None


def pick_up(text: str, offered: Collection[str]) -> tuple[str, list[ToolCall]]:
    """`text` without the calls written in it, and those calls (the whole answer at once)."""
    reader = TextToolCalls(offered)
    shown = reader.add(text) + reader.end()
    return shown, reader.calls


class TextToolCalls:
    """Picks the written-out tool calls out of an answer that arrives in pieces.

    `add` returns the text that may be shown now; `end` the rest once the answer is complete.
    Joined, they are the answer without the blocks that became `calls`; `raw` is the answer
    as it came (kept when the model also made native calls, which then win).
    """

    def __init__(self, offered: Collection[str]) -> None:
        self._offered = frozenset(offered)
        self._pending = ""  # arrived, not shown yet: a block being held, or a marker's start
        self._held = False  # `_pending` starts with an opening marker
        self._started = False  # something other than white space was shown
        self.raw = ""
        self.calls: list[ToolCall] = []

    def add(self, piece: str) -> str:
        """The text that may be shown, now that `piece` came."""
        self.raw += piece
        self._pending += piece
        shown: list[str] = []
        while self._pending:
            if not self._started and (
                not self._pending.strip() or self._pending.lstrip().startswith("{")
            ):
                break  # the answer may still be nothing but a call: held to the end
            if self._held:
                closed = self._close()
                if closed is None:
                    break
                shown.append(closed)
                continue
            shown.append(self._open())
            if not self._held:
                break
        out = "".join(shown)
        self._started = self._started or bool(out.strip())
        return out

    def end(self) -> str:
        """The rest of the text: the answer is complete (an unclosed block is read as is)."""
        rest, self._pending, self._held = self._pending, "", False
        calls = parse_block(rest, self._offered) if rest.strip() else None
        if calls is None:
            return rest
        self.calls += calls
        return ""

    def _open(self) -> str:
        """Show `_pending` up to the first opening marker (holding it) or up to where one may
        begin at its end."""
        found = [i for i in (self._pending.find(m) for m in _OPENERS) if i >= 0]
        if found:
            start = min(found)
            self._held = True
        else:
            start = len(self._pending) - _partial_marker(self._pending)
        shown, self._pending = self._pending[:start], self._pending[start:]
        return shown

    def _close(self) -> str | None:
        """The held block once complete: "" when it became calls, else the block to show as
        written. None while its end has not come."""
        if self._pending.startswith(_TAG_OPEN):
            end, size = self._pending.find(_TAG_CLOSE), len(_TAG_CLOSE)
        else:
            end, size = self._pending.find(_FENCE, len(_FENCE)), len(_FENCE)
        if end < 0:
            return None
        block, self._pending = self._pending[: end + size], self._pending[end + size :]
        self._held, self._started = False, True
        calls = parse_block(block, self._offered)
        if calls is None:
            return block
        self.calls += calls
        return ""


def _partial_marker(text: str) -> int:
    """How many characters at the end of `text` may be the start of an opening marker."""
    for size in range(min(len(text), max(map(len, _OPENERS)) - 1), 0, -1):
        if any(m.startswith(text[-size:]) for m in _OPENERS):
            return size
    return 0
