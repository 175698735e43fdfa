"""deploy/slack-app-manifest.yml: the Slack app registers every chat command of the bot's menu
as a slash command, and docs/slack.md points to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from bots.platforms import command_registry

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "deploy" / "slack-app-manifest.yml"


def _manifest() -> dict[str, Any]:
    loaded = YAML(typ="safe").load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_every_command_of_the_menu_is_a_slash_command_of_the_app() -> None:
    manifest = _manifest()
    registered = manifest["features"]["slash_commands"]
    menu = command_registry().menu()

    assert [c["command"] for c in registered] == [f"/{info.name}" for info in menu]
    for command, info in zip(registered, menu, strict=True):
        assert info.description.split(":")[0] in command["description"], command
        assert (command["description"].startswith("(admins)")) == info.admin_only, command
        # Over HTTP, Slack posts the commands where it posts events.
        assert command["url"] == manifest["settings"]["event_subscriptions"]["request_url"]
        assert command["should_escape"] is False
    assert "commands" in manifest["oauth_config"]["scopes"]["bot"]


def test_the_slack_docs_point_to_the_manifest() -> None:
    docs = (REPO / "docs" / "slack.md").read_text(encoding="utf-8")

    assert "deploy/slack-app-manifest.yml" in docs
