from __future__ import annotations

import pytest

from assocdb import DataTooLarge, InvalidRequest
from assocdb.core.json import decode, encode


def test_round_trip() -> None:
    value = {"a": [1, 2.5, "x", None, True, {"b": []}], "big": 2**70}
    assert decode(encode(value, 1000, "data")) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "NaN"),
        ({"x": [1, float("inf")]}, r"data\['x'\]\[1\]"),
        ({1: "a"}, "keys are strings"),
        ({"a": {2: 3}}, "keys are strings"),
        ({"s": {1, 2}}, r"data\['s'\] is a set"),
        (object(), "is a object"),
        ([b"raw"], r"data\[0\] is a bytes"),
    ],
)
def test_values_json_cannot_hold_are_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        encode(value, 1000, "data")


def test_deep_nesting_is_refused() -> None:
    value: object = []
    for _ in range(100):
        value = [value]
    with pytest.raises(InvalidRequest, match="nested"):
        encode(value, 10_000, "data")


def test_size_limit_counts_encoded_bytes() -> None:
    assert encode("x" * 8, 10, "data") == b'"xxxxxxxx"'
    with pytest.raises(DataTooLarge, match="11 bytes as JSON; the limit is 10"):
        encode("x" * 9, 10, "data")
