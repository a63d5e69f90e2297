from __future__ import annotations

import sys

import pytest

from assocdb.core.extras import MissingExtra, needs, require


def test_require_returns_the_module() -> None:
    assert require("json", "server", "assocdb serve") is sys.modules["json"]


def test_a_missing_module_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)  # None: "cannot be imported"
    for loaded in [name for name in sys.modules if name.startswith("starlette.")]:
        monkeypatch.delitem(sys.modules, loaded)  # imported by an earlier test module: forget it
    with pytest.raises(MissingExtra) as caught:
        require("starlette.routing", "server", "assocdb serve")
    error = caught.value
    assert (error.name, error.extra, error.feature) == ("starlette", "server", "assocdb serve")
    assert isinstance(error, ModuleNotFoundError)  # code that copes with one still does
    assert str(error) == (
        "assocdb serve needs the server extra: pip install 'assocdb[server]'"
        " (starlette is not installed)"
    )


def test_needs_turns_an_import_statement_into_missing_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with (
        pytest.raises(MissingExtra, match=r"pip install 'assocdb\[client\]'"),
        needs("client", "assocdb.Client"),
    ):
        import httpx  # noqa: F401


def test_a_missing_module_of_assocdb_itself_is_a_bug_not_an_extra() -> None:
    with pytest.raises(ModuleNotFoundError) as caught:
        require("assocdb.no_such_module", "server", "assocdb serve")
    assert not isinstance(caught.value, MissingExtra)


def test_the_innermost_missing_extra_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingExtra) as caught, needs("server", "assocdb serve"):
        require("redis", "redis", "the Redis tier")
    assert caught.value.extra == "redis"


def test_other_errors_pass_through() -> None:
    with pytest.raises(ValueError, match="boom"), needs("server", "assocdb serve"):
        raise ValueError("boom")
