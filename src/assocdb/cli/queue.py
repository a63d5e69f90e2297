"""`assocdb queue …`: the write journal's stats, errors, bad jobs, retries and reinjections."""

from __future__ import annotations

import os
import time

import click
import msgspec

import assocdb

from .graph import GRAPH


@click.group()
def queue() -> None:
    """Inspect and steer the write journal: stats, errors, bad jobs, retries."""


@queue.command("stats")
@click.argument("directory", type=GRAPH)
def queue_stats(directory: str) -> None:
    """Print how many jobs wait, fail or went bad.

    Example: assocdb queue stats data/graph
    """
    with assocdb.open(directory, create=False) as g:
        stats = g.queue_stats()
        for field, value in msgspec.structs.asdict(stats).items():
            if field != "held":
                click.echo(f"{field:<16} {value}")
        for job in stats.held:
            click.echo(f"{'held':<16} {_held(job)}")


def _held(job: assocdb.JobInfo) -> str:
    """One held job: "job 3 (running NodeJob) by pid 4242 on web-1 since 14:03:07 UTC (12 s)"."""
    since = job.held_since or job.created_at
    at = time.strftime("%H:%M:%S UTC", time.gmtime(since))
    kind = job.operation.get("kind", "job")
    return (
        f"job {job.id} ({job.state} {kind}) by {job.held_by} "
        f"since {at} ({max(0.0, time.time() - since):.0f} s)"
    )


@queue.command("errors")
@click.argument("directory", type=GRAPH)
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="How many jobs to list.",
)
def queue_errors(directory: str, limit: int) -> None:
    """List jobs in the error queue, oldest first.

    Example: assocdb queue errors data/graph --limit 20
    """
    with assocdb.open(directory, create=False) as g:
        _print_jobs(g.queue_jobs("error", limit=limit), g, "no jobs in the error queue")


@queue.command("bad")
@click.argument("directory", type=GRAPH)
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="How many jobs to list.",
)
@click.option("--show", "show", type=int, help="Print this job in full, as JSON.")
def queue_bad(directory: str, limit: int, show: int | None) -> None:
    """List bad jobs (failed too often), or show one in full.

    Example: assocdb queue bad data/graph --show 1234
    """
    with assocdb.open(directory, create=False) as g:
        if show is None:
            _print_jobs(g.queue_jobs("bad", limit=limit), g, "no bad jobs")
            return
        job = g.queue_job(show)
        if job is None:
            raise click.ClickException(f"no job {show} in the journal")
        click.echo(msgspec.json.format(msgspec.json.encode(job)).decode())


@queue.command("retry")
@click.argument("directory", type=GRAPH)
def queue_retry(directory: str) -> None:
    """Retry every job in the error queue now, and every job of a process that exited
    while working on it (a running job too), then wait up to 30 s for the queue to drain.
    Jobs another live process works on are left to it, and listed.

    Example: assocdb queue retry data/graph
    """
    with assocdb.open(directory, create=False) as g:
        click.echo(f"retrying {g.queue_retry()} jobs")
        give_up = time.monotonic() + 30
        while not g.drain(timeout=0.25):
            stats = g.queue_stats()
            elsewhere = [job for job in stats.held if _elsewhere(job)]
            if len(elsewhere) == stats.depth or time.monotonic() > give_up:
                click.echo(f"still queued: {stats.depth}")
                for job in stats.held:
                    click.echo(f"  {_held(job)}")
                return
        click.echo("the queue is empty")


def _elsewhere(job: assocdb.JobInfo) -> bool:
    """Whether another live process works on the job (it goes on there)."""
    held_by = job.held_by or ""
    return (
        bool(held_by)
        and not held_by.startswith(f"pid {os.getpid()} ")
        and "(exited)" not in held_by
    )


@queue.command("reinject")
@click.argument("directory", type=GRAPH)
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "everything", is_flag=True, help="Reinject every bad job.")
def queue_reinject(directory: str, ids: tuple[int, ...], everything: bool) -> None:
    """Move bad jobs (by id, or --all) back to the error queue to be retried.

    Example: assocdb queue reinject data/graph 1234 1240
    """
    if not ids and not everything:
        raise click.UsageError("name the bad jobs to reinject, or pass --all")
    with assocdb.open(directory, create=False) as g:
        count = g.queue_reinject(None if everything else list(ids))
        click.echo(f"reinjected {count} jobs")


def _print_jobs(jobs: list[assocdb.JobInfo], g: assocdb.Graph, none: str) -> None:
    """The jobs, or `none` and what else the journal holds (so an empty list does not
    read as an empty queue when `queue stats` counts jobs new or running)."""
    if not jobs:
        stats = g.queue_stats()
        others = f"{stats.new} new, {stats.running} running"
        if stats.new or stats.running:
            others += ": see `assocdb queue stats`"
        click.echo(f"{none} ({others})")
        return
    click.echo(f"{'id':>8} {'attempts':>8} {'retries':>8}  error")
    for job in jobs:
        click.echo(f"{job.id:>8} {job.attempts:>8} {job.retries:>8}  {job.error}")
