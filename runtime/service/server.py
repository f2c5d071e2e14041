"""The scheduler's HTTP endpoint: `/metrics` (the Prometheus text format of runtime.kube.metrics),
`/healthz` (200 while the scheduling loop ticks), `/readyz` (200 once the cache has listed
everything, 503 with the reason otherwise), `/policy` (the active policy as JSON,
runtime/service/reload.py) when given one, and the read-only views' routes.

    metrics = Metrics()
    server = MetricsServer("127.0.0.1:8080", metrics, ready=lambda: cache.synced, healthy=loop.alive)
    server.start(); ...; server.stop()
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from runtime.kube.metrics import Metrics

# A read-only view served next to /metrics: (path, query) -> (status, body, content type).
Route = Callable[[str, str], tuple[int, bytes, str]]


class MetricsServer:
    """/metrics, /healthz and /readyz on one address ("host:port"; port 0 picks a free one), and
    /policy when `policy` is given (a JSON-able description, None while there is none)."""

    def __init__(self, address: str, metrics: Metrics, *, ready: Callable[[], tuple[bool, str]],
                 healthy: Callable[[], tuple[bool, str]], policy: Callable[[], object] | None = None,
                 routes: Mapping[str, Route] | None = None) -> None:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"metrics address must be HOST:PORT, got `{address}`")
        handler = _handler(metrics, ready, healthy, policy, dict(routes or {}))
        self._server = ThreadingHTTPServer((host.strip("[]"), int(port)), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(metrics: Metrics, ready: Callable[[], tuple[bool, str]], healthy: Callable[[], tuple[bool, str]],
             policy: Callable[[], object] | None = None,
             routes: Mapping[str, Route] | None = None) -> type[BaseHTTPRequestHandler]:
    # Longest prefix first: "/api/v1/queues/" before "/api/v1/queues".
    prefixes = sorted(routes or {}, key=len, reverse=True)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
            path, _, query = self.path.partition("?")
            for prefix in prefixes:
                if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
                    try:
                        status, body, content_type = routes[prefix](path, query)
                    except Exception as err:  # noqa: BLE001 - a view's bug must not kill the server thread
                        status, body, content_type = 500, f"internal error: {type(err).__name__}: {err}\n".encode(), \
                            "text/plain"
                    self._answer(status, body, content_type)
                    return
            if path == "/metrics":
                self._answer(200, metrics.render(), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/readyz"):
                ok, why = (healthy if path == "/healthz" else ready)()
                self._answer(200 if ok else 503, (why or ("ok" if ok else "not ok")).encode(), "text/plain")
            elif path == "/policy" and policy is not None:
                described = policy()
                if described is None:
                    self._answer(503, b"no policy active\n", "text/plain")
                else:
                    self._answer(200, (json.dumps(described, indent=2) + "\n").encode(), "application/json")
            else:
                extra = "".join(f", {p}" for p in sorted(routes or {}))
                self._answer(404, f"not found: try /metrics, /healthz or /readyz{extra}\n".encode(), "text/plain")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - scrapes are not news
            return

    return Handler
