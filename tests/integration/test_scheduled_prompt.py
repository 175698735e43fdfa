"""A scheduled run tells the model what it is: scheduler → worker → `outbound.telegram`.

The scripted models answer from what the system prompt they were sent says, the way a real
model does: one follows the `[NOTIFY]` rule of a `conditional` schedule, one ignores it.
"""

from __future__ import annotations

from pathlib import Path

from core.events import ModelEvent
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import text_reply
from core.scheduling.book import NOTIFY_MARKER, Notification
from tests.integration.test_schedules_worker import CHAT, running

PROMPT = "Any new GitHub issues? Tell me only if there are."


def _follows_the_rule(request: ModelRequest) -> list[ModelEvent]:
    """A model that does what the prompt's scheduled-run section asks."""
    if f"begin your answer with exactly {NOTIFY_MARKER}" in request.system:
        return text_reply(f"{NOTIFY_MARKER} Yes, 3 new issues.")
    return text_reply("Yes, 3 new issues.")


def _section(request: ModelRequest) -> str:
    _, found, rest = request.system.partition("## Scheduled run\n")
    assert found, "the request had no scheduled-run section"
    return rest.split("\n\n", 1)[0]


async def test_a_conditional_run_a_model_marks_is_delivered_without_the_marker(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([_follows_the_rule])
    async with running(tmp_path, provider) as stack:
        made = await stack.schedule(prompt=PROMPT, notify="conditional", owner="telegram:77")

        run_id, notes = await stack.fire(made)
        delivered = await stack.delivered()

        assert (delivered.kind, delivered.address, delivered.text) == (
            "notification",
            CHAT,
            "Yes, 3 new issues.",
        )
        assert notes == [Notification(CHAT, "Yes, 3 new issues.")]
        (run,) = await stack.store.list_runs(made.id)
        # Sent to the chat; `delivered` waits for the gateway's receipt (none runs here).
        assert (run.id, run.status, run.delivery) == (run_id, "succeeded", "pending")

    section = _section(provider.requests[0])
    assert f"scheduled run of task {made.id} (every 1m)" in section
    assert "set up by the user telegram:77" in section
    assert "go to the chat telegram:4242" in section
    assert "nothing is delivered" in section
    # The prompt itself is what the model answers, unchanged.
    assert provider.requests[0].messages[-1].text == PROMPT


async def test_a_conditional_answer_without_the_marker_is_recorded_not_delivered(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([text_reply("Yes, 3 new issues.")])
    async with running(tmp_path, provider) as stack:
        made = await stack.schedule(prompt=PROMPT, notify="conditional")

        run_id, notes = await stack.fire(made)

        assert notes == []
        assert await stack.nothing_delivered()
        (run,) = await stack.store.list_runs(made.id)
        assert (run.id, run.status, run.output, run.delivered) == (
            run_id,
            "succeeded",
            "Yes, 3 new issues.",
            False,
        )
    assert f"begin your answer with exactly {NOTIFY_MARKER}" in _section(provider.requests[0])
    assert "set up by the operator" in _section(provider.requests[0])


async def test_an_always_run_says_its_answer_is_delivered(tmp_path: Path) -> None:
    provider = ScriptedProvider([text_reply("Standup in 5 minutes.")])
    async with running(tmp_path, provider) as stack:
        made = await stack.schedule(prompt="Remind me of the standup")
        await stack.fire(made)
        assert (await stack.delivered()).text == "Standup in 5 minutes."
    section = _section(provider.requests[0])
    assert "delivered to that chat" in section
    assert NOTIFY_MARKER not in section
