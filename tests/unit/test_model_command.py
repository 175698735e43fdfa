"""`/model`'s rules and `[models]` parsing: the allowed list, what a stored choice maps to,
and the answers without a configured list (handler run against the real SQLite store)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bots.profiles import load_profile
from core.backends.sql.store import SqlStore
from core.commands import CommandContext, CommandRegistry, builtin_commands
from core.envelopes import Address, Inbound
from core.errors import ConfigError
from core.model_choice import ModelChoices, ModelOption, ModelsSettings
from core.providers.demo import DemoProvider

DM = Address(platform="telegram", bot="b", chat="42")


def choices() -> ModelChoices:
    default, other = DemoProvider(), DemoProvider()
    return ModelChoices(
        default_provider=default,
        default_model="small",
        allowed=(
            ModelOption(provider="openai", model="big"),
            ModelOption(provider="anthropic", model="deep"),
        ),
        providers={"openai": other},
        unavailable={"anthropic": "provider anthropic: ANTHROPIC_API_KEY is not set"},
    )


def test_a_stored_choice_maps_to_its_provider_and_anything_else_to_the_default() -> None:
    models = choices()
    assert models.pick("big") == (models.providers["openai"], "big")
    assert models.pick(None) == (models.default_provider, "small")
    # No longer allowed (the profile changed), or its provider lost its key: the default.
    assert models.pick("gone") == (models.default_provider, "small")
    assert models.pick("deep") == (models.default_provider, "small")
    assert models.names() == "big (openai), deep (anthropic)"


def test_the_allowed_list_names_each_model_once_and_no_unknown_keys() -> None:
    with pytest.raises(ValidationError, match="names a model twice: big"):
        ModelsSettings.model_validate(
            {
                "allowed": [
                    {"provider": "openai", "model": "big"},
                    {"provider": "demo", "model": "big"},
                ]
            }
        )
    with pytest.raises(ValidationError):
        ModelsSettings.model_validate({"allowed": [{"model": "big"}]})  # no provider
    with pytest.raises(ValidationError):
        ModelsSettings.model_validate({"allowd": []})


def test_a_profile_reads_the_models_table(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "profile.toml").write_text(
        'model = "small"\n[models]\nallowed = [{provider = "openai", model = "big"}]\n',
        encoding="utf-8",
    )
    profile = load_profile(tmp_path, "p")
    assert profile.settings.models.allowed == [ModelOption(provider="openai", model="big")]

    (folder / "profile.toml").write_text('[models]\nallowed = ["big"]\n', encoding="utf-8")
    with pytest.raises(ConfigError):
        load_profile(tmp_path, "p")


async def run(store: SqlStore, text: str, models: ModelChoices | None) -> str:
    registry = CommandRegistry(builtin_commands())
    command = registry.find("model")
    assert command is not None
    inbound = Inbound(
        address=DM, user_id="u1", text=text, kind="command", command="model", is_direct=True
    )
    context = CommandContext(
        inbound=inbound,
        args=text.removeprefix("/model").strip(),
        is_admin=False,
        store=store,
        registry=registry,
        models=models,
    )
    return await command.handler(context)


async def test_without_an_allowed_list_switching_is_not_set_up(store: SqlStore) -> None:
    unset = ModelChoices(default_provider=DemoProvider(), default_model="small")
    said = "Switching models is not set up for this bot; this chat uses small."
    assert await run(store, "/model", unset) == said
    assert await run(store, "/model big", unset) == said
    assert (await store.current_session(DM.session_key)).model is None


async def test_the_name_is_the_first_word_and_reset_any_case(store: SqlStore) -> None:
    models = choices()
    assert await run(store, "/model big please", models) == "This chat now uses big (openai)."
    assert (await store.current_session(DM.session_key)).model == "big"
    assert (
        await run(store, "/model RESET", models) == "This chat is back to the default model, small."
    )
    assert (await store.current_session(DM.session_key)).model is None
