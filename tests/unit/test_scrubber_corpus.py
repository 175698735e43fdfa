"""The scrubber measured both ways: nothing redacted in ordinary text, every credential caught.

Ordinary text: every line of the project's own docs and of the seed documents, and a few
hundred chat and log lines built from templates (ports, paths, versions, hashes, ids, and
"API key", "token", "password" used as words). Credentials: samples of the formats people paste
or libraries log (provider keys, bot tokens, AWS, GitHub, Slack, Discord, Stripe, Google,
JWT, PEM, URLs with passwords, settings lines), each inside a sentence. The figures are
printed (`pytest -s`) as well as asserted.
"""

from __future__ import annotations

import itertools
import random
import string
from pathlib import Path

import pytest

from bots.platforms import REGISTERED
from core.redact import REDACTED, Redactor

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"


@pytest.fixture(scope="module")
def scrub() -> Redactor:
    """The scrubber as every process builds it, with no configured secrets: shapes only."""
    return Redactor([], patterns=REGISTERED.secret_patterns())


def _docs() -> list[str]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    files += sorted(SEEDS.glob("*.txt")) if SEEDS.is_dir() else []
    return [line for f in files for line in f.read_text(encoding="utf-8").splitlines()]


def _chat_lines() -> list[str]:
    """Lines people write and programs log, none holding a secret."""
    rng = random.Random(20261124)
    templates = [
        "Can you check why the API key for staging stopped working?",
        "I rotated the token yesterday, the old one is revoked",
        "password reset link sent to {name}@example.com",
        "invalid_api_key: Incorrect API key provided",
        "the token: please check it",
        "secret: it's a surprise party on friday",
        "Error: token expired, please sign in again",
        "listening on http://127.0.0.1:{port}/ (pid {pid})",
        "connected to redis://127.0.0.1:{port}/0",
        'File "/usr/lib/python3.{minor}/asyncio/runners.py", line {line}, in run',
        "python3.{minor} -m venv .venv && .venv/bin/pip install -e .",
        "upgraded discord.py from 2.{minor}.0 to 2.{minor}.1 and slack-bolt 1.{port}",
        "commit {sha} fixes the retry loop",
        "request id {uuid} took {ms} ms",
        "max_tokens={n} temperature=0.{minor}",
        "token_count: {n}, cache_read_tokens: {ms}",
        "GET /api/v10/channels/{snowflake}/messages?limit=100 200",
        "POST https://api.telegram.org/bot/sendMessage chat_id={n}",
        "the meeting is at {hh}:{mm}, room {n}",
        "my favourite colour is green and my password manager is great",
        "use the bot token from BotFather, then set TELEGRAM_BOT_TOKEN in .env",
        "sha256 {sha256}",
        "docker run -p {port}:{port} switchboard serve",
        "remind me in {n} minutes to stretch",
        "what is {n}*{ms}?",
        "ts={epoch}.{micros} channel=C0{n} user=U0{n}",
        "Version {n}.{minor}.{ms} is out; changelog at https://example.com/releases/v{n}",
        "/home/{name}/projects/switchboard/data/switchboard.db is {ms} MB",
        "the API key goes in the OPENAI_API_KEY variable, not in profile.toml",
        "a password: you'll get it from the admin",
    ]
    lines = []
    for _ in range(12):
        for template in templates:
            lines.append(
                template.format(
                    name=rng.choice(["alice", "bob", "carol", "dan"]),
                    port=rng.randint(1024, 65535),
                    pid=rng.randint(100, 99999),
                    minor=rng.randint(0, 13),
                    line=rng.randint(1, 900),
                    sha="".join(rng.choices("0123456789abcdef", k=40)),
                    sha256="".join(rng.choices("0123456789abcdef", k=64)),
                    uuid=f"{rng.getrandbits(128):032x}"[:8] + "-4b1e-9a2c-8d3f-0e5a7c9b1d2f",
                    ms=rng.randint(1, 9999),
                    n=rng.randint(1, 99999),
                    snowflake=rng.randint(10**17, 10**18),
                    hh=rng.randint(0, 23),
                    mm=f"{rng.randint(0, 59):02d}",
                    epoch=rng.randint(1_600_000_000, 1_800_000_000),
                    micros=f"{rng.randint(0, 999999):06d}",
                )
            )
    return lines


