"""The process wiring (`bots/app.py`) offers `browser` only when `[browser] enabled`, hands the
runtime its page state, and closes chromium when the process's parts close."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots.app import embedded
from bots.profiles import load_profile
from bots.settings import load_settings
from core.tools.browser import BROWSER, BrowserArgs, Browsing
from tests.fakes.fixtures import TEST_API_KEY
from tests.integration.test_browser import CHROMIUM, Site, alive, chromium_pids
from tests.profile_env import profile_env

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed: apt-get install chromium (`make test-deps`)",
)


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str) -> None:
    monkeypatch.chdir(tmp_path)
    profile_env(
        monkeypatch,
        tmp_path,
        profile,
        ANTHROPIC_API_KEY=TEST_API_KEY,
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
    )


async def test_the_browser_is_off_unless_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(tmp_path, monkeypatch, "")
    settings = load_settings()
    async with embedded(settings, load_profile(settings.profiles_dir, "bot")) as parts:
        assert BROWSER not in parts.runtime.tools
        assert parts.runtime.step_state is None


async def test_an_enabled_browser_is_offered_and_closed_with_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = f'[browser]\nenabled = true\nallow_loopback = true\nexecutable_path = "{CHROMIUM}"\n'
    _setup(tmp_path, monkeypatch, profile)
    settings = load_settings()
    async with Site() as site:
        async with embedded(settings, load_profile(settings.profiles_dir, "bot")) as parts:
            assert BROWSER in parts.runtime.tools
            browsing = parts.runtime.step_state
            assert isinstance(browsing, Browsing)
            await browsing.act("s", BrowserArgs(action="open", url=f"{site.origin}/"))
            running = chromium_pids()
            assert running
        assert not browsing.running and not alive(running)
