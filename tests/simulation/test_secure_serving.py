"""Secure serving (issue 30): the scheduler's port over HTTPS, every request but the probes
authenticated by TokenReview and authorized by SubjectAccessReview against an API server, here a
fake one that answers both from a table (the way kube's RBAC would), reached through the
connector's own KubeApi. 401 without credentials, 403 without the right, 200 with; what a tenant
sees is filtered by namespace; the caches answer repeated questions and expire."""

from __future__ import annotations

import json
import ssl
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from runtime.kube.api import KubeApi
from runtime.kube.metrics import Metrics
from runtime.service.auth import Gate, NonResource, Resource, User, Viewer, bearer_token
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime.service.server import MetricsServer
from runtime.service.tls import server_context
from runtime.service.views import LiveView
from runtime.service.webapi import routes
from runtime.cluster.objects import load_path
from sim_helpers import node, pod, podgroup, policy_text, run_cli, write_objects

TOKENS = {"admin-token": "admin", "tenant-a-token": "system:serviceaccount:team-a:viewer",
          "nobody-token": "system:serviceaccount:team-c:nobody", "prom-token": "system:serviceaccount:mon:prometheus"}
# What RBAC would allow: (user, verb, group, resource, namespace or "*") and (user, non-resource path).
RULES = {
    ("admin", "*", "*", "*", "*"),
    ("system:serviceaccount:team-a:viewer", "get", "", "pods", "team-a"),
    ("system:serviceaccount:team-a:viewer", "list", "", "pods", "team-a"),
    ("system:serviceaccount:team-a:viewer", "get", "scheduling.volcano.sh", "queues", "*"),
    ("system:serviceaccount:team-a:viewer", "list", "scheduling.volcano.sh", "queues", "*"),
}
NON_RESOURCE = {("admin", "/metrics"), ("admin", "/policy"), ("system:serviceaccount:mon:prometheus", "/metrics")}


class FakeApiServer:
    """POST tokenreviews and subjectaccessreviews, answered from TOKENS and RULES; every review kept."""

    def __init__(self) -> None:
        self.reviews: list[dict] = []
        self.paths: set[str] = set()
        self.down = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.reviews.append(body)
                fake.paths.add(self.path)
                if fake.down:
                    self._send(500, {"kind": "Status", "message": "etcd is down"})
                elif self.path.endswith("/tokenreviews"):
                    user = TOKENS.get(body["spec"]["token"])
                    status = {"authenticated": True, "user": {"username": user, "uid": f"uid-{user}",
                                                              "groups": ["system:authenticated"]}} if user \
                        else {"authenticated": False}
                    self._send(201, {**body, "status": status})
                elif self.path.endswith("/subjectaccessreviews"):
                    self._send(201, {**body, "status": {"allowed": fake.allowed(body["spec"])}})
                else:
                    self._send(404, {"kind": "Status", "message": "not found"})

            def _send(self, status: int, document: dict) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def allowed(spec: dict) -> bool:
        user = spec["user"]
        if "nonResourceAttributes" in spec:
            return (user, spec["nonResourceAttributes"]["path"]) in NON_RESOURCE or \
                (user, "*", "*", "*", "*") in RULES
        a = spec["resourceAttributes"]
        for who, verb, group, resource, namespace in RULES:
            if who == user and verb in ("*", a["verb"]) and group in ("*", a.get("group", "")) \
                    and resource in ("*", a["resource"]) and namespace in ("*", a.get("namespace", "")):
                return True
        return False

    def api(self) -> KubeApi:
        from kubernetes import client as k8s_client

        cfg = k8s_client.Configuration()
        cfg.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        return KubeApi(k8s_client.ApiClient(cfg))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def cluster_objects() -> list[dict]:
    objects = [node("n1", cpu="4")]
    for ns in ("team-a", "team-b"):
        objects += [podgroup(f"{ns}-job", ns=ns, queue="default", min_member=1),
                    pod(f"{ns}-job-0", ns=ns, group=f"{ns}-job", cpu="9")]   # never fits: waits
    return objects


