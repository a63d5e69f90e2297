"""Schema and operator tools: define types, trace SQL, look at the cache."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..core.errors import InvalidRequest
from ..core.ids import shard_of
from ..core.records import CacheStats, HotKey
from ..core.schema import DEFAULT_LIMIT, AssocType, ObjectType, OnDelete, read_schema_file
from .engine import Engine


class Admin:
    """define_assoc, define_object, load_schema, trace, cache_stats, hot_keys.

    `Graph` documents each method; its schema is the engine's (`engine.schema`).
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def define_assoc(
        self,
        name: str,
        inverse: str | None = None,
        symmetric: bool = False,
        limit: int = DEFAULT_LIMIT,
        ttl: float | timedelta | None = None,
        on_delete: OnDelete | None = None,
    ) -> AssocType:
        self._engine.change_schema(
            lambda s: s.define_assoc(
                name,
                inverse=inverse,
                symmetric=symmetric,
                limit=limit,
                ttl=ttl,
                on_delete=on_delete,
            )
        )
        return self._engine.schema.assoc_type(name)

    def define_object(self, name: str, owned: bool | None = None) -> ObjectType:
        self._engine.change_schema(lambda s: s.define_object(name, owned=owned))
        return self._engine.schema.object_type(name)

    def load_schema(self, path: str | Path) -> None:
        text = read_schema_file(path)
        self._engine.change_schema(lambda s: s.apply_toml(text))

    def trace(self, tracer: Callable[[int, str, float], None]) -> Callable[[], None]:
        self._engine.backend.tracers.append(tracer)
        return lambda: self._engine.backend.tracers.remove(tracer)

    def cache_stats(self) -> CacheStats | None:
        cache = self._engine.cache
        return None if cache is None else cache.stats()

    def hot_keys(self, n: int) -> list[HotKey]:
        if type(n) is not int or not 0 < n <= 1000:
            raise InvalidRequest(f"n must be an integer from 1 to 1,000, got {n!r}")
        cache = self._engine.cache
        if cache is None:
            return []
        hot = []
        for key, rate in cache.hot.top(n):
            parts: tuple[Any, ...] = key  # type: ignore[assignment]
            kind, id = parts[0], parts[1]
            atype = parts[2] if len(parts) > 2 else None
            hot.append(HotKey(kind, id, atype, shard_of(id, self._engine.shards), round(rate, 1)))
        return hot
