"""The failure detector's state machine, with time passed in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assocdb.storage.detector import Health


def test_down_after_threshold_consecutive_failures_only() -> None:
    h = Health(threshold=3, probe_interval=1.0, probe_max=8.0)
    assert not h.failed(0.0)
    assert not h.failed(0.1)
    h.succeeded()  # breaks the run
    assert not h.failed(0.2)
    assert not h.failed(0.3)
    assert h.allows()
    assert h.failed(0.4)
    assert not h.allows()
    assert (h.downs, h.failures, h.down_since) == (1, 5, 0.4)


def test_probes_back_off_doubling_up_to_the_cap() -> None:
    h = Health(threshold=1, probe_interval=1.0, probe_max=4.0)
    h.failed(10.0)
    assert not h.probe_due(10.5)
    assert h.probe_due(11.0)
    due = []
    now = 11.0
    for _ in range(4):
        assert not h.probed(False, now)
        due.append(h.next_probe - now)
        now = h.next_probe
    assert due == [2.0, 4.0, 4.0, 4.0]
    assert not h.allows()
    assert h.probed(True, now)
    assert h.allows()
    assert (h.consecutive, h.down_since) == (0, None)
    # Down again: the backoff starts over.
    h.failed(100.0)
    assert h.next_probe == 101.0


def test_a_drained_backend_stays_down_whatever_its_probes_say() -> None:
    h = Health(threshold=3, probe_interval=1.0)
    h.drain(True, 0.0)
    assert not h.allows()
    assert not h.probe_due(100.0)
    assert not h.probed(True, 100.0)
    h.drain(False, 100.0)
    assert h.probe_due(100.0)  # given back: probed at once
    assert h.probed(True, 100.0)
    assert h.allows()


def test_operator_marks_override_the_count() -> None:
    h = Health(threshold=3)
    h.mark(False, 5.0)
    assert not h.allows()
    assert h.downs == 1
    h.mark(True, 6.0)
    assert h.allows()


@given(st.lists(st.sampled_from(["ok", "fail", "probe_ok", "probe_fail", "tick"]), max_size=60))
def test_up_exactly_when_a_model_says_so(events: list[str]) -> None:
    """A model: down once `threshold` failures run; up again only by a successful probe."""
    h = Health(threshold=2, probe_interval=1.0, probe_max=4.0)
    up, run, now = True, 0, 0.0
    for event in events:
        now += 0.5
        if event == "ok" and h.allows():
            h.succeeded()
            run = 0
        elif event == "fail" and h.allows():
            h.failed(now)
            run += 1
            up = run < 2
        elif event.startswith("probe") and h.probe_due(now):
            h.probed(event == "probe_ok", now)
            if event == "probe_ok":
                up, run = True, 0
        assert h.allows() == up
        assert h.probe_due(now) <= (not up)
