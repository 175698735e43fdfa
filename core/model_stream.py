"""`ModelStream`: one model call streamed, its text and tool calls scrubbed of the bot's
secrets as they arrive (`core/redact.py`), traced as a client span (`core/tracing.py`); with
`text_calls`, tool calls the model wrote out as text are picked up (`core/text_tool_calls.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from opentelemetry.trace import SpanKind

from core.events import AgentEvent, Finished, RetryEnded, RetryStarted, TextDelta
from core.hooks import HookChain
from core.messages import ToolCall
from core.providers.base import ModelRequest, Provider
from core.redact import Redactor
from core.text_tool_calls import TextToolCalls
from core.tracing import (
    MODEL_INPUT_TOKENS,
    MODEL_NAME,
    MODEL_OUTPUT_TOKENS,
    MODEL_PROVIDER,
    MODEL_RESPONSE,
    span,
)

__all__ = ["ModelStream"]


class ModelStream:
    """Streams model calls, showing each scrubbed piece of text as it comes.

    `text_calls`: an answer without native tool calls whose text writes one out for a tool
    the request offers is read as that call, its text held back and kept out of the answer.
    """

    def __init__(self, redactor: Redactor, hooks: HookChain, *, text_calls: bool = False) -> None:
        self.redact = redactor
        self.hooks = hooks
        self.text_calls = text_calls

    async def traced_call(
        self,
        request: ModelRequest,
        emit: Callable[[AgentEvent | None], None],
        streamed: list[str] | None = None,
        *,
        provider: Provider,
        room: Callable[[], Awaitable[None]] | None = None,
    ) -> tuple[str, list[ToolCall], Finished]:
        """`call`, the hooks' `before_model` first, inside a client span of the model call
        that says who answered and what it used (a fallback provider's: the one it fell back
        to)."""
        with span(
            "model call",
            kind=SpanKind.CLIENT,
            attributes={MODEL_PROVIDER: provider.name, MODEL_NAME: request.model},
        ) as traced:
            await self.hooks.before_model(request)
            text, calls, finished = await self.call(
                request, emit, streamed, provider=provider, room=room
            )
            traced.set_attributes(
                {
                    MODEL_PROVIDER: finished.provider or provider.name,
                    MODEL_RESPONSE: finished.model or request.model,
                    MODEL_INPUT_TOKENS: finished.usage.input_tokens,
                    MODEL_OUTPUT_TOKENS: finished.usage.output_tokens,
                }
            )
        return text, calls, finished

    async def call(
        self,
        request: ModelRequest,
        emit: Callable[[AgentEvent | None], None],
        streamed: list[str] | None = None,
        *,
        provider: Provider,
        room: Callable[[], Awaitable[None]] | None = None,
    ) -> tuple[str, list[ToolCall], Finished]:
        """The answer's text, its tool calls and how it finished; each piece of text is
        emitted (and added to `streamed`) as it comes."""
        parts: list[str] = []
        calls: list[ToolCall] = []
        finished = Finished()
        # The bot's own secrets never leave in an answer: each piece is scrubbed before it is
        # shown or kept, a secret split across two pieces too (held back until it is whole).
        scrubber = self.redact.answer()
        written = TextToolCalls([t.name for t in request.tools]) if self.text_calls else None

        def shown(chunk: str) -> None:
            if not chunk:
                return
            parts.append(chunk)
            if streamed is not None:
                streamed.append(chunk)
            emit(TextDelta(text=chunk))

        # Deadlines are the provider's (ReliableProvider gives each attempt one): only it can
        # tell the time spent waiting between retries from a model that is slow to answer.
        async for event in provider.stream(request):
            match event:
                case TextDelta(text=chunk):
                    piece = scrubber.add(chunk)
                    shown(written.add(piece) if written else piece)
                case ToolCall():
                    calls.append(self.scrubbed(event))
                case Finished():
                    finished = event
                case RetryStarted() | RetryEnded():
                    emit(event)
            if room is not None:
                await room()  # the next piece is read once the consumer has caught up
        if written is None:
            shown(scrubber.end())
            return "".join(parts), calls, finished
        shown(written.add(scrubber.end()) + written.end())
        if calls:  # native calls win; the text is kept as the model wrote it
            return written.raw, calls, finished
        text = "".join(parts)
        return (text.strip(), written.calls, finished) if written.calls else (text, [], finished)

    def scrubbed(self, call: ToolCall) -> ToolCall:
        """`call` with the bot's secrets out of its arguments: as it is stored, shown and run
        (a tool is never the way a configured secret leaves the bot)."""
        arguments = self.redact.known_data(call.arguments)
        raw = call.raw_arguments
        scrubbed_raw = raw if raw is None else self.redact.known(raw)
        if arguments == call.arguments and scrubbed_raw == raw:
            return call
        return call.model_copy(update={"arguments": arguments, "raw_arguments": scrubbed_raw})
