"""The Markdown rendering framework: plain-text rendering, block packing and every split level."""

from __future__ import annotations

import random
import re
from typing import ClassVar

import pytest
from markdown_it.tree import SyntaxTreeNode

from channels.markdown import MarkdownRenderer, split_plain

PLAIN = MarkdownRenderer()


class Fenced(MarkdownRenderer):
    """A minimal platform: code blocks and tables in ``` fences, like Slack or Discord."""

    def render_code(self, code: str, language: str) -> str:
        code = code.removesuffix("\n")
        return f"```{language}\n{code}\n```" if code.strip() else ""


FENCED = Fenced()


def fence_bodies(chunk: str) -> list[tuple[str, str]]:
    """(language, body) of every complete ``` block in a chunk."""
    return re.findall(r"```(\w*)\n(.*?)\n```", chunk, flags=re.DOTALL)


# --- plain rendering ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("# Title *here*", "Title here"),
        ("**bold** *it* ~~gone~~ `code`", "bold it gone code"),
        ("- one\n- two", "• one\n• two"),
        ("3. three\n4. four", "3. three\n4. four"),
        ("- a\n  - b\n    - c\n- d", "• a\n  • b\n    • c\n• d"),
        ("1. a\n\n   more a\n2. b", "1. a\n   more a\n2. b"),
        ("> quoted\n> text", "> quoted\n> text"),
        ("> a\n>\n> b", "> a\n>\n> b"),
        ("[docs](https://x.org/d)", "docs (https://x.org/d)"),
        ("<https://x.org>", "https://x.org"),
        ("<me@x.org>", "me@x.org"),
        ("<https://x.org/ä>", "https://x.org/ä"),
        ("![a cat](https://x.org/c.png)", "a cat (https://x.org/c.png)"),
        ("![](https://x.org/c.png)", "https://x.org/c.png"),
        ("```python\nx = 1\n```", "x = 1"),
        ("    indented", "indented"),
        ("---", "———"),
        ("a <b>raw</b> & more", "a <b>raw</b> & more"),
        ("<div>\nblock\n</div>", "<div>\nblock\n</div>"),
        ("line one\nline two", "line one\nline two"),
        ("hard  \nbreak", "hard\nbreak"),
        ("[ref] link\n\n[ref]: https://x.org", "ref (https://x.org) link"),
    ],
)
def test_plain_rendering(markdown: str, expected: str) -> None:
    assert PLAIN.render(markdown) == expected


def test_tables_render_as_aligned_columns() -> None:
    markdown = "| Name | Qty | Note |\n|:--|--:|:-:|\n| apple | 3 | ok |\n| kiwi | 12 | fine |"
    assert PLAIN.render(markdown) == (
        "Name  | Qty | Note\n------+-----+-----\napple |   3 |  ok\nkiwi  |  12 | fine"
    )


def test_table_columns_count_wide_characters_twice() -> None:
    rendered = PLAIN.render("| a | b |\n|---|---|\n| 香蕉 | x |\n| ab | y |")
    assert rendered.splitlines()[2:] == ["香蕉 | x", "ab   | y"]


def test_blocks_are_joined_with_a_blank_line() -> None:
    assert PLAIN.render("one\n\n\n\ntwo\n\n- three") == "one\n\ntwo\n\n• three"


def test_a_subclass_overrides_only_what_differs() -> None:
    class Shouting(MarkdownRenderer):
        def render_strong(self, node: SyntaxTreeNode) -> str:
            return self.render_children(node).upper()

    assert Shouting().render("a **b** [c](https://x.y)") == "a B c (https://x.y)"


# --- packing blocks -------------------------------------------------------------------------


@pytest.mark.parametrize("markdown", ["", "   ", "\n\n\t\n"])
def test_blank_input_gives_no_chunks(markdown: str) -> None:
    assert PLAIN.render_chunks(markdown, 100) == []


def test_an_answer_that_fits_is_one_chunk_equal_to_render() -> None:
    markdown = "# Hi\n\nSome *text*.\n\n- a\n- b\n\n```\ncode\n```"
    assert PLAIN.render_chunks(markdown, 1000) == [PLAIN.render(markdown)]


def test_blocks_are_packed_whole_into_as_few_chunks_as_fit() -> None:
    paragraphs = [f"paragraph {i} " + "x" * 30 for i in range(5)]  # 43 characters each
    chunks = PLAIN.render_chunks("\n\n".join(paragraphs), 100)
    # Two blocks and their blank line take 88; a third would take 133.
    assert chunks == [
        f"{paragraphs[0]}\n\n{paragraphs[1]}",
        f"{paragraphs[2]}\n\n{paragraphs[3]}",
        paragraphs[4],
    ]


