"""Run every benchmark: `python -m bench` (or `make bench`); `python -m bench NAME` for one."""

from __future__ import annotations

import sys

from . import flockdb, foundation, http, journal

BENCHMARKS = {
    "foundation": foundation.main,
    "journal": journal.main,
    "flockdb": flockdb.main,
    "http": http.main,
}


def main() -> None:
    names = sys.argv[1:2] or list(BENCHMARKS)  # a benchmark may take arguments after its name
    for name in names:
        if name not in BENCHMARKS:
            sys.exit(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
        BENCHMARKS[name]()


if __name__ == "__main__":
    main()
