"""Markdown answers as Telegram Bot API HTML (`parse_mode="HTML"`), split to fit a message.

Telegram's HTML knows `<b> <i> <s> <code> <pre> <a> <blockquote>` and nothing else, and only
`&lt; &gt; &amp; &quot;` among named entities, so everything else is laid out as text: headings
as bold lines, lists as "• " / "1. " lines, tables as a `<pre>` block of aligned columns.
A message holds at most 4096 UTF-16 code units; chunks are measured with their tags, which
Telegram does not count, so they are a little shorter than they could be and never too long.
"""

from __future__ import annotations

from typing import ClassVar

from markdown_it.tree import SyntaxTreeNode

from channels.markdown import MarkdownRenderer, plain_text

__all__ = ["TELEGRAM_LIMIT", "TelegramHtml", "telegram_chunks", "to_telegram_html"]

TELEGRAM_LIMIT = 4096
"""The longest message text the Bot API accepts, in UTF-16 code units."""

_LINK_SCHEMES = frozenset({"http", "https", "tg", "mailto"})


class TelegramHtml(MarkdownRenderer):
    """Renders Markdown as the HTML subset Telegram's `parse_mode="HTML"` accepts."""

    limit: ClassVar[int] = TELEGRAM_LIMIT

    def measure(self, text: str) -> int:
        """Telegram counts UTF-16 code units: characters beyond the BMP (emoji) count two."""
        return len(text.encode("utf-16-le")) // 2

    def escape(self, text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def escape_attribute(self, value: str) -> str:
        """Make a value safe inside a double-quoted attribute."""
        return self.escape(value).replace('"', "&quot;")

    def render_code(self, code: str, language: str) -> str:
        code = code.removesuffix("\n")
        if not code.strip():
            return ""
        if language:
            language = self.escape_attribute(language)
            return f'<pre><code class="language-{language}">{self.escape(code)}</code></pre>'
        return f"<pre>{self.escape(code)}</pre>"

    def render_heading(self, node: SyntaxTreeNode) -> str:
        text = self.render_children(node)
        return f"<b>{text}</b>" if text.strip() else ""

    def render_blockquote(self, node: SyntaxTreeNode) -> str:
        inner = self.render_children(node, self.block_separator)
        if not inner or _inside(node, "blockquote"):
            return inner  # Telegram cannot nest quotes; the outer quote holds this text
        return f"<blockquote>{inner}</blockquote>"

    def render_strong(self, node: SyntaxTreeNode) -> str:
        return f"<b>{self.render_children(node)}</b>"

    def render_em(self, node: SyntaxTreeNode) -> str:
        return f"<i>{self.render_children(node)}</i>"

    def render_s(self, node: SyntaxTreeNode) -> str:
        return f"<s>{self.render_children(node)}</s>"

    def render_code_inline(self, node: SyntaxTreeNode) -> str:
        return f"<code>{self.escape(node.content)}</code>"

    def render_link(self, node: SyntaxTreeNode) -> str:
        href = str(node.attrs.get("href", ""))
        if not _linkable(href):
            return super().render_link(node)
        text = self.render_children(node)
        if not text.strip():
            text = self.escape(href)
        return f'<a href="{self.escape_attribute(href)}">{text}</a>'

    def render_image(self, node: SyntaxTreeNode) -> str:
        """A link to the image, named by its alt text: a message cannot embed images."""
        src = str(node.attrs.get("src", ""))
        if not _linkable(src):
            return super().render_image(node)
        alt = plain_text(node).strip()
        return f'<a href="{self.escape_attribute(src)}">{self.escape(alt or src)}</a>'


_RENDERER = TelegramHtml()


def to_telegram_html(markdown: str) -> str:
    """Render Markdown as one Telegram HTML string (which may exceed a message)."""
    return _RENDERER.render(markdown)


def telegram_chunks(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Render Markdown as Telegram HTML messages of at most `limit` UTF-16 units each."""
    return _RENDERER.render_chunks(markdown, limit)


def _linkable(url: str) -> bool:
    """Whether Telegram will take `url` as a link target (anything else is shown as text)."""
    scheme, colon, _ = url.partition(":")
    return bool(colon) and scheme.lower() in _LINK_SCHEMES


def _inside(node: SyntaxTreeNode, node_type: str) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type == node_type:
            return True
        parent = parent.parent
    return False
