"""The web monitor served by `parl-lite start`: a master and two nodes started through the CLI, a
user's script with actors on both, the JSON API with a plain HTTP client and the page in headless
Chromium."""
import json
import os
import shutil
import signal
import socket

import pytest

from backends import Cluster
from monitor_helpers import UserScript, request, rows_js, wait_until

pytestmark = pytest.mark.timeout(180)


def _master(cluster: Cluster) -> dict:
    return next(entry for entry in cluster.processes() if entry["role"] == "master")


def _status(url: str) -> dict:
    status_code, _, body = request(url + "api/status")
    assert status_code == 200, body
    return json.loads(body)


def _actors_by_pid(url: str) -> dict:
    return {actor["pid"]: actor for actor in _status(url)["actors"]}


def _start(cluster: Cluster, *options: str) -> str:
    """``parl-lite start --port 0 --cpus 0 OPTIONS``: a master alone; returns what start printed."""
    (cluster.folder / "master").mkdir(parents=True)
    printed = cluster.cli("start", "--port", "0", "--cpus", "0", *options, cwd=cluster.folder / "master").stdout
    cluster.address = _master(cluster)["address"]
    return printed


def test_the_monitor_of_a_master_and_two_nodes(cluster, tmp_path, browser):
    url = _master(cluster)["monitor"]
    port = int(cluster.address.rsplit(":", 1)[1])
    assert url and int(url.rstrip("/").rsplit(":", 1)[1]) != port
    script = UserScript(tmp_path, address=cluster.address, env=cluster.env)
    try:
        pids = [script.info["talker"], *script.info["counters"]]
        def all_alive():
            actors = _actors_by_pid(url)
            return actors if all(pid in actors and actors[pid]["state"] == "alive" for pid in pids) else None

        actors = wait_until(all_alive, what="the three actors alive in /api/status")
        status = _status(url)
        assert status["kind"] == "cluster" and status["address"] == cluster.address
        assert len(status["nodes"]) == 2 and all(node["alive"] for node in status["nodes"])
        assert len({actors[pid]["node"] for pid in pids}) == 2  # placed on both nodes
        client, = [client for client in status["clients"] if client["pid"] == script.info["pid"]]
        assert client["actors"] == 3
        per_node = {node: sum(actors[pid]["node"] == node for pid in pids) for node in client["nodes"]}
        assert client["nodes"] == per_node and sum(per_node.values()) == 3  # the run's actors per node

        # the JSON API: a printed line, the download, an unknown actor
        talker = actors[script.info["talker"]]["id"]
        script.send("say a line printed on a node")
        wait_until(lambda: "a line printed on a node" in json.loads(request(f"{url}api/logs/{talker}")[2])["lines"],
                   what="the printed line in /api/logs")
        status_code, headers, body = request(f"{url}api/logs/{talker}?download=1")
        assert status_code == 200 and "attachment" in headers["Content-Disposition"]
        assert "a line printed on a node" in body.decode()
        assert request(f"{url}api/logs/no-such-actor")[0] == 404

        # the page: two nodes, the three actors, the line, a killed actor turning dead
        browser.open(url)
        browser.evaluate("window.notReloaded = true")
        ids = [actors[pid]["id"] for pid in pids]
        rows = " && ".join(f"document.querySelector('tr[data-actor=\"{actor_id}\"]') !== null" for actor_id in ids)
        browser.wait_for(f"{rows_js('nodes')}.length === 2 && {rows}")
        assert browser.evaluate("document.getElementById('source').textContent") == f"cluster {cluster.address}"
        shown = ", ".join(f"{node}: {count}" for node, count in sorted(client["nodes"].items()))
        browser.wait_for(f"{rows_js('clients', client['id'])}[0].cells[5].textContent === {shown!r}")
        browser.evaluate(f"document.querySelector('tr[data-actor=\"{talker}\"]').click()")
        browser.wait_for("document.getElementById('log').textContent.includes('a line printed on a node')")
        killed = actors[script.info["counters"][0]]["id"]
        os.kill(script.info["counters"][0], signal.SIGKILL)
        browser.wait_for(f"document.querySelector('tr[data-actor=\"{killed}\"]').dataset.state === 'dead'")
        assert browser.evaluate(f"document.querySelector('tr[data-actor=\"{talker}\"]').dataset.state") == "alive"
        assert browser.evaluate("window.notReloaded") is True
        screenshot = tmp_path / "monitor_cluster.png"
        browser.screenshot(screenshot)
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("PARL_LITE_MONITOR_SCREENSHOT"):  # to refresh the README's picture
            shutil.copy(screenshot, os.environ["PARL_LITE_MONITOR_SCREENSHOT"])
    finally:
        script.quit()


def test_no_monitor_and_the_token_off_loopback(tmp_path):
    quiet = Cluster(tmp_path / "quiet")
    printed = _start(quiet, "--no-monitor")
    try:
        assert _master(quiet)["monitor"] is None and "web monitor" not in printed
    finally:
        quiet.stop()

    exposed = Cluster(tmp_path / "exposed")
    printed = _start(exposed, "--host", "127.0.0.2")
    try:
        url = _master(exposed)["monitor"]
        assert url.startswith("http://127.0.0.2:")
        assert f"web monitor: {url} (asks for the cluster token)" in printed
        assert request(url + "api/status")[0] == 401
        status_code, _, body = request(url)
        assert status_code == 401 and b'name="token"' in body
        token = (exposed.home / "token").read_text().strip()
        assert request(url + "api/status", headers={"Authorization": f"Bearer {token}"})[0] == 200
    finally:
        exposed.stop()


def test_a_taken_monitor_port_is_a_clear_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cluster = Cluster(tmp_path)
        result = cluster.cli("start", "--port", "0", "--cpus", "0", "--monitor-port", str(taken.getsockname()[1]),
                             check=False)
    assert result.returncode != 0
    assert "cannot serve the web monitor" in result.stderr and "--no-monitor" in result.stderr