@pytest.fixture(scope="module")
def view(tmp_path_factory) -> LiveView:
    tmp = tmp_path_factory.mktemp("secure")
    state = load_path(write_objects(tmp / "cluster.yaml", cluster_objects()))
    compiled = compile_text(policy_text("secure", "enqueue, allocate", "  plugin predicates\n  plugin proportion"),
                            "secure.policy")
    live = LiveView()
    Scheduler(compiled.plan, EmbeddedCluster(state), metrics=Metrics(), view=live).run_once()
    return live


@pytest.fixture
def fake() -> FakeApiServer:
    server = FakeApiServer()
    yield server
    server.close()


@pytest.fixture
def serve(view, fake):
    servers: list[MetricsServer] = []

    def start(gate: Gate | None = None) -> tuple[str, Gate]:
        gate = gate or Gate(fake.api())
        server = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (True, "ok"), healthy=lambda: (True, "ok"),
                               policy=lambda: {"name": "secure", "main": "/etc/p/main.policy"},
                               routes=routes(view), tls=server_context(None, None), gate=gate)
        server.start()
        servers.append(server)
        assert server.url.startswith("https://")
        return server.url, gate

    yield start
    for server in servers:
        server.stop()


UNVERIFIED = ssl.create_default_context()
UNVERIFIED.check_hostname = False
UNVERIFIED.verify_mode = ssl.CERT_NONE


def get(url: str, token: str | None = None, header: str = "Authorization") -> tuple[int, str, dict]:
    request = urllib.request.Request(url, headers={header: f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=UNVERIFIED) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), dict(err.headers)


PROTECTED = ["/metrics", "/policy", "/ui", "/api/v1/queues", "/api/v1/queues/default/pending",
             "/api/v1/explain/team-a/team-a-job", "/api/v1/topology", "/nothing-here"]


@pytest.mark.parametrize("path", PROTECTED)
def test_without_credentials_every_path_but_the_probes_is_401(serve, path) -> None:
    url, _ = serve()
    status, body, headers = get(url + path)
    assert status == 401, body
    assert headers.get("WWW-Authenticate", "").startswith("Bearer")
    assert "team-a-job" not in body and "default" not in body   # nothing of the cluster in a refusal
    status, body, _ = get(url + path, "a-token-the-api-server-does-not-know")
    assert status == 401 and "does not accept" in body


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/livez"])
def test_the_probes_are_open_to_anyone(serve, fake, path) -> None:
    url, _ = serve()
    assert get(url + path)[0] == 200
    assert fake.reviews == []   # no review asked for a probe


def test_plain_http_on_the_https_port_gets_nothing(serve) -> None:
    url, _ = serve()
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(url.replace("https://", "http://") + "/healthz", timeout=5).read()


@pytest.mark.parametrize("path", ["/metrics", "/policy", "/api/v1/queues", "/api/v1/topology",
                                  "/api/v1/explain/team-b/team-b-job"])
def test_an_authenticated_caller_without_the_right_is_403(serve, path) -> None:
    url, _ = serve()
    status, body, _ = get(url + path, "nobody-token")
    assert status == 403, body
    assert "Forbidden" in body and "team-b-job" not in body


def test_the_right_opens_each_view(serve) -> None:
    url, _ = serve()
    for path in ["/metrics", "/policy", "/api/v1/queues", "/api/v1/explain/team-b/team-b-job", "/ui"]:
        status, body, _ = get(url + path, "admin-token")
        assert status == 200, (path, body)
    status, body, _ = get(url + "/metrics", "prom-token")
    assert status == 200 and "policydsl_" in body
    assert get(url + "/policy", "prom-token")[0] == 403        # /metrics only
    assert get(url + "/api/v1/queues", "prom-token")[0] == 403


def test_the_token_through_the_api_servers_proxy_header_counts(serve) -> None:
    url, _ = serve()
    assert get(url + "/metrics", "admin-token", header="X-Policydsl-Authorization")[0] == 200


