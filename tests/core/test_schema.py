from __future__ import annotations

import pytest

from assocdb import SchemaError, UnknownType
from assocdb.core.schema import Schema


def test_inverse_types_point_at_each_other() -> None:
    s = Schema().define_assoc("follows", inverse="followed_by", limit=100)
    follows, followed_by = s.assoc_type("follows"), s.assoc_type("followed_by")
    assert s.inverse(follows) == followed_by
    assert s.inverse(followed_by) == follows
    assert (follows.limit, followed_by.limit) == (100, 100)
    assert follows.id != followed_by.id


def test_symmetric_type_is_its_own_inverse() -> None:
    s = Schema().define_assoc("friend", symmetric=True)
    assert s.inverse(s.assoc_type("friend")) == s.assoc_type("friend")
    assert s.inverse(Schema().define_assoc("likes").assoc_type("likes")) is None


def test_redefining_is_a_no_op_and_ids_are_stable() -> None:
    s = Schema().define_assoc("follows", inverse="followed_by").define_assoc("likes")
    again = s.define_assoc("follows", inverse="followed_by").define_assoc("likes")
    assert again == s
    assert again.assoc_type("likes").id == s.assoc_type("likes").id


def test_limit_may_change() -> None:
    s = Schema().define_assoc("likes").define_assoc("likes", limit=10)
    assert s.assoc_type("likes").limit == 10


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "follows", "inverse": "follows"}, "own inverse"),
        ({"name": "x", "inverse": "y", "symmetric": True}, "symmetric and have an inverse"),
        ({"name": "1abc"}, "name must be"),
        ({"name": "a" * 65}, "name must be"),
        ({"name": "has space"}, "name must be"),
        ({"name": "x", "limit": 0}, "limit"),
        ({"name": "x", "limit": 10**9}, "limit"),
        ({"name": "x", "limit": "5"}, "limit"),
        ({"name": "x", "symmetric": "yes"}, "symmetric"),
    ],
)
def test_bad_definitions_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        Schema().define_assoc(**kwargs)  # type: ignore[arg-type]


def test_conflicting_redefinitions_are_refused() -> None:
    s = Schema().define_assoc("follows", inverse="followed_by")
    with pytest.raises(SchemaError, match="already defined"):
        s.define_assoc("follows", symmetric=True)
    with pytest.raises(SchemaError, match="already defined"):
        s.define_assoc("followed_by", inverse="stalks")
    plain = Schema().define_assoc("likes")
    with pytest.raises(SchemaError, match="already defined"):
        plain.define_assoc("liked_by", inverse="likes")


def test_unknown_types_suggest_a_fix() -> None:
    s = Schema().define_assoc("follows", inverse="followed_by").define_object("user")
    with pytest.raises(UnknownType, match="did you mean 'follows'"):
        s.assoc_type("folows")
    with pytest.raises(UnknownType, match="defined: followed_by, follows"):
        s.assoc_type("zzz")
    with pytest.raises(UnknownType, match="define_assoc"):
        Schema().assoc_type("zzz")
    with pytest.raises(UnknownType):
        s.object_type(3)


def test_toml_round_trip() -> None:
    s = Schema().apply_toml(
        """
        [assoc.follows]
        inverse = "followed_by"
        limit = 500
        [assoc.friend]
        symmetric = true
        [object.user]
        """
    )
    assert s.assoc_type("followed_by").limit == 500
    assert s.assoc_type("friend").symmetric
    assert s.object_type("user").id == 1
    assert Schema.from_json(s.to_json()) == s


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[assoc.x]\ninverse = 3", "inverse type name"),
        ("[assoc.x]\ncolour = 'red'", "unknown keys"),
        ("[things.x]", "unknown schema sections"),
        ("[object.user]\nx = 1", "unknown keys"),
        ("assoc = 5", "must be a table|unknown"),
        ("[assoc", "not valid TOML"),
    ],
)
def test_bad_toml_is_refused(text: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        Schema().apply_toml(text)
