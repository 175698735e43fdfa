"""`profile_env`: a test's own profile and data folder, and nothing of the machine's set-up.

For tests that load settings and a profile the way `switchboard serve` does (`load_settings`,
`load_profile`) inside the test process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["profile_env"]

# Credentials, endpoints and Switchboard settings a developer's shell may hold.
_MACHINE_SETTINGS = (
    "TELEGRAM_",
    "SLACK_",
    "DISCORD_",
    "OPENAI_",
    "ANTHROPIC_",
    "BRAVE_",
    "SEARXNG_",
    "SWITCHBOARD_",
    "REDIS_URL",
    "DATABASE_URL",
)


def profile_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, profile_toml: str, **env: str
) -> None:
    """Profile `bot` holding `profile_toml` in `tmp_path/profiles`, data in `tmp_path/data`, the
    machine's credentials, endpoints and Switchboard settings out of the environment, then
    `env` set."""
    folder = tmp_path / "profiles" / "bot"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(profile_toml, encoding="utf-8")
    for name in list(os.environ):
        if name.startswith(_MACHINE_SETTINGS):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SWITCHBOARD_PROFILES_DIR", str(tmp_path / "profiles"))
    monkeypatch.setenv("SWITCHBOARD_PROFILE", "bot")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
