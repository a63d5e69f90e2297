"""Whether list fills pay for themselves on this traffic, and admission that follows.

A list's fill costs more than the uncached read it replaces (the rows packed, the
fill's ticket: ~1.6-2x the read, `docs/operations.md`, "Reads on real traffic"),
and each later hit of the list saves part of a read (a kept answer nearly all of
it, a packed prefix decoded about half). So a fill pays when its list is hit about
FILL_COST times before it is dropped; on traffic where most lists are read once or
twice (popularity-weighted reads of a graph much larger than the hot set), fills
are not paid back and the default cache made reads slower (issue 43).

`Payback` counts the list fills and the hits of lists filled recently (within the
last two windows of WINDOW fills: hits of long-cached hot lists say nothing of
whether new fills pay) and, after each window, judges. A list is filled on its
`Doorkeeper.lists_after`-th recent miss (`CacheConfig.admit_after` at first); the
misses that do not fill read the shard as an uncached read does. But each of them
pays the doorkeeper's probe (random reads of its sketch: ~3 µs in context, ~8% of an
uncached read of 50 edges), and the fills of lists read a few times cost more than
their hits save. So each verdict also weighs what the recent fills earned against
what they and the window's passing misses cost, in hits of READ edges (FILL_COST a
fill, PASS_COST a pass: measured on `bench reads`' traffic, a fill +55-95 µs, a probe
+2.3-3.5, a hit of 50 edges -7 to -35, median ~-15): when the fills lost, list fills
*close* (`open` False). Hits and fills are weighed by the rows they answered or read
(`weight`: a read costs a call plus a row per row, so a hit of a list of 10,000 links
saves what ~100 hits of 50 edges do, and its fill costs as much more): on LinkBench,
where a few long lists take most hits, counting each hit as one closed the fills of
the lists that paid most (its hits 14-17%, against 57-61% never closed). A closed
cache sends a list's miss straight to the shard: no probe, no fill, the
cost of an uncached read (what is cached still answers, and writes keep it exact as
ever). One miss in SAMPLE is *sampled* (`sampled`: the lists missed most are the
likeliest sampled): its list becomes a ghost (`ghost`, its key and the window's
stamp, no rows), counted as a fill, and each later miss of a ghost counts as the hit
its fill would have earned (`ghosts`, asked on every closed miss: one dict lookup; a
ghost's fill and hits weigh one each, their rows unread). So the samples keep
measuring at no cost to the reads (a real sampled fill cost ~4x an uncached read,
and sampled fills and the decoded hits after them were ~1.5% of the reads, the
cache's p99 on bench reads' traffic). When the samples earn REOPENS x
FILL_COST hits each (the traffic now rereads its lists), fills open again, a list
then filled on one more miss than before (up to MOST); while open fills earn 2 x
FILL_COST or more, one fewer (down to `CacheConfig.admit_after`). The verdict and
its evidence are in `CacheStats` (`lists_admit_after`, `hits_per_fill`,
`list_fills_open`, `list_fills_why`), so an operator sees whether the cache earns
its place.

Counting takes no lock: the counters are ints bumped under the GIL; a lost count
moves a verdict by one hit, never an answer.
"""

from __future__ import annotations

from .admission import Doorkeeper

#: List fills a verdict is made on while fills are open. Each fill before the first
#: verdict costs ~4x an uncached read if fills lose: at 256, on `bench reads`' traffic
#: the first verdict came ~90 fills into the first timed run (its newest-50 p99 on/off
#: 1.33-1.62x, against 1.02-1.16x at 128, where the verdict came in the warm-up).
WINDOW = 128
CLOSED_WINDOW = 32  # sampled fills a verdict is made on while they are closed
MOST = 8  # the most misses a list may need before it is filled
FILL_COST = 4.0  # what a list's fill costs, in what a hit saves
PASS_COST = 0.2  # what a passing miss's doorkeeper probe costs, in what a hit saves
SAMPLE = 128  # while closed, one list miss in SAMPLE is sampled (its list a ghost)
REOPENS = 2.0  # sampled fills reopen fills at REOPENS x FILL_COST hits each
#: Fills of this many edges or more are outside the verdict: a read of them costs
#: milliseconds and its fill packs rows already read, so one hit pays it back; they
#: are made whether fills are open or closed (`offers.long_read`), and neither they nor
#: their lists' hits count (LinkBench's few hot lists of 10,000 links swung the
#: verdict on short lists both ways: closed, every read of them went to the shard).
LONG = 1000
READ = 50  # the edges of the read a hit's weight is counted in (a weight of 1)
#: What a read's call costs beside its rows, in rows (an uncached read of n edges takes
#: ~c + n rows' time: newest 50 ~15 µs, a count's one row ~8, on the machine that set
#: FILL_COST; where rows cost more, this weighs long reads less than they save).
ROW_BASE = 50


def weight(rows: int) -> float:
    """What a read of `rows` edges costs, in reads of READ edges (`Payback`'s unit)."""
    return (ROW_BASE + rows) / (ROW_BASE + READ)


