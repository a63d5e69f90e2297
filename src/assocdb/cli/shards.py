"""`assocdb shards …`: a shard map's members, check, verify, replicas, moves, weights, drains."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from ..storage import shardmap_config
from ..storage.moves import cancel_move, drop_replica, move_shard
from ..storage.registry import open_shardmap
from ..storage.replica_verify import verify_replicas


@click.group()
def shards() -> None:
    """Show, check and change a shard map: a TOML file placing shards on replica sets.

    Running processes take new weights and drains from the file within a second.
    """


@shards.command("show")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
def shards_show(shard_map: str) -> None:
    """Print each backend (probed now: up, down or drained) and each shard's replicas.

    Example: assocdb shards show cluster.toml
    """
    backend = open_shardmap(shard_map)
    try:
        problems = {name: backend.probe(name) for name in backend.map.backends}
        click.echo("\n".join(shardmap_config.table(backend.map, problems)))
    finally:
        backend.close()


@shards.command("check")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
def shards_check(shard_map: str) -> None:
    """Validate the map and probe every backend; exit status 1 if one does not answer.

    Example: assocdb shards check cluster.toml
    """
    backend = open_shardmap(shard_map)
    try:
        failed = 0
        for name in backend.map.backends:
            started = time.perf_counter()
            problem = backend.probe(name)
            ms = (time.perf_counter() - started) * 1000
            click.echo(f"{name:<12} {'FAILED: ' + problem if problem else 'ok'} ({ms:.1f} ms)")
            failed += problem is not None
    finally:
        backend.close()
    if failed:
        raise click.ClickException(f"{failed} backend(s) did not answer")


@shards.command("verify")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("shard_ranges", nargs=-1)
@click.option("--repair", is_flag=True, help="Fix differing rows (the newer row wins).")
def shards_verify(shard_map: str, shard_ranges: tuple[str, ...], repair: bool) -> None:
    """Compare every replica of each shard (or of SHARD_RANGES): per-range checksums
    computed on each server first, then row by row only where they differ.

    Prints each row the replicas disagree about; --repair writes the newer row
    to every replica (the merge rule, so it is safe while the graph is in use)
    and recounts the lists it touched. Exits 1 if anything differed.

    Example: assocdb shards verify cluster.toml 0-7 --repair
    """
    backend = open_shardmap(shard_map)
    try:
        named = (shardmap_config.parse_shards(text, backend.shards) for text in shard_ranges)
        chosen = [shard for shards in named for shard in shards] or list(range(backend.shards))
        with click.progressbar(length=len(chosen), label="shards", file=sys.stderr) as bar:
            report = verify_replicas(
                backend, chosen, repair=repair, progress=lambda shard, rows: bar.update(1)
            )
    finally:
        backend.close()
    for difference in report.differences:
        click.echo(f"shard {difference.shard} {difference.table} {_key(difference.key)}:")
        for name, row in difference.rows.items():
            click.echo(f"  {name:<12} {'missing' if row is None else _key(row)}")
    verb = "repaired" if repair else "found"
    rate = report.rows / report.seconds if report.seconds else 0.0
    click.echo(
        f"{verb} {len(report.differences)} differences in {len(report.shards)} shards "
        f"({report.rows:,} rows read in {report.seconds:.1f} s, {rate:,.0f} rows/s)"
    )
    if report.differences:
        sys.exit(1)


def _key(values: tuple[Any, ...]) -> str:
    """A key or row for a person: blobs shortened to their length."""
    shown = (
        f"<{len(v)} bytes>" if isinstance(v, bytes) and len(v) > 24 else repr(v) for v in values
    )
    return f"({', '.join(shown)})"


@shards.command("add-backend")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("name")
@click.option("--url", help="A MySQL/MariaDB server: mysql://user@host:port/graph")
@click.option("--path", "directory", help="A SQLite directory (relative to the map file).")
def shards_add_backend(shard_map: str, name: str, url: str | None, directory: str | None) -> None:
    """Add a backend NAME to the map; it holds nothing until a replica is added on it.

    Example: assocdb shards add-backend cluster.toml db4 --url mysql://root@10.0.0.4/graph
    """
    if (url is None) == (directory is None):
        raise click.UsageError("give exactly one of --url and --path")
    config = shardmap_config.BackendConfig(url=url, path=directory)
    shardmap_config.update(shard_map, lambda smap: shardmap_config.with_backend(smap, name, config))
    click.echo(f"{name} added to {shard_map}")


_RATE = click.option(
    "--rate", type=click.FloatRange(min=1), help="Rows copied per second, at most."
)


@shards.command("add-replica")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("shard_range")
@click.option("--on", "target", required=True, help="The backend that gets the new copy.")
@click.option("--weight", default=1, show_default=True, type=click.IntRange(0, 1000))
@_RATE
def shards_add_replica(
    shard_map: str, shard_range: str, target: str, weight: int, rate: float | None
) -> None:
    """Copy the shards SHARD_RANGE onto backend --on, online, as one more replica each.

    The copy takes writes at once (write-only), gets the existing rows in the
    background, is verified, then serves reads. Interrupted, it resumes when run again.

    Example: assocdb shards add-replica cluster.toml 0-3 --on db4 --rate 20000
    """
    _copy_shards(shard_map, shard_range, target, None, False, weight, rate)


@shards.command("move")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("shard_range")
@click.option("--to", "target", required=True, help="The backend the shards move to.")
@click.option("--from", "source", help="The replica that moves (if a shard has several).")
@click.option("--weight", default=1, show_default=True, type=click.IntRange(1, 1000))
@_RATE
def shards_move(
    shard_map: str,
    shard_range: str,
    target: str,
    source: str | None,
    weight: int,
    rate: float | None,
) -> None:
    """Move the shards SHARD_RANGE to backend --to, online: copied as in add-replica,
    then the old copy is drained of reads and leaves the replica set (its rows stay).

    Interrupted (Ctrl-C, a crash), it resumes where it stopped when run again.

    Example: assocdb shards move cluster.toml 4-7 --to db4 --rate 20000
    """
    _copy_shards(shard_map, shard_range, target, source, True, weight, rate)


def _copy_shards(
    shard_map: str,
    shard_range: str,
    target: str,
    source: str | None,
    move: bool,
    weight: int,
    rate: float | None,
) -> None:
    chosen = shardmap_config.parse_shards(shard_range, shardmap_config.load(shard_map).shards)
    for shard in chosen:
        with _CopyBar(f"shard {shard} → {target}") as bar:
            try:
                result = move_shard(
                    shard_map,
                    shard,
                    target,
                    remove=source,
                    move=move,
                    weight=weight,
                    rate=rate,
                    progress=bar.show,
                )
            except KeyboardInterrupt:
                raise click.ClickException(
                    f"interrupted; shard {shard}'s copy is recorded in {shard_map}: "
                    "run the same command again to resume"
                ) from None
        if result.already:
            click.echo(f"shard {shard}: already on {target}, nothing to do")
            continue
        rate_done = result.copied / result.seconds if result.seconds else 0.0
        moved = f", {result.source} removed" if result.source else ""
        click.echo(
            f"shard {shard}: copied {result.copied:,} rows to {target} in {result.seconds:.1f} s "
            f"({rate_done:,.0f} rows/s), {result.differences} repaired by verify, live{moved}"
        )


class _CopyBar:
    """A progress bar of a shard's copy (rows, rows/s, ETA), shown once rows are counted."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._bar: Any = None
        self._shown = 0
        self._speed = ""

    def __enter__(self) -> _CopyBar:
        return self

    def show(self, progress: Any) -> None:
        self._speed = f"{progress.rows_per_second:,.0f} rows/s"
        if self._bar is None:
            self._bar = click.progressbar(
                length=max(progress.total, 1),
                label=self._label,
                file=sys.stderr,
                show_pos=True,
                item_show_func=lambda _: self._speed,
            )
            self._bar.__enter__()
            self._shown = progress.copied  # resumed: the rows copied before
        self._bar.update(progress.copied - self._shown)
        self._shown = progress.copied

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


