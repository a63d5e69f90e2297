"""A power cut at any point loses nothing acknowledged (SQLite, `tests/support/power.py`).

Journaled writes are covered by the journal until a fence syncs their shards;
what no job covers (definitions, the graph's shard count, id reservations,
index builds, bulk loads) must be on the disk before it is acknowledged. Each
test writes, cuts the power, reopens what the disk holds and compares it with
what was acknowledged.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import Graph
from assocdb.core.ids import shard_of
from assocdb.writes import applier as applier_module
from tests.support.power import PowerCut

SHARDS = 4


def test_an_object_id_is_not_handed_out_again_after_a_power_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id block is reserved in the shard's `seq` table; replay restores the objects,
    not the reservation: it must be durable before an id of it is used."""
    where = tmp_path / "g"
    power = PowerCut(monkeypatch, where, tmp_path / "disk")
    g = assocdb.open(where, shards=2)
    g.define_object("user")
    g.engine.backend.make_durable([0, 1])  # the definition is not what this test is about
    with g.engine.applier._fencing:  # no fence: the journal alone covers the objects
        ids = [g.obj_add("user", {"n": n}, near=1) for n in range(3)]
        power.cut(g)
    g.close()
    with assocdb.open(power.disk) as after:
        assert after.drain(timeout=60)
        again = [after.obj_add("user", {"n": "new"}, near=1) for _ in range(3)]
        assert not set(again) & set(ids)
        assert [after.obj_get(id).data for id in ids] == [{"n": n} for n in range(3)]  # type: ignore[union-attr]


