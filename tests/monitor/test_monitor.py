"""The web monitor's JSON API and its security, with a plain HTTP client against `parl-lite monitor`
watching a real pool in another process."""
import os
import signal
import subprocess
import urllib.parse
import warnings

import pytest

from monitor_helpers import MonitorProcess, UserScript, actors_of, request, wait_until
from parl_lite.ext.monitor.local import LocalPools
from parl_lite.ext.monitor.server import MonitorServer
from parl_lite.remote.actor_log import ActorLogs, read_actor_log, runtime_folder
from parl_lite.remote.status import StatusBoard
from remote_helpers import wait_for_exit

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def user_script(tmp_path):
    script = UserScript(tmp_path)
    yield script
    script.quit()


@pytest.fixture
def monitor():
    process = MonitorProcess()
    yield process
    process.stop()


def _status_when(monitor, condition, what):
    """The first status from /api/status that satisfies ``condition``."""
    def probe():
        status = monitor.get_json("/api/status")
        return status if condition(status) else None
    return wait_until(probe, what=what)


def _actors_by_pid(status, client_pid):
    return {actor["pid"]: actor for actor in actors_of(status, client_pid)}


def test_status_and_logs_of_a_pool_in_another_process(user_script, monitor):
    pid = user_script.info["pid"]
    status = _status_when(monitor, lambda s: len(actors_of(s, pid)) == 3, "the three actors in /api/status")
    assert status["kind"] == "local" and status["address"] is None
    node, = status["nodes"]
    assert node["cpus_total"] == os.cpu_count() and 0 <= node["cpus_used"] <= node["cpus_total"]
    assert 0 < node["mem_used_mb"] < node["mem_total_mb"] and node["alive"] and node["load"]
    client, = [client for client in status["clients"] if client["pid"] == pid]
    assert client["script"].endswith("user_script.py") and client["actors"] == 3
    actors = _actors_by_pid(status, pid)
    assert actors[user_script.info["talker"]]["class"] == "Talker"
    for counter in user_script.info["counters"]:
        assert actors[counter]["class"] == "Counter" and actors[counter]["state"] == "alive"
        assert actors[counter]["calls_served"] == 2 and actors[counter]["rss_mb"] > 0

    talker = user_script.actor_id(user_script.info["talker"])
    user_script.send("say hello from the talker")
    user_script.send("fail")
    wait_until(lambda: "hello from the talker" in monitor.get_json(f"/api/logs/{talker}")["lines"],
               what="the printed line in /api/logs")
    assert monitor.get_json(f"/api/logs/{talker}")["actor"] == talker
    status = _status_when(monitor, lambda s: _actors_by_pid(s, pid)[user_script.info["talker"]]["last_error"],
                          "the last error")
    errors = [actor["last_error"] for actor in actors_of(status, pid) if actor["last_error"]]
    assert errors == ["ValueError: the input was bad"]

    # the log keeps the last 500 lines; the download is the same lines as a file
    user_script.send("spam 600")
    expected = [f"line {i}" for i in range(100, 600)]
    wait_until(lambda: monitor.get_json(f"/api/logs/{talker}")["lines"] == expected, what="the last 500 lines")
    status_code, headers, body = request(f"{monitor.url}api/logs/{talker}?download=1")
    assert status_code == 200 and headers["Content-Type"].startswith("text/plain")
    assert "attachment" in headers["Content-Disposition"]
    assert body.decode().splitlines() == expected

    # a killed actor is listed as dead, with the others still alive
    killed = user_script.info["counters"][0]
    os.kill(killed, signal.SIGKILL)
    status = _status_when(monitor, lambda s: _actors_by_pid(s, pid)[killed]["state"] == "dead",
                          "the killed actor's state")
    assert _actors_by_pid(status, pid)[user_script.info["counters"][1]]["state"] == "alive"

    # when the script ends its pool, its client leaves the monitor and its log folder is gone
    user_script.quit()
    _status_when(monitor, lambda s: all(client["pid"] != pid for client in s["clients"]), "the client to leave")
    assert not os.path.exists(os.path.join(runtime_folder(), f"pool-{pid}"))


def test_pid_shows_only_that_pool(user_script):
    pid = user_script.info["pid"]
    only_it, only_another = MonitorProcess("--pid", str(pid)), MonitorProcess("--pid", "1")
    try:
        status = _status_when(only_it, lambda s: len(s["actors"]) == 3, "the pool's three actors")
        assert [client["pid"] for client in status["clients"]] == [pid]
        assert only_another.get_json("/api/status")["clients"] == []
        talker = user_script.actor_id(user_script.info["talker"])
        assert request(f"{only_another.url}api/logs/{talker}")[0] == 404
    finally:
        only_it.stop()
        only_another.stop()


def test_unknown_actor_writes_and_foreign_hosts_are_refused(monitor):
    assert request(f"{monitor.url}api/logs/1-2")[0] == 404
    assert request(f"{monitor.url}api/logs/..%2F..%2Fetc%2Fpasswd")[0] == 404
    assert request(f"{monitor.url}nothing")[0] == 404
    assert request(f"{monitor.url}static/../server.py")[0] == 404
    assert request(f"{monitor.url}api/status", data=b"x", method="POST")[0] == 405
    # a page of another site reaching 127.0.0.1 through DNS rebinding names its own host
    assert request(f"{monitor.url}api/status", headers={"Host": "evil.example:80"})[0] == 421
    status_code, headers, body = request(monitor.url)
    assert status_code == 200 and b"parl_lite monitor" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]


