"""Reading a profile folder: every file kind, and errors that name the file and the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bots.profiles import load_profile
from core.clock import utc_now
from core.errors import ConfigError
from core.modes import FULL
from core.prompt import DEFAULT_IDENTITY
from core.skills import Skill

REPO = Path(__file__).resolve().parents[2]

SKILL = """---
name: {name}
description: {description}
---
Step one.
Step two.
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill(folder: Path, name: str, description: str = "Does a thing.") -> Path:
    return write(
        folder / "skills" / name / "SKILL.md", SKILL.format(name=name, description=description)
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "bot"


def test_every_file_kind_is_read(folder: Path) -> None:
    write(
        folder / "profile.toml",
        'model = "m1"\nmax_steps = 3\nstream_buffer_size = 32\n[modes]\ntelegram = "full"\n',
    )
    write(folder / "SOUL.md", "\nI am Soul.\n\n")
    write(folder / "MEMORY.md", "The office moved to Lyon.\n")
    write(folder / "USER.md", "Ana prefers short answers.\n")
    skill(folder, "summarize", "Summaries done well.")
    skill(folder, "translate", "Translations.")

    profile = load_profile(folder.parent, "bot")

    assert profile.name == "bot"
    assert profile.settings.model == "m1"
    assert profile.settings.max_steps == 3
    assert profile.settings.stream_buffer_size == 32
    assert profile.settings.modes == {"telegram": "full"}
    assert profile.identity == "I am Soul."
    assert profile.system is None
    assert profile.memory == "The office moved to Lyon."
    assert profile.user == "Ana prefers short answers."
    assert [(s.name, s.description) for s in profile.skills] == [
        ("summarize", "Summaries done well."),
        ("translate", "Translations."),
    ]
    assert profile.skills[0].body == "Step one.\nStep two."


def test_an_empty_folder_gives_the_defaults(folder: Path) -> None:
    folder.mkdir()
    profile = load_profile(folder.parent, "bot")
    assert profile.identity == DEFAULT_IDENTITY
    assert (profile.system, profile.memory, profile.user, profile.skills) == (None, "", "", [])


def test_default_without_a_folder_is_the_copy_shipped_in_the_package(tmp_path: Path) -> None:
    profile = load_profile(tmp_path, "default")
    shipped = load_profile(Path(__file__).resolve().parents[2] / "profiles", "default")
    assert profile == shipped
    assert profile.identity != DEFAULT_IDENTITY
    assert [skill.name for skill in profile.skills] == ["summarize"]


def test_another_missing_profile_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="profile 'nope' not found"):
        load_profile(tmp_path, "nope")


def test_system_md_replaces_the_identity_in_the_prompt(folder: Path) -> None:
    write(folder / "SOUL.md", "I am Soul.")
    write(folder / "SYSTEM.md", "You are a terse SQL assistant.")
    profile = load_profile(folder.parent, "bot")
    assert profile.system == "You are a terse SQL assistant."

    text = profile.system_prompt().build(mode=FULL, platform_hint="", session_id="s", now=utc_now())
    assert text.startswith("You are a terse SQL assistant.\n\n## Capabilities\n")
    assert "I am Soul." not in text


def test_blank_files_count_as_absent(folder: Path) -> None:
    write(folder / "SOUL.md", "  \n")
    write(folder / "SYSTEM.md", "\n")
    write(folder / "MEMORY.md", "")
    profile = load_profile(folder.parent, "bot")
    assert profile.identity == DEFAULT_IDENTITY
    assert profile.system is None
    assert profile.memory == ""


