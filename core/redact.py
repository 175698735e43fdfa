"""Secret scrubbing for logs, events, tool output and the model's answers.

The runtime never lets a configured secret (an API key, a bot token) reach the model, a log
line or a bus event: every such text passes through a `Redactor`. The model's answers and the
arguments of its tool calls are scrubbed of the configured values only (`Redactor.known`,
and `AnswerScrubber` as an answer streams): the shapes below would also catch a password the
model was asked to make up, or a key the person pasted themselves. Besides the configured
values it catches credentials by shape: `key=value` pairs whose key names a secret, HTTP
`Authorization` headers, the formats of well-known providers and long high-entropy tokens.
Only the secret part is replaced (`AWS_SECRET_ACCESS_KEY=[redacted]`), and digests (git SHAs,
SHA-256) and UUIDs are left alone: they identify things, they do not unlock them.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["REDACTED", "AnswerScrubber", "RedactingFilter", "Redactor", "looks_like_secret"]

REDACTED = "[redacted]"

# Shapes of well-known credentials, caught even when they were not configured here.
_PATTERNS = (
    re.compile(
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
    ),
    re.compile(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-)?[A-Za-z0-9_\-]{20,}"),
    re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{22,}"),
    re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),
    # A JSON web token: three base64url parts, the first two encoded JSON objects.
    re.compile(r"(?<![\w-])eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}"),
)

# Names of settings, fields and parameters whose value is a secret: `api_key`, `apikey`,
# `AWS_SECRET_ACCESS_KEY`, `CHAT_BOT_TOKEN`, `db_password`; not `max_tokens` or `keyboard`.
_SECRET_NAME = (
    r"[\w.\-]*?(?:api[_\-]?key|access[_\-]?key|secret[_\-]?key|private[_\-]?key|token"
    r"|secret|passwd|password|pwd)"
)
_SECRET_KEY = re.compile(rf"(?i)^{_SECRET_NAME}$")
# name, then `=` or `:` (JSON and YAML alike, the name possibly quoted), then the value.
_KEY_VALUE = re.compile(
    rf"""(?ix)
    (?<![\w.\-])(?P<lead>["']?{_SECRET_NAME}["']?\s*(?P<sep>[:=])\s*)
    (?: "(?P<dq>[^"\n]+)" | '(?P<sq>[^'\n]+)' | (?P<bare>[^\s"'&,;<>(){{}}\[\]]+) )
    """
)
_AUTHORIZATION = re.compile(
    r"""(?ix)
    (?P<lead>\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?
        (?:(?:bearer|basic|token|digest|bot)\s+)?)
    (?P<value>[^\s"'`,;]+)
    """
)
# A scheme named without its credentials ("an `Authorization: Bearer` header") is prose.
_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "bot"})
_BEARER = re.compile(r"(?i)(?P<lead>\bbearer\s+)(?P<value>[A-Za-z0-9._~+/\-]{12,}=*)")
# A bare value after `name:` that reads as a word of prose: letters only, short. A value after
# `=`, a quoted one, or one with digits or symbols is taken for the secret it is named as.
_WORDLIKE = re.compile(r"[A-Za-z]{1,15}")
# Where documentation shows a secret's place: `xoxb-...`, `"..."`, `<token>`, a lone
# backtick, a value already scrubbed, or a variable that holds it (`$TOKEN`, `${TOKEN}`).
_PLACEHOLDER = re.compile(
    r"(?i)[^A-Za-z0-9]*|.*(?:\.\.\.|…)|(?:\[redacted\]|<[\w .-]*>)[^A-Za-z0-9]*"
    r"|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?[^A-Za-z0-9]*"
)
# Credentials in a URL: `https://user:password@host`.
_USERINFO = re.compile(r"(?P<lead>://[^/\s:@]+:)(?P<value>[^/\s@]+)(?=@)")

# A run of base64/hex-ish characters long enough to be a key.
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{24,}={0,2}(?![A-Za-z0-9+/_\-=])")
_HEX = re.compile(r"[0-9a-fA-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# Lengths of common digests in hex: MD5, SHA-1 (git), SHA-224, SHA-256, SHA-384, SHA-512.
_DIGEST_LENGTHS = frozenset({32, 40, 56, 64, 96, 128})
# Random keys of 24 characters or more score above this (in bits per character); words,
# identifiers and paths, with their repeated letters, stay below it.
_ENTROPY_CEILING = 4.2
# A segment of a path: a word, lower case after its first letter (`v10`, `messages`, `Users`).
_PATH_WORD = re.compile(r"[A-Za-z][a-z0-9_.\-]*")
# A slug's separators and its words (`_is_words`).
_WORD_SEPARATORS = re.compile(r"[-_/]")
_LOWER_WORD = re.compile(r"[a-z]{2,}")
_ENTROPY_SHARE = 0.85
# Every built-in shape above needs one of these somewhere in the text (a secret's name, a
# header, a known prefix, `://` or a run of 24 key characters): text without any is left as
# it is after one scan instead of one per shape. Configured values and the platforms'
# patterns are looked for in every text.
_MAY_HOLD_SECRET = re.compile(
    r"(?i:key|token|secret|passw|pwd|authorization|bearer|://|-----BEGIN|sk-|[sr]k_"
    r"|gh[pousr]_|github_pat_|AKIA|ASIA|AIza|eyJ|[A-Za-z0-9+/_\-]{24})"
)


def _entropy(text: str) -> float:
    counts = Counter(text)
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def looks_like_secret(token: str) -> bool:
    """Whether a single token (no spaces) looks like a random key rather than a name, a path
    or a hash."""
    body = token.rstrip("=")
    if len(body) < 24 or _UUID.fullmatch(body) or _is_path(body) or _is_words(body):
        return False
    if _HEX.fullmatch(body) and len(body) in _DIGEST_LENGTHS:
        return False
    if not any(c.isdigit() for c in body) or not any(c.isalpha() for c in body):
        return False
    threshold = min(_ENTROPY_SHARE * math.log2(len(body)), _ENTROPY_CEILING)
    return _entropy(body) >= threshold


def _is_path(body: str) -> bool:
    """A URL path or file path (`/api/v10/channels/7409.../messages`): segments that are
    numbers or words, not the random letters of a base64 key that happens to hold a `/`."""
    parts = body.split("/")
    return len(parts) >= 3 and all(not p or p.isdigit() or _PATH_WORD.fullmatch(p) for p in parts)


def _is_words(body: str) -> bool:
    """Lower-case words and numbers joined by `-`, `_` or `/`
    (`decisions/0013-stream-fallback-and-backpressure`): a slug, a file name or a setting,
    never the mixed letters of a key."""
    parts = _WORD_SEPARATORS.split(body)
    return len(parts) >= 3 and all(p.isdigit() or _LOWER_WORD.fullmatch(p) for p in parts)


def _keep_lead(match: re.Match[str]) -> str:
    if _PLACEHOLDER.fullmatch(match["value"]):
        return match[0]
    return match["lead"] + REDACTED


def _authorization(match: re.Match[str]) -> str:
    if match["value"].lower() in _SCHEMES:
        return match[0]
    return _keep_lead(match)


def _key_value(match: re.Match[str]) -> str:
    bare = match["bare"]
    if bare is not None and match["sep"] == ":" and _WORDLIKE.fullmatch(bare):
        # Prose, not a setting: "invalid_api_key: Incorrect API key", "the token: please".
        return match[0]
    if _PLACEHOLDER.fullmatch(match["dq"] or match["sq"] or bare or ""):
        return match[0]
    if match["dq"] is not None:
        return f'{match["lead"]}"{REDACTED}"'
    if match["sq"] is not None:
        return f"{match['lead']}'{REDACTED}'"
    return match["lead"] + REDACTED


def _high_entropy(match: re.Match[str]) -> str:
    return REDACTED if looks_like_secret(match[0]) else match[0]


class Redactor:
    """Replaces known secret values and credential-shaped strings with `[redacted]`.

    `patterns` adds shapes of credentials to the built-in ones (regular expressions whose
    whole match is the secret): the chat platforms contribute their token formats this way.
    """

    def __init__(self, secrets: Iterable[str] = (), patterns: Iterable[str] = ()) -> None:
        # Short values would shred ordinary text; real secrets are long.
        values = sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True)
        self._values = tuple(values)
        self._exact = re.compile("|".join(re.escape(v) for v in values)) if values else None
        self._patterns = tuple(re.compile(p) for p in patterns)
        # All of the above in one expression: most texts (ids, names, plain replies) match
        # none of it and are done after a single scan. Joined, a pattern's groups are
        # numbered anew (a back-reference would point elsewhere) and a global flag of its own
        # is refused: a platform pattern with groups, or one that cannot be joined, leaves
        # every text to the steps below.
        self._anything: re.Pattern[str] | None = None
        if not any(p.groups for p in self._patterns):
            either = [p.pattern for p in (self._exact, *self._patterns) if p is not None]
            with contextlib.suppress(re.error):
                self._anything = re.compile(
                    "|".join(f"(?:{p})" for p in (*either, _MAY_HOLD_SECRET.pattern))
                )

    def __call__(self, text: str) -> str:
        if self._anything is not None and not self._anything.search(text):
            return text
        if self._exact is not None:
            text = self._exact.sub(REDACTED, text)
        # `[redacted]` holds none of the gate's strings: a text the gate passes over stays so.
        shaped = _MAY_HOLD_SECRET.search(text) is not None
        if shaped:
            for pattern in _PATTERNS:
                text = pattern.sub(REDACTED, text)
        for pattern in self._patterns:
            text = pattern.sub(REDACTED, text)
        if not shaped:
            return text
        # The header before the generic pairs: it keeps the scheme (`Bearer [redacted]`).
        text = _AUTHORIZATION.sub(_authorization, text)
        text = _BEARER.sub(_keep_lead, text)
        text = _USERINFO.sub(_keep_lead, text)
        text = _KEY_VALUE.sub(_key_value, text)
        return _CANDIDATE.sub(_high_entropy, text)

    def known(self, text: str) -> str:
        """`text` with the configured secret values replaced, and nothing else touched."""
        return text if self._exact is None else self._exact.sub(REDACTED, text)

    def known_data(self, value: Any) -> Any:
        """A copy of JSON-like data with the configured secret values replaced in every
        string (keys included), and nothing else touched."""
        if self._exact is None:
            return value
        if isinstance(value, str):
            return self.known(value)
        if isinstance(value, dict):
            return {self.known_data(key): self.known_data(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.known_data(item) for item in value]
        return value

    def answer(self) -> AnswerScrubber:
        """A scrubber of one streamed answer (see `AnswerScrubber`)."""
        return AnswerScrubber(self._exact, self._values)

    def data(self, value: Any) -> Any:
        """A copy of JSON-like data with every string scrubbed and secret-named fields hidden."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {
                key: REDACTED
                if isinstance(key, str)
                and _SECRET_KEY.match(key)
                and isinstance(item, str | int | float)
                and not isinstance(item, bool)
                else self.data(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value


class AnswerScrubber:
    """Scrubs the configured secret values from text that arrives in pieces (a streamed
    answer), so that no piece shows any part of one, even a secret split across two pieces.

    `add` returns the scrubbed text that is safe to show now: it holds back the end of what
    came, from where a configured value may begin and is not complete yet. `end` returns what
    was held back, scrubbed. Joined, the returns are `Redactor.known` of the whole text.
    """

    def __init__(self, exact: re.Pattern[str] | None, values: tuple[str, ...]) -> None:
        self._exact = exact
        self._values = values
        self._firsts = frozenset(value[0] for value in values)
        self._longest = max((len(value) for value in values), default=0)
        self._pending = ""  # arrived, not shown yet; no secret crosses where it starts

    def add(self, piece: str) -> str:
        """The scrubbed text that may be shown, now that `piece` came."""
        if self._exact is None:
            return piece
        text = self._pending + piece
        cut = self._settled(text)
        self._pending = text[cut:]
        return self._exact.sub(REDACTED, text[:cut])

    def end(self) -> str:
        """The rest of the text, scrubbed: the answer is complete."""
        text, self._pending = self._pending, ""
        return text if self._exact is None else self._exact.sub(REDACTED, text)

    def _settled(self, text: str) -> int:
        """How much of `text` can be scrubbed now: up to the earliest place where a
        configured value may begin but is not complete, moved back to the start of any
        complete value that crosses it (scrubbed whole once the rest is known)."""
        assert self._exact is not None
        cut = len(text)
        for start in range(max(0, len(text) - self._longest + 1), len(text)):
            if text[start] in self._firsts and any(
                len(value) > len(text) - start and value.startswith(text[start:])
                for value in self._values
            ):
                cut = start
                break
        for match in self._exact.finditer(text, 0, len(text)):
            if match.start() >= cut:
                break
            if match.end() > cut:
                return match.start()
        return cut


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs the fully formatted message of every record."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redact = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self._redact(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True
