"""SIGKILL a process in the middle of the cascading deletion of a 100k-edge node:
reopened, the job finishes, removes everything it must and nothing else, and a
restore brings back exactly what it removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import assocdb

DELETER = Path(__file__).parents[1] / "support" / "crash_deleter.py"
ROOT, OTHER = 1, 2
FOLLOWERS, POSTS, LIKES = 90_000, 2_000, 4  # 90k + 2k + 8k = 100k edges of ROOT's


def build(directory: Path) -> None:
    with assocdb.open(directory, shards=4) as g:
        g.define_assoc("follows", inverse="followed_by", on_delete="shallow")
        g.define_assoc("followed_by", inverse="follows", on_delete="shallow")
        g.define_assoc("authored", inverse="author", on_delete="deep")
        g.define_assoc("author", inverse="authored", on_delete="shallow")
        g.define_assoc("liked", inverse="liked_by", on_delete="shallow")
        g.define_assoc("liked_by", inverse="liked", on_delete="shallow")
        g.define_object("user")
        g.define_object("post", owned=True)
        with g.batch() as b:
            for user in (ROOT, OTHER):
                b.obj_add("user", {"name": f"u{user}"}, id=user)
            for post in range(POSTS):
                b.obj_add("post", {"n": post}, id=10_000 + post)
                b.obj_add("post", {"n": post}, id=20_000 + post)
        edges = [(10**6 + f, "follows", ROOT, f + 1) for f in range(FOLLOWERS)]
        edges += [(10**6 + f, "follows", OTHER, f + 1) for f in range(1000)]
        edges += [(ROOT, "authored", 10_000 + p, p + 1) for p in range(POSTS)]
        edges += [(OTHER, "authored", 20_000 + p, p + 1) for p in range(POSTS)]
        for liker in range(LIKES):
            edges += [(5 * 10**6 + liker, "liked", 10_000 + p, 7) for p in range(POSTS)]
            edges += [(5 * 10**6 + liker, "liked", 20_000 + p, 7) for p in range(POSTS)]
        g.bulk_load(edges, workers=1)


def kill_midway(directory: Path, removed: int) -> int:
    """Start the deleter; SIGKILL it once it reports `removed` edges gone (a
    condition, not a time); return the last count it reported."""
    env = {**os.environ, "PYTHONPATH": str(Path(assocdb.__file__).parents[1])}
    child = subprocess.Popen(
        [sys.executable, str(DELETER), str(directory), str(ROOT)],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    last = 0
    for line in child.stdout:
        assert line != b"done\n", "the cascade ended before the kill"
        last = int(line)
        if last >= removed:
            child.send_signal(signal.SIGKILL)
            break
    child.wait()
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return last


def test_a_cascade_killed_midway_finishes_after_reopening(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    build(directory)
    reported = kill_midway(directory, 30_000)
    assert 30_000 <= reported < 100_000
    with assocdb.open(directory) as g:
        assert g.obj_get(ROOT) is None
        assert g.deletions.wait(300)
        deletion = g.deletions.of_object(ROOT)
        assert deletion.status == "done"
        assert deletion.objects == {"post": POSTS, "user": 1}
        assert deletion.edges == {
            "authored": POSTS,
            "followed_by": FOLLOWERS,
            "liked_by": POSTS * LIKES,
        }
        # nothing left ...
        for atype in ("followed_by", "authored"):
            assert g.assoc_count(ROOT, atype) == 0
        assert all(g.obj_get(10_000 + p) is None for p in range(POSTS))
        for liker in range(LIKES):
            assert g.assoc_count(5 * 10**6 + liker, "liked") == POSTS  # OTHER's posts
        assert g.assoc_count(10**6, "follows") == 1  # OTHER
        # ... and nothing extra
        assert g.obj_get(OTHER) is not None
        assert g.assoc_count(OTHER, "authored") == POSTS
        assert g.assoc_count(OTHER, "followed_by") == 1000
        assert all(g.obj_get(20_000 + p) is not None for p in range(POSTS))
        assert g.check_counts() == []
        assert g.check_inverses() == []

        restored = g.obj_restore(ROOT)
        assert restored.status == "restored"
        assert g.obj_get(ROOT) is not None
        assert g.assoc_count(ROOT, "followed_by") == FOLLOWERS
        assert g.assoc_count(ROOT, "authored") == POSTS
        assert g.assoc_count(10**6 + 5, "follows") == 2  # ROOT and OTHER
        assert g.assoc_count(5 * 10**6, "liked") == 2 * POSTS
        assert g.assoc_edge(ROOT, "followed_by", 10**6 + 5).time == 6  # type: ignore[union-attr]
        assert g.check_counts() == []
        assert g.check_inverses() == []
