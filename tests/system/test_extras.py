"""Light installs: `pip install assocdb` (msgspec, click) is the library and the CLI.

Each test runs a fresh interpreter in which a meta-path finder hides some
packages, as if their extra were not installed, and records every attempt to
import one. Embedded use must not even try them; a feature that needs one must
say which extra to install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import assocdb

#: The top-level modules of every extra (and of what they bring along).
EXTRAS = {
    "server": ["starlette", "uvicorn", "prometheus_client", "anyio"],
    "client": ["httpx", "httpcore"],
    "redis": ["redis", "hiredis"],
    "mysql": ["pymysql", "MySQLdb"],
    "postgres": ["psycopg", "psycopg_binary", "psycopg_pool"],
}
EVERY_EXTRA = sorted(module for modules in EXTRAS.values() for module in modules)

_BLOCKER = """
import json, sys

class _Blocker:
    \"\"\"Hides the packages named in argv[1] and records each import of them.\"\"\"

    blocked = set(json.loads(sys.argv[1]))
    tried = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            self.tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

_blocker = _Blocker()
sys.meta_path.insert(0, _blocker)
"""


def run(code: str, blocked: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`code` in a new interpreter with the `blocked` packages hidden; sys.argv[2:] = args."""
    env = {**os.environ, "PYTHONPATH": str(Path(assocdb.__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-c", _BLOCKER + textwrap.dedent(code), json.dumps(blocked), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def result(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """What the child printed last, as JSON (it exited 0)."""
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return answer


def test_the_blocker_hides_what_it_is_told_to() -> None:
    done = run(
        """
        try:
            import starlette.routing
        except ModuleNotFoundError as exc:
            print(json.dumps({"name": exc.name, "tried": _blocker.tried}))
        """,
        ["starlette"],
    )
    assert result(done) == {"name": "starlette", "tried": ["starlette"]}


def test_embedded_use_and_the_cli_never_import_an_extra(tmp_path: Path) -> None:
    edges = tmp_path / "edges.txt"
    edges.write_text("1 2\n2 3\n")
    done = run(
        """
        import assocdb
        from assocdb import Client  # exported, usable once the client extra is there
        from assocdb.cli.main import main

        directory = sys.argv[2]
        with assocdb.open(directory + "/lib") as g:
            g.define_assoc("follows", inverse="followed_by")
            g.define_object("user")
            ada = g.obj_add("user", {"name": "ada"})
            g.assoc_add(ada, "follows", 2)
            read = [g.obj_get(ada).data, g.assoc_count(2, "followed_by"),
                    [a.id2 for a in g.assoc_range(ada, "follows")]]
        cli = directory + "/cli"
        main(["init", cli, "--shards", "2"], standalone_mode=False)
        with assocdb.open(cli) as g:
            g.define_assoc("friend", symmetric=True)
        for args in (["import", cli, sys.argv[3], "--type", "friend"], ["export", cli],
                     ["check", cli], ["queue", "stats", cli]):
            main(args, standalone_mode=False)
        print(json.dumps({"read": read, "tried": _blocker.tried}))
        """,
        EVERY_EXTRA,
        str(tmp_path),
        str(edges),
    )
    assert result(done) == {"read": [{"name": "ada"}, 1, [2]], "tried": []}
    assert "imported 2 edges" in done.stdout


def serve(blocked: list[str], directory: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """`assocdb serve DIRECTORY` with the `blocked` packages hidden."""
    code = """
        from assocdb.cli.main import main
        sys.argv = ["assocdb", "serve", *sys.argv[2:]]
        main()
    """
    return run(code, blocked, str(directory), "--port", "0", *options)


def test_serve_without_the_server_extra_says_what_to_install(tmp_path: Path) -> None:
    for package in EXTRAS["server"][:3]:
        done = serve([package], tmp_path / "graph")
        assert done.returncode != 0
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("Error: assocdb serve needs the server extra")
        assert "pip install 'assocdb[server]'" in lines[0]
        assert package in lines[0]
        assert not (tmp_path / "graph").exists()  # nothing was done before it said so


def test_serve_with_redis_without_the_redis_extra_says_what_to_install(tmp_path: Path) -> None:
    done = serve(EXTRAS["redis"], tmp_path / "graph", "--redis", "redis://127.0.0.1:1/0")
    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        "Error: assocdb serve --redis needs the redis extra: pip install 'assocdb[redis]'"
        " (redis is not installed)"
    ]


#: A function the tests below call in the child: what MissingExtra `call()` raised.
MISSING = """
        from assocdb.core.extras import MissingExtra

        def missing(call):
            try:
                call()
            except MissingExtra as exc:
                return {"message": str(exc), "extra": exc.extra, "name": exc.name,
                        "module_not_found": isinstance(exc, ModuleNotFoundError)}
            return "no error"
"""


def test_client_without_httpx_names_the_client_extra() -> None:
    done = run(
        MISSING
        + """
        from assocdb import Client
        print(json.dumps(missing(lambda: Client("http://127.0.0.1:1"))))
        """,
        EXTRAS["client"],
    )
    assert result(done) == {
        "message": "assocdb.Client needs the client extra: pip install 'assocdb[client]'"
        " (httpx is not installed)",
        "extra": "client",
        "name": "httpx",
        "module_not_found": True,
    }


def test_a_redis_cache_without_redis_names_the_redis_extra(tmp_path: Path) -> None:
    done = run(
        MISSING
        + """
        import assocdb
        config = assocdb.CacheConfig(redis="redis://127.0.0.1:1/0")
        print(json.dumps(missing(lambda: assocdb.open(sys.argv[2], cache=config))))
        """,
        EXTRAS["redis"],
        str(tmp_path / "graph"),
    )
    answer = result(done)
    assert answer["extra"] == "redis"
    assert "pip install 'assocdb[redis]'" in str(answer["message"])


def test_a_mysql_graph_without_a_driver_names_the_mysql_extra(tmp_path: Path) -> None:
    done = run(
        MISSING
        + """
        import assocdb
        url = "mysql://root@127.0.0.1:1/g"
        print(json.dumps(missing(lambda: assocdb.open(url, journal=sys.argv[2]))))
        """,
        EXTRAS["mysql"],
        str(tmp_path / "journal.db"),
    )
    answer = result(done)
    assert answer["extra"] == "mysql"
    assert answer["name"] == "pymysql"
    assert "pip install 'assocdb[mysql]'" in str(answer["message"])


def test_a_postgresql_graph_without_a_driver_names_the_postgres_extra(tmp_path: Path) -> None:
    done = run(
        MISSING
        + """
        import assocdb
        url = "postgresql://postgres@127.0.0.1:1/g"
        print(json.dumps(missing(lambda: assocdb.open(url, journal=sys.argv[2]))))
        """,
        EXTRAS["postgres"],
        str(tmp_path / "journal.db"),
    )
    answer = result(done)
    assert answer["extra"] == "postgres"
    assert answer["name"] == "psycopg"
    assert "pip install 'assocdb[postgres]'" in str(answer["message"])
