"""`GET /v1/changes/stream`: the change feed as Server-Sent Events, for browsers.

Each change is an event `change` whose data is the `Change` as JSON; the last event
of each page carries `id:` the page's next cursor, so a browser's EventSource that
reconnects sends it back as `Last-Event-ID` and resumes there (a page cut off midway
is sent again: at-least-once). Query parameters: `cursor`, `group` (start at its
committed cursor), `type` (repeatable), and `token` for an EventSource, which cannot
send an Authorization header (a token in a URL may land in proxies' logs: prefer the
header where the client can send one). An idle stream sends a comment every long poll.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..api.graph import Graph
from ..client.wire import error_body, status_of
from ..core.errors import AssocdbError
from ..core.records import ChangePage
from .auth import Tokens

WAIT = 15.0  # seconds each long poll of the stream waits: the keep-alive period
_encode = msgspec.json.Encoder().encode


def changes_stream(graph: Graph, tokens: Tokens) -> Callable[[Request], Awaitable[Response]]:
    """The route's endpoint for `graph`, authorized by `tokens` (the `read` scope)."""

    async def endpoint(request: Request) -> Response:
        params = request.query_params
        header = request.headers.get("authorization")
        if header is None and "token" in params:
            header = f"Bearer {params['token']}"
        cursor = request.headers.get("last-event-id") or params.get("cursor")
        types = params.getlist("type") or None
        try:
            tokens.authorize(header, "read")
            first = await _page(graph, cursor, types, params.get("group"), 0.0)
        except AssocdbError as exc:
            return Response(error_body(exc), status_of(exc), media_type="application/json")
        return StreamingResponse(_events(graph, first, types), media_type="text/event-stream")

    return endpoint


async def _page(
    graph: Graph, cursor: str | None, types: list[str] | None, group: str | None, wait: float
) -> ChangePage:
    return await anyio.to_thread.run_sync(
        lambda: graph.changes(cursor, types=types, group=group, wait=wait)
    )


async def _events(graph: Graph, page: ChangePage, types: list[str] | None) -> AsyncIterator[str]:
    while True:
        if not page.items:
            yield ": idle\n\n"
        for n, change in enumerate(page.items, 1):
            last = f"id: {page.next_cursor}\n" if n == len(page.items) else ""
            yield f"event: change\n{last}data: {_encode(change).decode()}\n\n"
        try:
            page = await _page(graph, page.next_cursor, types, None, WAIT)
        except AssocdbError as exc:  # e.g. the graph closed: say why, then end
            yield f"event: error\ndata: {error_body(exc).decode()}\n\n"
            return
