"""A deleter for the crash test: `python crash_deleter.py DIR ROOT`.

Opens the graph in DIR, starts the cascading deletion of ROOT and prints how
many edges it has removed each time a step or more went by, until the test
kills it with SIGKILL (or the deletion ends: it prints "done").
"""

from __future__ import annotations

import sys

import assocdb


def main() -> None:
    directory, root = sys.argv[1], int(sys.argv[2])
    graph = assocdb.open(directory)
    graph.obj_delete(root, cascade=True)
    while not graph.deletions.wait(0.05):
        removed = sum(graph.deletions.of_object(root).edges.values())
        sys.stdout.write(f"{removed}\n")
        sys.stdout.flush()
    sys.stdout.write("done\n")
    sys.stdout.flush()
    graph.close()


if __name__ == "__main__":
    main()