def test_default_limit_is_the_class_attribute() -> None:
    class Tiny(MarkdownRenderer):
        limit: ClassVar[int] = 20

    chunks = Tiny().render_chunks("one two three four five six seven eight")
    assert chunks == ["one two three four", "five six seven eight"]


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        PLAIN.render_chunks("x", 0)


def test_a_limit_that_cannot_hold_a_character_is_an_error() -> None:
    class Heavy(MarkdownRenderer):
        def measure(self, text: str) -> int:
            return 3 * len(text)

    with pytest.raises(ValueError, match="single character"):
        Heavy().render_chunks("abc", 2)


# --- split levels ---------------------------------------------------------------------------


def test_code_block_splits_at_lines_and_reopens_with_its_language() -> None:
    lines = [f"print({i})  # line {i}" for i in range(40)]
    markdown = "```python\n" + "\n".join(lines) + "\n```"
    chunks = FENCED.render_chunks(markdown, 200)
    assert len(chunks) > 3
    bodies = []
    for chunk in chunks:
        assert len(chunk) <= 200
        assert chunk.startswith("```python\n")
        assert chunk.endswith("\n```")
        ((language, body),) = fence_bodies(chunk)
        assert language == "python"
        bodies.append(body)
    assert "\n".join(bodies) == "\n".join(lines)


def test_an_over_long_code_line_is_split_hard() -> None:
    markdown = "```js\n" + "a" * 100 + "\nshort\n```"
    chunks = FENCED.render_chunks(markdown, 40)
    assert all(len(chunk) <= 40 for chunk in chunks)
    bodies = [body for chunk in chunks for _, body in fence_bodies(chunk)]
    assert all(chunk.startswith("```js\n") for chunk in chunks)
    assert "".join(bodies[:-1]) == "a" * 100
    assert bodies[-1] == "short"


def test_list_splits_at_item_boundaries() -> None:
    items = [f"item number {i} " + "y" * 20 for i in range(12)]
    chunks = PLAIN.render_chunks("\n".join(f"- {item}" for item in items), 120)
    assert len(chunks) > 2
    assert [line for chunk in chunks for line in chunk.split("\n")] == [
        f"• {item}" for item in items
    ]


def test_ordered_list_numbering_continues_in_later_chunks() -> None:
    # Authors often number every item "1."; CommonMark counts from the first number.
    markdown = "\n".join(f"1. step {'z' * 20}" for _ in range(9))
    chunks = PLAIN.render_chunks(markdown, 70)
    numbers = [line.split(".")[0] for chunk in chunks for line in chunk.split("\n")]
    assert numbers == [str(n) for n in range(1, 10)]
    assert len(chunks) > 1


def test_a_single_oversized_item_is_split_inside_and_keeps_its_marker() -> None:
    markdown = "- short\n- " + " ".join(f"word{i}" for i in range(40)) + "\n- last"
    chunks = PLAIN.render_chunks(markdown, 60)
    assert all(len(chunk) <= 60 for chunk in chunks)
    # The item's pieces are rendered as one-item lists: each continues under the bullet.
    assert chunks[0] == "• short"
    assert all(chunk.startswith("• word") for chunk in chunks[1:-1])
    assert chunks[-1].endswith(" word39\n• last")
    words = " ".join(chunks).replace("•", " ").split()
    assert words == ["short", *(f"word{i}" for i in range(40)), "last"]


def test_paragraph_splits_at_line_boundaries_first() -> None:
    lines = [f"This is line {i} of a poem." for i in range(8)]
    chunks = PLAIN.render_chunks("\n".join(lines), 60)
    assert [line for chunk in chunks for line in chunk.split("\n")] == lines
    assert all(len(chunk) <= 60 for chunk in chunks)


def test_paragraph_splits_at_sentence_boundaries_next() -> None:
    sentences = [f"Sentence {i} is here." for i in range(10)]
    chunks = PLAIN.render_chunks(" ".join(sentences), 50)
    assert all(chunk.endswith(".") and len(chunk) <= 50 for chunk in chunks)
    assert " ".join(chunks) == " ".join(sentences)


def test_paragraph_splits_at_word_boundaries_then_hard() -> None:
    words = " ".join(f"w{i}" for i in range(30))
    chunks = PLAIN.render_chunks(words, 20)
    assert " ".join(chunks) == words
    assert all(len(chunk) <= 20 for chunk in chunks)

    chunks = PLAIN.render_chunks("x" * 45, 20)
    assert chunks == ["x" * 20, "x" * 20, "x" * 5]


