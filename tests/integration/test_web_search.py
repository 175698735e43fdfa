"""`web_search` against the Brave Search and SearXNG fake on 127.0.0.1, alone and in a turn.

The one real wait is the timeout test (its timeout is a fraction of a second).
"""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from core.backends.sql.store import SqlStore
from core.errors import ToolError
from core.events import ModelEvent, RunCompleted, ToolFinished
from core.messages import Message, ToolCall
from core.modes import SAFE_CHAT
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.redact import Redactor
from core.runtime import AgentRuntime, ChannelContext
from core.safety import FENCE_CLOSE, FENCE_OPEN
from core.tools import ToolContext, ToolRegistry, builtin_tools, web_fetch_tool
from core.tools.web_search import WebSearchSettings, web_search_tool
from tests.fakes import FakeSearch, Hit

CONTEXT = ToolContext(session_id="s")
HITS = [
    Hit("Oslo weather &amp; forecast", "https://weather.example/oslo", "Oslo weather: sunny."),
    Hit("Yr", "https://yr.example/oslo", "Forecast for Oslo, Norway."),
    Hit("Not a web result", "javascript:alert(1)", "skipped"),
    Hit("Third", "https://third.example/", "More Oslo weather."),
]


def brave(fake: FakeSearch, **options: object) -> WebSearchSettings:
    return WebSearchSettings(
        api="brave",
        url=fake.brave_url,
        api_key=SecretStr(fake.api_key),
        **options,
    )


def searxng(fake: FakeSearch, **options: object) -> WebSearchSettings:
    return WebSearchSettings(api="searxng", url=fake.url, **options)


async def search(settings: WebSearchSettings, query: str = "oslo weather") -> str:
    return await web_search_tool(settings)({"query": query}, CONTEXT)


def body_of(output: str) -> list[str]:
    assert output.count(FENCE_OPEN) == 1 and output.endswith(FENCE_CLOSE)
    return output.split(FENCE_OPEN + "\n", 1)[1].removesuffix("\n" + FENCE_CLOSE).split("\n")


async def test_brave_results_come_back_plain_and_fenced(fake_search: FakeSearch) -> None:
    fake_search.hits = HITS

    output = await search(brave(fake_search, max_results=2), "  oslo   weather ")

    assert output.startswith("[Web search results for 'oslo weather' from Brave Search")
    # The fake marks query words in <strong> as Brave does; entities are decoded.
    assert body_of(output) == [
        "1. Oslo weather & forecast",
        "   https://weather.example/oslo",
        "   Oslo weather: sunny.",
        "2. Yr",
        "   https://yr.example/oslo",
        "   Forecast for Oslo, Norway.",
    ]
    [sent] = fake_search.requests
    assert sent.params == {"q": "oslo weather", "count": "2"}
    assert sent.headers["X-Subscription-Token"] == fake_search.api_key


async def test_searxng_results_are_cut_to_the_maximum(fake_search: FakeSearch) -> None:
    fake_search.hits = HITS

    output = await search(searxng(fake_search, max_results=3))

    assert output.startswith("[Web search results for 'oslo weather' from SearXNG")
    lines = body_of(output)
    # The javascript: result is dropped; three http(s) results remain, numbered.
    assert [line for line in lines if not line.startswith(" ")] == [
        "1. Oslo weather & forecast",
        "2. Yr",
        "3. Third",
    ]
    [sent] = fake_search.requests
    assert sent.params == {"q": "oslo weather", "format": "json"}
    assert "X-Subscription-Token" not in sent.headers


async def test_no_results(fake_search: FakeSearch) -> None:
    assert body_of(await search(searxng(fake_search))) == ["(no results)"]


@pytest.mark.parametrize(
    ("status", "sentence"),
    [
        (401, "Brave Search refused the search (HTTP 401): the search API key or access is not"),
        (429, "Brave Search is rate-limiting searches (HTTP 429); try again later."),
        (500, "Brave Search failed (HTTP 500); try again later."),
        (503, "Brave Search failed (HTTP 503); try again later."),
        (400, "Brave Search answered HTTP 400 to the search."),
    ],
)
async def test_brave_failures_are_one_sentence(
    fake_search: FakeSearch, status: int, sentence: str
) -> None:
    fake_search.fail_next(status)
    with pytest.raises(ToolError) as caught:
        await search(brave(fake_search))
    assert str(caught.value).startswith(sentence)
    assert fake_search.api_key not in str(caught.value)