def test_a_tenant_explains_its_namespace_and_nothing_of_another(serve) -> None:
    url, _ = serve()
    status, body, _ = get(url + "/api/v1/explain/team-a/team-a-job", "tenant-a-token")
    assert status == 200 and "team-a-job" in body
    status, body, _ = get(url + "/api/v1/explain/team-b/team-b-job", "tenant-a-token")
    assert status == 403 and "team-b-job" not in body
    # A name that does not exist in a namespace it may not read: 403 as well, not a 404 that tells.
    assert get(url + "/api/v1/explain/team-b/no-such", "tenant-a-token")[0] == 403
    # A bare name could resolve in any namespace: refused for a caller.
    assert get(url + "/api/v1/explain/team-b-job", "tenant-a-token")[0] == 400


def test_pending_jobs_are_listed_only_in_namespaces_the_caller_may_list_pods_in(serve) -> None:
    url, _ = serve()
    status, body, _ = get(url + "/api/v1/queues/default/pending", "tenant-a-token")
    document = json.loads(body)
    assert status == 200
    assert [j["name"] for j in document["jobs"]] == ["team-a/team-a-job"] and document["hidden"] == 1
    assert "team-b" not in body
    status, body, _ = get(url + "/api/v1/queues/default/pending", "admin-token")
    assert {j["name"] for j in json.loads(body)["jobs"]} == {"team-a/team-a-job", "team-b/team-b-job"}


def test_the_dashboard_shows_a_tenant_what_rbac_lets_it_see(serve) -> None:
    url, _ = serve()
    status, page, _ = get(url + "/ui", "tenant-a-token")
    assert status == 200
    assert 'data-job="team-a/team-a-job"' in page and "team-b-job" not in page
    assert 'id="queue-tree"' in page          # it may list queues
    assert 'id="utilization"' not in page and 'id="reloads"' not in page   # nor nodes, nor /policy
    assert 'id="filtered"' in page
    status, page, _ = get(url + "/ui", "admin-token")
    assert "team-b-job" in page and 'id="filtered"' not in page
    status, page, _ = get(url + "/ui", "nobody-token")
    assert status == 200 and "team-a-job" not in page and 'id="queue-tree"' not in page


def test_reviews_are_cached_and_expire(view, fake) -> None:
    now = [1000.0]
    gate = Gate(fake.api(), clock=lambda: now[0])
    headers = {"Authorization": "Bearer tenant-a-token"}
    user = gate.authenticate(headers)
    assert user.name == "system:serviceaccount:team-a:viewer" and user.uid and "system:authenticated" in user.groups
    for _ in range(20):
        assert gate.authenticate(headers) == user
        assert gate.allowed(user, Resource("get", "pods", "team-a"))
        assert not gate.allowed(user, Resource("get", "pods", "team-b"))
    assert gate.reviews == 3   # one TokenReview, two SubjectAccessReviews
    sent = fake.reviews[1]["spec"]
    assert sent["user"] == user.name and sent["uid"] == user.uid and sent["groups"] == list(user.groups)
    assert sent["resourceAttributes"] == {"verb": "get", "resource": "pods", "namespace": "team-a"}
    now[0] += 10.5   # past every TTL
    gate.authenticate(headers)
    gate.allowed(user, Resource("get", "pods", "team-a"))
    gate.allowed(user, Resource("get", "pods", "team-b"))
    assert gate.reviews == 6
    # A refused token is remembered too (a flood of one bad token is one review per TTL).
    for _ in range(5):
        with pytest.raises(Exception):
            gate.authenticate({"Authorization": "Bearer wrong"})
    assert gate.reviews == 7


def test_the_caches_are_bounded(fake) -> None:
    gate = Gate(fake.api(), max_cached=8)
    for i in range(50):
        with pytest.raises(Exception):
            gate.authenticate({"Authorization": f"Bearer flood-{i}"})
    assert len(gate._tokens) == 8   # noqa: SLF001 - the bound itself


def test_tokens_are_not_kept_in_the_clear(fake) -> None:
    gate = Gate(fake.api())
    gate.authenticate({"Authorization": "Bearer admin-token"})
    assert all(isinstance(k, bytes) and b"admin-token" not in k for k in gate._tokens._entries)  # noqa: SLF001


def test_an_api_server_that_cannot_answer_refuses_with_503_and_caches_nothing(serve, fake) -> None:
    url, gate = serve()
    fake.down = True
    status, body, headers = get(url + "/metrics", "admin-token")
    assert status == 503 and headers.get("Retry-After") == "1" and "could not answer" in body
    fake.down = False
    assert get(url + "/metrics", "admin-token")[0] == 200


