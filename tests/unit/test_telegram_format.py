"""Markdown as Telegram Bot API HTML, and its split into messages Telegram accepts."""

from __future__ import annotations

import random
from html.parser import HTMLParser

import pytest

from channels.telegram.format import (
    TELEGRAM_LIMIT,
    TelegramHtml,
    telegram_chunks,
    to_telegram_html,
)

TELEGRAM_TAGS = {"b", "i", "s", "code", "pre", "a", "blockquote"}


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class _TagChecker(HTMLParser):
    """Checks that tags are Telegram's, properly nested and all closed; collects code text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.starts = 0
        self.ends = 0
        self.problems: list[str] = []
        self.code: dict[str, list[str]] = {}  # language -> text of its code blocks
        self._language: str | None = None  # of the <pre><code> being read

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts += 1
        if tag not in TELEGRAM_TAGS:
            self.problems.append(f"unknown tag <{tag}>")
        if tag == "code" and self.open[-1:] == ["pre"]:
            self._language = (dict(attrs).get("class") or "").removeprefix("language-")
            self.code.setdefault(self._language, []).append("")
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.ends += 1
        if tag == "code":
            self._language = None
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1:]}")
        else:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        if self._language is not None:
            self.code[self._language][-1] += data


def check_balanced(chunk: str) -> _TagChecker:
    checker = _TagChecker()
    checker.feed(chunk)
    checker.close()
    assert checker.problems == [], chunk
    assert checker.open == [], chunk
    assert checker.starts == checker.ends
    return checker


# --- each construct -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("plain text", "plain text"),
        ("**bold**", "<b>bold</b>"),
        ("__bold__", "<b>bold</b>"),
        ("*italic*", "<i>italic</i>"),
        ("~~struck~~", "<s>struck</s>"),
        ("`a < b`", "<code>a &lt; b</code>"),
        ("# Heading", "<b>Heading</b>"),
        ("### Heading *three*", "<b>Heading <i>three</i></b>"),
        ("- one\n- two", "• one\n• two"),
        ("1. one\n2. two", "1. one\n2. two"),
        ("7. seven\n8. eight", "7. seven\n8. eight"),
        ("- a\n  - b\n    1. c\n- d", "• a\n  • b\n    1. c\n• d"),
        ("> quoted **text**", "<blockquote>quoted <b>text</b></blockquote>"),
        ("> outer\n>\n> > inner", "<blockquote>outer\n\ninner</blockquote>"),
        ("```\nplain()\n```", "<pre>plain()</pre>"),
        ("    indented()", "<pre>indented()</pre>"),
        (
            "```python\nif a < b and c > d:\n    f('&')\n```",
            '<pre><code class="language-python">if a &lt; b and c &gt; d:\n'
            "    f('&amp;')</code></pre>",
        ),
        ("```c++ {.numbered}\nx++;\n```", '<pre><code class="language-c++">x++;</code></pre>'),
        ("---", "———"),
        ("[docs](https://x.org/d)", '<a href="https://x.org/d">docs</a>'),
        ("[me](tg://user?id=42)", '<a href="tg://user?id=42">me</a>'),
        ("<me@x.org>", '<a href="mailto:me@x.org">me@x.org</a>'),
        ("<https://x.org/ä>", '<a href="https://x.org/%C3%A4">https://x.org/ä</a>'),
        ("[q](https://x.org/?a=1&b=2)", '<a href="https://x.org/?a=1&amp;b=2">q</a>'),
        ("[**b** *i*](https://x.org)", '<a href="https://x.org"><b>b</b> <i>i</i></a>'),
        ("[](https://x.org)", '<a href="https://x.org">https://x.org</a>'),
        ("[ftp](ftp://x.org/f)", "ftp (ftp://x.org/f)"),
        ("[rel](/path?a&b)", "rel (/path?a&amp;b)"),
        ("![a cat](https://x.org/c.png)", '<a href="https://x.org/c.png">a cat</a>'),
        ("![](https://x.org/c.png)", '<a href="https://x.org/c.png">https://x.org/c.png</a>'),
        ("![a *cat*](cat.png)", "a cat (cat.png)"),
        ("one\ntwo  \nthree", "one\ntwo\nthree"),
        ("a\n\n\nb", "a\n\nb"),
    ],
)
def test_construct_html(markdown: str, html: str) -> None:
    assert to_telegram_html(markdown) == html


def test_table_becomes_a_pre_block_of_aligned_columns() -> None:
    markdown = "| Name | Qty |\n|:--|--:|\n| apple & pear | 3 |\n| <kiwi> | 12 |"
    assert to_telegram_html(markdown) == (
        "<pre>Name         | Qty\n"
        "-------------+----\n"
        "apple &amp; pear |   3\n"
        "&lt;kiwi&gt;       |  12</pre>"
    )


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("***both***", "<i><b>both</b></i>"),
        ("**bold *italic* bold**", "<b>bold <i>italic</i> bold</b>"),
        ("*it **bold ~~gone~~** it*", "<i>it <b>bold <s>gone</s></b> it</i>"),
        ("- **a *b***", "• <b>a <i>b</i></b>"),
    ],
)
def test_nested_emphasis(markdown: str, html: str) -> None:
    assert to_telegram_html(markdown) == html


# --- escaping -------------------------------------------------------------------------------


def test_text_is_escaped() -> None:
    html = to_telegram_html('Use <script>alert("x")</script> & "quotes" > less')
    assert html == 'Use &lt;script&gt;alert("x")&lt;/script&gt; &amp; "quotes" &gt; less'


def test_raw_html_in_markdown_is_shown_as_text() -> None:
    assert to_telegram_html("a <b>b</b> <i onclick='x'>c</i>") == (
        "a &lt;b&gt;b&lt;/b&gt; &lt;i onclick='x'&gt;c&lt;/i&gt;"
    )
    assert to_telegram_html("<div>\n<script>evil()</script>\n</div>") == (
        "&lt;div&gt;\n&lt;script&gt;evil()&lt;/script&gt;\n&lt;/div&gt;"
    )


def test_entities_in_markdown_are_decoded_then_escaped() -> None:
    assert to_telegram_html("&amp; &lt;b&gt; &copy; \\*") == "&amp; &lt;b&gt; © *"


def test_attribute_values_escape_quotes() -> None:
    renderer = TelegramHtml()
    assert renderer.escape_attribute('a"b<c>&d') == "a&quot;b&lt;c&gt;&amp;d"
    assert renderer.escape('a"b') == 'a"b'


def test_javascript_links_never_become_links() -> None:
    html = to_telegram_html("[x](javascript:alert(1)) [y](data:text/html,hi)")
    assert "<a" not in html


# --- measuring and splitting ----------------------------------------------------------------


def test_length_is_counted_in_utf16_units() -> None:
    renderer = TelegramHtml()
    assert renderer.measure("abc") == 3
    assert renderer.measure("é") == 1
    assert renderer.measure("😀") == 2
    assert renderer.measure("👍🏽") == 4


def test_emoji_count_twice_against_the_limit() -> None:
    text = " ".join(["😀" * 10] * 300)  # 3,299 characters, 6,299 UTF-16 units
    assert len(text) < TELEGRAM_LIMIT
    chunks = telegram_chunks(text)
    assert len(chunks) == 2
    assert all(utf16_units(chunk) <= TELEGRAM_LIMIT for chunk in chunks)
    assert " ".join(chunks) == text


def test_short_answer_is_one_chunk() -> None:
    assert telegram_chunks("Hi **there**") == ["Hi <b>there</b>"]
    assert telegram_chunks(" \n ") == []


def _long_answer() -> tuple[str, str]:
    prose = " ".join(
        f"Point {i} compares <option {i}> & its cost, which matters." for i in range(70)
    )
    items = "\n".join(f"- Item {i}: **keep** the `value_{i}` in *mind*" for i in range(40))
    rows = "\n".join(f"| region-{i} | {i * 37} | {'ok' if i % 2 else 'late'} |" for i in range(40))
    table = f"| Region | Sales | Status |\n|---|--:|:-:|\n{rows}"
    code = "\n".join(
        f"def step_{i}(x):  return x * {i} if x < {i} else x & {i}  # <{i}>" for i in range(56)
    )
    markdown = (
        f"# Quarterly report\n\n{prose}\n\n## Checklist\n\n{items}\n\n"
        f"## Figures\n\n{table}\n\n```python\n{code}\n```\n\nThat's all 🎉."
    )
    return markdown, code


def test_a_long_answer_splits_into_well_formed_messages() -> None:
    markdown, code = _long_answer()
    assert len(markdown) >= 10_000
    assert len(code) >= 3_000

    chunks = telegram_chunks(markdown)

    assert len(chunks) >= 3
    python_blocks: list[str] = []
    for chunk in chunks:
        assert chunk.strip()
        assert utf16_units(chunk) <= TELEGRAM_LIMIT
        python_blocks += check_balanced(chunk).code.get("python", [])
    assert len(python_blocks) >= 1
    assert "\n".join(python_blocks) == code
    assert chunks[0].startswith("<b>Quarterly report</b>\n\nPoint 0 compares &lt;option 0&gt;")
    assert chunks[-1].endswith("That's all 🎉.")


def test_a_code_block_over_the_limit_is_reopened_with_its_language() -> None:
    code = "\n".join(f"print({i})" for i in range(1000))
    chunks = telegram_chunks(f"```python\n{code}\n```")
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.startswith('<pre><code class="language-python">')
        assert chunk.endswith("</code></pre>")
    assert "\n".join("\n".join(check_balanced(c).code["python"]) for c in chunks) == code


def test_a_small_limit_still_gives_balanced_chunks() -> None:
    markdown, _ = _long_answer()
    chunks = telegram_chunks(markdown, limit=300)
    assert len(chunks) > 30
    for chunk in chunks:
        assert utf16_units(chunk) <= 300
        check_balanced(chunk)


def test_a_block_that_cannot_be_split_by_structure_falls_back_to_escaped_text() -> None:
    # One table row wider than a message: no row boundary helps, so the table is sent as text.
    markdown = "| a |\n|---|\n| " + " ".join(["<x> & y"] * 40) + " |"
    chunks = telegram_chunks(markdown, limit=100)
    assert len(chunks) > 2
    for chunk in chunks:
        assert utf16_units(chunk) <= 100
        assert check_balanced(chunk).starts == 0
    assert " ".join(chunks).count("&lt;x&gt; &amp; y") == 40


# --- property-style -------------------------------------------------------------------------

_WORDS = [
    "word",
    "longerword",
    "a<b",
    "&",
    "**bold**",
    "*it*",
    "~~gone~~",
    "`x < y`",
    "[link](https://example.org/a?b=1&c=2)",
    "![pic](https://example.org/p.png)",
    "<span>",
    "😀",
    "日本語",
    "end.",
    "***both***",
    "**bold *nested* here**",
]


def _snippet(rng: random.Random, depth: int = 0) -> str:
    def text(most: int) -> str:
        return " ".join(rng.choices(_WORDS, k=rng.randint(1, most)))

    kind = rng.choice(["para", "lines", "heading", "list", "olist", "code", "quote", "table", "hr"])
    if kind == "para":
        return text(120)
    if kind == "lines":
        return "\n".join(text(15) for _ in range(rng.randint(2, 12)))
    if kind == "heading":
        return "#" * rng.randint(1, 6) + " " + text(12)
    if kind in ("list", "olist"):
        marker = "-" if kind == "list" else "1."
        items = []
        for _ in range(rng.randint(1, 12)):
            item = f"{marker} {text(40)}"
            if depth < 2 and rng.random() < 0.2:
                nested = _snippet(rng, depth + 1)
                item += "\n\n" + "\n".join("   " + line for line in nested.split("\n"))
            items.append(item)
        return "\n".join(items)
    if kind == "code":
        language = rng.choice(["", "python", "js"])
        lines = (
            "".join(rng.choices("ab<>&\"' 😀{}", k=rng.randint(0, 150)))
            for _ in range(rng.randint(1, 40))
        )
        return f"```{language}\n" + "\n".join(lines) + "\n```"
    if kind == "quote":
        inner = _snippet(rng, depth + 1) if depth < 2 else text(50)
        return "\n".join("> " + line for line in inner.split("\n"))
    if kind == "table":
        rows = "\n".join(f"| {text(3)} | {text(6)} | {i} |" for i in range(rng.randint(1, 25)))
        return f"| a | b | c |\n|---|:-:|--:|\n{rows}"
    return "---"


def test_random_answers_always_give_fitting_balanced_chunks() -> None:
    rng = random.Random(20240611)
    renderer = TelegramHtml()
    for _ in range(30):
        markdown = "\n\n".join(_snippet(rng) for _ in range(rng.randint(1, 5)))
        limit = rng.choice([64, 100, 250, 700, 2000, TELEGRAM_LIMIT])
        chunks = renderer.render_chunks(markdown, limit)
        assert chunks, markdown
        for chunk in chunks:
            assert chunk.strip(), markdown
            assert utf16_units(chunk) <= limit, (markdown, limit, chunk)
            check_balanced(chunk)
