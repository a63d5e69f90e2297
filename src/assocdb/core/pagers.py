"""Pagers shared by Graph and Client: walk a list's cursors for you."""

from __future__ import annotations

from collections.abc import Iterator

from .records import Assoc, Page


class Pagers:
    """assoc_pages, over the `assoc_page` of whatever mixes this in."""

    def assoc_page(
        self, id1: int, atype: str, cursor: str | None = None, limit: int = 50
    ) -> Page[Assoc]:
        raise NotImplementedError

    def assoc_pages(self, id1: int, atype: str, limit: int = 500) -> Iterator[Page[Assoc]]:
        """Every page of the list, newest first, following `next_cursor`.

        >>> for page in g.assoc_pages(celebrity, "followed_by", limit=1000):
        ...     notify(page.items)
        """
        cursor = None
        while True:
            page = self.assoc_page(id1, atype, cursor, limit)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
