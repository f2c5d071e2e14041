"""The scheduler's HTTP port against hostile clients (issue 30): half-sent and trickled requests
are closed, connections are capped with room kept for the probes, only GET and HEAD, security
headers on every answer, no tracebacks when clients hang up, no spinning at the descriptor limit,
/policy without paths or reload errors, and /healthz that says when cycles fail."""

from __future__ import annotations

import errno
import http.client
import logging
import socket
import threading
from collections.abc import Iterator

import pytest

from polling import wait_for

from compiler.pipeline import compile_text
from runtime.cluster.model import ClusterState, Node
from runtime.kube.metrics import Metrics
from runtime.service import server as http_server
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import UNHEALTHY_AFTER_FAILED_CYCLES, Scheduler
from runtime.service.server import SECURITY_HEADERS, MetricsServer, public_policy

CLIENT_TIMEOUT = 20.0   # far longer than the server's own limits below: a hang fails the test


@pytest.fixture
def serve() -> Iterator:
    started: list[MetricsServer] = []

    def start(**options) -> MetricsServer:
        health = options.pop("healthy", lambda: (True, "ok"))
        server = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (True, "ok"), healthy=health, **options)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def connect(server: MetricsServer) -> socket.socket:
    host, port = server.address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=CLIENT_TIMEOUT)
    return sock


def get(server: MetricsServer, path: str, method: str = "GET") -> tuple[int, dict, bytes]:
    host, port = server.address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=CLIENT_TIMEOUT)
    try:
        conn.request(method, path)
        answer = conn.getresponse()
        return answer.status, dict(answer.headers), answer.read()
    finally:
        conn.close()


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


# --- slow and idle clients ----------------------------------------------------------------------

def test_a_half_sent_request_is_closed_by_the_server(serve) -> None:
    server = serve(read_timeout=0.5)
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")   # headers never end
    assert read_all(sock) == b""   # closed by the server, long before CLIENT_TIMEOUT
    sock.close()
    wait_for(lambda: server.connections == 0, "the connection released")


def test_a_trickled_request_is_closed_within_the_whole_request_deadline(serve) -> None:
    server = serve(read_timeout=0.5)
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\n")
    closed = False
    for _ in range(200):   # a header byte every 0.05 s: each recv is quick, the whole is not
        try:
            sock.sendall(b"X")
        except OSError:
            closed = True
            break
        sock.settimeout(0.05)
        try:
            if sock.recv(1) == b"":
                closed = True
                break
        except TimeoutError:
            pass
        except OSError:
            closed = True
            break
    sock.close()
    assert closed, "10 s of trickling and the server still reads"


# --- the connection cap ---------------------------------------------------------------------------

def test_connections_beyond_the_cap_are_refused_and_the_probes_still_answer(serve) -> None:
    server = serve(read_timeout=CLIENT_TIMEOUT * 2, max_connections=3, probe_connections=1)
    idle = [connect(server) for _ in range(3)]
    for sock in idle:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")   # and never the rest
    wait_for(lambda: server.connections == 3, "the idle connections held")

    status, headers, body = get(server, "/healthz")   # on the probes' reserve
    assert (status, body) == (200, b"ok")
    status, headers, body = get(server, "/metrics")   # the reserve is for probes only
    assert status == 503 and headers["Retry-After"] == "1"
    # The refused connection must be gone before the next count: else `hold` waiting for 4 could
    # count it, and the probe below would take the reserve it leaves.
    wait_for(lambda: server.connections == 3, "the refused connection released")

    hold = connect(server)   # takes the probes' reserve...
    hold.sendall(b"GET /healthz HTTP/1.1\r\n")
    wait_for(lambda: server.connections == 4, "the reserve held")
    status, headers, body = get(server, "/healthz")   # ...so the next one is refused at once
    assert status == 503 and body == b"too many connections: try again soon\n"
    assert headers["X-Content-Type-Options"] == "nosniff"
    for sock in [*idle, hold]:
        sock.close()
    # Closed by the clients: served again (the server notices on its read deadline at the latest).
    server._server.read_timeout = 0.2   # noqa: SLF001 - the held ones were read with the long one
    wait_for(lambda: get(server, "/metrics")[0] == 200, "served again once the idle ones left")


# --- methods, headers ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"])
def test_only_get_and_head(serve, method: str) -> None:
    server = serve()
    status, headers, _ = get(server, "/metrics", method)
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_head_answers_without_a_body_and_a_body_is_never_read(serve) -> None:
    server = serve(read_timeout=0.5)
    status, headers, body = get(server, "/healthz", "HEAD")
    assert status == 200 and body == b"" and headers["Content-Length"] == "2"
    # A request announcing a body it never sends is answered, not waited on.
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
    assert read_all(sock).startswith(b"HTTP/1.0 200")
    sock.close()


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/nowhere", "/policy"])
def test_every_answer_carries_the_security_headers(serve, path: str) -> None:
    server = serve(policy=lambda: None)
    _, headers, _ = get(server, path)
    for key, value in SECURITY_HEADERS:
        assert headers[key] == value
    assert "script-src" not in headers["Content-Security-Policy"]
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")


