"""The server's cache: on by default, sized by --cache-mb, and exact across workers."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import assocdb
from assocdb import CacheConfig, Client
from assocdb.cache.tier1 import Cache
from assocdb.cli.main import default_cache_mb, main
from assocdb.core.merge import ObjRow
from assocdb.serve import peers as peers_module
from assocdb.serve.peers import Peers
from tests.support.http_server import ADMIN, WRITER, Server


def make_graph(directory: Path) -> None:
    with assocdb.open(directory, shards=4) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_object("user")


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    return 0.0 if found is None else float(found.group(1))


def scrape(server: Server) -> str:
    headers = {"authorization": f"Bearer {ADMIN}"}
    return httpx.get(f"{server.url}/metrics", headers=headers).text


# -- on by default --------------------------------------------------------------------------


def test_a_server_started_without_flags_answers_from_the_cache(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    make_graph(directory)
    server = Server(directory)
    try:
        with Client(server.url, token=WRITER) as c:
            c.assoc_add(1, "follows", 2)
            for _ in range(4):  # a key is cached on its second miss
                assert [a.id2 for a in c.assoc_range(1, "follows")] == [2]
        with Client(server.url, token=ADMIN) as admin:
            stats = admin.cache_stats()
        assert stats is not None
        assert stats.hits >= 2
    finally:
        server.stop()


@pytest.mark.parametrize("flags", [["--no-cache"], ["--cache-mb", "0"]])
def test_the_cache_can_be_turned_off(tmp_path: Path, flags: list[str]) -> None:
    directory = tmp_path / "graph"
    make_graph(directory)
    server = Server(directory, True, *flags)
    try:
        with Client(server.url, token=ADMIN) as admin:
            assert admin.cache_stats() is None
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--cache-mb", "-1"], "--cache-mb"),
        (["--cache-mb", "lots"], "--cache-mb"),
        (["--no-cache", "--cache-mb", "64"], "--no-cache and --cache-mb 64 contradict"),
    ],
)
def test_bad_cache_sizes_are_refused(tmp_path: Path, flags: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "g"), *flags])
    assert result.exit_code == 2
    assert message in result.output


def test_the_default_size_is_a_quarter_of_memory_shared_by_the_workers() -> None:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert default_cache_mb(1) <= memory // 4 >> 20
    assert default_cache_mb(2) == max(1, default_cache_mb(1) // 2) or (
        abs(default_cache_mb(2) * 2 - default_cache_mb(1)) <= 1
    )
    help_text = CliRunner().invoke(main, ["serve", "--help"]).output
    assert "a quarter of this machine's memory" in help_text
    assert "--no-cache" in help_text


# -- several workers, one directory ----------------------------------------------------------


def test_two_workers_read_each_others_writes(tmp_path: Path) -> None:
    """Both workers cache the list; a write through either is seen by the next read
    through any (connections are new each time, so the workers take turns)."""
    directory = tmp_path / "graph"
    make_graph(directory)
    server = Server(directory, True, "--workers", "2")
    headers = {"authorization": f"Bearer {WRITER}"}

    def call(method: str, body: dict[str, object]) -> object:
        answer = httpx.post(f"{server.url}/v1/{method}", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()["result"]

    try:
        expected: list[int] = []
        for n in range(1, 31):
            for _ in range(4):  # fill (and hit) both workers' caches
                listed = call("assoc_range", {"id1": 2, "atype": "followed_by"})
                assert [a["id2"] for a in listed] == expected  # type: ignore[attr-defined]
                assert call("assoc_count", {"id1": 2, "atype": "followed_by"}) == len(expected)
            call("assoc_add", {"id1": n, "atype": "follows", "id2": 2, "time": n})
            expected.insert(0, n)
            listed = call("assoc_range", {"id1": 2, "atype": "followed_by"})
            assert [a["id2"] for a in listed] == expected  # type: ignore[attr-defined]
        uid = call("obj_add", {"otype": "user", "data": {"v": 0}})
        for v in range(1, 11):
            for _ in range(4):
                assert call("obj_get", {"id": uid})["data"] == {"v": v - 1}  # type: ignore[index]
            call("obj_update", {"id": uid, "data": {"v": v}})
            assert call("obj_get", {"id": uid})["data"] == {"v": v}  # type: ignore[index]
        assert metric(scrape(server), "assocdb_cache_hits") > 0
    finally:
        server.stop()


# -- the ring between workers, in process ----------------------------------------------------


def cached_object(cache: Cache, id: int, version: int) -> ObjRow | None:
    return cache.obj(id, lambda: ObjRow(id, 1, 0, version, 1, b"{}"))


def test_the_ring_drops_what_another_worker_wrote(tmp_path: Path) -> None:
    path = str(tmp_path / "ring")
    writer, reader = Peers(path), Peers(path)
    cache = Cache(CacheConfig(admit_after=1))
    try:
        assert cached_object(cache, 5, 1).version == 1  # type: ignore[union-attr]
        assert cached_object(cache, 5, 2).version == 1  # type: ignore[union-attr]  # a hit
        writer.invalidate([("object", 5)])
        reader.poll(cache)
        assert cached_object(cache, 5, 2).version == 2  # type: ignore[union-attr]
        reader.poll(cache)  # nothing new: the entry stays
        assert cached_object(cache, 5, 3).version == 2  # type: ignore[union-attr]
        writer.flush()
        reader.poll(cache)
        assert cached_object(cache, 5, 3).version == 3  # type: ignore[union-attr]
    finally:
        writer.close()
        reader.close()


def test_a_reader_that_fell_a_whole_ring_behind_forgets_everything(tmp_path: Path) -> None:
    path = str(tmp_path / "ring")
    writer, reader = Peers(path), Peers(path)
    cache = Cache(CacheConfig(admit_after=1))
    try:
        cached_object(cache, 5, 1)
        others = [("object", 10_000 + n) for n in range(peers_module.SLOTS + 1)]
        writer.invalidate(others)  # object 5 itself was never named
        reader.poll(cache)
        assert cached_object(cache, 5, 2).version == 2  # type: ignore[union-attr]
    finally:
        writer.close()
        reader.close()


# -- batches and metrics ---------------------------------------------------------------------


def test_a_batch_answers_what_single_requests_answer(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    make_graph(directory)
    server = Server(directory)
    headers = {"authorization": f"Bearer {ADMIN}"}
    try:
        with Client(server.url, token=ADMIN) as c:
            for n in range(2, 12):
                c.assoc_add(1, "follows", n, time=n, data={"n": n} if n % 3 == 0 else None)
            uid = c.obj_add("user", {"name": "ada"})
        term = {"type": "term", "node": 1, "atype": "follows"}
        reads = [
            ("assoc_range", {"id1": 1, "atype": "follows", "limit": 5}),
            ("assoc_range", {"id1": 1, "atype": "follows", "pos": 3}),
            ("assoc_get", {"id1": 1, "atype": "follows", "id2s": [3, 4, 99]}),
            ("assoc_count", {"id1": 1, "atype": "follows"}),
            ("assoc_page", {"id1": 1, "atype": "follows", "limit": 3}),
            ("assoc_edge", {"id1": 1, "atype": "follows", "id2": 3}),
            ("obj_get", {"id": uid}),
            ("query_page", {"query": term, "limit": 4}),
            ("query_count", {"query": term}),
            ("schema", {}),
            ("node_state", {"node": 1, "atype": "follows"}),
            ("assoc_count", {"id1": 1, "atype": "nope"}),  # an error
        ]
        singles = [
            httpx.post(f"{server.url}/v1/{name}", json=args, headers=headers).json()
            for name, args in reads
        ]
        assert "error" in singles[-1]
        requests = [{"method": name, "args": args} for name, args in reads]
        batch = httpx.post(f"{server.url}/v1/batch", json={"requests": requests}, headers=headers)
        assert batch.json()["results"] == singles
        # A malformed item is that item's error; the others are answered as before.
        bad = [*requests, {"method": "assoc_range", "args": {"id1": "x", "atype": "follows"}}]
        mixed = httpx.post(f"{server.url}/v1/batch", json={"requests": bad}, headers=headers)
        results = mixed.json()["results"]
        assert results[:-1] == singles
        assert results[-1]["error"]["code"] == "invalid_request"
    finally:
        server.stop()


def test_a_kept_encoded_answer_gives_way_to_a_write(tmp_path: Path) -> None:
    """assoc_range's and assoc_page's answers are kept encoded after their second read; a
    write to the list through the server (or the inverse of a write to another list)
    drops them."""
    directory = tmp_path / "graph"
    make_graph(directory)
    server = Server(directory, True, "--workers", "1")
    headers = {"authorization": f"Bearer {ADMIN}"}

    def ranged(id1: int, atype: str) -> list[int]:
        """The list through assoc_range and assoc_page, singly and in a batch (all equal)."""
        args = {"id1": id1, "atype": atype, "limit": 5}
        reads = [{"method": "assoc_range", "args": args}, {"method": "assoc_page", "args": args}]
        batch = httpx.post(f"{server.url}/v1/batch", json={"requests": reads}, headers=headers)
        answers = [
            httpx.post(f"{server.url}/v1/{name}", json=args, headers=headers).json()
            for name in ("assoc_range", "assoc_page")
        ]
        assert batch.json()["results"] == answers
        found = [a["id2"] for a in answers[0]["result"]]
        assert [a["id2"] for a in answers[1]["result"]["items"]] == found
        return found

    try:
        with Client(server.url, token=ADMIN) as c:
            c.assoc_add(1, "follows", 2, time=2)
            for _ in range(3):  # filled, then kept, then answered from what was kept
                assert ranged(1, "follows") == [2]
                assert ranged(9, "followed_by") == []
            c.assoc_add(1, "follows", 3, time=3)
            assert ranged(1, "follows") == [3, 2]
            c.assoc_add(1, "follows", 9, time=9)  # its inverse is in 9's list
            assert ranged(9, "followed_by") == [1]
            c.assoc_delete(1, "follows", 3)
            assert ranged(1, "follows") == [9, 2]
    finally:
        server.stop()


def test_a_batch_counts_its_reads_per_kind(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    make_graph(directory)
    server = Server(directory)
    headers = {"authorization": f"Bearer {ADMIN}"}
    try:
        reads = [{"method": "assoc_range", "args": {"id1": 1, "atype": "follows"}}] * 7
        reads += [{"method": "assoc_count", "args": {"id1": 1, "atype": "follows"}}] * 2
        before = scrape(server)
        answer = httpx.post(f"{server.url}/v1/batch", json={"requests": reads}, headers=headers)
        assert answer.status_code == 200
        after = scrape(server)
        for name, n in (("assoc_range", 7), ("assoc_count", 2)):
            count = f'assocdb_operation_seconds_count{{operation="{name}"}}'
            assert metric(after, count) - metric(before, count) == n
        requests = 'assocdb_request_seconds_count{method="batch"}'
        assert metric(after, requests) - metric(before, requests) == 1
        responses = 'assocdb_responses_total{method="batch",status="200"}'
        assert metric(after, responses) - metric(before, responses) == 1
    finally:
        server.stop()
