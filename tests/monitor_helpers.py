"""A user's script that runs a pool of actors, and ``parl-lite monitor`` watching it, for the
monitor's tests (API and browser)."""
import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

from devtools import find_chromium

CHROMIUM = find_chromium()
if CHROMIUM is None and os.environ.get("CI"):
    raise RuntimeError("CI must run the browser tests: .ci/run installs Debian's chromium package")

USER_SCRIPT = textwrap.dedent('''
    import json, os, sys
    import parl_lite

    @parl_lite.remote_class
    class Talker:
        def pid(self):
            return os.getpid()
        def say(self, text):
            print(text)
            return text
        def spam(self, count):
            for i in range(count):
                print(f"line {i}")
        def fail(self):
            raise ValueError("the input was bad")

    @parl_lite.remote_class
    class Counter:
        def __init__(self):
            self.count = 0
        def add(self):
            self.count += 1
            return os.getpid()

    # argument: the cluster's address; none: the local pool
    parl_lite.connect(sys.argv[1]) if len(sys.argv) > 1 else parl_lite.connect(num_workers=0)
    talker = Talker()
    counters = [Counter(), Counter()]
    print(json.dumps({"pid": os.getpid(), "talker": talker.pid(),
                      "counters": [counter.add() for counter in counters]}), flush=True)
    for command in sys.stdin:
        verb, _, rest = command.strip().partition(" ")
        if verb == "say":
            talker.say(rest)
        elif verb == "spam":
            talker.spam(int(rest))
        elif verb == "fail":
            try:
                talker.fail()
            except ValueError:
                pass
        elif verb == "quit":
            break
        print("done", flush=True)
    parl_lite.shutdown()
''')


class UserScript:
    """The user's script in a process of its own; ``info`` holds its pid and its actors' pids.

    Args:
        folder: where the script is written and run.
        address: a cluster's address to connect to (default: the local pool).
        env: the script's environment (default: this process's).
    """

    def __init__(self, folder, address: Optional[str] = None, env: Optional[Dict[str, str]] = None) -> None:
        path = folder / "user_script.py"
        path.write_text(USER_SCRIPT)
        self.process = subprocess.Popen([sys.executable, str(path), *([address] if address else [])],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=folder,
                                        env=env)
        self.info: Dict[str, Any] = json.loads(self.process.stdout.readline())

    def actor_id(self, worker_pid: int) -> str:
        return f"{self.info['pid']}-{worker_pid}"

    def send(self, command: str) -> None:
        """Run one command in the script and wait until it is done."""
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            assert line, "the user script exited"
            if line.strip() == "done":
                return

    def quit(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()


class MonitorProcess:
    """``parl-lite monitor`` on a free port; ``url`` is the page's address, ``token`` the printed
    token (when bound off 127.0.0.1)."""

    def __init__(self, *options: str) -> None:
        command = [sys.executable, "-m", "parl_lite.cli", "monitor", "--port", "0", *options]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.token: Optional[str] = None
        for line in self.process.stdout:
            if line.startswith("monitor token"):
                self.token = line.rsplit(" ", 1)[-1].strip()
            if "http://" in line:
                self.url = line[line.index("http://"):].split()[0]
                return
        raise AssertionError(f"parl-lite monitor exited with {self.process.wait()}")

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process.stdout.close()


def wait_until(probe: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    """Call ``probe`` until it returns something true (the pool republishes its status twice a
    second, so the monitor's view changes in steps); return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or probe}")
        time.sleep(0.05)


def actors_of(status: Dict[str, Any], client_pid: int) -> List[Dict[str, Any]]:
    """The actors of one client (other pools may run on this machine at the same time)."""
    return [actor for actor in status["actors"] if actor["client"] == str(client_pid)]


def request(url: str, data: Optional[bytes] = None, headers: Optional[Dict[str, str]] = None,
            method: Optional[str] = None) -> Tuple[int, Any, bytes]:
    """(status, headers, body) of one request, redirects not followed; HTTP errors are answers too."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, data=data, headers=headers or {}, method=method),
                         timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def rows_js(table: str, prefix: str = "") -> str:
    """JavaScript for the rows of a table of the page whose id starts with ``prefix``."""
    attribute = {"actors": "data-actor", "clients": "data-client", "nodes": "data-node"}[table]
    selector = f'{attribute}^=\"{prefix}\"' if prefix else attribute  # ^="" matches nothing
    return f"document.querySelectorAll('#{table} tbody tr[{selector}]')"
