"""Each provider's default model, importable without loading any vendor SDK."""

from __future__ import annotations

__all__ = ["DEFAULT_MODELS"]

DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-4-6",
    "openai": "gpt-4.1",
    "demo": "demo-1",
}
