"""The wire's method table (client/wire.py) is Graph's API, parameter for parameter.

The server calls `Graph.m(**args)` with the fields of `METHODS["m"].args`, and
the client builds those structs positionally from its own parameters, so each
struct must list the Graph method's parameters in order, with the same
defaults and (in their JSON form) the same types, and each declared result
must be the Graph method's return type. Whatever differs on purpose is listed
below with its reason. (That Client has Graph's signatures is
tests/http/test_server.py's test_client_and_graph_share_one_interface.)
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec
import pytest

from assocdb import Graph, Query
from assocdb.api.batch import READS, WRITES
from assocdb.api.deletions import Deletions
from assocdb.client.wire import (
    BATCH_WRITES,
    BATCHABLE,
    METHODS,
    Args,
    ListsSpec,
    QueryCount,
    QueryPage,
    QuerySpec,
    SchemaInfo,
    TermSpec,
)
from assocdb.core.schema import Schema

#: Methods on the wire that Graph has not: what they stand for there.
WIRE_ONLY: dict[str, tuple[Callable[..., Any], str]] = {
    "query_page": (Query.page, "g.select(…) builds a Query locally; its page() is this call"),
    "query_count": (Query.count, "a Query's count() is this call"),
}

#: Methods of a Graph's service (`g.deletions.all()`), on the wire as `<service>_<method>`.
SERVICES: dict[str, Callable[..., Any]] = {
    "deletions_all": Deletions.all,
    "deletions_of_object": Deletions.of_object,
    "deletions_purge": Deletions.purge,
    "deletions_wait": Deletions.wait,
    "deletions_dangling": Deletions.dangling,
}

#: Graph parameters that do not travel, and why.
NOT_SENT = {
    ("bulk_load", "workers"): "the server loads each request with one worker",
    ("bulk_load", "progress"): "a callback: the client reports progress per request itself",
}

#: Wire fields no Graph parameter has, and why.
WIRE_FIELDS = {
    ("bulk_load", "first"): "a named load is sent in parts: where this part starts in it",
    ("bulk_load", "last"): "a named load is sent in parts: whether this part ends it",
}

#: Graph methods with no wire method of their own, and why.
LOCAL = {
    "assoc_pages": "a loop over assoc_page",
    "assoc_iter": "a loop over assoc_page",
    "select": "builds a Query locally (sent as a TermSpec or ListsSpec by query_page/query_count)",
    "load_schema": "reads a local file, then sends define_* calls",
    "close": "closes what this process holds",
    "trace": "traces this process's SQL",
    "shards": "this process's view of the storage",
    "start_cleaner": "starts a thread in this process",
    "batch": "the Client's batch() sends its reads and writes in one request (/v1/batch)",
    "verify_replicas": "an operator's scan of every replica (`assocdb shards verify`)",
    "follow_changes": "a loop over changes (with its long-poll `wait`)",
}

#: Results the wire sends in another form, and why.
RESULT_AS = {
    "schema": (Schema, SchemaInfo, "a Schema is a lookup structure; its types travel as lists"),
}


class _Required:
    """The default of a parameter that has none."""

    def __repr__(self) -> str:
        return "<required>"


_REQUIRED = _Required()


def wire_type(hint: Any) -> Any:
    """What a Python annotation looks like on the wire: JSON has lists, not other
    sequences, a timedelta travels as seconds, and validation metadata (msgspec.Meta)
    does not change the type."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return wire_type(args[0])
    if origin in (Union, types.UnionType):
        return Union[tuple(wire_type(a) for a in args)]  # noqa: UP007 (built from a tuple)
    if origin in (Iterable, Sequence, list):
        return list[wire_type(args[0])]  # type: ignore[misc]
    if origin is not None and args and origin is not typing.Literal:
        return origin[tuple(wire_type(a) for a in args)]
    if hint is timedelta:  # sent as seconds (define_assoc's ttl)
        return float
    return type(None) if hint is None else hint


