"""assocdb.open: creating, opening only, and what it refuses to open."""

from __future__ import annotations

from pathlib import Path

import pytest

import assocdb
from assocdb import InvalidRequest, NotFound, UnknownType
from tests.support.stores import Stores


def test_open_without_create_finds_no_graph_and_creates_nothing(stores: Stores) -> None:
    where, journal = stores.location("absent")
    with pytest.raises(NotFound, match=r"no graph at .* \(create one with `assocdb init "):
        assocdb.open(where, journal=journal, create=False)
    if stores.kind == "sqlite":
        assert not Path(where).exists()
    with pytest.raises(NotFound):  # still nothing there (no schema was created on MySQL)
        assocdb.open(where, journal=journal, create=False)
    created = assocdb.open(where, journal=journal, shards=2)
    created.define_assoc("follows")
    created.assoc_add(1, "follows", 2)
    created.close()
    with assocdb.open(where, journal=journal, create=False) as g:
        assert g.assoc_count(1, "follows") == 1


def test_open_without_create_leaves_an_empty_directory_empty(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        assocdb.open(tmp_path, create=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "url", ["oracle://scott@127.0.0.1:1521/g", "redis://127.0.0.1/0", "s3://bucket/g"]
)
def test_a_url_of_an_unknown_scheme_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidRequest, match="unknown URL scheme"):
        assocdb.open(url)
    assert list(tmp_path.iterdir()) == []


def test_a_file_is_not_a_graph_directory(tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("not a graph")
    with pytest.raises(InvalidRequest, match="is a file, not a graph directory") as refused:
        assocdb.open(file)
    assert refused.value.__cause__ is None
    assert file.read_text() == "not a graph"


def test_open_refuses_what_is_not_a_place(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="open takes a directory"):
        assocdb.open(42)  # type: ignore[arg-type]


# -- small corners of the library (issue: a newcomer's first hour) -------------------------


def test_node_state_reads_one_direction(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        assert g.node_state(1, "follows", direction="in") == "normal"
        with pytest.raises(InvalidRequest, match="one direction"):
            g.node_state(1, "follows", direction="both")  # type: ignore[arg-type]


def test_change_type_of_a_missing_edge_names_the_type(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows")
        g.define_assoc("blocks")
        with pytest.raises(NotFound, match="of type 'follows'") as missing:
            g.assoc_change_type(1, "follows", 2, "blocks")
        assert "type id" not in str(missing.value)


def test_an_unknown_type_is_one_error_not_two(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows")
        with pytest.raises(UnknownType, match="did you mean 'follows'") as unknown:
            g.assoc_add(1, "folows", 2)
        assert unknown.value.__context__ is None  # no "during handling of the above…"
        with pytest.raises(UnknownType) as unknown_object:
            g.obj_add("usr", {})
        assert unknown_object.value.__context__ is None


def test_the_docs_page_shows_real_defaults() -> None:
    from assocdb.serve.openapi import docs_page

    page = docs_page()
    assert "NODEFAULT" not in page
    assert "eq = []" in page
