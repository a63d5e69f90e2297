"""Real graphs shipped with assocdb, for demos, tests and benchmarks.

`ego_facebook()` is SNAP's ego-Facebook friendship graph (McAuley & Leskovec,
NIPS 2012): 4,039 people and 88,234 undirected friendships, one `a b` pair per
line. SNAP numbers people from 0 and assocdb ids start at 1, so person n is
id n + 1 here.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from importlib import resources

EGO_FACEBOOK_PEOPLE = 4039
EGO_FACEBOOK_FRIENDSHIPS = 88234


def ego_facebook() -> Iterator[tuple[int, int]]:
    """Yield each friendship `(a, b)` of ego-Facebook once, in file order."""
    source = resources.files("assocdb").joinpath("facebook_combined.txt.gz")
    with source.open("rb") as raw, gzip.open(raw, "rt", encoding="ascii") as lines:
        for line in lines:
            a, b = line.split()
            yield int(a) + 1, int(b) + 1