async def test_a_wrong_brave_key_names_the_key_not_its_value(fake_search: FakeSearch) -> None:
    wrong = brave(fake_search).model_copy(update={"api_key": SecretStr("BSAwrongkey99")})
    with pytest.raises(ToolError) as caught:
        await search(wrong)
    # Brave answers 422 SUBSCRIPTION_TOKEN_INVALID for a bad key.
    assert "(HTTP 422): the search API key or access is not valid" in str(caught.value)
    assert "BSAwrongkey99" not in str(caught.value)


@pytest.mark.parametrize(
    ("status", "sentence"),
    [
        (403, "SearXNG refused the search (HTTP 403): the instance does not answer JSON"),
        (301, "SearXNG answered a redirect (HTTP 301), which is not followed: check its URL."),
        (429, "SearXNG is rate-limiting searches (HTTP 429)"),
        (502, "SearXNG failed (HTTP 502)"),
    ],
)
async def test_searxng_failures_are_one_sentence(
    fake_search: FakeSearch, status: int, sentence: str
) -> None:
    fake_search.fail_next(status)
    with pytest.raises(ToolError, match=sentence.replace("(", r"\(").replace(")", r"\)")):
        await search(searxng(fake_search))


async def test_a_slow_search_times_out(fake_search: FakeSearch) -> None:
    fake_search.stall_next()
    with pytest.raises(ToolError) as caught:
        await search(searxng(fake_search, timeout=0.2))
    assert str(caught.value) == "SearXNG did not answer within 0.2 s; try again later."
    # The next search is answered: the stalled one held nothing.
    fake_search.hits = HITS[:1]
    assert body_of(await search(searxng(fake_search)))[0] == "1. Oslo weather & forecast"


async def test_an_unreachable_api_is_one_sentence(fake_search: FakeSearch) -> None:
    gone = searxng(fake_search)
    await fake_search.close()
    with pytest.raises(ToolError, match=r"^Could not reach SearXNG \(\w+\)\.$"):
        await search(gone)


async def test_a_safe_chat_turn_searches_then_can_fetch_a_result(
    fake_search: FakeSearch, store: SqlStore
) -> None:
    """Through the runtime: offered in safe-chat next to web_fetch, its output scrubbed of
    the configured secrets and handed to the model fenced."""
    fake_search.hits = [
        Hit("Leak", "https://leak.example/", "the key is sk-test-SECRET-0123456789 here"),
        *HITS[:2],
    ]
    seen: list[ModelRequest] = []

    def first(request: ModelRequest) -> list[ModelEvent]:
        seen.append(request)
        call = ToolCall(id="c1", name="web_search", arguments={"query": "oslo weather"})
        return tool_reply(call)

    def second(request: ModelRequest) -> list[ModelEvent]:
        seen.append(request)
        return text_reply("It is sunny in Oslo.")

    runtime = AgentRuntime(
        provider=ScriptedProvider([first, second]),
        model="m",
        tools=ToolRegistry(
            [*builtin_tools(), web_fetch_tool(), web_search_tool(brave(fake_search))]
        ),
        store=store,
        redactor=Redactor(["sk-test-SECRET-0123456789", fake_search.api_key]),
    )
    session = await store.current_session("telegram:b:c")
    context = ChannelContext(platform="telegram", mode=SAFE_CHAT, session_key="telegram:b:c")
    events = [e async for e in runtime.run(session.id, Message.user("weather?"), context)]

    offered = [spec.name for spec in seen[0].tools]
    assert "web_search" in offered and "web_fetch" in offered
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert (finished.name, finished.is_error) == ("web_search", False)
    assert isinstance(events[-1], RunCompleted)
    handed = str(seen[1].messages[-1].model_dump())
    assert "Web search results for 'oslo weather' from Brave Search" in handed
    assert FENCE_OPEN in handed and "https://weather.example/oslo" in handed
    assert "sk-test-SECRET-0123456789" not in handed
    assert "[redacted]" in handed