def _credentials() -> list[tuple[str, str]]:
    """(sentence, the secret in it), for the formats of real credentials."""
    rng = random.Random(7)

    def rand(alphabet: str, size: int) -> str:
        return "".join(rng.choices(alphabet, k=size))

    alnum = string.ascii_letters + string.digits
    b64 = alnum + "+/"
    samples = [
        "sk-proj-" + rand(alnum + "_-", 48),
        "sk-" + rand(alnum, 48),
        "sk-ant-api03-" + rand(alnum + "_-", 90),
        f"{rng.randint(10**8, 10**10)}:AA" + rand(alnum + "_-", 33),  # Telegram bot token
        "xoxb-"
        + "-".join([str(rng.randint(10**10, 10**11)) for _ in range(2)])
        + "-"
        + rand(alnum, 24),
        "xapp-1-A0"
        + rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 9)
        + "-"
        + str(rng.randint(10**12, 10**13))
        + "-"
        + rand("abcdef0123456789", 64),
        "xoxp-"
        + "-".join(str(rng.randint(10**10, 10**11)) for _ in range(3))
        + "-"
        + rand("abcdef0123456789", 32),
        "MT" + rand(alnum, 24) + "." + rand(alnum + "_-", 6) + "." + rand(alnum + "_-", 38),
        "AKIA" + rand(string.ascii_uppercase + string.digits, 16),
        rand(b64, 40),  # an AWS secret access key
        "ghp_" + rand(alnum, 36),
        "github_pat_" + rand(alnum + "_", 82),
        "sk_live_" + rand(alnum, 24),
        "AIza" + rand(alnum + "_-", 35),
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
        + rand(alnum + "_-", 40)
        + "."
        + rand(alnum + "_-", 43),
    ]
    sentences = [(f"here is my key {secret} can you check it", secret) for secret in samples]
    pem_body = "\n".join(rand(b64, 64) for _ in range(6))
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"
    sentences.append((f"the deploy key:\n{pem}\nthanks", pem_body.splitlines()[2]))
    password = "hunter2-" + rand(alnum, 6)
    sentences += [
        (f"DATABASE_URL=postgres://app:{password}@db.internal:5432/app", password),
        (f"password={password}", password),
        (f"password: {password}", password),
        (f'{{"api_key": "{password}"}}', password),
        (f"Authorization: Bearer {rand(alnum, 40)}", "Bearer "),
        (f"export AWS_SECRET_ACCESS_KEY={rand(b64, 40)}", "AWS_SECRET_ACCESS_KEY="),
        (f"curl -H 'Authorization: token {rand(alnum, 40)}' https://api.example.com", "token "),
    ]
    return sentences


def test_ordinary_text_is_left_exactly_as_it_was(scrub: Redactor) -> None:
    corpus = _docs() + _chat_lines()
    changed = [(line, scrub(line)) for line in corpus if scrub(line) != line]

    print(f"\nordinary lines: {len(corpus)}, changed by the scrubber: {len(changed)}")
    assert len(corpus) > 1000
    assert changed == []


def test_every_credential_sample_is_caught(scrub: Redactor) -> None:
    samples = _credentials()
    missed = []
    for sentence, secret in samples:
        cleaned = scrub(sentence)
        caught = REDACTED in cleaned and (
            secret.endswith(" ") or secret.endswith("=") or secret not in cleaned
        )
        if secret.endswith((" ", "=")):
            # The scheme or name stays; what follows it must be gone.
            tail = sentence.split(secret, 1)[1].split()[0].strip("'\"")
            caught = tail not in cleaned
        if not caught:
            missed.append((sentence, cleaned))

    print(f"\ncredential samples: {len(samples)}, missed: {len(missed)}")
    assert len(samples) >= 20
    assert missed == []


