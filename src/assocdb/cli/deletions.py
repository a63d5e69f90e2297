"""`assocdb delete`, `deletions` and the work of `assocdb restore GRAPH ID`: cascading
deletions from the command line."""

from __future__ import annotations

import time

import click

import assocdb

from .graph import GRAPH


@click.command()
@click.argument("directory", type=GRAPH)
@click.argument("id", type=click.IntRange(1))
@click.option(
    "--no-wait", is_flag=True, help="Return once the object is gone; the rest runs later."
)
def delete(directory: str, id: int, no_wait: bool) -> None:
    """Delete object ID and, by its types' on_delete rules, what hangs off it.

    The object is gone at once; its edges (both directions), deep targets and
    orphaned refcount targets follow in a durable job, restorable with
    `assocdb restore` within the window. Without --no-wait, waits for the job.

    Example: assocdb delete data/graph 4242
    """
    with assocdb.open(directory, create=False) as g:
        g.obj_delete(id, cascade=True)
        if not no_wait:
            g.deletions.wait()
        click.echo(_line(g.deletions.of_object(id)))


def restore_object(directory: str, id: int) -> None:
    """`assocdb restore GRAPH ID`: put back what the latest deletion of object ID removed
    (within its window; `cli/restore.py`)."""
    with assocdb.open(directory, create=False) as g:
        click.echo(_line(g.obj_restore(id)))


@click.command()
@click.argument("directory", type=GRAPH)
@click.option("--purge", is_flag=True, help="Erase the records of deletions past their window.")
def deletions(directory: str, purge: bool) -> None:
    """List every cascading deletion: status, window and what it removed, by type.

    With --purge, first erase for good the records of those past their
    window (they can no longer be restored) and say which.

    Example: assocdb deletions data/graph --purge
    """
    with assocdb.open(directory, create=False) as g:
        if purge:
            for gone in g.deletions.purge():
                click.echo(f"purged deletion {gone.id} of object {gone.root}")
        for deletion in g.deletions.all():
            click.echo(_line(deletion))


def _line(d: assocdb.Deletion) -> str:
    until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(d.restorable_until))
    objects = ", ".join(f"{n} {name}" for name, n in d.objects.items()) or "no objects"
    edges = ", ".join(f"{n} {name}" for name, n in d.edges.items()) or "no edges"
    return (
        f"deletion {d.id} of object {d.root}: {d.status}, restorable until {until}; "
        f"removed {objects}; edges {edges}"
        + (f"; {d.home} home-timeline entries" if d.home else "")
    )
