"""A plain-dict model of a graph under cascading deletions (DELF rules), for
`tests/api/test_deletion_machine.py`: objects, edges with both directions, and
what each deletion removed, so a restore can be predicted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: type -> (inverse, rule); `likes` has no inverse: its incoming edges are not found.
TYPES: dict[str, tuple[str | None, str]] = {
    "follows": ("followed_by", "shallow"),
    "followed_by": ("follows", "shallow"),
    "authored": ("author", "deep"),
    "author": ("authored", "shallow"),
    "contains": ("in_album", "refcount"),
    "in_album": ("contains", "shallow"),
    "likes": (None, "shallow"),
}
Key = tuple[int, str, int]


@dataclass
class Record:
    objects: dict[int, Any] = field(default_factory=dict)
    edges: dict[Key, tuple[int, Any]] = field(default_factory=dict)
    status: str = "done"


@dataclass
class DeletionModel:
    objects: dict[int, Any] = field(default_factory=dict)  # live id -> data
    known: set[int] = field(default_factory=set)  # every id ever added
    edges: dict[Key, tuple[int, Any]] = field(default_factory=dict)  # live (time, data)
    latest: dict[int, Record] = field(default_factory=dict)

    def add_object(self, id: int, data: Any) -> None:
        self.objects[id] = data
        self.known.add(id)

    def add_edge(self, id1: int, atype: str, id2: int, time: int, data: Any) -> None:
        if data is None and (id1, atype, id2) in self.edges:  # a re-add keeps its data
            data = self.edges[(id1, atype, id2)][1]
        self.edges[(id1, atype, id2)] = (time, data)
        inverse = TYPES[atype][0]
        if inverse is not None:
            self.edges[(id2, inverse, id1)] = (time, data)

    def delete_edge(self, id1: int, atype: str, id2: int) -> None:
        self.edges.pop((id1, atype, id2), None)
        inverse = TYPES[atype][0]
        if inverse is not None:
            self.edges.pop((id2, inverse, id1), None)

    def _owners(self, target: int) -> int:
        return sum(
            1
            for (id1, atype, _) in self.edges
            if id1 == target
            and TYPES.get(TYPES[atype][0] or "", (None, ""))[1] in ("deep", "refcount")
        )

    def cascade(self, root: int) -> None:
        record = Record()
        queue, seen, candidates = [root], {root}, set()
        while queue:
            while queue:
                node = queue.pop(0)
                if node in self.objects:
                    record.objects[node] = self.objects.pop(node)
                for key in [k for k in self.edges if k[0] == node]:
                    if key not in self.edges:
                        continue  # its mirror went already
                    record.edges[key] = self.edges[key]
                    self.delete_edge(*key)
                    rule, target = TYPES[key[1]][1], key[2]
                    if rule == "deep" and target not in seen:
                        seen.add(target)
                        queue.append(target)
                    elif rule == "refcount":
                        candidates.add(target)
            for target in sorted(candidates - seen):
                if self._owners(target) == 0:
                    seen.add(target)
                    queue.append(target)
            candidates -= seen
        before = self.latest.get(root)
        if before is not None and before.status == "done" and root not in self.objects:
            # deleting a deleted object again adds to its deletion (one restore undoes both)
            record.objects = {**before.objects, **record.objects}
            record.edges = {**before.edges, **record.edges}
        self.latest[root] = record

    def restore(self, root: int) -> None:
        record = self.latest[root]
        for id, data in record.objects.items():
            self.objects[id] = data
        for (id1, atype, id2), (time, data) in record.edges.items():
            self.edges[(id1, atype, id2)] = (time, data)  # as recorded, data too
            inverse = TYPES[atype][0]
            if inverse is not None:
                self.edges[(id2, inverse, id1)] = (time, data)
        record.status = "restored"