def test_huge_request_lines_and_headers_are_still_refused(serve) -> None:
    server = serve()
    assert get(server, "/" + "a" * 70_000)[0] == 414
    sock = connect(server)
    sock.sendall(b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n")
    assert read_all(sock).startswith(b"HTTP/1.0 431")
    sock.close()
    # Many headers, each under http.server's line limit, together over MAX_REQUEST_BYTES.
    sock = connect(server)
    line = b"X: " + b"a" * 60_000 + b"\r\n"
    sock.sendall(b"GET / HTTP/1.1\r\n" + line * 3 + b"\r\n")
    assert read_all(sock).startswith(b"HTTP/1.0 431")
    sock.close()


# --- clients that hang up -----------------------------------------------------------------------

def test_clients_that_hang_up_leave_no_traceback(serve, capfd, caplog) -> None:
    big = b"x" * (8 << 20)
    server = serve(routes={"/big": lambda path, query: (200, big, "text/plain")})
    for _ in range(5):
        sock = connect(server)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.sendall(b"GET /big HTTP/1.0\r\n\r\n")
        sock.recv(1)
        sock.close()   # a reset in the middle of the answer
    wait_for(lambda: server.connections == 0, "the connections released")
    _, err = capfd.readouterr()
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_failing_view_is_one_log_line_and_a_500(serve, caplog) -> None:
    def broken(path: str, query: str):
        raise RuntimeError("line one\nline two")

    server = serve(routes={"/broken": broken})
    status, _, body = get(server, "/broken")
    assert status == 500 and body == b"internal error: RuntimeError\n"
    (record,) = [r for r in caplog.records if r.name == "policydsl.http"]
    assert "\n" not in record.getMessage() and record.exc_info is None


# --- out of descriptors -------------------------------------------------------------------------

class NoDescriptors:
    def __init__(self, real: socket.socket) -> None:
        self.real, self.accepts = real, 0

    def accept(self):
        self.accepts += 1
        raise OSError(errno.EMFILE, "Too many open files")

    def __getattr__(self, name: str):
        return getattr(self.real, name)


def test_the_accept_loop_backs_off_at_the_descriptor_limit_and_says_so_once(caplog) -> None:
    slept: list[float] = []
    server = http_server._Server(("127.0.0.1", 0), http_server._handler(Metrics(), lambda: (True, ""),  # noqa: SLF001
                                                                        lambda: (True, "")),
                                 read_timeout=1, write_timeout=1, max_connections=2, probe_connections=1,
                                 sleep=slept.append)
    try:
        server.socket = NoDescriptors(server.socket)
        for _ in range(5):
            server._handle_request_noblock()   # noqa: SLF001 - what serve_forever calls when readable
        assert server.socket.accepts == 5 and slept == [http_server.ACCEPT_BACKOFF_S] * 5
        said = [r for r in caplog.records if r.name == "policydsl.http"]
        assert len(said) == 1 and "Too many open files" in said[0].getMessage()
    finally:
        server.socket = server.socket.real
        server.server_close()


# --- /policy ------------------------------------------------------------------------------------

def test_policy_shows_no_paths_and_no_reload_errors(serve) -> None:
    described = {
        "name": "p", "revision": "abc", "main": "/etc/policydsl/main.policy",
        "sources": ["/etc/policydsl/teams/a.policy", "/etc/policydsl/main.policy", "/var/run/secrets/token"],
        "watching": ["/etc/policydsl", "/etc/policydsl/teams"],
        "last_reload": {"result": "error", "trigger": "file change",
                        "errors": ["/etc/policydsl/main.policy:1:1: error[PD001] sekrit-token-text"]},
        "plan": {"name": "p"},
    }
    server = serve(policy=lambda: described)
    status, _, body = get(server, "/policy")
    assert status == 200
    assert b"/etc/" not in body and b"/var/" not in body and b"sekrit" not in body
    shown = public_policy(described)
    assert shown["main"] == "main.policy"
    assert shown["sources"] == ["teams/a.policy", "main.policy", "token"]
    assert "watching" not in shown
    assert shown["last_reload"] == {"result": "error", "trigger": "file change", "error_count": 1}


# --- /healthz says when cycles fail -------------------------------------------------------------

POLICY = 'policy "health" version 1\nactions [allocate]\ntier "t" {\n  plugin predicates\n}\n'


class FailingCluster(EmbeddedCluster):
    """Every snapshot raises while `failing`; `stop` is set after `stop_after` snapshots."""

    def __init__(self) -> None:
        state = ClusterState()
        state.add_node(Node("n1", {"cpu": 8000, "memory": 2**30, "pods": 110}))
        super().__init__(state)
        self.failing, self.calls, self.stop_after = True, 0, 0
        self.stop = threading.Event()

    def snapshot(self, fold_settled: bool = False) -> ClusterState:
        self.calls += 1
        if self.calls >= self.stop_after:
            self.stop.set()
        if self.failing:
            raise RuntimeError("boom")
        return super().snapshot(fold_settled=fold_settled)


def test_healthz_answers_500_while_cycles_fail_and_200_once_one_succeeds(serve) -> None:
    compilation = compile_text(POLICY, "health.policy")
    assert compilation.plan is not None, compilation
    cluster = FailingCluster()
    scheduler = Scheduler(compilation.plan, cluster, period=0.001)
    server = serve(healthy=scheduler.health)

    def cycles(n: int) -> None:
        cluster.calls, cluster.stop_after = 0, n
        cluster.stop.clear()
        scheduler.run(cluster.stop)

    cycles(UNHEALTHY_AFTER_FAILED_CYCLES - 1)
    assert get(server, "/healthz")[0] == 200   # a failure or two is not yet news
    cycles(1)
    status, _, body = get(server, "/healthz")
    assert status == 500
    assert body.decode() == f"the last {UNHEALTHY_AFTER_FAILED_CYCLES} scheduling cycles failed: RuntimeError: boom"
    cycles(5)
    status, _, body = get(server, "/healthz")
    assert status == 500 and body.startswith(f"the last {UNHEALTHY_AFTER_FAILED_CYCLES + 5} ".encode())
    cluster.failing = False
    cycles(1)
    assert get(server, "/healthz")[0::2] == (200, b"ok")
