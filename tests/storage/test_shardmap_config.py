"""The shard map file: parsing, validation errors, ranges, rewriting."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assocdb import InvalidRequest
from assocdb.cli.main import main
from assocdb.storage import shardmap_config
from assocdb.storage.shardmap_config import (
    format_shards,
    load,
    parse,
    parse_shards,
    shown,
    table,
    to_toml,
    with_down,
    with_weight,
)
from tests.support.helpers import wait_until
from tests.support.shardmaps import write_map

GOOD = """
shards = 16

[backends.db1]
url = "mysql://root@10.0.0.1:3306/graph"
connect_timeout = 0.5
query_timeout = 1.5

[backends.db2]
path = "data/db2"

[[placement]]
shards = "0-7"
replicas = [{backend = "db1", weight = 2}, {backend = "db2", weight = 1}]

[[placement]]
shards = "8-15"
replicas = [{backend = "db2"}, {backend = "db1", weight = 0}]
"""


def test_a_good_map_places_every_shard_primary_first() -> None:
    smap = parse(GOOD, base="/etc/assocdb")
    assert smap.shards == 16
    assert [r.backend for r in smap.replicas[3]] == ["db1", "db2"]
    assert [(r.backend, r.weight) for r in smap.replicas[12]] == [("db2", 1), ("db1", 0)]
    assert smap.shards_of("db1") == list(range(16))
    assert smap.member_spec("db1") == {
        "kind": "mysql",
        "url": "mysql://root@10.0.0.1:3306/graph",
        "shards": 16,
        "connect_timeout": 0.5,
        "query_timeout": 1.5,
    }
    assert smap.member_spec("db2") == {
        "kind": "sqlite",
        "path": "/etc/assocdb/data/db2",
        "shards": 16,
        "timeout": 2.0,
    }


def test_sqlite_paths_are_relative_to_the_map_file(tmp_path: Path) -> None:
    (tmp_path / "cluster.toml").write_text(GOOD)
    assert load(tmp_path / "cluster.toml").member_spec("db2")["path"] == str(tmp_path / "data/db2")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('shards = "8-15"', 'shards = "7-15"'), "shard 7 is already placed"),
        (('shards = "8-15"', 'shards = "9-15"'), "shards 8 are not placed"),
        (('shards = "8-15"', 'shards = "8-16"'), "outside shards 0-15"),
        (('shards = "8-15"', 'shards = "eight"'), "not a shard range"),
        (('{backend = "db2"}', '{backend = "db9"}'), "unknown backend 'db9' (known: db1, db2)"),
        (("weight = 2", "weight = -1"), "must be from 0 to 1000"),
        (("weight = 2", 'weight = "heavy"'), "Expected `int`"),
        (('{backend = "db2"}, ', '{backend = "db2", weight = 0}, '), "every replica has weight 0"),
        (('{backend = "db2"}, {backend = "db1", weight = 0}', ""), "at least one replica"),
        (('{backend = "db2"}, {backend = "db1"', '{backend = "db2"}, {backend = "db2"'), "twice"),
        (('path = "data/db2"', 'path = "x"\nurl = "mysql://h/d"'), "exactly one of url or path"),
        (('path = "data/db2"', ""), "exactly one of url or path"),
        (('url = "mysql://root@10.0.0.1:3306/graph"', 'url = "db1"'), "not like mysql://"),
        (("query_timeout = 1.5", "query_timeout = 0"), "timeouts must be positive"),
        (("query_timeout = 1.5", "query_timout = 1.5"), "unknown field `query_timout`"),
        (("shards = 16", "shards = 0"), "shards must be from 1 to 4096"),
        (("shards = 16", "shards = [16"), "not valid TOML"),
    ],
)
def test_a_bad_map_says_what_is_wrong(change: tuple[str, str], message: str) -> None:
    old, new = change
    assert old in GOOD
    with pytest.raises(InvalidRequest) as caught:
        parse(GOOD.replace(old, new, 1), "cluster.toml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("cluster.toml")


def test_detector_settings_are_checked() -> None:
    with pytest.raises(InvalidRequest, match="probe_interval ≤ probe_max"):
        parse(GOOD + "\n[detector]\nprobe_interval = 20.0\n")
    assert parse(GOOD + "\n[detector]\nthreshold = 5\n").detector.threshold == 5


def test_a_missing_file_is_an_invalid_request(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="cannot read shard map"):
        load(tmp_path / "nope.toml")


def test_a_file_that_is_not_utf8_is_an_invalid_request(tmp_path: Path) -> None:
    binary = tmp_path / "cluster.toml"
    binary.write_bytes(b"\xff\xfe shards = 4\n")  # was a UnicodeDecodeError traceback
    with pytest.raises(InvalidRequest, match="not a shard map"):
        load(binary)


@given(st.sets(st.integers(0, 63), min_size=1))
def test_shard_ranges_round_trip(shards: set[int]) -> None:
    text = format_shards(shards)
    assert parse_shards(text, 64) == sorted(shards)
    assert len(text.split(",")) == sum(1 for s in shards if s - 1 not in shards)


def test_a_map_round_trips_through_toml() -> None:
    smap = parse(GOOD, base="/b")
    again = parse(to_toml(smap), base="/b")
    assert again == smap


def test_set_weight_splits_placements_and_keeps_the_rest() -> None:
    smap = with_weight(parse(GOOD), [2, 3], "db2", 5)
    weights = [{r.backend: r.weight for r in reps} for reps in smap.replicas]
    assert weights[2] == weights[3] == {"db1": 2, "db2": 5}
    assert weights[1] == weights[4] == {"db1": 2, "db2": 1}
    assert weights[12] == {"db2": 1, "db1": 0}
    assert [str(p.shards) for p in smap.placement] == ["0-1", "2-3", "4-7", "8-15"]
    assert parse(to_toml(smap)).replicas == smap.replicas
    with pytest.raises(InvalidRequest, match="every replica has weight 0"):
        with_weight(smap, [9], "db2", 0)
    with pytest.raises(InvalidRequest, match="holds no replica of shard 3"):
        with_weight(smap, [3], "db9", 1)


def test_marking_down_is_kept_in_the_file() -> None:
    smap = with_down(parse(GOOD), "db2", True)
    assert parse(to_toml(smap)).backends["db2"].down
    assert not with_down(smap, "db2", False).backends["db2"].down
    with pytest.raises(InvalidRequest, match="unknown backend 'db7'"):
        with_down(smap, "db7", True)


def test_passwords_are_not_shown() -> None:
    assert shown("mysql://root:s3cret@db1:3306/g") == "mysql://root:***@db1:3306/g"
    assert shown("mysql://root@db1:3306/g") == "mysql://root@db1:3306/g"
    smap = parse(GOOD.replace("root@10.0.0.1", "app:pw@10.0.0.1"))
    assert "pw" not in "\n".join(table(smap, {}))


def test_a_mariadb_url_is_a_mysql_member(tmp_path: Path) -> None:
    """A member at a mariadb:// URL opens with the MySQL backend (its spec said 'mariadb')."""
    smap = parse(GOOD.replace("mysql://root@10.0.0.1", "mariadb://root@10.0.0.1"), base="/")
    spec = smap.member_spec("db1")
    assert spec["kind"] == "mysql"
    assert spec["url"] == "mariadb://root@10.0.0.1:3306/graph"


