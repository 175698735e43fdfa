"""Per-chat model choice: the profile's `[models] allowed` list and what `/model` switches.

Each allowed entry names a model and the provider that serves it, as the profile's own
`provider` and `model` keys do. A chat's choice is stored with its session
(`ConversationLog.set_session_model`); a turn looks it up in `ModelChoices.pick`, and a name
no longer allowed (the profile changed) falls back to the profile's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.providers.base import Provider

__all__ = ["ModelChoices", "ModelOption", "ModelsSettings"]


class ModelOption(BaseModel):
    """One model a chat may switch to: `{provider = "openai", model = "gpt-4o-mini"}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)


class ModelsSettings(BaseModel):
    """`[models]`: the models a chat may switch to with `/model`; none: switching is off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed: list[ModelOption] = Field(default_factory=list)

    @model_validator(mode="after")
    def _names_are_unique(self) -> ModelsSettings:
        names = [option.model for option in self.allowed]
        doubled = sorted({name for name in names if names.count(name) > 1})
        if doubled:
            raise ValueError(f"models.allowed names a model twice: {', '.join(doubled)}")
        return self


@dataclass(frozen=True)
class ModelChoices:
    """What a worker can switch a chat to: the default, the allowed models, and a built
    provider for each allowed model's provider that has its key (`unavailable` says why the
    others cannot be used)."""

    default_provider: Provider
    default_model: str
    allowed: tuple[ModelOption, ...] = ()
    providers: Mapping[str, Provider] = field(default_factory=dict)
    unavailable: Mapping[str, str] = field(default_factory=dict)

    def find(self, name: str) -> ModelOption | None:
        """The allowed entry for the model `name`, or None."""
        for option in self.allowed:
            if option.model == name:
                return option
        return None

    def pick(self, stored: str | None) -> tuple[Provider, str]:
        """The provider and model of a turn in a session whose stored choice is `stored`."""
        option = self.find(stored) if stored is not None else None
        if option is None or option.provider not in self.providers:
            return self.default_provider, self.default_model
        return self.providers[option.provider], option.model

    def reach(self, name: str) -> tuple[Provider, str] | None:
        """The provider and model for `name` (the default or an allowed model whose provider
        is built), or None: the cheaper model of `[budgets] degrade_model` goes through it."""
        if name == self.default_model:
            return self.default_provider, self.default_model
        option = self.find(name)
        if option is None or option.provider not in self.providers:
            return None
        return self.providers[option.provider], option.model

    def current(self, stored: str | None) -> str:
        """The name of the model a session with this stored choice uses."""
        return self.pick(stored)[1]

    def names(self) -> str:
        """The allowed models with their providers, for a one-line answer."""
        return ", ".join(f"{o.model} ({o.provider})" for o in self.allowed)
