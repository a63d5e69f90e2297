"""The change signal: a backend sees other backends' (processes') writes, not its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import assocdb
from assocdb.storage.changesignal import SLOTS, open_signal


def test_a_backend_sees_the_others_bumps_once_and_never_its_own(tmp_path: Path) -> None:
    ours, theirs = open_signal(tmp_path), open_signal(tmp_path)
    assert ours is not None
    assert theirs is not None
    assert ours.slot != theirs.slot
    ours.bump()
    assert not ours.foreign()  # its own write
    assert theirs.foreign()  # ours, seen by the other
    assert not theirs.foreign()  # once
    theirs.bump()
    theirs.bump()
    assert ours.foreign()
    assert not ours.foreign()
    ours.close()
    theirs.close()


def test_a_closed_backends_slot_is_taken_again_and_a_full_file_gives_none(
    tmp_path: Path,
) -> None:
    held = [open_signal(tmp_path) for _ in range(SLOTS)]
    assert all(s is not None for s in held)
    assert open_signal(tmp_path) is None  # every slot taken: no signal, the cache ages
    first = held[0]
    assert first is not None
    first.close()
    again = open_signal(tmp_path)
    assert again is not None
    assert again.slot == first.slot
    for signal in [again, *held[1:]]:
        assert signal is not None
        signal.close()


def test_a_write_of_another_process_is_signalled(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("likes")
    g = assocdb.open(tmp_path / "g")
    signal = g.engine.backend.signal  # type: ignore[attr-defined]
    assert signal is not None
    signal.foreign()  # (the graph's own setup)
    g.assoc_add(1, "likes", 2)
    assert not signal.foreign()  # its own write
    script = f"import assocdb\nwith assocdb.open({str(tmp_path / 'g')!r}) as g:\n"
    script += "    g.assoc_add(1, 'likes', 3)\n"
    subprocess.run([sys.executable, "-c", script], check=True)
    assert signal.foreign()
    g.close()
