"""Headless Chromium driven through the DevTools protocol over a pipe (no driver, no websocket).

With ``--remote-debugging-pipe`` Chromium reads protocol commands from its fd 3 and writes replies
and events to its fd 4, each message JSON ending in a NUL byte. That is all a test needs: open a
page, wait until a condition on the page holds (awaited in the page on DOM mutations, not polled
from here), read values, take a screenshot.
"""
import base64
import collections
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Dict, Optional

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--remote-debugging-pipe", "--hide-scrollbars",
]


def find_chromium() -> Optional[str]:
    """Path of Debian's ``chromium`` (or another Chromium on PATH), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class DevToolsError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Chromium:
    """A headless Chromium with a fresh profile; use as a context manager.

    Args:
        executable: the browser binary.
        width, height: size of the window (and of screenshots) in CSS pixels.
    """

    def __init__(self, executable: str, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="parl_lite_chromium_")
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def plug_pipes() -> None:  # in the child: our pipe ends become its fds 3 and 4
            read_end, write_end = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        command = [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}",
                   f"--window-size={width},{height}", "about:blank"]
        self.process = subprocess.Popen(command, preexec_fn=plug_pipes, close_fds=False,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._events: "collections.deque[Dict[str, Any]]" = collections.deque(maxlen=1000)
        self._next_id = 0
        self._session: Optional[str] = None

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def command(self, method: str, params: Optional[Dict[str, Any]] = None, timeout: float = 20,
                session: bool = True) -> Dict[str, Any]:
        """Send one protocol command (to the open page unless ``session`` is false); return its result."""
        self._next_id += 1
        message: Dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self._session is not None:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline, method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise DevToolsError(f"{method}: {reply['error']}")
                return reply["result"]
            if "method" in reply:
                self._events.append(reply)

    def wait_for_event(self, method: str, timeout: float = 20) -> Dict[str, Any]:
        """Wait for the next event ``method`` (e.g. ``Page.loadEventFired``) and return its params."""
        deadline = time.monotonic() + timeout
        while True:
            while self._events:
                event = self._events.popleft()
                if event["method"] == method:
                    return event.get("params", {})
            message = self._receive(deadline, method)
            if "method" in message:
                self._events.append(message)

    def _receive(self, deadline: float, method: str) -> Dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([self._from_browser], [], [], max(remaining, 0))
            if not readable:
                raise DevToolsError(f"{method}: no answer from the browser in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise DevToolsError(f"{method}: the browser exited")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def open(self, url: str) -> None:
        """Open ``url`` in a new tab that later commands go to, and wait until it has loaded."""
        target = self.command("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self._session = self.command("Target.attachToTarget", {"targetId": target, "flatten": True},
                                     session=False)["sessionId"]
        self.command("Page.enable")
        self.navigate(url)

    def navigate(self, url: str) -> None:
        """Load ``url`` in the open tab and wait for its load event."""
        self.command("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete'")

    def submit(self, form_selector: str) -> None:
        """Submit a form of the page and wait until the page it leads to has loaded."""
        self._events.clear()
        self.evaluate(f"setTimeout(() => document.querySelector({json.dumps(form_selector)}).submit(), 0)")
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str, timeout: float = 20) -> Any:
        """The value of a JavaScript expression in the page (promises are awaited)."""
        result = self.command("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                   "returnByValue": True}, timeout=timeout)
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, condition: str, timeout: float = 30) -> None:
        """Wait until the JavaScript expression ``condition`` is true; checked in the page whenever
        the DOM changes.

        Raises:
            DevToolsError: still false after ``timeout`` seconds.
        """
        script = f"""new Promise(resolve => {{
            const check = () => {{ try {{ return Boolean({condition}); }} catch (e) {{ return false; }} }};
            if (check()) return resolve(true);
            const observer = new MutationObserver(() => {{
                if (check()) {{ observer.disconnect(); resolve(true); }}
            }});
            observer.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
            document.addEventListener("readystatechange", () => {{ if (check()) resolve(true); }});
            setTimeout(() => {{ observer.disconnect(); resolve(check()); }}, {int(timeout * 1000)});
        }})"""
        if not self.evaluate(script, timeout=timeout + 10):
            raise DevToolsError(f"still false after {timeout} s: {condition}")

    def screenshot(self, path: "str | os.PathLike") -> None:
        """Write a PNG of the whole page to ``path``."""
        metrics = self.command("Page.getLayoutMetrics")["cssContentSize"]
        data = self.command("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": metrics["width"], "height": metrics["height"], "scale": 1},
        })["data"]
        with open(path, "wb") as image:
            image.write(base64.b64decode(data))

    def close(self) -> None:
        """Close the browser (killing it if it does not exit) and remove its profile."""
        try:
            self.command("Browser.close", session=False, timeout=5)
        except (DevToolsError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:  # the browser's own session: its renderer and helper processes, should any be left
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        for descriptor in (self._to_browser, self._from_browser):
            os.close(descriptor)
        shutil.rmtree(self._profile, ignore_errors=True)
