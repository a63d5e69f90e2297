"""Association reads: each one point lookup or one index range scan on one shard."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from time import perf_counter
from typing import Any, TypeGuard

from ..cache import offers
from ..cache.chunks import Columns, ListItem
from ..cache.entries import NO_DATA, ListEntry, fill_size
from ..cache.getgate import CLOSED_SAMPLE, SAMPLE
from ..cache.tier1 import Cache
from ..core import cursor as _cursor
from ..core import json as _json
from ..core.cachekeys import LIST, PREFIX
from ..core.errors import InvalidRequest
from ..core.ids import MAX_INT64, check_id, check_int64, shard_of
from ..core.merge import PLAIN_NORMAL as _NORMAL
from ..core.merge import EdgeRow, State, user_data
from ..core.records import STATE_NAMES, Assoc, Page, StateName
from ..core.scans import EdgeScan, ListRow, normal_assocs
from ..core.schema import AssocType
from ..storage.sqltext import IN_CHUNK
from .engine import Engine
from .kept import column_records, shareable_data
from .ttl_reads import Expiry

# A plain int, not the IntEnum member: a driver adapts an int subclass on a slower
# path (psycopg: about 6 µs of a 60 µs uncached read).
_SCALARS = (int, str, type(None))  # arguments a kept answer's tag may hold
_STORED = {bytes, type(None)}  # the types of data read from a shard
_INTS = {int}
_INDEX = "index"  # the answer tag of a whole small list by id2 (assoc_get)
#: What a kept encoded answer holds besides its JSON: its tuple, the bytes object, the
#: longer tag (measured with tracemalloc; `Cache.keep` adds ANSWER_BYTES).
_ENCODED_BYTES = 200


class AssocReads:
    """assoc_get, assoc_count, assoc_contains, assoc_edge, assoc_range, assoc_time_range,
    assoc_page (`Graph` documents each); timelines read lists through `scan` and
    `from_cache`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._backend = engine.backend
        self._cache = engine.cache
        self._shards = engine.shards
        #: Where an edge of a type with a ttl becomes invisible (`core.ttl`); every read
        #: of such a type bounds its time by it, and types without one never ask.
        self.expiry = Expiry(engine)

    def assoc_get(
        self,
        id1: int,
        atype: str,
        id2s: Iterable[int],
        high: int | None = None,
        low: int | None = None,
    ) -> list[Assoc]:
        id1 = check_id(id1, "id1")
        kind = self._engine.assoc_type(atype)
        wanted = _id_list(id2s, kind.limit)
        high = check_int64(high, "high") if high is not None else None
        low = check_int64(low, "low") if low is not None else None
        if kind.ttl is not None:
            low = self.expiry.low(kind, low)
        cache, timed, began = self._cache, False, 0.0
        if cache is not None:
            gate = cache.gets  # (does asking the cache pay? `cache.getgate`)
            gate.skip -= 1  # (`GetGate.timed`, inlined)
            if gate.skip <= 0:
                gate.skip = SAMPLE if gate.open else CLOSED_SAMPLE
                timed, began = True, perf_counter()
            if gate.open or timed:
                cached = self._get_from_cache(id1, kind, wanted)
                if cached is not None:
                    answer = self._assocs(id1, kind, _bounded(cached, high, low))
                    if timed:
                        gate.hit(perf_counter() - began)
                    return answer
        shard = shard_of(id1, self._shards)
        if 0 < len(wanted) <= IN_CHUNK:  # one statement: the state in SQL
            found = self._backend.list_rows(shard, id1, kind.id, _NORMAL, wanted)
        else:
            rows = self._backend.edges(shard, id1, kind.id, wanted)
            found = [(r.id2, r.time, r.updated_at, r.data) for r in rows if r.state == _NORMAL]
            found.sort(key=_list_key, reverse=True)
        # Rows as the shard gives them: built in one pass (`_assocs` transposes them
        # first, which pays for 50 rows, not for the few an assoc_get finds).
        answer = normal_assocs(id1, kind.name, _bounded(found, high, low))
        if timed:
            cache.gets.missed(perf_counter() - began)  # type: ignore[union-attr]
        return answer

    def assoc_count(self, id1: int, atype: str, state: StateName = "normal") -> int:
        id1 = check_id(id1, "id1")
        kind = self._engine.assoc_type(atype)
        code = state_code(state)
        shard = shard_of(id1, self._shards)
        cache = self._cache
        if cache is None:
            stored = self._backend.counts(shard, id1, kind.id).get(code, 0)
        else:
            key = (id1, kind.id)
            if cache.list_entry(key) is not None:
                known = cache.count(key, code)
                stored = known if known is not None else self._count_fill(key, shard, code)
            elif cache.tier2 is None:
                # No entry: counts a first miss left on probation (a hit), or a miss: the
                # uncached read's statement, its counts put on probation (`put_probation`).
                found = cache.probation_get(key)
                if found is None or not cache.probation_hit(key, found):
                    generation = cache.generation
                    found = self._backend.counts(shard, id1, kind.id)
                    cache.put_probation(key, found, generation)
                stored = found.get(code, 0)
            else:
                stored = self._count_fill(key, shard, code)
        # A type with a ttl: the stored count less the expired tail (`api.ttl_reads`).
        return stored if kind.ttl is None else self.expiry.count(id1, kind, code, stored)

    def _count_fill(self, key: tuple[int, int], shard: int, code: int) -> int:
        """A count miss of a list with an entry (or with tier 2): `Cache.fill_count`."""
        cache = self._cache
        assert cache is not None
        return cache.fill_count(key, code, lambda: self._backend.counts(shard, *key))

    def assoc_contains(self, id1: int, atype: str, id2: int) -> bool:
        edge = self._stored_edge(id1, atype, id2)
        return edge is not None and edge.state in (State.NORMAL, State.NEGATIVE)

    def assoc_edge(self, id1: int, atype: str, id2: int) -> Assoc | None:
        edge = self._stored_edge(id1, atype, id2)
        if edge is None:
            return None
        name = self._engine.schema.assoc_by_id(edge.atype).name
        return Assoc(
            edge.id1,
            name,
            edge.id2,
            edge.time,
            STATE_NAMES[edge.state],
            edge.updated_at,
            _data(user_data(edge)),
        )

    def _stored_edge(self, id1: int, atype: str, id2: int) -> EdgeRow | None:
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._engine.assoc_type(atype)
        rows = self._backend.edges(shard_of(id1, self._shards), id1, kind.id, [id2])
        if rows and kind.ttl is not None and rows[0].time < self.expiry.low(kind):
            return None  # expired: gone, as it will be once the cleaner removes it
        return rows[0] if rows else None

    def assoc_range(
        self, id1: int, atype: str, pos: int = 0, limit: int = 50, *, keep: bool = True
    ) -> list[Assoc]:
        """With `keep` False a miss keeps no answer (`encoded`)."""
        id1 = check_id(id1, "id1")
        kind = self._engine.assoc_type(atype)
        cache = self._cache
        if cache is not None and type(pos) is int and type(limit) is int:
            # A list with no entry while list fills are closed (most misses then) reads
            # as if uncached: one dict lookup and no call (`Cache.list_entry`).
            payback = cache.payback
            if (
                payback.open
                or offers.long_read(limit)  # (filled however short lists' fills do)
                or cache.list_entry((id1, kind.id)) is not None
            ):
                found = cache.answer((id1, kind.id), (pos, limit))
                # (pos, limit) was checked when the answer was kept
                if found is not None and limit <= kind.limit:
                    return list(found) if kind.ttl is None else self._unexpired(kind, found)
            else:  # closed, no entry: the uncached read (`Payback.ghost_hit`, `.sampled`)
                stamp = payback.ghosts.get((id1, kind.id))
                if stamp is not None:
                    payback.hit(stamp)
                payback.skip -= 1
                if payback.skip <= 0:
                    cache.sample_miss((id1, kind.id))
                cache = None
        if type(pos) is not int or not 0 <= pos <= 2**62:
            raise InvalidRequest(f"pos must be a non-negative integer, got {pos!r}")
        limit = _limit(limit, kind)
        # A first miss of a list that a fill could cover goes straight to the shard
        # (`passes` is what `_records_from_cache` would ask first: three calls less).
        if cache is not None and not (
            pos + limit <= cache.config.prefix
            and not (not pos and offers.long_read(limit))
            and cache.passes((PREFIX, (id1, kind.id)))
        ):
            cached = self._columns_from_cache(id1, kind, pos, limit, keep)
            if cached is not None:
                return cached if kind.ttl is None else self._unexpired(kind, cached)
        # Positional: a NamedTuple built with a keyword costs a tenth of a µs more.
        scan = EdgeScan(id1, kind.id, _NORMAL, _cursor.START, limit, None, None, pos)
        found = normal_assocs(id1, kind.name, self._backend.scan(shard_of(id1, self._shards), scan))
        return found if kind.ttl is None else self._unexpired(kind, found)

    def _unexpired(self, kind: AssocType, found: Iterable[Assoc]) -> list[Assoc]:
        """The records of a range not yet expired. The expired edges are the list's oldest
        tail, so the others keep their positions: the range of the visible list."""
        low = self.expiry.low(kind)
        return [a for a in found if a.time >= low]

    def encoded(
        self, read: str, encode: Callable[[Any], bytes], id1: int, atype: str, *args: Any
    ) -> tuple[bytes, int]:
        """`encode(read(id1, atype, *args))` and how many records it holds, for a server
        (`read`: "assoc_range" or "assoc_page"; `args` end with the limit). Kept with the
        list's cached answers, so a hit encodes nothing, and dropped with them by any
        write to the list: read-after-write holds as it does for the records."""
        cache = self._cache
        if cache is None or not all(type(arg) in _SCALARS for arg in args):
            return _encoded(self._records(read, id1, atype, args), encode)
        id1 = check_id(id1, "id1")
        kind = self._engine.assoc_type(atype)
        # A limit the type cuts down; or a type with a ttl, whose answers change with the clock.
        if type(args[-1]) is not int or args[-1] > kind.limit or kind.ttl is not None:
            return _encoded(self._records(read, id1, atype, args), encode)
        key, tag = (id1, kind.id), (encode, read, *args)
        kept: tuple[bytes, int] | None = cache.answer(key, tag, encoded=True)
        if kept is not None:
            return kept
        before = cache.answers(key)  # None before the list's first read: kept from the next
        json, rows = _encoded(self._records(read, id1, atype, args), encode)
        if before is None:
            return json, rows
        # A copy of its length: the encoder's buffer holds up to half as much again.
        kept = (bytes(memoryview(json)), rows)
        cache.keep(key, before, tag, kept, rows, _ENCODED_BYTES + len(json))
        return kept

    def _records(self, read: str, id1: int, atype: str, args: tuple[Any, ...]) -> Any:
        """What an encoded read encodes, its records not kept: a server answers from
        the JSON, and keeping both took the answers' share of the cache twice over."""
        method = self.assoc_range if read == "assoc_range" else self._page
        return method(id1, atype, *args, keep=False)

    def assoc_time_range(
        self, id1: int, atype: str, high: int, low: int, limit: int = 50
    ) -> list[Assoc]:
        id1 = check_id(id1, "id1")
        kind = self._engine.assoc_type(atype)
        high, low = check_int64(high, "high"), check_int64(low, "low")
        limit = _limit(limit, kind)
        if kind.ttl is not None:
            low = self.expiry.low(kind, low)
        if low > high:
            return []
        ask = lambda entry: entry.time_range(high, low, limit)  # noqa: E731
        found = self._records_from_cache(id1, kind, ask, limit, None)
        if found is not None:
            return found
        rows = self.scan(id1, EdgeScan(id1, kind.id, _NORMAL, _cursor.START, limit, high, low))
        return self._assocs(id1, kind, rows)

    def assoc_page(
        self, id1: int, atype: str, cursor: str | None = None, limit: int = 50
    ) -> Page[Assoc]:
        return self._page(id1, atype, cursor, limit)

    def _page(
        self, id1: int, atype: str, cursor: str | None = None, limit: int = 50, *, keep: bool = True
    ) -> Page[Assoc]:
        """`assoc_page`; with `keep` False a miss keeps no answer (`encoded`)."""
        id1 = check_id(id1, "id1")
        kind = self._engine.assoc_type(atype)
        cache, key, tag = self._cache, (id1, kind.id), ("page", cursor, limit)
        if cache is not None and type(limit) is int and limit <= kind.limit and _token(cursor):
            # (cursor, limit) was checked when the answer was kept
            found = cache.answer(key, tag)
            if found is not None and kind.ttl is None:
                return Page(list(found[0]), found[1], found[2])
        # A type with a ttl: no kept pages (the clock ages them); scans are bounded by time.
        low = None if kind.ttl is None else self.expiry.low(kind)
        lists, cache = cache, (cache if low is None else None)
        before = None if cache is None else cache.answers(key)
        limit = _limit(limit, kind)
        scope = b"assoc:%d:%d:%d" % (id1, kind.id, _NORMAL)
        seek = _cursor.START if cursor is None else _cursor.decode(scope, cursor, 2)
        cached = True

        def scan(seek: _cursor.Seek, n: int) -> list[ListRow]:
            nonlocal cached
            rows = None
            if (
                lists is not None
                and (low is None or seek.forward)
                and not (seek.boundary and lists.reaches_past(key, seek.boundary))
            ):
                need = n if seek.boundary is None else None
                rows = self.from_cache(id1, kind, lambda e: e.scan(seek, n), need)
                if rows is not None and low is not None:
                    # Towards older edges the expired ones come last: dropping them
                    # leaves the visible rows of the scan, and ends the list there.
                    rows = [row for row in rows if row[1] >= low]
            if rows is None:
                cached = False
                rows = self.scan(id1, EdgeScan(id1, kind.id, _NORMAL, seek, n, None, low))
            return rows

        rows, next_cursor, prev_cursor = _cursor.paginate(scan, _list_key, scope, seek, limit)
        page = Page(self._assocs(id1, kind, rows), next_cursor, prev_cursor)
        if (
            keep
            and cache is not None
            and cached
            and tag[2] == limit
            and shareable_data([r[3] for r in rows])
        ):
            answer = (tuple(page.items), next_cursor, prev_cursor)
            cache.keep(key, before, tag, answer, len(rows))
        return page

    def scan(self, id1: int, query: EdgeScan) -> list[ListRow]:
        """One scan of a list on `id1`'s shard (no cache)."""
        return self._backend.scan(shard_of(id1, self._shards), query)

    def _columns_from_cache(
        self, id1: int, kind: AssocType, pos: int, limit: int, keep: bool = True
    ) -> list[Assoc] | None:
        """assoc_range from the cache, built column-wise (the hot path of a cached read)."""
        cache, key = self._cache, (id1, kind.id)
        if cache is not None and not pos and offers.unfilled(cache, key):  # the newest edges
            if not self._cache_may_answer(cache, key, limit) or (
                not offers.long_read(limit) and cache.passes((PREFIX, key))
            ):
                return None
            found = self._read_and_offer(id1, kind, cache, limit, keep)
            if found is not None:
                return found
        ask = lambda entry: entry.range(pos, limit)  # noqa: E731
        tag = (pos, limit) if keep else None
        return self._records_from_cache(id1, kind, ask, pos + limit, tag, slice(pos, pos + limit))

    def _records_from_cache(
        self,
        id1: int,
        kind: AssocType,
        ask: Callable[[ListEntry], Columns | None],
        need: int,
        tag: tuple[int, int] | None,
        rows_at: slice | None = None,
    ) -> list[Assoc] | None:
        """The records of the cached columns `ask` gets from the list's entry (filled on
        a miss), kept as the answer to `tag` if they may be shared; None: read the shard.

        A read that fills the entry and asks for the newest `rows_at` of it builds its
        records from the rows the fill read, as an uncached read does (when they have
        no data): decoding the prefix just packed cost ~12 µs of a ~20 µs read."""
        cache = self._cache
        key = (id1, kind.id)
        if (
            cache is None
            or not self._cache_may_answer(cache, key, need)
            or (not offers.long_read(need) and cache.passes((PREFIX, key)))
        ):
            return None
        before = cache.answers(key)
        filled: list[Sequence[ListRow]] = []
        tail = self._tail(id1, kind)
        with cache.listed(key, self._loader(id1, kind), need, filled, tail) as entry:
            if entry is None:
                return None
            rows = None
            if filled and rows_at is not None:  # (the entry is as the fill left it)
                rows = _fill_rows(filled[0], rows_at, entry.complete)
            if rows is not None:
                before = entry.answers  # type: ignore[assignment]
            else:
                columns = ask(entry)
                if columns is None:
                    return None
                id2s, times, stamps = columns
                datas: Any = repeat(None)
                shareable = True
                if entry.data:
                    kept = list(map(entry.data.get, id2s))
                    shareable = shareable_data(kept)
                    datas = _values(kept)
                if before is None:  # filled just now
                    before = cache.answers(key)
        if rows is not None:
            found = normal_assocs(id1, kind.name, rows)
        else:
            found = column_records(id1, kind.name, id2s, times, stamps, datas)
            if not shareable:
                return found
        # (past the answers' budget, a list that is not hot keeps none: not built)
        if tag is not None and cache.decoded.may_keep(len(found), cache.hot.is_hot, (LIST, *key)):
            cache.keep(key, before, tag, tuple(found), len(found))
        return found

    def _read_and_offer(
        self, id1: int, kind: AssocType, cache: Cache, need: int, keep: bool = True
    ) -> list[Assoc] | None:
        """The newest `need` edges of a list with no prefix cached, read from the shard as
        an uncached read does (with what a fill of them reads: `fill_size`) and offered
        to the cache as the list's fill (`cache.offers`); None: another read filled it
        meanwhile, ask the cache. A fill installed keeps the records as the answer to
        `(0, need)` (if `keep` and they carry no data, as `_fill_rows`): the list's next
        such read is a kept answer's hit (decoding the prefix just packed, it cost ~2x
        an uncached read, and it came after every fill)."""
        key = (id1, kind.id)
        ticket = offers.claim(cache, key)
        if ticket is None:
            return None
        want = fill_size(need, cache.keeps)
        began = perf_counter()
        try:
            rows = self._loader(id1, kind)(want + 1)
        except BaseException:
            offers.abandon(cache, key, ticket)
            raise
        fresh = offers.offer(
            cache, key, rows[:want], len(rows) <= want, ticket, perf_counter() - began
        )
        newest = rows[:need]
        found = normal_assocs(id1, kind.name, newest)
        if (
            fresh is not None
            and keep
            and all(row[3] is None for row in newest)
            and cache.decoded.may_keep(len(found), cache.hot.is_hot, (LIST, *key))
        ):
            cache.keep(key, fresh, (0, need), tuple(found), len(found))
        return found

    def _get_from_cache(self, id1: int, kind: AssocType, wanted: list[int]) -> list[ListRow] | None:
        """The rows of `wanted` in a whole small list the cache holds, newest first, or
        None: read the shard. Never fills (a filled prefix of a long list would not
        answer, and one of a short list costs more than the lookup it saves). A hot
        list (`HotKeys`) keeps an index by id2 (a dict lookup per id); any other list
        is probed in its packed prefix (its id2s scanned in C, ~2 µs for 50): building
        the index of a list decoded all of it (up to 256 edges), which one-off
        assoc_gets, most of them on real traffic, never repaid (issue 43)."""
        cache = self._cache
        assert cache is not None
        key = (id1, kind.id)
        if not cache.holds_whole(key):  # (most calls: one call, no lock)
            cache.misses += 1  # (counted as `passes` counts: approximate)
            return None
        index: dict[int, ListRow] | None = cache.answer(key, _INDEX)
        if index is not None:
            found = [index[id2] for id2 in wanted if id2 in index]
            if len(found) > 1:
                found.sort(key=_list_key, reverse=True)
            return found
        hot = cache.hot.is_hot((LIST, *key))
        before = cache.answers(key) if hot else None
        with cache.held(key) as entry:
            picked = None if entry is None else entry.whole() if hot else entry.get(wanted)
            data = NO_DATA if entry is None else entry.data
        if picked is None:
            cache.misses += 1
            return None
        cache.hits += 1
        rows = [(id2, time, ua, data.get(id2)) for time, id2, ua in picked]
        if not hot:
            return rows
        index = {row[0]: row for row in rows}
        cache.keep(key, before, _INDEX, index, len(index))
        found = [index[id2] for id2 in wanted if id2 in index]
        found.sort(key=_list_key, reverse=True)
        return found

    def _cache_may_answer(self, cache: Cache, key: tuple[int, int], need: int | None) -> bool:
        """False when a filled prefix could not answer (the read needs more than it holds)."""
        if need is None or need <= cache.config.prefix:
            return True
        counts = cache.known_counts(key)
        return counts is not None and counts[_NORMAL] <= cache.config.prefix

    def _loader(self, id1: int, kind: AssocType) -> Callable[[int], list[ListRow]]:
        """How the cache fills the list's prefix: its newest n rows."""
        shard = shard_of(id1, self._shards)

        def load(n: int) -> list[ListRow]:
            return self._backend.scan(shard, EdgeScan(id1, kind.id, _NORMAL, _cursor.START, n))

        return load

    def _tail(self, id1: int, kind: AssocType) -> Callable[[tuple[int, int], int], list[ListRow]]:
        """How the cache grows the list's prefix: the n rows past its last (`cache.growth`)."""
        shard = shard_of(id1, self._shards)

        def tail(last: tuple[int, int], n: int) -> list[ListRow]:
            seek = _cursor.Seek(True, last, False)
            return self._backend.scan(shard, EdgeScan(id1, kind.id, _NORMAL, seek, n))

        return tail

    def from_cache(
        self,
        id1: int,
        kind: AssocType,
        ask: Callable[[ListEntry], list[ListItem] | None],
        need: int | None,
    ) -> list[ListRow] | None:
        """The rows the cache has for a read (filling it on a miss), or None: read the shard.

        `need` is how many of the newest edges the read needs (None: the whole list,
        or a page past a boundary). A miss is filled only when a filled prefix could
        answer: a read that needs more than the prefix holds goes to the shard
        without the detour.
        """
        cache = self._cache
        key = (id1, kind.id)
        if (
            cache is None
            or not self._cache_may_answer(cache, key, need)
            or (not offers.long_read(need) and cache.passes((PREFIX, key)))
        ):
            return None
        with cache.listed(key, self._loader(id1, kind), need) as entry:
            found = None if entry is None else ask(entry)
            if found is None:
                return None
            data = entry.data  # type: ignore[union-attr]
            return [(id2, time, ua, data.get(id2)) for time, id2, ua in found]

    def _assocs(self, id1: int, kind: AssocType, rows: list[ListRow]) -> list[Assoc]:
        if not rows:
            return []
        n = len(rows)
        id2s, times, stamps, datas = zip(*rows, strict=True)
        decoded: Any = repeat(None)
        if datas.count(None) != n:  # C speed; a generator over 50 rows costs ~3 µs
            decoded = _values(list(datas))
        return list(
            map(
                Assoc,
                repeat(id1, n),
                repeat(kind.name),
                id2s,
                times,
                repeat("normal"),
                stamps,
                decoded,
            )
        )


