"""What the model is told about formatting for Discord."""

from __future__ import annotations

__all__ = ["PROMPT_HINT"]

PROMPT_HINT = (
    "You are answering in Discord. Write Discord markdown: **bold**, *italic*, ~~strike~~, "
    "`inline code`, fenced code blocks with a language, > quotes, [links](https://...). "
    "Discord shows no tables: use lists or a code block. A message holds at most 2,000 "
    "characters; longer answers are split, so prefer short answers. Never try to ping "
    "@everyone, @here or roles."
)