def test_a_url_of_an_engine_assocdb_does_not_know_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="schemes: mysql, mariadb, postgresql, postgres"):
        parse(GOOD.replace("mysql://root@10.0.0.1", "oracle://root@10.0.0.1"), base="/")


def test_replica_sets_change_and_moves_are_recorded(tmp_path: Path) -> None:
    from assocdb.storage.shardmap_config import (
        BackendConfig,
        MoveRecord,
        save,
        with_backend,
        with_moves,
        with_replica,
        without_replica,
    )

    smap = with_backend(parse(GOOD), "db3", BackendConfig(path="data/db3"))
    smap = with_replica(smap, 3, "db3", 0)
    assert [(r.backend, r.weight) for r in smap.replicas[3]] == [("db1", 2), ("db2", 1), ("db3", 0)]
    assert [r.backend for r in smap.replicas[4]] == ["db1", "db2"]
    record = MoveRecord(3, "db3", "copying", "db1", 2, "edges", "93010203", 1234)
    smap = with_moves(smap, [record])
    save(smap, tmp_path / "m.toml")
    again = load(tmp_path / "m.toml")
    assert again.moves == [record]
    assert again.replicas == smap.replicas
    assert "shard 3      → db3: move from db1, copying, at edges, 1,234 rows" in table(again, {})
    with pytest.raises(InvalidRequest, match="already holds a replica of shard 3"):
        with_replica(smap, 3, "db3", 1)
    with pytest.raises(InvalidRequest, match="unknown backend 'db9'"):
        with_replica(smap, 3, "db9", 1)
    with pytest.raises(InvalidRequest, match="already in the map"):
        with_backend(smap, "db1", BackendConfig(path="x"))
    with pytest.raises(InvalidRequest, match="only readable replica"):
        without_replica(smap, 12, "db2")  # db1, of weight 0, would be left alone
    smap = without_replica(smap, 12, "db1")
    assert [r.backend for r in smap.replicas[12]] == ["db2"]
    with pytest.raises(InvalidRequest, match="holds no replica of shard 12"):
        without_replica(smap, 12, "db1")
    bad = GOOD + '\n[[moves]]\nshard = 3\ntarget = "db7"\nphase = "copying"\n'
    with pytest.raises(InvalidRequest, match="move of shard 3: unknown backend 'db7'"):
        parse(bad)


