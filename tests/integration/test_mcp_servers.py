"""MCP servers as tools, against real servers written with the SDK (`tests/fakes/`).

The stdio server is started by the code under test; the streamable-HTTP one by a fixture on
127.0.0.1. Waits are on observable state (a server running again), never on the clock; the
one real wait is the per-call timeout test, kept short.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.errors import ConfigError, ToolError
from core.events import AgentEvent, ToolFinished
from core.mcp import McpServerSettings
from core.mcp.servers import McpServers
from core.mcp.tools import McpTool
from core.messages import Message, ToolCall
from core.modes import FULL, ModeCatalog
from core.providers import Provider, ScriptedProvider
from core.providers.anthropic import AnthropicProvider
from core.providers.openai import OpenAIProvider
from core.providers.scripted import text_reply, tool_reply
from core.redact import REDACTED, Redactor
from core.runtime import AgentRuntime, ChannelContext
from core.tools import SafetyTier, ToolContext, ToolRegistry
from tests.fakes import FakeAnthropic, FakeOpenAI, Text, ToolUse
from tests.integration.helpers import GPT, SONNET, completed, of_type

ROOT = Path(__file__).resolve().parents[2]
# How long a test waits for what should happen promptly before failing instead of hanging.
PATIENCE = 20.0
CONTEXT = ToolContext(session_id="s")


def stdio(**options: Any) -> McpServerSettings:
    """The fake stdio server, read-only unless the test says otherwise."""
    options.setdefault("tier", "read_only")
    return McpServerSettings(
        command=[sys.executable, "-m", "tests.fakes.mcp_servers", "stdio"],
        cwd=str(ROOT),
        **options,
    )


@pytest.fixture
async def calc() -> AsyncIterator[McpServers]:
    servers = McpServers({"calc": stdio()}, grace=PATIENCE)
    async with asyncio.timeout(PATIENCE):
        await servers.start()
    try:
        yield servers
    finally:
        await servers.aclose()


def by_name(servers: McpServers) -> dict[str, McpTool]:
    tools = {t.name: t for t in servers.tools()}
    assert all(isinstance(t, McpTool) for t in tools.values())
    return {n: t for n, t in tools.items() if isinstance(t, McpTool)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def start_http(port: int, *flags: str) -> asyncio.subprocess.Process:
    """The fake server over streamable HTTP on 127.0.0.1:`port`, once it accepts connections."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.mcp_servers",
        "http",
        "--port",
        str(port),
        *flags,
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(PATIENCE):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                await writer.wait_closed()
                return process
    except BaseException:
        await stop(process)  # a start that fails leaves no process behind
        raise


