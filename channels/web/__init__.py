"""The local web page: a chat channel, live events, schedules, sessions and costs.

`WebAdapter` is the channel (Inbound to the bus, Outbound from it, like every platform);
`WebServer` is the aiohttp application around it, behind a token (`WebAuth`). Only the spec
is loaded with the package: every process reads the registered platforms' specs, and only
those that serve the page need aiohttp's server and the Markdown renderer.
"""

from typing import TYPE_CHECKING, Any

from channels.web.spec import SPEC, WebSettings

if TYPE_CHECKING:
    from channels.web.adapter import WebAdapter
    from channels.web.auth import WebAuth
    from channels.web.server import WebServer

__all__ = ["SPEC", "WebAdapter", "WebAuth", "WebServer", "WebSettings"]

_LAZY = {
    "WebAdapter": "channels.web.adapter",
    "WebAuth": "channels.web.auth",
    "WebServer": "channels.web.server",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
