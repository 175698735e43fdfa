"""Markdown answers shown in a platform's own markup, split into messages that fit.

Models write CommonMark (plus tables and strikethrough); each platform shows a dialect of its
own. `MarkdownRenderer` parses the answer with markdown-it-py and walks the syntax tree with one
`render_<node type>` method per node, so a platform subclass overrides only what it shows
differently. The base class renders plain text.

`render_chunks` splits an answer into messages of at most `limit` units (as `measure` counts
them). It never cuts rendered output: it cuts the Markdown tree (top-level blocks, then list
items, code lines, paragraph lines, sentences, words, characters) and renders every piece on
its own, so each message is well-formed markup with every code block closed and re-opened.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from itertools import chain
from typing import Any, ClassVar, TypeVar

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

__all__ = ["MarkdownRenderer", "list_start", "plain_text", "split_plain", "table_text"]

_T = TypeVar("_T")

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])

# Boundaries to cut text at, coarsest first. Each pattern matches the separator that ends a
# piece; the separator stays with the piece before it, so the pieces concatenate to the text.
_PARAGRAPHS = re.compile(r"\n(?:[ \t]*\n)+")
_LINES = re.compile(r"\n")
_SENTENCES = re.compile(r"[.!?…][\"')\]]*[ \t]+")
_WORDS = re.compile(r"\s+")

_INLINE_LEVELS = (_LINES, _SENTENCES, _WORDS)
_CODE_LEVELS = (_LINES,)
_PLAIN_LEVELS = (_PARAGRAPHS, _LINES, _SENTENCES, _WORDS)


class _Unsplittable(Exception):
    """A piece of structure that cannot be made to fit; the caller falls back to plain text."""


class MarkdownRenderer:
    """Renders Markdown as plain text; platform subclasses override the nodes they style.

    Every `render_<type>` method takes a `SyntaxTreeNode` and returns the platform's text for
    it. Block methods return their block without surrounding blank lines; `render_children`
    joins them. Text from the Markdown always passes through `escape`, so a subclass that
    emits markup only has to make `escape` neutralise its markup characters. `escape` must
    work character by character (escaping a string equals joining its escaped parts).
    """

    limit: ClassVar[int] = 4000
    """The largest message the platform accepts, in `measure` units."""
    bullet: ClassVar[str] = "•"
    hr_line: ClassVar[str] = "———"
    block_separator: ClassVar[str] = "\n\n"

    # --- entry points -----------------------------------------------------------------------

    def render(self, markdown: str) -> str:
        """Render a whole Markdown document as one string."""
        root = SyntaxTreeNode(_MD.parse(markdown))
        return self.render_children(root, self.block_separator)

    def render_chunks(self, markdown: str, limit: int | None = None) -> list[str]:
        """Render `markdown` as messages of at most `limit` units each (default `self.limit`).

        Top-level blocks are packed into as few messages as fit, a blank line between two
        blocks; a block too big for one message is split along its structure. Returns [] for
        blank input. Raises `ValueError` if `limit` cannot hold even a single character.
        """
        limit = self.limit if limit is None else limit
        if limit < 1:
            raise ValueError(f"limit must be positive, got {limit}")
        env: MutableMapping[str, Any] = {}
        root = SyntaxTreeNode(_MD.parse(markdown, env))

        def fits(node: SyntaxTreeNode) -> bool:
            return self.measure(self.render_node(node)) <= limit

        splitter = _Splitter(env, fits)
        blocks: list[tuple[str, str]] = []  # (separator before it, rendered block)
        for node in root.children:
            try:
                pieces = [self.render_node(piece) for piece in splitter.split(node)]
            except _Unsplittable:
                pieces = self._plain_pieces(node, limit)
            # Pieces of one list that land in one chunk read as one list again.
            joiner = "\n" if node.type in ("bullet_list", "ordered_list") else self.block_separator
            pieces = [piece for piece in pieces if piece.strip()]
            blocks.extend(
                (self.block_separator if index == 0 else joiner, piece)
                for index, piece in enumerate(pieces)
            )
        return _pack_rendered(blocks, limit, self.measure)

    # --- platform hooks ---------------------------------------------------------------------

    def measure(self, text: str) -> int:
        """The length of `text` as the platform counts it against `limit`."""
        return len(text)

    def escape(self, text: str) -> str:
        """Make literal text safe to embed in the platform's markup."""
        return text

    def render_code(self, code: str, language: str) -> str:
        """A preformatted block (fenced or indented code, tables); `language` may be ""."""
        code = code.removesuffix("\n")
        return self.escape(code) if code.strip() else ""

    # --- tree walking -----------------------------------------------------------------------

    def render_node(self, node: SyntaxTreeNode) -> str:
        """Render one node with its `render_<type>` method."""
        method: Callable[[SyntaxTreeNode], str] | None = getattr(self, f"render_{node.type}", None)
        if method is None:
            return self.render_unknown(node)
        return method(node)

    def render_children(self, node: SyntaxTreeNode, separator: str = "") -> str:
        """Render `node`'s children and join the non-empty results with `separator`."""
        rendered = (self.render_node(child) for child in node.children)
        return separator.join(part for part in rendered if part)

    def render_unknown(self, node: SyntaxTreeNode) -> str:
        """A node type this renderer has no method for: its children, or its text."""
        if node.children:
            return self.render_children(node, "" if _is_inline(node) else self.block_separator)
        return self.escape(node.content)

    # --- blocks -----------------------------------------------------------------------------

    def render_paragraph(self, node: SyntaxTreeNode) -> str:
        """A paragraph: its inline content."""
        return self.render_children(node)

    def render_heading(self, node: SyntaxTreeNode) -> str:
        """A heading of any level: its text, on a line of its own."""
        return self.render_children(node)

    def render_bullet_list(self, node: SyntaxTreeNode) -> str:
        """One line per item, each after `bullet`."""
        items = (self.render_list_item(item, f"{self.bullet} ") for item in node.children)
        return "\n".join(items)

    def render_ordered_list(self, node: SyntaxTreeNode) -> str:
        """One line per item, numbered from the list's first number."""
        start = list_start(node)
        items = (
            self.render_list_item(item, f"{start + index}. ")
            for index, item in enumerate(node.children)
        )
        return "\n".join(items)

    def render_list_item(self, node: SyntaxTreeNode, marker: str | None = None) -> str:
        """One item: `marker` before its first line, its other lines indented to match."""
        marker = f"{self.bullet} " if marker is None else marker
        lines = self.render_children(node, "\n").split("\n")
        pad = " " * len(marker)
        rest = (pad + line if line.strip() else line for line in lines[1:])
        return "\n".join([(marker + lines[0]).rstrip(), *rest])

    def render_blockquote(self, node: SyntaxTreeNode) -> str:
        """Quoted blocks, every line after "> "."""
        inner = self.render_children(node, self.block_separator)
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))

    def render_fence(self, node: SyntaxTreeNode) -> str:
        """A fenced code block, via `render_code` with the info string's first word."""
        language = node.info.strip().split(maxsplit=1)[0] if node.info.strip() else ""
        return self.render_code(node.content, language)

    def render_code_block(self, node: SyntaxTreeNode) -> str:
        """An indented code block, via `render_code`."""
        return self.render_code(node.content, "")

    def render_hr(self, node: SyntaxTreeNode) -> str:
        """A thematic break, as `hr_line`."""
        return self.hr_line

    def render_table(self, node: SyntaxTreeNode) -> str:
        """Tables become aligned monospace text: no chat platform shows Markdown tables."""
        return self.render_code(table_text(node), "")

    def render_html_block(self, node: SyntaxTreeNode) -> str:
        """Raw HTML is shown as text, escaped, never passed through."""
        return self.escape(node.content.rstrip("\n"))

    # --- inline -----------------------------------------------------------------------------

    def render_inline(self, node: SyntaxTreeNode) -> str:
        """The inline content of a paragraph, heading or table cell."""
        return self.render_children(node)

    def render_text(self, node: SyntaxTreeNode) -> str:
        """Literal text, escaped."""
        return self.escape(node.content)

    def render_softbreak(self, node: SyntaxTreeNode) -> str:
        """A newline in a paragraph stays a newline: chat answers are laid out line by line."""
        return "\n"

    def render_hardbreak(self, node: SyntaxTreeNode) -> str:
        """A forced line break."""
        return "\n"

    def render_strong(self, node: SyntaxTreeNode) -> str:
        """Strong emphasis (`**bold**`)."""
        return self.render_children(node)

    def render_em(self, node: SyntaxTreeNode) -> str:
        """Emphasis (`*italic*`)."""
        return self.render_children(node)

    def render_s(self, node: SyntaxTreeNode) -> str:
        """Strikethrough (`~~gone~~`)."""
        return self.render_children(node)

    def render_code_inline(self, node: SyntaxTreeNode) -> str:
        """A code span."""
        return self.escape(node.content)

    def render_link(self, node: SyntaxTreeNode) -> str:
        """`text (url)`, or just the URL when the text is the URL."""
        href = str(node.attrs.get("href", ""))
        text = self.render_children(node)
        if not text.strip():
            return self.escape(href)
        if node.markup == "autolink" or _same_target(plain_text(node), href):
            return text
        return f"{text} ({self.escape(href)})"

    def render_image(self, node: SyntaxTreeNode) -> str:
        """`alt (url)`: chat messages cannot embed images inline."""
        src = str(node.attrs.get("src", ""))
        alt = plain_text(node)
        return self.escape(f"{alt} ({src})" if alt.strip() else src)

    def render_html_inline(self, node: SyntaxTreeNode) -> str:
        """Raw HTML is shown as text, escaped: a platform could take it for its own markup."""
        return self.escape(node.content)

    # --- fallback ---------------------------------------------------------------------------

    def _plain_pieces(self, node: SyntaxTreeNode, limit: int) -> list[str]:
        """A block with no fitting structure, as escaped plain text cut at text boundaries."""
        text = _PLAIN.render_node(node)
        pieces = split_plain(text, limit, lambda piece: self.measure(self.escape(piece)))
        return [self.escape(piece) for piece in pieces]


