"""`Redactor`: credentials are replaced by shape or value; digests, ids and prose pass."""

from __future__ import annotations

import logging
import re

import pytest

from bots.platforms import REGISTERED
from core.redact import REDACTED, RedactingFilter, Redactor, looks_like_secret

# With the chat platforms' credential shapes, as the wiring builds it.
redact = Redactor(patterns=REGISTERED.secret_patterns())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            f"AWS_SECRET_ACCESS_KEY={REDACTED}",
            id="aws-secret",
        ),
        pytest.param("api_key=abc123def", f"api_key={REDACTED}", id="api_key"),
        pytest.param("apikey: hello-world-1", f"apikey: {REDACTED}", id="apikey-colon"),
        pytest.param("token=s3cr3t&page=2", f"token={REDACTED}&page=2", id="token"),
        pytest.param("SLACK_BOT_TOKEN = 'abcdef'", f"SLACK_BOT_TOKEN = '{REDACTED}'", id="env"),
        pytest.param("client_secret: hush-hush", f"client_secret: {REDACTED}", id="secret"),
        pytest.param("password: hunter22", f"password: {REDACTED}", id="password"),
        pytest.param("db_passwd=letmein", f"db_passwd={REDACTED}", id="passwd"),
        pytest.param(
            '{"user": "bob", "password": "correct horse"}',
            f'{{"user": "bob", "password": "{REDACTED}"}}',
            id="json",
        ),
        pytest.param(
            "Authorization: Bearer abc.def-ghi123",
            f"Authorization: Bearer {REDACTED}",
            id="authorization-bearer",
        ),
        pytest.param(
            "authorization: Basic dXNlcjpwYXNz", f"authorization: Basic {REDACTED}", id="basic"
        ),
        pytest.param(
            "curl -H 'Authorization: Bot MTIzNDU2Nzg5'",
            f"curl -H 'Authorization: Bot {REDACTED}'",
            id="header-in-command",
        ),
        pytest.param(
            "sent bearer abcdefghijklmnop12 along", f"sent bearer {REDACTED} along", id="bearer"
        ),
        pytest.param(
            "GET https://api.example.com/v1/x?token=abcd1234&x=1",
            f"GET https://api.example.com/v1/x?token={REDACTED}&x=1",
            id="url-query",
        ),
        pytest.param(
            "https://api.example.com/cb?access_token=abcd1234",
            f"https://api.example.com/cb?access_token={REDACTED}",
            id="url-access-token",
        ),
        pytest.param(
            "postgres://bob:pa55word@db.example.com/app",
            f"postgres://bob:{REDACTED}@db.example.com/app",
            id="url-userinfo",
        ),
        pytest.param(
            "key sk-abcdefghijklmnopqrstuvwxyz0123 here", f"key {REDACTED} here", id="openai"
        ),
        pytest.param("sk-proj-abcDEF123456ghiJKL789012mno", REDACTED, id="openai-project"),
        pytest.param("sk-ant-api03-abcdefghijklmnop_QRS", REDACTED, id="anthropic"),
        pytest.param("xoxb-1234567890-abcdefghij", REDACTED, id="slack-bot"),
        pytest.param("xoxp-1234567890-abcdefghij", REDACTED, id="slack-user"),
        pytest.param("ghp_" + "a1B2c3D4e5" * 4, REDACTED, id="github-classic"),
        pytest.param("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", REDACTED, id="github-pat"),
        pytest.param("id AKIAIOSFODNN7EXAMPLE.", f"id {REDACTED}.", id="aws-access-key"),
        pytest.param("AIza" + "Sy0123456789abcdefghijklmnopqrstuv", REDACTED, id="google"),
        pytest.param("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", REDACTED, id="stripe"),
        pytest.param(
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            REDACTED,
            id="jwt",
        ),
        pytest.param(
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nok",
            f"{REDACTED}\nok",
            id="pem",
        ),
        pytest.param(
            "random Zk3xQ9vLp2Rt7YwB4nM8sD1fH6jK0cVa end", f"random {REDACTED} end", id="entropy"
        ),
        pytest.param(
            "value: q8Fz2LmN4xR7tY1wK9pB3vC6", f"value: {REDACTED}", id="entropy-24-chars"
        ),
        pytest.param("123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", REDACTED, id="telegram"),
        pytest.param(
            "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0123",
            REDACTED,
            id="discord",
        ),
    ],
)
def test_credentials_are_redacted_keeping_what_names_them(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("commit 3f786850e387550fdab836ed7e6dc881de23001b", id="git-sha"),
        pytest.param(
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", id="sha256"
        ),
        pytest.param("md5 d41d8cd98f00b204e9800998ecf8427e", id="md5"),
        pytest.param("id 550e8400-e29b-41d4-a716-446655440000", id="uuid"),
        pytest.param("ID 550E8400-E29B-41D4-A716-446655440000", id="uuid-upper"),
        pytest.param("/usr/local/lib/python3.11/site-packages/pydantic/main.py", id="path"),
        pytest.param("https://docs.python.org/3/library/asyncio-task.html#timeouts", id="url"),
        pytest.param("https://example.com/search?q=weather&page=2", id="url-query"),
        pytest.param("internationalization-framework-v2 and some_long_snake_case_name", id="ids"),
        pytest.param("ThisIsVersion2OfTheFileName MyComponentV2Renderer2024Final", id="camel"),
        pytest.param("test_a_tool_round_trip_feeds_the_result_back", id="test-name"),
        pytest.param("max_tokens=4096 tokens: 12 keyboard=us", id="not-secret-names"),
        pytest.param("the secret to success is hard work", id="prose-secret"),
        pytest.param("the author: Bob; Tokenizer: fast", id="prose-names"),
        pytest.param("anthropic auth: invalid x-api-key", id="error-kind"),
        pytest.param("task-runner-configuration-defaults", id="sk-inside-word"),
        pytest.param(
            "see [0013](decisions/0013-stream-fallback-and-backpressure.md)", id="numbered-slug"
        ),
        pytest.param("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA1", id="low-entropy"),
        pytest.param("2024-05-01T12:00:00+00:00 took 1234567890123456789012345ms", id="numbers"),
        pytest.param("send an `Authorization: Bearer` header", id="scheme-named-in-prose"),
        pytest.param("", id="empty"),
    ],
)
def test_hashes_ids_and_ordinary_text_pass_unchanged(text: str) -> None:
    assert redact(text) == text


