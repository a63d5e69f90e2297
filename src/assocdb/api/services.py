"""`Graph.services`: the services of a Graph that outer floors call directly."""

from __future__ import annotations

from typing import NamedTuple

from .assoc_reads import AssocReads
from .assoc_writes import AssocWrites
from .expiry import EdgeExpiry
from .feed import Feed
from .queries import Queries


class Services(NamedTuple):
    """The services of a Graph that outer floors call directly (`Graph.services`)."""

    reads: AssocReads  # `encoded`: a list read kept encoded with the cache's answers
    writes: AssocWrites  # `add_op`, `delete_op`, `state_op`; `bulk_load` in parts
    queries: Queries  # `edges`, `rows`: a query's rows as FlockDB's select pages them
    feed: Feed  # `trim`: the change feed's retention (a background pass does it too)
    expiry: EdgeExpiry  # `expire`: remove expired edges now (the cleaner thread does it too)
