"""The model's Markdown as HTML that cannot carry markup of its own.

markdown-it-py with raw HTML disabled escapes every `<` the model writes, and its link check
refuses `javascript:` and other unsafe schemes, so what reaches the page's `innerHTML` holds
only the tags the renderer itself produces.
"""

from __future__ import annotations

from markdown_it import MarkdownIt

__all__ = ["to_html"]

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def to_html(text: str) -> str:
    """Safe HTML of `text` (Markdown)."""
    html: str = _MARKDOWN.render(text)
    return html
