"""The Graph API's core tests (`test_graph.py`), on a MySQL graph with MyRocks tables.

Skipped cleanly unless ASSOCDB_TEST_MYROCKS_URL names a server that loaded MyRocks.
"""

from __future__ import annotations

import pytest

from tests.api import test_graph

#: The tests, and the fixtures of that module they use.
globals().update(
    {k: v for k, v in vars(test_graph).items() if k.startswith("test_") or k == "timeline"}
)


@pytest.fixture
def backend_kind() -> str:
    """Every test of this module runs on MyRocks."""
    return "myrocks"
