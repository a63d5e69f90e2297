"""`core.scans.normal_assocs`: a shard's list rows as records."""

from __future__ import annotations

from assocdb import Assoc
from assocdb.core.scans import normal_assocs


def test_records_keep_the_rows_order_and_decode_data() -> None:
    rows = [(3, 30, 300, b'{"a": [1, 2]}'), (2, 20, 200, None), (1, 10, 100, b'"x"')]
    assert normal_assocs(9, "likes", rows) == [
        Assoc(9, "likes", 3, 30, "normal", 300, {"a": [1, 2]}),
        Assoc(9, "likes", 2, 20, "normal", 200, None),
        Assoc(9, "likes", 1, 10, "normal", 100, "x"),
    ]
    assert normal_assocs(9, "likes", []) == []
