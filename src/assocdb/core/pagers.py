"""Walking a list's cursors, for Graph and Client alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .records import Assoc, Page


def pages(page_at: Callable[[str | None], Page[Assoc]]) -> Iterator[Page[Assoc]]:
    """Every page `page_at(cursor)` gives, from the first, following `next_cursor`.

    The loop ends at the page whose `next_cursor` is None: passing None back
    would ask for the first page again (None is "from the start").
    """
    cursor = None
    while True:
        page = page_at(cursor)
        yield page
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def items(page_at: Callable[[str | None], Page[Assoc]]) -> Iterator[Assoc]:
    """Every item of every page `page_at(cursor)` gives, in order."""
    for page in pages(page_at):
        yield from page.items
