"""The shard map file: which backends hold which logical shards (pure: text in, data out).

A shard map (Gizzard's forwarding table) places each of a graph's `shards`
logical shards on a *replica set* of named backends. A write goes to every
replica of its shard; a read goes to one healthy replica, chosen by weight.

    shards = 16

    [backends.db1]
    url = "mysql://root@10.0.0.1:3306/graph"   # a MySQL/MariaDB server
    connect_timeout = 1.0
    query_timeout = 2.0

    [backends.db2]
    path = "data/db2"                          # a SQLite directory (relative to this file)

    [[placement]]
    shards = "0-7"
    replicas = [{backend = "db1", weight = 2}, {backend = "db2", weight = 1}]

    [[placement]]
    shards = "8-15"
    replicas = [{backend = "db2"}, {backend = "db1"}]

    [detector]                                 # optional: the failure detector
    threshold = 3                              # consecutive failures that mark a backend down
    probe_interval = 0.5                       # first probe of a down backend after this (s)
    probe_max = 10.0                           # probes back off, doubling, up to this (s)

Every shard must be placed exactly once. The first replica listed is the
shard's *primary*: it allocates ids and decides graph settings (see
`storage.shardmap`). A backend with `down = true` gets no work until the flag is
removed (an operator's drain). Every member backend is opened with the
map's shard count and holds its shards under their own numbers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from ..core.errors import InvalidRequest
from .backend import SERVER_SCHEMES

MAX_SHARDS = 4096
MAX_WEIGHT = 1000
#: The phases of a copy (`storage.moves`), in order.
PHASES = ("write-only", "copying", "verifying", "live")
#: The tables a copy's position may name ("": the copy's start).
_COPY_TABLE = re.compile(r"|edges|node_states|objects|timelines|index_[0-9]{1,9}")


class BackendConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One database: a MySQL/MariaDB server (`url`) or a SQLite directory (`path`)."""

    url: str | None = None
    path: str | None = None
    connect_timeout: float = 1.0
    query_timeout: float = 2.0
    down: bool = False

    @property
    def local(self) -> bool:
        """Whether the backend is a directory on this machine (not a server)."""
        return self.path is not None


