"""The `assocdb` command line: a few lines over the library per command."""

from __future__ import annotations

import gzip
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import msgspec

import assocdb

from ..core.extras import MissingExtra, needs, require
from ..core.schema import Schema, read_schema_file
from .backup import backup
from .changes import changes
from .datasets import EGO_FACEBOOK_FRIENDSHIPS, EGO_FACEBOOK_PEOPLE, ego_facebook
from .deletions import delete, deletions
from .flock import serve_thrift
from .graph import GRAPH, NEW_GRAPH
from .grow import shards_rebalance, shards_reclaim
from .index import index
from .params import Seconds
from .queue import queue
from .restore import restore
from .shards import shards
from .timeline import timeline


class _Commands(click.Group):
    """The `assocdb` group: a user's mistake in any command is one `Error:` line.

    assocdb's errors, and the OS errors a user causes (a missing, read-only or
    unreadable path, a busy port), and an extra a command needs but is not
    installed, become a click error (exit status 1) instead of a traceback; a
    bug still shows its traceback.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except assocdb.AssocdbError as exc:
            raise click.ClickException(in_cli_terms(exc.message)) from None
        except BrokenPipeError:  # `assocdb export DIR | head`: the reader has all it wants
            # Python's advice: point stdout at devnull, or its flush at exit fails again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        except OSError as exc:
            raise click.ClickException(_os_error(exc)) from None
        except MissingExtra as exc:  # e.g. serve without the server extra: what to install
            raise click.ClickException(str(exc)) from None
        except click.NoSuchOption as exc:
            if not re.fullmatch(r"-\d[\d_.]*", exc.option_name) or exc.ctx is None:
                raise
            # `timeline home DIR -1`: click takes a negative number for an option.
            raise click.UsageError(
                f"No such option '{exc.option_name}'. To give the number as an argument, "
                f"put -- before it: {exc.ctx.command_path} … -- {exc.option_name}",
                exc.ctx,
            ) from None


#: The library's advice in Python terms, and what a command line user does instead.
_CLI_TERMS = {
    "define it first with define_assoc()": (
        "define it first in a schema file: assocdb schema DIR schema.toml"
    ),
    "define it first with define_object()": (
        "define it first in a schema file: assocdb schema DIR schema.toml"
    ),
    "call g.define_timeline('follows', mode='write') first": (
        "run `assocdb timeline setup DIR` first"
    ),
    "define it with define_index()": (
        "define it with `assocdb index define DIR NAME OTYPE PROPERTY...`"
    ),
    "CacheConfig.max_age": "--cache-max-age",
    "CacheConfig.redis": "--redis",
}


def in_cli_terms(message: str) -> str:
    """A library error message, its advice given as commands rather than Python calls."""
    for python, command in _CLI_TERMS.items():
        message = message.replace(python, command)
    return message


def _os_error(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    return f"{exc.filename}: {what}" if exc.filename else what


@click.group(cls=_Commands)
@click.version_option(assocdb.__version__, prog_name="assocdb")
def main() -> None:
    """assocdb: a data store for huge social graphs."""


@main.command()
@click.argument("directory", default="data/demo", type=NEW_GRAPH)
def demo(directory: str) -> None:
    """Load the ego-Facebook friendship graph into DIRECTORY and ask it questions.

    Person n of the SNAP file is id n + 1. Friendships get times in file order,
    so "newest first" means "latest in the file first". A load stopped by Ctrl-C
    or a crash is finished by the next run; a graph the demo did not load is
    refused, never written to.

    Example: assocdb demo data/demo
    """
    with assocdb.open(directory) as g:
        _load_demo(g, directory)
        person, other = 1, 2
        click.echo(f"person {person} has {g.assoc_count(person, 'friend')} friends")
        page = g.assoc_page(person, "friend", limit=10)
        click.echo(f"their 10 newest friends: {[a.id2 for a in page.items]}")
        mutual = mutual_friends(g, person, other)
        click.echo(f"{len(mutual)} mutual friends of {person} and {other}: {mutual[:20]}")


#: The demo's mark in a graph's meta: "loading" once it owns the graph, "loaded" once the
#: whole file is stored. A graph without it is someone else's, unless it is empty.
_DEMO_KEY, _LOADING, _LOADED = "demo", b"loading", b"loaded"
_DEMO_LOAD = "demo ego-Facebook"  # the load's name in the journal (a rerun resumes it)


def _load_demo(g: assocdb.Graph, directory: str) -> None:
    """Load ego-Facebook into `g` unless a complete load is marked there; refuse a graph
    that is not the demo's (ClickException)."""
    backend = g.engine.backend
    mark = backend.get_meta(_DEMO_KEY)
    if mark is None and _is_old_demo(g):
        backend.swap_meta(_DEMO_KEY, None, _LOADED)
        mark = _LOADED
    if mark is None:
        if g.schema.assoc_types or g.schema.object_types:
            raise click.ClickException(
                f"{directory} holds a graph that `assocdb demo` did not load: give the demo "
                "a directory of its own (assocdb demo data/demo)"
            )
        backend.swap_meta(_DEMO_KEY, None, _LOADING)
    g.define_assoc("friend", symmetric=True)
    if mark == _LOADED:
        return
    if mark == _LOADING:
        click.echo("finishing the load an earlier run did not finish")
    started = time.perf_counter()
    base = 1_600_000_000_000
    edges = ((a, "friend", b, base + n) for n, (a, b) in enumerate(ego_facebook()))
    try:
        g.bulk_load(edges, name=_DEMO_LOAD)
    except KeyboardInterrupt:
        raise click.ClickException(
            f"interrupted: the load is not finished, so the demo has no answers yet; "
            f"run `assocdb demo {directory}` again to finish it"
        ) from None
    backend.swap_meta(_DEMO_KEY, _LOADING, _LOADED)
    seconds = time.perf_counter() - started
    click.echo(
        f"loaded {EGO_FACEBOOK_FRIENDSHIPS:,} friendships (both directions) in {seconds:.2f} s"
    )


