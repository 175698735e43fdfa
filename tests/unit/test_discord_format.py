"""Markdown as Discord markdown, and its split into messages of at most 2,000 characters."""

from __future__ import annotations

import random
import re

import pytest

from channels.discord.format import (
    DISCORD_LIMIT,
    DiscordMarkdown,
    discord_chunks,
    to_discord_markdown,
)

_FENCE_LINE = re.compile(r"^```([\w+#.-]*)$", re.MULTILINE)


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def fences(chunk: str) -> list[str]:
    """The fence lines of a chunk: ``` plus the language of each opening fence."""
    return _FENCE_LINE.findall(chunk)


def code_of(chunks: list[str]) -> dict[str, str]:
    """The code of all fenced blocks, joined per language (as `render_chunks` cut them)."""
    out: dict[str, list[str]] = {}
    for chunk in chunks:
        for language, body in re.findall(r"^```([\w+#.-]*)\n(.*?)\n```$", chunk, re.S | re.M):
            out.setdefault(language, []).append(body)
    return {language: "\n".join(parts) for language, parts in out.items()}


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**bold** and *it* and ~~gone~~", "**bold** and *it* and ~~gone~~"),
        ("`x = 1`", "`x = 1`"),
        ("``a`b``", "`` a`b ``"),
        ("# Title\n\n### Sub", "**Title**\n\n**Sub**"),
        (
            "[wiki](https://en.wikipedia.org/wiki/Foo_(bar))",
            "[wiki](https://en.wikipedia.org/wiki/Foo_%28bar%29)",
        ),
        ("[docs](<https://example.com/a b>)", "[docs](https://example.com/a%20b)"),
        ("<https://example.com>", "https://example.com"),
        ("[https://x.org](https://x.org)", "https://x.org"),
        ("![a chart](https://x.org/c.png)", "[a chart](https://x.org/c.png)"),
        ("[run](javascript:alert(1))", "[run](javascript:alert(1))"),  # text: not a link
        ("- one\n- two\n  - three", "- one\n- two\n  - three"),
        ("3. c\n4. d", "3. c\n4. d"),
        ("> quoted **loud**\n> > inner", "> quoted **loud**\n>\n> inner"),
        ("a\\_b and 2\\*3 and \\~x", "a\\_b and 2\\*3 and \\~x"),
        ("\\> not a quote", "\\> not a quote"),
        ("\\# not a heading", "\\# not a heading"),
        ("||spoiler||", "\\|\\|spoiler\\|\\|"),
        ("***", "———"),
    ],
)
def test_markdown_becomes_discord_markdown(markdown: str, expected: str) -> None:
    assert to_discord_markdown(markdown) == expected


def test_urls_mentions_and_timestamps_are_left_as_written() -> None:
    text = "see https://x.org/a_b*c#top, ping <@42> in <#7> at <t:1700000000:R>, @everyone"
    assert to_discord_markdown(text) == text


def test_a_fenced_block_keeps_its_language_and_cannot_be_closed_early() -> None:
    rendered = to_discord_markdown('```python\nprint("```")\n```')
    assert fences(rendered) == ["python", ""]
    assert rendered.startswith("```python\nprint(")
    assert "```" not in rendered.split("\n")[1]  # the backticks inside are kept apart


def test_a_table_becomes_a_code_block_of_aligned_columns() -> None:
    rendered = to_discord_markdown("| name | n |\n|---|--:|\n| alpha | 1 |\n| b | 22 |")
    assert rendered == "```\nname  |  n\n------+---\nalpha |  1\nb     | 22\n```"


def test_emphasis_around_code_keeps_its_markers() -> None:
    assert to_discord_markdown("a **`x`** b") == "a **`x`** b"


def test_a_short_answer_is_one_chunk_and_blank_is_none() -> None:
    assert discord_chunks("Hello **there**") == ["Hello **there**"]
    assert discord_chunks("  \n\n ") == []


def test_long_code_is_split_at_line_ends_and_reopened_with_its_language() -> None:
    code = "\n".join(f"value_{n:04d} = compute({n})  # step {n}" for n in range(300))
    markdown = f"Here it is:\n\n```python\n{code}\n```\n\nDone."
    chunks = discord_chunks(markdown)
    assert len(chunks) >= 5
    assert all(len(chunk) <= DISCORD_LIMIT for chunk in chunks)
    for chunk in chunks:
        found = fences(chunk)
        assert len(found) % 2 == 0, chunk[:80]
        assert found[0::2] == ["python"] * (len(found) // 2)  # every opening names python
    assert code_of(chunks) == {"python": code}
    assert chunks[0].startswith("Here it is:")
    assert chunks[-1].endswith("Done.")


def test_emoji_count_twice_against_the_limit() -> None:
    text = "🙂" * 1500  # 3,000 UTF-16 units
    chunks = discord_chunks(text)
    assert len(chunks) == 2
    assert all(utf16_units(chunk) <= DISCORD_LIMIT for chunk in chunks)
    assert "".join(chunks) == text


def test_a_smaller_limit_is_honoured_and_an_impossible_one_refused() -> None:
    chunks = DiscordMarkdown().render_chunks("word " * 100, limit=50)
    assert all(len(chunk) <= 50 for chunk in chunks)
    assert " ".join(chunks).split() == ["word"] * 100
    with pytest.raises(ValueError, match="positive"):
        discord_chunks("x", limit=0)


def _random_markdown(rng: random.Random) -> str:
    blocks = []
    for _ in range(rng.randint(5, 40)):
        kind = rng.choice(["para", "code", "list", "quote", "table", "heading"])
        words = " ".join(
            rng.choice(["alpha", "**beta**", "`gamma`", "*delta*", "e_f"])
            for _ in range(rng.randint(1, 120))
        )
        if kind == "para":
            blocks.append(words)
        elif kind == "code":
            language = rng.choice(["", "python", "js"])
            lines = "\n".join(
                f"line {i} {'x' * rng.randint(0, 90)}" for i in range(rng.randint(1, 80))
            )
            blocks.append(f"```{language}\n{lines}\n```")
        elif kind == "list":
            blocks.append(
                "\n".join(f"- {words[: rng.randint(1, 200)]}" for _ in range(rng.randint(1, 12)))
            )
        elif kind == "quote":
            blocks.append("> " + words)
        elif kind == "table":
            rows = "\n".join(f"| {i} | {words[:30]} |" for i in range(rng.randint(1, 40)))
            blocks.append(f"| n | text |\n|---|---|\n{rows}")
        else:
            blocks.append(f"## {words[:80]}")
    return "\n\n".join(blocks)


@pytest.mark.parametrize("seed", range(25))
def test_random_answers_split_into_fitting_messages_with_balanced_fences(seed: int) -> None:
    markdown = _random_markdown(random.Random(seed))
    chunks = discord_chunks(markdown)
    assert chunks
    for chunk in chunks:
        assert 0 < utf16_units(chunk) <= DISCORD_LIMIT
        assert len(fences(chunk)) % 2 == 0
