"""A plain-dict model of a graph under cascading deletions (DELF rules), for
`tests/api/test_deletion_machine.py`: objects, edges with both directions, home
timelines (fan-out on write: a post reaches the author's followers of the moment;
a read shows the entries of authors the user follows now), and what each deletion
removed, so a restore can be predicted.

A cascade removes a deleted object's `posted` edges (its items leave every home)
and clears the home of every object it deletes, recording the entries. A restore
puts the edges back, posts the items again (they reach the author's followers
after the restore) and puts back the recorded home entries whose item is still
posted."""

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
    "posted": (None, "shallow"),  # the timelines' posts type: (author, posted, item)
}
Key = tuple[int, str, int]
Home = dict[int, tuple[int, int]]  # item -> (time, author)


@dataclass
class Record:
    objects: dict[int, Any] = field(default_factory=dict)
    edges: dict[Key, tuple[int, Any]] = field(default_factory=dict)
    homes: dict[int, Home] = field(default_factory=dict)  # cleared entries, by user
    status: str = "done"


@dataclass
class DeletionModel:
    objects: dict[int, Any] = field(default_factory=dict)  # live id -> data
    known: set[int] = field(default_factory=set)  # every id ever added
    edges: dict[Key, tuple[int, Any]] = field(default_factory=dict)  # live (time, data)
    latest: dict[int, Record] = field(default_factory=dict)
    homes: dict[int, Home] = field(default_factory=dict)  # delivered, not deleted

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

    # -- timelines ------------------------------------------------------------------

    def post(self, author: int, item: int, time: int) -> None:
        self.edges[(author, "posted", item)] = (time, None)
        for follower, atype, followee in list(self.edges):
            if atype == "follows" and followee == author:
                self.homes.setdefault(follower, {})[item] = (time, author)

    def post_delete(self, author: int, item: int) -> None:
        self.edges.pop((author, "posted", item), None)
        for home in self.homes.values():
            home.pop(item, None)

    def home(self, user: int) -> list[tuple[int, int, int]]:
        """(time, item, author) of the user's home read, newest first: entries of the
        authors it follows now."""
        return sorted(
            (
                (time, item, author)
                for item, (time, author) in self.homes.get(user, {}).items()
                if (user, "follows", author) in self.edges
            ),
            reverse=True,
        )

    def _owners(self, target: int) -> int:
        return sum(
            1
            for (id1, atype, _) in self.edges
            if id1 == target
            and TYPES.get(TYPES[atype][0] or "", (None, ""))[1] in ("deep", "refcount")
        )

    def cascade(self, root: int) -> None:
        deleted = root not in self.objects  # (before this cascade takes it)
        record = Record()
        queue, seen, candidates = [root], {root}, set()
        while queue:
            while queue:
                node = queue.pop(0)
                if node in self.objects:
                    record.objects[node] = self.objects.pop(node)
                if self.homes.get(node):
                    record.homes[node] = self.homes.pop(node)
                for key in [k for k in self.edges if k[0] == node]:
                    if key not in self.edges:
                        continue  # its mirror went already
                    record.edges[key] = self.edges[key]
                    self.delete_edge(*key)
                    if key[1] == "posted":
                        self.post_delete(key[0], key[2])
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
        if before is not None and before.status == "done" and deleted:
            # deleting a deleted object again adds to its deletion (one restore undoes both);
            # one that came back live since (another deletion's restore took it back with
            # it) starts a new deletion (docs/api.md, "deleting it again")
            record.objects = {**before.objects, **record.objects}
            record.edges = {**before.edges, **record.edges}
            record.homes = {
                user: {**before.homes.get(user, {}), **record.homes.get(user, {})}
                for user in before.homes.keys() | record.homes.keys()
            }
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
        for (author, atype, item), (time, _) in record.edges.items():
            if atype == "posted":
                self.post(author, item, time)
        for user, held in record.homes.items():
            for item, (time, author) in held.items():
                if (author, "posted", item) in self.edges:  # not deleted since
                    self.homes.setdefault(user, {})[item] = (time, author)
        record.status = "restored"
