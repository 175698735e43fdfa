"""Reading a profile folder from disk into a `core.profile.Profile`."""

from __future__ import annotations

import tomllib
from pathlib import Path

from core.errors import ConfigError
from core.profile import Profile

__all__ = ["load_profile"]


def load_profile(profiles_dir: Path, name: str) -> Profile:
    """Read `profiles/<name>/profile.toml` and `SOUL.md`; built-in defaults for `default`."""
    folder = profiles_dir / name
    if not folder.is_dir():
        if name == "default":
            return Profile(name=name)
        raise ConfigError(f"profile {name!r} not found: no folder {folder}")
    toml_path = folder / "profile.toml"
    data: dict[str, object] = {}
    if toml_path.is_file():
        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{toml_path}: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{toml_path}: cannot read: {exc.strerror}") from None
    identity = None
    soul = folder / "SOUL.md"
    if soul.is_file():
        identity = soul.read_text(encoding="utf-8").strip() or None
    return Profile.parse(name, data, source=str(toml_path), identity=identity)