class Payback:
    """The fills of list prefixes and the hits they earned; sets `lists_after`, and
    closes list fills while they do not pay (`open`)."""

    __slots__ = (
        "current",
        "doorkeeper",
        "enabled",
        "ghosts",
        "last",
        "least",
        "new_fills",
        "new_hits",
        "new_weight",
        "old_fills",
        "old_hits",
        "old_weight",
        "open",
        "passes",
        "previous",
        "skip",
        "verdicts",
        "why",
    )

    def __init__(self, doorkeeper: Doorkeeper, enabled: bool = True) -> None:
        self.doorkeeper = doorkeeper
        self.enabled = enabled  # False: verdicts are counted, admission left as it is
        self.least = doorkeeper.admit_after  # the configured admission: never below it
        #: The window a fill is made in is stamped on its entry (`ListEntry.filled`,
        #: 1 to 256, cycling: an int the interpreter keeps, no object an entry; 0: never
        #: filled): entries of this window and the previous one count their hits.
        self.current, self.previous = 1, -1
        self.old_fills = self.new_fills = 0  # fills (a window is WINDOW of them)
        self.old_hits = self.new_hits = 0.0  # their hits, weighed (`weight`)
        self.old_weight = self.new_weight = 0.0  # the fills, weighed
        self.last = 0.0  # weighed hits a weighed fill at the last verdict (0.0 before the first)
        self.verdicts = 0
        self.passes = 0  # misses of lists that passed the doorkeeper since the last verdict
        #: Whether a list's miss may fill (through the doorkeeper); False: closed, a
        #: miss reads the shard and fills nothing; one in SAMPLE (`sampled`) is a ghost.
        self.open = True
        #: While closed: the sampled lists (ghosts) of this window and the one before,
        #: with the window's stamp; a miss of one is the hit its fill would have earned.
        self.ghosts: dict[tuple[int, int], int] = {}
        self.why = ""  # why fills are closed (or were last), for an operator
        self.skip = SAMPLE  # closed: misses until the next sampled one

    def hit(self, filled: int, rows: int = READ) -> None:
        """A hit of a list whose fill was stamped `filled`, answering `rows` edges."""
        if filled == self.current:
            self.new_hits += (ROW_BASE + rows) / (ROW_BASE + READ)  # (`weight`, inline)
        elif filled == self.previous:
            self.old_hits += (ROW_BASE + rows) / (ROW_BASE + READ)

    def sampled(self) -> bool:
        """Closed: whether this list miss is the one in SAMPLE that is sampled (`ghost`;
        no lock: a lost count moves a sample by one miss)."""
        self.skip -= 1
        if self.skip > 0:
            return False
        self.skip = SAMPLE
        return True

    def ghost(self, key: tuple[int, int]) -> None:
        """Closed: the list `key`'s sampled miss. Counted as a fill of this window (its
        later misses are its hits: `ghost_hit`), nothing read or kept but the key."""
        if key not in self.ghosts:
            stamp = self.filled()  # (a verdict that reopens drops the ghosts)
            if not self.open:
                self.ghosts[key] = stamp

    def ghost_hit(self, key: tuple[int, int]) -> None:
        """Closed: a miss of the list `key`; a hit of its ghost, if it is one."""
        stamp = self.ghosts.get(key)
        if stamp is not None:
            self.hit(stamp)

    def filled(self, rows: int = READ) -> int:
        """A list's prefix of `rows` edges was filled (call with the cache's lock held):
        its stamp (0, not counted, for a LONG fill)."""
        if rows >= LONG:
            return 0
        stamp = self.current
        self.new_fills += 1
        self.new_weight += weight(rows)
        if self.new_fills >= (WINDOW if self.open else CLOSED_WINDOW):
            self._judge()
        return stamp

    def _judge(self) -> None:
        door = self.doorkeeper
        fills = self.old_weight + self.new_weight
        self.last = ratio = (self.old_hits + self.new_hits) / fills
        passes = self.passes / self.new_weight  # passing misses a weighed fill, this window
        self.passes = 0
        self.verdicts += 1
        gain = ratio - FILL_COST - PASS_COST * passes  # in hits, a fill
        if not self.enabled:
            pass
        elif not self.open:
            if ratio >= REOPENS * FILL_COST:  # sampled fills pay well: the traffic rereads
                self.open = True  # (more selective than when fills last lost)
                door.lists_after = min(MOST, max(door.lists_after + 1, 2))
        elif gain < 0:
            self.open = False
            self.why = (
                f"{ratio:.2f} hits a recent fill (in reads of {READ} edges), against"
                f" {FILL_COST:g} a fill costs and {PASS_COST:g} for each of its"
                f" {passes:.1f} passing misses"
            )
        elif ratio >= 2 * FILL_COST and door.lists_after > self.least:
            door.lists_after -= 1
        self.previous, self.current = self.current, self.current % 256 + 1
        self.old_fills, self.old_hits, self.old_weight = (
            self.new_fills,
            self.new_hits,
            self.new_weight,
        )
        self.new_fills, self.new_hits, self.new_weight = 0, 0.0, 0.0
        ghosts, previous = self.ghosts, self.previous
        if ghosts:  # (only the last window's count now; none once open)
            self.ghosts = {} if self.open else {k: s for k, s in ghosts.items() if s == previous}
