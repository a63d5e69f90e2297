"""The console's guards over plain HTTP, against a real `assocdb serve` process:
401 without a token, 403 without the admin scope, actions only with a CSRF token,
a session cookie that is signed, HttpOnly, SameSite=Strict and holds no token."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

import assocdb
from assocdb.core.ids import shard_of
from assocdb.serve.auth import Tokens
from assocdb.serve.console.session import Sessions
from tests.support.http_server import ADMIN, READER, TOKENS, WRITER, Server

PAGES = [
    "/admin",
    "/admin/live",
    "/admin/shards",
    "/admin/queue",
    "/admin/hot",
    "/admin/deletions",
    "/admin/explore?id=1",
    "/admin/explore/list?id=1&atype=follows",
    "/admin/explore/sets?a=1&a_type=follows&op=intersect&b=2&b_type=follows",
]
ACTIONS = [
    ("/admin/queue", {"action": "retry"}),
    ("/admin/queue", {"action": "reinject-all"}),
    ("/admin/shards", {"action": "mark-down", "backend": "db1"}),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("console") / "graph"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_object("user")
        g.obj_delete(g.obj_add("user", {"name": "gone"}), cascade=True)
        assert g.deletions.wait(30)
    running = Server(directory)
    yield running
    running.stop()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@contextmanager
def logged_in(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url) as client:
        answer = client.post("/admin/login", data={"token": ADMIN})
        assert answer.status_code == 303
        yield client


def csrf_of(client: httpx.Client, page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(page).text)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_needs_an_admin_token(server: Server, page: str) -> None:
    nobody = httpx.get(server.url + page)
    assert nobody.status_code == 401
    assert 'action="/admin/login"' in nobody.text  # the login form, for a browser
    for token in (READER, WRITER):
        assert httpx.get(server.url + page, headers=bearer(token)).status_code == 403
    assert httpx.get(server.url + page, headers=bearer("not-a-known-token")).status_code == 401
    assert httpx.get(server.url + page, headers=bearer(ADMIN)).status_code == 200


@pytest.mark.parametrize(("path", "form"), ACTIONS)
def test_every_action_needs_an_admin_token(server: Server, path: str, form: dict[str, str]) -> None:
    confirmed = {**form, "confirm": "yes"}
    assert httpx.post(server.url + path, data=confirmed).status_code == 401
    for token in (READER, WRITER):
        assert (
            httpx.post(server.url + path, data=confirmed, headers=bearer(token)).status_code == 403
        )


def test_actions_of_a_session_need_its_csrf_token(server: Server) -> None:
    with logged_in(server) as client:
        action = {"action": "retry", "confirm": "yes"}
        assert client.post("/admin/queue", data=action).status_code == 403
        assert client.post("/admin/queue", data={**action, "csrf": "forged"}).status_code == 403
        token = csrf_of(client, "/admin/queue")
        done = client.post("/admin/queue", data={**action, "csrf": token})
        assert done.status_code == 303
        assert done.headers["location"].startswith("/admin/queue?note=")
        with logged_in(server) as other:  # another session's token is no good here
            assert (
                client.post(
                    "/admin/queue", data={**action, "csrf": csrf_of(other, "/admin/queue")}
                ).status_code
                == 403
            )


def test_an_action_asks_for_confirmation_first(server: Server) -> None:
    with logged_in(server) as client:
        token = csrf_of(client, "/admin/queue")
        asked = client.post("/admin/queue", data={"action": "retry", "csrf": token})
        assert asked.status_code == 200
        assert 'name="confirm" value="yes"' in asked.text
        assert "Retry every job" in asked.text


def test_a_script_acts_with_its_bearer_token_and_no_csrf(server: Server) -> None:
    answer = httpx.post(
        server.url + "/admin/queue",
        data={"action": "retry", "confirm": "yes"},
        headers=bearer(ADMIN),
    )
    assert answer.status_code == 303


def test_the_session_cookie_is_signed_httponly_strict_and_holds_no_token(server: Server) -> None:
    answer = httpx.post(server.url + "/admin/login", data={"token": ADMIN})
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert ADMIN not in cookie
    assert ADMIN not in str(answer.headers)
    value = cookie.split(";")[0].split("=", 1)[1]
    assert httpx.get(server.url + "/admin", cookies={"assocdb_console": value}).status_code == 200
    forged = value[:-4] + ("AAAA" if not value.endswith("AAAA") else "BBBB")
    assert httpx.get(server.url + "/admin", cookies={"assocdb_console": forged}).status_code == 401


def test_login_refuses_tokens_without_the_admin_scope(server: Server) -> None:
    assert httpx.post(server.url + "/admin/login", data={"token": READER}).status_code == 403
    wrong = httpx.post(server.url + "/admin/login", data={"token": "nope"})
    assert wrong.status_code == 401
    assert "set-cookie" not in wrong.headers


def test_logging_out_needs_csrf_and_ends_the_session(server: Server) -> None:
    with logged_in(server) as client:
        assert client.post("/admin/logout").status_code == 403
        assert (
            client.post("/admin/logout", data={"csrf": csrf_of(client, "/admin")}).status_code
            == 303
        )
        assert client.get("/admin").status_code == 401


def test_a_session_ends_when_its_token_is_no_longer_configured() -> None:
    key = b"k" * 32
    before = Sessions(Tokens.from_toml(TOKENS), key)
    cookie = before.login(ADMIN)
    assert before.check(cookie).name == "admin"
    rotated = TOKENS.replace(ADMIN, "another-admin-token-0123")
    with pytest.raises(assocdb.Unauthenticated):
        Sessions(Tokens.from_toml(rotated), key).check(cookie)
    with pytest.raises(assocdb.Unauthenticated):
        Sessions(Tokens.from_toml(TOKENS), b"x" * 32).check(cookie)  # another server's key


def test_pages_carry_a_strict_content_security_policy(server: Server) -> None:
    answer = httpx.get(server.url + "/admin", headers=bearer(ADMIN))
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert answer.headers["cache-control"] == "no-store"


def test_bad_input_is_a_clear_4xx_page(server: Server) -> None:
    for page, status in (
        ("/admin/explore?id=abc", 400),
        ("/admin/explore/list?id=1&atype=nosuchtype", 400),
        ("/admin/explore/list?id=1&atype=follows&cursor=garbage", 400),
    ):
        answer = httpx.get(server.url + page, headers=bearer(ADMIN))
        assert answer.status_code == status, page
        assert 'class="problem"' in answer.text


def test_shard_actions_on_a_graph_without_a_shard_map_are_refused(server: Server) -> None:
    answer = httpx.post(
        server.url + "/admin/shards",
        data={"action": "mark-down", "backend": "db1", "confirm": "yes"},
        headers=bearer(ADMIN),
    )
    assert answer.status_code == 400
    assert "no shard map" in answer.text


def test_sessions_hold_across_workers(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    assocdb.open(directory, shards=2).close()
    running = Server(directory, True, "--workers", "2")
    try:
        with logged_in(running) as client:
            assert all(client.get("/admin/queue").status_code == 200 for _ in range(12))
    finally:
        running.stop()


def test_lists_in_every_state_are_listed_with_links(server: Server) -> None:
    with assocdb.Client(server.url, token=ADMIN) as g:
        g.assoc_add(5, "follows", 6)
        g.assoc_add(5, "follows", 7)
        g.assoc_archive(5, "follows", 7)
    explore = httpx.get(server.url + "/admin/explore?id=5", headers=bearer(ADMIN))
    assert "state=archived" in explore.text
    listed = httpx.get(
        server.url + "/admin/explore/list?id=5&atype=follows&state=archived", headers=bearer(ADMIN)
    )
    assert listed.status_code == 200
    assert 'href="/admin/explore?id=7"' in listed.text
    assert 'href="/admin/explore?id=6"' not in listed.text


def test_a_form_posted_from_another_site_is_refused(server: Server) -> None:
    elsewhere = {"origin": "https://evil.example"}
    login = httpx.post(server.url + "/admin/login", data={"token": ADMIN}, headers=elsewhere)
    assert login.status_code == 403
    assert "set-cookie" not in login.headers
    ours = {"origin": server.url}
    assert (
        httpx.post(server.url + "/admin/login", data={"token": ADMIN}, headers=ours).status_code
        == 303
    )


def test_an_open_server_needs_no_login_but_still_csrf(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    assocdb.open(directory, shards=2).close()
    running = Server(directory, False)  # no tokens: loopback only, everyone is admin
    try:
        with httpx.Client(base_url=running.url) as client:
            page = client.get("/admin/queue")
            assert page.status_code == 200
            assert "assocdb_console" in client.cookies
            action = {"action": "retry", "confirm": "yes"}
            assert client.post("/admin/queue", data=action).status_code == 403
            token = csrf_of(client, "/admin/queue")
            assert client.post("/admin/queue", data={**action, "csrf": token}).status_code == 303
        # a page of another site posting to it has no session cookie (SameSite) and no token
        assert httpx.post(running.url + "/admin/queue", data=action).status_code == 403
    finally:
        running.stop()


def test_a_forged_cookie_or_csrf_token_with_non_ascii_text_is_refused(server: Server) -> None:
    """Not a 500: `hmac.compare_digest` raises TypeError for str with non-ASCII characters."""
    with logged_in(server) as client:
        action = {"action": "retry", "confirm": "yes"}
        assert client.post("/admin/queue", data={**action, "csrf": "é"}).status_code == 403
    encoded = base64.urlsafe_b64encode(b"x.1.y.z").rstrip(b"=")  # signed with "é"
    cookie = b"assocdb_console=" + encoded + ".é".encode()
    answer = httpx.get(f"{server.url}/admin", headers={"cookie": cookie})
    assert answer.status_code == 401


def test_logging_out_revokes_the_cookie_on_every_worker(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    assocdb.open(directory, shards=2).close()
    running = Server(directory, True, "--workers", "2")
    try:
        with logged_in(running) as client:
            copied = dict(client.cookies)  # what someone who saw the cookie keeps
            done = client.post("/admin/logout", data={"csrf": csrf_of(client, "/admin")})
            assert done.status_code == 303
        for _ in range(8):  # whichever worker answers
            with httpx.Client(base_url=running.url, cookies=copied) as thief:
                answer = thief.get("/admin")
                assert answer.status_code == 401
                assert "logged out" in answer.text
    finally:
        running.stop()


def test_a_first_visit_shows_the_form_without_an_error(server: Server) -> None:
    first = httpx.get(server.url + "/admin")
    assert first.status_code == 401
    assert 'action="/admin/login"' in first.text
    assert 'class="problem"' not in first.text
    stale = httpx.get(server.url + "/admin", cookies={"assocdb_console": "not.a.cookie"})
    assert 'class="problem"' in stale.text  # a cookie that failed says why
    # a browser is sent to the form (a 401 would be an error in its console), and back
    browser = {"accept": "text/html,application/xhtml+xml"}
    sent = httpx.get(server.url + "/admin/queue?x=1", headers=browser)
    assert sent.status_code == 303
    assert sent.headers["location"] == "/admin/login?next=%2Fadmin%2Fqueue%3Fx%3D1"
    form = httpx.get(server.url + sent.headers["location"], headers=browser)
    assert form.status_code == 200
    assert 'name="next" value="/admin/queue?x=1"' in form.text
    back = httpx.post(server.url + "/admin/login", data={"token": ADMIN, "next": "/admin/queue"})
    assert back.headers["location"] == "/admin/queue"
    elsewhere = {"token": ADMIN, "next": "https://elsewhere.example/"}
    assert httpx.post(server.url + "/admin/login", data=elsewhere).headers["location"] == "/admin"


def test_a_token_without_the_scope_is_told_in_words(server: Server) -> None:
    answer = httpx.get(server.url + "/admin", headers=bearer(WRITER))
    assert answer.status_code == 403
    assert "this token can read and write but not administer" in answer.text
    api = httpx.post(server.url + "/v1/assoc_add", json={}, headers=bearer(READER))
    assert api.json()["error"]["message"] == "this token can read but not write"


def test_the_icon_is_named_and_served_without_a_token(server: Server) -> None:
    page = httpx.get(server.url + "/admin", headers=bearer(ADMIN)).text
    assert 'rel="icon" href="/admin/static/favicon.svg"' in page
    assert 'rel="icon"' in httpx.get(server.url + "/docs").text
    for path in ("/admin/static/favicon.svg", "/favicon.ico"):
        icon = httpx.get(server.url + path)
        assert icon.status_code == 200, path
        assert icon.headers["content-type"] == "image/svg+xml"


def test_lists_and_sets_say_what_each_id_is_and_when(server: Server) -> None:
    with assocdb.Client(server.url, token=ADMIN) as g:
        g.define_object("person")
        ada = g.obj_add("person", {"name": "ada"})
        bob = g.obj_add("person", {"username": "bob"})
        g.assoc_add(ada, "follows", bob, time=1_764_340_526_123)
        g.assoc_add(bob, "follows", ada, time=7)  # a position, not a time
        g.assoc_add(ada, "follows", 424242, time=8)  # no object
        shard = shard_of(ada, 2)
        updated = g.obj_get(ada).updated_at  # type: ignore[union-attr]
    listed = httpx.get(
        server.url + f"/admin/explore/list?id={ada}&atype=follows", headers=bearer(ADMIN)
    ).text
    assert "person · bob" in listed
    assert "2025-11-28 14:35:26.123 UTC" in listed
    assert '<td class="what"></td>' in listed  # 424242
    back = httpx.get(
        server.url + f"/admin/explore/list?id={bob}&atype=follows", headers=bearer(ADMIN)
    )
    assert ">7</td>" in back.text
    sets = httpx.get(
        server.url
        + f"/admin/explore/sets?a={ada}&a_type=follows&op=difference&b={bob}&b_type=follows",
        headers=bearer(ADMIN),
    ).text
    assert "person · bob" in sets
    explore = httpx.get(server.url + f"/admin/explore?id={ada}", headers=bearer(ADMIN)).text
    assert f"shard {shard}</a> of 2" in explore
    when = datetime.fromtimestamp(updated / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert f">{when}." in explore


def test_the_overview_names_the_engine_once(server: Server) -> None:
    page = httpx.get(server.url + "/admin", headers=bearer(ADMIN)).text
    assert '<small id="what">sqlite · 2 shards</small>' in page


def test_the_deletions_page_lists_what_each_deletion_removed(server: Server) -> None:
    page = httpx.get(server.url + "/admin/deletions", headers=bearer(ADMIN))
    assert page.status_code == 200
    restorable = page.text.split("<h2>Restorable</h2>")[1].split("<h2>")[0]
    assert "1 user" in restorable
    assert "<td>done</td>" in restorable
