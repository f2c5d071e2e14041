"""Pipelined POSTs (KubeApi.post_many): answers in order, whatever ends a connection early, and
the real API server answering a batch of Bindings with mixed outcomes."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from typing import BinaryIO

import pytest
from kubernetes import client as k8s_client

from polling import wait_for

from runtime.kube.api import ApiError, KubeApi
from runtime.kube.pipelining import Endpoint, Pipe, Request

from .connector_helpers import Objects

CLOSE = None  # in a script: close the connection instead of answering


def answer(status: int, body: dict, *, chunked: bool = False, close: bool = False) -> bytes:
    data = json.dumps(body).encode()
    head = [f"HTTP/1.1 {status} X", "Content-Type: application/json"]
    if close:
        head.append("Connection: close")
    if chunked:
        half = len(data) // 2
        payload = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (data[:half], data[half:])) + b"0\r\n\r\n"
        head.append("Transfer-Encoding: chunked")
    else:
        payload = data
        head.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


class ScriptedServer:
    """Plain HTTP on loopback: answers each request with the script's next answer, or closes the
    connection at CLOSE. `hang_up_after_answer`: closes each connection after its first answer, as a
    server does with a connection left idle too long."""

    def __init__(self, script: list[bytes | None], hang_up_after_answer: bool = False) -> None:
        self.script = list(script)
        self.hang_up_after_answer = hang_up_after_answer
        self.requests: list[tuple[int, str]] = []  # (connection number, request line)
        self.connections = 0
        self.hung_up = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connection, args=(conn, self.connections), daemon=True).start()

    def _connection(self, conn: socket.socket, number: int) -> None:
        reader = conn.makefile("rb")
        try:
            self._answer(conn, reader, number)
        finally:
            reader.close()
            conn.close()
        if self.hang_up_after_answer:
            self.hung_up += 1  # counted once the connection is closed

    def _answer(self, conn: socket.socket, reader: BinaryIO, number: int) -> None:
        """Answers until the script or the connection ends."""
        while True:
            line = reader.readline()
            if not line:
                return
            length = 0
            while (header := reader.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            reader.read(length)
            self.requests.append((number, line.decode().strip()))
            reply = self.script.pop(0) if self.script else CLOSE
            if reply is CLOSE:
                return
            conn.sendall(reply)
            if b"\r\nConnection: close\r\n" in reply:
                return
            if self.hang_up_after_answer:
                return

    def close(self) -> None:
        self._listener.close()

    def api(self, path: str = "") -> KubeApi:
        return KubeApi(k8s_client.ApiClient(k8s_client.Configuration(host=f"http://127.0.0.1:{self.port}{path}")))


@pytest.fixture
def scripted():
    servers: list[ScriptedServer] = []

    def start(*script: bytes | None, hang_up_after_answer: bool = False) -> ScriptedServer:
        servers.append(ScriptedServer(list(script), hang_up_after_answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_answers_come_back_in_order_from_one_connection(scripted) -> None:
    server = scripted(answer(201, {"n": 1}), answer(404, {"message": "pods \"b\" not found"}),
                      answer(201, {"n": 3}, chunked=True))
    api = server.api()

    out = api.post_many([(f"/p/{name}", {"name": name}) for name in "abc"])

    assert out[0] == {"n": 1} and out[2] == {"n": 3}
    assert isinstance(out[1], ApiError) and (out[1].status, out[1].message) == (404, 'pods "b" not found')
    assert server.requests == [(1, "POST /p/a HTTP/1.1"), (1, "POST /p/b HTTP/1.1"), (1, "POST /p/c HTTP/1.1")]


def test_interim_answers_are_skipped_and_a_server_path_is_kept(scripted) -> None:
    server = scripted(b"HTTP/1.1 100 Continue\r\n\r\n" + answer(201, {"n": 1}), answer(201, {"n": 2}))
    api = server.api("/gateway/cluster-1/")

    assert api.post_many([("/p/a", {}), ("/p/b", {})]) == [{"n": 1}, {"n": 2}]
    assert [line for _, line in server.requests] == ["POST /gateway/cluster-1/p/a HTTP/1.1",
                                                     "POST /gateway/cluster-1/p/b HTTP/1.1"]


def test_nothing_is_sent_when_no_longer_allowed(scripted) -> None:
    server = scripted(answer(201, {}))

    assert server.api().post_many([("/p/a", {})], allowed=lambda: False) is None
    assert server.requests == [] and server.connections == 0


@pytest.mark.parametrize("no_proxy, pipelined", [("", False), ("10.0.0.0/8,127.0.0.1", True)])
def test_a_proxy_leaves_requests_to_the_client_pool_unless_no_proxy_says_otherwise(no_proxy, pipelined) -> None:
    cfg = k8s_client.Configuration(host="https://127.0.0.1:6443")
    cfg.proxy, cfg.no_proxy = "http://proxy.example:3128", no_proxy

    assert (Endpoint.of(cfg) is not None) == pipelined


def test_requests_after_the_connection_drops_get_no_answer_and_the_next_batch_reconnects(scripted) -> None:
    server = scripted(answer(201, {}), CLOSE, answer(201, {"again": True}))
    api = server.api()

    out = api.post_many([("/p/a", {}), ("/p/b", {}), ("/p/c", {})])

    assert out[0] == {}
    assert [(e.status, e.transient) for e in out[1:]] == [(0, True), (0, True)]
    assert api.post_many([("/p/b", {})]) == [{"again": True}]
    assert server.connections == 2


def test_an_answer_saying_connection_close_ends_the_batch(scripted) -> None:
    server = scripted(answer(429, {"message": "slow down"}, close=True), answer(201, {}))
    api = server.api()

    out = api.post_many([("/p/a", {}), ("/p/b", {})])

    assert (out[0].status, out[0].message) == (429, "slow down")
    assert out[1].status == 0
    assert api.post_many([("/p/b", {})]) == [{}]
    assert server.connections == 2


def test_a_connection_the_server_closed_while_idle_is_not_used_again(scripted) -> None:
    server = scripted(answer(201, {"first": 1}), answer(201, {"second": 2}), hang_up_after_answer=True)
    api = server.api()
    assert api.post_many([("/p/a", {})]) == [{"first": 1}]
    wait_for(lambda: server.hung_up == 1, "the server to close the idle connection", 5)

    assert api.post_many([("/p/b", {})]) == [{"second": 2}]
    assert server.connections == 2


def test_single_writes_share_the_kept_alive_connection_and_reads_use_the_client_pool(scripted) -> None:
    server = scripted(answer(200, {"patched": 1}), answer(201, {"created": 2}), answer(200, {"read": 3}),
                      answer(404, {"message": "queues \"q\" not found"}))
    api = server.api()

    assert api.merge_patch("/a/podgroups/g", {"status": {"phase": "Running"}}) == {"patched": 1}
    assert api.post("/a/events", {"reason": "x"}) == {"created": 2}
    assert api.get("/a/podgroups/g") == {"read": 3}
    with pytest.raises(ApiError) as refused:
        api.put("/a/queues/q", {})

    assert (refused.value.status, refused.value.message) == (404, 'queues "q" not found')
    assert [line for _, line in server.requests] == [
        "PATCH /a/podgroups/g HTTP/1.1", "POST /a/events HTTP/1.1", "GET /a/podgroups/g HTTP/1.1",
        "PUT /a/queues/q HTTP/1.1"]
    by_connection = {}
    for number, line in server.requests:
        by_connection.setdefault(number, []).append(line.split()[0])
    assert sorted(by_connection.values()) == [["PATCH", "PUT"], ["POST", "GET"]]


@pytest.mark.parametrize("method", ["PATCH", "PUT", "DELETE"])
def test_an_update_on_a_connection_closed_as_it_was_taken_is_sent_again(scripted, method) -> None:
    server = scripted(answer(200, {"first": 1}), CLOSE, answer(200, {"again": 2}))
    api = server.api()
    assert api.merge_patch("/a/x", {}) == {"first": 1}

    assert api.request(method, "/a/y", body={}) == {"again": 2}
    assert [number for number, _ in server.requests] == [1, 1, 2]


@pytest.mark.parametrize("keep_alive", [False, True])
def test_an_http_1_0_answer_ends_its_connection_unless_it_says_keep_alive(scripted, keep_alive) -> None:
    head = "HTTP/1.0 200 OK\r\nContent-Length: 8\r\n" + ("Connection: keep-alive\r\n" if keep_alive else "")
    server = scripted((head + "\r\n").encode() + b'{"n": 1}')
    pipe = Pipe.open(Endpoint.of(server.api().client.configuration), 5.0, 5.0)
    try:
        [got] = pipe.exchange([Request("PATCH", "/a/x", {}, b"{}")])
        assert got is not None and got.status == 200 and got.body == b'{"n": 1}'
        assert pipe.reusable is keep_alive
    finally:
        pipe.close()


def chunked_watch(*chunks: bytes) -> bytes:
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in chunks)
    return head.encode() + body + b"0\r\nX-Trailer: 1\r\n\r\n"


def test_a_watch_reads_events_across_chunk_boundaries_and_its_connection_is_not_reused(scripted) -> None:
    first = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "a"}}}).encode()
    second = json.dumps({"type": "DELETED", "object": {"metadata": {"name": "b"}}}).encode()
    server = scripted(chunked_watch(first + b"\n" + second[:7], second[7:] + b"\n", b"\n"), answer(200, {"n": 1}))
    api = server.api()

    events = list(api.watch("/api/v1/pods", {}, 60))

    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("DELETED", "b")]
    assert api.get("/api/v1/pods/x") == {"n": 1}
    assert [number for number, _ in server.requests] == [1, 2]   # the watch's connection was closed


def test_a_watch_cut_off_inside_a_chunk_ends_with_no_answer(scripted) -> None:
    whole = chunked_watch(json.dumps({"type": "ADDED", "object": {}}).encode() + b"\n")
    server = scripted(whole[:-20], hang_up_after_answer=True)
    api = server.api()

    with pytest.raises(ApiError) as ended:
        list(api.watch("/api/v1/pods", {}, 60))
    assert ended.value.status == 0


@pytest.mark.integration
def test_a_batch_of_bindings_with_mixed_outcomes_on_the_api_server(objects: Objects) -> None:
    objects.node(f"{objects.namespace}-n0", cpu="8", memory="16Gi")
    uids = {name: objects.pod(name, "nobody")["metadata"]["uid"] for name in ("a", "b", "c")}
    ns = objects.namespace

    def binding(name: str, uid: str) -> tuple[str, dict]:
        return (f"/api/v1/namespaces/{ns}/pods/{name}/binding",
                {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "uid": uid},
                 "target": {"apiVersion": "v1", "kind": "Node", "name": f"{ns}-n0"}})

    out = objects.api.post_many([binding("a", uids["a"]), binding("gone", "x"), binding("b", "not-its-uid"),
                                 binding("c", uids["c"]), binding("a", uids["a"])])

    assert [getattr(o, "status", "ok") for o in out] == ["ok", 404, 409, "ok", 409]
    assert "already assigned" in out[4].message
    assert objects.bound() == {"a": f"{ns}-n0", "c": f"{ns}-n0"}


@pytest.mark.integration
def test_tls_settings_follow_the_client_configuration(kube_cluster) -> None:
    cfg = k8s_client.Configuration(host="https://127.0.0.1:6443")
    cfg.ssl_ca_cert = str(kube_cluster.cluster.ca_cert)
    cfg.tls_server_name = "kubernetes.default"
    endpoint = Endpoint.of(cfg)
    assert endpoint.tls.verify_mode == ssl.CERT_REQUIRED and endpoint.tls.check_hostname
    assert endpoint.server_hostname == "kubernetes.default" and endpoint.authority == "127.0.0.1:6443"

    cfg.assert_hostname = False
    assert not Endpoint.of(cfg).tls.check_hostname

    cfg.verify_ssl = False
    insecure = Endpoint.of(cfg).tls
    assert insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname

    plain = Endpoint.of(k8s_client.Configuration(host="http://127.0.0.1:8080"))
    assert plain.tls is None and plain.server_hostname is None


@pytest.mark.parametrize("settings, keepalive, nodelay", [
    ({}, 0, 1),                                                       # urllib3's default
    ({"keep_alive": True}, 1, 1),                                     # the client's keepalive switch
    ({"socket_options": [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]}, 1, 0),   # exactly what is given
])
def test_pipelined_connections_take_the_clients_socket_options(settings, keepalive, nodelay) -> None:
    server = ScriptedServer([])
    cfg = k8s_client.Configuration(host=f"http://127.0.0.1:{server.port}")
    for name, value in settings.items():
        setattr(cfg, name, value)
    pipe = Pipe.open(Endpoint.of(cfg), 5.0, 5.0)
    try:
        assert pipe._sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == keepalive
        assert pipe._sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == nodelay
    finally:
        pipe.close()