def state_code(state: object) -> int:
    """The stored number of a state name, or InvalidRequest."""
    if state not in STATE_NAMES:
        raise InvalidRequest(f"state must be one of {', '.join(STATE_NAMES)}; got {state!r}")
    return STATE_NAMES.index(state)


def _limit(limit: object, kind: AssocType) -> int:
    if type(limit) is not int or limit <= 0:
        raise InvalidRequest(f"limit must be a positive integer, got {limit!r}")
    return min(limit, kind.limit)


def _id_list(id2s: Iterable[int], most: int) -> list[int]:
    if _distinct_ids(id2s, most):
        return id2s.copy()
    if type(id2s) not in (list, tuple) and (  # the usual types skip the slower checks
        isinstance(id2s, (str, bytes)) or not isinstance(id2s, Iterable)
    ):
        raise InvalidRequest(f"id2s must be a list of ids, got {type(id2s).__name__}")
    if type(id2s) is list and id2s and set(map(type, id2s)) == _INTS:  # checked in C
        if not 1 <= min(id2s) <= max(id2s) <= MAX_INT64:
            for i in id2s:
                check_id(i, "id2")  # (raises)
        wanted = list(dict.fromkeys(id2s))
    else:
        wanted = list(dict.fromkeys(check_id(i, "id2") for i in id2s))
    if len(wanted) > most:
        raise InvalidRequest(f"at most {most} id2s per call, got {len(wanted)}")
    return wanted


