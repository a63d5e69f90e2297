"""`assocdb timeline …`: set up, post, delete, and read home and user timelines."""

from __future__ import annotations

from typing import Any

import click
import msgspec

import assocdb

from .graph import GRAPH


@click.group()
def timeline() -> None:
    """Timelines: set up, post, delete, and read home and user timelines."""


_DIR = click.argument("directory", type=GRAPH)
_MODE = click.Choice(["write", "read", "hybrid"])


@timeline.command("setup")
@_DIR
@click.option("--follows", default="follows", show_default=True, help="Follow type (with inverse).")
@click.option("--mode", type=_MODE, default="write", show_default=True)
@click.option("--cap", default=800, show_default=True, help="Entries kept per home timeline.")
@click.option("--celebrity-threshold", default=10_000, show_default=True, type=int)
def timeline_setup(
    directory: str, follows: str, mode: Any, cap: int, celebrity_threshold: int
) -> None:
    """Turn on timelines for DIRECTORY (or change their mode).

    Example: assocdb timeline setup data/graph --mode hybrid --celebrity-threshold 100000
    """
    with _graph(directory) as g:
        config = g.define_timeline(
            follows, mode=mode, cap=cap, celebrity_threshold=celebrity_threshold
        )
        click.echo(msgspec.json.encode(config).decode())


@timeline.command("post")
@_DIR
@click.argument("author", type=int)
@click.argument("item", type=int)
@click.option("--time", "time_", type=int, help="Sort key (default: now, in ms).")
def timeline_post(directory: str, author: int, item: int, time_: int | None) -> None:
    """Post ITEM as AUTHOR and wait for the delivery to followers.

    Example: assocdb timeline post data/graph 1 1001
    """
    with _graph(directory) as g:
        result = g.post(author, item, time_)
        g.drain()
        click.echo(f"posted ({result.status}) and delivered")


@timeline.command("delete")
@_DIR
@click.argument("author", type=int)
@click.argument("item", type=int)
def timeline_delete(directory: str, author: int, item: int) -> None:
    """Delete AUTHOR's ITEM everywhere it was delivered.

    Example: assocdb timeline delete data/graph 1 1001
    """
    with _graph(directory) as g:
        g.post_delete(author, item)
        g.drain()
        click.echo("deleted")


@timeline.command("home")
@_DIR
@click.argument("user", type=int)
@click.option("--limit", default=20, show_default=True)
@click.option("--cursor", help="A cursor printed by the previous page.")
@click.option("--mode", type=_MODE, help="Override the configured mode for this read.")
def timeline_home(directory: str, user: int, limit: int, cursor: str | None, mode: Any) -> None:
    """Print a page of USER's home timeline: time, item, author per line.

    Example: assocdb timeline home data/graph 2 --limit 20
    """
    with _graph(directory) as g:
        _print_timeline(g.home_timeline(user, cursor, limit, mode))


@timeline.command("user")
@_DIR
@click.argument("author", type=int)
@click.option("--limit", default=20, show_default=True)
@click.option("--cursor", help="A cursor printed by the previous page.")
def timeline_user(directory: str, author: int, limit: int, cursor: str | None) -> None:
    """Print a page of the items AUTHOR posted.

    Example: assocdb timeline user data/graph 1
    """
    with _graph(directory) as g:
        _print_timeline(g.user_timeline(author, cursor, limit))


def _graph(directory: str) -> assocdb.Graph:
    """The graph at DIRECTORY (its errors become one line: `_Commands`)."""
    return assocdb.open(directory, create=False)


def _print_timeline(page: assocdb.Page[assocdb.TimelineItem]) -> None:
    for item in page.items:
        click.echo(f"{item.time}\t{item.item}\t{item.author}")
    if page.next_cursor is not None:
        click.echo(f"next: --cursor {page.next_cursor}")
