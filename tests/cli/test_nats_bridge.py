"""`assocdb changes --to nats://…` (cli/nats_bridge.py) against a real NATS server with
JetStream: it publishes a group's changes, resumes from the committed position, and a
page published again after a crash is dropped by JetStream as a duplicate.

Runs when ASSOCDB_TEST_NATS_URL (e.g. `nats://127.0.0.1:4222`) is set and nats-py is
installed; skipped otherwise."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

import assocdb
from assocdb.cli.main import main
from assocdb.cli.nats_bridge import PREFIX, STREAM

URL = os.environ.get("ASSOCDB_TEST_NATS_URL")
nats = pytest.importorskip("nats") if URL else None
pytestmark = pytest.mark.skipif(URL is None, reason="ASSOCDB_TEST_NATS_URL is not set")


def _stored(subject: str) -> int:
    """How many messages the stream holds on `subject`."""

    async def count() -> int:
        connection = await nats.connect(URL)  # type: ignore[union-attr]
        try:
            info = await connection.jetstream().stream_info(STREAM, subjects_filter=subject)
            return int((info.state.subjects or {}).get(subject, 0))
        finally:
            await connection.close()

    return asyncio.run(count())


def test_the_bridge_publishes_once_and_resumes(tmp_path: Path) -> None:
    where, kind = tmp_path / "g", f"t{uuid.uuid4().hex[:10]}"
    with assocdb.open(where, shards=2) as g:
        g.define_assoc(kind)
        g.enable_feed()
        start = g.changes().next_cursor
        g.assoc_add(1, kind, 2)
        g.assoc_add(3, kind, 4)
    runner = CliRunner()
    args = ["changes", str(where), "--to", str(URL), "--group", "bridge"]
    first = runner.invoke(main, args)
    assert first.exit_code == 0, first.output
    subject = f"{PREFIX}.edge.{kind}"
    assert "published 2" in first.output
    assert _stored(subject) == 2, first.output
    assert "published 0" in runner.invoke(main, args).output  # resumed: nothing new
    with assocdb.open(where) as g:  # a crash before the commit: the page goes again
        g.feed_commit("bridge", start)
    assert "published 2" in runner.invoke(main, args).output
    assert _stored(subject) == 2  # JetStream dropped the repeats by their message ids