def test_windows_line_endings_and_a_bom_are_normalised(folder: Path) -> None:
    (folder / "skills" / "x").mkdir(parents=True)
    (folder / "USER.md").write_bytes("\ufeffline one\r\nline two\r\n".encode())
    (folder / "skills" / "x" / "SKILL.md").write_bytes(
        b"---\r\nname: x\r\ndescription: d\r\n---\r\nbody\r\n"
    )
    profile = load_profile(folder.parent, "bot")
    assert profile.user == "line one\nline two"
    assert profile.skills == [Skill(name="x", description="d", body="body")]


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("max_steps = 0\n", "max_steps"),
        ("stream_buffer_size = 0\n", "stream_buffer_size"),
        ('[sessions]\nreset_idle = "soon"\n', "sessions.reset_idle"),
        ('[sessions]\nreset_at = "25:00"\n', "sessions.reset_at"),
        ("temprature = 0.5\n", "temprature"),
        ('[allow.telegram]\nuser = ["1"]\n', "allow.telegram.user"),
        ('group_replies = "sometimes"\n', "group_replies"),
        ('busy = "wait"\n', "busy"),
        ("busy_window = -1\n", "busy_window"),
        ("[subagents]\nmax_steps = 0\n", "subagents.max_steps"),
        ("[subagents]\nmax_parallel = 0\n", "subagents.max_parallel"),
        ("[subagents]\nmax_depth = 2\n", "subagents.max_depth"),
    ],
)
def test_bad_settings_name_the_file_and_the_key(folder: Path, toml: str, key: str) -> None:
    path = write(folder / "profile.toml", toml)
    with pytest.raises(ConfigError) as caught:
        load_profile(folder.parent, "bot")
    assert str(caught.value).startswith(f"{path}: {key}: ")


def test_busy_defaults_to_steer_and_is_read(folder: Path) -> None:
    folder.mkdir()
    defaults = load_profile(folder.parent, "bot").settings
    assert (defaults.busy, defaults.busy_window) == ("steer", 1.5)
    write(folder / "profile.toml", 'busy = "collect"\nbusy_window = 2.5\n')
    settings = load_profile(folder.parent, "bot").settings
    assert (settings.busy, settings.busy_window) == ("collect", 2.5)


def test_subagents_limits_default_and_are_read(folder: Path) -> None:
    folder.mkdir()
    defaults = load_profile(folder.parent, "bot").settings.subagents
    assert (defaults.max_steps, defaults.max_parallel, defaults.max_cost_usd) == (4, 2, 0.10)
    write(
        folder / "profile.toml",
        "[subagents]\nmax_steps = 6\ntimeout_seconds = 30\nmax_cost_usd = 0.5\nmax_parallel = 3\n",
    )
    read = load_profile(folder.parent, "bot").settings.subagents
    assert (read.max_steps, read.timeout_seconds, read.max_cost_usd, read.max_parallel) == (
        6,
        30.0,
        0.5,
        3,
    )


def test_bad_toml_names_the_file(folder: Path) -> None:
    path = write(folder / "profile.toml", "max_steps = = 3\n")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: "):
        load_profile(folder.parent, "bot")


@pytest.mark.parametrize("name", ["SOUL.md", "SYSTEM.md", "MEMORY.md", "USER.md", "profile.toml"])
def test_a_file_that_is_not_utf8_is_named(folder: Path, name: str) -> None:
    path = folder / name
    folder.mkdir()
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: not UTF-8 text$"):
        load_profile(folder.parent, "bot")


def test_a_folder_in_place_of_a_file_is_named(folder: Path) -> None:
    (folder / "MEMORY.md").mkdir(parents=True)
    path = folder / "MEMORY.md"
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: not a file$"):
        load_profile(folder.parent, "bot")


def test_a_dangling_profile_toml_link_is_an_error_not_an_absent_file(folder: Path) -> None:
    folder.mkdir()
    (folder / "profile.toml").symlink_to(folder / "moved.toml")
    path = folder / "profile.toml"
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: a symbolic link to .*moved"):
        load_profile(folder.parent, "bot")


def test_a_looping_profile_toml_link_is_an_error(folder: Path) -> None:
    folder.mkdir()
    (folder / "profile.toml").symlink_to(folder / "other.toml")
    (folder / "other.toml").symlink_to(folder / "profile.toml")
    path = folder / "profile.toml"
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: a symbolic link that cannot"):
        load_profile(folder.parent, "bot")


