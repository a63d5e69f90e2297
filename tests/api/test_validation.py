"""Bad input gets a specific assocdb error with a useful message, and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import (
    CacheConfig,
    Conflict,
    DataTooLarge,
    Graph,
    InvalidCursor,
    InvalidRequest,
    NotFound,
    SchemaError,
    UnknownType,
)
from assocdb.core.clock import MAX_FUTURE_US
from tests.support.helpers import snapshot

BIG_ASSOC = "x" * (64 << 10)  # 64 KiB of characters: 64 KiB + 2 bytes as JSON
BIG_OBJECT = {"x": "y" * (1 << 20)}
FAR_FUTURE = 2**62

Call = Callable[[Graph], Any]

CASES: list[tuple[str, Call, type[Exception], str]] = [
    ("id1 zero", lambda g: g.assoc_add(0, "follows", 2), InvalidRequest, "id1 must be between 1"),
    ("id1 negative", lambda g: g.assoc_add(-5, "follows", 2), InvalidRequest, "id1 must be"),
    ("id2 too big", lambda g: g.assoc_add(1, "follows", 2**63), InvalidRequest, "id2 must be"),
    (
        "id as string",
        lambda g: g.assoc_add("1", "follows", 2),
        InvalidRequest,
        "id1 must be an integer",
    ),
    (
        "id as float",
        lambda g: g.assoc_add(1, "follows", 2.0),
        InvalidRequest,
        "id2 must be an integer",
    ),
    ("id as bool", lambda g: g.assoc_add(True, "follows", 2), InvalidRequest, "integer, got bool"),
    ("id as None", lambda g: g.assoc_delete(None, "follows", 2), InvalidRequest, "id1"),
    ("unknown type", lambda g: g.assoc_add(1, "folows", 2), UnknownType, "did you mean"),
    ("type not a str", lambda g: g.assoc_add(1, 5, 2), UnknownType, "no association type 5"),
    (
        "data too big",
        lambda g: g.assoc_add(1, "follows", 2, data=BIG_ASSOC),
        DataTooLarge,
        "limit is 65,536",
    ),
    ("data NaN", lambda g: g.assoc_add(1, "follows", 2, data=float("nan")), InvalidRequest, "NaN"),
    ("data set", lambda g: g.assoc_add(1, "follows", 2, data={1, 2}), InvalidRequest, "is a set"),
    (
        "data lone surrogate",  # was msgspec's UnicodeEncodeError
        lambda g: g.assoc_add(1, "follows", 2, data=["ok", "\udcff"]),
        InvalidRequest,
        "lone surrogate",
    ),
    (
        "obj key lone surrogate",
        lambda g: g.obj_update(77, {"\ud800": 1}),
        InvalidRequest,
        "lone surrogate",
    ),
    (
        "time float",
        lambda g: g.assoc_add(1, "follows", 2, time=1.5),
        InvalidRequest,
        "time must be",
    ),
    (
        "time huge",
        lambda g: g.assoc_add(1, "follows", 2, time=2**64),
        InvalidRequest,
        "time must be",
    ),
    (
        "future",
        lambda g: g.assoc_add(1, "follows", 2, updated_at=FAR_FUTURE),
        InvalidRequest,
        "future",
    ),
    (
        "ua string",
        lambda g: g.assoc_delete(1, "follows", 2, updated_at="now"),
        InvalidRequest,
        "updated_at",
    ),
    (
        "change to same",
        lambda g: g.assoc_change_type(1, "follows", 3, "follows"),
        InvalidRequest,
        "already",
    ),
    (
        "change missing",
        lambda g: g.assoc_change_type(1, "follows", 99, "blocks"),
        NotFound,
        "no association",
    ),
    ("change unknown", lambda g: g.assoc_change_type(1, "follows", 3, "nope"), UnknownType, "nope"),
    ("limit zero", lambda g: g.assoc_range(1, "follows", limit=0), InvalidRequest, "limit must be"),
    (
        "limit negative",
        lambda g: g.assoc_page(1, "follows", limit=-1),
        InvalidRequest,
        "limit must be",
    ),
    (
        "limit string",
        lambda g: g.assoc_range(1, "follows", limit="9"),
        InvalidRequest,
        "limit must be",
    ),
    ("pos negative", lambda g: g.assoc_range(1, "follows", pos=-1), InvalidRequest, "pos must be"),
    (
        "cursor garbage",
        lambda g: g.assoc_page(1, "follows", "garbage!"),
        InvalidCursor,
        "malformed",
    ),
    ("cursor type", lambda g: g.assoc_page(1, "follows", 17), InvalidCursor, "cursor"),
    (
        "id2s string",
        lambda g: g.assoc_get(1, "follows", "23"),
        InvalidRequest,
        "id2s must be a list",
    ),
    (
        "id2s too many",
        lambda g: g.assoc_get(1, "likes", range(1, 200)),
        InvalidRequest,
        "at most 100",
    ),
    ("id2s bad id", lambda g: g.assoc_get(1, "follows", [1, 0]), InvalidRequest, "id2 must be"),
    ("id2s bool", lambda g: g.assoc_get(1, "follows", [1, True]), InvalidRequest, "id2 must be"),
    ("id2s big", lambda g: g.assoc_get(1, "follows", [1, 2**63]), InvalidRequest, "id2 must be"),
    ("high string", lambda g: g.assoc_time_range(1, "follows", "x", 0), InvalidRequest, "high"),
    ("obj unknown type", lambda g: g.obj_add("usr", {}), UnknownType, "did you mean 'user'"),
    ("obj data list", lambda g: g.obj_add("user", [1, 2]), InvalidRequest, "JSON object"),
    ("obj data big", lambda g: g.obj_add("user", BIG_OBJECT), DataTooLarge, "1,048,576"),
    ("obj bad key", lambda g: g.obj_add("user", {1: 2}), InvalidRequest, "keys are strings"),
    ("obj conflict", lambda g: g.obj_add("user", {"other": 1}, id=77), Conflict, "already exists"),
    ("obj id and near", lambda g: g.obj_add("user", {}, id=5, near=77), InvalidRequest, "either"),
    ("obj update missing", lambda g: g.obj_update(5, {"a": 1}), NotFound, "no object 5"),
    ("obj update not dict", lambda g: g.obj_update(77, "x"), InvalidRequest, "JSON object"),
    ("obj update big", lambda g: g.obj_update(77, BIG_OBJECT), DataTooLarge, "limit"),
    ("obj delete missing", lambda g: g.obj_delete(5), NotFound, "no object 5"),
    (
        "bulk bad edge",
        lambda g: g.bulk_load([(1, "follows", -9), (1, "follows", 9)]),  # bad first: none
        InvalidRequest,
        "#1",
    ),
    ("bulk workers", lambda g: g.bulk_load([], workers=0), InvalidRequest, "workers"),
    (
        "bulk part past any position",  # its progress overflowed SQLite's INTEGER: a 500
        lambda g: g._writes.bulk_load([(1, "follows", 9)], name="part", first=2**63 - 1),
        InvalidRequest,
        "first must be",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_refused_and_changes_nothing(
    graph: Graph, call: Call, error: type[Exception], message: str
) -> None:
    graph.assoc_add(1, "follows", 3, time=10, data={"k": "v"})
    graph.obj_add("user", {"name": "ada"}, id=77)
    before = snapshot(graph, [77])
    with pytest.raises(error, match=message):
        call(graph)
    assert snapshot(graph, [77]) == before


def test_the_future_limit_is_generous_enough_for_clock_skew(graph: Graph) -> None:
    import time

    soon = time.time_ns() // 1000 + MAX_FUTURE_US // 2
    graph.assoc_add(1, "follows", 2, updated_at=soon)
    assert graph.assoc_count(1, "follows") == 1


def test_a_huge_limit_is_clamped_not_refused(graph: Graph) -> None:
    graph.assoc_add(1, "follows", 2)
    assert len(graph.assoc_range(1, "follows", limit=10**9)) == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"timeout": -1}, "timeout must be"),
        ({"timeout": float("nan")}, "timeout must be"),
        ({"timeout": float("inf")}, "timeout must be"),
        ({"timeout": "2"}, "timeout must be"),
        ({"cache": "big"}, "cache must be a CacheConfig"),
        ({"retry": 3}, "retry must be a RetryPolicy"),
    ],
)
def test_open_refuses_bad_settings_and_creates_nothing(
    tmp_path: Path, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        assocdb.open(tmp_path / "g", **settings)
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("path", ["", "g\0"])
def test_open_refuses_an_empty_path_instead_of_using_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidRequest, match="a directory's path"):
        assocdb.open(path)
    assert list(tmp_path.iterdir()) == []


def test_open_with_a_missing_or_bad_schema_file_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        assocdb.open(tmp_path / "g", schema=tmp_path / "missing.toml")
    bad = tmp_path / "schema.toml"
    bad.write_text("[assoc.follows\n")
    with pytest.raises(SchemaError, match="not valid TOML"):
        assocdb.open(tmp_path / "g", schema=bad)
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"redis": "localhost:6379"}, "must be a Redis URL"),
        ({"max_age": float("nan")}, "max_age must be"),
        ({"max_age": -1}, "max_age must be"),
        ({"prefix": 0}, "prefix must be"),
        ({"max_bytes": "1G"}, "max_bytes must be"),
        ({"admit_after": 0}, "admit_after must be"),
    ],
)
def test_a_cache_config_out_of_range_is_refused_when_made(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        CacheConfig(**settings)
