"""Model providers behind the `Provider` protocol."""

from core.providers.base import Completion, ModelRequest, Provider, ToolSpec, complete
from core.providers.demo import DEMO_NOTICE, DemoProvider
from core.providers.registry import ProviderEntry, ProviderRegistry, Resolved
from core.providers.scripted import ScriptedProvider, text_reply, tool_reply

__all__ = [
    "DEMO_NOTICE",
    "Completion",
    "DemoProvider",
    "ModelRequest",
    "Provider",
    "ProviderEntry",
    "ProviderRegistry",
    "Resolved",
    "ScriptedProvider",
    "ToolSpec",
    "complete",
    "text_reply",
    "tool_reply",
]
