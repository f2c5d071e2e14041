"""The scheduler's HTTP endpoint: `/metrics` (the Prometheus text format of runtime.kube.metrics),
`/healthz` (200 while the scheduling loop ticks and its cycles succeed, 500 with the reason
otherwise), `/readyz` (200 once the cache has listed everything, 503 with the reason otherwise),
`/policy` (the active policy as JSON, runtime/service/reload.py, without file paths or the text
of reload errors) when given one, and the read-only views' routes.

    metrics = Metrics()
    server = MetricsServer("127.0.0.1:8080", metrics, ready=lambda: cache.synced, healthy=loop.alive)
    server.start(); ...; server.stop()

Hostile clients (issue 30): each connection must send its whole request (line and headers,
HTTP/1.0, one request per connection, no body read) within `read_timeout` seconds, or it is
closed; at most `max_connections` are served at once, and `probe_connections` more are kept
for `/healthz` and `/readyz` (anything else on them is answered 503), beyond which a
connection is answered 503 at once and closed; only GET and HEAD (405 with `Allow`
otherwise); request line and headers bounded by http.server (414, 431). A client that hangs up
is not news; a handler's failure is one log line. At the descriptor limit the accept loop backs
off (ACCEPT_BACKOFF_S) instead of spinning, and says so once. Every answer carries
SECURITY_HEADERS (a Content-Security-Policy without script: the dashboard has none).

Secure serving (issue 30), as kube-scheduler's: with `tls` the port speaks HTTPS only (the TLS
handshake runs on the connection's thread within the read deadline, never in the accept loop);
with `gate` (runtime/service/auth.py) every request but `always_allow` (the probes) carries a
bearer token the API server accepts (401 otherwise) and /metrics and /policy need `get` on
that non-resource URL (403 otherwise); the views get the caller (an auth.Viewer) to filter by.
Served plainly on loopback (no gate), a request whose Host is not a loopback name or address is
answered 403: a web page the user visits cannot rebind its own name to 127.0.0.1 and read the
views through the browser (DNS rebinding).
"""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from runtime.kube.metrics import Metrics
from runtime.service.auth import ALWAYS_ALLOW_PATHS, Denied, Gate, NonResource, Viewer
from runtime.service.tls import is_loopback

log = logging.getLogger("policydsl.http")

# A read-only view served next to /metrics: (path, query[, viewer]) -> (status, body, content type);
# with a gate, called with the caller's auth.Viewer as a third argument (it may raise auth.Denied).
Route = Callable[..., tuple[int, bytes, str]]

READ_TIMEOUT_S = 10.0       # a connection's whole request (line and headers)
WRITE_TIMEOUT_S = 10.0      # an answer's whole sending
MAX_CONNECTIONS = 64        # served at once
PROBE_CONNECTIONS = 4       # kept for /healthz and /readyz beyond MAX_CONNECTIONS
PROBE_READ_TIMEOUT_S = 2.0  # on those
MAX_REQUEST_BYTES = 128 << 10  # request line and headers together (431 beyond)
ACCEPT_BACKOFF_S = 0.5      # out of descriptors: wait this long before accepting again
REFUSAL_LOG_EVERY_S = 60.0
PROBES = ("/healthz", "/readyz", "/livez")
ALLOWED = ("GET", "HEAD")
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)

SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    # The dashboard is server-rendered: inline <style>, inline SVG, a <meta> refresh, no script.
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                                "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
)

_BUSY_TEXT = "too many connections: try again soon\n"
_BUSY = (f"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {len(_BUSY_TEXT)}\r\n"
         "Retry-After: 1\r\nConnection: close\r\n"
         + "".join(f"{k}: {v}\r\n" for k, v in SECURITY_HEADERS)
         + "\r\n" + _BUSY_TEXT).encode()