def _is_old_demo(g: assocdb.Graph) -> bool:
    """A whole demo graph loaded before the demo marked its graphs: the one type `friend`,
    and every friendship stored both ways."""
    kinds = g.schema.assoc_types
    if g.schema.object_types or [(k.name, k.symmetric) for k in kinds] != [("friend", True)]:
        return False
    people = range(1, EGO_FACEBOOK_PEOPLE + 1)
    return sum(g.assoc_count(n, "friend") for n in people) == 2 * EGO_FACEBOOK_FRIENDSHIPS


@main.command()
@click.argument("directory", type=NEW_GRAPH)
@click.option("--shards", default=16, show_default=True, type=click.IntRange(1, 4096))
@click.option("--schema", "schema_file", type=click.Path(dir_okay=False, exists=True))
def init(directory: str, shards: int, schema_file: str | None) -> None:
    """Create a graph in DIRECTORY (with a TOML schema, if given).

    Example: assocdb init data/graph --shards 64 --schema schema.toml
    """
    if schema_file is not None:  # a bad file fails before anything is created
        Schema().apply_toml(read_schema_file(schema_file))
    try:
        g = assocdb.open(directory, shards=shards, schema=schema_file)
    except assocdb.InvalidRequest as exc:
        if "shards" not in exc.details:  # not a graph or map with another shard count
            raise
        advice = f": run `assocdb init {directory} --shards {exc.details['shards']}`"
        message = exc.message.replace(" (omit shards= to open it)", advice)
        raise click.ClickException(message) from None
    with g:
        click.echo(f"{directory}: {g.shards} shards, {len(g.schema.assoc_types)} association types")


