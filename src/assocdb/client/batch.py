"""`Client.batch()`: calls collected and sent as one `POST /v1/batch`, and the check every
request's arguments pass before they are sent (moved from client.py, not changed)."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec

from ..core.json import check as check_json
from ..core.records import Deferred
from .wire import BATCHABLE, METHODS, Args, ErrorBody, error_from

if TYPE_CHECKING:
    from .client import Client


class Batch:
    """Calls collected and sent as one `POST /v1/batch` when the `with` block ends.

    Every read method of the Graph API is here, and the writes of `Graph.batch()`
    (assoc_add, assoc_delete, assoc_archive, assoc_negate, assoc_change_type,
    obj_add, obj_update, obj_delete), each returning a Deferred. A batch with
    writes needs a token with the write scope.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._items: list[tuple[str, Args, Deferred[Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., Deferred[Any]]:
        if name not in BATCHABLE or name.startswith("query_"):
            raise AttributeError(
                f"a batch runs the reads and writes of Graph.batch(); {name!r} is not one"
            )
        args_type = METHODS[name].args

        def queue(*args: Any, **kwargs: Any) -> Deferred[Any]:
            deferred: Deferred[Any] = Deferred(name)
            self._items.append((name, checked(name, args_type(*args, **kwargs)), deferred))
            return deferred

        return queue

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.run()

    def run(self) -> None:
        """Send the queued calls (at most 200) and fill in their results."""
        requests = [
            {"method": name, "args": msgspec.to_builtins(args)} for name, args, _ in self._items
        ]
        answers = self._client._call_batch(requests)
        for (name, _, deferred), answer in zip(self._items, answers, strict=True):
            if "error" in answer:
                deferred.settle(error=error_from(msgspec.convert(answer["error"], ErrorBody)))
            else:
                deferred.settle(msgspec.convert(answer["result"], METHODS[name].result))
        self._items = []


def checked(name: str, args: Args) -> Args:
    """`args`, or InvalidRequest for a value JSON would change on the way (NaN and
    infinity become null, a set a list, bytes base64 text, a key 1 the key "1"),
    as `Graph` refuses them; queries are Structs of checked types."""
    for field, value in zip(args.__struct_fields__, msgspec.structs.astuple(args), strict=True):
        if not isinstance(value, msgspec.Struct):
            check_json(value, f"{name}: {field}")
    return args