class MetricsServer:
    """/metrics, /healthz and /readyz on one address ("host:port"; port 0 picks a free one), and
    /policy when `policy` is given (a JSON-able description, None while there is none)."""

    def __init__(self, address: str, metrics: Metrics, *, ready: Callable[[], tuple[bool, str]],
                 healthy: Callable[[], tuple[bool, str]], policy: Callable[[], object] | None = None,
                 routes: Mapping[str, Route] | None = None, read_timeout: float = READ_TIMEOUT_S,
                 write_timeout: float = WRITE_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
                 probe_connections: int = PROBE_CONNECTIONS, tls: ssl.SSLContext | None = None,
                 gate: Gate | None = None, always_allow: tuple[str, ...] = ALWAYS_ALLOW_PATHS) -> None:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"metrics address must be HOST:PORT, got `{address}`")
        handler = _handler(metrics, ready, healthy, policy, dict(routes or {}), gate=gate,
                           always_allow=always_allow, loopback_hosts=gate is None and is_loopback(host.strip("[]")))
        self._server = _Server((host.strip("[]"), int(port)), handler, read_timeout=read_timeout,
                               write_timeout=write_timeout, max_connections=max_connections,
                               probe_connections=probe_connections, tls=tls)
        self.scheme = "https" if tls is not None else "http"
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}"

    @property
    def connections(self) -> int:
        """Connections being served now (probe slots included)."""
        return self._server.active

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, read_timeout: float,
                 write_timeout: float, max_connections: int, probe_connections: int,
                 sleep: Callable[[float], None] = time.sleep, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.max_connections = max(1, max_connections)
        self.probe_connections = max(0, probe_connections)
        self.active = 0
        self._probes = 0
        self._lock = threading.Lock()
        self._local = threading.local()
        self._sleep = sleep
        self._out_of_descriptors = False     # said so, and not yet that it is over
        self._out_logged = float("-inf")
        self._refused_logged = float("-inf")
        super().__init__(address, handler)

    # --- accepting ---------------------------------------------------------------------------
    def get_request(self) -> tuple[socket.socket, object]:
        try:
            accepted = super().get_request()
        except OSError as err:
            if err.errno in OUT_OF_DESCRIPTORS:
                # The listening socket stays readable: returning at once would spin the accept loop.
                now = time.monotonic()
                if now - self._out_logged >= REFUSAL_LOG_EVERY_S:   # once, not once per flap
                    self._out_logged, self._out_of_descriptors = now, True
                    log.error("cannot accept HTTP connections: %s; retrying every %.1f s", os.strerror(err.errno),
                              ACCEPT_BACKOFF_S)
                self._sleep(ACCEPT_BACKOFF_S)
            raise
        if self._out_of_descriptors:
            self._out_of_descriptors = False
            log.info("accepting HTTP connections again")
        if self.tls is not None:
            # No handshake here: a client that never sends its hello must not hold the accept loop.
            sock, address = accepted
            try:
                return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address
            except OSError:
                sock.close()
                raise
        return accepted

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        with self._lock:
            if self.active < self.max_connections:
                probe_only = False
            elif self._probes < self.probe_connections:
                probe_only = True
                self._probes += 1
            else:
                probe_only = None
            if probe_only is not None:
                self.active += 1
        if probe_only is None:
            self._refuse(request)
            return
        thread = threading.Thread(target=self._serve, args=(request, client_address, probe_only), daemon=True,
                                  name="metrics-http-conn")
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: as full
            self._release(probe_only)
            self._refuse(request)

    def _serve(self, request: socket.socket, client_address: object, probe_only: bool) -> None:
        self._local.probe_only = probe_only
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - one line in the log, never a traceback on stderr
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._release(probe_only)

    def _release(self, probe_only: bool) -> None:
        with self._lock:
            self.active -= 1
            if probe_only:
                self._probes -= 1

    @property
    def probe_only(self) -> bool:
        return getattr(self._local, "probe_only", False)

    def _refuse(self, request: socket.socket) -> None:
        now = time.monotonic()
        if now - self._refused_logged >= REFUSAL_LOG_EVERY_S:
            self._refused_logged = now
            log.warning("HTTP connections at the cap (%d, and %d for probes): answering 503 to new ones",
                        self.max_connections, self.probe_connections)
        try:
            if not isinstance(request, ssl.SSLSocket):   # before a handshake, plain text is noise
                request.setblocking(False)
                request.send(_BUSY)
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: object, client_address: object) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError, ssl.SSLError)):   # incl. plain HTTP on HTTPS
            log.debug("HTTP client %s went away: %s", client_address, type(err).__name__)
            return
        log.error("HTTP request from %s failed: %s: %s", client_address, type(err).__name__,
                  str(err).replace("\n", " ")[:500])


