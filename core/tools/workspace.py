"""`shell` and `files`: privileged tools for a self-hosted assistant, inside one folder.

Both are `privileged`: only a mode that offers every tool (`full`) offers them, every call
waits for the asking admin's confirmation (the runtime's gate), and the tools themselves
refuse anyone who is not an admin, should a mode ever let them through.

`shell` runs `/bin/sh -c COMMAND` in the workspace. A shell string rather than an argument
list: the confirmation shows the person exactly the line that will run, pipes and redirects
work as they expect, and an argument list would add no safety (`["sh", "-c", ...]` is one
too). What bounds it: the confirmation, the workspace as working directory, no stdin, an
environment built from scratch (nothing of the bot's, so no API key or token), its own
process group killed whole on timeout, and output capped. Host paths stay out of what it
returns: the workspace's absolute path reads as `.` (`/srv/bot/workspace/notes` as
`./notes`), and the bot process's home folder as `~`, so the model (and whoever reads the
chat) sees no host layout or user name.

`files` reads, writes and lists inside the workspace. Absolute paths and `..` are refused,
and the resolved path (symbolic links followed) must still be inside the workspace, so a
link pointing out is refused too; a write does not follow a link at the final name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.errors import ToolError
from core.tools.base import SafetyTier, Tool, ToolContext

__all__ = [
    "FILES",
    "SHELL",
    "WorkspaceSettings",
    "files_tool",
    "shell_tool",
    "without_host_paths",
    "workspace_tools",
]

SHELL = "shell"
FILES = "files"

_READ_CHUNK = 64 * 1024
_MAX_LISTED = 500


class WorkspaceSettings(BaseModel):
    """Where `shell` and `files` work and their limits; `bots/` fills `root` and `path`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: Path
    # Seconds a command may run before its whole process group is killed; under the
    # profile's `tool_timeout` (30 s) so the command's own partial output is what comes back.
    timeout: float = Field(default=20.0, gt=0)
    # Bytes of command output kept (stdout and stderr together); the rest is dropped.
    max_output: int = Field(default=16_000, gt=0)
    # Largest file `files` reads or writes, in bytes.
    max_file_bytes: int = Field(default=1024 * 1024, gt=0)
    # PATH of commands; the only variables a command sees are PATH, HOME, LANG, TERM and `env`.
    path: str = "/usr/local/bin:/usr/bin:/bin"
    env: dict[str, str] = Field(default_factory=dict)
    # The bot process's home folder, shown as `~` in `shell` output; None: not rewritten.
    home: Path | None = None


def _require_admin(tool: str, context: ToolContext) -> None:
    if not context.is_admin:
        raise ToolError(f"Only an admin of this bot may use {tool}.")


# --- shell ----------------------------------------------------------------------------------


class ShellArgs(BaseModel):
    command: str = Field(
        description="A shell command line, run with /bin/sh -c in the workspace folder.",
        min_length=1,
        max_length=8000,
    )


def shell_tool(settings: WorkspaceSettings) -> Tool[Any]:
    """The `shell` tool: one command line in the workspace, confirmed first."""

    async def run(args: ShellArgs, context: ToolContext) -> str:
        _require_admin(SHELL, context)
        await asyncio.to_thread(settings.root.mkdir, parents=True, exist_ok=True)
        output = await _run_command(args.command, settings)
        return without_host_paths(output, await asyncio.to_thread(_host_paths, settings))

    return Tool(
        name=SHELL,
        description=(
            "Run a shell command (/bin/sh -c) in the bot's workspace folder and return its "
            f"exit code and output. No input; stopped after {settings.timeout:g} s. The user "
            "confirms every command."
        ),
        args=ShellArgs,
        tier=SafetyTier.PRIVILEGED,
        run=run,
    )


def _command_env(settings: WorkspaceSettings) -> dict[str, str]:
    # Built from nothing: the bot's own environment (API keys, tokens) never reaches it.
    return {
        "PATH": settings.path,
        "HOME": str(settings.root),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        **settings.env,
    }


async def _run_command(command: str, settings: WorkspaceSettings) -> str:
    process = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        command,
        cwd=settings.root,
        env=_command_env(settings),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group, killed whole on timeout
    )
    kept = bytearray()
    dropped = 0

    async def drain() -> None:
        nonlocal dropped
        assert process.stdout is not None
        while chunk := await process.stdout.read(_READ_CHUNK):
            room = settings.max_output - len(kept)
            kept.extend(chunk[:room])
            dropped += max(0, len(chunk) - room)  # read on, so the command never blocks
        await process.wait()

    timed_out = False
    try:
        async with asyncio.timeout(settings.timeout):
            await drain()
    except TimeoutError:
        timed_out = True
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    output = kept.decode("utf-8", errors="replace").rstrip("\n")
    notes = []
    if dropped:
        notes.append(f"[output cut: {dropped} more bytes not shown]")
    if timed_out:
        head = f"Stopped after {settings.timeout:g} s (timed out)."
    else:
        head = f"Exit code {process.returncode}."
    return "\n".join([head, output or "(no output)", *notes])


