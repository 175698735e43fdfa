"""`shell` and `files` in a temporary workspace, and their place behind the confirmation."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.errors import ToolError
from core.events import ToolFinished
from core.messages import Message, ToolCall
from core.modes import DISCORD, FULL, NO_TOOLS, SAFE_CHAT
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext
from core.tools import SafetyTier, ToolContext, ToolRegistry
from core.tools.workspace import WorkspaceSettings, resolve_inside, workspace_tools

ADMIN = ToolContext(session_id="s", user_id="cli", is_admin=True)
STRANGER = ToolContext(session_id="s", user_id="u1", is_admin=False)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root.resolve()


def tools(root: Path, **options: Any) -> dict[str, Any]:
    return {t.name: t for t in workspace_tools(WorkspaceSettings(root=root, **options))}


def test_both_tools_are_privileged_and_only_full_offers_them(workspace: Path) -> None:
    for tool in tools(workspace).values():
        assert tool.tier is SafetyTier.PRIVILEGED
        assert FULL.allows(tool)
        for mode in (SAFE_CHAT, DISCORD, NO_TOOLS):
            assert not mode.allows(tool)


async def test_shell_runs_in_the_workspace_without_the_bots_secrets(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-never-be-seen")
    shell = tools(workspace)["shell"]

    output = await shell({"command": "pwd; env; echo oops >&2; exit 3"}, ADMIN)

    lines = output.splitlines()
    assert lines[0] == "Exit code 3."
    assert lines[1] == "."  # the workspace's host path is not shown (below)
    assert "oops" in lines
    assert "sk-ant-should-never-be-seen" not in output
    assert "HOME=." in lines


async def test_shell_output_shows_no_host_paths(workspace: Path, tmp_path: Path) -> None:
    """The workspace reads as `.`, the bot's home folder as `~`; other paths are left alone."""
    home = tmp_path  # the workspace is inside it, as data/ often is inside a home folder
    (workspace / "notes").mkdir()
    shell = tools(workspace, home=home)["shell"]

    output = await shell(
        {
            "command": 'pwd; cd notes && pwd; echo "$HOME/notes/a.md"; '
            f"echo {tmp_path}/workspace2; echo {tmp_path}; echo /etc/hosts; "
            "cat missing.txt; cd .. && realpath -m missing.txt"
        },
        ADMIN,
    )

    lines = output.splitlines()
    assert lines[1:7] == [".", "./notes", "./notes/a.md", "~/workspace2", "~", "/etc/hosts"]
    assert lines[-1] == "./missing.txt"
    assert str(tmp_path) not in output