def test_paragraph_pieces_keep_their_inline_markup_and_references() -> None:
    markdown = "**bold one** and [a link][r].\n**bold two** and more.\n\n[r]: https://x.org"
    chunks = FENCED.render_chunks(markdown, 40)
    assert chunks == ["bold one and a link (https://x.org).", "bold two and more."]


def test_blockquote_pieces_stay_quoted() -> None:
    markdown = "> " + "\n> ".join(f"quoted line {i}" for i in range(10))
    chunks = PLAIN.render_chunks(markdown, 50)
    assert len(chunks) > 1
    assert all(line.startswith("> ") for chunk in chunks for line in chunk.split("\n"))
    assert all(len(chunk) <= 50 for chunk in chunks)


def test_table_pieces_repeat_the_header() -> None:
    rows = "\n".join(f"| k{i} | value {i} |" for i in range(20))
    chunks = FENCED.render_chunks(f"| key | value |\n|---|---|\n{rows}", 100)
    assert len(chunks) > 2
    for chunk in chunks:
        ((_, body),) = fence_bodies(chunk)
        assert body.startswith("key | value")
        assert len(chunk) <= 100


def test_a_block_with_no_fitting_structure_falls_back_to_plain_text() -> None:
    markdown = "| a |\n|---|\n| " + " ".join(["cell"] * 30) + " |"
    chunks = FENCED.render_chunks(markdown, 40)
    assert all(len(chunk) <= 40 and "```" not in chunk for chunk in chunks)
    assert " ".join(chunks).split().count("cell") == 30


# --- the measure hook -----------------------------------------------------------------------


def test_chunks_are_measured_with_the_measure_hook() -> None:
    class Bytes(MarkdownRenderer):
        def measure(self, text: str) -> int:
            return len(text.encode())

    text = " ".join(["é"] * 30)  # 59 characters, 89 bytes
    assert PLAIN.render_chunks(text, 60) == [text]
    chunks = Bytes().render_chunks(text, 60)
    assert len(chunks) == 2
    assert all(len(chunk.encode()) <= 60 for chunk in chunks)


# --- plain-text fallback --------------------------------------------------------------------


def test_split_plain_prefers_paragraphs() -> None:
    text = "first paragraph here\n\nsecond one\nwith two lines\n\nthird"
    assert split_plain(text, 30) == ["first paragraph here", "second one\nwith two lines", "third"]


def test_split_plain_then_lines_words_and_characters() -> None:
    assert split_plain("line one\nline two\nline three", 18) == ["line one\nline two", "line three"]
    assert split_plain("alpha beta gamma delta", 11) == ["alpha beta", "gamma delta"]
    assert split_plain("abcdefghij", 4) == ["abcd", "efgh", "ij"]


def test_split_plain_uses_measure_and_drops_blanks() -> None:
    assert split_plain("  \n\n ", 10) == []
    assert split_plain("aa bb cc", 6, measure=lambda text: 2 * len(text)) == ["aa", "bb", "cc"]
    with pytest.raises(ValueError):
        split_plain("x", 0)


# --- property-style -------------------------------------------------------------------------


def _random_markdown(rng: random.Random) -> str:
    words = ["alpha", "beta", "**bold**", "*it*", "`code`", "[l](https://x.y)", "gamma.", "é"]
    blocks = []
    for _ in range(rng.randint(1, 8)):
        kind = rng.choice(["para", "list", "code", "quote", "table"])
        text = " ".join(rng.choices(words, k=rng.randint(1, 60)))
        if kind == "para":
            blocks.append(text)
        elif kind == "list":
            blocks.append("\n".join(f"- {text[: rng.randint(1, 80)]}" for _ in range(5)))
        elif kind == "code":
            lines = ("x" * rng.randint(0, 90) for _ in range(rng.randint(1, 20)))
            blocks.append("```py\n" + "\n".join(lines) + "\n```")
        elif kind == "quote":
            blocks.append("> " + text)
        else:
            rows = "\n".join(f"| {rng.choice(words)} | {i} |" for i in range(rng.randint(1, 9)))
            blocks.append(f"| a | b |\n|---|---|\n{rows}")
    return "\n\n".join(blocks)


def test_random_answers_split_into_fitting_chunks_with_closed_fences() -> None:
    rng = random.Random(1729)
    for _ in range(150):
        markdown = _random_markdown(rng)
        limit = rng.choice([40, 80, 200, 1000])
        chunks = FENCED.render_chunks(markdown, limit)
        for chunk in chunks:
            assert chunk.strip()
            assert len(chunk) <= limit, (markdown, limit, chunk)
            assert chunk.count("```") % 2 == 0, (markdown, limit, chunk)