async def stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
    await process.wait()


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    """The fake server over streamable HTTP; yields its endpoint URL."""
    port = free_port()
    process = await start_http(port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await stop(process)


async def test_tools_are_named_server__tool_with_the_servers_description_and_schema(
    calc: McpServers,
) -> None:
    tools = by_name(calc)

    assert set(tools) == {
        "calc__add",
        "calc__echo",
        "calc__slow",
        "calc__crash",
        "calc__image",
        "calc__fail",
        "calc__exit_soon",
    }
    add = tools["calc__add"].spec
    assert add.description == "[calc] Add two integers."
    assert add.parameters["type"] == "object"
    assert set(add.parameters["properties"]) == {"a", "b"}
    assert add.parameters["required"] == ["a", "b"]
    assert "title" not in add.parameters
    assert tools["calc__add"].tier is SafetyTier.READ_ONLY


async def test_a_call_returns_the_servers_text(calc: McpServers) -> None:
    tools = by_name(calc)

    assert await tools["calc__add"]({"a": 2, "b": 3}, CONTEXT) == "5"
    assert await tools["calc__echo"]({"text": "hi"}, CONTEXT) == "echo: hi"


async def test_arguments_that_break_the_schema_are_refused_naming_the_field(
    calc: McpServers,
) -> None:
    add = by_name(calc)["calc__add"]

    with pytest.raises(ToolError, match=r"Invalid arguments for calc__add: a: 'x' is not of"):
        await add({"a": "x", "b": 1}, CONTEXT)
    with pytest.raises(ToolError, match=r"'b' is a required property"):
        await add({"a": 1}, CONTEXT)


async def test_an_error_result_and_image_content_are_mapped_to_text(calc: McpServers) -> None:
    tools = by_name(calc)

    with pytest.raises(ToolError, match="this tool always fails"):
        await tools["calc__fail"]({}, CONTEXT)
    shown = await tools["calc__image"]({}, CONTEXT)
    assert shown.splitlines()[0] == "a pixel"
    assert shown.splitlines()[1].startswith("[image: image/png, ")


async def test_a_slow_call_times_out_and_the_server_keeps_answering() -> None:
    servers = McpServers({"calc": stdio(timeout=0.3)})
    async with asyncio.timeout(PATIENCE):
        await servers.start()
    try:
        tools = by_name(servers)
        with pytest.raises(ToolError, match=r"'calc' did not answer slow within 0.3 s"):
            await tools["calc__slow"]({"seconds": 30}, CONTEXT)
        assert await tools["calc__echo"]({"text": "still"}, CONTEXT) == "echo: still"
    finally:
        await servers.aclose()


async def test_a_crashed_server_is_restarted_and_answers_again(
    calc: McpServers, caplog: pytest.LogCaptureFixture
) -> None:
    tools = by_name(calc)

    with pytest.raises(ToolError, match="'calc' stopped while running crash"):
        await tools["calc__crash"]({}, CONTEXT)

    async with asyncio.timeout(PATIENCE):
        await calc.wait_running("calc")
    assert await tools["calc__add"]({"a": 1, "b": 1}, CONTEXT) == "2"
    assert any("restarting" in r.getMessage() for r in caplog.records)


async def test_a_server_that_dies_between_calls_is_restarted_before_the_next_call(
    calc: McpServers, caplog: pytest.LogCaptureFixture
) -> None:
    tools = by_name(calc)

    assert await tools["calc__exit_soon"]({}, CONTEXT) == "bye"
    async with asyncio.timeout(PATIENCE):
        await calc.wait_stopped("calc")  # the end of its output was noticed
        await calc.wait_running("calc")

    assert await tools["calc__add"]({"a": 2, "b": 2}, CONTEXT) == "4"
    assert any("it closed the connection" in r.getMessage() for r in caplog.records)


async def test_a_server_that_cannot_start_is_one_warning_and_the_others_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    servers = McpServers(
        {
            "broken": McpServerSettings(command=["/nonexistent/switchboard-mcp-server"]),
            "calc": stdio(),
        }
    )
    with caplog.at_level(logging.WARNING, logger="core.mcp"):
        async with asyncio.timeout(PATIENCE):
            await servers.start()
    try:
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        line = warnings[0].getMessage()
        assert "'broken' did not start" in line and "\n" not in line
        assert {t.name for t in servers.tools()} >= {"calc__add"}
        assert not any(t.name.startswith("broken__") for t in servers.tools())
        assert await by_name(servers)["calc__add"]({"a": 1, "b": 2}, CONTEXT) == "3"
    finally:
        await servers.aclose()


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        (McpServerSettings(command=[sys.executable, "-c", "pass"]), "did not start ("),
        (
            McpServerSettings(
                command=[sys.executable, "-c", "import sys; sys.stdin.read()"],
                startup_timeout=0.3,
            ),
            "did not start (timed out)",
        ),
        (McpServerSettings(url="http://127.0.0.1:9/mcp"), "did not start ("),
    ],
    ids=["exits-at-once", "never-answers", "nothing-listening"],
)
async def test_every_way_of_not_starting_is_one_warning(
    settings: McpServerSettings, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    servers = McpServers({"bad": settings})
    with caplog.at_level(logging.WARNING, logger="core.mcp"):
        async with asyncio.timeout(PATIENCE):
            await servers.start()
    await servers.aclose()
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"MCP server 'bad' {why}" in warning
    assert servers.tools() == []


async def test_a_stdio_servers_stderr_goes_where_the_bot_says(tmp_path: Path) -> None:
    log_path = tmp_path / "mcp.log"
    with log_path.open("w") as errlog:
        servers = McpServers({"calc": stdio()}, errlog=errlog)
        async with asyncio.timeout(PATIENCE):
            await servers.start()
        await servers.aclose()
    assert "switchboard test server (stdio) starting" in log_path.read_text()


async def test_include_exclude_and_per_tool_tiers_shape_what_is_offered() -> None:
    servers = McpServers(
        {
            "calc": stdio(
                include=["add", "echo", "crash"],
                exclude=["echo"],
                tier="side_effecting",
                tools={"crash": {"tier": "privileged"}},
            )
        }
    )
    async with asyncio.timeout(PATIENCE):
        await servers.start()
    try:
        tiers = {t.name: t.tier for t in servers.tools()}
        assert tiers == {
            "calc__add": SafetyTier.SIDE_EFFECTING,
            "calc__crash": SafetyTier.PRIVILEGED,
        }
    finally:
        await servers.aclose()


async def test_modes_admit_the_servers_tools_and_dispatch_enforces_them(tmp_path: Path) -> None:
    servers = McpServers(
        {"calc": stdio(modes=["full", "safe-chat"], tools={"crash": {"tier": "privileged"}})}
    )
    async with asyncio.timeout(PATIENCE):
        await servers.start()
    try:
        admitted = servers.mode_tools()
        assert set(admitted) == {"full", "safe-chat"}
        catalog = ModeCatalog(admit=admitted)
        safe, discord = catalog.get("safe-chat"), catalog.get("discord")
        tools = by_name(servers)
        assert safe.allows(tools["calc__add"])
        assert not safe.allows(tools["calc__crash"])  # privileged: only where every tool is
        assert not discord.allows(tools["calc__add"])
        with pytest.raises(ConfigError, match="unknown capability mode 'nope'"):
            ModeCatalog(admit={"nope": ["calc__add"]})

        # The runtime refuses the call in a mode that does not admit it, schema or not.
        events = await run_turn(
            tmp_path,
            servers,
            [ToolCall(id="c1", name="calc__add", arguments={"a": 1, "b": 2})],
            mode=discord,
        )
        finished = [e for e in events if isinstance(e, ToolFinished)]
        assert finished[0].is_error and "not available in this chat" in finished[0].output
    finally:
        await servers.aclose()


async def run_turn(
    tmp_path: Path,
    servers: McpServers,
    calls: list[ToolCall],
    *,
    mode: Any = FULL,
    redactor: Redactor | None = None,
) -> list[AgentEvent]:
    store = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"))
    try:
        provider = ScriptedProvider([tool_reply(*calls), text_reply("done")])
        runtime = AgentRuntime(
            provider=provider,
            model="test-model",
            tools=ToolRegistry(servers.tools()),
            store=store,
            redactor=redactor,
        )
        session = await store.current_session("terminal:default:t")
        context = ChannelContext(platform="terminal", mode=mode, session_key="terminal:default:t")
        return [e async for e in runtime.run(session.id, Message.user("go"), context)]
    finally:
        await store.close()


async def test_a_model_calls_mcp_tools_through_the_runtime_with_scrubbing(
    calc: McpServers, tmp_path: Path
) -> None:
    secret = "sk-test-0123456789abcdefghijklmnop"
    events = await run_turn(
        tmp_path,
        calc,
        [
            ToolCall(id="c1", name="calc__add", arguments={"a": 20, "b": 22}),
            ToolCall(id="c2", name="calc__add", arguments={"a": "twenty"}),
            ToolCall(id="c3", name="calc__echo", arguments={"text": f"key={secret}"}),
        ],
        redactor=Redactor([secret]),
    )

    finished = {e.call_id: e for e in events if isinstance(e, ToolFinished)}
    assert (finished["c1"].output, finished["c1"].is_error) == ("42", False)
    assert finished["c2"].is_error
    assert finished["c2"].output.startswith("Invalid arguments for calc__add: ")
    assert secret not in finished["c3"].output and REDACTED in finished["c3"].output


async def test_a_streamable_http_server_is_listed_and_called(http_server: str) -> None:
    servers = McpServers(
        {
            "remote": McpServerSettings(
                url=http_server, headers={"X-Test": "1"}, tier="read_only", include=["add"]
            )
        }
    )
    async with asyncio.timeout(PATIENCE):
        await servers.start()
    try:
        tools = by_name(servers)
        assert set(tools) == {"remote__add"}
        assert await tools["remote__add"]({"a": 4, "b": 5}, CONTEXT) == "9"
    finally:
        await servers.aclose()


async def test_an_http_server_that_goes_away_is_reconnected_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    process = await start_http(port)
    servers = McpServers(
        {"remote": McpServerSettings(url=f"http://127.0.0.1:{port}/mcp", tier="read_only")},
        grace=0.1,
        backoff=0.05,
        backoff_max=0.2,
    )
    try:
        async with asyncio.timeout(PATIENCE):
            await servers.start()
        add = by_name(servers)["remote__add"]
        await stop(process)

        with pytest.raises(ToolError, match="'remote'"):
            await add({"a": 1, "b": 1}, CONTEXT)
        with pytest.raises(ToolError, match=r"not running \(it is being restarted\)"):
            await add({"a": 1, "b": 1}, CONTEXT)

        process = await start_http(port)
        async with asyncio.timeout(PATIENCE):
            await servers.wait_running("remote")
        assert await add({"a": 2, "b": 2}, CONTEXT) == "4"
        assert any("could not be restarted" in r.getMessage() for r in caplog.records)
    finally:
        await servers.aclose()
        await stop(process)


async def provider_round_trip(
    provider: Provider, model: str, servers: McpServers, store: SqlStore, session_id: str
) -> list[AgentEvent]:
    runtime = AgentRuntime(
        provider=provider, model=model, tools=ToolRegistry(servers.tools()), store=store
    )
    context = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")
    return [e async for e in runtime.run(session_id, Message.user("20+22?"), context)]


async def test_an_mcp_tool_round_trip_through_the_anthropic_api(
    calc: McpServers,
    fake_anthropic: FakeAnthropic,
    claude: AnthropicProvider,
    store: SqlStore,
    session_id: str,
) -> None:
    fake_anthropic.script(
        ToolUse([("toolu_01", "calc__add", {"a": 20, "b": 22})]), Text("It is 42.")
    )

    events = await provider_round_trip(claude, SONNET, calc, store, session_id)

    assert completed(events).text == "It is 42."
    [finished] = of_type(events, ToolFinished)
    assert (finished.output, finished.is_error) == ("42", False)
    first, second = (r.json for r in fake_anthropic.requests)
    add = next(t for t in first["tools"] if t["name"] == "calc__add")
    assert add["input_schema"]["required"] == ["a", "b"]
    [block] = second["messages"][-1]["content"]
    assert (block["type"], block["tool_use_id"], block["is_error"]) == (
        "tool_result",
        "toolu_01",
        False,
    )
    assert "42" in str(block["content"])


async def test_an_mcp_tool_round_trip_through_the_openai_api(
    calc: McpServers,
    fake_openai: FakeOpenAI,
    gpt: OpenAIProvider,
    store: SqlStore,
    session_id: str,
) -> None:
    fake_openai.script(ToolUse([("call_1", "calc__echo", {"text": "hi"})]), Text("Done."))

    events = await provider_round_trip(gpt, GPT, calc, store, session_id)

    assert completed(events).text == "Done."
    [finished] = of_type(events, ToolFinished)
    assert finished.output == "echo: hi"
    first, second = (r.json for r in fake_openai.requests)
    echo = next(t for t in first["tools"] if t["function"]["name"] == "calc__echo")
    assert echo["function"]["parameters"]["properties"]["text"]["type"] == "string"
    result = second["messages"][-1]
    assert (result["role"], result["tool_call_id"], result["content"]) == (
        "tool",
        "call_1",
        "echo: hi",
    )


def plain(*flags: str, **options: Any) -> McpServerSettings:
    """The hand-written stdio server (`tests/fakes/mcp_servers.py`), read-only."""
    options.setdefault("tier", "read_only")
    return McpServerSettings(
        command=[sys.executable, "-m", "tests.fakes.mcp_servers", "plain", *flags],
        cwd=str(ROOT),
        **options,
    )


def alive(pid: int) -> bool:
    """Whether process `pid` still exists (a zombie of ours counts as gone once reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_client_introduces_itself_as_switchboard_with_its_version() -> None:
    async with McpServers({"plain": plain()}) as servers:
        whoami = by_name(servers)["plain__whoami"]
        told = json.loads(await whoami({}, CONTEXT))

    assert told == {"name": "switchboard", "version": version("switchboard")}


async def test_a_tool_that_needs_mcp_tasks_is_not_offered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="core.mcp"):
        async with McpServers({"plain": plain()}) as servers:
            offered = set(by_name(servers))

    assert offered == {"plain__echo", "plain__whoami", "plain__grow"}
    said = [r for r in caplog.records if "research" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno <= logging.INFO
    assert "MCP tasks" in said[0].getMessage()


async def test_a_servers_tool_list_change_is_listed_again_and_offered() -> None:
    async with McpServers({"plain": plain(modes=["full", "safe-chat"])}) as servers:
        registry = ToolRegistry(servers.tools())
        catalog = ModeCatalog(admit=servers.mode_tools())
        servers.keep_current(registry, catalog)
        assert "plain__extra" not in registry

        assert await by_name(servers)["plain__grow"]({}, CONTEXT) == "grown"
        async with asyncio.timeout(PATIENCE):
            await servers.wait_offered("plain__extra")

        assert "plain__extra" in registry
        assert catalog.get("safe-chat").allows(registry.get("plain__extra"))
        assert await registry.get("plain__extra")({}, CONTEXT) == "the extra tool"
        assert set(by_name(servers)) == {
            "plain__echo",
            "plain__whoami",
            "plain__grow",
            "plain__extra",
        }


async def test_a_server_that_keeps_running_after_its_input_ends_is_stopped(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "server.pid"
    servers = McpServers(
        {"plain": plain("--linger", "--ignore-sigterm", "--pid-file", str(pid_file))}
    )
    async with asyncio.timeout(PATIENCE):
        await servers.start()
    pid = int(pid_file.read_text())
    try:
        assert alive(pid)
        async with asyncio.timeout(PATIENCE):
            await servers.aclose()
        assert not alive(pid)
    finally:
        if alive(pid):  # a failed run leaves no process behind either
            os.kill(pid, signal.SIGKILL)
            await servers.aclose()


@pytest.mark.parametrize("flags", [(), ("--unknown-session-400",)], ids=["404", "400"])
async def test_a_streamable_http_server_that_restarts_between_calls_gets_a_new_session(
    flags: tuple[str, ...],
) -> None:
    port = free_port()
    process = await start_http(port, *flags)
    servers = McpServers(
        {"remote": McpServerSettings(url=f"http://127.0.0.1:{port}/mcp", tier="read_only")},
        grace=PATIENCE,
    )
    try:
        async with asyncio.timeout(PATIENCE):
            await servers.start()
        echo = by_name(servers)["remote__echo"]
        assert await echo({"text": "one"}, CONTEXT) == "echo: one"

        await stop(process)
        process = await start_http(port, *flags)  # a new process: it knows no session

        assert await echo({"text": "two"}, CONTEXT) == "echo: two"
        assert await echo({"text": "three"}, CONTEXT) == "echo: three"
    finally:
        await servers.aclose()
        await stop(process)


async def test_a_start_cancelled_while_a_server_starts_stops_that_server(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    flags = ("--mute", "--linger", "--ignore-sigterm", "--pid-file", str(pid_file))
    servers = McpServers({"mute": plain(*flags, startup_timeout=600)})
    starting = asyncio.create_task(servers.start())
    pid = None
    try:
        async with asyncio.timeout(PATIENCE):
            while pid is None:  # the server's own process says when it is there
                await asyncio.sleep(0.05)
                pid = written_pid(pid_file)
        assert alive(pid) and not starting.done()

        starting.cancel()
        async with asyncio.timeout(PATIENCE):
            with pytest.raises(asyncio.CancelledError):
                await starting
        assert not alive(pid)
    finally:
        if pid is not None and alive(pid):  # a failed run leaves no process behind either
            os.kill(pid, signal.SIGKILL)
        await servers.aclose()


def written_pid(path: Path) -> int | None:
    """The pid a server wrote to `path`, once it has."""
    text = path.read_text() if path.exists() else ""
    return int(text) if text else None
