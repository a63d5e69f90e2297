"""`assocdb shards reclaim` and `assocdb shards rebalance`: space and balance after growth."""

from __future__ import annotations

import time

import click

from ..storage import shardmap_config
from ..storage.rebalance import ESTIMATED_RATE, Plan, Progress, make_plan, rebalance, saved
from ..storage.reclaim import reclaim, settle_of

MAP = click.Path(dir_okay=False, exists=True)


@click.command("reclaim")
@click.argument("shard_map", type=MAP)
@click.option("--drop", is_flag=True, help="Drop the copies listed (default: only list them).")
def shards_reclaim(shard_map: str, drop: bool) -> None:
    """List the copies (schemas) on the map's servers that the map does not name (left
    behind by moves and drop-replica, or never used) and, with --drop, drop them. Never a
    copy the map places or a recorded move names, and only once the map has been unchanged
    long enough for every process to have taken it (2 s + the slowest query timeout).

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
        click.echo(f"{summary}: dropped")
    elif found.waiting > 0:
        click.echo(f"{summary}; the map changed recently: --drop in {found.waiting:.1f} s")
    else:
        click.echo(f"{summary}; a dry run: run again with --drop to drop them")


@click.command("rebalance")
@click.argument("shard_map", type=MAP)
@click.option("--to", "target", help="Only this backend receives shards (a new server).")
@click.option("--parallel", default=2, show_default=True, type=click.IntRange(1, 16),
              help="Moves run at once (two hide each move's wait for the map).")  # fmt: skip
@click.option("--rate", type=click.FloatRange(min=0, min_open=True),
              help="Cap each move's copy at this many rows/s (default: no cap).")  # fmt: skip
@click.option("--limit", type=click.IntRange(1), help="Plan at most this many moves.")
@click.option("--dry-run", is_flag=True, help="Show the plan; move nothing.")
@click.option("--replan", is_flag=True, help="Forget a saved, unfinished plan and plan again.")
def shards_rebalance(
    shard_map: str,
    target: str | None,
    parallel: int,
    rate: float | None,
    limit: int | None,
    dry_run: bool,
    replan: bool,
) -> None:
    """Plan moves that even out rows per server (onto --to only, if given), show the plan
    (shards, rows, estimated time) and run it, --parallel moves at a time, with
    progress and ETA. Killed or interrupted, the same command resumes the saved plan.

    Example: assocdb shards rebalance cluster.toml --to db4
    """
    smap = shardmap_config.load(shard_map)
    chosen = None if replan else saved(shard_map)
    if chosen is not None:
        done = len(chosen.steps) - len(chosen.remaining)
        click.echo(f"resuming the saved plan: {done} of {len(chosen.steps)} moves done")
    else:
        chosen = make_plan(shard_map, target, limit)
    if not chosen.steps:
        click.echo("the servers are balanced: nothing to move")
        return
    _show(chosen, settle_of(smap))
    if dry_run:
        return
    total = len(chosen.steps)

    def show(now: Progress) -> None:
        where = (
            f"shard {now.step.shard} {now.step.source} → {now.step.target}: "
            f"{now.copied:,}/{now.step.rows:,} rows, {now.rows_per_second:,.0f} rows/s; "
            if now.step is not None
            else ""
        )
        click.echo(f"[{now.done}/{total} moves] {where}ETA {now.eta:,.0f} s", err=True)

    started = time.perf_counter()
    try:
        finished = rebalance(shard_map, chosen, parallel=parallel, rate=rate, progress=show)
    except KeyboardInterrupt:
        raise click.ClickException(
            f"interrupted; the plan is saved beside {shard_map}: run the same command "
            "again to resume"
        ) from None
    after = shardmap_config.load(shard_map)
    sizes = {s.shard: s.rows for s in finished.steps}
    held = {name: len(after.shards_of(name)) for name in after.backends}
    click.echo(
        f"rebalanced: {len(finished.steps)} moves, {sum(sizes.values()):,} rows, in "
        f"{time.perf_counter() - started:,.0f} s; shards per backend now: "
        + ", ".join(f"{name} {count}" for name, count in held.items())
    )


def _show(chosen: Plan, settle: float) -> None:
    click.echo(f"{'shard':>5}  {'from':<10} {'to':<10} {'rows':>12}  done")
    for step in chosen.steps:
        mark = "yes" if step.done else ""
        click.echo(f"{step.shard:>5}  {step.source:<10} {step.target:<10} {step.rows:>12,}  {mark}")
    rows = sum(step.rows for step in chosen.remaining)
    at = (
        f"at the {chosen.rate:,.0f} rows/s the finished moves measured"
        if chosen.rate
        else f"at {ESTIMATED_RATE:,.0f} rows/s and {settle:.0f} s waits twice a move"
    )
    click.echo(
        f"{len(chosen.remaining)} moves to run, {rows:,} rows: about "
        f"{chosen.seconds(settle):,.0f} s {at}"
    )
