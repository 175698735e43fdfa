"""`run_process`: the long-running processes' event loop, uvloop unless asked otherwise."""

from __future__ import annotations

import asyncio

import pytest

from bots.loop import run_process
from bots.settings import Settings


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def _module_of_the_loop() -> str:
    found = run_process(Settings(_env_file=None), _loop_module())
    assert found is not None  # None: stopped by SIGTERM
    return found


def test_uvloop_by_default_and_python_s_own_loop_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SWITCHBOARD_EVENT_LOOP", raising=False)
    assert _module_of_the_loop().startswith("uvloop")

    monkeypatch.setenv("SWITCHBOARD_EVENT_LOOP", "asyncio")
    assert _module_of_the_loop().startswith("asyncio")


def test_python_s_own_loop_where_uvloop_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.delenv("SWITCHBOARD_EVENT_LOOP", raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import fails, as on Windows
    assert _module_of_the_loop().startswith("asyncio")
