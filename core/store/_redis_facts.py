"""The `FactStore` of `RedisStore`: remembered facts in an inverted index without modules.

Layout per scope (keys in `core/redis_keys.py`): a hash of the facts' JSON, a hash of the terms
each fact was indexed under, a sorted set of fact ids by `created_at`, a set of fact ids per
term, and the scope's vocabulary (a sorted set of its terms, for prefix matching). Terms are
`core.facts.search_terms`, the same rules the SQLite store's FTS5 tokenizer follows.

A search ranks facts by how many of the query's terms they contain (the prefix counts as one
term, however many terms it begins), then newest first. It is one script, so it sees the index
at one instant.

Writes are scripts and safe to replay (`core/store/redis.py` says why): remembering a stored
fact again changes nothing, and forgetting keeps a receipt so that a replay answers what the
first run did. Forgetting takes the fact out of each term's set, which the script must be
given as KEYS: the caller reads the fact's terms first, and the script refuses (and the caller
reads again) if they changed in between.

Each method checks its arguments and turns client errors into `StoreError`s.
"""

from __future__ import annotations

from datetime import UTC
from typing import Final, cast
from uuid import uuid4

from core.errors import StoreError
from core.facts import MemoryFact, MemoryQuery, search_terms
from core.store._redis_base import RECEIPT_SECONDS, RedisBase
from core.store._shared import check_aware, check_limit, epoch_micros

__all__ = ["RedisFacts"]

# How often a forget reads the fact's terms again when another write changed them meanwhile.
_ATTEMPTS: Final = 5
# A prefix stands for at most this many of the scope's terms (the first in text order).
_MAX_PREFIX_TERMS: Final = 32

# KEYS: facts, fact terms, order, vocabulary, then one term set per term
# ARGV: id, fact (JSON), terms (space-separated), created_at (epoch microseconds), then the
#       terms, ARGV[i] being the term of KEYS[i]
# Returns 1 when the fact is stored (now, or before, identical), 0 when another fact of the
# scope has its id.
_REMEMBER: Final = """
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored then
  if stored == ARGV[2] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
for i = 5, #KEYS do
  redis.call('SADD', KEYS[i], ARGV[1])
  redis.call('ZADD', KEYS[4], 0, ARGV[i])
end
return 1
"""

# KEYS: facts, fact terms, order, vocabulary, receipt, then one term set per stored term
# ARGV: id, stored terms (space-separated) as read, receipt lifetime (s), then the terms,
#       ARGV[i - 2] being the term of KEYS[i]
# Returns 1 when it forgot the fact, 0 when there was none, -1 (nothing done) when the stored
# terms are not the ones read. A replay returns the first run's reply.
_FORGET: Final = """
local done = redis.call('GET', KEYS[5])
if done then return tonumber(done) end
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if not stored then return 0 end
if stored ~= ARGV[2] then return -1 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
for i = 6, #KEYS do
  redis.call('SREM', KEYS[i], ARGV[1])
  if redis.call('SCARD', KEYS[i]) == 0 then redis.call('ZREM', KEYS[4], ARGV[i - 2]) end
end
redis.call('SET', KEYS[5], 1, 'EX', ARGV[3])
return 1
"""

# KEYS: facts, order, then the term sets of each query term in turn
# ARGV: limit, how many query terms, then per query term how many of KEYS are its sets (a
#       whole term has one; a prefix one per term it begins, maybe none)
# Returns the JSON of at most `limit` facts: most query terms matched first, then the newest
# (`created_at`, then id, both descending, like the SQLite store's ties).
_SEARCH: Final = """
local hits = {}
local next_key = 3
for term = 1, tonumber(ARGV[2]) do
  local size = tonumber(ARGV[2 + term])
  local seen = {}
  for k = next_key, next_key + size - 1 do
    for _, id in ipairs(redis.call('SMEMBERS', KEYS[k])) do
      if not seen[id] then
        seen[id] = true
        hits[id] = (hits[id] or 0) + 1
      end
    end
  end
  next_key = next_key + size
end
local ranked = {}
for id, count in pairs(hits) do
  local created = redis.call('ZSCORE', KEYS[2], id)
  if created then table.insert(ranked, {id, count, tonumber(created)}) end
end
table.sort(ranked, function(a, b)
  if a[2] ~= b[2] then return a[2] > b[2] end
  if a[3] ~= b[3] then return a[3] > b[3] end
  return a[1] > b[1]
end)
local found = {}
for i = 1, math.min(tonumber(ARGV[1]), #ranked) do
  table.insert(found, redis.call('HGET', KEYS[1], ranked[i][1]))
end
return found
"""