def test_bearer_tokens_are_read_strictly() -> None:
    assert bearer_token({"Authorization": "Bearer abc"}) == "abc"
    assert bearer_token({"Authorization": "bearer  abc "}) == "abc"
    assert bearer_token({"Authorization": "Basic abc"}) is None
    assert bearer_token({"Authorization": "Bearer a b"}) is None
    assert bearer_token({"Authorization": "Bearer "}) is None
    assert bearer_token({}) is None


def test_a_viewer_asks_per_namespace_and_for_non_resource_urls(fake) -> None:
    gate = Gate(fake.api())
    viewer = Viewer(gate, User("system:serviceaccount:team-a:viewer"))
    assert viewer.sees_namespace("team-a") and not viewer.sees_namespace("team-b")
    assert not viewer.sees_all_namespaces() and not viewer.may(NonResource("/metrics"))
    assert fake.reviews[-1]["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}


# --- the run command's serving flags ------------------------------------------------------------------

def test_the_embedded_simulator_serves_only_on_loopback_without_a_flag(tmp_path: Path, capsys) -> None:
    snapshot = write_objects(tmp_path / "c.yaml", cluster_objects())
    policy = tmp_path / "p.policy"
    policy.write_text(policy_text("p", "enqueue, allocate", "  plugin predicates"))
    code, out, err = run_cli(capsys, "run", "--policy", str(policy), "--cluster", f"embedded:{snapshot}",
                             "--metrics-addr", "0.0.0.0:0", "--cycles", "1")
    assert code == 2 and "--insecure-serving" in err and "Traceback" not in err
    code, out, err = run_cli(capsys, "run", "--policy", str(policy), "--cluster", f"embedded:{snapshot}",
                             "--metrics-addr", "127.0.0.1:0", "--cycles", "1", "--secure-serving")
    assert code == 2 and "API server" in err and "Traceback" not in err
    code, out, err = run_cli(capsys, "run", "--policy", str(policy), "--cluster", f"embedded:{snapshot}",
                             "--metrics-addr", "127.0.0.1:0", "--cycles", "1")
    assert code == 0, err


def test_the_deployed_role_grants_exactly_the_reviews_the_gate_makes(fake) -> None:
    import yaml

    gate = Gate(fake.api())
    user = gate.authenticate({"Authorization": "Bearer admin-token"})
    gate.allowed(user, NonResource("/metrics"))
    made = {(path.split("/")[2], path.rsplit("/", 1)[1]) for path in fake.paths}   # (group, resource)
    assert made == {("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io", "subjectaccessreviews")}
    root = Path(__file__).resolve().parents[2]
    for rbac in (root / "deploy" / "rbac.yaml", ):
        role = next(d for d in yaml.safe_load_all(rbac.read_text())
                    if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "policydsl-scheduler")
        granted = {(g, r): rule["verbs"] for rule in role["rules"] for g in rule.get("apiGroups", [])
                   for r in rule.get("resources", []) if g.endswith(".k8s.io") and "review" in r}
        assert granted == {key: ["create"] for key in made}


# --- the CLI through the API server's proxy, as the caller ----------------------------------------------

class FakeProxy:
    """An API server whose service proxy answers as a secure scheduler would: the caller's token
    must come in X-Policydsl-Authorization (the real proxy drops Authorization)."""

    def __init__(self, proxy_status: int = 200) -> None:
        self.seen: list[tuple[str, str | None]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
                fake.seen.append((self.path, self.headers.get("X-Policydsl-Authorization")))
                if self.path == "/version":
                    return self._send(200, {"major": "1", "minor": "37"})
                prefix = "/api/v1/namespaces/policydsl-system/services/https:policydsl-scheduler-metrics:metrics/proxy"
                if not self.path.startswith(prefix):
                    return self._send(503, {"kind": "Status", "message": "no endpoints"})
                if proxy_status == 403:
                    return self._send(403, {"kind": "Status", "message": 'services "https:policydsl-scheduler-'
                                                                         'metrics:metrics" is forbidden'})
                if self.headers.get("X-Policydsl-Authorization") != "Bearer tenant-a-token":
                    return self._send(401, {"error": "Unauthorized", "message": "policydsl: Unauthorized: send a "
                                                                                "bearer token"})
                self._send(200, {"cycle": 3, "policy": "p", "revision": "r", "at": "now", "queues": []})

            def _send(self, status: int, document: dict) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, path: Path, token: str | None) -> Path:
        import yaml

        user = {"token": token} if token else {"username": "cert-user", "password": "x"}
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{self.server.server_address[1]}"}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        return path


def test_queues_through_the_proxy_sends_the_callers_token(tmp_path: Path, capsys) -> None:
    fake = FakeProxy()
    try:
        code, out, err = run_cli(capsys, "queues", "-o", "json", "--kubeconfig",
                                 str(fake.kubeconfig(tmp_path / "k", "tenant-a-token")))
        assert code == 0, err
        assert json.loads(out)["cycle"] == 3
        proxied = [(p, h) for p, h in fake.seen if "/proxy/" in p]
        assert proxied == [("/api/v1/namespaces/policydsl-system/services/https:policydsl-scheduler-metrics:metrics"
                            "/proxy/api/v1/queues", "Bearer tenant-a-token")]
        # Without a bearer token (a client certificate, here basic auth): refused, with what to do.
        code, out, err = run_cli(capsys, "queues", "--kubeconfig", str(fake.kubeconfig(tmp_path / "k2", None)))
        assert code == 2 and "Unauthorized" in err and "kubectl create token" in err and "offline" not in err
    finally:
        fake.server.shutdown()


def test_no_right_to_the_proxy_is_a_refusal_not_an_offline_cycle(tmp_path: Path, capsys) -> None:
    fake = FakeProxy(proxy_status=403)
    try:
        code, out, err = run_cli(capsys, "queues", "--kubeconfig", str(fake.kubeconfig(tmp_path / "k", "t")))
        assert code == 2 and "services/proxy" in err and "offline" not in err, err
    finally:
        fake.server.shutdown()


@pytest.mark.parametrize("host, allowed", [("127.0.0.1:8080", True), ("localhost:8080", True), ("localhost", True),
                                           ("[::1]:8080", True), ("app.localhost", True), ("127.0.0.2", True),
                                           ("evil.example:8080", False), ("192.168.1.5", False),
                                           ("127.0.0.1.evil.example", False), ("localhost.evil.example", False)])
def test_plain_loopback_serving_answers_only_loopback_host_names(host, allowed) -> None:
    import http.client

    server = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (True, "ok"), healthy=lambda: (True, "ok"))
    server.start()
    try:
        connection = http.client.HTTPConnection(*server.address.rsplit(":", 1), timeout=5)
        connection.putrequest("GET", "/metrics", skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        status = connection.getresponse().status
        assert (status == 200) is allowed, (host, status)
        probe = http.client.HTTPConnection(*server.address.rsplit(":", 1), timeout=5)
        probe.putrequest("GET", "/healthz", skip_host=True)
        probe.putheader("Host", host)
        probe.endheaders()
        assert probe.getresponse().status == 200   # probes whatever the name
    finally:
        server.stop()


def test_a_list_across_many_namespaces_costs_a_bounded_number_of_reviews() -> None:
    from runtime.service.auth import MAX_NAMESPACE_REVIEWS, namespaces_visible_to

    class CountingApi:
        posts = 0

        def post(self, path: str, body: dict) -> dict:
            CountingApi.posts += 1
            namespace = body["spec"].get("resourceAttributes", {}).get("namespace", "")
            return {"status": {"allowed": namespace.startswith("mine")}}

    viewer = Viewer(Gate(CountingApi()), User("tenant"))
    visible = namespaces_visible_to(viewer)
    shown = [ns for ns in [f"mine-{i}" for i in range(200)] if visible(ns)]
    assert len(shown) == MAX_NAMESPACE_REVIEWS            # the rest hidden, never shown unreviewed
    assert CountingApi.posts == MAX_NAMESPACE_REVIEWS + 1  # + the all-namespaces question
    assert [visible("mine-0") for _ in range(10)] and CountingApi.posts == MAX_NAMESPACE_REVIEWS + 1
