"""Delivery addresses as people type them (`<platform>:<chat>[:<thread>]`), per platform.

Core knows no platform: each channel describes its own grammar with an `AddressGrammar`, and
the wiring in `bots/` collects them into an `AddressBook` that parses and formats addresses for
the CLI and anything else that takes one from a person.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from core.envelopes import Address

__all__ = ["AddressBook", "AddressGrammar"]


@dataclass(frozen=True)
class AddressGrammar:
    """One platform's delivery addresses: `<platform>:<chat>[:<thread>]`, or the bare name.

    `chat` and `thread` are regular expressions a part must match whole; `thread=None` means
    the platform has no threads in addresses. `bare` is the address the platform's name alone
    stands for (a local channel with a single chat), or None when a chat must be given.
    `example` is a well-formed address shown when one is refused (`slack:C0123ABCD`).
    """

    platform: str
    usage: str
    chat: str | None = None
    thread: str | None = None
    bare: Address | None = None
    example: str = ""

    def parse(self, parts: list[str]) -> Address | None:
        """The address of `parts` (the text after `<platform>:`, split on `:`), or None."""
        if not parts:
            return self.bare
        if self.chat is None or len(parts) > (2 if self.thread is not None else 1):
            return None
        if not re.fullmatch(self.chat, parts[0]):
            return None
        thread = parts[1] if len(parts) == 2 else None
        if thread is not None and (self.thread is None or not re.fullmatch(self.thread, thread)):
            return None
        return Address(platform=self.platform, chat=parts[0], thread=thread)

    def format(self, address: Address) -> str:
        """How a person writes `address`: the bare name for the bare address."""
        if self.bare is not None and address == self.bare:
            return self.platform
        return str(address)


class AddressBook:
    """The grammars of every platform a bot serves, in the order they were registered."""

    def __init__(self, grammars: Iterable[AddressGrammar]) -> None:
        self._grammars = {grammar.platform: grammar for grammar in grammars}

    def usage(self) -> str:
        """Every accepted form, for help texts: `a:<chat>, b:<channel> or c`."""
        forms = [grammar.usage for grammar in self._grammars.values()]
        if len(forms) < 2:
            return "".join(forms)
        return f"{', '.join(forms[:-1])} or {forms[-1]}"

    def parse(self, text: str) -> Address:
        """The address `text` names; `ValueError` otherwise, with the form its platform expects
        (or every accepted form, for a platform nobody registered)."""
        platform, *parts = text.strip().split(":")
        grammar = self._grammars.get(platform.lower())
        if grammar is None:
            raise ValueError(f"{text!r} is not a delivery address; use {self.usage()}")
        found = grammar.parse(parts)
        if found is None:
            like = f" like {grammar.example}" if grammar.example else ""
            raise ValueError(
                f"{text!r} is not a {grammar.platform} address: expected {grammar.usage}{like}"
            )
        return found

    def format(self, address: Address) -> str:
        """How a person writes `address` (the generic form for a platform not registered)."""
        grammar = self._grammars.get(address.platform)
        return grammar.format(address) if grammar is not None else str(address)
