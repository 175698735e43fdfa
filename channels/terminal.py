"""The terminal channel: a local chat in the shell, through the same mailboxes and queues as
every platform, except what is ephemeral (typing, progress, stream pieces): `switchboard chat`
shows that here, straight from the worker's `Outbox` (decision 0016).

On a TTY it is interactive (prompt_toolkit for input, rich for output): the answer streams as
it is written, tool activity shows as dim lines, Ctrl-C cancels the running turn. With stdin
piped, each input line is one turn and only the final answers are printed, one per turn.
Scheduled messages (`terminal` schedules, fired by the chat's own scheduler) are printed as
labelled blocks between turns, never inside an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from channels.base import ChannelSpec, InboundSink
from core.addresses import AddressGrammar
from core.commands import CommandInfo
from core.envelopes import Address, Attachment, Inbound, Outbound

if TYPE_CHECKING:
    # Loaded when a terminal chat starts, not by every process that reads the prompt hint.
    from prompt_toolkit import PromptSession
    from rich.console import Console
    from rich.status import Status

__all__ = ["NOTIFICATION_LABEL", "PROMPT_HINT", "SPEC", "TerminalAdapter", "local_help"]

# The line above a proactive message (a schedule's answer), so neither a person nor a script
# reading a piped chat takes it for the answer to what they just typed.
NOTIFICATION_LABEL = "── scheduled message ──"

PROMPT_HINT = (
    "Replies are shown in a terminal about 80 columns wide. Use plain text or light Markdown "
    "(short lists, `code`); avoid wide tables and images."
)

# The bot and user of every terminal chat: the person at the keyboard runs the bot.
_BOT = "local"
_USER = "local"
_QUIT = ("quit", "exit")

SPEC = ChannelSpec(
    name="terminal",
    prompt_hint=PROMPT_HINT,
    default_mode="full",
    # Schedules made at the terminal are shown in whichever terminal chat runs next.
    address=AddressGrammar(
        platform="terminal",
        usage="terminal",
        bare=Address(platform="terminal", bot=_BOT, chat="any"),
    ),
    # `switchboard chat` builds the adapter itself: it is never served by a gateway.
    build=None,
    # Answers are printed piece by piece as they come.
    stream_interval=0.0,
    shows_progress=True,
    operators=(_USER,),
)


def local_help(menu: Sequence[CommandInfo]) -> str:
    """What `/help` prints at the terminal: the chat commands, then the terminal's own."""
    listed = ", ".join(f"/{info.name} ({info.description.lower()})" for info in menu)
    return (
        f"Commands: {listed}; /quit leaves (Ctrl-D too). "
        "Ctrl-C stops an answer that is being written."
    )


