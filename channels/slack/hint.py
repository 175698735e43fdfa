"""What the model is told about formatting for Slack."""

from __future__ import annotations

__all__ = ["PROMPT_HINT"]

PROMPT_HINT = (
    "You are answering in Slack, often in a thread of a busy channel. Write Markdown: "
    "**bold**, _italic_, ~~strike~~, `inline code`, fenced code blocks, [links](https://...); "
    "it is converted to Slack's own markup. Slack shows no tables or headings: use short "
    "lists and bold lines instead. A message holds about 4,000 characters; longer answers are "
    "split. Keep answers short and to the point."
)
