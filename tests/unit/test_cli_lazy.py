"""The `switchboard` CLI loads its commands lazily (issue 22, point 4): `--help` and `chat`
start without importing what they do not use, and nothing about the commands changed."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from pydantic import BaseModel, ValidationError

from bots.cli import LAZY_COMMANDS, _invalid_value, cli, main

# What `switchboard chat` and `--help` must not pay for at start (each is imported when used).
# (prometheus_client is not here: every process records metrics, `chat` too.)
HEAVY = frozenset(
    {"openai", "anthropic", "aiohttp", "redis", "playwright", "mcp", "discord", "telegram"}
    | {"slack_bolt", "markdown_it", "limits"}
)


def _imported_after(code: str) -> set[str]:
    """The heavy top-level packages a fresh interpreter has imported after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    return {name for name in modules if name.split(".")[0] in HEAVY}


def test_every_lazy_command_is_a_command_with_the_summary_its_help_starts_with() -> None:
    context = click.Context(cli)
    for name, where in LAZY_COMMANDS.items():
        command = cli.get_command(context, name)
        assert isinstance(command, click.Command), name
        stand_in = click.Command(name, help=where.summary)
        for width in (30, 60, 200):
            assert stand_in.get_short_help_str(width) == command.get_short_help_str(width), name


def test_help_lists_every_command_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--help"])  # standalone_mode=False: help printed, no exit

    listing = capsys.readouterr().out.split("Commands:")[1]
    listed = [line.split()[0] for line in listing.splitlines() if line.strip()]
    assert listed == sorted(LAZY_COMMANDS)
    assert "Chat in the terminal with the embedded runtime" in listing


def test_an_unknown_command_is_still_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["no-such-command"])

    assert exited.value.code == 2
    assert "No such command 'no-such-command'" in capsys.readouterr().err


def test_help_imports_no_command_module_and_no_heavy_library() -> None:
    code = (
        "import sys\nfrom bots.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert not any(m.startswith('bots.commands.') for m in sys.modules), sorted(sys.modules)"
    )
    assert _imported_after(code) == set()


def test_the_chat_command_imports_no_sdk_and_no_server_library() -> None:
    # The provider's SDK is imported on the first model call (DeferredProvider), aiohttp on the
    # first web_fetch, the servers only by the commands that run them.
    assert _imported_after("import bots.commands.chat, bots.app, bots.providers") == set()


def test_a_validation_error_becomes_one_line() -> None:
    class Port(BaseModel):
        port: int

    with pytest.raises(ValidationError) as caught:
        Port.model_validate({"port": "eighty"})

    assert _invalid_value(caught.value) == (
        "port: Input should be a valid integer, unable to parse string as an integer"
    )
    assert _invalid_value(ValueError("not pydantic")) is None