async def test_a_workspace_reached_through_a_link_reads_as_dot_either_way(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    shell = tools(tmp_path / "link")["shell"]

    output = await shell({"command": f"pwd; echo {tmp_path}/link/a; echo {real}x"}, ADMIN)

    assert output.splitlines()[1:] == [".", "./a", f"{real}x"]


async def test_shell_has_no_stdin(workspace: Path) -> None:
    output = await tools(workspace)["shell"]({"command": "cat; echo after"}, ADMIN)
    assert output == "Exit code 0.\nafter"


async def test_shell_output_is_capped(workspace: Path) -> None:
    shell = tools(workspace, max_output=100)["shell"]
    output = await shell({"command": "head -c 5000 /dev/zero | tr '\\0' x"}, ADMIN)
    assert output.splitlines()[1] == "x" * 100
    assert output.endswith("[output cut: 4900 more bytes not shown]")


async def test_a_command_that_runs_too_long_is_killed_with_its_children(workspace: Path) -> None:
    shell = tools(workspace, timeout=0.3)["shell"]
    output = await shell({"command": "echo started; sleep 30 & sleep 30"}, ADMIN)
    assert output == "Stopped after 0.3 s (timed out).\nstarted"


async def test_only_admins_may_use_them(workspace: Path) -> None:
    for tool, arguments in (
        (tools(workspace)["shell"], {"command": "true"}),
        (tools(workspace)["files"], {"action": "list"}),
    ):
        with pytest.raises(ToolError, match="Only an admin"):
            await tool(arguments, STRANGER)


async def test_files_writes_reads_and_lists(workspace: Path) -> None:
    files = tools(workspace)["files"]

    written = await files({"action": "write", "path": "notes/todo.md", "content": "milk"}, ADMIN)
    assert written == "Wrote 4 bytes to notes/todo.md."
    assert (workspace / "notes" / "todo.md").read_text() == "milk"
    assert await files({"action": "read", "path": "notes/todo.md"}, ADMIN) == "milk"
    assert await files({"action": "list"}, ADMIN) == "notes/"
    assert await files({"action": "list", "path": "notes"}, ADMIN) == "todo.md (4 bytes)"
    with pytest.raises(ToolError, match="write needs `content`"):
        await files({"action": "write", "path": "x"}, ADMIN)
    with pytest.raises(ToolError, match=r"No file 'missing\.txt'"):
        await files({"action": "read", "path": "missing.txt"}, ADMIN)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/passwd", "is absolute"),
        ("~/secrets", "is absolute"),
        ("../outside.txt", "uses '..'"),
        ("notes/../../outside.txt", "uses '..'"),
        ("out/secret.txt", "leads outside the workspace"),
        ("out", "leads outside the workspace"),
    ],
)
async def test_paths_that_leave_the_workspace_are_refused(
    workspace: Path, tmp_path: Path, path: str, why: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (workspace / "out").symlink_to(outside)
    files = tools(workspace)["files"]

    for action in ("read", "write", "list"):
        with pytest.raises(ToolError, match=why):
            await files({"action": action, "path": path, "content": "x"}, ADMIN)
    assert (outside / "secret.txt").read_text() == "secret"


def test_a_link_inside_the_workspace_is_fine(workspace: Path) -> None:
    (workspace / "real.txt").write_text("hi")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    assert resolve_inside(workspace, "alias.txt") == (workspace / "real.txt").resolve()


async def test_a_write_through_a_link_inside_the_workspace_lands_on_its_target(
    workspace: Path,
) -> None:
    (workspace / "real.txt").write_text("original")
    os.symlink("real.txt", workspace / "link.txt")
    files = tools(workspace)["files"]
    written = await files({"action": "write", "path": "link.txt", "content": "new"}, ADMIN)
    assert written == "Wrote 3 bytes to link.txt."
    assert (workspace / "real.txt").read_text() == "new"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"))
    try:
        yield opened
    finally:
        await opened.close()


@pytest.mark.parametrize("allowed", [True, False])
async def test_every_call_goes_through_the_confirmation(
    workspace: Path, store: SqlStore, allowed: bool
) -> None:
    asked: list[ToolCall] = []

    async def confirm(call: ToolCall, context: ToolContext) -> bool:
        asked.append(call)
        return allowed

    command = "echo hello > greeting.txt; cat greeting.txt"
    runtime = AgentRuntime(
        provider=ScriptedProvider(
            [
                tool_reply(ToolCall(id="c1", name="shell", arguments={"command": command})),
                text_reply("done"),
            ]
        ),
        model="test-model",
        tools=ToolRegistry(workspace_tools(WorkspaceSettings(root=workspace))),
        store=store,
        confirm=confirm,
    )
    session = await store.current_session("terminal:default:t")
    context = ChannelContext(
        platform="terminal", mode=FULL, session_key="terminal:default:t", is_admin=True
    )

    events = [e async for e in runtime.run(session.id, Message.user("go"), context)]

    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert [c.arguments for c in asked] == [{"command": command}]
    if allowed:
        assert (finished.output, finished.is_error) == ("Exit code 0.\nhello", False)
    else:
        assert finished.is_error and "refused" in finished.output
        assert not (workspace / "greeting.txt").exists()
