"""The `browser` tool's arguments, where it is offered, its settings and the state seam (no
chromium here: tests/integration/test_browser.py drives the real one)."""

from __future__ import annotations

import pytest

from core.errors import ConfigError, ToolError
from core.modes import DISCORD, FULL, NO_TOOLS, SAFE_CHAT
from core.profile import Profile
from core.step_state import with_state
from core.tools import SafetyTier
from core.tools.browser import BROWSER, BrowserSettings, Browsing, browser_tool, unavailable


def test_the_tool_is_side_effecting_and_offered_in_full_mode_only() -> None:
    tool = browser_tool(Browsing(BrowserSettings()))
    assert (tool.name, tool.tier) == (BROWSER, SafetyTier.SIDE_EFFECTING)
    assert FULL.allows(tool)
    for mode in (SAFE_CHAT, DISCORD, NO_TOOLS):
        assert not mode.allows(tool), mode.name


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"action": "open"}, "open needs a url"),
        ({"action": "click"}, "click needs the text of what to click, or a selector"),
        ({"action": "type", "selector": "#q"}, "type needs a selector and the text to type"),
        ({"action": "scroll"}, "action: Input should be 'open', 'click'"),
    ],
)
def test_incomplete_arguments_are_a_correctable_error(arguments: dict[str, str], why: str) -> None:
    tool = browser_tool(Browsing(BrowserSettings()))
    with pytest.raises(ToolError, match=why):
        tool.parse(arguments)


def test_the_browser_is_off_by_default_and_its_table_is_checked() -> None:
    assert not Profile.parse("p", {}, source="p.toml", identity=None).settings.browser.enabled
    on = Profile.parse("p", {"browser": {"enabled": True}}, source="p.toml", identity=None)
    assert on.settings.browser.enabled and not on.settings.browser.allow_loopback
    with pytest.raises(ConfigError, match=r"browser\.headless: Extra inputs"):
        Profile.parse("p", {"browser": {"headless": False}}, source="p.toml", identity=None)


def test_a_missing_chromium_is_said_in_one_line() -> None:
    settings = BrowserSettings(enabled=True, executable_path="/nowhere/chromium")
    assert unavailable(settings) == "no chromium at /nowhere/chromium (apt-get install chromium)"


def test_no_open_page_adds_nothing_to_the_turn_context() -> None:
    browsing = Browsing(BrowserSettings())
    assert browsing.block("s") == ""
    assert with_state("memory", browsing, "s") == "memory"
    assert with_state("memory", None, "s") == "memory"


class _Shown:
    def block(self, session_id: str) -> str:
        return f"state of {session_id}"

    async def turn_ended(self, session_id: str) -> None:
        """Nothing held."""


def test_a_state_block_follows_the_turn_context() -> None:
    assert with_state("memory", _Shown(), "s") == "memory\n\nstate of s"
    assert with_state("", _Shown(), "s") == "state of s"
