"""`assocdb backup SOURCE DEST`, `assocdb backup verify DEST`, and the work of
`assocdb restore BACKUP DEST` (`cli/restore.py`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from ..api import backup as backups
from ..api.restore import parse_time, restore_backup
from .graph import GRAPH


class _BackupGroup(click.Group):
    """`backup SOURCE DEST` is the group's own work; `backup verify DEST` a subcommand:
    anything but a subcommand's name first runs `backup create`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["create", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_BackupGroup)
def backup() -> None:
    """Back up a graph while it serves writes: `assocdb backup SOURCE DEST`.

    The backup is one consistent cut of every shard (every write acknowledged before
    it is in, none after; counts and inverse pairs exact), a graph directory with a
    manifest. Check it with `assocdb backup verify DEST`, bring it back with
    `assocdb restore`. Example: assocdb backup data/graph backups/2026-11-28
    """


@backup.command("create")
@click.argument("source", type=GRAPH)
@click.argument("dest", type=click.Path())
@click.option(
    "--since",
    type=click.Path(),
    help="An earlier backup of SOURCE (taken with the change feed on): DEST starts as a "
    "copy of it and reads only the changes since from SOURCE.",
)
def create(source: str, dest: str, since: str | None) -> None:
    """Back up the graph SOURCE (a directory, or a MariaDB or PostgreSQL URL with
    ?journal=FILE) into the new directory DEST; its writers wait only for the cut
    (milliseconds). A backup stopped part way resumes with the same command.
    Example: assocdb backup data/graph backups/today --since backups/yesterday"""
    with _bar("backing up") as progress:
        manifest = backups.backup(source, dest, progress=progress, since=since)
    caught = f"; {manifest.caught_up} shards caught up through the feed" * (manifest.caught_up > 0)
    click.echo(
        f"backed up {manifest.edges:,} edges of {manifest.shards} shards to {dest} "
        f"(writers held {manifest.held * 1000:.1f} ms at the cut; "
        f"{manifest.replayed} unfinished writes applied{caught})"
    )


@backup.command("verify")
@click.argument("dest", type=click.Path())
def verify(dest: str) -> None:
    """Check the backup DEST: every file against its checksum, then, read-only, every count
    against the rows and every edge against its inverse. Exit status 1 if anything is
    wrong. Example: assocdb backup verify backups/2026-11-28"""
    check = backups.verify(dest)
    for mismatch in check.counts[:20]:
        click.echo(f"count: {mismatch}")
    for hanging in check.hanging[:20]:
        click.echo(f"hanging edge: {hanging.edge}")
    if not check.ok:
        schema = "" if check.schema else ", type definitions differ from the manifest's"
        raise click.ClickException(
            f"{dest}: {len(check.counts)} wrong counts, {len(check.hanging)} hanging edges" + schema
        )
    click.echo(f"{dest}: ok ({check.edges:,} edges, {check.manifest.shards} shards)")


def restore_from_backup(backup_dir: str, dest: str, to: str | None, source: str | None) -> None:
    """`assocdb restore BACKUP DEST [--to TIME] [--from GRAPH]` (`cli/restore.py`)."""
    upto = None if to is None else parse_time(to)
    rolled = [0]

    def count(n: int) -> None:
        rolled[0] += n

    with _bar("restoring") as progress:
        done = restore_backup(
            backup_dir, dest, to=upto, source=source, progress=progress, rolled=count
        )
    tail = "" if done.to is None else f", rolled forward {done.rolled_forward:,} changes"
    click.echo(f"restored {done.manifest.edges:,} edges to {dest}{tail}")


@contextmanager
def _bar(label: str) -> Iterator[Callable[[int, int], None]]:
    bar: Any = None
    shown = [0]

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=max(total, 1), label=label)
            bar.__enter__()
        bar.update(done - shown[0])
        shown[0] = done

    try:
        yield progress
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