@main.command()
@click.argument("directory", type=GRAPH)
@click.argument("schema_file", required=False, type=click.Path(dir_okay=False, exists=True))
def schema(directory: str, schema_file: str | None) -> None:
    """Print the schema of DIRECTORY as TOML, or apply SCHEMA_FILE to it.

    Example: assocdb schema data/graph schema.toml
    """
    with assocdb.open(directory, create=False) as g:
        if schema_file is not None:
            g.load_schema(schema_file)
        for kind in g.schema.assoc_types:
            click.echo(f"[assoc.{kind.name}]")
            if kind.inverse:
                click.echo(f'inverse = "{kind.inverse}"')
            if kind.symmetric:
                click.echo("symmetric = true")
            if kind.on_delete:
                click.echo(f'on_delete = "{kind.on_delete}"')
            click.echo(f"limit = {kind.limit}")
            if kind.ttl is not None:
                ttl = int(kind.ttl) if kind.ttl.is_integer() else kind.ttl
                click.echo(f"ttl = {ttl}")
            click.echo()
        for otype in g.schema.object_types:
            click.echo(f"[object.{otype.name}]" + ("\nowned = true\n" if otype.owned else "\n"))
        for index in g.schema.indexes:  # what `[index.NAME]` in a schema file defines
            click.echo(f"[index.{index.name}]")
            click.echo(f"otype = {_toml(g.schema.object_by_id(index.otype).name)}")
            click.echo(f"properties = [{', '.join(_toml(p) for p in index.properties)}]")
            for key in ("order", "shard_on"):
                if getattr(index, key) is not None:
                    click.echo(f"{key} = {_toml(getattr(index, key))}")
            click.echo("unique = true\n" if index.unique else "")


def _toml(text: str) -> str:
    """A TOML basic string (property names may hold any character)."""
    return msgspec.json.encode(text).decode()


@main.command("import")
@click.argument("directory", type=GRAPH)
@click.argument("source", type=click.Path(dir_okay=False, exists=True, allow_dash=True))
@click.option("--type", "atype", help="Association type of pairs (lines of 'id1 id2').")
@click.option(
    "--id-offset",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Added to every id (SNAP numbers nodes from 0, assocdb from 1: use 1).",
)
def import_(directory: str, source: str, atype: str | None, id_offset: int) -> None:
    """Bulk-load edges from SOURCE (text, gzip ok): lines 'id1 atype id2 [time]', or
    'id1 id2' pairs with --type. Times default to the line number, so reloading
    changes nothing. Blank lines and lines starting with # are skipped (SNAP
    files start with such comments); CRLF line ends are fine.

    A bad line stops the import: every edge before it is stored, and the error
    names the line. Fix it and run the same import again (what is stored does
    not change). An import stopped by a crash or Ctrl-C resumes where it
    stopped when run again on the unchanged file (the journal records how far
    it got); standard input and pipes cannot be read again: import them whole.

    Example: assocdb import data/graph soc-Slashdot0902.txt --type follows --id-offset 1
    """
    with assocdb.open(directory, create=False) as g, _Source(source) as src:
        edges = src.edges(atype, id_offset)
        # A stream (standard input, a pipe) has no size to measure against and cannot be
        # read again to resume: its load goes unnamed.
        name = None if src.size is None else src.load_name(atype, id_offset)
        try:
            if name is None or src.size is None:
                count = g.bulk_load(edges)
            else:
                stored = dict(g.engine.journal.loads()).get(name)
                if stored:
                    click.echo(f"resuming: the first {stored:,} edges are stored")
                with click.progressbar(
                    length=src.size, label="importing", show_percent=True
                ) as bar:
                    count = g.bulk_load(
                        edges, progress=lambda _: bar.update(src.read() - bar.pos), name=name
                    )
                    bar.update(src.size - bar.pos)
        except assocdb.InvalidRequest as exc:  # name the line, not the edge's position
            message = exc.message
            if not message.startswith("line "):
                message = f"line {src.line}: {message.split(': ', 1)[-1]}"
            raise click.ClickException(in_cli_terms(message)) from None
        except KeyboardInterrupt:  # Ctrl-C: what is stored, and how to go on
            raise click.ClickException(_import_interrupted(g, source, name)) from None
        click.echo(f"imported {count:,} edges")


