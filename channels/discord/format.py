"""Markdown answers as Discord markdown, split into messages of at most 2,000 characters.

Discord shows a markdown dialect of its own: `**bold**`, `*italic*`, `~~strike~~`, `` `code` ``,
fenced code blocks with a language, `> ` quotes, `- ` lists and `[text](url)` links, but no
tables (they become code blocks of aligned columns) and no images (they become links).
Headings are shown as bold lines: Discord's own `#` headings are too loud for a chat answer.

Literal text is backslash-escaped wherever Discord would read markup into it, except inside
bare URLs, which Discord links as they are. Pings are not this module's business: mentions
such as `@everyone` stay as written and the adapter's `allowed_mentions` keeps them silent.
"""

from __future__ import annotations

import re
from typing import ClassVar

from markdown_it.tree import SyntaxTreeNode

from channels.markdown import MarkdownRenderer, plain_text

__all__ = ["DISCORD_LIMIT", "DiscordMarkdown", "discord_chunks", "to_discord_markdown"]

DISCORD_LIMIT = 2000
"""The longest message content Discord accepts."""

# Characters Discord reads as markup anywhere in a line (`|` for `||spoilers||`); Discord hides
# the backslash before them.
_MARKUP = re.compile(r"([\\*_~`|])")
# Markup only at a line's start: `>` quotes, `#` headings, `-# ` small text. Elsewhere they stay
# as they are, so `<@id>` mentions and `<t:...>` timestamps keep working.
_LINE_START = re.compile(r"^(\s*)([>#-])")
_BARE_URL = re.compile(r"https?://[^\s<>]+")
# A fence inside a code block would end it early; a zero-width space keeps the backticks apart.
_FENCE_RUN = re.compile(r"`{3,}")
_ZWSP = "\u200b"
_LINK_SCHEMES = frozenset({"http", "https"})


class DiscordMarkdown(MarkdownRenderer):
    """Renders Markdown as the markdown Discord shows in messages."""

    limit: ClassVar[int] = DISCORD_LIMIT
    bullet: ClassVar[str] = "-"

    def measure(self, text: str) -> int:
        """Counted in UTF-16 code units, as Discord's client does: emoji count two."""
        return len(text.encode("utf-16-le")) // 2

    def escape(self, text: str) -> str:
        """Backslash before each markup character, outside bare URLs."""
        out: list[str] = []
        start = 0
        for match in _BARE_URL.finditer(text):
            out.append(_MARKUP.sub(r"\\\1", text[start : match.start()]))
            out.append(match.group())
            start = match.end()
        out.append(_MARKUP.sub(r"\\\1", text[start:]))
        return _LINE_START.sub(r"\1\\\2", "".join(out))

    def render_code(self, code: str, language: str) -> str:
        code = code.removesuffix("\n")
        if not code.strip():
            return ""
        code = _FENCE_RUN.sub(lambda run: _ZWSP.join(run.group()), code)
        language = language if re.fullmatch(r"[\w+#.-]+", language) else ""
        return f"```{language}\n{code}\n```"

    def render_heading(self, node: SyntaxTreeNode) -> str:
        text = self.render_children(node)
        return f"**{text}**" if text.strip() else ""

    def render_strong(self, node: SyntaxTreeNode) -> str:
        return _wrap("**", self.render_children(node))

    def render_em(self, node: SyntaxTreeNode) -> str:
        return _wrap("*", self.render_children(node))

    def render_s(self, node: SyntaxTreeNode) -> str:
        return _wrap("~~", self.render_children(node))

    def render_code_inline(self, node: SyntaxTreeNode) -> str:
        code = node.content
        if not code.strip():
            return self.escape(code)
        if "`" not in code:
            return f"`{code}`"
        # Double backticks hold single ones; longer runs are broken up so none closes early.
        code = re.sub(r"`{2,}", lambda run: _ZWSP.join(run.group()), code)
        return f"`` {code} ``"

    def render_blockquote(self, node: SyntaxTreeNode) -> str:
        inner = self.render_children(node, self.block_separator)
        if not inner:
            return ""
        if node.parent is not None and node.parent.type == "blockquote":
            return inner  # Discord cannot nest quotes; the outer quote holds this text
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))

    def render_link(self, node: SyntaxTreeNode) -> str:
        href = str(node.attrs.get("href", ""))
        if not _linkable(href):
            return super().render_link(node)
        text = self.render_children(node)
        if not text.strip() or node.markup == "autolink" or plain_text(node).strip() == href:
            return _url(href)
        return f"[{text}]({_url(href)})"

    def render_image(self, node: SyntaxTreeNode) -> str:
        """A link to the image, named by its alt text: a message cannot embed images inline."""
        src = str(node.attrs.get("src", ""))
        if not _linkable(src):
            return super().render_image(node)
        alt = plain_text(node).strip()
        return f"[{self.escape(alt)}]({_url(src)})" if alt else _url(src)


_RENDERER = DiscordMarkdown()


def to_discord_markdown(markdown: str) -> str:
    """Render Markdown as one Discord message text (which may exceed a message)."""
    return _RENDERER.render(markdown)


def discord_chunks(markdown: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Render Markdown as Discord messages of at most `limit` characters each.

    A code block cut between two messages is closed at the end of the first and opened again,
    with its language, at the start of the next.
    """
    return _RENDERER.render_chunks(markdown, limit)


def _wrap(marker: str, inner: str) -> str:
    """`inner` between markers, unless it is blank (Discord would show the bare markers)."""
    return f"{marker}{inner}{marker}" if inner.strip() else inner


def _linkable(url: str) -> bool:
    scheme, colon, _ = url.partition(":")
    return bool(colon) and scheme.lower() in _LINK_SCHEMES


def _url(url: str) -> str:
    """A URL safe inside `(...)` and on its own: no spaces or parentheses to end it early."""
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
