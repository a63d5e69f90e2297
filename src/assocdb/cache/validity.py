"""How long tier 1 may trust an entry: as long as the write-through keeps it right.

This process's writes reach its entries through `Cache.apply`; tier 2 (Redis, or
the server's ring) delivers other processes' invalidations. What no channel
delivers is another process's write to the same graph: a script beside a server,
a second library user of one SQLite directory. Two ways to bound that:

* with a change signal (`foreign`: whether another process wrote since the last
  call; SQLite graphs have one, `storage.changesignal`), entries do not age:
  every `max_age` seconds a read asks the signal, and if another process wrote,
  all of tier 1 is dropped (a fill that read before that write is dropped with
  it). Without other writers, an entry lives until evicted or written;
* without one (database servers, or tier 2 on, whose invalidations can be lost
  while Redis is away), an entry is refilled once it is `max_age` seconds old.

Either way another process's write shows here within `max_age`.
"""

from __future__ import annotations

from collections.abc import Callable


class Validity:
    """Whether an entry born at a time (on `clock`) may still answer."""

    __slots__ = ("_due", "clock", "foreign", "max_age", "on_foreign")

    def __init__(
        self,
        max_age: float,
        clock: Callable[[], float],
        foreign: Callable[[], bool] | None,
        on_foreign: Callable[[], None],
    ) -> None:
        self.max_age = max_age
        self.clock = clock
        self.foreign = foreign
        self.on_foreign = on_foreign  # drops every entry
        self._due = clock() + max_age

    def aged(self, born: float) -> bool:
        """Whether an entry born then must be refilled (with a signal: whether another
        process's write just dropped every entry)."""
        now = self.clock()
        if self.foreign is None:
            return now - born >= self.max_age
        if now < self._due:
            return False
        self._due = now + self.max_age
        if self.foreign():
            self.on_foreign()
            return True
        return False
