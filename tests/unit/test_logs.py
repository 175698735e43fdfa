"""Log levels, formats and context: what an operator sees on stderr."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from bots.logs import LogLevels, configure_logging
from core.errors import ConfigError
from core.logcontext import log_context
from core.redact import Redactor


@pytest.fixture
def stderr() -> Iterator[io.StringIO]:
    """The product's handler, writing into a string; the root logger restored afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    names = ("core", "channels", "bots", "switchboard", "bench", "aiosqlite", "telegram")
    levels = {name: logging.getLogger(name).level for name in names}
    output = io.StringIO()
    yield output
    root.handlers[:], level = saved
    root.setLevel(level)
    for name, saved_level in levels.items():
        logging.getLogger(name).setLevel(saved_level)


def _into(output: io.StringIO) -> None:
    for handler in logging.getLogger().handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(output)


@pytest.mark.parametrize(
    ("text", "own", "libraries", "loggers"),
    [
        ("debug", logging.DEBUG, logging.WARNING, {}),
        ("DEBUG", logging.DEBUG, logging.WARNING, {}),
        (" Info ", logging.INFO, logging.WARNING, {}),
        ("info,telegram=debug", logging.INFO, logging.WARNING, {"telegram": logging.DEBUG}),
        ("warning,libraries=debug", logging.WARNING, logging.DEBUG, {}),
        ("telegram=debug", logging.WARNING, logging.WARNING, {"telegram": logging.DEBUG}),
    ],
)
def test_levels_are_read_case_insensitively_with_overrides(
    text: str, own: int, libraries: int, loggers: dict[str, int]
) -> None:
    assert LogLevels.parse(text) == LogLevels(own=own, libraries=libraries, loggers=loggers)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("loud", "log level 'loud': 'loud' is not one of debug, info, warning, error"),
        ("debug,telegram=chatty", "'chatty' is not one of"),
        ("debug,=info", "give a level first, then NAME=LEVEL pairs"),
    ],
)
def test_bad_levels_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LogLevels.parse(text)


def test_libraries_stay_at_warning_unless_asked(stderr: io.StringIO) -> None:
    configure_logging("debug", Redactor([]))
    _into(stderr)

    logging.getLogger("core.runtime").debug("ours at debug")
    logging.getLogger("aiosqlite").debug("SELECT 1")
    logging.getLogger("aiosqlite").warning("a library warning")

    lines = stderr.getvalue().splitlines()
    assert any("ours at debug" in line for line in lines)
    assert not any("SELECT 1" in line for line in lines)
    assert any("a library warning" in line for line in lines)


def test_json_lines_carry_the_context_and_are_scrubbed(stderr: io.StringIO) -> None:
    configure_logging("info", Redactor(["sk-test-secret-value-123456"]), fmt="json")
    _into(stderr)

    with log_context(role="worker", session="telegram:default:42", run="r1"):
        logging.getLogger("core.worker").info(
            "turn done with key %s", "sk-test-secret-value-123456"
        )
    logging.getLogger("core.worker").info("outside")

    inside, outside = (json.loads(line) for line in stderr.getvalue().splitlines())
    assert inside["level"] == "info"
    assert inside["logger"] == "core.worker"
    assert (inside["role"], inside["session"], inside["run"]) == (
        "worker",
        "telegram:default:42",
        "r1",
    )
    assert "sk-test-secret-value-123456" not in inside["message"]
    assert "session" not in outside
    assert inside["time"].endswith("+00:00")


def test_text_lines_end_with_the_context(stderr: io.StringIO) -> None:
    configure_logging("info", Redactor([]))
    _into(stderr)

    with log_context(role="gateway", platform="slack"):
        logging.getLogger("channels.gateway").info("listening")

    assert (
        stderr.getvalue()
        .rstrip()
        .endswith("channels.gateway: listening [role=gateway platform=slack]")
    )
