"""The CLI's graph argument: a directory, a database server's URL with its journal file,
or a shard map."""

from __future__ import annotations

from typing import Any

import click

from ..storage.backend import is_server_url


class GraphLocation(click.ParamType[Any]):
    """A graph's directory, a MySQL or PostgreSQL URL with its journal file
    (mysql://root@127.0.0.1:3306/NAME?journal=data/NAME.journal,
    postgresql://postgres@127.0.0.1:5432/NAME?journal=data/NAME.journal), or a shard
    map (.toml)."""

    name = "directory|server-url|map.toml"

    def __init__(self, exists: bool) -> None:
        self._path = click.Path(file_okay=False, exists=exists)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if str(value).endswith(".toml"):  # a shard map
            return click.Path(dir_okay=False, exists=True).convert(value, param, ctx)
        if is_server_url(value):
            if "journal=" not in value:
                self.fail(
                    f"{value}: a graph on a database server needs its journal file, a local "
                    "file on durable storage: add ?journal=PATH to the URL",
                    param,
                    ctx,
                )
            return value
        return self._path.convert(value, param, ctx)


GRAPH = GraphLocation(exists=True)
NEW_GRAPH = GraphLocation(exists=False)
