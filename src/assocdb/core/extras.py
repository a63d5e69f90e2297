"""Optional dependencies ("extras"), and the error that names the one to install.

`pip install assocdb` is the library and the CLI: msgspec and click, nothing
else. What only some users need comes as an extra of the package:

    server       starlette, uvicorn, prometheus-client   `assocdb serve`, serve/
    client       httpx                                   `assocdb.Client`
    mysql        PyMySQL                                 mysql:// graphs (pure Python)
    mysqlclient  mysqlclient                             the C driver, preferred when built
    postgres     psycopg[binary], psycopg-pool           postgresql:// graphs
    redis        redis[hiredis]                          the Redis cache tier
    thrift       thriftpy2                               `assocdb serve-thrift`, flock/

A module of an extra is imported only where it is first needed, through
`require()` or inside `needs()`, so `import assocdb` stays light and a
missing one fails with `MissingExtra`, whose message says what to install,
instead of "No module named 'starlette'".
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


class MissingExtra(ModuleNotFoundError):
    """A feature's optional dependency is not installed; `extra` names what brings it.

    A ModuleNotFoundError (not an AssocdbError: it is about the installation, not
    a request), so code that already copes with a missing module still does.
    """

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the {extra} extra: pip install 'assocdb[{extra}]'"
            f" ({module} is not installed)",
            name=module,
        )
        self.feature = feature
        self.extra = extra


def require(module: str, extra: str, feature: str) -> ModuleType:
    """`module`, imported; MissingExtra naming `extra` if it (or what it needs) is missing.

    >>> pymysql = require("pymysql", "mysql", "a mysql:// graph")
    """
    with needs(extra, feature):
        return importlib.import_module(module)


@contextmanager
def needs(extra: str, feature: str) -> Iterator[None]:
    """The imports in the block come from `extra`: MissingExtra names it if one fails.

    (For `import x` statements, which keep their static types; `require()` returns
    a plain module.)

    >>> with needs("client", "assocdb.Client"):
    ...     import httpx
    """
    try:
        yield
    except MissingExtra:
        raise
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top in ("", "assocdb"):  # not a third-party package: a bug, shown as it is
            raise
        raise MissingExtra(feature, extra, top) from exc
