"""Walking a list's cursors, for Graph and Client alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .records import Assoc, Page


def pages(page_at: Callable[[str | None], Page[Assoc]]) -> Iterator[Page[Assoc]]:
    """Every page `page_at(cursor)` gives, from the first, following `next_cursor`."""
    cursor = None
    while True:
        page = page_at(cursor)
        yield page
        if page.next_cursor is None:
            return
        cursor = page.next_cursor
