"""The `demo` provider: offline, deterministic, and clearly labelled as a demo.

It lets the whole loop run without an API key, through the real tools: arithmetic goes to the
`calculator` tool, questions about the time to `current_time`, "remember that ..." to
`remember`, "what do you remember" (or a question about something remembered) to `recall`,
"remind me in ..." and "every ..." to `schedule_create`, "my schedules" to `schedule_list`.
"What can you do" lists these and says how to connect a real model; anything
else is echoed.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from core.events import Finished, ModelEvent, StopReason, TextDelta
from core.messages import Message, ToolCall, Usage
from core.providers.base import ModelRequest

__all__ = ["DEMO_NOTICE", "DemoProvider"]

DEMO_NOTICE = (
    "(Demo mode: answers are canned. Set ANTHROPIC_API_KEY or OPENAI_API_KEY for real answers.)"
)
CAPABILITIES = (
    "I am the offline demo model: I understand a few kinds of request, and each one goes "
    "through the bot's real tools.\n"
    "- arithmetic: what is 17*23?\n"
    "- the time: what time is it in Asia/Tokyo?\n"
    "- memory: remember that my favourite colour is green, then: what do you remember?\n"
    "- reminders: remind me in 10 minutes to stretch; every 1 hour check the oven\n"
    "- schedules: list my schedules\n"
    "For real answers, connect a model: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or "
    "OPENAI_BASE_URL for a local OpenAI-compatible server such as Ollama) in the environment "
    "or a .env file, and start again."
)

# A run of arithmetic characters with at least one operator between two operands.
_ARITHMETIC_RUN = re.compile(r"[\d\s.+\-*/%^\u00d7\u00f7()]+")
_HAS_OPERATION = re.compile(r"\d\s*\)*\s*(?:\*\*|[-+*/%^\u00d7\u00f7])\s*\(*\s*[-+]?\s*[\d.]")
_TIME_QUESTION = re.compile(
    r"\b(what time|the time|time is it|time in|clock|what day|what date|today's date|date today)\b",
    re.IGNORECASE,
)
_UNIT = r"(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)"
_REMIND = re.compile(
    rf"\bremind me (?:in|after) (\d+)\s*{_UNIT}\b(?:\s+(?:to|that|about))?\s*(.+)",
    re.IGNORECASE,
)
_EVERY = re.compile(rf"\bevery (\d+)\s*{_UNIT}\b[,:]?\s*(.+)", re.IGNORECASE)
_REMINDER_PREFIX = "Reminder:"
_IANA_ZONE = re.compile(r"\b(UTC|[A-Z][A-Za-z_]+/[A-Z][A-Za-z_]+(?:/[A-Z][A-Za-z_]+)?)\b")
_ECHO_LIMIT = 500
_CAPABILITIES_QUESTION = re.compile(
    r"what can you do|what do you do|who are you|what are you|how do (?:i|you) use|^\s*help\W*$",
    re.IGNORECASE,
)
_REMEMBER = re.compile(r"^\s*(?:please\s+)?remember(?:\s+that)?\s+(.+)", re.IGNORECASE)
_RECALL_ALL = re.compile(
    r"what do you (?:remember|know)(?: about me)?|what have you remembered", re.IGNORECASE
)
_RECALL_ABOUT = re.compile(r"^\s*(?:what|which|who|where) (?:is|are|was) my (.+?)\??\s*$", re.I)
_LIST_SCHEDULES = re.compile(
    r"\b(?:list|show)?\s*(?:my|the)\s+(?:schedules|reminders)\b", re.IGNORECASE
)


class DemoProvider:
    """A stand-in model that needs no network and always gives the same answer."""

    def __init__(self, *, chunk_words: int = 3) -> None:
        self._chunk_words = chunk_words

    @property
    def name(self) -> str:
        return "demo"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer the last message of the request as described in the module docstring."""
        messages = request.messages
        offered = {t.name for t in request.tools}
        last = messages[-1] if messages else Message.user("")
        call: ToolCall | None = None
        if last.role == "tool":
            text = _answer_from_tools(messages)
        else:
            call, text = _plan(last, offered, call_id=f"demo_call_{len(messages)}")
        reminder = last.role == "user" and last.text.startswith(_REMINDER_PREFIX)
        if call is None and not reminder and not _noticed(messages):
            text = f"{DEMO_NOTICE}\n\n{text}"
        usage = Usage(
            input_tokens=sum(len(m.text) for m in messages) // 4 + len(request.system) // 4,
            output_tokens=max(1, len(text) // 4),
        )
        for chunk in _chunks(text, self._chunk_words):
            yield TextDelta(text=chunk)
        stop: StopReason = "end_turn"
        if call is not None:
            yield call
            stop = "tool_use"
        yield Finished(stop_reason=stop, usage=usage)


def _plan(last: Message, offered: set[str], *, call_id: str) -> tuple[ToolCall | None, str]:
    text = last.text.strip()
    if not text:
        if last.images:
            return None, "I got your picture, but the demo model cannot look at images."
        return None, "Say something and I will answer."
    scheduled = _schedule_request(text, offered, call_id)
    if scheduled is not None:
        return scheduled
    remembered = _memory_request(text, offered, call_id)
    if remembered is not None:
        return remembered
    if _LIST_SCHEDULES.search(text):
        if "schedule_list" in offered:
            return ToolCall(id=call_id, name="schedule_list", arguments={}), ""
        return None, "I would list your schedules, but scheduling is off in this chat."
    if _CAPABILITIES_QUESTION.search(text):
        return None, CAPABILITIES
    if text.startswith(_REMINDER_PREFIX):
        return None, f"\u23f0 {text}"  # a reminder coming due: say it
    expression = find_arithmetic(text)
    if expression is not None:
        if "calculator" in offered:
            return ToolCall(id=call_id, name="calculator", arguments={"expression": expression}), ""
        return None, f"I would work out {expression} with the calculator, but tools are off here."
    if _TIME_QUESTION.search(text):
        if "current_time" in offered:
            zone = _IANA_ZONE.search(text)
            arguments = {"timezone": zone.group(1)} if zone else {}
            return ToolCall(id=call_id, name="current_time", arguments=arguments), ""
        return None, "I would look at the clock, but tools are off here."
    echoed = text if len(text) <= _ECHO_LIMIT else text[:_ECHO_LIMIT] + "…"
    return None, f"You said: {echoed}"


def _schedule_request(
    text: str, offered: set[str], call_id: str
) -> tuple[ToolCall | None, str] | None:
    """ "remind me in N minutes to X" and "every N seconds X" become `schedule_create`."""
    remind, every = _REMIND.search(text), _EVERY.search(text)
    if remind is None and every is None:
        return None
    if "schedule_create" not in offered:
        return None, "I would schedule that, but scheduling is off in this chat."
    if remind is not None:
        amount, unit, what = remind.groups()
        arguments = {
            "delay": f"{amount}{unit[0].lower()}",
            "prompt": f"{_REMINDER_PREFIX} {what.strip().rstrip('.')}",
        }
    else:
        assert every is not None
        amount, unit, what = every.groups()
        arguments = {"every": f"{amount}{unit[0].lower()}", "prompt": what.strip()}
    return ToolCall(id=call_id, name="schedule_create", arguments=arguments), ""


def _memory_request(
    text: str, offered: set[str], call_id: str
) -> tuple[ToolCall | None, str] | None:
    """ "remember that X" becomes `remember`; "what do you remember" and "what is my X"
    become `recall`."""
    remember, everything = _REMEMBER.match(text), _RECALL_ALL.search(text)
    about = _RECALL_ABOUT.match(text)
    if remember is None and everything is None and about is None:
        return None
    wanted = "remember" if remember is not None else "recall"
    if wanted not in offered:
        return None, "I would use my memory for that, but memory is off in this chat."
    if remember is not None:
        fact = remember.group(1).strip().rstrip(".!")
        return ToolCall(id=call_id, name="remember", arguments={"text": fact}), ""
    query = about.group(1).strip() if about is not None else ""
    return ToolCall(id=call_id, name="recall", arguments={"query": query}), ""


def find_arithmetic(text: str) -> str | None:
    """The longest arithmetic expression in `text`, or None when there is none."""
    best: str | None = None
    for match in _ARITHMETIC_RUN.finditer(text):
        candidate = match.group(0).strip().rstrip(".")
        if _HAS_OPERATION.search(candidate) and (best is None or len(candidate) > len(best)):
            best = candidate
    return best


def _answer_from_tools(messages: list[Message]) -> str:
    results: list[Message] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.append(message)
    lines = []
    for result in reversed(results):
        if result.is_error:
            lines.append(f"The {result.name} tool reported a problem: {result.text}")
        elif result.name == "calculator":
            value = result.text.rpartition(" = ")[2]
            lines.append(f"The answer is {value} ({result.text}, worked out with the calculator).")
        elif result.name == "current_time":
            lines.append(f"It is {result.text}.")
        elif result.name == "schedule_create":
            lines.append(f"Done. {result.text}")
        elif result.name == "remember":
            fact = result.text.partition(": ")[2] or result.text
            lines.append(f"I will remember that: {fact}")
        elif result.name == "recall":
            lines.append(f"Here is what I remember:\n{result.text}")
        elif result.name == "schedule_list":
            lines.append(result.text)
        else:
            lines.append(f"{result.name} says: {result.text}")
    return "\n".join(lines)


def _noticed(messages: list[Message]) -> bool:
    return any(m.role == "assistant" and DEMO_NOTICE in m.text for m in messages)


def _chunks(text: str, words: int) -> list[str]:
    pieces = [p for p in re.split(r"(?<=\s)", text) if p]
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)]
