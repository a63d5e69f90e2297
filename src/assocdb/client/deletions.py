"""`Client.deletions`: a remote graph's cascading deletions, as `Graph.deletions` has them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.deletion import DanglingReport, Deletion
from .wire import Args, CheckCounts, Drain, NoArgs, ObjId


class RemoteDeletions:
    """all, of_object, wait, purge, dangling over HTTP (`api.deletions.Deletions`
    documents each); pause, resume and the window are the server process's own."""

    def __init__(self, call: Callable[[str, Args], Any], budget: float) -> None:
        self._call = call
        self._budget = budget

    def all(self) -> list[Deletion]:
        result: list[Deletion] = self._call("deletions_all", NoArgs())
        return result

    def of_object(self, id: int) -> Deletion:
        result: Deletion = self._call("deletions_of_object", ObjId(id))
        return result

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no deletion runs on the server (each call waits at most half the
        client's timeout; called again until `timeout`)."""
        result: bool = self._call(
            "deletions_wait", Drain(self._budget if timeout is None else timeout)
        )
        return result

    def purge(self) -> list[Deletion]:
        result: list[Deletion] = self._call("deletions_purge", NoArgs())
        return result

    def dangling(self, repair: bool = False) -> DanglingReport:
        result: DanglingReport = self._call("deletions_dangling", CheckCounts(repair))
        return result
