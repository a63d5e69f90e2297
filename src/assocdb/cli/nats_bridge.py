"""`assocdb changes DIR --to nats://… --group G`: the change feed published to NATS
JetStream, resuming from the group's committed position.

Each page of changes is published, one message per change, to subject
`PREFIX.KIND.TYPE` (`assocdb.changes.edge.followed_by`) of stream `STREAM` (created if
missing), and the group's cursor is committed only once JetStream acknowledged the whole
page. A bridge killed midway publishes the page again when it restarts; each message
carries `Nats-Msg-Id: GRAPH-SHARD-POSITION` (GRAPH: the graph's stable random id, as
the shared cache keys it), so JetStream drops the repeats within its duplicate window
(2 minutes by default) and a consumer sees each change once.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import msgspec

import assocdb

from ..core.extras import require

STREAM = "ASSOCDB_CHANGES"
PREFIX = "assocdb.changes"
_encode = msgspec.json.Encoder().encode


def run_bridge(g: assocdb.Graph, url: str, group: str, follow: bool, limit: int) -> int:
    """Publish the changes after `group`'s position to JetStream at `url`; how many."""
    feature = "the NATS bridge (assocdb changes --to nats://…)"
    nats = require("nats", "nats", feature)
    missing = require("nats.js.errors", "nats", feature).NotFoundError
    return asyncio.run(_bridge(nats, missing, g, url, group, follow, limit))


async def _bridge(
    nats: Any,
    missing: type[Exception],
    g: assocdb.Graph,
    url: str,
    group: str,
    follow: bool,
    limit: int,
) -> int:
    graph = _graph_id(g)
    connection = await nats.connect(url)
    try:
        js = connection.jetstream()
        try:
            await js.stream_info(STREAM)
        except missing:
            await js.add_stream(name=STREAM, subjects=[f"{PREFIX}.>"])
        published = 0
        while True:
            wait = 1.0 if follow else 0.0
            page = await asyncio.to_thread(g.changes, limit=limit, group=group, wait=wait)
            for change in page.items:
                subject = f"{PREFIX}.{change.kind}.{change.type}"
                msg_id = f"{graph}-{change.shard}-{change.position}"
                await js.publish(subject, _encode(change), headers={"Nats-Msg-Id": msg_id})
            g.feed_commit(group, page.next_cursor)  # after JetStream acknowledged all
            published += len(page.items)
            if not page.items and not follow:
                return published
    finally:
        await connection.close()


def _graph_id(g: assocdb.Graph) -> str:
    """The graph's stable random id (made on first use, as `Engine` makes it)."""
    backend = g.engine.backend
    while (stored := backend.get_meta("graph_id")) is None:
        backend.swap_meta("graph_id", None, uuid.uuid4().hex.encode())
    return stored.decode()