class TerminalAdapter:
    """Reads turns from the keyboard or a pipe and prints the answers."""

    def __init__(
        self,
        *,
        chat: str,
        interactive: bool,
        menu: Sequence[CommandInfo],
        stdin: TextIO | None = None,
        console: Console | None = None,
        user_name: str = "you",
        before_leaving: Callable[[], Awaitable[None]] | None = None,
        files_dir: Path | None = None,
    ) -> None:
        """`before_leaving` is awaited when piped input ends, while answers are still shown:
        the chat waits there for scheduled messages due by then. Files the bot sends are saved
        in `files_dir` (default `./switchboard-files`) and a line names each one."""
        self.address = Address(platform=SPEC.name, bot=_BOT, chat=chat)
        self.interactive = interactive
        self._help = local_help(menu)
        self._words = frozenset(w for info in menu for w in (info.name, *info.aliases))
        self._stdin = stdin or sys.stdin
        if console is None:
            from rich.console import Console

            console = Console(highlight=False, soft_wrap=True)
        self._console = console
        self._user_name = user_name
        self._answered: dict[str, asyncio.Event] = {}
        # How much of each streamed reply is printed (pieces carry the whole text so far).
        self._printed: dict[str, int] = {}
        self._line_open = False
        self._stopping = asyncio.Event()
        self._sink: InboundSink | None = None
        self._session: PromptSession[str] | None = None
        # Answers that were apologies (the model or a tool failed): a piped chat exits non-zero.
        self.failed_turns = 0
        # Proactive messages that came while a turn was running: shown once it has ended,
        # never inside its answer.
        self._held: list[Outbound] = []
        self._before_leaving = before_leaving
        self._files_dir = files_dir or Path("switchboard-files")
        # A spinner while the model works and nothing is shown yet (a terminal only).
        self._thinking: Status | None = None

    @property
    def platform(self) -> str:
        return SPEC.name

    @property
    def bot_key(self) -> str:
        return _BOT

    async def run(self, sink: InboundSink) -> None:
        """Read turns until end of input, `/quit` or `stop()`; each waits for its answer."""
        session: PromptSession[str] | None = None
        if self.interactive:
            from prompt_toolkit import PromptSession

            session = PromptSession()
        self._sink, self._session = sink, session
        await self._read_turns(sink, session)
        leaving = self._before_leaving
        if leaving is not None and not self.interactive and not self._stopping.is_set():
            await leaving()

    async def _read_turns(self, sink: InboundSink, session: PromptSession[str] | None) -> None:
        while not self._stopping.is_set():
            line = await self._read_line(session)
            if line is None:
                return
            text = line.strip()
            if not text:
                continue
            if text[1:] in _QUIT and text.startswith("/"):
                return
            if text == "/help":
                self._console.print(self._help, style="dim", markup=False)
                continue
            word = text[1:].split(maxsplit=1)[0].lower() if text[1:].strip() else ""
            if text.startswith("/") and " " not in text and word not in self._words:
                # Answered here: only the terminal knows its own commands (/quit).
                self._console.print(f"Unknown command /{word}. {self._help}", markup=False)
                continue
            await self._send(sink, self._inbound(text))

    async def deliver(self, outbound: Outbound) -> None:
        """Print what the worker sent; the end of a turn releases the next input line."""
        if outbound.kind not in ("notification", "typing"):
            self._stop_thinking()
        if outbound.kind == "question":
            await self._ask(outbound)
            return
        if outbound.kind == "file":
            await self._save_files(outbound)
            return
        if outbound.kind == "notification":
            if self._answered:
                self._held.append(outbound)
            elif self._session is not None:
                # Idle at the prompt: printed above it, and the prompt drawn again below.
                from prompt_toolkit.application import run_in_terminal

                await run_in_terminal(lambda: self._notify(outbound))
            else:
                self._notify(outbound)
            return
        if outbound.failed and outbound.ends_turn:
            self.failed_turns += 1
        if self.interactive:
            self._show(outbound)
            if outbound.kind == "progress" and not outbound.ends_turn:
                self._think("working…")  # a tool runs; the model is asked again after it
        elif outbound.failed and outbound.ends_turn:
            # On stderr: a script reading stdout must not take an apology for the answer.
            print(outbound.text, file=sys.stderr, flush=True)
        elif outbound.ends_turn:
            self._console.print(outbound.text, markup=False)
        if outbound.ends_turn and outbound.reply_to in self._answered:
            self._answered[outbound.reply_to].set()

    async def _save_files(self, outbound: Outbound) -> None:
        """A terminal shows no files: each is saved, and a line says where."""
        for attachment in outbound.attachments:
            path = await asyncio.to_thread(_save, self._files_dir, attachment)
            self._end_line()
            line = f"📎 {attachment.name} saved to {path}"
            if outbound.text:
                line = f"{line} — {outbound.text}"
            self._console.print(line, markup=False)

    async def _ask(self, outbound: Outbound) -> None:
        """The turn waits for the person: show the question, read one line, send it back."""
        self._end_line()
        self._console.print(
            outbound.text, style="yellow" if self.interactive else None, markup=False
        )
        line = await self._read_line(self._session)
        if line is None or not line.strip() or self._sink is None:
            return  # no answer: the question times out, which counts as no
        await self._sink(self._inbound(line.strip()))

    async def stop(self) -> None:
        """Stop after the current turn."""
        self._stopping.set()

    def _inbound(self, text: str) -> Inbound:
        word = (text[1:].split(maxsplit=1) or [""])[0].lower() if text.startswith("/") else ""
        # A listed command may take words after it (an unknown lone `/word` never gets here).
        if word and word in self._words:
            return Inbound(
                kind="command",
                address=self.address,
                command=word,
                text=text,
                user_id=_USER,
                user_name=self._user_name,
                is_direct=True,
            )
        return Inbound(
            address=self.address,
            text=text,
            user_id="local",
            user_name=self._user_name,
            is_direct=True,
        )

    async def _send(self, sink: InboundSink, inbound: Inbound) -> None:
        answered = self._answered[inbound.id] = asyncio.Event()
        cancel_installed = self.interactive and _install_sigint(
            lambda: asyncio.ensure_future(self._cancel(sink))
        )
        try:
            await sink(inbound)
            self._think("thinking…")
            await answered.wait()
        finally:
            self._stop_thinking()
            if cancel_installed:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
            del self._answered[inbound.id]
            self._printed.pop(inbound.dedupe_key, None)
            if not self._answered:
                held, self._held = self._held, []
                for outbound in held:
                    self._notify(outbound)

    def _notify(self, outbound: Outbound) -> None:
        """A proactive message, as a labelled block between turns."""
        self._end_line()
        style = "yellow" if self.interactive else None
        self._console.print(NOTIFICATION_LABEL, style=style, markup=False)
        self._console.print(outbound.text, style=style, markup=False)

    def _think(self, what: str) -> None:
        """Show a spinner saying `what` until the next thing is printed (a terminal only)."""
        if not self.interactive or not self._console.is_terminal or self._thinking is not None:
            return
        self._thinking = self._console.status(what, spinner="dots", spinner_style="dim")
        self._thinking.start()

    def _stop_thinking(self) -> None:
        if self._thinking is not None:
            self._thinking.stop()
            self._thinking = None

    async def _cancel(self, sink: InboundSink) -> None:
        self._stop_thinking()
        self._end_line()
        self._console.print("(cancelling…)", style="dim", markup=False)
        await sink(Inbound(kind="cancel", address=self.address, user_id=_USER))

    async def _read_line(self, session: PromptSession[str] | None) -> str | None:
        if session is None:
            line = await _in_daemon_thread(self._stdin.readline)
            return line if line else None
        while True:
            try:
                text: str = await session.prompt_async(f"{self._user_name}> ")
                return text
            except KeyboardInterrupt:
                continue  # like a shell: Ctrl-C clears the line
            except EOFError:
                return None

    def _show(self, outbound: Outbound) -> None:
        match outbound.kind:
            case "delta":
                printed = self._printed.get(outbound.record_key, 0)
                piece = outbound.text[printed:]
                if piece:
                    self._printed[outbound.record_key] = len(outbound.text)
                    self._console.print(piece, end="", markup=False)
                    self._line_open = not piece.endswith("\n")
            case "progress":
                self._end_line()
                self._console.print(f"  ↳ {outbound.text}", style="dim", markup=False)
            case "reply":
                if outbound.failed:
                    self._end_line()
                    self._console.print(outbound.text, style="red", markup=False)
                elif outbound.record_key in self._printed:
                    self._end_line()
                else:
                    self._console.print(outbound.text, markup=False)
                self._console.print()
            case "notice":
                self._end_line()
                self._console.print(outbound.text, style="yellow", markup=False)
            case "typing":
                pass

    def _end_line(self) -> None:
        if self._line_open:
            self._console.print()
            self._line_open = False


def _save(folder: Path, attachment: Attachment) -> Path:
    """Write `attachment` into `folder` under its own name (made unique, never overwriting)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = Path(attachment.name).name or "file"
    path = folder / name
    number = 1
    while path.exists():
        path = folder / f"{Path(name).stem}-{number}{Path(name).suffix}"
        number += 1
    path.write_bytes(attachment.data)
    return path.resolve()


def _install_sigint(handler: Callable[[], object]) -> bool:
    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, handler)
        return True
    return False


async def _in_daemon_thread(read: Callable[[], str]) -> str:
    """`read()` in a daemon thread of its own.

    Not `asyncio.to_thread`: its pool is joined when the process exits, so a chat stopped
    (SIGTERM) while it waits for a line that never comes would never exit.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()

    def settle(line: str | None, error: BaseException | None) -> None:
        if done.done():
            return  # the wait was cancelled
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(line or "")

    def run() -> None:
        line: str | None = None
        error: BaseException | None = None
        try:
            line = read()
        except Exception as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, line, error)

    threading.Thread(target=run, name="terminal-input", daemon=True).start()
    return await done
