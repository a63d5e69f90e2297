"""`assocdb changes DIR`: the graph's change feed as JSON lines (one `Change` a line)."""

from __future__ import annotations

import sys

import click
import msgspec

import assocdb

from .graph import GRAPH
from .nats_bridge import run_bridge

_encode = msgspec.json.Encoder().encode


@click.command()
@click.argument("directory", type=GRAPH)
@click.option("--cursor", help="Start after this cursor (default: the start, or the group's).")
@click.option("--group", help="A consumer group: start at its committed cursor, commit each page.")
@click.option("--member", help="A member of --group: read only the shards dealt to it.")
@click.option("--follow", is_flag=True, help="Keep waiting for new changes (Ctrl-C stops).")
@click.option("--type", "types", multiple=True, help="Only changes of this type (repeatable).")
@click.option("--limit", default=1000, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--enable", is_flag=True, help="Turn the feed on first (it is off by default).")
@click.option("--to", help="Publish to NATS JetStream at this nats:// URL (needs --group).")
def changes(
    directory: str,
    cursor: str | None,
    group: str | None,
    member: str | None,
    follow: bool,
    types: tuple[str, ...],
    limit: int,
    enable: bool,
    to: str | None,
) -> None:
    """Print the changes after a cursor as JSON lines; the next cursor goes to stderr.

    With --group, each page is committed once printed (at-least-once: a page cut off
    by a crash prints again); with --member too, several such commands share the shards.
    With --to, the changes go to NATS JetStream instead
    (`cli/nats_bridge.py`). Example: assocdb changes data/graph --follow --group mail
    """
    if member is not None and (group is None or to is not None):
        raise click.UsageError("--member is a member of a --group (and not with --to)")
    if to is not None and (group is None or cursor is not None or types):
        raise click.UsageError(
            "--to publishes a --group's changes: give --group, not --cursor or --type"
        )
    with assocdb.open(directory, create=False) as g:
        if enable:
            g.enable_feed()
        if to is not None:
            sent = run_bridge(g, to, group or "", follow, limit)
            click.echo(f"published {sent} changes to {to}", err=True)
            return
        wanted = list(types) or None
        while True:
            wait = 1.0 if follow else 0.0
            page = g.changes(
                cursor, limit=limit, types=wanted, group=group, wait=wait, member=member
            )
            for change in page.items:
                click.echo(_encode(change))
            if group is not None and page.next_cursor != cursor:
                # Out of this process before the commit: a pipe's buffer dies with a kill.
                sys.stdout.flush()
                g.feed_commit(group, page.next_cursor, member)
            cursor = page.next_cursor
            if not page.items and not follow:
                click.echo(f"next cursor: {cursor}", err=True)
                return
