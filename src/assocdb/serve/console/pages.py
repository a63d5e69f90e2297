"""The console's routes: one handler per page or action, each a few lines.

Every route first finds who asks (`_who`: a session cookie, or an admin
bearer token for scripts) and answers 401 (with the login form) or 403
without the admin scope. Pages are rendered by Jinja2 with autoescaping on,
so object data (user input) is shown as text. Actions are POSTs that carry
the session's CSRF token (bearer callers need none: a browser never sends
that header across sites) and go through a confirm page unless the form
says `confirm=yes`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import anyio
import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ...api.graph import Graph
from ...api.shard_admin import ShardAdmin
from ...client.wire import status_of
from ...core.errors import AssocdbError, InvalidRequest, PermissionDenied, Unauthenticated
from ...core.ids import shard_of
from ...core.records import STATE_NAMES, Obj
from ..auth import Tokens
from ..metrics import Metrics
from .live import Live, chart, span
from .session import COOKIE, MAX_AGE, Session, Sessions

MAX_FORM = 64 << 10  # bytes of a form
PAGE = 50  # items per page of a list
HOT = 50  # hot keys shown

#: Headers of every console answer: no caching, no framing, only our own scripts.
HEADERS = {
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # no-referrer would make a browser send `Origin: null`
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}
STATIC = {
    "console.css": "text/css",
    "console.js": "text/javascript",
    "favicon.svg": "image/svg+xml",
}


class Console:
    """The /admin pages over one Graph."""

    def __init__(
        self,
        graph: Graph,
        tokens: Tokens,
        metrics: Metrics,
        key: bytes | None = None,
        revoked: Path | None = None,
    ) -> None:
        """`key` signs the session cookies and `revoked` holds logged-out sessions
        (`session.Revoked`): both shared by the workers of one server."""
        self.graph = graph
        self.tokens = tokens
        self.sessions = Sessions(tokens, key, revoked)
        self.live = Live(graph, metrics)
        self.shards = ShardAdmin(graph.engine)
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("assocdb.serve.console", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["pretty"] = _pretty
        self.templates.filters["ago"] = _ago
        self.templates.filters["utc_ms"] = _utc_ms
        self.templates.filters["utc_us"] = _utc_us
        files = resources.files("assocdb.serve.console") / "static"
        self.static = {name: (files / name).read_bytes() for name in STATIC}

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/admin", self.overview, methods=["GET"]),
            Route("/admin/live", self.live_part, methods=["GET"]),
            Route("/admin/login", self.login_form, methods=["GET"]),
            Route("/admin/login", self.login, methods=["POST"]),
            Route("/admin/logout", self.logout, methods=["POST"]),
            Route("/admin/shards", self.shards_page, methods=["GET"]),
            Route("/admin/shards", self.shards_action, methods=["POST"]),
            Route("/admin/queue", self.queue_page, methods=["GET"]),
            Route("/admin/queue", self.queue_action, methods=["POST"]),
            Route("/admin/hot", self.hot_page, methods=["GET"]),
            Route("/admin/deletions", self.deletions_page, methods=["GET"]),
            Route("/admin/explore", self.explore_page, methods=["GET"]),
            Route("/admin/explore/list", self.list_page, methods=["GET"]),
            Route("/admin/explore/sets", self.sets_page, methods=["GET"]),
            Route("/admin/static/{name}", self.static_file, methods=["GET"]),
            # Asked for by browsers on every site, without credentials: never a 401.
            Route("/favicon.ico", self.favicon, methods=["GET"]),
        ]

    def close(self) -> None:
        self.live.close()

    # -- who asks ---------------------------------------------------------------------

    def _who(self, request: Request) -> tuple[Session, str | None]:
        """The caller's session, and a new cookie to set (an open server's first visit)."""
        header = request.headers.get("authorization")
        if header is not None:
            return Session(self.tokens.authorize(header, "admin") or "open", ""), None
        cookie = request.cookies.get(COOKIE)
        if not self.tokens.enabled:  # an open server: everyone is admin, forms still need CSRF
            try:
                return self.sessions.check(cookie), None
            except Unauthenticated:
                fresh = self.sessions.login("")
                return self.sessions.check(fresh), fresh
        return self.sessions.check(cookie), None

    # -- pages ------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        return await self._page(request, "overview.html", self._overview)

    async def live_part(self, request: Request) -> Response:
        return await self._page(request, "live.html", self._overview)

    def _overview(self, request: Request) -> dict[str, Any]:
        self.live.viewed()
        self.live.start()
        if not self.live.samples:
            self.live.sample()
        samples = list(self.live.samples)
        view = self.shards.view()
        series: dict[str, list[float | None]] = {
            "reads/s": [s.reads for s in samples],
            "writes/s": [s.writes for s in samples],
            "queue depth": [float(s.depth) for s in samples],
            "cache hit %": [None if s.hit_rate is None else s.hit_rate * 100 for s in samples],
        }
        return {
            "title": "Overview",
            "view": view,
            "name": view.where.rstrip("/").rpartition("/")[2] or view.where,
            "now": samples[-1] if samples else None,
            "charts": {label: chart(values) for label, values in series.items()},
            "span": span(samples),
            "every": self.live.every,
            "latencies": self.live.latencies(),
            "totals": self.live.totals,
            "problem": self.live.problem,
            "cache": self.graph.cache_stats(),
            "queue": self.graph.queue_stats(),
        }

    async def shards_page(self, request: Request) -> Response:
        return await self._page(request, "shards.html", self._shards)

    def _shards(self, request: Request) -> dict[str, Any]:
        return {"title": "Shards", "view": self.shards.view(), "note": _note(request)}

    async def queue_page(self, request: Request) -> Response:
        return await self._page(request, "queue.html", self._queue)

    def _queue(self, request: Request) -> dict[str, Any]:
        g = self.graph
        return {
            "title": "Queue",
            "stats": g.queue_stats(),
            "errors": g.queue_jobs("error", limit=100),
            "bad": g.queue_jobs("bad", limit=100),
            "note": _note(request),
            "now": time.time(),
        }

    async def hot_page(self, request: Request) -> Response:
        return await self._page(request, "hot.html", self._hot)

    def _hot(self, request: Request) -> dict[str, Any]:
        cache = self.graph.engine.cache
        names = {t.id: t.name for t in self.graph.schema.assoc_types}
        rows = []
        for key in self.graph.hot_keys(HOT):
            parts = (key.kind, key.id) if key.atype is None else (key.kind, key.id, key.atype)
            cached = cache is not None and cache.holds(parts)
            atype = None if key.atype is None else names.get(key.atype, str(key.atype))
            rows.append({"key": key, "atype": atype, "cached": cached})
        return {"title": "Hot keys", "rows": rows, "cached": cache is not None}

    async def deletions_page(self, request: Request) -> Response:
        return await self._page(request, "deletions.html", self._deletions)

    def _deletions(self, request: Request) -> dict[str, Any]:
        every = self.graph.deletions.all()
        kinds = {"running": "Running", "restorable": "Restorable", "past": "Past"}
        now = time.time()
        groups: dict[str, list[Any]] = {kind: [] for kind in kinds}
        for d in reversed(every):  # newest first
            restorable = d.status == "done" and now <= d.restorable_until
            kind = "running" if d.status == "running" else "restorable" if restorable else "past"
            groups[kind].append(d)
        return {"title": "Deletions", "groups": groups, "kinds": kinds, "now": now}

    async def explore_page(self, request: Request) -> Response:
        return await self._page(request, "explore.html", self._explore)

    def _explore(self, request: Request) -> dict[str, Any]:
        context: dict[str, Any] = {"title": "Explorer", "id": None, "obj": None, "lists": []}
        context["types"] = [t.name for t in self.graph.schema.assoc_types]
        raw = request.query_params.get("id", "").strip()
        if not raw:
            return context
        node = _int(raw, "id")
        context["id"] = node
        context["obj"] = self.graph.obj_get(node)
        context["shard"] = shard_of(node, self.graph.shards)
        context["shards"] = self.graph.shards
        for atype in context["types"]:
            counts = {s: self.graph.assoc_count(node, atype, s) for s in STATE_NAMES}
            if any(counts.values()):
                context["lists"].append((atype, counts))
        return context

    async def list_page(self, request: Request) -> Response:
        return await self._page(request, "list.html", self._list)

    def _list(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        node, atype = _int(q.get("id", ""), "id"), q.get("atype", "")
        state = q.get("state", "normal")
        if state not in STATE_NAMES:
            raise InvalidRequest(f"state must be one of {', '.join(STATE_NAMES)}, got {state!r}")
        cursor = q.get("cursor") or None
        if state == "normal":  # the API's page: edges with their time and data
            page: Any = self.graph.assoc_page(node, atype, cursor, PAGE)
        else:
            page = self.graph.select(node, atype, states=[state]).page(cursor, PAGE)
        here = {"id": node, "atype": atype, "state": state}
        ids = [a.id2 for a in page.items] if state == "normal" else page.items
        return {
            "names": self._names(ids),
            "title": f"{node} {atype} ({state})",
            "here": here,
            "count": self.graph.assoc_count(node, atype, state),
            "page": page,
            "edges": state == "normal",
            "next": _link("/admin/explore/list", here, page.next_cursor),
            "prev": _link("/admin/explore/list", here, page.prev_cursor),
        }

    async def sets_page(self, request: Request) -> Response:
        return await self._page(request, "sets.html", self._sets)

    def _sets(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        form = {k: q.get(k, "") for k in ("a", "a_type", "op", "b", "b_type")}
        context: dict[str, Any] = {"title": "Set query", "form": form, "page": None}
        context["types"] = [t.name for t in self.graph.schema.assoc_types]
        if not form["a"] or not form["b"]:
            return context
        left = self.graph.select(_int(form["a"], "a"), form["a_type"])
        right = self.graph.select(_int(form["b"], "b"), form["b_type"])
        if form["op"] not in ("intersect", "difference"):
            raise InvalidRequest("op must be intersect or difference")
        query = left.intersect(right) if form["op"] == "intersect" else left.difference(right)
        page = query.page(q.get("cursor") or None, PAGE)
        context.update(page=page, count=query.count(), names=self._names(page.items))
        context["next"] = _link("/admin/explore/sets", form, page.next_cursor)
        context["prev"] = _link("/admin/explore/sets", form, page.prev_cursor)
        return context

    def _names(self, ids: list[int]) -> dict[int, str]:
        """What each id is, for a list of ids: its object's type and name-like field
        ("user · ada"); ids without an object are left out."""
        names = {}
        for id in ids:
            obj = self.graph.obj_get(id)
            if obj is not None:
                names[id] = _describe(obj)
        return names

    # -- actions ----------------------------------------------------------------------

    async def shards_action(self, request: Request) -> Response:
        actions: dict[str, tuple[str, Callable[[dict[str, str]], None]]] = {
            "mark-down": ("Mark {backend} down (drain it)", self._mark(True)),
            "mark-up": ("Mark {backend} up", self._mark(False)),
            "set-weight": ("Set {backend}'s weight to {weight} on shards {shards}", self._weigh),
        }
        return await self._act(request, "/admin/shards", actions)

    def _mark(self, down: bool) -> Callable[[dict[str, str]], None]:
        return lambda form: self.shards.mark(form.get("backend", ""), down)

    def _weigh(self, form: dict[str, str]) -> None:
        weight = _int(form.get("weight", ""), "weight", low=0)
        self.shards.set_weight(form.get("shards", ""), form.get("backend", ""), weight)

    async def queue_action(self, request: Request) -> Response:
        actions: dict[str, tuple[str, Callable[[dict[str, str]], None]]] = {
            "retry": ("Retry every job of the error queue now", self._retry),
            "reinject": ("Reinject bad job {job} into the error queue", self._reinject),
            "reinject-all": ("Reinject every bad job into the error queue", self._reinject_all),
        }
        return await self._act(request, "/admin/queue", actions)

    def _retry(self, form: dict[str, str]) -> None:
        self.graph.queue_retry()

    def _reinject(self, form: dict[str, str]) -> None:
        self.graph.queue_reinject([_int(form.get("job", ""), "job")])

    def _reinject_all(self, form: dict[str, str]) -> None:
        self.graph.queue_reinject()

    async def _act(
        self,
        request: Request,
        back: str,
        actions: dict[str, tuple[str, Callable[[dict[str, str]], None]]],
    ) -> Response:
        try:
            session, _ = self._who(request)
        except AssocdbError as exc:
            return self._failure(request, exc)
        try:
            form = await _form(request)
            if session.nonce:  # a browser's session (a bearer caller needs no CSRF token)
                self.sessions.check_csrf(session, form.get("csrf"))
            action = form.get("action", "")
            if action not in actions:
                raise InvalidRequest(f"unknown action {action!r}")
            what = actions[action][0].format_map(_Blank(form))
            if form.get("confirm") != "yes":
                fields = {k: v for k, v in form.items() if k not in ("csrf", "confirm")}
                context = {"title": "Confirm", "what": what, "fields": fields, "back": back}
                return self._render(request, "confirm.html", context, session)
            await anyio.to_thread.run_sync(actions[action][1], form)
        except AssocdbError as exc:
            return self._failure(request, exc, session)
        return RedirectResponse(f"{back}?{urlencode({'note': f'done: {what}'})}", 303, HEADERS)

    # -- login ------------------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        return self._login_page(request, None, 200)

    async def login(self, request: Request) -> Response:
        try:
            form = await _form(request)
            cookie = self.sessions.login(form.get("token", ""))
        except AssocdbError as exc:
            return self._login_page(request, exc.message, status_of(exc))
        response = RedirectResponse(_next(form.get("next")), 303, HEADERS)
        _set_cookie(response, cookie)
        return response

    async def logout(self, request: Request) -> Response:
        try:
            session, _ = self._who(request)
            self.sessions.check_csrf(session, (await _form(request)).get("csrf"))
            self.sessions.logout(session)
        except AssocdbError as exc:
            return self._failure(request, exc)
        response = RedirectResponse("/admin/login", 303, HEADERS)
        response.delete_cookie(COOKIE, path="/admin", httponly=True, samesite="strict")
        return response

    async def static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.static:
            return Response(b"not found", 404, media_type="text/plain")
        headers = {**HEADERS, "cache-control": "max-age=300"}
        return Response(self.static[name], media_type=STATIC[name], headers=headers)

    async def favicon(self, request: Request) -> Response:
        headers = {**HEADERS, "cache-control": "max-age=86400"}
        return Response(
            self.static["favicon.svg"], media_type=STATIC["favicon.svg"], headers=headers
        )

    # -- rendering --------------------------------------------------------------------

    async def _page(
        self, request: Request, template: str, build: Callable[[Request], dict[str, Any]]
    ) -> Response:
        try:
            session, fresh = self._who(request)
        except AssocdbError as exc:
            return self._failure(request, exc)
        try:
            context = await anyio.to_thread.run_sync(build, request)
        except AssocdbError as exc:  # bad input or a shard down: said on a page with the menu
            return self._failure(request, exc, session)
        response = self._render(request, template, context, session)
        if fresh is not None:
            _set_cookie(response, fresh)
        return response

    def _render(
        self, request: Request, template: str, context: dict[str, Any], session: Session
    ) -> HTMLResponse:
        csrf = self.sessions.csrf(session) if session.nonce else ""
        page = self.templates.get_template(template).render(
            path=request.url.path, csrf=csrf, who=session.name, **context
        )
        return HTMLResponse(page, headers=HEADERS)

    def _failure(
        self, request: Request, exc: AssocdbError, session: Session | None = None
    ) -> Response:
        """The error as a page: the login form for a 401; the menu only for an admin."""
        status = status_of(exc)
        if isinstance(exc, Unauthenticated):
            # A first visit (no cookie, no token) has done nothing wrong: the form says
            # what to do. A cookie or token that failed says why.
            tried = COOKIE in request.cookies or "authorization" in request.headers
            if not tried and "text/html" in request.headers.get("accept", ""):
                # A browser's first visit: to the form, with a 303 (a 401 answer is an
                # error in the browser's console); scripts get the 401 with the form.
                here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/admin/login?{urlencode({'next': here})}", 303, HEADERS)
            return self._login_page(request, exc.message if tried else None, status)
        csrf = self.sessions.csrf(session) if session is not None and session.nonce else ""
        page = self.templates.get_template("error.html").render(
            path=request.url.path,
            who="" if session is None else session.name,
            csrf=csrf,
            title="Error",
            message=exc.message,
            status=status,
        )
        return HTMLResponse(page, status, headers=HEADERS)

    def _login_page(self, request: Request, message: str | None, status: int) -> Response:
        page = self.templates.get_template("login.html").render(
            path=request.url.path,
            title="Log in",
            message=message,
            csrf="",
            who="",
            next=_next(request.query_params.get("next")),
        )
        return HTMLResponse(page, status, headers=HEADERS)


class _Blank(dict[str, str]):
    """A form for `str.format_map`: a missing field reads as '?'."""

    def __missing__(self, key: str) -> str:
        return "?"


async def _form(request: Request) -> dict[str, str]:
    """The url-encoded form of a POST (the last value of each field), at most MAX_FORM bytes.

    A browser's POST from another site's page is refused by its `Origin` (besides the
    CSRF token and the SameSite cookie): it guards the login form too, which has no
    session yet.
    """
    origin = request.headers.get("origin")
    if origin is not None and origin.split("://", 1)[-1] != request.headers.get("host"):
        raise PermissionDenied(f"a form posted from {origin} is not ours")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            raise InvalidRequest(f"the form is over {MAX_FORM:,} bytes")
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=100)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("the form is not url-encoded UTF-8 text") from None
    return {k: v[-1] for k, v in fields.items()}


def _set_cookie(response: Response, value: str) -> None:
    response.set_cookie(
        COOKIE, value, max_age=MAX_AGE, path="/admin", httponly=True, samesite="strict"
    )


def _int(text: str, what: str, low: int = 1) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidRequest(f"{what} must be a whole number, got {text!r}") from None
    if value < low:
        raise InvalidRequest(f"{what} must be at least {low}, got {value}")
    return value


def _next(asked: str | None) -> str:
    """Where to go after logging in: a console page, never another site."""
    if asked and asked.startswith("/admin") and not asked.startswith("/admin/login"):
        return asked
    return "/admin"


def _note(request: Request) -> str | None:
    return request.query_params.get("note")


def _link(path: str, params: dict[str, Any], cursor: str | None) -> str | None:
    return None if cursor is None else f"{path}?{urlencode({**params, 'cursor': cursor})}"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


#: Fields that name an object, the first one present shown beside its id.
NAME_FIELDS = ("name", "title", "username", "handle", "text")


def _describe(obj: Obj) -> str:
    """An object in a few words: its type, and its name if its data has one."""
    for field in NAME_FIELDS:
        value = obj.data.get(field)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            text = str(value)
            return f"{obj.otype} · {text[:60]}{'…' if len(text) > 60 else ''}"
    return obj.otype


def _utc(seconds: float, digits: int) -> str:
    """A time as ISO 8601 UTC ("2026-11-28 14:35:26.123 UTC")."""
    moment = datetime.fromtimestamp(seconds, UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if digits:
        text += f".{moment.microsecond:06d}"[: digits + 1]
    return text + " UTC"


#: An edge's time is a sort key, epoch ms by default but any integer a client gives:
#: shown as a date only within these years (2000 to 2200), else as the number it is.
_PLAUSIBLE_MS = (946_684_800_000, 7_258_118_400_000)


def _utc_ms(ms: int) -> str:
    """An edge's time (epoch ms, by default) as a UTC time, or the number if not one."""
    if not _PLAUSIBLE_MS[0] <= ms < _PLAUSIBLE_MS[1]:
        return str(ms)
    return _utc(ms / 1000, 3)


def _utc_us(us: int) -> str:
    """An `updated_at` (µs since the epoch, a hybrid logical clock) as a UTC time."""
    return _utc(us / 1_000_000, 6)


def _ago(at: float) -> str:
    seconds = time.time() - at
    if seconds < 0:
        return f"in {-seconds:.0f} s"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago" if seconds < 7200 else f"{seconds / 3600:.1f} h ago"
