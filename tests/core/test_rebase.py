"""An update or delete the store stamped lands after the row it was resolved against
(`ObjectWrite.rebase`); one the caller stamped keeps its stamp. A property test:
patches stamped in any order, resolved one after another in any other order,
keep every field, as the same patches applied one by one would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assocdb.core.merge import ObjRow, State, merge_objects
from assocdb.core.ops import ObjectWrite, Stored, resolve

ADA = ObjRow(7, 1, State.NORMAL, 1, 100, b'{"name":"ada"}')


def test_a_rebased_patch_resolved_against_a_newer_row_takes_the_stamp_above_it() -> None:
    row = ObjectWrite(7, 50, patch=b'{"bio":"x"}', rebase=True).resolve(Stored(ADA))
    assert row.updated_at == 101
    assert row.version == 2


def test_a_rebased_write_against_an_older_row_keeps_its_own_stamp() -> None:
    row = ObjectWrite(7, 500, patch=b'{"bio":"x"}', rebase=True).resolve(Stored(ADA))
    assert row.updated_at == 500


def test_a_rebased_delete_lands_after_the_row_it_deletes() -> None:
    row = ObjectWrite(7, 100, state=State.REMOVED, rebase=True).resolve(Stored(ADA))
    assert (row.state, row.updated_at) == (State.REMOVED, 101)


def test_a_patch_the_caller_stamped_keeps_its_stamp() -> None:
    row = ObjectWrite(7, 50, patch=b'{"bio":"x"}').resolve(Stored(ADA))
    assert row.updated_at == 50


@given(st.permutations(range(6)), st.permutations(range(6)))
def test_rebased_patches_keep_every_field_whatever_order_they_are_stamped_and_resolved(
    stamps: list[int], order: list[int]
) -> None:
    """Patch i sets field fi; it is stamped `100 + stamps[i]` (possibly below rows it
    meets) and resolved in `order`, each against what the merge rule stored."""
    stored: dict[int, ObjRow] = {7: ADA}
    for i in order:
        op = ObjectWrite(7, 100 + stamps[i], patch=b'{"f%d":%d}' % (i, i), rebase=True)
        (row,) = resolve(op, Stored(stored[7])).objects
        for changed in merge_objects(stored, [row]):
            stored[changed.id] = changed
    final = stored[7]
    assert final.data.count(b'"f') == 6
    assert final.version == 7
