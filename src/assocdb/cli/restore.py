"""`assocdb restore`: a backup into a new directory, or a deleted object back into its graph.

Both are "restore"; the second argument tells them apart: a number is an object's id,
anything else a new directory (write `./4242` for a directory named by digits).
"""

from __future__ import annotations

from pathlib import Path

import click

from ..core.backupmanifest import NAME as MANIFEST
from .backup import restore_from_backup
from .deletions import restore_object
from .graph import GRAPH


@click.command()
@click.argument("source", metavar="BACKUP|GRAPH")
@click.argument("target", metavar="DEST|ID")
@click.option(
    "--to", "to", help="Roll a backup forward to this time (ISO 8601, UTC unless it says)."
)
@click.option("--from", "origin", help="The source graph whose change feed to roll forward from.")
@click.pass_context
def restore(
    ctx: click.Context, source: str, target: str, to: str | None, origin: str | None
) -> None:
    """Restore a backup to a new directory, or put back a deleted object.

    \b
    assocdb restore BACKUP DEST [--to TIME]   the backup, as of its cut or of TIME
    assocdb restore GRAPH ID                  what the latest deletion of object ID
                                              removed (within the restore window)

    Examples: assocdb restore backups/2026-11-28 data/restored --to 2026-11-28T14:05:00Z
              assocdb restore data/graph 4242
    """
    if not target.isdigit():
        place = Path(source)
        if (place / "journal.db").is_file() and not (place / MANIFEST).exists():  # a graph
            raise click.UsageError(
                f"{source} is a graph, not a backup: to put back a deleted object give its "
                f"id, a number (got {target!r}), e.g. assocdb restore {source} 4242"
            )
        restore_from_backup(source, target, to, origin)
        return
    if to is not None or origin is not None:
        raise click.UsageError("--to and --from restore a backup; GRAPH ID restores an object")
    if int(target) < 1:
        raise click.BadParameter("an object id is 1 or more", param_hint="ID")
    restore_object(GRAPH.convert(source, None, ctx), int(target))
