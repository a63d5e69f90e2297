"""Run every benchmark: `python -m bench` (or `make bench`); `python -m bench NAME` for one.

`python -m bench linkbench [options]` runs LinkBench and passes the options
on (`python -m bench linkbench --help`). A bare `python -m bench` runs the
foundation benchmark and LinkBench's preset "tiny".
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from . import foundation
from .linkbench import cli as linkbench


def _linkbench_default() -> None:
    linkbench.main(["--preset", "tiny"])


BENCHMARKS: dict[str, Callable[[], None]] = {
    "foundation": foundation.main,
    "linkbench": _linkbench_default,
}


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == "linkbench":  # the one benchmark with options of its own
        linkbench.main(args[1:])
        return
    for name in args or list(BENCHMARKS):
        if name not in BENCHMARKS:
            sys.exit(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
        BENCHMARKS[name]()


if __name__ == "__main__":
    main()