@shards.command("drop-replica")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("shard_range")
@click.argument("backend")
def shards_drop_replica(shard_map: str, shard_range: str, backend: str) -> None:
    """Take BACKEND's copy of the shards SHARD_RANGE out of their replica sets: drained of
    reads first, then removed (its rows stay on BACKEND). Refuses a shard's last copy.

    Example: assocdb shards drop-replica cluster.toml 0-3 db1
    """
    chosen = shardmap_config.parse_shards(shard_range, shardmap_config.load(shard_map).shards)
    for shard in chosen:
        dropped = drop_replica(shard_map, shard, backend)
        click.echo(f"shard {shard}: {backend} {'dropped' if dropped else 'held no copy'}")


@shards.command("cancel")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("shard_range")
@click.option("--to", "target", required=True, help="The backend the copies were made on.")
def shards_cancel(shard_map: str, shard_range: str, target: str) -> None:
    """Roll back the copies of the shards SHARD_RANGE being made on --to (a move or an
    added replica that is not live yet): the copy leaves the replica set and each shard
    is as it was. Stop the mover first. Its rows stay on the backend.

    Example: assocdb shards cancel cluster.toml 4-7 --to db4
    """
    chosen = shardmap_config.parse_shards(shard_range, shardmap_config.load(shard_map).shards)
    for shard in chosen:
        cancelled = cancel_move(shard_map, shard, target)
        click.echo(f"shard {shard}: {'cancelled' if cancelled else 'no copy under way'}")


@shards.command("set-weight")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("shard_range")
@click.argument("backend")
@click.argument("weight", type=int)
def shards_set_weight(shard_map: str, shard_range: str, backend: str, weight: int) -> None:
    """Set BACKEND's read weight on the shards SHARD_RANGE ("0-7", "3", "0-3,8"); 0: write-only.

    Example: assocdb shards set-weight cluster.toml 0-7 db2 3
    """

    def change(smap: shardmap_config.ShardMap) -> shardmap_config.ShardMap:
        shards = shardmap_config.parse_shards(shard_range, smap.shards)
        return shardmap_config.with_weight(smap, shards, backend, weight)

    shardmap_config.update(shard_map, change)
    click.echo(f"{backend} now has weight {weight} on shards {shard_range}")


@shards.command("mark-down")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("backend")
def shards_mark_down(shard_map: str, backend: str) -> None:
    """Drain BACKEND: no reads or writes go to it (its writes wait in the journals).

    Example: assocdb shards mark-down cluster.toml db2
    """
    _set_down(shard_map, backend, True)


@shards.command("mark-up")
@click.argument("shard_map", type=click.Path(dir_okay=False, exists=True))
@click.argument("backend")
def shards_mark_up(shard_map: str, backend: str) -> None:
    """Give a drained BACKEND back: it serves again once a probe passes.

    Example: assocdb shards mark-up cluster.toml db2
    """
    _set_down(shard_map, backend, False)


def _set_down(shard_map: str, backend: str, down: bool) -> None:
    shardmap_config.update(shard_map, lambda smap: shardmap_config.with_down(smap, backend, down))
    click.echo(f"{backend} is marked {'down' if down else 'up'} in {shard_map}")