class RedisFacts(RedisBase):
    """The `FactStore` of `RedisStore`."""

    async def remember_fact(self, fact: MemoryFact) -> None:
        """Store a fact in its scope; the same fact again changes nothing.

        Raises `StoreError` for another fact with an id the scope holds, or a naive time.
        """
        check_aware(fact, f"fact {fact.id!r}")
        with self._translated(f"remember fact {fact.id!r} of {fact.scope!r}"):
            scope = fact.scope
            terms = search_terms(fact.text)
            fact = fact.model_copy(update={"created_at": fact.created_at.astimezone(UTC)})
            stored = await self._script(_REMEMBER)(
                keys=[
                    self._keys.facts(scope),
                    self._keys.fact_terms(scope),
                    self._keys.fact_order(scope),
                    self._keys.fact_vocabulary(scope),
                    *(self._keys.fact_term(scope, term) for term in terms),
                ],
                args=[
                    fact.id,
                    fact.model_dump_json(),
                    " ".join(terms),
                    epoch_micros(fact.created_at),
                    *terms,
                ],
            )
            if int(stored) == 0:
                raise StoreError(f"scope {scope!r} already holds another fact with id {fact.id!r}")

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        """The facts of `scope` sharing the most terms with `query`, then the newest; without
        search terms, the newest facts."""
        check_limit(limit)
        with self._translated(f"search the facts of {scope!r}"):
            parsed = MemoryQuery.parse(query)
            if parsed.empty:
                return await self.list_facts(scope, limit=limit)
            if limit == 0:
                return []
            groups = [[term] for term in parsed.terms]
            if parsed.prefix is not None:
                groups.append(await self._terms_beginning(scope, parsed.prefix))
            found = await self._script(_SEARCH)(
                keys=[
                    self._keys.facts(scope),
                    self._keys.fact_order(scope),
                    *(self._keys.fact_term(scope, term) for group in groups for term in group),
                ],
                args=[limit, len(groups), *(len(group) for group in groups)],
            )
            return [MemoryFact.model_validate_json(body) for body in cast(list[bytes], found)]

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        """The facts of `scope`, newest first."""
        check_limit(limit)
        with self._translated(f"list the facts of {scope!r}"):
            if limit == 0:
                return []
            ids = cast(
                list[bytes],
                await self._client.zrevrange(self._keys.fact_order(scope), 0, limit - 1),
            )
            if not ids:
                return []
            bodies = cast(
                list[bytes | None], await self._client.hmget(self._keys.facts(scope), ids)
            )
            # A fact forgotten between the two reads is simply left out.
            return [MemoryFact.model_validate_json(b) for b in bodies if b is not None]

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete the fact `fact_id` of `scope`; False if the scope holds no such fact."""
        with self._translated(f"forget fact {fact_id!r} of {scope!r}"):
            for _ in range(_ATTEMPTS):
                stored = await self._client.hget(self._keys.fact_terms(scope), fact_id)
                if stored is None:
                    return False
                terms = _text(stored).split()
                forgotten = int(
                    await self._script(_FORGET)(
                        keys=[
                            self._keys.facts(scope),
                            self._keys.fact_terms(scope),
                            self._keys.fact_order(scope),
                            self._keys.fact_vocabulary(scope),
                            self._keys.write_receipt(uuid4().hex),
                            *(self._keys.fact_term(scope, term) for term in terms),
                        ],
                        args=[fact_id, stored, RECEIPT_SECONDS, *terms],
                    )
                )
                if forgotten >= 0:
                    return forgotten == 1
            raise StoreError(f"fact {fact_id!r} of {scope!r} kept changing while being forgotten")

    async def _terms_beginning(self, scope: str, prefix: str) -> list[str]:
        """The scope's indexed terms that begin with `prefix` (itself included)."""
        start = b"[" + prefix.encode()
        # 0xff never occurs in UTF-8, so every term that begins with `prefix` sorts before it.
        found = await self._client.zrangebylex(
            self._keys.fact_vocabulary(scope), start, start + b"\xff", 0, _MAX_PREFIX_TERMS
        )
        return [_text(term) for term in cast(list[bytes], found)]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
