"""`assocdb shards reclaim` and `assocdb shards rebalance`: space and balance after growth."""

from __future__ import annotations

import click

from ..storage.reclaim import reclaim

MAP = click.Path(dir_okay=False, exists=True)


@click.command("reclaim")
@click.argument("shard_map", type=MAP)
@click.option("--drop", is_flag=True, help="Empty the copies listed (default: only list them).")
def shards_reclaim(shard_map: str, drop: bool) -> None:
    """List the copies on the map's servers that the map no longer names (left behind by
    moves and drop-replica) and, with --drop, empty them. Never a copy the map places or
    a recorded move names, and only once the map has been unchanged long enough for
    every process to have taken it (2 s + the slowest query timeout).

    Example: assocdb shards reclaim cluster.toml --drop
    """
    found = reclaim(shard_map, drop=drop)
    for line in found.skipped:
        click.echo(f"skipped {line}")
    if not found.copies:
        click.echo("no old copies")
        return
    click.echo(f"{'backend':<12} {'shard':>5}  {'schema':<32} {'rows':>12}")
    for copy in found.copies:
        click.echo(f"{copy.backend:<12} {copy.shard:>5}  {copy.schema:<32} {copy.rows:>12,}")
    rows = sum(copy.rows for copy in found.copies)
    summary = f"{len(found.copies)} old copies, {rows:,} rows"
    if found.dropped:
        click.echo(f"{summary}: emptied")
    elif found.waiting > 0:
        click.echo(f"{summary}; the map changed recently: --drop in {found.waiting:.1f} s")
    else:
        click.echo(f"{summary}; a dry run: run again with --drop to empty them")