def test_a_definition_survives_a_power_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A type defined, an edge of it acknowledged, the power cut: the type is there, and
    the next type defined does not take its id (and with it the edge)."""
    where = tmp_path / "g"
    power = PowerCut(monkeypatch, where, tmp_path / "disk")
    g = assocdb.open(where, shards=SHARDS)
    g.engine.backend.make_durable(range(SHARDS))  # the new graph is not what this is about
    with g.engine.applier._fencing:
        g.define_assoc("follows", inverse="followed_by")
        assert g.assoc_add(5, "follows", 9).status == "applied"
        power.cut(g)
    g.close()
    with assocdb.open(power.disk) as after:
        assert after.drain(timeout=60)
        after.define_assoc("friend", symmetric=True)
        assert [a.id2 for a in after.assoc_range(5, "follows")] == [9]
        assert after.assoc_range(5, "friend") == []


def test_a_new_graph_keeps_its_shard_count_and_types_after_a_power_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = tmp_path / "g"
    power = PowerCut(monkeypatch, where, tmp_path / "disk")
    g = assocdb.open(where, shards=SHARDS)
    with g.engine.applier._fencing:
        g.define_assoc("follows", inverse="followed_by")
        g.assoc_add(5, "follows", 9)
        power.cut(g)
    g.close()
    with assocdb.open(power.disk) as after:
        assert after.shards == SHARDS
        assert after.drain(timeout=60)
        assert after.assoc_count(9, "followed_by") == 1


@dataclass
class Model:
    """What was acknowledged before the cut."""

    atypes: dict[str, int] = field(default_factory=dict)  # name: id
    inverses: dict[str, str] = field(default_factory=dict)
    otypes: dict[str, int] = field(default_factory=dict)
    objects: dict[int, tuple[str, dict[str, Any] | None]] = field(default_factory=dict)
    edges: dict[tuple[int, str], set[int]] = field(default_factory=dict)
    nodes: dict[tuple[int, str], str] = field(default_factory=dict)
    posts: dict[int, set[int]] = field(default_factory=dict)
    index_built: bool = False
    timelines: bool = False


class Script:
    """Random writes of every kind on `g`, each one recorded in the model once answered."""

    def __init__(self, g: Graph, rnd: random.Random) -> None:
        self.g, self.rnd, self.model = g, rnd, Model()
        self.steps = [
            self.define_assoc,
            self.define_object,
            self.obj_add,
            self.obj_add,
            self.obj_update,
            self.obj_delete,
            self.assoc_add,
            self.assoc_add,
            self.assoc_delete,
            self.node_archive,
            self.timeline,
            self.index,
            self.bulk_load,
            self.fence,
        ]

    def step(self) -> None:
        self.rnd.choice(self.steps)()

    def define_assoc(self) -> None:
        n = len(self.model.atypes)
        name, inverse = f"t{n}", f"t{n}_of" if self.rnd.random() < 0.5 else None
        kind = self.g.define_assoc(name, inverse=inverse)
        self.model.atypes[name] = kind.id
        if inverse is not None:
            self.model.atypes[inverse] = self.g.schema.assoc_type(inverse).id
            self.model.inverses[name] = inverse

    def define_object(self) -> None:
        name = f"o{len(self.model.otypes)}"
        self.model.otypes[name] = self.g.define_object(name).id

    def obj_add(self) -> None:
        if not self.model.otypes:
            self.define_object()
            return
        otype = self.rnd.choice(sorted(self.model.otypes))
        data = {"k": self.rnd.randrange(3), "v": self.rnd.random()}
        id = self.g.obj_add(otype, data, near=self.rnd.randrange(1, 100))
        assert id not in self.model.objects, "an id handed out twice"
        self.model.objects[id] = (otype, data)

    def _live(self) -> int | None:
        live = [id for id, (_, data) in self.model.objects.items() if data is not None]
        return self.rnd.choice(sorted(live)) if live else None

    def obj_update(self) -> None:
        id = self._live()
        if id is not None:
            patch = {"v": self.rnd.random()}
            self.g.obj_update(id, patch)
            otype, data = self.model.objects[id]
            self.model.objects[id] = (otype, {**(data or {}), **patch})

    def obj_delete(self) -> None:
        id = self._live()
        if id is not None:
            self.g.obj_delete(id)
            self.model.objects[id] = (self.model.objects[id][0], None)

    def _types(self) -> list[str]:
        return sorted(set(self.model.atypes) - set(self.model.inverses.values()) - {"posted"})

    def assoc_add(self) -> None:
        if not self._types():
            self.define_assoc()
            return
        atype = self.rnd.choice(self._types())
        id1, id2 = self.rnd.randrange(1, 20), self.rnd.randrange(1, 20)
        self.g.assoc_add(id1, atype, id2)
        self.model.edges.setdefault((id1, atype), set()).add(id2)

    def assoc_delete(self) -> None:
        present = sorted((key, id2) for key, id2s in self.model.edges.items() for id2 in id2s)
        if present:
            (id1, atype), id2 = self.rnd.choice(present)
            self.g.assoc_delete(id1, atype, id2)
            self.model.edges[(id1, atype)].discard(id2)

    def node_archive(self) -> None:
        if self._types():  # nodes of their own: their edges are not in the model
            node, atype = self.rnd.randrange(1000, 1010), self.rnd.choice(self._types())
            self.g.node_archive(node, atype)
            self.model.nodes[(node, atype)] = "archived"

    def timeline(self) -> None:
        if not self.model.timelines:
            self.g.define_assoc("follows", inverse="followed_by")
            self.g.define_timeline("follows", mode="write")
            self.model.timelines = True
            for name in ("follows", "followed_by", "posted"):
                self.model.atypes[name] = self.g.schema.assoc_type(name).id
            self.model.inverses["follows"] = "followed_by"
            return
        author, item = self.rnd.randrange(2000, 2005), self.rnd.randrange(1, 10**6)
        self.g.post(author, item)
        self.model.posts.setdefault(author, set()).add(item)

    def index(self) -> None:
        if "o0" not in self.model.otypes or self.model.index_built:
            self.define_object()
            return
        self.g.define_index("by_k", "o0", ["k"])
        assert self.g.index_build("by_k").state == "ready"
        self.model.index_built = True

    def bulk_load(self) -> None:
        if "bulk" not in self.model.atypes:
            self.model.atypes["bulk"] = self.g.define_assoc("bulk").id
        id1 = self.rnd.randrange(3000, 3010)
        id2s = {self.rnd.randrange(1, 10**6) for _ in range(5)}
        self.g.bulk_load([(id1, "bulk", id2) for id2 in id2s], workers=1)
        self.model.edges.setdefault((id1, "bulk"), set()).update(id2s)

    def fence(self) -> None:
        self.g.engine.applier.fence()


def check(after: Graph, model: Model) -> None:
    """Everything the model holds is in the reopened graph, and no id is handed out again."""
    assert after.shards == SHARDS
    for name, id in model.atypes.items():
        assert after.schema.assoc_type(name).id == id
    for name, inverse in model.inverses.items():
        assert after.schema.assoc_type(name).inverse == inverse
    for name, id in model.otypes.items():
        assert after.schema.object_type(name).id == id
    for id, (otype, data) in model.objects.items():
        stored = after.obj_get(id)
        assert (None if stored is None else (stored.otype, stored.data)) == (
            None if data is None else (otype, data)
        )
    for (id1, atype), id2s in model.edges.items():
        assert {a.id2 for a in after.assoc_range(id1, atype, limit=1000)} == id2s
        assert after.assoc_count(id1, atype) == len(id2s)
    for (node, atype), state in model.nodes.items():
        assert after.node_state(node, atype) == state
    if model.timelines:
        assert after.timeline_config() is not None
    for author, items in model.posts.items():
        assert {i.item for i in after.user_timeline(author, limit=1000).items} == items
    if model.index_built:
        assert after.index_status("by_k").state == "ready"
        for k in range(3):
            found = {o.id for o in after.index_query("by_k", eq=[k], limit=1000).items}
            assert found == {
                id
                for id, (otype, data) in model.objects.items()
                if otype == "o0" and data is not None and data["k"] == k
            }
    assert after.check_counts() == []
    assert after.check_inverses() == []
    if model.otypes:  # ids reserved before the cut are not handed out again
        otype = sorted(model.otypes)[0]
        again = {after.obj_add(otype, {}, near=n) for n in range(1, 100)}
        assert not again & set(model.objects)
        assert {shard_of(id, SHARDS) for id in again} == set(range(SHARDS))


@pytest.mark.parametrize("seed", range(8))
def test_a_power_cut_at_a_random_point_loses_nothing_acknowledged(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random writes of every kind, the graph created among them; fences only where
    the script runs one (so a seed is a fixed sequence); the power cut after a
    random step; the graph reopened from the disk holds every acknowledged write."""
    monkeypatch.setattr(applier_module, "FENCE_SECONDS", 3600.0)  # fences: the script's
    rnd = random.Random(seed)
    where = tmp_path / "g"
    power = PowerCut(monkeypatch, where, tmp_path / "disk")
    g = assocdb.open(where, shards=SHARDS)
    script = Script(g, rnd)
    for _ in range(rnd.randrange(0, 60)):
        script.step()
    power.cut(g)
    g.close()
    with assocdb.open(power.disk) as after:
        assert after.drain(timeout=60)
        check(after, script.model)


def test_a_reservation_taken_back_anyway_hands_out_no_id_again(tmp_path: Path) -> None:
    """Defence in depth: a shard whose id counter went back (a disk that lied about a
    sync, a shard restored from an older copy) skips the blocks whose first id is
    stored, rather than overwrite an object."""
    where = tmp_path / "g"
    with assocdb.open(where, shards=2) as g:
        g.define_object("user")
        ids = [g.obj_add("user", {"n": n}, near=1) for n in range(3)]
    shard = shard_of(1, 2)
    with sqlite3.connect(where / f"shard-{shard:04d}.db") as conn:
        conn.execute("UPDATE seq SET value = 0")
    conn.close()
    with assocdb.open(where) as after:
        again = [after.obj_add("user", {"n": "new"}, near=1) for _ in range(3)]
        assert not set(again) & set(ids)
        assert [after.obj_get(id).data for id in ids] == [{"n": n} for n in range(3)]  # type: ignore[union-attr]
