"""The shard map as the operator's console shows and changes it.

`view()` is pure reading: each member's health (from its failure detector)
and each shard's replicas with weights and the share of the shard's reads
each replica takes now (its weight over the weights of the replicas that
take reads: up, not drained, weight above 0). The actions are the ones of
`assocdb shards mark-down | mark-up | set-weight`, with the copies under way
(`shards move | add-replica`) and the last `shards verify`'s figures. The
actions rewrite the map file
(so every process sharing it follows within a second) and reload it in this
process at once, so the console shows the change on its next page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

from ..core.errors import AssocdbError, InvalidRequest
from ..storage import shardmap_config
from ..storage.replica_verify import last_run
from ..storage.shardmap import ShardMapBackend
from .engine import Engine

MemberState = Literal["up", "down", "drained"]


class MemberRow(msgspec.Struct, frozen=True):
    name: str
    where: str
    state: MemberState
    failures: int
    downs: int
    consecutive: int
    shards: str  # "0-3,8"


class ReplicaRow(msgspec.Struct, frozen=True):
    backend: str
    weight: int
    state: MemberState
    read_share: float  # 0 … 1 of the shard's reads


class ShardRow(msgspec.Struct, frozen=True):
    shard: int
    replicas: list[ReplicaRow]


class MoveRow(msgspec.Struct, frozen=True):
    """A copy of a shard under way (`assocdb shards move | add-replica`)."""

    shard: int
    target: str
    source: str | None  # the replica a move removes once the copy is live
    phase: str  # write-only, copying, verifying, live
    table: str  # the table being copied
    copied: int  # rows copied so far


class VerifyRow(msgspec.Struct, frozen=True):
    """The last `assocdb shards verify`'s figures."""

    at: float  # Unix time
    shards: int
    rows: int
    differences: int
    repaired: bool
    by_table: dict[str, int]


class ShardView(msgspec.Struct, frozen=True):
    """A shard map's members and shards; for a plain backend, `members` is empty and
    each shard has no replicas listed (`where` says where the shards live)."""

    shards: int
    kind: str
    where: str
    source: str | None
    members: list[MemberRow]
    rows: list[ShardRow]
    engines: list[str]  # the kinds of backend the shards live on
    failovers: int = 0
    moves: list[MoveRow] = []
    verify: VerifyRow | None = None


class ShardAdmin:
    """The console's view of the shards (and the moves and verify of their replicas),
    and its mark-down, mark-up and set-weight."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def view(self) -> ShardView:
        backend = self._engine.backend.replicated()
        if backend is None:
            return self._plain_view()
        states = {m.name: _state(m.up, m.drained) for m in backend.status()}
        members = [
            MemberRow(
                m.name,
                m.where,
                states[m.name],
                m.failures,
                m.downs,
                m.consecutive,
                shardmap_config.format_shards(m.shards),
            )
            for m in backend.status()
        ]
        rows = [
            ShardRow(shard, _replicas(reps, states))
            for shard, reps in enumerate(backend.map.replicas)
        ]
        source = None if backend.source is None else str(backend.source)
        engines = sorted({str(backend.map.member_spec(m.name)["kind"]) for m in members})
        moves = [
            MoveRow(m.shard, m.target, m.source, m.phase, m.table, m.copied)
            for m in backend.map.moves
        ]
        return ShardView(
            backend.shards,
            "shard map",
            source or "",
            source,
            members,
            rows,
            engines,
            backend.failovers,
            moves,
            _last_verify(backend),
        )

    def _plain_view(self) -> ShardView:
        """One copy of each shard, on one backend."""
        backend = self._engine.backend
        spec = backend.spec()
        where = str(spec.get("path") or spec.get("url") or "")
        if "url" in spec:
            where = shardmap_config.shown(where)
        rows = [ShardRow(s, []) for s in range(backend.shards)]
        kind = str(spec.get("kind", "?"))
        return ShardView(backend.shards, kind, where, None, [], rows, [kind])

    def mark(self, name: str, down: bool) -> None:
        """Drain member `name` (down) or give it back (up), in the map file and here."""
        self._change(lambda smap: shardmap_config.with_down(smap, name, down))

    def set_weight(self, shards: str, name: str, weight: int) -> None:
        """Set member `name`'s read weight on `shards` ("0-7", "3", "0-3,8")."""
        if type(weight) is not int or weight < 0:
            raise InvalidRequest(f"weight must be an integer of 0 or more, got {weight!r}")

        def change(smap: shardmap_config.ShardMap) -> shardmap_config.ShardMap:
            chosen = shardmap_config.parse_shards(shards, smap.shards)
            return shardmap_config.with_weight(smap, chosen, name, weight)

        self._change(change)

    def _change(
        self, change: Callable[[shardmap_config.ShardMap], shardmap_config.ShardMap]
    ) -> None:
        backend = self._engine.backend.replicated()
        if backend is None:
            raise InvalidRequest("this graph has no shard map: its shards cannot be changed")
        if backend.source is None:
            raise InvalidRequest("this shard map was not opened from a file: nothing to change")
        shardmap_config.update(backend.source, change)
        backend.reload()


def _last_verify(backend: ShardMapBackend) -> VerifyRow | None:
    """The last replica verify's figures, if the replicas were ever verified (and
    shard 0, which keeps them, answers)."""
    try:
        figures = last_run(backend)
    except AssocdbError:
        return None
    if figures is None:
        return None
    return msgspec.convert(figures, VerifyRow)


def _state(up: bool, drained: bool) -> MemberState:
    return "drained" if drained else "up" if up else "down"


def _replicas(
    reps: tuple[shardmap_config.Replica, ...], states: dict[str, MemberState]
) -> list[ReplicaRow]:
    readable = sum(r.weight for r in reps if states[r.backend] == "up")
    return [
        ReplicaRow(
            r.backend,
            r.weight,
            states[r.backend],
            r.weight / readable if readable and states[r.backend] == "up" else 0.0,
        )
        for r in reps
    ]
