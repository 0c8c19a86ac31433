"""The monitor's HTTP server (standard library): the page, its assets and the JSON API.

Routes (all read-only):
    ``GET /``                       the page (or the login form when a token is needed)
    ``GET /static/<file>``          the page's script and style sheet, shipped in this package
    ``GET /api/status``             the status dict (``docs/monitor.md``, "JSON API")
    ``GET /api/logs/<actor>``       ``{"actor": id, "lines": [...]}``: the actor's last 500 lines;
                                    ``?download=1`` sends them as a text file
    ``POST /login``                 the login form: sets a session cookie if the token is right

Bound to a loopback address without a token, it answers only requests whose ``Host`` names that
loopback address (a web page elsewhere cannot read it through DNS rebinding). Bound anywhere else,
it needs the token: a ``Authorization: Bearer <token>`` header, or the cookie the login form sets.
Tokens are compared in constant time.

What a client may hold is bounded, since the monitor may share its process with a cluster master:
at most ``max_connections`` connections (and threads) at once, a new one over the cap dropping the
oldest, and ``request_timeout`` seconds for each request from the moment the server waits for it
to the end of its response (a keep-alive connection idle that long is closed too).
"""
import errno
import hashlib
import hmac
import http.cookies
import json
import socket
import threading
import time
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Protocol