def wire_default(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """(name, default, type) of each parameter but self, as it would travel."""
    hints = typing.get_type_hints(function, include_extras=True)
    return [
        (
            p.name,
            _REQUIRED if p.default is p.empty else wire_default(p.default),
            wire_type(hints[p.name]),
        )
        for p in list(inspect.signature(function).parameters.values())[1:]
    ]


def fields(struct: type[msgspec.Struct]) -> list[tuple[str, Any, Any]]:
    """(name, default, type) of each field of an argument struct."""
    hints = typing.get_type_hints(struct, include_extras=True)
    out = []
    for f in msgspec.structs.fields(struct):
        assert f.encode_name == f.name, f"{struct.__name__}.{f.name} is renamed on the wire"
        if f.default is not msgspec.NODEFAULT:
            default = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            default = f.default_factory()
        else:
            default = _REQUIRED
        out.append((f.name, wire_default(default), wire_type(hints[f.name])))
    return out


def returns(function: Callable[..., Any]) -> Any:
    return wire_type(typing.get_type_hints(function)["return"])


def graph_methods() -> set[str]:
    return {n for n in dir(Graph) if not n.startswith("_")}


def test_every_graph_method_is_on_the_wire_or_listed_as_local() -> None:
    assert graph_methods() - set(METHODS) == set(LOCAL)
    assert set(METHODS) - graph_methods() == set(WIRE_ONLY) | set(SERVICES)


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_methods_are_the_service_method_parameters(name: str) -> None:
    assert fields(METHODS[name].args) == parameters(SERVICES[name])
    assert wire_type(METHODS[name].result) == returns(SERVICES[name])


ON_GRAPH = set(METHODS) - set(WIRE_ONLY) - set(RESULT_AS) - set(SERVICES)


@pytest.mark.parametrize("name", sorted(ON_GRAPH))
def test_args_are_the_graph_method_parameters(name: str) -> None:
    method = getattr(Graph, name)
    sent = [p for p in parameters(method) if (name, p[0]) not in NOT_SENT]
    assert [f for f in fields(METHODS[name].args) if (name, f[0]) not in WIRE_FIELDS] == sent


@pytest.mark.parametrize("name", sorted(ON_GRAPH))
def test_the_result_is_the_graph_method_return_type(name: str) -> None:
    assert wire_type(METHODS[name].result) == returns(getattr(Graph, name))


def test_what_is_not_sent_is_a_graph_parameter_with_a_default() -> None:
    for (name, parameter), _why in NOT_SENT.items():
        defaults = {p[0]: p[1] for p in parameters(getattr(Graph, name))}
        assert defaults[parameter] is not _REQUIRED, (name, parameter)
        assert parameter not in {f[0] for f in fields(METHODS[name].args)}


def test_query_methods_are_a_query_spec_and_the_query_method_parameters() -> None:
    for name, (method, _why) in WIRE_ONLY.items():
        args = fields(METHODS[name].args)
        assert args[0][0] == "query"
        assert args[1:] == parameters(method), name
        assert wire_type(METHODS[name].result) == returns(method), name
    assert (QueryPage, QueryCount) == (METHODS["query_page"].args, METHODS["query_count"].args)


def test_a_query_term_is_the_parameters_of_select() -> None:
    """A TermSpec is select of one node, a ListsSpec of many: ids or a query's."""
    (name, required, node), *rest = parameters(Graph.select)
    assert (name, node) == ("node", int | list[int] | Query)
    assert fields(TermSpec) == [(name, required, int), *rest]
    assert fields(ListsSpec) == [("nodes", required, list[int] | QuerySpec), *rest]


def test_schema_travels_as_its_lists_of_types() -> None:
    graph_type, wire, _why = RESULT_AS["schema"]
    assert isinstance(Graph.schema, property)
    assert returns(Graph.schema.fget) is graph_type
    assert METHODS["schema"].result is wire
    assert fields(METHODS["schema"].args) == []
    # Each field is one of Schema's lists, in the order Schema() takes them back.
    sent = {"assoc": Schema.assoc_types, "object": Schema.object_types, "index": Schema.indexes}
    assert [f.name for f in msgspec.structs.fields(wire)] == list(sent)
    hints = typing.get_type_hints(wire)
    for field, prop in sent.items():
        assert hints[field] == returns(prop.fget), field


def test_every_args_struct_rejects_unknown_fields() -> None:
    for m in METHODS.values():
        assert issubclass(m.args, Args)
        assert m.args.__struct_config__.forbid_unknown_fields, m.name


def test_a_graph_batch_runs_the_reads_a_client_batch_sends() -> None:

    sent = {name for name in BATCHABLE if not name.startswith("query_")} - {"schema"}
    assert sent - BATCH_WRITES == READS
    assert BATCH_WRITES == WRITES