def test_several_secrets_in_one_tool_output_are_all_redacted() -> None:
    output = (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
        "OPENAI=sk-abcdefghijklmnopqrstuvwxyz0123\n"
        "Authorization: Bearer abcdefghijklmnopqrst\n"
        "HEAD 3f786850e387550fdab836ed7e6dc881de23001b run 550e8400-e29b-41d4-a716-446655440000"
    )
    assert redact(output) == (
        f"AWS_SECRET_ACCESS_KEY={REDACTED}\n"
        f"OPENAI={REDACTED}\n"
        f"Authorization: Bearer {REDACTED}\n"
        "HEAD 3f786850e387550fdab836ed7e6dc881de23001b run 550e8400-e29b-41d4-a716-446655440000"
    )


def test_redacting_twice_changes_nothing_more() -> None:
    once = redact("token=abc password: x1 Bearer abcdefghijklmnop12 sk-" + "a" * 24)
    assert redact(once) == once


def test_configured_secrets_are_redacted_wherever_they_appear() -> None:
    configured = Redactor(["plain-words-secret", "short"])
    assert configured("use plain-words-secret now") == f"use {REDACTED} now"
    # Values under 8 characters would shred ordinary text, so they are not taken.
    assert configured("a short note") == "a short note"


def test_data_scrubs_strings_and_hides_fields_named_as_secrets() -> None:
    arguments = {
        "url": "https://x.example/cb?token=abcd1234",
        "password": "hunter2",
        "headers": [{"Authorization": "Bearer abcdefghijklmnop"}, {"api_key": 12345}],
        "count": 3,
        "max_tokens": 100,
        "flag": True,
    }
    assert redact.data(arguments) == {
        "url": f"https://x.example/cb?token={REDACTED}",
        "password": REDACTED,
        "headers": [{"Authorization": f"Bearer {REDACTED}"}, {"api_key": REDACTED}],
        "count": 3,
        "max_tokens": 100,
        "flag": True,
    }