__all__ = ["MonitorServer", "StatusSource", "LOOPBACK_HOSTS"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_STATIC_FILES = {  # the only files served from static/
    "index.html": "text/html; charset=utf-8",
    "login.html": "text/html; charset=utf-8",
    "monitor.js": "text/javascript; charset=utf-8",
    "monitor.css": "text/css; charset=utf-8",
}
_COOKIE = "parl_lite_monitor"
_MAX_FORM_BYTES = 4096
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class StatusSource(Protocol):
    """What the monitor shows: the local pools, or a cluster master."""

    def status(self) -> dict[str, Any]:
        """The status dict (``docs/monitor.md``, "JSON API")."""

    def logs(self, actor_id: str) -> list[str]:
        """The last output lines of actor ``actor_id``, oldest first; ``KeyError`` if unknown."""


class MonitorServer(ThreadingHTTPServer):
    """Serves the monitor of ``source`` in background threads.

    Args:
        source: where the status and the logs come from.
        host: address to bind (default 127.0.0.1).
        port: port to bind (0: any free port; see :attr:`url`).
        token: the token a client must present (the cluster's token, as text or its UTF-8 bytes);
            required unless ``host`` is a loopback name.
        max_connections: connections held at once (see the module docstring).
        request_timeout: seconds for one request and its response (see the module docstring).

    Raises:
        ValueError: ``host`` is not a loopback name and no token was given.
        OSError: the address cannot be bound (e.g. the port is taken).
    """

    daemon_threads = True

    def __init__(self, source: StatusSource, host: str = "127.0.0.1", port: int = 0,
                 token: str | bytes | None = None, max_connections: int = 32,
                 request_timeout: float = 10.0) -> None:
        if host not in LOOPBACK_HOSTS and not token:
            raise ValueError(f"the monitor bound to {host!r} (not 127.0.0.1) needs a token that clients "
                             "must present")
        self.source = source
        self.token: bytes | None = token.encode() if isinstance(token, str) else token or None
        self.session = (hmac.new(self.token, b"parl_lite monitor session", hashlib.sha256).hexdigest().encode()
                        if self.token else None)
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self._open: dict[socket.socket, float] = {}  # connection -> when its request began; oldest first
        self._open_lock = threading.Lock()
        super().__init__((host, port), _Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The page's address (with the port actually bound)."""
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    def start(self) -> "MonitorServer":
        """Serve in a background thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name="parl_lite-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
        self.server_close()

    # --- bounds on what clients hold (socketserver's hooks) ------------------------------------
    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as error:  # socketserver skips it; out of descriptors: do not spin meanwhile
            if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                time.sleep(0.05)
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            while len(self._open) >= self.max_connections:
                self._cut(next(iter(self._open)))
            self._open[request] = time.monotonic()
        try:
            super().process_request(request, client_address)  # a thread that handles it
        except RuntimeError:  # no thread can be started now
            self.shutdown_request(request)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self) -> None:
        """Close connections whose request has taken longer than ``request_timeout`` (serve_forever
        calls this twice a second)."""
        now = time.monotonic()
        with self._open_lock:
            for connection in [c for c, began in self._open.items() if now - began > self.request_timeout]:
                self._cut(connection)

    def request_began(self, connection: socket.socket) -> None:
        """The handler waits for the next request on ``connection`` from now."""
        with self._open_lock:
            if connection in self._open:
                self._open[connection] = time.monotonic()

    def _cut(self, connection: socket.socket) -> None:
        """Stop ``connection`` (its handler thread sees it end and closes it); the lock is held."""
        del self._open[connection]
        try:
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def __enter__(self) -> "MonitorServer":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    server: MonitorServer
    server_version = "parl_lite-monitor"
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds an idle or slow connection may hold its thread

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # a page polling every 2 s would flood the terminal

    def handle_one_request(self) -> None:
        self.server.request_began(self.connection)
        super().handle_one_request()

    # --- routes ---------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 (the base class's naming)
        if not self._host_allowed():
            return self._send_json(HTTPStatus.MISDIRECTED_REQUEST, {"error": "unexpected Host header"})
        url = urllib.parse.urlsplit(self.path)
        if url.path.startswith("/static/"):
            return self._send_static(url.path[len("/static/"):])
        if not self._authenticated():
            if url.path.startswith("/api/"):
                return self._send_json(HTTPStatus.UNAUTHORIZED, {"error": "the cluster token is needed"})
            return self._send_static("login.html", HTTPStatus.UNAUTHORIZED)
        if url.path in ("/", "/index.html"):
            return self._send_static("index.html")
        if url.path == "/api/status":
            try:
                status = self.server.source.status()
            except Exception as exc:  # e.g. the cluster master cannot be reached: say so, keep serving
                return self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"{type(exc).__name__}: {exc}"})
            return self._send_json(HTTPStatus.OK, status)
        if url.path.startswith("/api/logs/"):
            actor_id = urllib.parse.unquote(url.path[len("/api/logs/"):])
            download = urllib.parse.parse_qs(url.query).get("download") == ["1"]
            return self._send_logs(actor_id, download)
        self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})

    def do_POST(self) -> None:  # noqa: N802
        if not self._host_allowed():
            return self._send_json(HTTPStatus.MISDIRECTED_REQUEST, {"error": "unexpected Host header"})
        if urllib.parse.urlsplit(self.path).path != "/login" or self.server.token is None:
            return self._send_json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "the monitor is read-only"})
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > _MAX_FORM_BYTES:
            self.close_connection = True  # the body, if any, is not read
            return self._send_json(HTTPStatus.BAD_REQUEST,
                                   {"error": f"a login form of at most {_MAX_FORM_BYTES} bytes"})
        form = urllib.parse.parse_qs(self.rfile.read(int(length)).decode(errors="replace"))
        given = form.get("token", [""])[0]
        if not hmac.compare_digest(given.encode(), self.server.token):
            return self._send_static("login.html", HTTPStatus.UNAUTHORIZED, failed=True)
        self.send_response(HTTPStatus.SEE_OTHER)
        self.send_header("Location", "/")
        assert self.server.session is not None  # there is a token
        self.send_header("Set-Cookie", f"{_COOKIE}={self.server.session.decode()}; HttpOnly; SameSite=Strict; Path=/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send_logs(self, actor_id: str, download: bool) -> None:
        try:
            lines = self.server.source.logs(actor_id)
        except KeyError:
            return self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no actor {actor_id!r}"})
        except Exception as exc:  # as for the status: say what failed, keep serving
            return self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"{type(exc).__name__}: {exc}"})
        if not download:
            return self._send_json(HTTPStatus.OK, {"actor": actor_id, "lines": lines})
        filename = "".join(c if c.isalnum() or c in "-_." else "_" for c in actor_id) + ".log"
        self._send(HTTPStatus.OK, "".join(line + "\n" for line in lines).encode(), "text/plain; charset=utf-8",
                   {"Content-Disposition": f'attachment; filename="{filename}"'})

    # --- checks ---------------------------------------------------------------------------------
    def _host_allowed(self) -> bool:
        if self.server.token is not None:
            return True  # the token protects it; the Host may be any name of this machine
        host, port = self.server.server_address[:2]
        names = {f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")}
        return self.headers.get("Host", "") in names

    def _authenticated(self) -> bool:
        token, session = self.server.token, self.server.session
        if token is None or session is None:  # both or neither
            return True
        scheme, _, given = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token):
            return True
        return hmac.compare_digest(_cookie(self.headers.get("Cookie", ""), _COOKIE).encode(), session)

    # --- responses ------------------------------------------------------------------------------
    def _send_static(self, name: str, status: HTTPStatus = HTTPStatus.OK, failed: bool = False) -> None:
        if name not in _STATIC_FILES:
            return self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no such file: {name}"})
        body = resources.files(__package__).joinpath("static").joinpath(name).read_bytes()
        if name == "login.html":
            body = body.replace(b"<!--failed-->", b"<p class=error>That token is not right.</p>" if failed else b"")
        self._send(status, body, _STATIC_FILES[name])

    def _send_json(self, status: HTTPStatus, value: Any) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**_SECURITY_HEADERS, **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _cookie(header: str, name: str) -> str:
    """The value of cookie ``name`` in a ``Cookie`` header ('' if absent or unreadable)."""
    cookies = http.cookies.SimpleCookie()
    try:
        cookies.load(header)
    except http.cookies.CookieError:
        return ""
    morsel = cookies.get(name)
    return morsel.value if morsel is not None else ""
