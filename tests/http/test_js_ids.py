"""Ids above 2^53 read and written by real JavaScript (node's fetch and JSON.parse)
against a real `assocdb serve`: with `X-Assocdb-Ids: string` (or `?ids=string`)
every id is a string, exact; without it JSON.parse rounds them."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import assocdb
from tests.support.http_server import WRITER, Server

BIG = 7562451325520991901  # JSON.parse reads 7562451325520992000
OTHER = 7562451325520991777

SCRIPT = r"""
const [url, token, big, other] = process.argv.slice(2);
const post = async (path, body, headers = {}) => {
  const r = await fetch(url + path, {
    method: "POST",
    headers: {"Content-Type": "application/json", Authorization: "Bearer " + token, ...headers},
    body: JSON.stringify(body),
  });
  return JSON.parse(await r.text());
};
const asStrings = {"X-Assocdb-Ids": "string"};
const out = {};
await post("/v1/obj_add", {otype: "user", data: {name: "ada"}, id: big}, asStrings);
await post("/v1/assoc_add", {id1: big, atype: "follows", id2: other}, asStrings);
out.obj = (await post("/v1/obj_get", {id: big}, asStrings)).result;
out.range = (await post("/v1/assoc_range?ids=string", {id1: big, atype: "follows"})).result;
out.inverse = (await post("/v1/assoc_range", {id1: other, atype: "followed_by"}, asStrings)).result;
out.batch = (await post("/v1/batch", {requests: [
  {method: "assoc_get", args: {id1: big, atype: "follows", id2s: [other]}},
]}, asStrings)).results;
const plain = await fetch(url + "/v1/assoc_range", {
  method: "POST",
  headers: {"Content-Type": "application/json", Authorization: "Bearer " + token},
  body: '{"id1": ' + big + ', "atype": "follows"}',  // the id as a JSON number
});
out.rounded = String(JSON.parse(await plain.text()).result[0].id1);
console.log(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("js") / "graph"
    with assocdb.open(directory, shards=4) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_object("user")
    running = Server(directory)
    yield running
    running.stop()


def test_javascript_reads_and_writes_big_ids_exactly(server: Server, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = tmp_path / "ids.mjs"
    script.write_text(SCRIPT)
    run = subprocess.run(
        [node, str(script), server.url, WRITER, str(BIG), str(OTHER)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["obj"]["id"] == str(BIG)
    assert out["obj"]["data"] == {"name": "ada"}
    assert isinstance(out["obj"]["version"], int)  # only ids become strings
    [edge] = out["range"]
    assert (edge["id1"], edge["id2"]) == (str(BIG), str(OTHER))
    assert isinstance(edge["time"], int)
    [inverse] = out["inverse"]
    assert (inverse["id1"], inverse["id2"]) == (str(OTHER), str(BIG))
    [[got]] = [item["result"] for item in out["batch"]]
    assert got["id2"] == str(OTHER)
    # without the header, JavaScript's own JSON.parse rounds the id: the reason for it
    assert out["rounded"] == "7562451325520992000"


def test_the_python_client_still_gets_ints(server: Server) -> None:
    with assocdb.Client(server.url, token=WRITER) as c:
        c.assoc_add(BIG, "follows", OTHER + 1)
        assert c.assoc_get(BIG, "follows", [OTHER + 1])[0].id2 == OTHER + 1


def test_a_string_id_without_the_header_says_how(server: Server) -> None:
    headers = {"authorization": f"Bearer {WRITER}"}
    body = {"id1": str(BIG), "atype": "follows"}
    response = httpx.post(f"{server.url}/v1/assoc_count", json=body, headers=headers)
    assert response.status_code == 400
    assert "X-Assocdb-Ids: string" in response.json()["error"]["message"]