def test_a_dangling_default_folder_link_is_not_replaced_by_the_packaged_copy(
    tmp_path: Path,
) -> None:
    (tmp_path / "default").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match=r"a symbolic link to .*gone, which does not exist"):
        load_profile(tmp_path, "default")


def test_skills_in_name_order_whatever_the_folder_names(folder: Path) -> None:
    write(folder / "skills" / "a-folder" / "SKILL.md", SKILL.format(name="zeta", description="z"))
    write(folder / "skills" / "b-folder" / "SKILL.md", SKILL.format(name="alpha", description="a"))
    write(folder / "skills" / "README.md", "notes beside the skills are ignored")
    write(folder / "skills" / ".hidden" / "notes.txt", "ignored")
    assert [s.name for s in load_profile(folder.parent, "bot").skills] == ["alpha", "zeta"]


def test_a_skill_folder_without_skill_md_is_named(folder: Path) -> None:
    (folder / "skills" / "empty").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"empty: a skill folder needs a SKILL\.md"):
        load_profile(folder.parent, "bot")


def test_two_skills_with_one_name_name_both_files(folder: Path) -> None:
    first = write(folder / "skills" / "a" / "SKILL.md", SKILL.format(name="same", description="1"))
    second = write(folder / "skills" / "b" / "SKILL.md", SKILL.format(name="same", description="2"))
    with pytest.raises(ConfigError) as caught:
        load_profile(folder.parent, "bot")
    assert str(caught.value) == f"{second}: name: 'same' is already the name of {first}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter here\n", "no front matter"),
        ("", "no front matter"),
        ("---\nname: x\ndescription: d\nbody\n", "no closing '---' line"),
        ("---\ndescription: d\n---\nbody\n", "name: missing from the front matter"),
        ("---\nname: x\n---\nbody\n", "description: missing from the front matter"),
        ("---\nname: x\ndescription:\n---\nbody\n", "description: missing from the front matter"),
        ("---\nname: has space\ndescription: d\n---\nbody\n", "name: 'has space' is not a"),
        ("---\nname: x\ndescription: >\n  folded\n---\nbody\n", "description: must be on one"),
        ("---\nname: x\nname: y\ndescription: d\n---\nbody\n", "name: given twice"),
        ("---\nname: x\njust words\ndescription: d\n---\nb\n", "line 3: expected 'key: value'"),
        ("---\nname: x\ndescription: d\n---\n\n", "no instructions after the front matter"),
    ],
)
def test_an_invalid_skill_names_the_file_and_the_key(folder: Path, text: str, message: str) -> None:
    path = write(folder / "skills" / "x" / "SKILL.md", text)
    with pytest.raises(ConfigError) as caught:
        load_profile(folder.parent, "bot")
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_front_matter_quotes_comments_and_other_keys() -> None:
    parsed = Skill.parse(
        "---\n"
        "# a comment\n"
        'name: "sql-helper"\n'
        "description: 'Writes SQL: joins, windows.'\n"
        "license: MIT\n"
        "metadata:\n"
        "  version: 2\n"
        "---\n"
        "Use CTEs.\n",
        source="SKILL.md",
    )
    assert parsed == Skill(
        name="sql-helper", description="Writes SQL: joins, windows.", body="Use CTEs."
    )


def test_a_description_too_long_for_the_index_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^S\.md: description: longer than 1024"):
        Skill.parse(f"---\nname: x\ndescription: {'d' * 1025}\n---\nbody\n", source="S.md")


def test_the_repository_default_profile_loads_with_its_example_skill() -> None:
    profile = load_profile(REPO / "profiles", "default")
    assert profile.identity.startswith("You are Switchboard")
    assert [s.name for s in profile.skills] == ["summarize"]
    assert "summar" in profile.skills[0].body.lower()
