"""`REDIS_URL`'s three forms: one server, a Redis Cluster, or a master found through Sentinel.

- `redis://[user:password@]host:port[/db]` (`rediss://` for TLS, `unix://` for a socket): one
  server, as redis-py reads it.
- `redis+cluster://[user:password@]host:port[,host:port...]` (`rediss+cluster://` for TLS): a
  Redis Cluster, reached through any of its nodes (the client learns the others from them).
- `redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]`: the master the
  Sentinels at those addresses name for `service`, followed across failovers. The
  credentials are the master's; the Sentinels themselves are asked without.

The same forms as the `limits` package's storage URLs. A password never appears in an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

__all__ = ["RedisLocation", "parse_redis_url"]

_SERVER_SCHEMES = ("redis", "rediss", "unix")
_CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
_SENTINEL_SCHEMES = ("redis+sentinel",)


@dataclass(frozen=True)
class RedisLocation:
    """Where Redis is: `url` for one server (redis-py parses it), else the nodes to ask."""

    kind: Literal["server", "cluster", "sentinel"]
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False


def parse_redis_url(url: str) -> RedisLocation:
    """The location `url` names; `ValueError` (one line, no password) when it names none."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in _SERVER_SCHEMES:
        return RedisLocation("server", url)
    if scheme not in _CLUSTER_SCHEMES + _SENTINEL_SCHEMES:
        forms = ", ".join(f"{name}://" for name in _SERVER_SCHEMES + _CLUSTER_SCHEMES)
        raise ValueError(f"not a Redis URL: use {forms} or redis+sentinel:// (got {scheme!r})")
    # urlsplit reads one host only: the addresses are split by hand.
    rest = url.split("://", 1)[1]
    location, _, path = rest.partition("/")
    path, _, _query = path.partition("?")
    credentials, _, hosts = location.rpartition("@")
    username = password = None
    if credentials:
        user, colon, secret = credentials.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    nodes = tuple(_node(address, scheme) for address in hosts.split(","))
    if scheme in _CLUSTER_SCHEMES:
        if path.strip("/"):
            raise ValueError(f"{scheme}:// takes no database or path (a cluster has database 0)")
        return RedisLocation(
            "cluster",
            url,
            nodes,
            username=username,
            password=password,
            tls=scheme.startswith("rediss"),
        )
    service, _, db = path.strip("/").partition("/")
    if not service:
        raise ValueError(
            "redis+sentinel:// needs the service name: redis+sentinel://host:port/NAME"
        )
    if db and not db.isdigit():
        raise ValueError(
            f"redis+sentinel://: the database after the service name must be a number, not {db!r}"
        )
    return RedisLocation(
        "sentinel",
        url,
        nodes,
        service=unquote(service),
        db=int(db or 0),
        username=username,
        password=password,
    )


def _node(address: str, scheme: str) -> tuple[str, int]:
    """`host:port` (`[v6]:port`) of one node; the port defaults to 26379 for a Sentinel."""
    default = 26379 if scheme in _SENTINEL_SCHEMES else 6379
    try:
        parsed = urlsplit(f"//{address}")
        host, port = parsed.hostname, parsed.port
    except ValueError:
        host, port = None, None
    if not host:
        raise ValueError(f"{scheme}://: {address!r} is not host:port")
    return host, port or default
