"""Unique index entries that writes have been granted but not yet stored.

A unique index refuses a write whose key another live object holds. The
stored index answers that only for writes already applied: two writes of
the same key that are resolved before either is applied (in one batch, or
while an earlier one waits in the error queue) would both find the key
free. So every entry a write makes in a unique index (the new key, and the
removal of the old one) is *claimed* here when the write is
resolved, and released once the write is applied (its entries are then in
the store) or given up.

A claim is made and the claims made before it are read in one step
(`claim`): of two writers of one key, the second always sees the first, so
one of them is refused. The writer then judges the key by those earlier
claims first (an object's claimed entry is newer than its stored one: a live
claim holds the key, a removal frees it) and by the store for every other
object.

Claims belong to an *owner*: a write being resolved (any hashable token)
until it is journaled, then its job (`bind`). They live in this process:
writes of other processes sharing the store are seen once they are applied.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

from ..core.entities import Routed, entry_rank

UniqueKey = tuple[int, bytes]  # (index id, key)


class Claims:
    """The unique index entries of resolved, not yet applied writes, by owner."""

    def __init__(self) -> None:
        self._by_key: dict[UniqueKey, list[tuple[Hashable, Routed]]] = {}
        self._owned: dict[Hashable, list[Routed]] = {}
        self._lock = threading.Lock()

    def claim(
        self, owner: Hashable, entries: Sequence[Routed]
    ) -> dict[UniqueKey, dict[int, Routed]]:
        """Claim `entries` for `owner`; for each of their keys, the newest entry each
        object already has claimed for it (other owners' claims, made before this)."""
        earlier: dict[UniqueKey, dict[int, Routed]] = {}
        with self._lock:
            for entry in entries:
                key = (entry[1], entry[2])
                seen = earlier.setdefault(key, {})
                for other, held in self._by_key.get(key, ()):
                    if other == owner:
                        continue
                    best = seen.get(held[3])
                    if best is None or entry_rank(held[1:]) > entry_rank(best[1:]):
                        seen[held[3]] = held
            for entry in entries:
                self._by_key.setdefault((entry[1], entry[2]), []).append((owner, entry))
            self._owned.setdefault(owner, []).extend(entries)
        return earlier

    def bind(self, owner: Hashable, job: int) -> None:
        """The claims of `owner` are now those of `job` (released with it)."""
        if owner not in self._owned:
            return
        with self._lock:
            entries = self._owned.pop(owner, None)
            if entries is None:
                return
            for entry in entries:
                held = self._by_key[(entry[1], entry[2])]
                held[:] = [(job if o == owner else o, e) for o, e in held]
            self._owned.setdefault(job, []).extend(entries)

    def release(self, owners: Sequence[Hashable]) -> None:
        """Drop the claims of these owners (their writes were applied, or given up)."""
        if not self._owned:
            return
        with self._lock:
            for owner in owners:
                for entry in self._owned.pop(owner, ()):
                    key = (entry[1], entry[2])
                    left = [(o, e) for o, e in self._by_key.get(key, ()) if o != owner]
                    if left:
                        self._by_key[key] = left
                    else:
                        self._by_key.pop(key, None)

    def __len__(self) -> int:
        return len(self._owned)
