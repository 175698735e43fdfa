"""The local web page: a chat channel, live events, schedules, sessions and costs.

`WebAdapter` is the channel (Inbound to the bus, Outbound from it, like every platform);
`WebServer` is the aiohttp application around it, behind a token (`WebAuth`).
"""

from channels.web.adapter import WebAdapter
from channels.web.auth import WebAuth
from channels.web.server import WebServer
from channels.web.spec import SPEC, WebSettings

__all__ = ["SPEC", "WebAdapter", "WebAuth", "WebServer", "WebSettings"]
