"""The `AccessRecords` of `RedisStore`: per platform, a hash of pairing requests, a hash of
their codes and a hash of approvals (keys in `core/redis_keys.py`).

A request's value is its expiry (epoch microseconds, 20 digits, so text order is time order), a
space and its JSON; the scripts compare the prefix with `now` and read the JSON with cjson.
Filing, approving and denying are one script each, so two workers never both take the last
pending slot (or both push out the same oldest request) or both approve one code. Approving
and denying keep a receipt of their reply, so a replayed script answers what its first run
did; a replayed filing finds its own request and answers `exists` with the same code, which
`core/access.py` takes for `created`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final
from uuid import uuid4

from core.errors import StoreError
from core.store._redis_base import RECEIPT_SECONDS, RedisBase, text
from core.store._shared import check_aware, epoch_micros
from core.store.access import Approval, PairingAnswer, PairingRequest

__all__ = ["RedisAccess"]

# KEYS: requests, codes, pairing platforms. ARGV: user id, code, value, now (20 digits),
# max pending, platform. Returns {outcome, request JSON or "", JSON of each request that gave
# way...}.
_REQUEST: Final = """
local now = ARGV[4]
local pending = {}
local mine = nil
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local user, value = fields[i], fields[i + 1]
  local record = cjson.decode(string.sub(value, 22))
  if string.sub(value, 1, 20) <= now then
    redis.call('HDEL', KEYS[1], user)
    if redis.call('HGET', KEYS[2], record['code']) == user then
      redis.call('HDEL', KEYS[2], record['code'])
    end
  elseif user == ARGV[1] then
    mine = value
  elseif record['status'] == 'pending' then
    pending[#pending + 1] = {user, value, record['code']}
  end
end
if mine then return {'exists', string.sub(mine, 22)} end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return {'code_taken', ''} end
-- A full list: the pending requests that expire first give way.
table.sort(pending, function(a, b)
  local x, y = string.sub(a[2], 1, 20), string.sub(b[2], 1, 20)
  if x ~= y then return x < y end
  return a[1] < b[1]
end)
local answer = {'created', string.sub(ARGV[3], 22)}
local keep = math.max(tonumber(ARGV[5]) - 1, 0)
for i = 1, #pending - keep do
  local user, value, code = pending[i][1], pending[i][2], pending[i][3]
  redis.call('HDEL', KEYS[1], user)
  if redis.call('HGET', KEYS[2], code) == user then
    redis.call('HDEL', KEYS[2], code)
  end
  answer[#answer + 1] = string.sub(value, 22)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[6])
return answer
"""

# The live pending request with code ARGV[1] at time ARGV[2]: sets `user`, `value`, `request`
# or returns false. KEYS[1] requests, KEYS[2] codes.
_FIND: Final = """
local user = redis.call('HGET', KEYS[2], ARGV[1])
if not user then return false end
local value = redis.call('HGET', KEYS[1], user)
if not value or string.sub(value, 1, 20) <= ARGV[2] then return false end
local request = cjson.decode(string.sub(value, 22))
if request['status'] ~= 'pending' then return false end
"""

# KEYS: requests, codes, approvals, approval platforms, receipt. ARGV: code, now (20 digits),
# admin ("1" or ""), approved_at (ISO text), approved by, platform, receipt seconds.
_APPROVE: Final = f"""
local done = redis.call('GET', KEYS[5])
if done then return done end
{_FIND}
local approval = cjson.encode({{
  platform = ARGV[6], user_id = user, user_name = request['user_name'],
  admin = (ARGV[3] == '1'), approved_at = ARGV[4], approved_by = ARGV[5]
}})
redis.call('HDEL', KEYS[1], user)
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], user, approval)
redis.call('SADD', KEYS[4], ARGV[6])
redis.call('SET', KEYS[5], approval, 'EX', ARGV[7])
return approval
"""

# KEYS: requests, codes, receipt. ARGV: code, now (20 digits), receipt seconds.
# Returns the request's JSON as it was before the denial.
_DENY: Final = f"""
local done = redis.call('GET', KEYS[3])
if done then return done end
{_FIND}
request['status'] = 'denied'
redis.call('HSET', KEYS[1], user, string.sub(value, 1, 21) .. cjson.encode(request))
redis.call('SET', KEYS[3], string.sub(value, 22), 'EX', ARGV[3])
return string.sub(value, 22)
"""


class RedisAccess(RedisBase):
    """The `AccessRecords` of `RedisStore`."""

    async def request_pairing(
        self, request: PairingRequest, *, now: datetime, max_pending: int
    ) -> PairingAnswer:
        """File `request` unless its person has a live one or the code is in use; drops expired
        requests first, and the oldest pending ones past `max_pending` - 1."""
        check_aware(request, "the pairing request")
        value = f"{epoch_micros(request.expires_at):020d} {request.model_dump_json()}"
        platform = request.platform
        with self._translated(f"file a pairing request of {platform}:{request.user_id}"):
            outcome, body, *gave_way = await self._script(_REQUEST)(
                keys=[
                    self._keys.pairing_requests(platform),
                    self._keys.pairing_codes(platform),
                    self._keys.pairing_platforms(),
                ],
                args=[request.user_id, request.code, value, _micros(now), max_pending, platform],
            )
            found = PairingRequest.model_validate_json(text(body)) if text(body) else None
            dropped = [PairingRequest.model_validate_json(text(item)) for item in gave_way]
        return PairingAnswer.model_validate(
            {"outcome": text(outcome), "request": found, "gave_way": dropped}
        )

    async def pairing_requests(
        self, platform: str | None, *, now: datetime
    ) -> list[PairingRequest]:
        """The live pending requests of one platform (None: every one), oldest first."""
        cutoff = _micros(now)
        found: list[PairingRequest] = []
        with self._translated("list the pairing requests"):
            for name in await self._platforms(platform, self._keys.pairing_platforms()):
                values = await self._client.hvals(self._keys.pairing_requests(name))
                for value in map(text, values):
                    request = PairingRequest.model_validate_json(value[21:])
                    if value[:20] > cutoff and request.status == "pending":
                        found.append(request)
        return sorted(found, key=lambda r: (r.created_at, r.platform, r.user_id))

    async def approve_pairing(
        self, platform: str, code: str, *, now: datetime, admin: bool, by: str
    ) -> Approval | None:
        """Turn the live pending request with `code` into an approval; None if there is none."""
        with self._translated(f"approve the pairing code of {platform}"):
            body = await self._script(_APPROVE)(
                keys=[
                    self._keys.pairing_requests(platform),
                    self._keys.pairing_codes(platform),
                    self._keys.approvals(platform),
                    self._keys.approval_platforms(),
                    self._keys.write_receipt(uuid4().hex),
                ],
                args=[
                    code,
                    _micros(now),
                    "1" if admin else "",
                    now.isoformat(),
                    by,
                    platform,
                    RECEIPT_SECONDS,
                ],
            )
            return None if body is None else Approval.model_validate_json(text(body))

    async def deny_pairing(
        self, platform: str, code: str, *, now: datetime
    ) -> PairingRequest | None:
        """Mark the live pending request with `code` denied; the request as it was, or None."""
        with self._translated(f"deny the pairing code of {platform}"):
            body = await self._script(_DENY)(
                keys=[
                    self._keys.pairing_requests(platform),
                    self._keys.pairing_codes(platform),
                    self._keys.write_receipt(uuid4().hex),
                ],
                args=[code, _micros(now), RECEIPT_SECONDS],
            )
            return None if body is None else PairingRequest.model_validate_json(text(body))

    async def approval(self, platform: str, user_id: str) -> Approval | None:
        """This person's approval on `platform`, or None."""
        with self._translated(f"read the approval of {platform}:{user_id}"):
            body = await self._client.hget(self._keys.approvals(platform), user_id)
            return None if body is None else Approval.model_validate_json(text(body))

    async def approvals(self, platform: str | None) -> list[Approval]:
        """Every approval of one platform (None: every one), by platform, oldest first."""
        found: list[Approval] = []
        with self._translated("list the approvals"):
            for name in await self._platforms(platform, self._keys.approval_platforms()):
                values = await self._client.hvals(self._keys.approvals(name))
                found.extend(Approval.model_validate_json(text(v)) for v in values)
        return sorted(found, key=lambda a: (a.platform, a.approved_at, a.user_id))

    async def revoke_approval(self, platform: str, user_id: str) -> bool:
        """Take this person's approval back; whether there was one."""
        with self._translated(f"revoke the approval of {platform}:{user_id}"):
            return bool(await self._client.hdel(self._keys.approvals(platform), user_id))

    async def _platforms(self, platform: str | None, known: str) -> list[str]:
        if platform is not None:
            return [platform]
        return sorted(text(name) for name in await self._client.smembers(known))


def _micros(now: datetime) -> str:
    """`now` as 20 digits of epoch microseconds; a naive `now` has no instant and is refused."""
    if now.utcoffset() is None:
        raise StoreError("the access records were given a naive `now`; it must be aware")
    return f"{epoch_micros(now):020d}"
