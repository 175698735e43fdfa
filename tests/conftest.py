"""Fixtures shared by every test directory."""

from tests.fakes.fixtures import fake_anthropic, fake_openai

__all__ = ["fake_anthropic", "fake_openai"]
