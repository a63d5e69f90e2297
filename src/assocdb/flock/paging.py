"""FlockDB's paging rule (its `ResultWindow`), as a pure function.

A FlockDB cursor is a signed 64-bit number: `-1` asks for the first page,
`0` means the end, a positive `c` asks for the items after position `c`
(positions below it, newest first) and a negative `-c` for the items before
it (positions above `c`, the `count` nearest to it). A page answers with
`next_cursor` = the position of its last item and `prev_cursor` = minus the
position of its first, each `0` when nothing lies that way.

FlockDB reads a page as `count + 1` rows from the cursor plus one row on
the other side of it (its "continue cursor" query), and decides both cursors
from that data; `window` is that decision, ported line for line from
`ResultWindow`'s constructor. The position of a row is its edge's `time` for
a single list, or its id for a term with destination ids (and for compound
queries, which `select.py` pages with assocdb's own cursors by id).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

T = TypeVar("T")

START = -1
END = 0


class Window(NamedTuple):
    """`data[start:stop]` is the page; `onward` / `back`: more lies after it / before it."""

    start: int
    stop: int
    onward: bool
    back: bool


def window(data: Sequence[T], position: Callable[[T], int], count: int, cursor: int) -> Window:
    """Which rows of `data` (ordered by position, highest first, as FlockDB reads them)
    are the page for `count` and `cursor`, and whether more lie each way."""
    size = len(data)
    if cursor < START:
        magnitude = -cursor
        taken = 0
        while taken < size and position(data[taken]) > magnitude:
            taken += 1
        start = max(taken - count, 0)
        return Window(start, taken, taken < size, taken > count)
    if cursor == START:
        return Window(0, min(count, size), size > count, False)
    dropped = 0
    while dropped < size and position(data[dropped]) >= cursor:
        dropped += 1
    left = size - dropped
    return Window(dropped, dropped + min(count, left), left > count, dropped > 0)


def cursors(first: int | None, last: int | None, onward: bool, back: bool) -> tuple[int, int]:
    """FlockDB's `(next_cursor, prev_cursor)` of a page whose first and last items have
    these positions (None: an empty page, which leads nowhere)."""
    if first is None or last is None:
        return END, END
    return (last if onward else END), (-first if back else END)
