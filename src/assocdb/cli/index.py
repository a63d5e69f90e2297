"""`assocdb index …`: define, build (with a progress bar and ETA), status, check, drop, query."""

from __future__ import annotations

import sys
import time
from typing import Any

import click
import msgspec

import assocdb

from ..api.cleaner import check_positive
from .graph import GRAPH

_STEP = 0.5  # seconds per index_build call: how often the progress bar moves


def _graph(directory: str) -> assocdb.Graph:
    """The graph at DIRECTORY (its errors become one line: the `assocdb` group's)."""
    return assocdb.open(directory, create=False)


@click.group()
def index() -> None:
    """Secondary indexes on objects: define, build, status, check, drop, query."""


@index.command("define")
@click.argument("directory", type=GRAPH)
@click.argument("name")
@click.argument("otype")
@click.argument("properties", nargs=-1, required=True)
@click.option("--order", help="'recency' (newest writes last) or one more property.")
@click.option("--unique", is_flag=True, help="Refuse a second live object with the same key.")
@click.option("--shard-on", help="The property (one of PROPERTIES) that places entries.")
def define(
    directory: str,
    name: str,
    otype: str,
    properties: tuple[str, ...],
    order: str | None,
    unique: bool,
    shard_on: str | None,
) -> None:
    """Declare index NAME on objects of OTYPE over PROPERTIES; build it next.

    Example: assocdb index define data/graph user_by_email user email --shard-on email
    """
    with _graph(directory) as g:
        status = g.define_index(
            name, otype, list(properties), order=order, unique=unique, shard_on=shard_on
        )
    click.echo(f"index {name}: {status.state}, {status.total:,} objects of type {otype}")


@index.command("build")
@click.argument("directory", type=GRAPH)
@click.argument("name")
@click.option("--rate", type=float, help="At most this many objects per second.")
@click.option("--seconds", type=float, help="Stop after this long (run again to resume).")
def build(directory: str, name: str, rate: float | None, seconds: float | None) -> None:
    """Index the existing objects for NAME, with a progress bar; resumable.

    Stopping it (Ctrl-C, --seconds) keeps the progress: run it again to go on.

    Example: assocdb index build data/graph user_by_email --rate 20000
    """
    with _graph(directory) as g:
        check_positive(rate, "rate", zero=False)  # also when there is nothing left to build
        check_positive(seconds, "seconds", zero=True)
        deadline = None if seconds is None else time.monotonic() + seconds
        if g.index_status(name).state == "ready":
            click.echo(f"index {name} is ready: every object of its type is indexed")
            return
        status = g.index_status(name)
        left = max(0, status.total - status.scanned)
        with click.progressbar(length=left, label=f"building {name}", show_eta=True) as bar:
            while status.state != "ready":
                step = _STEP if deadline is None else min(_STEP, deadline - time.monotonic())
                if step <= 0:
                    break
                before = status.scanned
                status = g.index_build(name, rate=rate, seconds=step)
                bar.update(status.scanned - before)
    click.echo(f"index {name}: {status.state}, {status.scanned:,} of {status.total:,} scanned")


@index.command("status")
@click.argument("directory", type=GRAPH)
@click.argument("name", required=False)
def status(directory: str, name: str | None) -> None:
    """Print every index (or NAME) with its state and build progress.

    Example: assocdb index status data/graph
    """
    with _graph(directory) as g:
        found = [g.index_status(name)] if name else g.indexes()
    if not found:
        click.echo("no indexes")
    for s in found:
        done = f"{s.scanned:,}/{s.total:,}" if s.state == "building" else f"{s.total:,}"
        shard = f" shard_on={s.shard_on}" if s.shard_on else ""
        order = f" order={s.order}" if s.order else ""
        unique = " unique" if s.unique else ""
        props = ",".join(s.properties)
        click.echo(
            f"{s.name:<24} {s.state:<9} {done:>15}  {s.otype}({props}){order}{shard}{unique}"
        )


@index.command("check")
@click.argument("directory", type=GRAPH)
@click.argument("name")
@click.option("--repair", is_flag=True, help="Fix what is found.")
def check(directory: str, name: str, repair: bool) -> None:
    """Compare index NAME with the objects; exits 1 if entries were missing, stale or dangling.

    Example: assocdb index check data/graph user_by_email --repair
    """
    with _graph(directory) as g:
        found = g.index_check(name, repair=repair)
    verb = "repaired" if repair else "found"
    click.echo(
        f"{found.objects:,} objects checked; {verb} {found.missing} missing, "
        f"{found.stale} stale and {found.dangling} dangling entries"
    )
    if found.missing or found.stale or found.dangling:
        sys.exit(1)


@index.command("drop")
@click.argument("directory", type=GRAPH)
@click.argument("name")
def drop(directory: str, name: str) -> None:
    """Stop maintaining index NAME and remove its tables.

    Example: assocdb index drop data/graph user_by_email
    """
    with _graph(directory) as g:
        g.drop_index(name)
    click.echo(f"dropped index {name}")


@index.command("query")
@click.argument("directory", type=GRAPH)
@click.argument("name")
@click.argument("eq", nargs=-1)
@click.option("--low", help="Lower bound (inclusive) of the next key part, as JSON.")
@click.option("--high", help="Upper bound (inclusive) of the next key part, as JSON.")
@click.option("--desc", is_flag=True, help="Largest keys first.")
@click.option("--limit", default=20, show_default=True)
@click.option("--cursor", help="A cursor printed by the previous page.")
def query(
    directory: str,
    name: str,
    eq: tuple[str, ...],
    low: str | None,
    high: str | None,
    desc: bool,
    limit: int,
    cursor: str | None,
) -> None:
    """Print the objects of index NAME whose leading key parts equal EQ (JSON, or text).

    Example: assocdb index query data/graph user_by_age --low 18 --high 30
    """
    with _graph(directory) as g:
        page = g.index_query(
            name,
            [_value(v) for v in eq],
            _value(low),
            _value(high),
            desc=desc,
            limit=limit,
            cursor=cursor,
        )
    for obj in page.items:
        click.echo(msgspec.json.encode(obj).decode())
    if page.next_cursor is not None:
        click.echo(f"next: --cursor {page.next_cursor}")
    if not page.complete:
        click.echo("(the index is still being built: objects not yet reached are missing)")


def _value(text: str | None) -> Any:
    """A JSON value, or the text itself if it is not JSON (`alice` means "alice")."""
    if text is None:
        return None
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text
