"""Schemathesis against /openapi.json: generated requests never get a 5xx or break the schema.

(Driven through schemathesis' Python API, one hypothesis run per operation:
its pytest plugin does not support pytest 9 yet.)
"""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings

from assocdb._wire import METHODS

from .http_server import ADMIN, Server
from .test_server import make_graph

EXAMPLES = 12  # per operation: a bounded run, ~40 operations

# Every check but one: a schema-valid request may still be refused with a
# 4xx when it names a type that is not defined or an object that does not
# exist. What must never happen is a 5xx or an answer that breaks the schema.
EXCLUDED = [schemathesis.checks.positive_data_acceptance]


def test_the_api_honours_its_schema(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    make_graph(directory)
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
