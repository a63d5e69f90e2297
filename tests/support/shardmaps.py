"""Shard maps over SQLite member directories, for the replica tests."""

from __future__ import annotations

import uuid
from pathlib import Path

MEMBERS = ("db1", "db2", "db3")


def write_map(
    root: Path,
    shards: int = 6,
    members: tuple[str, ...] = MEMBERS,
    replicas: int = 2,
    threshold: int = 2,
    urls: list[str | None] | None = None,
    query_timeout: float = 0.2,
) -> Path:
    """A map placing shard s on members s, s+1, … (mod len(members)), primary first.

    With `urls` (MySQL servers, one per member) the members are those servers;
    otherwise they are SQLite directories under `root`. A url with `{name}` in it
    is a template of the member's URL (a PostgreSQL URL's path is not last); a
    None among them is a SQLite directory. `query_timeout`: short, so that a hung
    member is found out fast; a test that hangs none may wait longer on a loaded server.
    """
    lines = [f"shards = {shards}", ""]
    graph = f"sm{uuid.uuid4().hex[:8]}"  # MySQL schemas {graph}_{member}_s{n}, unique per map
    for number, name in enumerate(members):
        lines.append(f"[backends.{name}]")
        url = urls[number % len(urls)] if urls else None
        if url and "{name}" in url:
            lines.append(f'url = "{url.format(name=f"{graph}_{name}")}"')
        elif url:
            lines.append(f'url = "{url.rstrip("/")}/{graph}_{name}"')
        else:
            lines.append(f'path = "{name}"')
        lines += [f"query_timeout = {query_timeout}", ""]
    lines += ["[detector]", f"threshold = {threshold}", "probe_interval = 0.02"]
    lines += ["probe_max = 0.1", ""]
    for shard in range(shards):
        reps = ", ".join(
            f'{{backend = "{members[(shard + k) % len(members)]}"}}' for k in range(replicas)
        )
        lines += ["[[placement]]", f'shards = "{shard}"', f"replicas = [{reps}]", ""]
    path = root / "cluster.toml"
    path.write_text("\n".join(lines))
    return path
