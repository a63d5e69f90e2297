"""The OpenAPI 3.1 document and the docs page, generated from the method table."""

from __future__ import annotations

import html
from functools import cache
from typing import Any

import msgspec

from .. import __version__
from ..client.wire import METHODS, Batch, ErrorEnvelope, Method

_REF = "#/components/schemas/{name}"
STRING_IDS = (
    "Ids are 64-bit integers, beyond what JavaScript numbers hold exactly: send the "
    "header X-Assocdb-Ids: string (or ?ids=string) to get and give every id as a string."
)
#: The console's icon, named so that a browser does not ask for /favicon.ico.
ICON = '<link rel="icon" href="/admin/static/favicon.svg" type="image/svg+xml">'


@cache
def openapi(secured: bool) -> dict[str, Any]:
    """The OpenAPI document of the HTTP API."""
    results = {
        name: msgspec.defstruct(f"{_camel(name)}Result", [("result", m.result)])
        for name, m in METHODS.items()
    }
    batch_result = msgspec.defstruct("BatchResult", [("results", list[dict[str, Any]])])
    types = [
        *{m.args for m in METHODS.values()},
        *results.values(),
        Batch,
        batch_result,
        ErrorEnvelope,
    ]
    schemas, components = msgspec.json.schema_components(types, ref_template=_REF)
    refs = dict(zip(types, schemas, strict=True))
    error = {"description": "An error", "content": _json(refs[ErrorEnvelope])}
    paths: dict[str, Any] = {}
    for name, method in METHODS.items():
        paths[f"/v1/{name}"] = {
            "post": _operation(name, method, refs[method.args], refs[results[name]], error, secured)
        }
    paths["/v1/batch"] = {
        "post": {
            "operationId": "batch",
            "summary": (
                "Run many reads and writes in one request (the writes together, "
                "as Graph.batch()); each answers {result} or {error}."
            ),
            "requestBody": {"required": True, "content": _json(refs[Batch])},
            "responses": {
                "200": {
                    "description": "One answer per request",
                    "content": _json(refs[batch_result]),
                },
                "default": error,
            },
            **({"security": [{"bearer": []}]} if secured else {}),
        }
    }
    for path, text in (("/healthz", "The process is alive."), ("/readyz", "Every shard answers.")):
        paths[path] = {
            "get": {
                "operationId": path[1:],
                "summary": text,
                "responses": {"200": {"description": "ok"}, "503": {"description": "not ready"}},
            }
        }
    paths["/metrics"] = {
        "get": {
            "operationId": "metrics",
            "summary": "Prometheus metrics.",
            "responses": {
                "200": {
                    "description": "text exposition format",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "assocdb",
            "version": __version__,
            "description": "A graph store for social products. Every method is "
            "POST /v1/<method> with its arguments as a JSON object. " + STRING_IDS,
        },
        "paths": paths,
        "components": {"schemas": components},
    }
    if secured:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return document


def _default(field: msgspec.structs.FieldInfo) -> Any:
    """A field's default value (a mutable one is made by its factory: [] not NODEFAULT)."""
    if field.default is msgspec.NODEFAULT:
        return field.default_factory()
    return field.default


def docs_page() -> str:
    """A plain HTML page listing every method, its scope and arguments."""
    rows = []
    for name, method in METHODS.items():
        fields = []
        for field in msgspec.structs.fields(method.args):
            # as JSON (null, "out"), the language of the request body
            default = (
                "" if field.required else f" = {msgspec.json.encode(_default(field)).decode()}"
            )
            fields.append(f"{field.name}{default}")
        rows.append(
            f"<tr><td><code>POST /v1/{name}</code></td><td>{method.scope}</td>"
            f"<td><code>{html.escape(', '.join(fields))}</code></td></tr>"
        )
    return (
        "<!doctype html><title>assocdb API</title>" + ICON + "<h1>assocdb API</h1>"
        "<p>Each method takes its arguments as a JSON object and answers "
        '<code>{"result": …}</code> or <code>{"error": {"code", "message", "details"}}</code>. '
        "<code>POST /v1/batch</code> runs many reads and writes (the writes together): "
        '<code>{"requests": [{"method": "assoc_count", "args": {…}}, …]}</code>. '
        'The machine-readable description is <a href="/openapi.json">/openapi.json</a>. '
        + html.escape(STRING_IDS)
        + "</p>"
        "<table><tr><th>method</th><th>scope</th><th>arguments</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _operation(
    name: str, method: Method, args: Any, result: Any, error: Any, secured: bool
) -> dict[str, Any]:
    doc = (getattr(_graph_method(name), "__doc__", None) or "").strip().split("\n\n")[0]
    operation = {
        "operationId": name,
        "summary": " ".join(doc.split()) or name,
        "description": f"Scope: {method.scope}.",
        "requestBody": {"required": True, "content": _json(args)},
        "responses": {
            "200": {"description": "The result", "content": _json(result)},
            "default": error,
        },
    }
    if secured:
        operation["security"] = [{"bearer": []}]  # type: ignore[list-item]
    return operation


def _graph_method(name: str) -> Any:
    from ..api.graph import Graph

    return getattr(Graph, name, None)


def _json(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))
