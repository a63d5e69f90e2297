import types

import assocdb


def test_all_is_exactly_the_public_names() -> None:
    public = {name for name in dir(assocdb) if not name.startswith("_")}
    # The layer subpackages and what the package imports for itself are not API.
    public -= {"annotations"} | {
        name for name in public if isinstance(getattr(assocdb, name), types.ModuleType)
    }
    assert set(assocdb.__all__) == public
    assert assocdb.__all__ == sorted(
        assocdb.__all__, key=lambda n: (not n.isupper(), n)
    )  # as ruff sorts


def test_errors_form_one_tree() -> None:
    for name in assocdb.__all__:
        value = getattr(assocdb, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, assocdb.AssocdbError)
    assert issubclass(assocdb.UnknownType, assocdb.InvalidRequest)
    assert issubclass(assocdb.InvalidCursor, assocdb.InvalidRequest)
    assert issubclass(assocdb.DataTooLarge, assocdb.InvalidRequest)
