"""Markdown as Slack mrkdwn, its split into messages, and Slack's markup read back as text."""

from __future__ import annotations

import random
import re

import pytest

from channels.slack.format import (
    SLACK_LIMIT,
    SlackMrkdwn,
    mrkdwn_to_text,
    slack_chunks,
    to_mrkdwn,
)

ZWSP = "\u200b"
_FENCED = re.compile(r"```\n(.*?)\n```", re.DOTALL)


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


# --- each construct -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("plain text", "plain text"),
        ("**bold**", "*bold*"),
        ("__bold__", "*bold*"),
        ("*italic*", "_italic_"),
        ("_italic_", "_italic_"),
        ("~~struck~~", "~struck~"),
        ("`a < b`", "`a &lt; b`"),
        ("# Heading", "*Heading*"),
        ("### Heading *three*", "*Heading _three_*"),
        ("## **Already bold**", "*Already bold*"),
        ("- one\n- two", "• one\n• two"),
        ("1. one\n2. two", "1. one\n2. two"),
        ("7. seven\n8. eight", "7. seven\n8. eight"),
        ("- a\n  - b\n    1. c\n- d", "• a\n  • b\n    1. c\n• d"),
        ("> quoted **text**", "> quoted *text*"),
        ("```\nplain()\n```", "```\nplain()\n```"),
        ("    indented()", "```\nindented()\n```"),
        (
            "```python\nif a < b and c > d:\n    f('&')\n```",
            "```\nif a &lt; b and c &gt; d:\n    f('&amp;')\n```",
        ),
        ("---", "———"),
        ("[docs](https://x.org/d)", "<https://x.org/d|docs>"),
        ("<https://x.org/d>", "<https://x.org/d>"),
        ("[https://x.org](https://x.org)", "<https://x.org>"),
        ("<me@x.org>", "<mailto:me@x.org>"),
        ("[q](https://x.org/?a=1&b=2)", "<https://x.org/?a=1&amp;b=2|q>"),
        ("[a|b](https://x.org/p|q)", "<https://x.org/p%7Cq|a|b>"),
        ("[**b** *i*](https://x.org)", "<https://x.org|*b* _i_>"),
        ("[](https://x.org)", "<https://x.org>"),
        ("[ftp](ftp://x.org/f)", "ftp (ftp://x.org/f)"),
        ("[rel](/path?a&b)", "rel (/path?a&amp;b)"),
        ("![a cat](https://x.org/c.png)", "<https://x.org/c.png|a cat>"),
        ("![a *cat*](cat.png)", "a cat (cat.png)"),
        ("one\ntwo  \nthree", "one\ntwo\nthree"),
        ("a\n\n\nb", "a\n\nb"),
    ],
)
def test_construct_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_a_table_becomes_a_code_block_of_aligned_columns() -> None:
    markdown = "| Name | Qty |\n|:--|--:|\n| apple & pear | 3 |\n| <kiwi> | 12 |"
    assert to_mrkdwn(markdown) == (
        "```\n"
        "Name         | Qty\n"
        "-------------+----\n"
        "apple &amp; pear |   3\n"
        "&lt;kiwi&gt;       |  12\n"
        "```"
    )


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("***both***", "_*both*_"),
        ("**bold *italic* bold**", "*bold _italic_ bold*"),
        ("*it **bold ~~gone~~** it*", "_it *bold ~gone~* it_"),
        ("**outer **inner** outer**", "*outer inner outer*"),
        ("- **a *b***", "• *a _b_*"),
    ],
)
def test_nested_styles(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("un**believ**able", f"un{ZWSP}*believ*{ZWSP}able"),
        ("**Note**read this", f"*Note*{ZWSP}read this"),
        ("see `x`s", f"see `x`{ZWSP}s"),
        ("a **b** c", "a *b* c"),
        ("(**b**)", "(*b*)"),
    ],
)
def test_a_marker_next_to_a_word_gets_a_zero_width_space(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


# --- escaping -------------------------------------------------------------------------------


def test_only_ampersand_and_angle_brackets_are_escaped() -> None:
    text = to_mrkdwn('Use <script>alert("x")</script> & "quotes" > less, it\'s *fine*')
    assert text == (
        'Use &lt;script&gt;alert("x")&lt;/script&gt; &amp; "quotes" &gt; less, it\'s _fine_'
    )


def test_slack_mentions_written_by_the_model_stay_text() -> None:
    assert to_mrkdwn("ping <!channel> and <@U123>") == "ping &lt;!channel&gt; and &lt;@U123&gt;"


def test_code_cannot_end_its_block_or_span_early() -> None:
    assert to_mrkdwn("````\na ``` b\n````") == f"```\na ``{ZWSP}` b\n```"
    assert to_mrkdwn("`` a`b ``") == "`a\u02cbb`"


def test_javascript_links_never_become_links() -> None:
    assert "<" not in to_mrkdwn("[x](javascript:alert(1)) [y](data:text/html,hi)")


# --- splitting ------------------------------------------------------------------------------


def test_short_answer_is_one_chunk() -> None:
    assert slack_chunks("Hi **there**") == ["Hi *there*"]
    assert slack_chunks(" \n ") == []


def _long_answer() -> tuple[str, str]:
    prose = " ".join(
        f"Point {i} compares <option {i}> & its cost, which matters." for i in range(70)
    )
    code = "\n".join(f"print({i} < {i + 1} and 'x' & 'y')" for i in range(150))
    markdown = f"{prose}\n\n```python\n{code}\n```\n\n" + "\n".join(
        f"- item **{i}** with [a link](https://example.org/{i})" for i in range(80)
    )
    return markdown, code


def test_a_long_answer_is_split_within_the_limit_with_code_blocks_closed() -> None:
    markdown, code = _long_answer()
    assert len(markdown) > 2 * SLACK_LIMIT
    chunks = slack_chunks(markdown)
    assert len(chunks) >= 3
    assert all(len(chunk) <= SLACK_LIMIT for chunk in chunks)
    assert all(chunk.count("```") % 2 == 0 for chunk in chunks)
    inside = [unescape(block) for chunk in chunks for block in _FENCED.findall(chunk)]
    assert "\n".join(inside) == code
    assert chunks[-1].endswith("• item *79* with <https://example.org/79|a link>")


def test_a_huge_code_block_is_cut_between_lines_and_reopened() -> None:
    code = "\n".join(f"line {i:04d} = {'x' * 60}" for i in range(200))
    chunks = slack_chunks(f"```\n{code}\n```", limit=1000)
    assert len(chunks) > 10
    assert all(len(chunk) <= 1000 for chunk in chunks)
    assert all(chunk.startswith("```\n") and chunk.endswith("\n```") for chunk in chunks)
    assert "\n".join(_FENCED.findall("".join(chunks))) == code


def test_random_markdown_always_fits() -> None:
    pieces = ["word", "**bold**", "`code`", "[l](https://x.org)", "<&>", "\n\n", "\n- item "]
    rng = random.Random(7)
    for _ in range(30):
        markdown = " ".join(rng.choice(pieces) for _ in range(rng.randint(50, 400)))
        limit = rng.randint(40, 400)
        chunks = SlackMrkdwn().render_chunks(markdown, limit)
        assert all(len(chunk) <= limit for chunk in chunks)


# --- what users write -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mrkdwn", "text"),
    [
        ("<@U0BOT> what is 6*7?", "what is 6*7?"),
        ("hey <@U0BOT> how are you", "hey how are you"),
        ("ask <@U0ALICE> or <@U0BOB|bob>", "ask @U0ALICE or @bob"),
        ("see <#C0GENERAL|general> and <#C0RANDOM>", "see #general and #C0RANDOM"),
        ("<!here> <!channel> <!subteam^S1|@devs>", "@here @channel @devs"),
        ("<!date^1392734382^{date}|Feb 18th>", "Feb 18th"),
        (
            "<https://x.org|the docs> <https://y.org> <https://z.org|https://z.org>",
            "the docs (https://x.org) https://y.org https://z.org",
        ),
        ("<mailto:a@x.org|a@x.org>", "a@x.org"),
        ("a &lt; b &amp;&amp; c &gt; d", "a < b && c > d"),
        ("  code:\n    indented", "code:\n    indented"),
    ],
)
def test_mrkdwn_to_text(mrkdwn: str, text: str) -> None:
    assert mrkdwn_to_text(mrkdwn, drop_user="U0BOT") == text