@pytest.mark.parametrize(
    ("token", "secret"),
    [
        ("Zk3xQ9vLp2Rt7YwB4nM8sD1fH6jK0cVa", True),
        ("3f786850e387550fdab836ed7e6dc881de23001b", False),
        ("550e8400-e29b-41d4-a716-446655440000", False),
        ("short1A", False),
        ("abcdefghijklmnopqrstuvwxyz", False),
    ],
)
def test_looks_like_secret(token: str, secret: bool) -> None:
    assert looks_like_secret(token) is secret


def test_the_logging_filter_scrubs_messages_arguments_and_tracebacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("test_redact")
    logger.addFilter(RedactingFilter(Redactor()))
    try:
        with caplog.at_level(logging.INFO, logger="test_redact"):
            logger.info("calling with %s", "Authorization: Bearer abcdefghijklmnop")
            try:
                raise ValueError("password=hunter22")
            except ValueError:
                logger.exception("failed")
    finally:
        logger.filters.clear()
    text = caplog.text
    assert "abcdefghijklmnop" not in text
    assert "hunter22" not in text
    assert f"Bearer {REDACTED}" in text
    assert f"password={REDACTED}" in text


def test_the_quick_gate_lets_through_every_text_a_full_scrub_would_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Text the gate passes over skips the built-in shapes: scrubbed with and without the gate,
    random texts made of the shapes' pieces must come out the same."""
    import random

    import core.redact

    pieces = [
        "api_key",
        "APIKEY",
        "access-key",
        "token",
        "Secret",
        "passwd",
        "PWD",
        "=",
        ": ",
        "'",
        '"',
        " ",
        "\n",
        "Authorization: ",
        "Bearer ",
        "bot ",
        "https://",
        "user:",
        "pw@",
        "host",
        "-----BEGIN RSA PRIVATE KEY-----",
        "sk-",
        "sk-ant-",
        "sk_live_",
        "rk_test_",
        "ghp_",
        "github_pat_",
        "AKIA",
        "ASIA",
        "AIza",
        "eyJ",
        ".",
        "/",
        "-",
        "_",
        "+",
        "==",
        "abcdefghij",
        "ABCDEFGHIJ",
        "0123456789",
        "q7Zx9Lw2",
        "xoxb-",
        "xapp-",
        "123456789:",
        "the",
        "word",
        "[redacted]",
        "ke",
        "y",
        "Zq8Wm3Lp",
        "Zq8W",
        "Q1w2E3r4T5",
    ]
    chosen = random.Random(20261124)
    texts = ["".join(chosen.choices(pieces, k=chosen.randint(1, 6))) for _ in range(4000)]
    secrets = ["Zq8Wm3Lp", "Q1w2E3r4T5"]  # configured values that hold none of the gate's strings
    gated_redactor = Redactor(secrets, patterns=REGISTERED.secret_patterns())
    gated = [gated_redactor(text) for text in texts]
    monkeypatch.setattr(core.redact, "_MAY_HOLD_SECRET", re.compile(""))
    ungated = Redactor(secrets, patterns=REGISTERED.secret_patterns())  # one scan: anything
    full = [ungated(text) for text in texts]

    assert gated == full
    assert sum(text != scrubbed for text, scrubbed in zip(texts, full, strict=True)) > 400
    assert sum(text == scrubbed for text, scrubbed in zip(texts, full, strict=True)) > 100


def test_a_platform_pattern_with_a_back_reference_still_scrubs() -> None:
    """Joined into the quick scan a pattern's groups would be numbered anew, so `\\1` would
    point at another pattern's group: such a pattern keeps its own scan."""
    scrub = Redactor(patterns=[r"(pgr)_[a-z]{4}", r"(['\"])zz_[a-z0-9]{10}\1"])
    assert scrub("id 'zz_abc123def4'") == f"id {REDACTED}"


def test_a_platform_pattern_with_a_flag_of_its_own_still_scrubs() -> None:
    scrub = Redactor(patterns=[r"(?i)pgr_[a-z]{4}"])  # a global flag cannot be joined
    assert scrub("code PGR_ABCD") == f"code {REDACTED}"
