"""A shard's rows of one bulk-load round, packed: what most of a load's rows share is
said once (`PackedRows`).

Every row a load plans is live (`State.NORMAL`) and carries the load's one
`updated_at`; most have no data. Those rows are kept as their own four values
`(id1, atype, id2, time)`, one flat run of int64s grouped by `id1` in ascending
order (a list's rows in the input's order), and cross to a worker process as the
array's bytes (no per-row encoding or decoding). Rows with data are kept as
tuples beside them. SQLite's fresh path inserts the quads as they are
(`storage.sqlitebulk`); anything else sees the rows as a sequence of
`EdgeTuple`s, made once when first asked for.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

from .merge import PLAIN_NORMAL as _NORMAL
from .merge import EdgeTuple

QUAD = 4  # (id1, atype, id2, time) per packed row


class PackedRows(Sequence[EdgeTuple]):
    """`packed`: the data-less rows' quads, grouped by ascending `id1`; `others`: the
    rows with data, as tuples; all live with `updated_at`."""

    __slots__ = ("_rows", "others", "packed", "updated_at")

    def __init__(
        self, packed: array[int], updated_at: int, others: list[EdgeTuple] | None = None
    ) -> None:
        self.packed, self.updated_at = packed, updated_at
        self.others: list[EdgeTuple] = others or []
        self._rows: list[EdgeTuple] | None = None

    def quads(self) -> Iterator[tuple[int, int, int, int]]:
        """The packed rows' (id1, atype, id2, time), in their order (tuples made in C)."""
        return zip(*[iter(self.packed)] * QUAD, strict=True)

    def rows(self) -> list[EdgeTuple]:
        """Every row as an `EdgeTuple` (the packed ones first), made once."""
        if self._rows is None:
            ua = self.updated_at
            self._rows = [(a, t, b, _NORMAL, time, ua, None) for a, t, b, time in self.quads()]
            self._rows += self.others
        return self._rows

    def __len__(self) -> int:
        return len(self.packed) // QUAD + len(self.others)

    def __iter__(self) -> Iterator[EdgeTuple]:
        return iter(self.rows())

    @overload
    def __getitem__(self, index: int) -> EdgeTuple: ...
    @overload
    def __getitem__(self, index: slice) -> list[EdgeTuple]: ...
    def __getitem__(self, index: Any) -> Any:
        return self.rows()[index]

    def __repr__(self) -> str:
        return f"PackedRows({self.rows()!r})"


def unpacked(rows: Sequence[EdgeTuple]) -> Sequence[EdgeTuple]:
    """`rows` as plain tuples, for a backend that takes no `PackedRows`."""
    return rows.rows() if isinstance(rows, PackedRows) else rows
