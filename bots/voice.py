"""Which endpoint transcribes voice notes: the profile's `[voice]` table, else the OpenAI key
and base URL the bot already has (`OPENAI_API_KEY`, `OPENAI_BASE_URL`)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import SecretStr

from channels.attachments import VoiceNotes
from core.errors import ConfigError
from core.voice import OPENAI_TRANSCRIPTION_URL, OpenAITranscriber, VoiceSettings

__all__ = ["voice_notes"]


def voice_notes(env: Mapping[str, str], settings: VoiceSettings) -> VoiceNotes:
    """The adapters' voice notes: transcribed when an endpoint is configured, else answered
    with the sentence saying they are not set up. `ConfigError` when `[voice] api_key_env`
    names a variable that is not set."""
    if not settings.enabled:
        return VoiceNotes(settings, None)
    key: SecretStr | None = None
    if settings.api_key_env:
        value = env.get(settings.api_key_env, "").strip()
        if not value:
            raise ConfigError(f"[voice] api_key_env: {settings.api_key_env} is not set")
        key = SecretStr(value)
    elif settings.base_url is None:
        value = env.get("OPENAI_API_KEY", "").strip()
        key = SecretStr(value) if value else None
    # Without a [voice] base_url: OpenAI's, or the OpenAI-compatible server the bot uses.
    base_url = settings.base_url or env.get("OPENAI_BASE_URL", "").strip() or None
    if key is None and base_url is None:
        return VoiceNotes(settings, None)
    transcriber = OpenAITranscriber(
        api_key=key,
        base_url=base_url or OPENAI_TRANSCRIPTION_URL,
        model=settings.model,
        timeout=settings.timeout_seconds,
    )
    return VoiceNotes(settings, transcriber)