class Replica(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    backend: str
    weight: int = 1


class Placement(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    shards: str | int
    replicas: list[Replica]


class DetectorConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    threshold: int = 3
    probe_interval: float = 0.5
    probe_max: float = 10.0


class MoveRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A copy of a shard being made on `target` (`storage.moves`), as the map records it.

    `source` is the replica a move removes once the copy is live (None: the copy is
    an added replica); `phase` how far it got (`PHASES`); `table` and `after`
    the copy's position (the last key copied, msgpack as hex); `weight` the read
    weight the copy gets when it goes live.
    """

    shard: int
    target: str
    phase: str
    source: str | None = None
    weight: int = 1
    table: str = ""
    after: str = ""
    copied: int = 0


class MapFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The file as written; `ShardMap` is what it means."""

    shards: int
    backends: dict[str, BackendConfig]
    placement: list[Placement]
    detector: DetectorConfig = DetectorConfig()
    moves: list[MoveRecord] = []


class ShardMap(msgspec.Struct, frozen=True):
    """A validated shard map: `replicas[shard]` lists that shard's replicas, primary first."""

    shards: int
    backends: dict[str, BackendConfig]
    placement: list[Placement]
    detector: DetectorConfig
    replicas: list[tuple[Replica, ...]]
    base: str = "."  # the directory relative SQLite paths start from
    moves: list[MoveRecord] = []  # copies under way (`storage.moves`)

    def member_spec(self, name: str) -> dict[str, Any]:
        """The `open_backend` spec of backend `name`."""
        config = self.backends[name]
        if config.path is not None:
            path = Path(self.base, config.path)
            return {"kind": "sqlite", "path": str(path), "shards": self.shards,
                    "timeout": config.query_timeout}  # fmt: skip
        assert config.url is not None
        return {
            "kind": SERVER_SCHEMES[config.url.split("://", 1)[0]],
            "url": config.url,
            "shards": self.shards,
            "connect_timeout": config.connect_timeout,
            "query_timeout": config.query_timeout,
        }

    def shards_of(self, name: str) -> list[int]:
        """The shards backend `name` holds a replica of."""
        return [s for s, reps in enumerate(self.replicas) if any(r.backend == name for r in reps)]

    def as_dict(self) -> dict[str, Any]:
        """The map as plain data (what the file says), for `spec()` and rewriting."""
        raw = MapFile(self.shards, self.backends, self.placement, self.detector, self.moves)
        data: dict[str, Any] = msgspec.to_builtins(raw)
        return data


def parse(text: str, source: str = "shard map", base: str | Path = ".") -> ShardMap:
    """The shard map in TOML `text`; InvalidRequest says what is wrong and where."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidRequest(f"{source}: not valid TOML: {exc}") from None
    return from_dict(data, source, base)


def load(path: str | Path) -> ShardMap:
    """The shard map in file `path` (relative SQLite paths start from its directory)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidRequest(f"cannot read shard map {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidRequest(f"{file} is not a shard map (not UTF-8 text)") from None
    return parse(text, str(file), file.parent)


def from_dict(data: Any, source: str = "shard map", base: str | Path = ".") -> ShardMap:
    """Validate plain data shaped like the file."""
    try:
        raw = msgspec.convert(data, MapFile)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"{source}: {exc}") from None
    _check_numbers(raw, source)
    replicas: list[tuple[Replica, ...] | None] = [None] * raw.shards
    for number, placement in enumerate(raw.placement, 1):
        where = f"{source}: placement {number} (shards {placement.shards!s})"
        shards = parse_shards(placement.shards, raw.shards, where)
        _check_replicas(placement.replicas, raw.backends, where)
        for shard in shards:
            if replicas[shard] is not None:
                raise InvalidRequest(f"{where}: shard {shard} is already placed by an earlier one")
            replicas[shard] = tuple(placement.replicas)
    missing = [s for s, reps in enumerate(replicas) if reps is None]
    if missing:
        raise InvalidRequest(f"{source}: shards {format_shards(missing)} are not placed")
    placed = [reps for reps in replicas if reps is not None]
    for move in raw.moves:
        _check_move(move, raw, placed, f"{source}: move of shard {move.shard}")
    return ShardMap(
        raw.shards, raw.backends, raw.placement, raw.detector, placed, str(base), raw.moves
    )


def _check_move(
    move: MoveRecord, raw: MapFile, replicas: list[tuple[Replica, ...]], where: str
) -> None:
    """A mover resumes from the record: refuse one it could not act on (an unknown phase
    would make it finish at once, having done nothing)."""
    if not 0 <= move.shard < raw.shards:
        raise InvalidRequest(f"{where}: outside shards 0-{raw.shards - 1}")
    for name in (move.target, move.source):
        if name is not None and name not in raw.backends:
            raise InvalidRequest(f"{where}: unknown backend {name!r}")
    if move.phase not in PHASES:
        raise InvalidRequest(f"{where}: phase {move.phase!r} is not one of {', '.join(PHASES)}")
    copy = next((r for r in replicas[move.shard] if r.backend == move.target), None)
    if copy is None:
        # Every phase keeps the copy in the replica set (the record is added with it).
        raise InvalidRequest(f"{where}: {move.target!r} holds no replica of the shard")
    if copy.weight and move.phase in ("write-only", "copying"):
        raise InvalidRequest(
            f"{where}: the copy on {move.target!r} is still being filled, so it cannot be "
            f"read (weight {copy.weight}); it gets its weight when it goes live"
        )
    if move.source == move.target:
        raise InvalidRequest(f"{where}: a shard cannot move from the backend it moves to")
    if not 0 <= move.weight <= MAX_WEIGHT:
        raise InvalidRequest(f"{where}: weight must be from 0 to {MAX_WEIGHT}")
    if move.copied < 0 or not _COPY_TABLE.fullmatch(move.table) or not _position(move.after):
        raise InvalidRequest(
            f"{where}: bad copy position (table {move.table!r}, after {move.after!r}, "
            f"copied {move.copied})"
        )


def _position(after: str) -> bool:
    """Whether `after` is a copy position as a mover writes it (msgpack, as hex)."""
    try:
        msgspec.msgpack.decode(bytes.fromhex(after)) if after else None
    except (ValueError, msgspec.DecodeError):
        return False
    return True


def _check_numbers(raw: MapFile, source: str) -> None:
    if not 0 < raw.shards <= MAX_SHARDS:
        raise InvalidRequest(f"{source}: shards must be from 1 to {MAX_SHARDS}, got {raw.shards}")
    for name, config in raw.backends.items():
        if (config.url is None) == (config.path is None):
            raise InvalidRequest(f"{source}: backend {name!r} needs exactly one of url or path")
        if config.url is not None and config.url.split("://", 1)[0] not in SERVER_SCHEMES:
            raise InvalidRequest(
                f"{source}: backend {name!r}: url {config.url!r} is not like mysql://host/db or "
                f"postgresql://host/graph (schemes: {', '.join(SERVER_SCHEMES)})"
            )
        if not (config.connect_timeout > 0 and config.query_timeout > 0):
            raise InvalidRequest(f"{source}: backend {name!r}: timeouts must be positive")
    detector = raw.detector
    if detector.threshold < 1 or not 0 < detector.probe_interval <= detector.probe_max:
        raise InvalidRequest(
            f"{source}: detector needs threshold ≥ 1 and 0 < probe_interval ≤ probe_max"
        )


def _check_replicas(
    replicas: list[Replica], backends: dict[str, BackendConfig], where: str
) -> None:
    if not replicas:
        raise InvalidRequest(f"{where}: needs at least one replica")
    names = [r.backend for r in replicas]
    for name in names:
        if name not in backends:
            known = ", ".join(sorted(backends)) or "none"
            raise InvalidRequest(f"{where}: unknown backend {name!r} (known: {known})")
    if len(set(names)) != len(names):
        raise InvalidRequest(f"{where}: a backend is listed twice among the replicas")
    for replica in replicas:
        if not 0 <= replica.weight <= MAX_WEIGHT:
            raise InvalidRequest(
                f"{where}: weight of {replica.backend!r} must be from 0 to {MAX_WEIGHT} "
                f"(0: written to, never read from), got {replica.weight}"
            )
    if all(r.weight == 0 for r in replicas):
        raise InvalidRequest(f"{where}: every replica has weight 0, so nothing could be read")


def parse_shards(text: str | int, shards: int, where: str = "shards") -> list[int]:
    """The shard numbers `text` names: "5", "0-7", "0-3,8-11" (or an int)."""
    if isinstance(text, int):
        text = str(text)
    found: list[int] = []
    for part in text.replace(" ", "").split(","):
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise InvalidRequest(
                f'{where}: {text!r} is not a shard range like "0-7" or "0-3,8"'
            ) from None
        if not 0 <= first <= last < shards:
            raise InvalidRequest(f"{where}: {part!r} is outside shards 0-{shards - 1}")
        found.extend(range(first, last + 1))
    if len(set(found)) != len(found):
        raise InvalidRequest(f"{where}: {text!r} names a shard twice")
    return found


def format_shards(shards: Iterable[int]) -> str:
    """Shard numbers as ranges: [0, 1, 2, 5] -> "0-2,5"."""
    runs: list[list[int]] = []
    for shard in sorted(shards):
        if runs and shard == runs[-1][1] + 1:
            runs[-1][1] = shard
        else:
            runs.append([shard, shard])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# -- changing a map (the CLI's set-weight, mark-down, mark-up) ------------------------


def with_weight(smap: ShardMap, shards: list[int], backend: str, weight: int) -> ShardMap:
    """The map with `backend`'s weight set to `weight` on `shards` (placements are split)."""
    wanted = set(shards)
    for shard in wanted:
        if backend not in [r.backend for r in smap.replicas[shard]]:
            raise InvalidRequest(f"backend {backend!r} holds no replica of shard {shard}")
    return with_replicas(
        smap,
        {
            shard: tuple(
                Replica(r.backend, weight) if r.backend == backend else r
                for r in smap.replicas[shard]
            )
            for shard in wanted
        },
    )


def check_backend(smap: ShardMap, backend: str) -> None:
    """InvalidRequest unless the map has a backend named `backend`."""
    if backend not in smap.backends:
        known = ", ".join(smap.backends)
        raise InvalidRequest(
            f"unknown backend {backend!r} (known: {known}); add it to the map first"
        )


def with_replica(smap: ShardMap, shard: int, backend: str, weight: int) -> ShardMap:
    """The map with a replica of `shard` added on `backend` (last: never the primary)."""
    check_backend(smap, backend)
    if backend in [r.backend for r in smap.replicas[shard]]:
        raise InvalidRequest(f"backend {backend!r} already holds a replica of shard {shard}")
    return with_replicas(smap, {shard: (*smap.replicas[shard], Replica(backend, weight))})


def without_replica(smap: ShardMap, shard: int, backend: str) -> ShardMap:
    """The map with `backend`'s replica of `shard` taken out of its set."""
    reps = smap.replicas[shard]
    if backend not in [r.backend for r in reps]:
        raise InvalidRequest(f"backend {backend!r} holds no replica of shard {shard}")
    rest = tuple(r for r in reps if r.backend != backend)
    if not any(r.weight for r in rest):
        raise InvalidRequest(
            f"shard {shard}: {backend!r} holds its only readable replica; add another first"
        )
    return with_replicas(smap, {shard: rest})


def with_moves(smap: ShardMap, moves: list[MoveRecord]) -> ShardMap:
    """The map with these copies under way (`storage.moves`)."""
    data = smap.as_dict()
    data["moves"] = msgspec.to_builtins(moves)
    return from_dict(data, "changed shard map", smap.base)


def with_backend(smap: ShardMap, name: str, config: BackendConfig) -> ShardMap:
    """The map with a new backend (it holds nothing until a replica is added on it)."""
    if name in smap.backends:
        raise InvalidRequest(f"backend {name!r} is already in the map")
    data = smap.as_dict()
    data["backends"][name] = msgspec.to_builtins(config)
    return from_dict(data, "changed shard map", smap.base)


def with_replicas(smap: ShardMap, changed: Mapping[int, tuple[Replica, ...]]) -> ShardMap:
    """The map with the replica sets of some shards replaced (placements are split)."""
    # One placement per run of shards with the same replicas, after the change.
    rows = [(shard, changed.get(shard, reps)) for shard, reps in enumerate(smap.replicas)]
    placement: list[Placement] = []
    start = 0
    for index in range(1, len(rows) + 1):
        if index == len(rows) or rows[index][1] != rows[start][1]:
            span = format_shards(range(start, index))
            placement.append(Placement(span, list(rows[start][1])))
            start = index
    data = smap.as_dict()
    data["placement"] = msgspec.to_builtins(placement)
    return from_dict(data, "changed shard map", smap.base)


def with_down(smap: ShardMap, backend: str, down: bool) -> ShardMap:
    """The map with `backend` drained (`down=True`) or back in service."""
    check_backend(smap, backend)
    data = smap.as_dict()
    data["backends"][backend]["down"] = down
    return from_dict(data, "changed shard map", smap.base)


def to_toml(smap: ShardMap) -> str:
    """The map as TOML text (what `load` reads back; comments of the old file are not kept)."""
    lines = [f"shards = {smap.shards}", ""]
    for name, config in smap.backends.items():
        lines.append(f"[backends.{_key(name)}]")
        for field, value in msgspec.to_builtins(config).items():
            if value is not None:
                lines.append(f"{field} = {_value(value)}")
        lines.append("")
    detector = msgspec.to_builtins(smap.detector)
    lines.append("[detector]")
    lines += [f"{field} = {_value(value)}" for field, value in detector.items()]
    for placement in smap.placement:
        reps = ", ".join(
            f"{{backend = {_value(r.backend)}, weight = {r.weight}}}" for r in placement.replicas
        )
        lines += ["", "[[placement]]", f"shards = {_value(str(placement.shards))}"]
        lines.append(f"replicas = [{reps}]")
    for move in smap.moves:
        lines += ["", "[[moves]]"]
        for field, value in msgspec.to_builtins(move).items():
            if value is not None:
                lines.append(f"{field} = {_value(value)}")
    return "\n".join(lines) + "\n"


def _key(name: str) -> str:
    return name if name.replace("-", "").replace("_", "").isalnum() else _value(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return msgspec.json.encode(value).decode()  # a JSON string is a TOML basic string
    return repr(value)


def save(smap: ShardMap, path: str | Path) -> None:
    """Write the map to `path` atomically and durably, under the map's lock (a blind
    overwrite: to change the map as it is now, use `update`)."""
    with locked(path):
        _write(smap, Path(path))


def update(path: str | Path, change: Callable[[ShardMap], ShardMap]) -> ShardMap:
    """Change the map file at `path`: read it, `change` it, write it back, all under the
    map's lock, so an edit another process or thread makes at the same time (an
    operator's command, a mover saving its position) is neither lost nor interleaved.
    Returns the new map; when `change` returns the map it was given, nothing is written.
    `change` may raise (InvalidRequest): then the file is left as it was.

        update("cluster.toml", lambda smap: with_down(smap, "db2", True))
    """
    file = Path(path)
    with locked(file):
        current = load(file)
        new = change(current)
        if new is not current:
            _write(new, file)
        return new


@contextmanager
def locked(path: str | Path, what: str = "lock", *, wait: bool = True) -> Iterator[None]:
    """Hold the map's lock: `flock` on a file beside it (`.NAME.lock`), taken by every
    edit of the map, in any process. Not re-entrant: an edit never calls another.

    Another `what` is another lock beside the map (`.NAME.WHAT`: a mover's, held
    while it copies); without `wait`, a lock another holds raises BlockingIOError."""
    file = Path(path)
    lock = file.with_name(f".{file.name}.{what}")
    descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _mode(file: Path) -> int:
    """The permissions the map has (mkstemp makes a file private; others may read the map)."""
    try:
        return stat.S_IMODE(file.stat().st_mode)
    except FileNotFoundError:
        return 0o644


def _write(smap: ShardMap, file: Path) -> None:
    """Replace `file` by the map: a temporary file of its own (two writers never share
    one), synced, renamed over the old one, then the directory synced, so a reader sees
    the old map or the new one, never half a file, and a power loss keeps the new one."""
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{file.name}.", suffix=".tmp", dir=file.parent
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), _mode(file))
            out.write(to_toml(smap))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    directory = os.open(file.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def table(smap: ShardMap, problems: Mapping[str, str | None]) -> list[str]:
    """`assocdb shards show`: the backends (with a probe's outcome), then shard → replicas."""
    lines = [f"{'backend':<12} {'state':<8} {'shards':<16} where"]
    for name, config in smap.backends.items():
        problem = problems.get(name)
        state = "drained" if config.down else "down" if problem else "up"
        where = shown(config.url) if config.url else config.path
        lines.append(f"{name:<12} {state:<8} {format_shards(smap.shards_of(name)):<16} {where}")
        if problem:
            lines.append(f"{'':<12} {problem}")
    lines += ["", f"{'shards':<12} replicas (primary first, backend:weight)"]
    for placement in smap.placement:
        reps = "  ".join(f"{r.backend}:{r.weight}" for r in placement.replicas)
        lines.append(f"{placement.shards!s:<12} {reps}")
    if smap.moves:
        lines += ["", "copies under way (assocdb shards move / add-replica; run again to resume)"]
    for move in smap.moves:
        what = f"move from {move.source}" if move.source else "added replica"
        where = (
            f", at {move.table or 'start'}, {move.copied:,} rows" if move.phase == "copying" else ""
        )
        lines.append(f"shard {move.shard:<6} → {move.target}: {what}, {move.phase}{where}")
    return lines


def shown(url: str) -> str:
    """A URL fit to print: its password masked."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}{sep}{user}:***@{host}" if at and colon else url
