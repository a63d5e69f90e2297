"""Consumer groups whose members share the shards (`changes(group=G, member=M)`).

A group's committed cursor is the setting `feed.group.G` (what `feed_commit` stores); its
members are the setting `feed.group.G.members`, a JSON object of member name → the end of
its lease (unix seconds). A member's read renews its lease once half of it has passed
(`LEASE_SECONDS`: so a read costs one settings read, and a durable write only every
half lease); a member whose lease ran out (it died, or stopped reading) is dropped by the
next renewal. The shards are dealt to the live members in name order
(`core.feed.deal`), so every member computes the same deal from the same list.

A member reads its shards from the later of its own cursor and the group's committed
position; a shard that changed hands is read by its new member from there, so what the
old member read but did not commit is read again (at-least-once, never skipped). A
member's commit moves only its shards, and never backward (each shard's position is the
larger of the stored and the committed one), in a compare-and-swap loop: members commit
concurrently without losing each other's positions.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from ..core import feed as _feed
from ..core import feedalign
from ..core.errors import InvalidRequest
from ..storage.backend import Backend

LEASE_SECONDS = 30.0
GROUP = "feed.group."
MAX_NAME = 100


class Groups:
    """The committed positions and the members of consumer groups; see the module doc."""

    def __init__(self, backend: Backend, now: Callable[[], float] = time.time) -> None:
        self._backend = backend
        self._now = now

    def committed(self, group: str) -> str | None:
        """The cursor consumer group `group` last committed (None: the start)."""
        raw = self._backend.get_meta(GROUP + name(group, "consumer group"))
        return None if raw is None else raw.decode()

    def join(self, group: str, member: str) -> frozenset[int]:
        """Renew `member`'s lease in `group` (joining it); the shards it reads."""
        key = f"{GROUP}{name(group, 'consumer group')}.members"
        name(member, "group member")
        while True:
            raw = self._backend.get_meta(key)
            leases: dict[str, float] = {} if raw is None else msgspec.json.decode(raw)
            now = self._now()
            live = {m: end for m, end in leases.items() if end > now}
            if live.get(member, 0.0) - now > LEASE_SECONDS / 2 and len(live) == len(leases):
                return _feed.deal(list(live), self._backend.shards, member)
            live[member] = now + LEASE_SECONDS
            if self._backend.swap_meta(key, raw, msgspec.json.encode(live)):
                return _feed.deal(list(live), self._backend.shards, member)

    def commit(self, group: str, cursor: str, member: str | None) -> None:
        """Store `cursor` as `group`'s position: all of it (no member: the last commit
        wins), or `member`'s shards, each moved forward only."""
        shards = self._backend.shards
        positions = _feed.decode(cursor, shards)  # refuse a foreign cursor before storing it
        key = GROUP + name(group, "consumer group")
        owned = None if member is None else self.join(group, member)
        while True:
            raw = self._backend.get_meta(key)
            value = cursor
            if owned is not None:
                stored = _feed.start(shards) if raw is None else _feed.decode(raw.decode(), shards)
                value = _feed.encode(
                    tuple(
                        feedalign.later(old, new) if s in owned else old
                        for s, (new, old) in enumerate(zip(positions, stored, strict=True))
                    )
                )
            if self._backend.swap_meta(key, raw, value.encode()):
                return


def name(value: object, what: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME:
        raise InvalidRequest(f"a {what} is a name of 1..{MAX_NAME} characters, got {value!r:.60}")
    return value