class _TooLarge(Exception):
    pass


class _DeadlineReader(io.RawIOBase):
    """A socket's bytes, until a deadline for all of them (a per-recv timeout would let a client
    trickle one byte at a time for ever) and MAX_REQUEST_BYTES of them (100 header lines of
    64 KiB each would pass http.server's own limits)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock, self._deadline, self._left = sock, deadline, MAX_REQUEST_BYTES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not read in time")
        if self._left <= 0:
            raise _TooLarge
        self._sock.settimeout(left)
        view = memoryview(buffer)[:self._left]
        read = self._sock.recv_into(view)
        self._left -= read
        return read


def peer_certificate(connection) -> dict | None:
    """The client's certificate as the TLS handshake verified it (None on plain HTTP or without one)."""
    getter = getattr(connection, "getpeercert", None)
    try:
        return getter() or None if getter is not None else None
    except ValueError:      # the handshake is not done: no certificate to speak of
        return None


def _loopback_host(value: str | None) -> bool:
    """A Host header naming this machine's loopback (or none: HTTP/1.0 clients may send none)."""
    if not value:
        return True
    host = value.strip()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    host = host.rstrip(".").lower()
    return host == "localhost" or host.endswith(".localhost") or is_loopback(host)


def public_policy(described: object) -> object:
    """The /policy document without what the port must not tell: source paths become names
    relative to the main policy's folder (a file elsewhere, its base name), the watched folders
    are left out, and a reload's errors are counted, not quoted (they are in the log)."""
    if not isinstance(described, Mapping):
        return described
    out = dict(described)
    main = out.get("main")
    folder = os.path.dirname(main) if isinstance(main, str) else ""

    def name(path: object) -> object:
        if not isinstance(path, str):
            return path
        if folder and path.startswith(folder + os.sep):
            return path[len(folder) + 1:]
        return os.path.basename(path)

    if "main" in out:
        out["main"] = name(main)
    if "sources" in out:
        out["sources"] = [name(p) for p in out.get("sources") or []]
    out.pop("watching", None)
    last = out.get("last_reload")
    if isinstance(last, Mapping) and "errors" in last:
        errors = last.get("errors") or []
        out["last_reload"] = {**{k: v for k, v in last.items() if k != "errors"}, "error_count": len(errors)}
    return out