def _host_paths(settings: WorkspaceSettings) -> dict[str, str]:
    """Each absolute form of the workspace (as given, links resolved) and of the home
    folder, with what is shown instead."""
    shown: dict[str, str] = {}
    for path, placeholder in ((settings.home, "~"), (settings.root, ".")):
        if path is not None:
            for form in (path.absolute(), path.resolve()):
                if form != Path(form.anchor):  # "/" itself is no host detail
                    shown[str(form)] = placeholder
    return shown


def without_host_paths(text: str, shown: dict[str, str]) -> str:
    """`text` with each path of `shown` replaced by its placeholder wherever it is a whole
    path or a path's start (`/srv/ws/a` and `/srv/ws`, never `/srv/ws2`)."""
    if not shown:
        return text
    # Longest first: a workspace inside the home folder reads as `.`, not `~/...`.
    paths = sorted(shown, key=len, reverse=True)
    pattern = re.compile(f"(?:{'|'.join(re.escape(p) for p in paths)})" + r"(?![\w.\-])")
    return pattern.sub(lambda found: shown[found.group(0)], text)


# --- files ----------------------------------------------------------------------------------


class FilesArgs(BaseModel):
    action: Literal["read", "write", "list"] = Field(
        description="read a file, write (create or replace) a file, or list a folder."
    )
    path: str = Field(
        default=".",
        description="A path relative to the workspace folder, e.g. notes/todo.md.",
        max_length=1000,
    )
    content: str | None = Field(default=None, description="The text to write (write only).")


def files_tool(settings: WorkspaceSettings) -> Tool[Any]:
    """The `files` tool: read, write and list inside the workspace, confirmed first."""

    async def run(args: FilesArgs, context: ToolContext) -> str:
        _require_admin(FILES, context)
        return await asyncio.to_thread(_files, args, settings)

    return Tool(
        name=FILES,
        description=(
            "Read, write or list files in the bot's workspace folder. Paths are relative to "
            "it; paths that leave it are refused. The user confirms every call."
        ),
        args=FilesArgs,
        tier=SafetyTier.PRIVILEGED,
        run=run,
    )


def _files(args: FilesArgs, settings: WorkspaceSettings) -> str:
    settings.root.mkdir(parents=True, exist_ok=True)
    target = resolve_inside(settings.root, args.path)
    match args.action:
        case "read":
            return _read(target, args.path, settings)
        case "write":
            if args.content is None:
                raise ToolError("write needs `content`, the text to write.")
            return _write(target, args.path, args.content, settings)
        case _:
            return _list(target, args.path)


def resolve_inside(root: Path, relative: str) -> Path:
    """`relative` under `root`, or `ToolError` when it is absolute, uses `..` or leaves."""
    if "\0" in relative:
        raise ToolError("Refused: the path contains a NUL character.")
    pure = PurePosixPath(relative)
    if pure.is_absolute() or relative.startswith("~"):
        raise ToolError(f"Refused: {relative!r} is absolute; use a path inside the workspace.")
    if ".." in pure.parts:
        raise ToolError(f"Refused: {relative!r} uses '..'; paths must stay in the workspace.")
    base = root.resolve()
    target = (base / pure).resolve()  # follows symbolic links, existing or not
    if target != base and not target.is_relative_to(base):
        raise ToolError(f"Refused: {relative!r} leads outside the workspace (a link?).")
    return target


def _read(target: Path, shown: str, settings: WorkspaceSettings) -> str:
    if not target.is_file():
        raise ToolError(f"No file {shown!r} in the workspace.")
    size = target.stat().st_size
    with target.open("rb") as handle:
        data = handle.read(settings.max_file_bytes)
    if b"\0" in data[:8192]:
        raise ToolError(f"{shown!r} is a binary file; files reads text only.")
    text = data.decode("utf-8", errors="replace")
    if size > settings.max_file_bytes:
        text += f"\n[file cut at {settings.max_file_bytes} of {size} bytes]"
    return text


def _write(target: Path, shown: str, content: str, settings: WorkspaceSettings) -> str:
    data = content.encode()
    if len(data) > settings.max_file_bytes:
        raise ToolError(f"Refused: more than {settings.max_file_bytes} bytes to write.")
    if target.is_dir():
        raise ToolError(f"{shown!r} is a folder.")
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a link put at the final name after the check is not followed out.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    try:
        descriptor = os.open(target, flags, 0o644)
    except OSError as exc:
        raise ToolError(f"Could not write {shown!r}: {exc.strerror}.") from exc
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    return f"Wrote {len(data)} bytes to {shown}."


def _list(target: Path, shown: str) -> str:
    if not target.is_dir():
        raise ToolError(f"No folder {shown!r} in the workspace.")
    entries = sorted(target.iterdir(), key=lambda p: p.name)
    lines = []
    for entry in entries[:_MAX_LISTED]:
        if entry.is_symlink():
            lines.append(f"{entry.name} (link)")
        elif entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            lines.append(f"{entry.name} ({entry.stat().st_size} bytes)")
    if len(entries) > _MAX_LISTED:
        lines.append(f"[{len(entries) - _MAX_LISTED} more not shown]")
    return "\n".join(lines) if lines else "(empty folder)"


def workspace_tools(settings: WorkspaceSettings) -> list[Tool[Any]]:
    """`shell` and `files` for the workspace of `settings`."""
    return [shell_tool(settings), files_tool(settings)]