@pytest.mark.parametrize(
    ("move", "message"),
    [
        ('shard = 3\ntarget = "db2"\nphase = "copyin"', "phase 'copyin' is not one of"),
        ('shard = 12\ntarget = "db1"\nphase = "copying"\nweight = 1001', "weight"),
        ('shard = 12\ntarget = "db1"\nphase = "copying"\nsource = "db1"', "from the backend"),
        ('shard = 12\ntarget = "db1"\nphase = "copying"\nafter = "zz"', "position"),
        ('shard = 12\ntarget = "db1"\nphase = "copying"\ncopied = -5', "position"),
        ('shard = 12\ntarget = "db1"\nphase = "copying"\ntable = "edgez"', "position"),
    ],
)
def test_a_bad_move_record_is_refused(move: str, message: str) -> None:
    # A mover resumes from this record: one it cannot act on must not take effect (an
    # unknown phase made `assocdb shards move` report success and do nothing, forever).
    with pytest.raises(InvalidRequest, match=f"move of shard [0-9]+: .*{message}"):
        parse(GOOD + f"\n[[moves]]\n{move}\n")


def test_a_move_record_names_a_replica_of_its_shard() -> None:
    # Every phase keeps the copy in the shard's replica set (it is added with the record).
    bad = GOOD.replace('{backend = "db2"}, {backend = "db1", weight = 0}', '{backend = "db2"}')
    with pytest.raises(InvalidRequest, match="move of shard 12: 'db1' holds no replica"):
        parse(bad + '\n[[moves]]\nshard = 12\ntarget = "db1"\nphase = "copying"\n')
    good = parse(GOOD + '\n[[moves]]\nshard = 12\ntarget = "db1"\nphase = "copying"\n')
    assert good.moves[0].phase == "copying"


def test_a_copy_still_being_filled_cannot_be_given_reads() -> None:
    # `assocdb shards set-weight` (or an edit) during a copy would send reads to a replica
    # that lacks the rows not copied yet: acknowledged writes would seem lost.
    from assocdb.storage.shardmap_config import MoveRecord, with_moves

    smap = parse(GOOD)  # shard 12: db2, then db1 of weight 0
    for phase in ("write-only", "copying"):
        copying = with_moves(smap, [MoveRecord(12, "db1", phase, "db2")])
        with pytest.raises(
            InvalidRequest, match=r"move of shard 12: .*'db1' is still being filled"
        ):
            with_weight(copying, [12], "db1", 1)
    live = with_weight(with_moves(smap, [MoveRecord(12, "db1", "live", "db2")]), [12], "db1", 1)
    assert live.replicas[12][1].weight == 1


# -- two editors of one map file at once ----------------------------------------------


class HeldEdit:
    """Editor A stopped at `point` of its write (a function of `shardmap_config`, or of
    `os`) until editor B has started its own edit: B has read the map, or waits for the
    map's lock. Without a lock B reads the map A is about to replace."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, point: str) -> None:
        self.a: threading.Thread | None = None
        self.b: threading.Thread | None = None
        self.a_held = threading.Event()
        self.b_started = threading.Event()
        self.errors: list[BaseException] = []
        real = getattr(module, point)

        def held(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is self.a and not self.a_held.is_set():
                self.a_held.set()
                wait_until(self.b_started.is_set)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, point, held)
        real_load = shardmap_config.load

        def load_(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is self.b:
                self.b_started.set()
            return real_load(*args, **kwargs)

        monkeypatch.setattr(shardmap_config, "load", load_)
        real_flock = fcntl.flock

        def flock(fd: int, operation: int) -> None:
            if threading.current_thread() is self.b:
                self.b_started.set()
            real_flock(fd, operation)

        monkeypatch.setattr(fcntl, "flock", flock)

    def run(self, a: list[str], b: list[str]) -> None:
        self.a = threading.Thread(target=self._command, args=(a,))
        self.b = threading.Thread(target=self._command, args=(b,))
        self.a.start()
        wait_until(self.a_held.is_set)
        self.b.start()
        for thread in (self.a, self.b):
            thread.join(timeout=60)
            assert not thread.is_alive()
        assert self.errors == []

    def _command(self, args: list[str]) -> None:
        try:
            main.main(args, standalone_mode=False)
        except BaseException as exc:  # reported by run
            self.errors.append(exc)


@pytest.mark.parametrize(
    ("module", "point"), [(shardmap_config, "to_toml"), (os, "replace")], ids=["read", "rename"]
)
def test_two_commands_changing_the_map_at_once_both_take_effect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: Any, point: str
) -> None:
    """`assocdb shards set-weight` and `mark-down` run at the same moment (or a mover
    saves its position while an operator edits): each edit is a read-modify-write of the
    file, and one used to overwrite the other (a lost update), or to rename the temporary
    file the other was writing (a torn map, or FileNotFoundError)."""
    path = write_map(tmp_path)
    race = HeldEdit(monkeypatch, module, point)
    race.run(
        ["shards", "set-weight", str(path), "0", "db2", "7"],
        ["shards", "mark-down", str(path), "db3"],
    )
    smap = load(path)
    assert ("db2", 7) in [(r.backend, r.weight) for r in smap.replicas[0]]
    assert smap.backends["db3"].down
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
