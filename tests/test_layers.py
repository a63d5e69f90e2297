"""The layers of src/assocdb, read from its import graph (docs/architecture.md, "Layers").

Every module of a layer may import its own layer and the layers below it, as
ALLOWED says; `core` imports nothing of assocdb, `client` only `core`. Imports
inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "assocdb"

#: layer → the layers (besides itself) its modules may import; "assocdb" is the
#: package root (`assocdb.open`, `__version__`), which only the outer shells use.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "storage": {"core"},
    "cache": {"core"},
    "writes": {"core", "storage", "cache"},
    "api": {"core", "storage", "cache", "writes"},
    "client": {"core"},
    "serve": {"core", "api", "client", "assocdb"},
    "flock": {"core", "api"},
    "cli": {"core", "storage", "api", "client", "serve", "flock", "assocdb"},
}


def layer_of(module: str) -> str:
    """'core' for assocdb.core.merge, 'assocdb' for the package root and its top modules."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else "assocdb"


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) for every assocdb import in the file at `path`."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root.name:
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != root.name:
                continue
            if node.module is None or target == root.name:  # from . import x: x may be a module
                for alias in node.names:
                    yield node.lineno, f"{target}.{alias.name}"
            else:
                yield node.lineno, target


def violations(root: Path) -> list[str]:
    """Each import that reaches a layer its module may not import."""
    found = []
    for path in sorted(root.rglob("*.py")):
        layer = layer_of(module_name(path, root))
        if layer == "assocdb":
            continue
        for line, target in imports_of(path, root):
            wanted = layer_of(target)
            if wanted != layer and wanted not in ALLOWED[layer]:
                found.append(f"{path.relative_to(root)}:{line} ({layer}) imports {target}")
    return found


def test_every_module_imports_only_its_layer_and_the_ones_below() -> None:
    assert violations(PACKAGE) == []


def test_every_module_is_in_a_layer() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py"]
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__") == (
        sorted(ALLOWED)
    )


def test_the_layers_have_no_cycle() -> None:
    def reaches(layer: str, seen: set[str]) -> set[str]:
        for lower in ALLOWED[layer] - {"assocdb"} - seen:
            seen.add(lower)
            reaches(lower, seen)
        return seen

    for layer in ALLOWED:
        assert layer not in reaches(layer, set())


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("core/merge.py", "import assocdb.api\n"),
        ("core/ids.py", "from ..storage.backend import Backend\n"),
        ("client/wire.py", "from assocdb.api.graph import Graph\n"),
        ("storage/sqlite.py", "def later():\n    from ..cache import tier1\n"),
        ("cache/hotkeys.py", "from .. import writes\n"),
    ],
)
def test_a_forbidden_import_is_seen(tmp_path: Path, module: str, line: str) -> None:
    """A copy of the package with one more import fails the check, naming it."""
    copy = tmp_path / "assocdb"
    for path in PACKAGE.rglob("*.py"):
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    before = violations(copy)
    with (copy / module).open("a") as file:
        file.write("\n\n" + line)
    found = [v for v in violations(copy) if v not in before]
    assert len(found) == 1
    assert found[0].startswith(f"{module}:")


def test_importing_the_client_loads_no_engine_module() -> None:
    """`import assocdb.client` (a process talking to a server) loads `core` and the
    client, nothing of the engine: the package root offers `Graph` and `open` lazily."""
    probe = (
        "import sys, assocdb.client, assocdb\n"
        "assocdb.Client, assocdb.AssocdbError, assocdb.Page\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('assocdb'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = done.stdout.split()
    assert "assocdb.client.client" in loaded
    engine = ("assocdb.api", "assocdb.storage", "assocdb.writes", "assocdb.cache")
    assert [m for m in loaded if m.startswith(engine)] == []


def test_the_engine_names_still_load_from_the_root() -> None:
    import assocdb
    from assocdb.api.graph import Graph

    assert assocdb.Graph is Graph
    assert "open" in dir(assocdb)


def test_graph_is_composed_not_inherited() -> None:
    """`Graph` holds its services; it has no base classes (STYLE.md, point 12)."""
    tree = ast.parse((PACKAGE / "api" / "graph.py").read_text())
    graph = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Graph")
    assert graph.bases == []
    assert graph.keywords == []


MAX_LINES = 800  # STYLE.md point 3: a module past this wants splitting along its concerns


def test_no_module_is_over_800_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