def _distinct_ids(id2s: object, most: int) -> TypeGuard[list[int]]:
    """Whether `id2s` is the usual list of up to `most` distinct valid ids, checked in C:
    a dict to drop duplicates costs more than the check that there are none (~0.45 µs
    of 10 ids)."""
    return (
        type(id2s) is list
        and 0 < len(id2s) <= most
        and set(map(type, id2s)) == _INTS
        and min(id2s) >= 1
        and max(id2s) <= MAX_INT64
        and len(set(id2s)) == len(id2s)
    )


def _data(raw: bytes | None) -> Any:
    return None if raw is None else _json.decode(raw)


def _token(cursor: object) -> bool:
    """Whether a cursor may be looked up among kept answers (it is hashable)."""
    return cursor is None or type(cursor) is str


def _encoded(
    answer: list[Assoc] | Page[Assoc], encode: Callable[[Any], bytes]
) -> tuple[bytes, int]:
    return encode(answer), len(answer) if isinstance(answer, list) else len(answer.items)


def _values(datas: list[Any]) -> list[Any]:
    """The data values of rows whose data is JSON bytes, None, or already decoded
    (as the cache keeps strings and numbers: `cache.tier1.kept`)."""
    kinds = set(map(type, datas))
    if bytes not in kinds:
        return datas
    if kinds <= _STORED:  # as the shard stores them: all in one parse
        return _json.decode_all(datas)
    decode = _json.decode
    return [decode(d) if type(d) is bytes else d for d in datas]


def _fill_rows(rows: Sequence[ListRow], at: slice, complete: bool) -> list[ListRow] | None:
    """The rows `at` of a fill's rows (the entry's prefix) if they answer the read and
    carry no data (records with data are shared only as the entry keeps it: `kept`)."""
    if not complete and at.stop > len(rows):
        return None
    found = list(rows[at])
    for row in found:
        if row[3] is not None:
            return None
    return found


def _bounded(rows: list[ListRow], high: int | None, low: int | None) -> list[ListRow]:
    """The rows whose time is within `[low, high]` (None: unbounded)."""
    if high is None and low is None:
        return rows
    return [
        row for row in rows if (high is None or row[1] <= high) and (low is None or row[1] >= low)
    ]


def _list_key(row: ListRow) -> tuple[int, int]:
    return (row[1], row[0])