def test_a_planted_status_does_not_hide_the_real_pools(user_script, monitor):
    # anyone can create names in /dev/shm: a status in the right format but not a pool's (here under
    # the pid of a process of ours that runs no pool) is left out, and the real pool is still shown
    bystander = subprocess.Popen(["sleep", "60"])
    board = StatusBoard(bystander.pid)
    try:
        board.publish({"workers": "not a list", "started_at": "yesterday"})
        status = _status_when(monitor, lambda s: len(actors_of(s, user_script.info["pid"])) == 3, "the real pool")
        assert all(client["pid"] != bystander.pid for client in status["clients"])
        assert request(f"{monitor.url}api/logs/{bystander.pid}-1")[0] == 404
    finally:
        board.close()
        bystander.kill()
        bystander.wait()


def test_off_loopback_the_token_is_asked_for():
    with pytest.raises(ValueError, match="needs a token"):
        MonitorServer(LocalPools(), host="0.0.0.0", port=0)
    with MonitorServer(LocalPools(), host="127.0.0.2", port=0, token="s3cret-token") as server:
        status_url = f"{server.url}api/status"
        assert request(status_url)[0] == 401
        assert request(status_url, headers={"Authorization": "Bearer wrong"})[0] == 401
        assert request(status_url, headers={"Authorization": "Bearer s3cret-token"})[0] == 200
        status_code, _, body = request(server.url)
        assert status_code == 401 and b'name="token"' in body  # the login form

        assert request(f"{server.url}login", data=b"token=" + b"x" * 5000)[0] == 400
        status_code, _, body = request(f"{server.url}login", data=b"token=wrong")
        assert status_code == 401 and b"not right" in body
        status_code, headers, _ = request(f"{server.url}login",
                                           data=urllib.parse.urlencode({"token": "s3cret-token"}).encode())
        assert status_code == 303 and headers["Location"] == "/"
        cookie = headers["Set-Cookie"].split(";")[0]
        assert "s3cret-token" not in cookie and "HttpOnly" in headers["Set-Cookie"]
        assert request(status_url, headers={"Cookie": cookie})[0] == 200
        assert request(status_url, headers={"Cookie": cookie + "x"})[0] == 401


def test_the_command_prints_a_token_when_not_on_loopback():
    process = MonitorProcess("--host", "127.0.0.2")
    try:
        assert process.token and len(process.token) >= 24
        assert request(f"{process.url}api/status")[0] == 401
        assert request(f"{process.url}api/status", headers={"Authorization": f"Bearer {process.token}"})[0] == 200
    finally:
        process.stop()
    assert wait_for_exit(process.process.pid, timeout=5)


def test_a_runtime_folder_planted_by_someone_else_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "parl_lite").symlink_to(elsewhere)
    with pytest.raises(PermissionError, match="not a private folder"):
        runtime_folder(create=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logs = ActorLogs(os.getpid())
    assert logs.folder is None and "not kept for the monitor" in str(caught[0].message)
    logs.record(123, "still kept in memory\n")
    logs.flush()  # writes nothing, raises nothing
    assert logs.lines(123) == ["still kept in memory"] and os.listdir(elsewhere) == []
    with pytest.raises(PermissionError):
        read_actor_log(os.getpid(), 123)

    (tmp_path / "parl_lite").unlink()
    (tmp_path / "parl_lite").mkdir(mode=0o755)  # a real folder, but open to others
    os.chmod(tmp_path / "parl_lite", 0o755)
    with pytest.raises(PermissionError):
        runtime_folder()


def test_actor_logs_are_private_files_in_a_private_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    logs = ActorLogs(os.getpid())
    try:
        logs.record(77, "one\ntwo\n")
        logs.flush()
        assert read_actor_log(os.getpid(), 77) == ["one", "two"]
        folder = tmp_path / "parl_lite"
        assert folder.stat().st_mode & 0o777 == 0o700
        assert (folder / f"pool-{os.getpid()}").stat().st_mode & 0o777 == 0o700
        assert (folder / f"pool-{os.getpid()}" / "77.log").stat().st_mode & 0o777 == 0o600
        # a log replaced by a symlink (only root could, in a private folder) is not followed
        target = tmp_path / "secret"
        target.write_text("not a log\n")
        os.unlink(folder / f"pool-{os.getpid()}" / "77.log")
        os.symlink(target, folder / f"pool-{os.getpid()}" / "77.log")
        with pytest.raises(OSError):
            read_actor_log(os.getpid(), 77)
    finally:
        logs.close()
    assert not (tmp_path / "parl_lite" / f"pool-{os.getpid()}").exists()


def test_folders_of_pools_whose_process_is_gone_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / "parl_lite" / f"pool-{gone.pid}"
    stale.mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "parl_lite", 0o700)
    (stale / "5.log").write_text("from a pool killed before its shutdown\n")
    logs = ActorLogs(os.getpid())
    try:
        assert not stale.exists() and os.path.isdir(logs.folder)
    finally:
        logs.close()



def test_a_log_is_bounded_in_lines_and_in_size(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    logs = ActorLogs(os.getpid())
    try:
        logs.record(9, "".join(f"short {i}\n" for i in range(600)))
        assert logs.lines(9) == [f"short {i}" for i in range(100, 600)]
        logs.record(9, ("x" * 3000 + "\n") * 300)  # each line cut at 2,000 characters
        kept = logs.lines(9)
        assert set(kept) == {"x" * 2000} and len(kept) == 256 * 1024 // 2001
        logs.flush()
        assert os.path.getsize(os.path.join(logs.folder, "9.log")) <= 256 * 1024
        assert read_actor_log(os.getpid(), 9) == kept
    finally:
        logs.close()