def _handler(metrics: Metrics, ready: Callable[[], tuple[bool, str]], healthy: Callable[[], tuple[bool, str]],
             policy: Callable[[], object] | None = None,
             routes: Mapping[str, Route] | None = None, *, gate: Gate | None = None,
             always_allow: tuple[str, ...] = ALWAYS_ALLOW_PATHS,
             loopback_hosts: bool = False) -> type[BaseHTTPRequestHandler]:
    # Longest prefix first: "/api/v1/queues/" before "/api/v1/queues".
    prefixes = sorted(routes or {}, key=len, reverse=True)

    class Handler(BaseHTTPRequestHandler):
        server: _Server

        def setup(self) -> None:
            super().setup()
            limit = PROBE_READ_TIMEOUT_S if self.server.probe_only else self.server.read_timeout
            limit = min(limit, self.server.read_timeout)
            deadline = time.monotonic() + limit
            if isinstance(self.connection, ssl.SSLSocket):
                self.connection.settimeout(limit)
                self.connection.do_handshake()   # within the request's deadline
            self.rfile.close()   # the plain one: ours reads against the deadline
            self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadline))

        def handle_one_request(self) -> None:
            try:
                super().handle_one_request()
            except _TooLarge:
                self.close_connection = True
                self.send_error(431, "request line and headers too large")

        def parse_request(self) -> bool:
            if not super().parse_request():
                return False
            # Nothing more is read from the connection: answers are written within their own timeout.
            self.connection.settimeout(self.server.write_timeout)
            if self.command not in ALLOWED:
                self.send_response(405)
                self.send_header("Allow", ", ".join(ALLOWED))
                self.send_header("Content-Type", "text/plain")
                body = f"method {self.command} not allowed: GET or HEAD\n".encode()
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True
                return False
            if self.server.probe_only and self.path.partition("?")[0] not in PROBES:
                self.close_connection = True
                self._answer(503, _BUSY_TEXT.encode(), "text/plain", retry=True)
                return False
            return True

        def end_headers(self) -> None:
            for key, value in SECURITY_HEADERS:
                self.send_header(key, value)
            super().end_headers()

        def do_HEAD(self) -> None:  # noqa: N802 - the http.server protocol
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
            path, _, query = self.path.partition("?")
            if loopback_hosts and path not in PROBES and not _loopback_host(self.headers.get("Host")):
                self._answer(403, b"this port serves loopback names only (Host must be localhost or a loopback "
                                  b"address)\n", "text/plain")
                return
            viewer = None
            if gate is not None and path not in always_allow:
                try:
                    viewer = Viewer(gate, gate.authenticate(self.headers, peer_certificate(self.connection)))
                    if path in ("/metrics", "/policy"):
                        viewer.require(NonResource(path))
                except Denied as err:
                    self._denied(err)
                    return
            for prefix in prefixes:
                if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
                    try:
                        status, body, content_type = routes[prefix](path, query) if viewer is None \
                            else routes[prefix](path, query, viewer)
                    except Denied as err:
                        self._denied(err)
                        return
                    except Exception as err:  # noqa: BLE001 - a view's bug must not kill the server thread
                        log.error("HTTP view %s failed: %s: %s", prefix, type(err).__name__,
                                  str(err).replace("\n", " ")[:500])
                        status, body, content_type = 500, f"internal error: {type(err).__name__}\n".encode(), \
                            "text/plain"
                    self._answer(status, body, content_type)
                    return
            if path == "/metrics":
                self._answer(200, metrics.render(), CONTENT_TYPE_LATEST)
            elif path in PROBES:
                # /livez is /healthz (kube-scheduler serves both from the same checks)
                ok, why = (ready if path == "/readyz" else healthy)()
                failed = 503 if path == "/readyz" else 500   # kube-scheduler's healthz answers 500
                self._answer(200 if ok else failed, (why or ("ok" if ok else "not ok")).encode(), "text/plain")
            elif path == "/policy" and policy is not None:
                described = policy()
                if described is None:
                    self._answer(503, b"no policy active\n", "text/plain")
                else:
                    self._answer(200, (json.dumps(public_policy(described), indent=2) + "\n").encode(),
                                 "application/json")
            else:
                extra = "".join(f", {p}" for p in sorted(routes or {}))
                self._answer(404, f"not found: try /metrics, /healthz or /readyz{extra}\n".encode(), "text/plain")

        def _denied(self, err: Denied) -> None:
            # JSON with the API's error shape: `policydsl explain` tells our refusals from a proxy's
            body = (json.dumps({"error": str(err), "message": "policydsl: " + str(err), "code": err.status})
                    .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") + "\n").encode()
            self.send_response(err.status)
            if err.status == 401:
                self.send_header("WWW-Authenticate", 'Bearer realm="policydsl"')
            elif err.status == 503:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _answer(self, status: int, body: bytes, content_type: str, retry: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if retry:
                self.send_header("Retry-After", "1")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - scrapes are not news
            return

    return Handler
