"""Addresses in core: the generic `<platform>:<chat>[:<thread>]` form and grammars passed in."""

from __future__ import annotations

import pytest

from core.addresses import AddressBook, AddressGrammar
from core.envelopes import Address

LOCAL = Address(platform="desk", bot="me", chat="any")
BOOK = AddressBook(
    [
        AddressGrammar(platform="pager", usage="pager:<number>", chat=r"\d+"),
        AddressGrammar(
            platform="forum", usage="forum:<board>[:<topic>]", chat=r"\w+", thread=r"\d+"
        ),
        AddressGrammar(platform="desk", usage="desk", bare=LOCAL),
    ]
)


def test_the_generic_form_round_trips() -> None:
    address = Address.parse("Forum:general:12")
    assert address == Address(platform="forum", chat="general", thread="12")
    assert str(address) == "forum:general:12"
    assert str(Address.parse("pager:42")) == "pager:42"


@pytest.mark.parametrize("text", ["", "pager", ":42", "pager:", "a:b:c:d"])
def test_the_generic_form_needs_a_platform_and_a_chat(text: str) -> None:
    with pytest.raises(ValueError, match="<platform>:<chat>"):
        Address.parse(text)


def test_grammars_decide_what_each_platform_accepts() -> None:
    assert BOOK.parse("pager:42") == Address(platform="pager", chat="42")
    assert BOOK.parse("forum:news:7") == Address(platform="forum", chat="news", thread="7")
    assert BOOK.parse("desk") == LOCAL
    assert BOOK.format(LOCAL) == "desk"
    assert BOOK.format(Address(platform="elsewhere", chat="x")) == "elsewhere:x"
    assert BOOK.usage() == "pager:<number>, forum:<board>[:<topic>] or desk"


def test_an_unknown_platform_is_refused_with_every_accepted_form() -> None:
    with pytest.raises(ValueError, match=r"use pager:<number>, forum:<board>\[:<topic>\] or desk"):
        BOOK.parse("irc:1")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pager:x", "pager:<number>"),
        ("pager:1:2", "pager:<number>"),
        ("forum:news:x", r"forum:<board>\[:<topic>\]"),
        ("desk:1", "desk"),
    ],
)
def test_a_known_platform_says_the_form_it_expects(text: str, expected: str) -> None:
    with pytest.raises(ValueError, match=rf"is not a \w+ address: expected {expected}$"):
        BOOK.parse(text)


def test_the_example_is_shown_when_the_grammar_has_one() -> None:
    book = AddressBook(
        [AddressGrammar(platform="chan", usage="chan:<id>", chat=r"C\d+", example="chan:C42")]
    )
    with pytest.raises(ValueError) as raised:
        book.parse("chan:general")
    assert str(raised.value) == (
        "'chan:general' is not a chan address: expected chan:<id> like chan:C42"
    )