def _import_interrupted(g: assocdb.Graph, source: str, name: str | None) -> str:
    if name is None:
        stream = "standard input" if source == "-" else source
        return (
            f"interrupted: some edges of {stream} may be stored; a stream cannot resume: "
            "import all of it again (what is stored does not change)"
        )
    stored = dict(g.engine.journal.loads()).get(name, 0)
    return (
        f"interrupted: the first {stored:,} edges of {source} are stored; "
        "run the same command again to resume"
    )


def _skipped(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


class _Source:
    """The lines of an import's input (a file, gzip or not, or '-'), and how many
    of its bytes have been read, for the progress bar."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._raw: Any = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
        # Only a regular file is measured (and read again to resume); a pipe, `<(...)`
        # or a FIFO, cannot seek: it is read as a stream (its `tell` was "Illegal seek").
        info = None if source == "-" else os.fstat(self._raw.fileno())
        self.size = info.st_size if info is not None and stat.S_ISREG(info.st_mode) else None
        self._stream: Any = (
            gzip.GzipFile(fileobj=self._raw) if source.endswith(".gz") else self._raw
        )

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._raw is not sys.stdin.buffer:
            self._raw.close()

    def load_name(self, atype: str | None, offset: int) -> str:
        """What names this import in the journal: the file as it is now, and how its
        lines are read (the same import of the unchanged file resumes)."""
        info = os.stat(self._source)
        path = os.path.realpath(self._source)
        file = f"{path} size={info.st_size} mtime={info.st_mtime_ns}"
        return f"import {file} type={atype} offset={offset}"

    def read(self) -> int:
        """Bytes of the input read so far (compressed bytes for a .gz file)."""
        return int(self._raw.tell())

    def _lines(self) -> Iterator[bytes]:
        """The input's lines; a gzip file that ends early or is not one is InvalidRequest
        (its EOFError was click's "Aborted!", as if the user had pressed Ctrl-D)."""
        try:
            # Not `yield from`: closing this generator would close the file too.
            for line in self._stream:  # noqa: UP028
                yield line
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise assocdb.InvalidRequest(
                f"line {getattr(self, 'line', 0) + 1}: {self._source} is not a whole gzip "
                f"file ({exc})"
            ) from None

    def edges(self, atype: str | None, offset: int = 0) -> Iterator[tuple[Any, ...]]:
        """The edges of the lines; `line` is the number of the latest one's line."""
        for number, raw in enumerate(self._lines(), 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise assocdb.InvalidRequest(f"line {number}: not UTF-8 text") from None
            if not _skipped(line):
                self.line = number
                edge = _edge(line, number, atype)
                yield (edge[0] + offset, edge[1], edge[2] + offset, edge[3]) if offset else edge


@main.command()
@click.argument("directory", type=GRAPH)
@click.option(
    "--all-states", is_flag=True, help="Export tombstones and hidden edges too (5th column)."
)
def export(directory: str, all_states: bool) -> None:
    """Write every edge of DIRECTORY to stdout as 'id1 atype id2 time' lines.

    Example: assocdb export data/graph | gzip > edges.txt.gz
    """
    with assocdb.open(directory, create=False) as g:
        names = {t.id: t.name for t in g.schema.assoc_types}
        backend = g.engine.backend
        for shard in range(g.shards):
            after = None
            while page := backend.export_edges(shard, after, 5000):
                for id1, atype, id2, state, time_, _ua, _data in page:
                    if all_states:
                        click.echo(f"{id1} {names[atype]} {id2} {time_} {assocdb.STATES[state]}")
                    elif state == 0:
                        click.echo(f"{id1} {names[atype]} {id2} {time_}")
                after = page[-1][:3]


#: Problems `check` lists without --all (the summary comes first, with every number).
CHECK_SHOWN = 20


@main.command()
@click.argument("directory", type=GRAPH)
@click.option("--repair", is_flag=True, help="Fix what is found.")
@click.option("--all", "everything", is_flag=True, help="List every problem found.")
@click.option("--dangling", is_flag=True, help="Also find dangling edges and owned orphans.")
def check(directory: str, repair: bool, everything: bool, dangling: bool) -> None:
    """Check counts against edge rows, and every edge against its inverse.

    Prints a summary, then the first 20 problems (--all: every one). Exits 1
    if something was wrong (and, with --repair, fixes it). Warns of types
    that declare no on_delete rule. --dangling also finds edges whose end is
    deleted or missing and owned objects without owner (`Deletions.dangling`).

    Example: assocdb check data/graph --dangling --repair
    """
    with assocdb.open(directory, create=False) as g:
        _undeclared(g.schema)
        bad = dangling and _dangling(g.deletions.dangling(repair=repair), repair, everything)
        shard_range = range(g.shards)
        with click.progressbar(shard_range, label="counts, by shard", file=sys.stderr) as shards:
            counts = [m for shard in shards for m in g.engine.backend.recount(shard, repair)]
        click.echo("inverse edges: every edge against its mirror…", err=True)
        hanging = g.check_inverses(repair=repair)
    verb = "repaired" if repair else "found"
    click.echo(f"{verb} {len(counts):,} wrong counts and {len(hanging):,} hanging edges")
    problems = [_count_problem(m) for m in counts] + [_hanging_problem(h) for h in hanging]
    shown = problems if everything else problems[:CHECK_SHOWN]
    for problem in shown:
        click.echo(problem)
    if len(problems) > len(shown):
        click.echo(f"… and {len(problems) - len(shown):,} more (--all lists every one)")
    if counts or hanging or bad:
        sys.exit(1)


@main.command()
@click.argument("directory", type=GRAPH)
def expire(directory: str) -> None:
    """Remove the expired edges of types with a ttl now (both legs, counts exact).

    Reads hide them already; `serve --cleaner` runs this pass every 10 s.

    Example: assocdb expire data/graph
    """
    with assocdb.open(directory, create=False) as g:
        found = g.services.expiry.expire()
    click.echo(f"removed {found:,} expired edge rows")


def _undeclared(schema: Schema) -> None:
    """DELF's static check: a warning (existing graphs keep working, as shallow)."""
    names = [kind.name for kind in schema.assoc_types if kind.on_delete is None]
    if names:
        click.echo(
            f"warning: {len(names)} association types declare no on_delete rule "
            f"(a cascading delete treats them as shallow): {', '.join(names)}",
            err=True,
        )


def _dangling(report: assocdb.DanglingReport, repair: bool, everything: bool) -> bool:
    verb = "repaired" if repair else "found"
    click.echo(f"{verb} {len(report.edges):,} dangling edges and {len(report.orphans):,} orphans")
    problems = [
        f"dangling edge {e.id1} -{e.atype}-> {e.id2}: {e.end} is {e.reason}" for e in report.edges
    ]
    problems += [
        f"orphan {o.otype} {o.id}: no deep or refcount edge points to it" for o in report.orphans
    ]
    for problem in problems if everything else problems[:CHECK_SHOWN]:
        click.echo(problem)
    return bool(report.edges or report.orphans)


def _count_problem(m: assocdb.CountMismatch) -> str:
    where = f"shard {m.shard}: ({m.id1}, type {m.atype}, state {m.state})"
    return f"count {where}: {m.stored} stored, {m.actual} rows"


def _hanging_problem(h: assocdb.HangingEdge) -> str:
    problem = "missing" if h.mirror is None else "different"
    return f"hanging edge {h.edge.id1} -{h.edge.atype}-> {h.edge.id2}: its mirror is {problem}"


def _edge(line: str, number: int, atype: str | None) -> tuple[Any, ...]:
    parts = line.split()
    try:
        if atype is not None and len(parts) == 2:
            return (int(parts[0]), atype, int(parts[1]), number)
        if len(parts) in (3, 4):
            time_ = int(parts[3]) if len(parts) == 4 else number
            return (int(parts[0]), parts[1], int(parts[2]), time_)
    except ValueError:
        pass
    expected = "'id1 atype id2 [time]' (or 'id1 id2' with --type)"
    raise assocdb.InvalidRequest(f"line {number}: expected {expected}, got {line.strip()!r}")


@main.command()
@click.argument("directory", type=NEW_GRAPH)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8080,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="TCP port (0: any free one; the address is printed once bound).",
)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64))
@click.option(
    "--tokens-file",
    type=click.Path(dir_okay=False, exists=True),
    envvar="ASSOCDB_TOKENS_FILE",
    help="TOML file of bearer tokens and scopes (or set ASSOCDB_TOKENS_FILE / ASSOCDB_TOKEN).",
)
@click.option("--background", is_flag=True, help="Acknowledge writes once journaled (sync=False).")
@click.option(
    "--deadline",
    default=10.0,
    show_default=True,
    type=Seconds(0, 3600, min_open=True),
    help="Seconds a request may run.",
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=Seconds(0, 3600, min_open=True),
    help="Seconds a connection may take to send a request's line and headers.",
)
@click.option(
    "--max-connections",
    default=1000,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Connections each worker serves at once; a request on one more is answered 503.",
)
@click.option(
    "--max-body",
    default=4 << 20,
    show_default=True,
    type=click.IntRange(1),
    help="Largest request body, bytes.",
)
@click.option(
    "--max-batch",
    default=200,
    show_default=True,
    type=click.IntRange(1),
    help="Most reads per /v1/batch.",
)
@click.option(
    "--cache-mb",
    type=click.IntRange(0),
    help="In-process cache of each worker, MiB (0: off). Default: a quarter of this "
    "machine's memory, shared out between the workers. The workers tell each other "
    "what their writes changed (through Redis with --redis), so a write through one "
    "is seen by the next read through any.",
)
@click.option("--no-cache", is_flag=True, help="Serve uncached (the same as --cache-mb 0).")
@click.option(
    "--cache-max-age", default=10.0, show_default=True, help="Seconds a cache entry lives."
)
@click.option(
    "--cache-prefix",
    default=1000,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Newest edges of each list the cache keeps (a longer page reads the shard).",
)
@click.option(
    "--redis",
    envvar="ASSOCDB_REDIS",
    help="Redis URL for the shared cache tier: invalidations reach every worker and server.",
)
@click.option(
    "--cleaner",
    is_flag=True,
    help="Build new indexes, repair recent index entries and remove expired edges in the "
    "background (each worker).",
)
def serve(
    directory: str,
    host: str,
    port: int,
    workers: int,
    tokens_file: str | None,
    background: bool,
    deadline: float,
    header_timeout: float,
    max_connections: int,
    max_body: int,
    max_batch: int,
    cache_mb: int | None,
    no_cache: bool,
    cache_max_age: float,
    cache_prefix: int,
    redis: str | None,
    cleaner: bool,
) -> None:
    """Serve the graph in DIRECTORY (or on a shard map, cluster.toml) over HTTP (JSON; /docs).

    Without tokens it listens on loopback only. Tokens never come from the
    command line: use a tokens file or the environment.

    Example: ASSOCDB_TOKENS_FILE=tokens.toml assocdb serve data/graph --host 0.0.0.0
    """
    import os
    import tempfile

    for module in ("starlette", "prometheus_client"):  # before anything else is said or done
        require(module, "server", "assocdb serve")
    with needs("server", "assocdb serve"):
        import uvicorn

        from ..serve.protocol import HeadDeadline
    if redis is not None:
        require("redis", "redis", "assocdb serve --redis")

    from ..serve.auth import Tokens, is_loopback

    tokens = Tokens.load(tokens_file)
    if not tokens.enabled and not is_loopback(host):
        raise click.UsageError(
            f"refusing to listen on {host} without tokens: set ASSOCDB_TOKENS_FILE or ASSOCDB_TOKEN"
        )
    if no_cache and cache_mb:
        raise click.UsageError(f"--no-cache and --cache-mb {cache_mb} contradict each other")
    if cache_mb is None:
        cache_mb = 0 if no_cache else default_cache_mb(workers)
    # Settings a worker would refuse (with a traceback, after "serving …") fail here.
    assocdb.CacheConfig(
        max_bytes=cache_mb << 20, max_age=cache_max_age, prefix=cache_prefix, redis=redis
    )
    config = {
        "path": directory,
        "sync": not background,
        "tokens_file": tokens_file,
        "deadline": deadline,
        "header_timeout": header_timeout,
        "max_body": max_body,
        "max_batch": max_batch,
        "cache_bytes": cache_mb << 20,
        "cache_max_age": cache_max_age,
        "cache_prefix": cache_prefix,
        "redis": redis,
        "cleaner": cleaner,
        "peers": None,
        # Signs the console's session cookies; one per start, shared by the workers.
        "session_key": secrets.token_hex(32),
    }
    port = _check_port(host, port)  # a busy port fails here, before anything is said
    # Replay what a crash left, and fail early if broken or missing: never create a
    # graph here (a typo served an empty one); `assocdb init` creates.
    assocdb.open(directory, create=False).close()
    metrics_dir = None
    if workers > 1:
        metrics_dir = tempfile.mkdtemp(prefix="assocdb-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        if cache_mb and not redis:  # the workers' cache invalidations (serve/peers.py)
            config["peers"] = os.path.join(metrics_dir, "invalidations")
    # The console's logged-out sessions, seen by every worker (serve/console/session.py).
    sessions_dir = tempfile.mkdtemp(prefix="assocdb-sessions-")
    config["sessions_dir"] = sessions_dir
    os.environ["ASSOCDB_SERVE"] = msgspec.json.encode(config).decode()
    click.echo(
        f"serving {directory} on http://{host}:{port} (docs: /docs, console: /admin)", err=True
    )
    try:
        uvicorn.run(
            "assocdb.serve.front:app_from_env",
            factory=True,
            http=HeadDeadline,
            host=host,
            port=port,
            workers=workers,
            access_log=False,
            proxy_headers=False,  # nothing uses the client's address
            limit_concurrency=max_connections + 1,  # (uvicorn counts the one asking)
            log_level="warning",
        )
    finally:
        shutil.rmtree(sessions_dir, ignore_errors=True)
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def default_cache_mb(workers: int) -> int:
    """Each worker's share of a quarter of the memory this process may use, MiB."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:  # a container's limit (cgroup v2), when lower
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            memory = min(memory, int(limit))
    except OSError:
        pass
    return max(1, memory // 4 // workers >> 20)


def _check_port(host: str, port: int) -> int:
    """The port to serve on (a free one for 0); OSError if it is taken.

    (uvicorn binds it again a moment later: handing it this socket instead
    would make asyncio see a Unix socket and leave Nagle's algorithm on.)
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
        bound: int = probe.getsockname()[1]
        return bound


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


main.add_command(backup)
main.add_command(changes)
main.add_command(delete)
main.add_command(deletions)
main.add_command(restore)
main.add_command(index)
main.add_command(queue)
main.add_command(shards)
main.add_command(timeline)
main.add_command(serve_thrift)
shards.add_command(shards_reclaim)
shards.add_command(shards_rebalance)
