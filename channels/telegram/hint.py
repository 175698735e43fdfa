"""What the model is told about formatting for Telegram."""

from __future__ import annotations

__all__ = ["PROMPT_HINT"]

PROMPT_HINT = (
    "You are answering in Telegram, usually read on a phone. Write Markdown: **bold**, "
    "_italic_, `inline code`, fenced code blocks with a language, [links](https://...). "
    "Telegram has no tables: use short lists instead. A message holds at most 4096 characters; "
    "longer answers are split, so prefer short answers."
)
