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
from ..storage import shardmap_config
from ..storage.moves import cancel_move, drop_replica, move_shard
from ..storage.registry import open_shardmap
from ..storage.replica_verify import verify_replicas
from .datasets import EGO_FACEBOOK_FRIENDSHIPS, EGO_FACEBOOK_PEOPLE, ego_facebook
from .flock import serve_thrift
from .graph import GRAPH, NEW_GRAPH
from .grow import shards_rebalance, shards_reclaim
from .index import index
from .params import Seconds


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
            click.echo(f"limit = {kind.limit}\n")
        for otype in g.schema.object_types:
            click.echo(f"[object.{otype.name}]\n")
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
def check(directory: str, repair: bool, everything: bool) -> None:
    """Check counts against edge rows, and every edge against its inverse.

    Prints a summary, then the first 20 problems (--all: every one). Exits 1
    if something was wrong (and, with --repair, fixes it).

    Example: assocdb check data/graph --repair
    """
    with assocdb.open(directory, create=False) as g:
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
    if counts or hanging:
        sys.exit(1)


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
    help="Build new indexes and repair recent index entries in the background (each worker).",
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
            "assocdb.serve.server:app_from_env",
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


@main.group()
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


@main.group()
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


@main.group()
def timeline() -> None:
    """Timelines: set up, post, delete, and read home and user timelines."""


_DIR = click.argument("directory", type=GRAPH)
_MODE = click.Choice(["write", "read", "hybrid"])


@timeline.command("setup")
@_DIR
@click.option("--follows", default="follows", show_default=True, help="Follow type (with inverse).")
@click.option("--mode", type=_MODE, default="write", show_default=True)
@click.option("--cap", default=800, show_default=True, help="Entries kept per home timeline.")
@click.option("--celebrity-threshold", default=10_000, show_default=True, type=int)
def timeline_setup(
    directory: str, follows: str, mode: Any, cap: int, celebrity_threshold: int
) -> None:
    """Turn on timelines for DIRECTORY (or change their mode).

    Example: assocdb timeline setup data/graph --mode hybrid --celebrity-threshold 100000
    """
    with _graph(directory) as g:
        config = g.define_timeline(
            follows, mode=mode, cap=cap, celebrity_threshold=celebrity_threshold
        )
        click.echo(msgspec.json.encode(config).decode())


@timeline.command("post")
@_DIR
@click.argument("author", type=int)
@click.argument("item", type=int)
@click.option("--time", "time_", type=int, help="Sort key (default: now, in ms).")
def timeline_post(directory: str, author: int, item: int, time_: int | None) -> None:
    """Post ITEM as AUTHOR and wait for the delivery to followers.

    Example: assocdb timeline post data/graph 1 1001
    """
    with _graph(directory) as g:
        result = g.post(author, item, time_)
        g.drain()
        click.echo(f"posted ({result.status}) and delivered")


@timeline.command("delete")
@_DIR
@click.argument("author", type=int)
@click.argument("item", type=int)
def timeline_delete(directory: str, author: int, item: int) -> None:
    """Delete AUTHOR's ITEM everywhere it was delivered.

    Example: assocdb timeline delete data/graph 1 1001
    """
    with _graph(directory) as g:
        g.post_delete(author, item)
        g.drain()
        click.echo("deleted")


@timeline.command("home")
@_DIR
@click.argument("user", type=int)
@click.option("--limit", default=20, show_default=True)
@click.option("--cursor", help="A cursor printed by the previous page.")
@click.option("--mode", type=_MODE, help="Override the configured mode for this read.")
def timeline_home(directory: str, user: int, limit: int, cursor: str | None, mode: Any) -> None:
    """Print a page of USER's home timeline: time, item, author per line.

    Example: assocdb timeline home data/graph 2 --limit 20
    """
    with _graph(directory) as g:
        _print_timeline(g.home_timeline(user, cursor, limit, mode))


@timeline.command("user")
@_DIR
@click.argument("author", type=int)
@click.option("--limit", default=20, show_default=True)
@click.option("--cursor", help="A cursor printed by the previous page.")
def timeline_user(directory: str, author: int, limit: int, cursor: str | None) -> None:
    """Print a page of the items AUTHOR posted.

    Example: assocdb timeline user data/graph 1
    """
    with _graph(directory) as g:
        _print_timeline(g.user_timeline(author, cursor, limit))


def _graph(directory: str) -> assocdb.Graph:
    """The graph at DIRECTORY (its errors become one line: `_Commands`)."""
    return assocdb.open(directory, create=False)


def _print_timeline(page: assocdb.Page[assocdb.TimelineItem]) -> None:
    for item in page.items:
        click.echo(f"{item.time}\t{item.item}\t{item.author}")
    if page.next_cursor is not None:
        click.echo(f"next: --cursor {page.next_cursor}")


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


main.add_command(index)
main.add_command(serve_thrift)
shards.add_command(shards_reclaim)
shards.add_command(shards_rebalance)
