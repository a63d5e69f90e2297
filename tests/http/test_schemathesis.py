"""Schemathesis against /openapi.json: generated requests never get a 5xx or break the schema.

(Driven through schemathesis' Python API, one hypothesis run per operation:
its pytest plugin does not support pytest 9 yet.)
"""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings

import assocdb
from assocdb.client.wire import METHODS
from tests.http.test_server import make_graph
from tests.support.http_server import ADMIN, Server

EXAMPLES = 12  # per operation: a bounded run, ~40 operations

#: Indexes the generated requests name (a random name would only ever meet a 404).
INDEXES = ["by_email", "by_age"]
#: Methods whose `name` is replaced by a defined index (not drop_index: it would drop it).
NAMED = {"index_query", "index_status", "index_check", "index_build", "index_repair_recent"}


def set_up(directory: Path) -> None:
    """Timelines and indexes with data, so their routes get past 'not set up'."""
    with assocdb.open(directory) as g:
        g.define_timeline("follows", mode="hybrid", celebrity_threshold=1)
        g.define_index("by_email", "user", ["email"], shard_on="email")
        g.define_index("by_age", "user", ["age", "city"], order="recency")
        for n in range(1, 6):
            g.obj_add("user", {"email": f"u{n}@x", "age": n, "city": "c"})
            g.assoc_add(n, "follows", 1)
            g.post(1, 100 + n, n)
        g.index_build("by_email")
        assert g.drain(10)


# Every check but one: a schema-valid request may still be refused with a
# 4xx when it names a type that is not defined or an object that does not
# exist. What must never happen is a 5xx or an answer that breaks the schema.
EXCLUDED = [schemathesis.checks.positive_data_acceptance]


def test_the_api_honours_its_schema(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    make_graph(directory)
    set_up(directory)
    served = Server(directory)
    try:
        schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
        checked, problems = 0, []
        for result in schema.get_all_operations():
            operation = result.ok()
            if operation.path == "/metrics":
                continue

            @given(case=operation.as_strategy())
            @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
            def call(case: schemathesis.Case) -> None:
                name = case.operation.path.rsplit("/", 1)[-1]
                if name in NAMED and isinstance(case.body, dict):
                    case.body["name"] = INDEXES[len(str(case.body)) % len(INDEXES)]
                case.call_and_validate(
                    base_url=served.url,
                    headers={"Authorization": f"Bearer {ADMIN}"},
                    excluded_checks=EXCLUDED,
                )

            try:
                call()
            except Exception as exc:  # collect them all, then report
                problems.append(f"{operation.method.upper()} {operation.path}: {exc}")
            checked += 1
        assert checked == len(METHODS) + 3  # and /v1/batch, /healthz, /readyz
        assert problems == [], "\n\n".join(problems)
    finally:
        served.stop()
