"""`WriterLock`: one holder across threads, open files and processes; reentrant."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from assocdb import Unavailable
from assocdb.storage import writerlock
from assocdb.storage.writerlock import WriterLock


def _free(path: Path) -> bool:
    """Whether another open file of `path` could take the lock now (never waits)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_held_until_the_outermost_exit(tmp_path: Path) -> None:
    path = tmp_path / ".writers.lock"
    lock = WriterLock(path)
    with lock:
        assert not _free(path)
        with lock:  # reentrant in its thread
            assert not _free(path)
        assert not _free(path)
    assert _free(path)
    lock.close()


def test_a_second_thread_waits_for_the_holder(tmp_path: Path) -> None:
    lock = WriterLock(tmp_path / ".writers.lock")
    order: list[str] = []
    entered = threading.Event()

    def other() -> None:
        entered.set()
        with lock:
            order.append("other")

    with lock:
        thread = threading.Thread(target=other)
        thread.start()
        entered.wait()
        order.append("holder")
    thread.join()
    assert order == ["holder", "other"]
    lock.close()


def test_another_process_holding_it_excludes_this_one(tmp_path: Path) -> None:
    path = tmp_path / ".writers.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from assocdb.storage.writerlock import "
            "WriterLock\nwith WriterLock(Path(sys.argv[1])):\n print('held', flush=True)\n "
            "sys.stdin.readline()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdin is not None
    assert holder.stdout.readline() == "held\n"
    assert not _free(path)
    holder.stdin.write("\n")
    holder.stdin.close()
    assert holder.wait() == 0
    holder.stdout.close()
    assert _free(path)


def test_an_interrupted_wait_leaves_the_lock_to_other_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or any exception a signal handler raises) while waiting for another
    process leaves nothing held: before, the thread lock stayed taken, and every
    other thread of the graph (its pipeline's) waited for it forever."""
    lock = WriterLock(tmp_path / ".writers.lock")
    flock = fcntl.flock

    def interrupted(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX:
            raise KeyboardInterrupt
        flock(fd, operation)

    monkeypatch.setattr(writerlock.fcntl, "flock", interrupted)
    with pytest.raises(KeyboardInterrupt), lock:
        pass
    monkeypatch.undo()
    free: list[bool] = []

    def other() -> None:  # never waits: says whether the thread lock is free
        taken = lock._threads.acquire(blocking=False)
        free.append(taken)
        if taken:
            lock._threads.release()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert free == [True]
    with lock:
        assert not _free(tmp_path / ".writers.lock")
    lock.close()


def test_a_wait_for_a_stuck_holder_gives_up_with_unavailable(tmp_path: Path) -> None:
    """A holder that stops (SIGSTOP, a debugger) would hang every other writer for
    ever: with a timeout the wait ends with an error the caller can act on, and the
    lock is taken once the holder lets it go."""
    path = tmp_path / ".writers.lock"
    holder = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(holder, fcntl.LOCK_EX)
    lock = WriterLock(path, timeout=0.05)
    with (
        pytest.raises(
            Unavailable,
            match=r"another writer of this graph \(a stopped process\?\) has held .* over 0\.05 s",
        ),
        lock,
    ):
        pass
    assert not lock._threads._is_owned()  # type: ignore[attr-defined]
    fcntl.flock(holder, fcntl.LOCK_UN)
    with lock:
        assert not _free(path)
    assert _free(path)
    os.close(holder)
    lock.close()


def test_a_thread_waiting_behind_a_stuck_thread_gives_up_too(tmp_path: Path) -> None:
    lock = WriterLock(tmp_path / ".writers.lock", timeout=0.05)
    failed: list[BaseException] = []

    def other() -> None:
        try:
            with lock:
                pass
        except Unavailable as exc:
            failed.append(exc)

    with lock:  # held by this thread until the other has given up
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(failed) == 1
    assert "another thread of this process has held" in str(failed[0])
    with lock:
        pass
    lock.close()
