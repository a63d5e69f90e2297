"""The console in a real headless browser (Chromium through Selenium): log in, open
every page, follow the explorer's links and cursors, retry a failed job, mark a
shard map member down, and see a `<script>` in object data shown as text.

The server runs in this process over a graph on a SQLite shard map, so the test
can make a write fail in the very graph the browser shows. Screenshots of every
page land in tests/artifacts/console/ (ignored by git).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import CacheConfig, Client, Graph
from assocdb.core.ids import shard_of
from assocdb.serve.auth import Tokens
from assocdb.serve.server import create_app
from assocdb.storage.shardmap import ShardMapBackend
from assocdb.writes.applier import RetryPolicy
from tests.support.browser import ThreadServer, chromium, require_browser, severe
from tests.support.helpers import wait_until
from tests.support.http_server import ADMIN, TOKENS
from tests.support.shardmaps import write_map

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
#: The error queue's backoff is a minute: a failed job stays there until retried by hand.
SLOW = RetryPolicy(base=60, cap=60, max_attempts=8)
EVIL = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'


class Console:
    """The graph, its server and a logged-in browser."""

    def __init__(self, graph: Graph, server: ThreadServer, driver: Any, cluster: Path) -> None:
        self.graph, self.server, self.driver, self.cluster = graph, server, driver, cluster

    def open(self, path: str) -> None:
        self.driver.get(self.server.url + path)

    def css(self, selector: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))

    def wait_for(self, selector: str) -> Any:
        wait_until(lambda: bool(self.all(selector)), 30)
        return self.css(selector)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    require_browser()
    root = tmp_path_factory.mktemp("console-browser")
    cluster = write_map(root, shards=6, members=("db1", "db2", "db3"), replicas=2)
    graph = assocdb.open(cluster, retry=SLOW, cache=CacheConfig())
    populate(graph)
    app = create_app(graph, Tokens.from_toml(TOKENS))
    app.state.server.console.live.every = 0.25  # samples 8 times as often: charts fill sooner
    server = ThreadServer(app)
    try:
        with chromium(root / "profile") as driver:
            yield Console(graph, server, driver, cluster)
    finally:
        server.stop()
        app.state.server.console.close()
        graph.close()


def populate(g: Graph) -> None:
    g.define_assoc("follows", inverse="followed_by")
    g.define_assoc("likes")
    g.define_object("user")
    g.define_object("post")
    star = g.obj_add("user", {"name": "star", "bio": EVIL})
    fans = [g.obj_add("user", {"name": f"fan {n}"}) for n in range(120)]
    with g.batch() as batch:
        for n, fan in enumerate(fans):
            batch.assoc_add(fan, "follows", star, time=1_000 + n)
            if n % 3 == 0:
                batch.assoc_add(star, "follows", fan, time=2_000 + n)
    for n in range(5):
        g.assoc_add(star, "likes", g.obj_add("post", {"text": f"post {n}"}), time=n)
    for _ in range(200):  # reads, for the hot keys (a list and an object)
        g.assoc_page(star, "followed_by", limit=10)
    for _ in range(100):
        g.obj_get(star)
    g.star = star  # type: ignore[attr-defined]


def star_of(console: Console) -> int:
    star: int = console.graph.star  # type: ignore[attr-defined]
    return star


def log_in(console: Console) -> None:
    console.open("/admin")
    assert "Log in" in console.driver.title
    console.css("#token").send_keys(ADMIN)
    console.css("#login").click()
    console.wait_for("#live")


def traffic(console: Console, seconds: float) -> None:
    """API calls over HTTP for `seconds`, in waves, so the charts have a shape."""
    star = star_of(console)
    started = time.monotonic()
    with Client(console.server.url, token=ADMIN) as client:
        n = 0
        while (elapsed := time.monotonic() - started) < seconds:
            n += 1
            client.assoc_page(star, "followed_by", limit=20)
            if n % 3 == 0:
                client.obj_get(star)
            if math.sin(elapsed * 2) > 0.3 and n % 4 == 0:
                client.assoc_add(star, "likes", 10_000 + n)


def test_a_browser_logs_in_and_sees_every_page(console: Console) -> None:
    log_in(console)
    traffic(console, 6.0)
    wait_until(lambda: console.css("#live").get_attribute("data-updated") is not None, 30)
    wait_until(lambda: "assoc_page" in console.css("#live").text, 30)  # updated in place
    assert "db1" not in console.css("h1").text  # the graph's name is the map's file
    assert "cluster.toml" in console.css("h1").text
    assert console.css("#totals").text.count("follows") == 1
    console.shot("overview")
    for path, heading in (
        ("/admin/shards", "Shards"),
        ("/admin/queue", "Queue"),
        ("/admin/hot", "Hot keys"),
        ("/admin/deletions", "Deletions"),
        ("/admin/explore", "Explorer"),
        ("/admin/explore/sets", "Set query"),
    ):
        console.open(path)
        assert console.css("h1").text.startswith(heading), path
        console.shot(path.rsplit("/", 1)[1])
    console.open("/admin/hot")
    assert any(str(star_of(console)) in row.text for row in console.all("#hot tbody tr"))


def test_the_explorer_shows_data_as_text_follows_links_and_pages(console: Console) -> None:
    star = star_of(console)
    console.open("/admin/explore")
    console.css("#lookup").send_keys(str(star))
    console.css("#lookup").submit()
    data = console.wait_for("#data")
    assert EVIL.replace('"', "") in data.text.replace('\\"', "").replace('"', "")
    assert console.driver.title != "pwned"
    assert not console.all("#data script")
    assert not console.all("#data img")
    console.shot("explore")
    # the list of followers: 120 in all, 50 a page
    console.css("#lists a[href*='followed_by']").click()
    first = [a.text for a in console.wait_for("#items") and console.all("#items a.id")]
    assert len(first) == 50
    console.shot("list")
    console.css("a.next").click()
    wait_until(lambda: console.all("a.prev"), 30)
    second = [a.text for a in console.all("#items a.id")]
    assert len(second) == 50
    assert not set(first) & set(second)
    console.css("a.prev").click()
    wait_until(lambda: [a.text for a in console.all("#items a.id")] == first, 30)
    # each id is a link to its own page
    fan = first[0]
    console.css("#items a.id").click()
    wait_until(lambda: console.css("h2").text == fan, 30)
    assert "fan " in console.css("#data").text


def test_a_set_query_from_the_form(console: Console) -> None:
    star = star_of(console)
    console.open("/admin/explore/sets")
    console.css("input[name=a]").send_keys(str(star))
    console.css("input[name=b]").send_keys(str(star))
    from selenium.webdriver.support.ui import Select

    Select(console.css("select[name=a_type]")).select_by_visible_text("follows")
    Select(console.css("select[name=b_type]")).select_by_visible_text("followed_by")
    console.css("#run").click()
    console.wait_for("#items")
    mutual = {int(a.text) for a in console.all("#items a.id")}
    expected = set(
        console.graph.select(star, "follows") & console.graph.select(star, "followed_by")
    )
    assert mutual == expected
    assert len(mutual) == 40
    console.shot("sets")


def test_retry_moves_a_failed_job_out_of_the_error_queue(console: Console) -> None:
    g = console.graph
    backend = g.engine.backend
    assert isinstance(backend, ShardMapBackend)
    node = next(n for n in range(10, 1000) if shard_of(n, g.shards) == 0)

    def broken(shard: int, sql: str) -> None:
        if shard == 0 and sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            raise sqlite3.IntegrityError("constraint failed (injected)")

    members = [backend.member(r.backend) for r in backend.map.replicas[0]]
    for member in members:
        member.faults.append(broken)  # type: ignore[attr-defined]
    try:
        assert g.assoc_add(node, "likes", 7).status == "queued"
    finally:
        for member in members:
            member.faults.remove(broken)  # type: ignore[attr-defined]
    (job,) = g.queue_jobs("error")
    console.open("/admin/queue")
    row = console.wait_for(f"#job-{job.id}")
    assert "injected" in row.text
    console.shot("queue")
    console.css("#retry").click()
    assert "Retry every job" in console.wait_for("#what").text
    console.css("#confirm").click()
    console.wait_for("#note")

    def gone() -> bool:
        console.open("/admin/queue")
        return bool(console.all("#error-empty"))

    wait_until(gone, 30)
    assert [a.id2 for a in g.assoc_range(node, "likes")] == [7]


def test_marking_a_member_down_shows_it_drained(console: Console) -> None:
    console.open("/admin/shards")
    row = console.wait_for("#member-db2")
    assert "up" in row.find_element("css selector", ".state").text
    row.find_element("css selector", "button[value=mark-down]").click()
    assert "db2" in console.wait_for("#what").text
    console.shot("confirm")
    console.css("#confirm").click()
    console.wait_for("#note")
    state = console.css("#member-db2 .state").text
    assert state == "drained"
    assert "down = true" in console.cluster.read_text()
    console.shot("shards")
    console.css("#member-db2 button[value=mark-up]").click()
    console.wait_for("#confirm").click()
    console.wait_for("#note")
    assert console.css("#member-db2 .state").text in ("up", "down")  # back once a probe passes
    assert "down = true" not in console.cluster.read_text()


def test_every_page_reads_without_javascript(console: Console) -> None:
    star = star_of(console)
    console.driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        # An assoc_page call now, not the earlier tests': the live part covers the
        # last 30 samples only, and on a busy machine those ran longer ago than that.
        with Client(console.server.url, token=ADMIN) as client:
            client.assoc_page(star, "followed_by", limit=20)

        def live_lists_it() -> bool:
            console.open("/admin")  # the live part, rendered by the server
            return "assoc_page" in console.css("#live").text

        wait_until(live_lists_it)
        for path, seen in (
            ("/admin/shards", "db1"),
            ("/admin/queue", "Error queue"),
            ("/admin/hot", str(star)),
            (f"/admin/explore?id={star}", "followed_by"),
            (f"/admin/explore/list?id={star}&atype=followed_by", "older"),
        ):
            console.open(path)
            assert seen in console.css("main").text, path
    finally:
        console.driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})


def test_the_shards_page_shows_the_last_replica_verify(console: Console) -> None:
    report = console.graph.verify_replicas()
    console.open("/admin/shards")
    shown = console.wait_for("#verify").text
    assert f"{report.rows:,} rows read: 0 differences, not repaired" in shown
    assert "None." in console.css("#moves").text  # no copy under way
    console.shot("shards-verify")


def test_no_page_logs_a_severe_entry_and_logging_out_ends_the_session(
    console: Console,
) -> None:
    star = star_of(console)
    severe(console.driver)  # what the tests before said is theirs
    pages = [
        "/admin",
        "/admin/shards",
        "/admin/queue",
        "/admin/hot",
        "/admin/deletions",
        "/admin/explore",
        f"/admin/explore?id={star}",
        f"/admin/explore/list?id={star}&atype=followed_by",
        f"/admin/explore/sets?a={star}&a_type=follows&op=intersect&b={star}&b_type=followed_by",
        "/docs",
        "/",
    ]
    for path in pages:
        console.open(path)
        console.wait_for("body")
        assert severe(console.driver) == [], path
    console.open("/admin")
    console.css("form.logout button").click()
    console.wait_for("#token")
    assert not console.all("#problem")  # nothing went wrong: no red box
    console.open("/admin")
    assert console.all("#token")  # the login form again
    console.wait_for("body")
    log_in(console)
    assert severe(console.driver) == []
