"""`Profile`: one bot persona, from the files of a `profiles/<name>/` folder.

`profile.toml` (settings), `SOUL.md` (identity), `SYSTEM.md` (replaces the identity),
`MEMORY.md`, `USER.md`, `skills/*/SKILL.md` and the text files of `knowledge/`. Core only
validates; reading the files happens in `bots/`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.arrivals import BusyMode
from core.attention import AttentionSettings
from core.budgets import Budgets
from core.checkpoints import CrashPolicy
from core.consolidation import MemorySettings
from core.documents import DocumentSettings
from core.embeddings import EmbeddingSettings
from core.errors import ConfigError
from core.extensions import Extensions, Reloader, load_extensions
from core.images import ImageSettings
from core.knowledge import KnowledgeFile
from core.mcp import McpSettings
from core.model_choice import ModelsSettings
from core.playbook import PlaybookSettings
from core.policy import AllowList, PlatformAccess
from core.pricing import Price
from core.prompt import DEFAULT_IDENTITY, SystemPrompt
from core.ratelimit import RateLimitSettings
from core.redact import Redactor
from core.session_reset import SessionReset
from core.skills import Skill
from core.subagents import SubagentOptions
from core.tool_hooks import FailMode, HookSpec, ToolHooks, load_tool_hooks
from core.tools.browser import BrowserSettings
from core.voice import VoiceSettings
from core.watchdog import WatchdogSettings

__all__ = ["HooksOptions", "Profile", "ProfileSettings", "Skill"]


class HooksOptions(BaseModel):
    """`[hooks]`: what the HTTP hooks listener may do (`bots/hooks.py`), and the operator's
    tool hooks (`core/tool_hooks.py`, docs/hooks.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The only chats a hook may deliver to: `["telegram:123", "slack:C0123"]`. Empty: none,
    # so a leaked token cannot reach arbitrary chats.
    targets: list[str] = Field(default_factory=list)
    # Requests per token: a `limits` expression (`60/minute`, `10/second;500/hour`).
    rate: str = Field(default="60/minute", min_length=3)
    # Tool hooks: import paths ("mypkg.policy:check"), a list of them, or tables
    # `{call = "...", fail = "open", timeout = 2}`, called before / after each tool call.
    before_tool: HookSpec = Field(default_factory=list)
    after_tool: HookSpec = Field(default_factory=list)
    # Extensions (core/extensions.py, docs/extensions.md), in the same forms: called with the
    # person's text, the built system prompt, and the messages of each model call.
    input: HookSpec = Field(default_factory=list)
    before_agent_start: HookSpec = Field(default_factory=list)
    context: HookSpec = Field(default_factory=list)
    # A hook that raises or times out: "closed" blocks the call (ends the turn, for an
    # extension), "open" goes on as if it had not been there.
    fail: FailMode = "closed"
    # Seconds one hook may take.
    timeout: float = Field(default=5.0, gt=0, le=60)

    def tool_hooks(self, *, redactor: Redactor | None = None, source: str = "[hooks]") -> ToolHooks:
        """The tool hooks named here, imported; a bad one is a `ConfigError` naming it."""
        return load_tool_hooks(
            before_tool=self.before_tool,
            after_tool=self.after_tool,
            fail=self.fail,
            timeout=self.timeout,
            redactor=redactor,
            source=source,
        )

    def extensions(
        self,
        *,
        redactor: Redactor | None = None,
        reload: Reloader | None = None,
        source: str = "[hooks]",
    ) -> Extensions:
        """The extensions named here, imported; a bad one is a `ConfigError` naming it."""
        return load_extensions(
            input=self.input,
            before_agent_start=self.before_agent_start,
            context=self.context,
            fail=self.fail,
            timeout=self.timeout,
            redactor=redactor,
            reload=reload,
            source=source,
        )


class ProfileSettings(BaseModel):
    """The keys of `profile.toml`. Unknown keys are errors, so typos do not pass silently."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str | None = None
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_steps: int = Field(default=8, ge=1, le=100)
    # After each tool round the next model call is told to check the results against the task
    # (core/tool_rounds.py); `verify_criteria`: what "done" means for this bot, added to it.
    verify_after_tools: bool = False
    verify_criteria: str = Field(default="", max_length=2_000)
    max_tokens: int = Field(default=4096, ge=1)
    # Seconds one model call may take, streaming included (each retry gets its own).
    provider_timeout: float = Field(default=120.0, gt=0)
    # Seconds a model stream may go silent once its answer began before it is taken for cut
    # (core/providers/idle.py); 0: no limit. The wait for the first piece is provider_timeout's.
    stream_idle_timeout: float = Field(default=60.0, ge=0)
    tool_timeout: float = Field(default=30.0, gt=0)
    # Seconds the `ask_user` tool waits for the person's answer before the turn goes on.
    ask_timeout: float = Field(default=600.0, gt=0, le=86_400)
    max_input_chars: int = Field(default=20_000, ge=1)
    concurrency: int = Field(default=8, ge=1, le=1000)
    # Providers to try, in order, when the chosen one is unavailable, e.g. ["openai"].
    fallback: list[str] = Field(default_factory=list)
    # Spending limit per conversation in USD; unset: no limit.
    max_spend_usd: float | None = Field(default=None, ge=0)
    # Events of a turn its reader (a chat, the web page) may leave unread before the model's
    # stream waits for it (core/event_buffer.py).
    stream_buffer_size: int = Field(default=256, ge=1, le=65_536)
    # Attempts per model call and the time they may take in all, for retryable failures.
    retry_attempts: int = Field(default=4, ge=1, le=20)
    retry_seconds: float = Field(default=60.0, gt=0)
    # Tool calls an open model writes out as text instead of calling natively
    # (`<tool_call>{...}</tool_call>`, a ```json block) run as real ones (docs/tools.md).
    text_tool_calls: bool = False
    # Capability mode per platform, e.g. {<platform> = "safe-chat"}. The profile loader in
    # `bots/` fills in each platform's default mode when the file has no [modes] table.
    modes: dict[str, str] = Field(default_factory=dict)
    # Capability mode per chat, keyed `<platform>:<bot>:<chat>`.
    chat_modes: dict[str, str] = Field(default_factory=dict)
    # Allowlists per platform: `[allow.<platform>] users = ["123"]`; no entry: open to all.
    allow: dict[str, AllowList] = Field(default_factory=dict)
    # In groups: answer only when addressed ("mention") or every message ("all"). The older
    # key: `[access.<platform>] group_policy`, when set, decides instead.
    group_replies: Literal["mention", "all"] = "mention"
    # Who may talk to the bot, per platform: `[access.<platform>] dm_policy = "pairing"`,
    # `group_policy`, `groups` (docs/access.md). A platform without a table: pairing for DMs.
    access: dict[str, PlatformAccess] = Field(default_factory=dict)
    # Options of one platform, `[channels.<platform>]`: each channel validates its own table
    # (the profile loader in `bots/` does, so a typo stops the start).
    channels: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # People trusted with everything: "<platform>:<user id>". The profile loader fills in
    # the operators of local channels when the file has no `admins`.
    admins: list[str] = Field(default_factory=list)
    # The model's context window in tokens; unset: the built-in table's (core/context.py).
    context_window: int | None = Field(default=None, ge=1_000)
    # Compact (summarize older turns) when a request nears this share of the window...
    compaction_trigger: float = Field(default=0.8, ge=0.5, le=0.95)
    # ...keeping at least this many of the newest messages as they are.
    compaction_keep: int = Field(default=8, ge=1, le=200)
    # Prices of models the built-in table lacks (or other prices for it), USD per million
    # tokens: `[prices."my-model"] input = 1.0, output = 2.0, cache_read = 0, cache_write = 0`.
    prices: dict[str, Price] = Field(default_factory=dict)
    # MCP servers whose tools the bot offers: `[mcp.<name>]` (docs/tools.md).
    mcp: McpSettings = Field(default_factory=dict)
    # A turn a crash cut off, found at start-up: carry it on, or tell the user to send it again.
    on_crash: CrashPolicy = "resume"
    # A person's message that comes while their turn runs in that chat: joins it before its
    # next model call ("steer"), or the turn's first call waits `busy_window` seconds from the
    # first message and answers what came by then ("collect"), or waits its turn ("queue").
    busy: BusyMode = "steer"
    busy_window: float = Field(default=1.5, ge=0, le=60)
    # Rate limits per person and per chat and a daily cap on a person's turns:
    # `[limits] rate_limit = "20/minute"`, `chat_rate_limit`, `daily_turns` (docs/budgets.md).
    limits: RateLimitSettings = Field(default_factory=RateLimitSettings)
    # Spending limits in USD: `[budgets] global_daily`, `per_user_daily`, `per_chat_daily`,
    # `per_session` (`max_spend_usd` is its older name), `per_schedule_run` (docs/budgets.md).
    budgets: Budgets = Field(default_factory=Budgets)
    # Schedules people make in chats: the fewest seconds between two runs of a repeating one
    # (admins and the CLI may go down to 10), and how many active ones a person and a chat
    # may have (admins and the CLI are not counted against).
    min_schedule_interval: int = Field(default=300, ge=10)
    max_schedules_per_person: int = Field(default=20, ge=0)
    max_schedules_per_chat: int = Field(default=50, ge=0)
    # The HTTP hooks listener's targets and rate limit.
    hooks: HooksOptions = Field(default_factory=HooksOptions)
    # Conversations that start afresh by themselves: `[sessions] reset_idle`, `reset_at`.
    sessions: SessionReset = Field(default_factory=SessionReset)
    # Documents people send (PDF, DOCX, text, Markdown, CSV, JSON): `[documents] max_chars`
    # of each one's text for the model, `max_bytes` downloaded at most, `max_per_message`.
    documents: DocumentSettings = Field(default_factory=DocumentSettings)
    # Voice notes and audio files people send: `[voice]` names the transcription endpoint
    # (default: the OpenAI key and base URL) and the limits (`max_bytes`, `max_seconds`).
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    # Images `generate_image` makes: `[images]` names the endpoint (default: the OpenAI key and
    # base URL), the model, the size and the `price_per_image` charged to the ledger.
    images: ImageSettings = Field(default_factory=ImageSettings)
    # Hybrid memory search: `[embeddings]` names the endpoint that embeds remembered facts;
    # off unless `enabled` (each fact and each turn's memory search then costs a request).
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    # Memory that consolidates itself: `[memory] consolidate` (before compaction, default on),
    # `consolidate_after = "30m"` (after a quiet period, default off), docs/memory.md.
    memory: MemorySettings = Field(default_factory=MemorySettings)
    # Tool sequences that worked, offered as hints for similar requests (`[playbook]`), and
    # the attention layer of each person's turn (`[attention]`); both on by default.
    playbook: PlaybookSettings = Field(default_factory=PlaybookSettings)
    attention: AttentionSettings = Field(default_factory=AttentionSettings)
    # Models a chat may switch to with `/model`: `[models] allowed = [{provider = "openai",
    # model = "gpt-4o-mini"}]`. Empty: switching is off, every chat uses `model`.
    models: ModelsSettings = Field(default_factory=ModelsSettings)
    # Sub-agents (`delegate`, core/subagents.py): one child turn's `[subagents] max_steps`,
    # `timeout_seconds`, `max_cost_usd`, and `max_parallel` children at once (docs/tools.md).
    subagents: SubagentOptions = Field(default_factory=SubagentOptions)
    # The watchdog for a deaf platform: `[watchdog] silent_after = "30m"` (or per platform),
    # `failures`, `check_every`... (docs/operators.md, "Watchdog").
    watchdog: WatchdogSettings = Field(default_factory=WatchdogSettings)
    # The knowledge folder (text and Markdown files the system prompt carries): a path
    # relative to the profile folder, or absolute; and the characters of it the prompt holds.
    knowledge_dir: str = Field(default="knowledge", min_length=1)
    knowledge_max_chars: int = Field(default=20_000, ge=0, le=1_000_000)
    # The `browser` tool (core/tools/browser.py, `full` mode only): off unless `[browser]
    # enabled = true`; `executable_path` (Debian's chromium), `idle_seconds`, `timeout`...
    browser: BrowserSettings = Field(default_factory=BrowserSettings)

    @model_validator(mode="after")
    def _allowlist_policies_have_a_list(self) -> ProfileSettings:
        for platform, access in self.access.items():
            listed = self.allow.get(platform)
            if access.dm_policy == "allowlist" and not (
                listed and (listed.users or listed.chats or listed.teams)
            ):
                raise ValueError(
                    f'access.{platform}: dm_policy = "allowlist" needs an [allow.{platform}]'
                    " table naming users, chats or teams"
                )
        return self

    @model_validator(mode="after")
    def _criteria_need_verification(self) -> ProfileSettings:
        if self.verify_criteria.strip() and not self.verify_after_tools:
            raise ValueError("verify_criteria is only read with verify_after_tools = true")
        return self


class Profile(BaseModel):
    """A bot persona: its settings and the texts of its system prompt."""

    model_config = ConfigDict(frozen=True)

    name: str
    settings: ProfileSettings = Field(default_factory=ProfileSettings)
    # SOUL.md, or the built-in identity.
    identity: str = DEFAULT_IDENTITY
    # SYSTEM.md: when present it replaces the identity entirely.
    system: str | None = None
    memory: str = ""
    user: str = ""
    # Sorted by name; the loader refuses two skills with one name.
    skills: list[Skill] = Field(default_factory=list)
    # The knowledge folder's text files, by name.
    knowledge: list[KnowledgeFile] = Field(default_factory=list)

    @classmethod
    def parse(
        cls,
        name: str,
        data: dict[str, Any],
        *,
        source: str,
        identity: str | None,
        system: str | None = None,
        memory: str = "",
        user: str = "",
        skills: Sequence[Skill] = (),
        knowledge: Sequence[KnowledgeFile] = (),
    ) -> Profile:
        """Validate `profile.toml` data; errors name the file and the key."""
        try:
            settings = ProfileSettings.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            key = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise ConfigError(f"{source}: {key}: {first['msg']}") from None
        return cls(
            name=name,
            settings=settings,
            identity=identity or DEFAULT_IDENTITY,
            system=system or None,
            memory=memory,
            user=user,
            skills=sorted(skills, key=lambda s: s.name),
            knowledge=sorted(knowledge, key=lambda k: k.name),
        )

    def system_prompt(self, redactor: Redactor | None = None) -> SystemPrompt:
        """The system prompt builder for this profile's turns; with `redactor`, the knowledge
        files are scrubbed of secrets (they are documents dropped in a folder, not prose
        written for the prompt)."""
        scrub = redactor or (lambda text: text)
        return SystemPrompt(
            identity=self.identity,
            system=self.system,
            memory=self.memory,
            user=self.user,
            skills=tuple(self.skills),
            knowledge=tuple(KnowledgeFile(name=k.name, text=scrub(k.text)) for k in self.knowledge),
            knowledge_max_chars=self.settings.knowledge_max_chars,
        )
