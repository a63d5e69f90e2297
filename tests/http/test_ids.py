"""Ids as strings on the wire (`serve/ids.py`): which fields, which requests."""

from __future__ import annotations

import msgspec
from starlette.datastructures import Headers

from assocdb.serve.ids import format_ids, parse_ids, wants_strings

BIG = 2**63 - 1


def test_answers_carry_every_id_as_a_string_and_nothing_else() -> None:
    answer = {
        "result": {
            "items": [{"id1": BIG, "id2": 2, "time": 5, "atype": "follows", "data": {"id": 7}}],
            "next_cursor": None,
        }
    }
    got = msgspec.json.decode(format_ids(msgspec.json.encode(answer)))
    [edge] = got["result"]["items"]
    assert (edge["id1"], edge["id2"], edge["time"]) == (str(BIG), "2", 5)
    assert edge["data"] == {"id": 7}  # the user's JSON is the user's
    ids = {"result": {"ids": [1, BIG], "user": 3, "node": 4, "item": 5, "author": 6}}
    assert msgspec.json.decode(format_ids(msgspec.json.encode(ids))) == {
        "result": {"ids": ["1", str(BIG)], "user": "3", "node": "4", "item": "5", "author": "6"}
    }


def test_requests_may_send_ids_as_strings() -> None:
    body = b'{"id1": "9223372036854775807", "id2s": ["1", 2], "limit": "5", "data": {"id": "x"}}'
    assert msgspec.json.decode(parse_ids(body)) == {
        "id1": BIG,
        "id2s": [1, 2],
        "limit": "5",  # not an id: the decoder's to refuse
        "data": {"id": "x"},
    }
    query = b'{"query": {"type": "term", "node": "12", "atype": "f"}, "id": "not a number"}'
    assert msgspec.json.decode(parse_ids(query)) == {
        "query": {"type": "term", "node": 12, "atype": "f"},
        "id": "not a number",
    }
    assert parse_ids(b"{not json") == b"{not json"


def test_asked_by_header_or_query() -> None:
    assert wants_strings(Headers({"X-Assocdb-Ids": "string"}), "")
    assert wants_strings(Headers({}), "a=1&ids=string")
    assert not wants_strings(Headers({}), "")
    assert not wants_strings(Headers({"X-Assocdb-Ids": "number"}), "ids=number")
