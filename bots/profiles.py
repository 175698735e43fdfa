"""Reading a profile folder from disk into a `core.profile.Profile`.

Every file but the folder itself is optional. A file that is there but cannot be read (not a
file, no permission, not UTF-8) or is invalid stops the start with a `ConfigError` naming it.
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

from bots.platforms import REGISTERED, Platforms
from bots.providers import PROVIDER_NAMES
from core.errors import ConfigError
from core.knowledge import KNOWLEDGE_SUFFIXES, KnowledgeFile
from core.modes import ModeCatalog
from core.profile import Profile
from core.skills import Skill

__all__ = ["load_profile"]


def load_profile(profiles_dir: Path, name: str, platforms: Platforms = REGISTERED) -> Profile:
    """Read `profiles/<name>/`: `profile.toml`, `SOUL.md`, `SYSTEM.md`, `MEMORY.md`,
    `USER.md`, `skills/*/SKILL.md` and the text files of `knowledge/` (`knowledge_dir`).
    `default` without a folder there is the copy that ships inside the package (so the bot
    keeps its persona and skills when run from any folder).

    What the file leaves out of `[modes]` and `admins` comes from the platforms (each one's
    default mode, the operators of local channels); `[channels.<platform>]` tables are checked
    by their platforms.
    """
    folder = profiles_dir / name
    _check_link(folder)
    if not folder.is_dir():
        if name == "default":
            return _packaged_default(platforms)
        raise ConfigError(f"profile {name!r} not found: no folder {folder}")
    return _read_profile(folder, name, platforms)


def packaged_profiles() -> Path | None:
    """The folder of the profiles installed with the package, if there is one on disk."""
    # `profiles` is a namespace package of data files: look where its import path points.
    spec = importlib.util.find_spec("profiles")
    locations = spec.submodule_search_locations if spec is not None else None
    for location in locations or ():
        if (Path(location) / "default").is_dir():
            return Path(location)
    return None


def _packaged_default(platforms: Platforms) -> Profile:
    packaged = packaged_profiles()
    if packaged is None:  # a build without the data: the built-in defaults
        data = _with_platform_defaults({}, platforms)
        return Profile.parse("default", data, source="built-in", identity=None)
    return _read_profile(packaged / "default", "default", platforms)


def _read_profile(folder: Path, name: str, platforms: Platforms) -> Profile:
    toml_path = folder / "profile.toml"
    data: dict[str, object] = {}
    toml_text = _read_optional(toml_path)
    if toml_text is not None:
        try:
            data = tomllib.loads(toml_text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{toml_path}: {exc}") from None
    knowledge_dir = data.get("knowledge_dir", "knowledge")
    knowledge = (
        _read_knowledge(
            folder / knowledge_dir, named=toml_path if "knowledge_dir" in data else None
        )
        if isinstance(knowledge_dir, str)
        else []
    )  # a knowledge_dir that is not a string is reported by the validation below
    profile = Profile.parse(
        name,
        _with_platform_defaults(data, platforms),
        source=str(toml_path),
        identity=_read_optional(folder / "SOUL.md"),
        system=_read_optional(folder / "SYSTEM.md"),
        memory=_read_optional(folder / "MEMORY.md") or "",
        user=_read_optional(folder / "USER.md") or "",
        skills=_read_skills(folder / "skills"),
        knowledge=knowledge,
    )
    for platform, table in profile.settings.channels.items():
        try:
            platforms.get(platform).parse_options(table)
        except (ValueError, ConfigError) as exc:
            raise ConfigError(f"{toml_path}: {exc}") from None
    problem = _misnamed(profile, platforms)
    if problem is not None:
        raise ConfigError(f"{toml_path}: {problem}")
    # The tool hooks are imported here once, so a bad path stops every command (and doctor).
    profile.settings.hooks.tool_hooks(source=f"{toml_path}: [hooks]")
    profile.settings.hooks.extensions(source=f"{toml_path}: [hooks]")
    return profile


def _misnamed(profile: Profile, platforms: Platforms) -> str | None:
    """What in the profile names a platform, mode or provider this build does not know."""
    options = profile.settings
    known = sorted(platforms.default_modes())
    modes = ModeCatalog().names()
    for admin in options.admins:
        platform, _, user = admin.partition(":")
        if platform not in known or not user:
            return f"admins: {admin!r} is not <platform>:<user id> (platforms: {', '.join(known)})"
    for table, names in (
        ("allow", options.allow),
        ("modes", options.modes),
        ("access", options.access),
    ):
        for platform in names:
            if platform not in known:
                return f"{table}.{platform}: unknown platform (known: {', '.join(known)})"
    for chat, mode in [*options.modes.items(), *options.chat_modes.items()]:
        if mode not in modes:
            table = "modes" if chat in options.modes else "chat_modes"
            return f"{table}.{chat}: unknown mode {mode!r} (known: {', '.join(modes)})"
    for key, name in [("provider", options.provider), *(("fallback", f) for f in options.fallback)]:
        if name is not None and name not in PROVIDER_NAMES:
            return f"{key}: unknown provider {name!r} (known: {', '.join(PROVIDER_NAMES)})"
    return None


def _with_platform_defaults(data: dict[str, object], platforms: Platforms) -> dict[str, object]:
    """`profile.toml` data with each platform's default mode and the default admins filled in
    where the file gives none."""
    filled = dict(data)
    # The key of earlier versions, before platforms had their own [channels.<name>] tables.
    if "discord_reply_in_thread" in filled:
        channels = filled.setdefault("channels", {})
        if isinstance(channels, dict):
            table = channels.setdefault("discord", {})
            if isinstance(table, dict):
                table.setdefault("reply_in_thread", filled.pop("discord_reply_in_thread"))
    filled.setdefault("modes", platforms.default_modes())
    filled.setdefault("admins", platforms.default_admins())
    return filled


def _read_skills(skills_dir: Path) -> list[Skill]:
    """Every `skills/<folder>/SKILL.md`, in folder-name order; two skills may not share a name."""
    if not skills_dir.exists():
        return []
    if not skills_dir.is_dir():
        raise ConfigError(f"{skills_dir}: not a folder (skills live in skills/<name>/SKILL.md)")
    try:
        folders = sorted(p for p in skills_dir.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        raise ConfigError(f"{skills_dir}: cannot read: {exc.strerror}") from None
    skills: list[Skill] = []
    found: dict[str, Path] = {}
    for folder in folders:
        if not folder.is_dir():
            continue  # a README or similar beside the skill folders
        path = folder / "SKILL.md"
        if not path.exists():
            raise ConfigError(f"{folder}: a skill folder needs a SKILL.md")
        skill = Skill.parse(_read_optional(path) or "", source=str(path))
        if skill.name in found:
            raise ConfigError(
                f"{path}: name: {skill.name!r} is already the name of {found[skill.name]}"
            )
        found[skill.name] = path
        skills.append(skill)
    return skills


def _read_knowledge(knowledge_dir: Path, *, named: Path | None) -> list[KnowledgeFile]:
    """The text and Markdown files under `knowledge_dir` (sub-folders too, hidden ones
    skipped), named by their path within it; none when the default folder is absent, a
    `ConfigError` when the one `knowledge_dir` of the file `named` names is (a typo must not
    pass silently)."""
    _check_link(knowledge_dir)
    if not knowledge_dir.exists():
        if named is not None:
            raise ConfigError(f"{named}: knowledge_dir: {knowledge_dir} does not exist")
        return []
    if not knowledge_dir.is_dir():
        raise ConfigError(f"{knowledge_dir}: not a folder (the knowledge folder holds text files)")
    try:
        paths = sorted(knowledge_dir.rglob("*"))
    except OSError as exc:
        raise ConfigError(f"{knowledge_dir}: cannot read: {exc.strerror}") from None
    files: list[KnowledgeFile] = []
    for path in paths:
        relative = path.relative_to(knowledge_dir)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.suffix.lower() not in KNOWLEDGE_SUFFIXES or path.is_dir():
            continue
        text = _read_optional(path)
        if text is not None:
            files.append(KnowledgeFile(name=relative.as_posix(), text=text))
    return files


def _check_link(path: Path) -> None:
    """`ConfigError` when `path` is a symbolic link that leads nowhere: a broken link is a
    mistake to say, not a file to treat as absent (the profile's settings would be lost)."""
    if not path.is_symlink():
        return
    try:
        path.stat()
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: a symbolic link to {path.readlink()}, which does not exist"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"{path}: a symbolic link that cannot be followed ({exc.strerror})"
        ) from None


def _read_optional(path: Path) -> str | None:
    """The file's text stripped, `None` when absent or blank; `ConfigError` when unreadable."""
    _check_link(path)
    if not path.exists():
        return None
    if not path.is_file():
        raise ConfigError(f"{path}: not a file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    # Line endings normalised: a file saved on Windows gives the same prompt bytes.
    return text.replace("\r\n", "\n").strip() or None
