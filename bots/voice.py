"""Which endpoint transcribes voice notes: the profile's `[voice]` table, else the OpenAI key
and base URL the bot already has (`OPENAI_API_KEY`, `OPENAI_BASE_URL`)."""

from __future__ import annotations

from collections.abc import Mapping

from bots.endpoints import openai_compatible
from channels.attachments import VoiceNotes
from core.voice import OPENAI_TRANSCRIPTION_URL, OpenAITranscriber, VoiceSettings

__all__ = ["voice_notes"]


def voice_notes(env: Mapping[str, str], settings: VoiceSettings) -> VoiceNotes:
    """The adapters' voice notes: transcribed when an endpoint is configured, else answered
    with the sentence saying they are not set up. `ConfigError` when `[voice] api_key_env`
    names a variable that is not set."""
    if not settings.enabled:
        return VoiceNotes(settings, None)
    endpoint = openai_compatible(
        env, "voice", api_key_env=settings.api_key_env, base_url=settings.base_url
    )
    if endpoint is None:
        return VoiceNotes(settings, None)
    transcriber = OpenAITranscriber(
        api_key=endpoint.api_key,
        base_url=endpoint.base_url or OPENAI_TRANSCRIPTION_URL,
        model=settings.model,
        timeout=settings.timeout_seconds,
    )
    return VoiceNotes(settings, transcriber)
