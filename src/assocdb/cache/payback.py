"""Whether list fills pay for themselves on this traffic, and admission that follows.

A list's fill costs more than the uncached read it replaces (the rows packed, the
fill's ticket: ~1.6-2x the read, `docs/operations.md`, "Reads on real traffic"),
and each later hit of the list saves part of a read (a kept answer nearly all of
it, a packed prefix decoded about half). So a fill pays when its list is hit about
PAYS times before it is dropped; on traffic where most lists are read once or
twice (popularity-weighted reads of a graph much larger than the hot set), fills
are not paid back and the default cache made reads slower (issue 43).

`Payback` counts the list fills and the hits of lists filled recently (within the
last two windows of WINDOW fills: hits of long-cached hot lists say nothing of
whether new fills pay) and, after each window, judges: fewer than PAYS such hits
a fill, and a list needs one more recent miss to be filled (`Doorkeeper.lists_after`,
up to MOST); 2 x PAYS or more, one fewer (down to `CacheConfig.admit_after`). The
misses that do not fill read the shard as an uncached read does. The verdict and
its evidence are in `CacheStats` (`lists_admit_after`, `hits_per_fill`), so an
operator sees whether the cache earns its place.

Counting takes no lock: the counters are ints bumped under the GIL; a lost count
moves a verdict by one hit, never an answer.
"""

from __future__ import annotations

from .admission import Doorkeeper

WINDOW = 256  # list fills a verdict is made on
PAYS = 2.0  # hits a recent fill must earn for fills to go on as they are
MOST = 8  # the most misses a list may need before it is filled


class Payback:
    """The fills of list prefixes and the hits they earned; sets `lists_after`."""

    __slots__ = (
        "current",
        "doorkeeper",
        "enabled",
        "last",
        "least",
        "new_fills",
        "new_hits",
        "old_fills",
        "old_hits",
        "previous",
        "verdicts",
    )

    def __init__(self, doorkeeper: Doorkeeper, enabled: bool = True) -> None:
        self.doorkeeper = doorkeeper
        self.enabled = enabled  # False: verdicts are counted, admission left as it is
        self.least = doorkeeper.admit_after  # the configured admission: never below it
        #: The window a fill is made in is stamped on its entry (`ListEntry.filled`,
        #: 1 to 256, cycling: an int the interpreter keeps, no object an entry; 0: never
        #: filled): entries of this window and the previous one count their hits.
        self.current, self.previous = 1, -1
        self.old_fills = self.old_hits = self.new_fills = self.new_hits = 0
        self.last = 0.0  # hits a fill at the last verdict (0.0 before the first)
        self.verdicts = 0

    def hit(self, filled: int) -> None:
        """A hit of a list whose fill was stamped `filled`."""
        if filled == self.current:
            self.new_hits += 1
        elif filled == self.previous:
            self.old_hits += 1

    def filled(self) -> int:
        """A list's prefix was filled (call with the cache's lock held): its stamp."""
        stamp = self.current
        self.new_fills += 1
        if self.new_fills >= WINDOW:
            self._judge()
        return stamp

    def _judge(self) -> None:
        door = self.doorkeeper
        self.last = ratio = (self.old_hits + self.new_hits) / (self.old_fills + self.new_fills)
        self.verdicts += 1
        if not self.enabled:
            pass
        elif ratio < PAYS and door.lists_after < MOST:
            door.lists_after = max(door.lists_after + 1, 2)
        elif ratio >= 2 * PAYS and door.lists_after > self.least:
            door.lists_after -= 1
        self.previous, self.current = self.current, self.current % 256 + 1
        self.old_fills, self.old_hits = self.new_fills, self.new_hits
        self.new_fills = self.new_hits = 0
