"""The knowledge folder in the system prompt: name order, the budget, the cut note, scrubbing,
and reading the folder (`bots/profiles.py`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bots.profiles import load_profile
from core.errors import ConfigError
from core.knowledge import KnowledgeFile, knowledge_text
from core.modes import SAFE_CHAT
from core.profile import Profile
from core.prompt import SystemPrompt
from core.redact import REDACTED, Redactor

NOW = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)
SECRET = "hunter2-very-secret-value"


def build(prompt: SystemPrompt) -> str:
    return prompt.build(mode=SAFE_CHAT, platform_hint="", session_id="s", now=NOW)


def test_files_come_in_name_order_each_under_its_name() -> None:
    files = (
        KnowledgeFile(name="b.md", text="Bees."),
        KnowledgeFile(name="a.txt", text="Ants."),
    )
    assert knowledge_text(files, 1000) == (
        "Reference material from this bot's knowledge folder, one file per heading.\n\n"
        "### a.txt\nAnts.\n\n### b.md\nBees."
    )


def test_the_section_comes_after_the_user_and_before_the_skills() -> None:
    prompt = SystemPrompt(
        user="Ana.", knowledge=(KnowledgeFile(name="hours.md", text="Open 9 to 5."),)
    )
    text = build(prompt)
    assert "## About the user\nAna.\n\n## Knowledge\n" in text
    assert "### hours.md\nOpen 9 to 5." in text


def test_over_the_budget_the_text_is_cut_with_a_note_naming_what_is_left_out() -> None:
    files = [
        KnowledgeFile(name="1.md", text="x" * 6),
        KnowledgeFile(name="2.md", text="y" * 6),
        KnowledgeFile(name="3.md", text="z" * 6),
    ]
    text = knowledge_text(files, 10)
    assert "### 1.md\nxxxxxx" in text
    assert "### 2.md\nyyyy\n\n" in text
    assert "yyyyy" not in text and "zzz" not in text
    assert text.endswith(
        "[The knowledge folder is longer than its budget of 10 characters: 2.md is cut "
        "here; also left out: 3.md.]"
    )


def test_a_file_that_starts_past_the_budget_is_named_as_left_out() -> None:
    files = [KnowledgeFile(name="a.md", text="aaaa"), KnowledgeFile(name="b.md", text="bb")]
    text = knowledge_text(files, 4)
    assert "### b.md" not in text
    assert text.endswith("4 characters: b.md is left out.]")


def test_no_files_or_a_zero_budget_leave_the_section_out() -> None:
    assert "## Knowledge" not in build(SystemPrompt())
    zero = SystemPrompt(knowledge=(KnowledgeFile(name="a.md", text="A."),), knowledge_max_chars=0)
    assert "## Knowledge" not in build(zero)


def test_knowledge_is_scrubbed_of_configured_secrets() -> None:
    profile = Profile(
        name="p", knowledge=[KnowledgeFile(name="ops.md", text=f"The password is {SECRET}.")]
    )
    text = build(profile.system_prompt(Redactor([SECRET])))
    assert SECRET not in text
    assert f"The password is {REDACTED}." in text


def test_the_folder_is_read_in_name_order_skipping_hidden_and_other_files(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "bot"
    (folder / "knowledge" / "sub").mkdir(parents=True)
    (folder / "knowledge" / "b.md").write_text("Bees.\r\n", encoding="utf-8")
    (folder / "knowledge" / "a.txt").write_text("Ants.", encoding="utf-8")
    (folder / "knowledge" / "sub" / "c.markdown").write_text("Cats.", encoding="utf-8")
    (folder / "knowledge" / "logo.png").write_bytes(b"\x89PNG")
    (folder / "knowledge" / ".draft.md").write_text("Not yet.", encoding="utf-8")
    (folder / "profile.toml").write_text("knowledge_max_chars = 500\n", encoding="utf-8")

    profile = load_profile(tmp_path, "bot")

    assert [(k.name, k.text) for k in profile.knowledge] == [
        ("a.txt", "Ants."),
        ("b.md", "Bees."),
        ("sub/c.markdown", "Cats."),
    ]
    assert profile.system_prompt().knowledge_max_chars == 500


def test_knowledge_dir_names_another_folder(tmp_path: Path) -> None:
    folder = tmp_path / "bot"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "faq.md").write_text("Q and A.", encoding="utf-8")
    (folder / "profile.toml").write_text('knowledge_dir = "docs"\n', encoding="utf-8")

    assert [k.name for k in load_profile(tmp_path, "bot").knowledge] == ["faq.md"]


def test_a_knowledge_dir_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "profile.toml").write_text('knowledge_dir = "dcos"\n', encoding="utf-8")

    with pytest.raises(ConfigError, match=r"profile\.toml: knowledge_dir: .*dcos does not exist$"):
        load_profile(tmp_path, "bot")
