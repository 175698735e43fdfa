"""Markdown answers as Slack mrkdwn, split to fit a message; and Slack's markup as plain text.

Slack's mrkdwn knows `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks,
`> ` quotes and `<url|text>` links, and needs `&`, `<` and `>` escaped everywhere (nothing
else can be escaped). Everything else is laid out as text: headings as bold lines, lists as
"• " / "1. " lines, tables as a code block of aligned columns. Slack advises at most 4,000
characters of text per message; longer answers are split into several.

Slack only sees a marker at a word boundary (`foo*bar*` is not bold), so a marker next to a
letter or digit gets a zero-width space between them.
"""

from __future__ import annotations

import html
import re
from typing import ClassVar

from markdown_it.tree import SyntaxTreeNode

from channels.markdown import MarkdownRenderer, plain_text

__all__ = ["SLACK_LIMIT", "SlackMrkdwn", "mrkdwn_to_text", "slack_chunks", "to_mrkdwn"]

SLACK_LIMIT = 4000
"""The longest message text Switchboard sends, in characters (Slack's advice for `text`)."""

_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
_STYLED = frozenset({"strong", "em", "s", "code_inline"})
_MARKERS = frozenset("*_~`")
_ZWSP = "\u200b"


class SlackMrkdwn(MarkdownRenderer):
    """Renders Markdown as Slack mrkdwn (the `text` of `chat.postMessage`)."""

    limit: ClassVar[int] = SLACK_LIMIT

    def __init__(self) -> None:
        # Styles being rendered: Slack cannot nest a style in itself (`*a *b* c*`).
        self._open: list[str] = []

    def escape(self, text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def render_code(self, code: str, language: str) -> str:
        """A ```` ``` ```` block; Slack shows no language, so it is left out."""
        code = code.removesuffix("\n")
        if not code.strip():
            return ""
        # A fence inside the code would end the block early.
        return f"```\n{self.escape(code).replace('```', f'``{_ZWSP}`')}\n```"

    def render_children(self, node: SyntaxTreeNode, separator: str = "") -> str:
        """Inline parts are joined with a zero-width space where a style marker meets a word."""
        if separator or not any(child.type in _STYLED for child in node.children):
            return super().render_children(node, separator)
        out = ""
        closes_with_marker = False
        for child in node.children:
            part = self.render_node(child)
            if not part:
                continue
            styled = child.type in _STYLED
            opens_with_marker = styled and part[0] in _MARKERS
            if out and (
                (opens_with_marker and out[-1].isalnum())
                or (closes_with_marker and part[0].isalnum())
            ):
                out += _ZWSP
            out += part
            closes_with_marker = styled and part[-1] in _MARKERS
        return out

    def render_heading(self, node: SyntaxTreeNode) -> str:
        return self._style("*", node)

    def render_strong(self, node: SyntaxTreeNode) -> str:
        return self._style("*", node)

    def render_em(self, node: SyntaxTreeNode) -> str:
        return self._style("_", node)

    def render_s(self, node: SyntaxTreeNode) -> str:
        return self._style("~", node)

    def render_code_inline(self, node: SyntaxTreeNode) -> str:
        # mrkdwn has no escape for a backtick in code: a look-alike keeps the span whole.
        code = self.escape(node.content).replace("`", "\u02cb")
        return f"`{code}`" if code.strip() else code

    def render_link(self, node: SyntaxTreeNode) -> str:
        href = str(node.attrs.get("href", ""))
        if not _linkable(href):
            return super().render_link(node)
        text = self.render_children(node)
        if node.markup == "autolink" or not text.strip() or plain_text(node).strip() == href:
            return f"<{self._target(href)}>"
        return f"<{self._target(href)}|{text}>"

    def render_image(self, node: SyntaxTreeNode) -> str:
        """A link to the image, named by its alt text: a message cannot embed images."""
        src = str(node.attrs.get("src", ""))
        if not _linkable(src):
            return super().render_image(node)
        alt = plain_text(node).strip()
        return f"<{self._target(src)}|{self.escape(alt)}>" if alt else f"<{self._target(src)}>"

    def _style(self, marker: str, node: SyntaxTreeNode) -> str:
        if marker in self._open:
            return self.render_children(node)
        self._open.append(marker)
        try:
            inner = self.render_children(node)
        finally:
            self._open.pop()
        stripped = inner.strip()
        if not stripped:
            return inner
        # Slack ignores a marker next to a space inside it: `* bold*`.
        lead = inner[: len(inner) - len(inner.lstrip())]
        trail = inner[len(inner.rstrip()) :]
        return f"{lead}{marker}{stripped}{marker}{trail}"

    def _target(self, url: str) -> str:
        """A URL as the target part of `<url|text>`: `|` would end it."""
        return self.escape(url).replace("|", "%7C")


def _linkable(url: str) -> bool:
    scheme, colon, _ = url.partition(":")
    return bool(colon) and scheme.lower() in _LINK_SCHEMES


_RENDERER = SlackMrkdwn()


def to_mrkdwn(markdown: str) -> str:
    """Render Markdown as one mrkdwn string (which may exceed a message)."""
    return _RENDERER.render(markdown)


def slack_chunks(markdown: str, limit: int = SLACK_LIMIT) -> list[str]:
    """Render Markdown as mrkdwn messages of at most `limit` characters each."""
    return _RENDERER.render_chunks(markdown, limit)


# --- Slack's markup in what users write --------------------------------------------------

_ANGLED = re.compile(r"<([^<>]*)>")


def mrkdwn_to_text(text: str, *, drop_user: str | None = None) -> str:
    """A user's message as plain text: `<@U1>` as `@U1`, `<url|label>` as `label (url)`, …

    Mentions of `drop_user` (the bot itself) are removed with a space next to them.
    """
    if drop_user:
        text = re.sub(rf"[ \t]?<@{re.escape(drop_user)}(?:\|[^<>]*)?>[ \t]?", " ", text)

    def plain(match: re.Match[str]) -> str:
        target, _, label = match.group(1).partition("|")
        if target.startswith("@"):
            return f"@{label or target[1:]}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):  # <!here>, <!subteam^S1|@team>, <!date^…|fallback>
            return label or f"@{target[1:].split('^', 1)[0]}"
        address = target.removeprefix("mailto:")
        if label and label not in (target, address):
            return f"{label} ({target})"
        return address

    return html.unescape(_ANGLED.sub(plain, text)).strip()
