"""The `assocdb` command line: a few lines over the library per command."""

from __future__ import annotations

import time

import click
import msgspec

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


@main.group()
def queue() -> None:
    """Inspect and steer the write journal: stats, errors, bad jobs, retries."""


@queue.command("stats")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
def queue_stats(directory: str) -> None:
    """Print how many jobs wait, fail or went bad.

    Example: assocdb queue stats data/graph
    """
    with assocdb.open(directory) as g:
        for field, value in msgspec.structs.asdict(g.queue_stats()).items():
            click.echo(f"{field:<16} {value}")


@queue.command("errors")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option("--limit", default=50, show_default=True, help="How many jobs to list.")
def queue_errors(directory: str, limit: int) -> None:
    """List jobs in the error queue, oldest first.

    Example: assocdb queue errors data/graph --limit 20
    """
    with assocdb.open(directory) as g:
        _print_jobs(g.queue_jobs("error", limit=limit))


@queue.command("bad")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option("--limit", default=50, show_default=True, help="How many jobs to list.")
@click.option("--show", "show", type=int, help="Print this job in full, as JSON.")
def queue_bad(directory: str, limit: int, show: int | None) -> None:
    """List bad jobs (failed too often), or show one in full.

    Example: assocdb queue bad data/graph --show 1234
    """
    with assocdb.open(directory) as g:
        if show is None:
            _print_jobs(g.queue_jobs("bad", limit=limit))
            return
        job = g.queue_job(show)
        if job is None:
            raise click.ClickException(f"no job {show} in the journal")
        click.echo(msgspec.json.format(msgspec.json.encode(job)).decode())


@queue.command("retry")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
def queue_retry(directory: str) -> None:
    """Retry every job in the error queue now, then wait for the queue to drain.

    Example: assocdb queue retry data/graph
    """
    with assocdb.open(directory) as g:
        click.echo(f"retrying {g.queue_retry()} jobs")
        drained = g.drain(timeout=30)
        click.echo("the queue is empty" if drained else f"still queued: {g.queue_stats().depth}")


@queue.command("reinject")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "everything", is_flag=True, help="Reinject every bad job.")
def queue_reinject(directory: str, ids: tuple[int, ...], everything: bool) -> None:
    """Move bad jobs (by id, or --all) back to the error queue to be retried.

    Example: assocdb queue reinject data/graph 1234 1240
    """
    if not ids and not everything:
        raise click.UsageError("name the bad jobs to reinject, or pass --all")
    with assocdb.open(directory) as g:
        count = g.queue_reinject(None if everything else list(ids))
        click.echo(f"reinjected {count} jobs")


def _print_jobs(jobs: list[assocdb.JobInfo]) -> None:
    if not jobs:
        click.echo("no jobs")
        return
    click.echo(f"{'id':>8} {'attempts':>8} {'retries':>8}  error")
    for job in jobs:
        click.echo(f"{job.id:>8} {job.attempts:>8} {job.retries:>8}  {job.error}")


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
