"""What `[voice]` and `[images]` of a profile share: an OpenAI-compatible endpoint of their own,
or none (then the OpenAI key and base URL the bot already has)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class EndpointSettings(BaseModel):
    """The switch and the endpoint of a profile table that calls an OpenAI-compatible API."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # False: the feature is off, whatever keys there are.
    enabled: bool = True
    # Another OpenAI-compatible endpoint (e.g. a local server), ending in `/v1`.
    base_url: str | None = None
    # The name of the environment variable holding the endpoint's key (never the key itself);
    # unset: OPENAI_API_KEY, or no key for a `base_url` of its own.
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http:// or https:// URL")
        return url or None


def endpoint_failure(exc: BaseException, endpoint: str) -> str:
    """One line saying how a call to the `endpoint` ("transcription", "image", ...) failed, from
    the OpenAI SDK's error: the status or the kind of failure, never the key nor the body."""
    import openai

    if isinstance(exc, openai.APITimeoutError):  # before its base, APIConnectionError
        return f"the {endpoint} endpoint timed out"
    if isinstance(exc, openai.APIStatusError):
        return f"the {endpoint} endpoint answered HTTP {exc.status_code}"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not reach the {endpoint} endpoint"
    return f"the {endpoint} endpoint failed ({type(exc).__name__})"