_PLAIN = MarkdownRenderer()


def plain_text(node: SyntaxTreeNode) -> str:
    """The text of a node's children without any markup (links as `text (url)`)."""
    return _PLAIN.render_children(node)


def list_start(node: SyntaxTreeNode) -> int:
    """The number of an ordered list's first item."""
    try:
        return int(str(node.attrs.get("start", 1)))
    except ValueError:
        return 1


def table_text(node: SyntaxTreeNode) -> str:
    """A Markdown table as lines of space-padded columns under a ruled header."""
    sections = {section.type: section.children for section in node.children}
    head, body = sections.get("thead", []), sections.get("tbody", [])
    rows = [
        [plain_text(cell).replace("\n", " ").strip() for cell in row.children]
        for row in head + body
    ]
    if not rows:
        return ""
    columns = max(len(row) for row in rows)
    rows = [row + [""] * (columns - len(row)) for row in rows]
    aligns = [_cell_align(cell) for cell in head[0].children] if head else []
    aligns += ["left"] * (columns - len(aligns))
    widths = [max(_width(row[col]) for row in rows) for col in range(columns)]

    def line(row: list[str]) -> str:
        cells = (
            _pad(text, width, align) for text, width, align in zip(row, widths, aligns, strict=True)
        )
        return " | ".join(cells).rstrip()

    lines = [line(row) for row in rows]
    if head:
        lines.insert(len(head), "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def split_plain(text: str, limit: int, measure: Callable[[str], int] = len) -> list[str]:
    """Cut plain text into pieces of at most `limit` units (as `measure` counts them).

    Cuts between paragraphs if it can, else between lines, sentences, words, and as a last
    resort between characters. Whitespace at the cuts is dropped; no piece is blank.
    """
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")

    def fits(piece: str) -> bool:
        return measure(piece) <= limit

    def clean(piece: str) -> str:
        return piece.rstrip().lstrip("\n")

    try:
        return _split_text(text, fits, _PLAIN_LEVELS, clean)
    except _Unsplittable:
        raise ValueError(f"limit {limit} cannot hold a single character") from None


# --- splitting ------------------------------------------------------------------------------


class _Splitter:
    """Cuts one top-level block into pieces that each satisfy `fits` once rendered.

    Pieces are syntax-tree nodes, so containers can re-wrap a piece of a child (a blockquote
    around part of its paragraph, a list around part of an item) and check the wrapped
    result: the `fits` predicate a child is split against is its parent's, composed.
    """

    def __init__(
        self, env: MutableMapping[str, Any], fits: Callable[[SyntaxTreeNode], bool]
    ) -> None:
        self._env = env  # the document's link reference definitions, for re-parsed pieces
        self._fits = fits

    def split(self, node: SyntaxTreeNode) -> list[SyntaxTreeNode]:
        """`node` itself if it fits, else pieces of it that do."""
        return self._split(node, self._fits)

    def _split(
        self, node: SyntaxTreeNode, fits: Callable[[SyntaxTreeNode], bool]
    ) -> list[SyntaxTreeNode]:
        if fits(node):
            return [node]
        match node.type:
            case "fence" | "code_block":
                return self._split_content(node, fits, _CODE_LEVELS, _keep)
            case "html_block":
                return self._split_content(node, fits, _INLINE_LEVELS, str.strip)
            case "paragraph" | "heading":
                return self._split_inline(node, fits)
            case "bullet_list" | "ordered_list":
                start = list_start(node)
                return self._split_container(
                    node.children,
                    fits,
                    lambda items, offset: _with_list_items(node, items, start + offset),
                )
            case "list_item" | "blockquote":
                return self._split_container(
                    node.children, fits, lambda children, _: _with_children(node, children)
                )
            case "table":
                return self._split_table(node, fits)
            case _:
                raise _Unsplittable(node.type)

    def _split_content(
        self,
        node: SyntaxTreeNode,
        fits: Callable[[SyntaxTreeNode], bool],
        levels: Sequence[re.Pattern[str]],
        clean: Callable[[str], str],
    ) -> list[SyntaxTreeNode]:
        """A leaf block (code, raw HTML) cut into copies holding parts of its text."""
        pieces = _split_text(
            node.content, lambda text: fits(_with_content(node, text)), levels, clean
        )
        return [_with_content(node, piece) for piece in pieces]

    def _split_inline(
        self, node: SyntaxTreeNode, fits: Callable[[SyntaxTreeNode], bool]
    ) -> list[SyntaxTreeNode]:
        """A paragraph or heading cut in its Markdown source, each part parsed on its own."""
        source = node.children[0].content if node.children else ""

        def build(text: str) -> SyntaxTreeNode:
            return _with_inline(node, text, self._env)

        pieces = _split_text(source, lambda text: fits(build(text)), _INLINE_LEVELS, str.strip)
        return [build(piece) for piece in pieces]

    def _split_container(
        self,
        units: list[SyntaxTreeNode],
        fits: Callable[[SyntaxTreeNode], bool],
        rebuild: Callable[[Sequence[SyntaxTreeNode], int], SyntaxTreeNode],
    ) -> list[SyntaxTreeNode]:
        """Groups of a container's children, each rebuilt into a copy of the container."""
        if not units:
            raise _Unsplittable("empty container")
        out: list[SyntaxTreeNode] = []
        for start, end in _pack(units, lambda first, group: fits(rebuild(group, first))):
            if end > start:
                out.append(rebuild(units[start:end], start))
                continue

            def wrapped_fits(piece: SyntaxTreeNode, start: int = start) -> bool:
                return fits(rebuild([piece], start))

            pieces = self._split(units[start], wrapped_fits)
            out.extend(rebuild([piece], start) for piece in pieces)
        return out

    def _split_table(
        self, node: SyntaxTreeNode, fits: Callable[[SyntaxTreeNode], bool]
    ) -> list[SyntaxTreeNode]:
        """Groups of body rows, each under a copy of the header."""
        sections = {section.type: section for section in node.children}
        head, body = sections.get("thead"), sections.get("tbody")
        if body is None:
            raise _Unsplittable("table")

        def rebuild(rows: Sequence[SyntaxTreeNode], _: int) -> SyntaxTreeNode:
            parts = [_with_children(body, rows)]
            return _with_children(node, [head, *parts] if head is not None else parts)

        return self._split_container(body.children, fits, rebuild)


def _split_text(
    text: str,
    fits: Callable[[str], bool],
    levels: Sequence[re.Pattern[str]],
    clean: Callable[[str], str],
) -> list[str]:
    """Cut `text` at the coarsest boundaries in `levels` that let every piece fit.

    Pieces are passed through `clean` before they are checked; blank pieces are dropped.
    Raises `_Unsplittable` if a single character does not fit.
    """
    whole = clean(text)
    if not whole.strip():
        return []
    if fits(whole):
        return [whole]
    if not levels:
        return _split_hard(whole, fits, clean)
    units = _split_after(text, levels[0])
    if len(units) < 2:
        return _split_text(text, fits, levels[1:], clean)

    def group_fits(_: int, group: Sequence[str]) -> bool:
        piece = clean("".join(group))
        return not piece.strip() or fits(piece)

    out: list[str] = []
    for start, end in _pack(units, group_fits):
        if end > start:
            piece = clean("".join(units[start:end]))
            if piece.strip():
                out.append(piece)
        else:
            out.extend(_split_text(units[start], fits, levels[1:], clean))
    return out


def _split_hard(text: str, fits: Callable[[str], bool], clean: Callable[[str], str]) -> list[str]:
    """Cut `text` between characters into the longest pieces that fit."""
    out: list[str] = []
    rest = text
    while rest:

        def prefix_fits(size: int, rest: str = rest) -> bool:
            piece = clean(rest[:size])
            return not piece.strip() or fits(piece)

        size = _largest(len(rest), prefix_fits)
        if size == 0:
            raise _Unsplittable(rest[:1])
        piece = clean(rest[:size])
        if piece.strip():
            out.append(piece)
        rest = rest[size:]
    return out


def _split_after(text: str, separator: re.Pattern[str]) -> list[str]:
    """Split `text` after every match of `separator`; the parts concatenate to `text`."""
    parts: list[str] = []
    start = 0
    for match in separator.finditer(text):
        if match.end() > start:
            parts.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        parts.append(text[start:])
    return parts


def _pack(
    units: Sequence[_T], fits: Callable[[int, Sequence[_T]], bool]
) -> Iterator[tuple[int, int]]:
    """Consecutive groups of `units` as `(start, end)` ranges, each as long as `fits` allows.

    `fits(start, group)` is asked about candidate groups. A range with `end == start` names a
    single unit at `start` that does not fit on its own; the caller has to cut it further.
    """
    start = 0
    while start < len(units):

        def group_fits(size: int, start: int = start) -> bool:
            return fits(start, units[start : start + size])

        size = _largest(len(units) - start, group_fits)
        yield start, start + size
        start += max(size, 1)


def _largest(most: int, fits: Callable[[int], bool]) -> int:
    """The largest n in 0..most with `fits(n)` true, assuming larger n fit less.

    Gallops then bisects, so a chunk of n units costs O(log n) renders, not O(n). The result
    was always checked with `fits` (or is 0).
    """
    good, probe = 0, 1
    while probe <= most and fits(probe):
        good, probe = probe, probe * 2
    bad = min(probe, most + 1)
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good


def _pack_rendered(
    blocks: list[tuple[str, str]], limit: int, measure: Callable[[str], int]
) -> list[str]:
    """Join rendered blocks, each after its separator, into as few chunks as fit in `limit`."""
    chunks: list[str] = []
    for separator, block in blocks:
        if chunks and measure(joined := chunks[-1] + separator + block) <= limit:
            chunks[-1] = joined
        else:
            chunks.append(block)
    return chunks


# --- building pieces of the tree ------------------------------------------------------------


def _node(tokens: Sequence[Any]) -> SyntaxTreeNode:
    return SyntaxTreeNode(tokens).children[0]


def _with_children(
    node: SyntaxTreeNode, children: Sequence[SyntaxTreeNode], **attrs: Any
) -> SyntaxTreeNode:
    """A copy of container `node` holding `children` instead of its own, `attrs` updated."""
    assert node.nester_tokens is not None
    opening, closing = node.nester_tokens
    if attrs:
        opening = opening.copy(attrs={**opening.attrs, **attrs})
    inner = chain.from_iterable(child.to_tokens() for child in children)
    return _node([opening, *inner, closing])


def _with_list_items(
    node: SyntaxTreeNode, items: Sequence[SyntaxTreeNode], start: int
) -> SyntaxTreeNode:
    """A copy of a list holding `items`, numbered from `start` if it is ordered."""
    if node.type == "ordered_list":
        return _with_children(node, items, start=start)
    return _with_children(node, items)


def _with_content(node: SyntaxTreeNode, content: str) -> SyntaxTreeNode:
    """A copy of leaf block `node` (code, raw HTML) holding `content`."""
    assert node.token is not None
    return _node([node.token.copy(content=content)])


def _with_inline(
    node: SyntaxTreeNode, source: str, env: MutableMapping[str, Any]
) -> SyntaxTreeNode:
    """A copy of a paragraph or heading whose text is `source`, parsed as inline Markdown."""
    assert node.nester_tokens is not None
    opening, closing = node.nester_tokens
    return _node([opening, *_MD.parseInline(source, env), closing])


# --- small helpers --------------------------------------------------------------------------


def _keep(text: str) -> str:
    return text


def _is_inline(node: SyntaxTreeNode) -> bool:
    token = node.token or (node.nester_tokens.opening if node.nester_tokens else None)
    return token is not None and not token.block


def _same_target(text: str, href: str) -> bool:
    text = text.strip()
    return text == href or f"mailto:{text}" == href


def _cell_align(cell: SyntaxTreeNode) -> str:
    style = str(cell.attrs.get("style", ""))
    return style.removeprefix("text-align:") or "left"


def _width(text: str) -> int:
    """Columns `text` takes in a monospace font: wide East Asian characters take two."""
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1
        for char in text
    )


def _pad(text: str, width: int, align: str) -> str:
    space = width - _width(text)
    if align == "right":
        return " " * space + text
    if align == "center":
        return " " * (space // 2) + text + " " * (space - space // 2)
    return text + " " * space
