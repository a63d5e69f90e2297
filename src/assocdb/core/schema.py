"""The schema: association types (with inverses and limits) and object types.

A Schema is immutable; `define_assoc` and `define_object` return a new one or
raise SchemaError. Rows store small integer type ids, not names, so a schema
is persisted with the data (as JSON, by the backend) and ids never change.
Defining what is already defined is a no-op, so the same TOML file can be
applied at every start:

    [assoc.follows]
    inverse = "followed_by"    # writing follows(a, b) also writes followed_by(b, a)
    limit = 6000               # the most items one query returns (default 6000)

    [assoc.seen]
    ttl = 86400                # seconds: an edge expires `ttl` after its time (`core.ttl`)

    [assoc.friend]
    symmetric = true           # friend(a, b) also writes friend(b, a)
    on_delete = "shallow"      # deleting a: its edges go (see `core.deletion`)

    [object.user]

    [object.comment]
    owned = true               # must hang off a live deep/refcount edge (check --dangling)

    [index.user_by_email]      # a secondary index (`core.entities`), built by the cleaner
    otype = "user"
    properties = ["email"]
    shard_on = "email"         # also: order = "recency" or a property, unique = true
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import msgspec

from .errors import NotFound, SchemaError, UnknownType
from .ttl import check_ttl

DEFAULT_LIMIT = 6000
MAX_LIMIT = 1_000_000
#: DELF's deletion semantics of an association type, for `obj_delete(cascade=True)` of id1.
OnDelete = Literal["shallow", "deep", "refcount"]
ON_DELETE: tuple[OnDelete, ...] = ("shallow", "deep", "refcount")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}\Z")


class AssocType(msgspec.Struct, frozen=True):
    """An association type. `inverse` names the type written the other way."""

    name: str
    id: int
    inverse: str | None = None
    symmetric: bool = False
    limit: int = DEFAULT_LIMIT
    ttl: float | None = None  # seconds: edges expire that long after their time (`core.ttl`)
    #: What deleting `id1` with a cascade does (`core.deletion`): None is undeclared.
    on_delete: OnDelete | None = None


class ObjectType(msgspec.Struct, frozen=True):
    """An object type."""

    name: str
    id: int
    #: An owned object must hang off a live deep or refcount edge (`check --dangling`).
    owned: bool = False


IndexState = Literal["building", "ready"]
RECENCY = "recency"
MAX_INDEX_PROPERTIES = 8


class IndexDef(msgspec.Struct, frozen=True):
    """A secondary index on objects of one type (FriendFeed style).

    Its key is the values of `properties`, in order, then (with `order`) the
    object's `updated_at` ("recency") or one more property; entries are
    placed on a shard by the value of `shard_on` (one of `properties`), or
    on the object's own shard when `shard_on` is None. `state` is "building"
    until the cleaner has covered every object that existed when it was
    defined (see `core.entities`).
    """

    name: str
    id: int
    otype: int
    properties: list[str]
    order: str | None = None
    unique: bool = False
    shard_on: str | None = None
    state: IndexState = "building"

    @property
    def recency(self) -> bool:
        return self.order == RECENCY

    @property
    def key_properties(self) -> list[str]:
        """The properties that make up the key, in order (recency excluded)."""
        if self.order is None or self.recency:
            return self.properties
        return [*self.properties, self.order]


class _Stored(msgspec.Struct):
    assoc: list[AssocType]
    object: list[ObjectType]
    index: list[IndexDef] = []
    index_seq: int = 0  # the last index id handed out: ids of dropped indexes are never reused


class Schema:
    """The defined types, looked up by name or by stored id."""

    def __init__(
        self,
        assoc: Iterable[AssocType] = (),
        objects: Iterable[ObjectType] = (),
        indexes: Iterable[IndexDef] = (),
        index_seq: int = 0,
    ) -> None:
        self._assoc = {t.name: t for t in assoc}
        self._assoc_ids = {t.id: t for t in self._assoc.values()}
        self._objects = {t.name: t for t in objects}
        self._object_ids = {t.id: t for t in self._objects.values()}
        self._indexes = {i.name: i for i in indexes}
        self._index_seq = index_seq
        self._by_otype: dict[int, list[IndexDef]] = {}
        for index in sorted(self._indexes.values(), key=lambda i: i.id):
            self._by_otype.setdefault(index.otype, []).append(index)

    # -- lookups --------------------------------------------------------------

    def assoc_type(self, name: object) -> AssocType:
        """The association type called `name`, or UnknownType."""
        found = self._assoc.get(name) if isinstance(name, str) else None
        if found is None:
            raise _unknown("association", name, self._assoc)
        return found

    def assoc_by_name(self, name: object) -> AssocType | None:
        """The association type called `name`, or None."""
        return self._assoc.get(name) if isinstance(name, str) else None

    def assoc_by_id(self, id: int) -> AssocType:
        return self._assoc_ids[id]

    def inverse(self, atype: AssocType) -> AssocType | None:
        """The type written in the other direction, if any (itself if symmetric)."""
        if atype.symmetric:
            return atype
        return self._assoc[atype.inverse] if atype.inverse else None

    def object_type(self, name: object) -> ObjectType:
        """The object type called `name`, or UnknownType."""
        found = self._objects.get(name) if isinstance(name, str) else None
        if found is None:
            raise _unknown("object", name, self._objects)
        return found

    def object_by_id(self, id: int) -> ObjectType:
        return self._object_ids[id]

    @property
    def assoc_types(self) -> list[AssocType]:
        return sorted(self._assoc.values(), key=lambda t: t.id)

    @property
    def object_types(self) -> list[ObjectType]:
        return sorted(self._objects.values(), key=lambda t: t.id)

    @property
    def indexes(self) -> list[IndexDef]:
        return sorted(self._indexes.values(), key=lambda i: i.id)

    def index(self, name: object) -> IndexDef:
        """The index called `name`, or NotFound."""
        found = self._indexes.get(name) if isinstance(name, str) else None
        if found is None:
            close = difflib.get_close_matches(str(name), list(self._indexes), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "; define it with define_index()"
            raise NotFound(f"no index {name!r}{hint}", index=str(name))
        return found

    def indexes_of(self, otype: int) -> list[IndexDef]:
        """The indexes on objects of this type id (empty for most types)."""
        return self._by_otype.get(otype, [])

    # -- definitions ----------------------------------------------------------

    def define_assoc(
        self,
        name: str,
        *,
        inverse: str | None = None,
        symmetric: bool = False,
        limit: int = DEFAULT_LIMIT,
        ttl: float | timedelta | None = None,
        on_delete: OnDelete | None = None,
    ) -> Schema:
        """A schema with this association type (and its inverse) defined.

        Redefining a type sets its limit and ttl to these (ttl None: edges never expire).
        `on_delete` declares the type's deletion rule (None keeps the one it has);
        an inverse type declares its own, by a definition of its own."""
        _check_name(name, "association type")
        if inverse is not None:
            _check_name(inverse, "inverse type")
        if type(symmetric) is not bool:
            raise SchemaError(f"symmetric must be true or false, got {symmetric!r}")
        if type(limit) is not int or not 0 < limit <= MAX_LIMIT:
            raise SchemaError(f"limit must be an integer from 1 to {MAX_LIMIT:,}, got {limit!r}")
        if symmetric and inverse is not None:
            raise SchemaError(f"{name!r} cannot be symmetric and have an inverse ({inverse!r})")
        if inverse == name:
            raise SchemaError(f"{name!r} cannot be its own inverse; use symmetric=True")
        seconds = check_ttl(ttl)
        _check_on_delete(on_delete, inverse, symmetric)
        wanted = [AssocType(name, 0, inverse, symmetric, limit, seconds, on_delete)]
        if inverse is not None:  # both legs share the edge's time, so they expire together
            wanted.append(AssocType(inverse, 0, name, False, limit, seconds))
        assoc = dict(self._assoc)
        next_id = max(self._assoc_ids, default=0) + 1
        for want in wanted:
            have = assoc.get(want.name)
            if have is None:
                assoc[want.name] = msgspec.structs.replace(want, id=next_id)
                next_id += 1
                continue
            # Undeclared here (an inverse is always): the type keeps its rule.
            rule = have.on_delete if want.on_delete is None else want.on_delete
            if (have.inverse, have.symmetric) != (want.inverse, want.symmetric):
                raise SchemaError(
                    f"{want.name!r} is already defined with {_describe(have)}; "
                    f"it cannot be redefined with {_describe(want)}",
                    name=want.name,
                )
            assoc[want.name] = msgspec.structs.replace(
                have, limit=limit, ttl=seconds, on_delete=rule
            )
        return Schema(assoc.values(), self._objects.values(), self.indexes, self._index_seq)

    def define_object(self, name: str, *, owned: bool | None = None) -> Schema:
        """A schema with this object type defined (`owned`: None keeps what it is)."""
        _check_name(name, "object type")
        if owned is not None and type(owned) is not bool:
            raise SchemaError(f"owned must be true or false, got {owned!r}")
        have = self._objects.get(name)
        if have is not None and (owned is None or owned == have.owned):
            return self
        if have is not None:
            kept = [o for o in self._objects.values() if o.name != name]
            objects = [*kept, msgspec.structs.replace(have, owned=bool(owned))]
            return Schema(self._assoc.values(), objects, self.indexes, self._index_seq)
        next_id = max(self._object_ids, default=0) + 1
        objects = [*self._objects.values(), ObjectType(name, next_id, bool(owned))]
        return Schema(self._assoc.values(), objects, self.indexes, self._index_seq)

    def define_index(
        self,
        name: str,
        otype: str,
        properties: list[str],
        *,
        order: str | None = None,
        unique: bool = False,
        shard_on: str | None = None,
    ) -> Schema:
        """A schema with this index defined (state "building"); a no-op if defined alike."""
        _check_name(name, "index")
        kind = self.object_type(otype)
        props = _check_properties(properties)
        if order is not None and (not isinstance(order, str) or not order):
            raise SchemaError(f"order must be 'recency' or a property name, got {order!r}")
        if order in props:
            raise SchemaError(f"order {order!r} is already one of the properties {props}")
        if type(unique) is not bool:
            raise SchemaError(f"unique must be true or false, got {unique!r}")
        if unique and order == RECENCY:
            raise SchemaError("a unique index cannot be ordered by recency (every write differs)")
        if shard_on is not None and shard_on not in props:
            raise SchemaError(
                f"shard_on must be one of the properties {props} (queries give it by "
                f"equality to reach one shard), got {shard_on!r}"
            )
        wanted = IndexDef(name, 0, kind.id, props, order, unique, shard_on)
        have = self._indexes.get(name)
        if have is not None:
            if msgspec.structs.replace(have, id=0, state="building") == wanted:
                return self
            raise SchemaError(
                f"index {name!r} is already defined differently ({_describe_index(have, self)}); "
                f"drop it first to redefine it",
                name=name,
            )
        seq = max(self._index_seq, max((i.id for i in self._indexes.values()), default=0)) + 1
        added = msgspec.structs.replace(wanted, id=seq)
        return Schema(self._assoc.values(), self._objects.values(), [*self.indexes, added], seq)

    def drop_index(self, name: str) -> Schema:
        """A schema without this index (NotFound if there is none)."""
        gone = self.index(name)
        kept = [i for i in self.indexes if i.id != gone.id]
        return Schema(self._assoc.values(), self._objects.values(), kept, self._index_seq)

    def with_index_state(self, name: str, state: IndexState) -> Schema:
        """A schema where the index is in `state`."""
        index = msgspec.structs.replace(self.index(name), state=state)
        kept = [index if i.id == index.id else i for i in self.indexes]
        return Schema(self._assoc.values(), self._objects.values(), kept, self._index_seq)

    def apply_toml(self, text: str) -> Schema:
        """A schema with every definition of a TOML document (see the module doc)."""
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SchemaError(f"schema file is not valid TOML: {exc}") from None
        unknown = set(doc) - {"assoc", "object", "index"}
        if unknown:
            raise SchemaError(
                f"unknown schema sections {sorted(unknown)}; use [assoc.X], [object.X], [index.X]"
            )
        schema = self
        for name, options in _tables(doc, "assoc"):
            extra = set(options) - {"inverse", "symmetric", "limit", "ttl", "on_delete"}
            if extra:
                raise SchemaError(f"[assoc.{name}] has unknown keys {sorted(extra)}")
            schema = schema.define_assoc(name, **options)
        for name, options in _tables(doc, "object"):
            if set(options) - {"owned"}:
                raise SchemaError(f"[object.{name}] has unknown keys {sorted(options)}")
            schema = schema.define_object(name, **options)
        for name, options in _tables(doc, "index"):
            extra = set(options) - {"otype", "properties", "order", "unique", "shard_on"}
            if extra or not {"otype", "properties"} <= set(options):
                raise SchemaError(
                    f"[index.{name}] needs otype and properties, and may have order, unique "
                    f"and shard_on; got {sorted(options)}"
                )
            schema = schema.define_index(name, **options)
        return schema

    # -- persistence ----------------------------------------------------------

    def to_json(self) -> bytes:
        stored = _Stored(self.assoc_types, self.object_types, self.indexes, self._index_seq)
        return msgspec.json.encode(stored)

    @classmethod
    def from_json(cls, raw: bytes) -> Schema:
        stored = msgspec.json.decode(raw, type=_Stored)
        return cls(stored.assoc, stored.object, stored.index, stored.index_seq)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]


def read_schema_file(path: str | Path) -> str:
    """The text of a TOML schema file (SchemaError if it is not UTF-8)."""
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SchemaError(f"{path} is not a TOML schema file (not UTF-8 text)") from None


def _tables(doc: dict[str, Any], section: str) -> list[tuple[str, dict[str, Any]]]:
    tables = doc.get(section, {})
    if not isinstance(tables, dict):
        raise SchemaError(f"{section} must be a table of types, like [{section}.name]")
    for name, options in tables.items():
        if not isinstance(options, dict):
            raise SchemaError(f"{section}.{name} must be a table, like [{section}.{name}]")
    return list(tables.items())


def _check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise SchemaError(
            f"{what} name must be a letter followed by up to 63 letters, digits or "
            f"underscores, got {name!r}"
        )


def _check_on_delete(on_delete: object, inverse: str | None, symmetric: bool) -> None:
    if on_delete is not None and on_delete not in ON_DELETE:
        raise SchemaError(f"on_delete must be one of {list(ON_DELETE)}, got {on_delete!r}")
    # A refcount target is deleted once no deep or refcount edge points to it:
    # those are counted on the target, so the type must keep its incoming list.
    if on_delete == "refcount" and inverse is None and not symmetric:
        raise SchemaError("on_delete='refcount' needs an inverse type (the target's count)")


def _check_properties(properties: object) -> list[str]:
    if isinstance(properties, str) or not isinstance(properties, (list, tuple)):
        raise SchemaError(f"properties must be a list of property names, got {properties!r}")
    if not 0 < len(properties) <= MAX_INDEX_PROPERTIES:
        raise SchemaError(
            f"an index has 1 to {MAX_INDEX_PROPERTIES} properties, got {len(properties)}"
        )
    for prop in properties:
        if not isinstance(prop, str) or not 0 < len(prop) <= 128:
            raise SchemaError(f"a property name is a string of 1 to 128 characters, got {prop!r}")
    if len(set(properties)) != len(properties):
        raise SchemaError(f"properties must not repeat, got {list(properties)}")
    return list(properties)


def _describe_index(index: IndexDef, schema: Schema) -> str:
    otype = schema.object_by_id(index.otype).name
    return (
        f"otype={otype!r}, properties={index.properties}, order={index.order!r}, "
        f"unique={index.unique}, shard_on={index.shard_on!r}"
    )


def _describe(t: AssocType) -> str:
    if t.symmetric:
        return "symmetric=true"
    return f"inverse={t.inverse!r}" if t.inverse else "no inverse"


def _unknown(kind: str, name: object, known: dict[str, Any]) -> UnknownType:
    message = f"no {kind} type {name!r}"
    close = difflib.get_close_matches(str(name), list(known), n=1)
    if close:
        message += f"; did you mean {close[0]!r}?"
    elif known:
        message += f"; defined: {', '.join(sorted(known))}"
    else:
        message += f"; define it first with define_{'assoc' if kind[0] == 'a' else 'object'}()"
    return UnknownType(message, type=str(name))