def _configured() -> list[str]:
    """A bot's configured secrets, shaped like the real ones (provider keys, platform tokens,
    the web, hooks and metrics tokens, a signing secret)."""
    rng = random.Random(31)
    alnum = string.ascii_letters + string.digits

    def rand(alphabet: str, size: int) -> str:
        return "".join(rng.choices(alphabet, k=size))

    return [
        "sk-ant-api03-" + rand(alnum + "_-", 90),
        "sk-proj-" + rand(alnum + "_-", 48),
        f"{rng.randint(10**8, 10**10)}:AA" + rand(alnum + "_-", 33),
        "xoxb-"
        + "-".join(str(rng.randint(10**10, 10**11)) for _ in range(2))
        + "-"
        + rand(alnum, 24),
        rand("abcdef0123456789", 32),  # a Slack signing secret
        rand(alnum + "_-", 43),  # the web token (secrets.token_urlsafe)
        "hooks-" + rand(alnum, 20),
        rand(alnum, 16),  # a metrics token
    ]


def _answers() -> list[str]:
    """Lines a model writes in answers: made-up passwords, hashes, keys in examples, ids."""
    rng = random.Random(2026)
    alnum = string.ascii_letters + string.digits
    lines = []
    for _ in range(50):
        password = "".join(rng.choices(alnum + "!@#%", k=rng.randint(16, 40)))
        lines += [
            f"Here is a strong password you could use: {password}",
            f"The file's SHA-256 is {''.join(rng.choices('0123456789abcdef', k=64))}.",
            "Put your key in `.env` as `ANTHROPIC_API_KEY=sk-ant-...` and restart.",
            f"Your order id is {''.join(rng.choices(alnum, k=24))}, keep it for reference.",
            "Slack tokens start with `xoxb-` (bot) or `xapp-` (app-level).",
        ]
    return lines


def test_an_answer_keeps_everything_but_the_configured_secrets() -> None:
    configured = _configured()
    scrub = Redactor(configured, patterns=REGISTERED.secret_patterns())
    ordinary = _docs() + _chat_lines() + _answers()
    changed = [line for line in ordinary if scrub.known(line) != line]
    print(f"\nanswer lines: {len(ordinary)}, changed by the answer scrubber: {len(changed)}")
    assert changed == []

    leaked = []
    for secret in configured:
        for sentence in (
            f"Sure, the key is {secret}.",
            f"```\nexport KEY={secret}\n```",
            f"{secret}",
            f"twice: {secret} and {secret}!",
        ):
            cleaned = scrub.known(sentence)
            if secret in cleaned or REDACTED not in cleaned:
                leaked.append(cleaned)
    assert leaked == []


def _chunks(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(1, 12))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def test_a_streamed_answer_never_shows_a_piece_of_a_configured_secret() -> None:
    configured = _configured()
    # Two values sharing a beginning: the longer one must not be cut at the shorter one.
    configured += ["overlapping-secret-1", "overlapping-secret-1-longer"]
    scrub = Redactor(configured)
    rng = random.Random(5)
    texts = [f"Sure, the key is {s} and that is all." for s in configured]
    texts += [f"{s}{t}" for s, t in itertools.pairwise(configured)]
    texts += [f"{s[:-1]} is not a secret, {s[:5]} neither" for s in configured]
    texts += ["overlapping-secret-1-longer.", "overlapping-secret-1-long", *_answers()[:20]]
    for text in texts:
        whole = scrub.known(text)
        # Every way of cutting it in two, then random cuttings into many pieces.
        cuttings = [[text[:i], text[i:]] for i in range(1, len(text))]
        cuttings += [_chunks(text, rng) for _ in range(20)]
        for pieces in cuttings:
            stream = scrub.answer()
            shown = ""
            for piece in pieces:
                shown += stream.add(piece)
                # What is shown is always the start of the scrubbed whole: no secret's first
                # part ever shows, even for a moment.
                assert whole.startswith(shown), (pieces, shown)
            assert shown + stream.end() == whole, pieces
