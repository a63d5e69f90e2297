"""A backup's manifest (`core/backupmanifest.py`): a manifest that decodes but does not
add up is refused as damaged, before a reader copies or opens anything it names."""

from __future__ import annotations

import pytest

from assocdb.core import backupmanifest as mf
from assocdb.core.errors import InvalidRequest


def manifest(**changed: object) -> mf.Manifest:
    fields: dict[str, object] = {
        "format": mf.FORMAT,
        "source": {"kind": "sqlite", "path": "g", "shards": 2},
        "shards": 2,
        "cut_began": 1,
        "cut_at": 2,
        "positions": [None, None],
        "held": 0.0,
        "replayed": 0,
        "caught_up": 0,
        "edges": 0,
        "created_at": 3,
        "files": {"shard-0000.db": mf.FileSum(10, "ab"), "journal.db": mf.FileSum(5, "cd")},
    }
    fields.update(changed)
    return mf.Manifest(**fields)  # type: ignore[arg-type]


def test_a_sound_manifest_round_trips() -> None:
    sound = manifest()
    assert mf.decode(mf.encode(sound), "m") == sound


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        ({"shards": 0, "positions": []}, "0 shards"),
        ({"shards": -1}, "-1 shards"),
        ({"positions": [None]}, "1 feed positions for 2 shards"),
        ({"files": {"../../etc/passwd": mf.FileSum(1, "x")}}, "not one of a backup's"),
        ({"files": {"/tmp/x.db": mf.FileSum(1, "x")}}, "not one of a backup's"),
        ({"files": {"shard-0002.db": mf.FileSum(1, "x")}}, "not one of a backup's"),
        ({"files": {"manifest.json": mf.FileSum(1, "x")}}, "not one of a backup's"),
        ({"files": {"shard-0001.db": mf.FileSum(-1, "x")}}, "negative size"),
    ],
)
def test_a_manifest_that_does_not_add_up_is_damaged(wrong: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequest, match=rf"m is damaged: .*{message}.*\(corrupt backup\)"):
        mf.decode(mf.encode(manifest(**wrong)), "m")
