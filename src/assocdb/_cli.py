"""The `assocdb` command line: a few lines over the library per command."""

from __future__ import annotations

import time

import click

import assocdb

from ._datasets import ego_facebook


@click.group()
@click.version_option(assocdb.__version__, prog_name="assocdb")
def main() -> None:
    """assocdb: a data store for huge social graphs."""


@main.command()
@click.argument("directory", default="data/demo", type=click.Path(file_okay=False))
def demo(directory: str) -> None:
    """Load the ego-Facebook friendship graph into DIRECTORY and ask it questions.

    Person n of the SNAP file is id n + 1. Friendships get times in file order,
    so "newest first" means "latest in the file first".

    Example: assocdb demo data/demo
    """
    with assocdb.open(directory) as g:
        g.define_assoc("friend", symmetric=True)
        if g.assoc_count(1, "friend") == 0:
            started = time.perf_counter()
            base = 1_600_000_000_000
            edges = ((a, "friend", b, base + n) for n, (a, b) in enumerate(ego_facebook()))
            loaded = g.bulk_load(edges)
            seconds = time.perf_counter() - started
            click.echo(f"loaded {loaded:,} friendships (both directions) in {seconds:.2f} s")
        person, other = 1, 2
        click.echo(f"person {person} has {g.assoc_count(person, 'friend')} friends")
        page = g.assoc_page(person, "friend", limit=10)
        click.echo(f"their 10 newest friends: {[a.id2 for a in page.items]}")
        mutual = mutual_friends(g, person, other)
        click.echo(f"{len(mutual)} mutual friends of {person} and {other}: {mutual[:20]}")


def mutual_friends(g: assocdb.Graph, a: int, b: int) -> list[int]:
    """Walk the smaller friend list and probe the larger one for each page of it."""
    small, large = sorted((a, b), key=lambda n: g.assoc_count(n, "friend"))
    found: list[int] = []
    cursor = None
    while True:
        page = g.assoc_page(small, "friend", cursor, limit=500)
        probe = [x.id2 for x in page.items]
        found += [x.id2 for x in g.assoc_get(large, "friend", probe)] if probe else []
        cursor = page.next_cursor
        if cursor is None:
            return sorted(found)
