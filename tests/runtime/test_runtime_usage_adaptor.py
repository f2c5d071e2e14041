"""The usage plugin's `metrics_type = prometheus_adaptor`: node load from the custom metrics API
through the API server, as Volcano v1.14.1's KMetricsClient (pkg/scheduler/metrics/source/
metrics_client_prometheus_adapt.go) reads it: the group's preferred version, then the root-scoped
node_cpu_usage_avg and node_memory_usage_avg of every Node, values times 100.

A fake API server answers over HTTP; the scheduler's own KubeApi (the connector's connection)
reads it, so the path, the version choice and the error mapping are those a live cluster sees."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client as k8s_client

from runtime.cluster.nodeusage import (
    API_SERVER, MetricsSource, NodeUsage, NodeUsageFeed, NodeUsageWatcher, read_custom_metrics,
)
from runtime.kube.api import KubeApi
from runtime.service.loop import _metrics_api_get

NOW = 1_900_000_000.0
STAMP = "2027-01-15T08:00:00Z"
STAMP_S = 1_800_000_000.0       # STAMP in seconds since the epoch


class FakeApiServer:
    """Answers /apis/custom.metrics.k8s.io (discovery) and its nodes/*/<metric> lists; records paths."""

    def __init__(self, cpu: dict[str, str], memory: dict[str, str], preferred: str = "v1beta2",
                 versions: tuple[str, ...] = ("v1beta2", "v1beta1")):
        self.metrics = {"node_cpu_usage_avg": cpu, "node_memory_usage_avg": memory}
        self.preferred, self.versions = preferred, versions
        self.paths: list[str] = []
        self.fail_with = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.paths.append(self.path)
                status, answer = fake.answer(self.path.split("?")[0])
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str) -> tuple[int, dict]:
        if self.fail_with:
            return self.fail_with, {"kind": "Status", "message": "forbidden", "reason": "Forbidden"}
        group = "custom.metrics.k8s.io"
        if path == f"/apis/{group}":
            return 200, {"kind": "APIGroup", "name": group,
                         "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in self.versions],
                         "preferredVersion": {"groupVersion": f"{group}/{self.preferred}", "version": self.preferred}}
        for version in self.versions:
            for metric, values in self.metrics.items():
                if path == f"/apis/{group}/{version}/nodes/*/{metric}":
                    return 200, {"kind": "MetricValueList", "apiVersion": f"{group}/{version}", "items": [
                        {"describedObject": {"kind": "Node", "name": node, "apiVersion": "/v1"},
                         "metric": {"name": metric}, "timestamp": STAMP, "value": value}
                        for node, value in values.items()]}
        return 404, {"kind": "Status", "message": f"{path} not found", "reason": "NotFound"}

    def api(self) -> KubeApi:
        return KubeApi(k8s_client.ApiClient(k8s_client.Configuration(host=self.url)))

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Connector:
    """A cluster connection with an API server connection, as KubeCluster has (`api`)."""

    def __init__(self, api: KubeApi):
        self.api = api


@pytest.fixture
def fake():
    server = FakeApiServer(cpu={"n1": "425m", "n2": "0.9", "elsewhere": "1"}, memory={"n1": "610m", "n2": "100m"})
    yield server
    server.close()


def test_volcanos_requests_and_values_times_100(fake):
    api_get = _metrics_api_get(Connector(fake.api()))
    got = read_custom_metrics(api_get, ["n1", "n2", "n3"], clock=lambda: NOW)
    # Read when the items say (Volcano's MetricsTime), not when asked.
    assert got == {"n1": NodeUsage(pytest.approx(42.5), pytest.approx(61.0), STAMP_S),
                   "n2": NodeUsage(pytest.approx(90.0), pytest.approx(10.0), STAMP_S), "n3": None}
    # Discovery, then the two metrics of every Node at the preferred version (a node Volcano's
    # cache does not hold, `elsewhere`, is left out).
    assert fake.paths == [
        "/apis/custom.metrics.k8s.io",
        "/apis/custom.metrics.k8s.io/v1beta2/nodes/*/node_cpu_usage_avg",
        "/apis/custom.metrics.k8s.io/v1beta2/nodes/*/node_memory_usage_avg",
    ]


def test_a_preferred_version_the_client_does_not_speak_falls_back():
    server = FakeApiServer(cpu={"n1": "0.5"}, memory={"n1": "0.5"}, preferred="v2", versions=("v2", "v1beta1"))
    try:
        got = read_custom_metrics(_metrics_api_get(Connector(server.api())), ["n1"], clock=lambda: NOW)
        assert got["n1"] is not None and got["n1"].cpu == pytest.approx(50.0)
        assert "/v1beta1/" in server.paths[-1]
    finally:
        server.close()


def test_the_watcher_keeps_figures_and_says_why_when_the_api_refuses(fake):
    watcher = NodeUsageWatcher(MetricsSource("prometheus_adaptor", API_SERVER), clock=lambda: NOW,
                               api_get=_metrics_api_get(Connector(fake.api())))
    watcher.want(["n1", "n2"])
    status = watcher.read_once()
    assert status.error == "" and status.nodes_read == 2 and set(watcher.figures()) == {"n1", "n2"}
    fake.fail_with = 403                     # no RBAC for the custom metrics API
    status = watcher.read_once()
    assert "403" in status.error and set(watcher.figures()) == {"n1", "n2"}   # kept; the plugin ages them
    fake.close()                             # no answer at all
    status = watcher.read_once()
    assert "unreachable" in status.error


def test_the_feed_reads_through_the_connection_and_needs_no_address(fake):
    args = {"metrics_type": "prometheus_adaptor", "metrics_interval": "50ms"}
    source = MetricsSource.from_arguments(args)
    assert source is not None and source.address == API_SERVER
    feed = NodeUsageFeed(api_get=_metrics_api_get(Connector(fake.api())))
    try:
        deadline = time.monotonic() + 10
        while len(feed.figures(args, ["n1", "n2"]) or {}) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert feed.figures(args, ["n1", "n2"])["n2"].cpu == pytest.approx(90.0)
    finally:
        feed.close()


def test_without_an_api_server_connection_it_says_so():
    watcher = NodeUsageWatcher(MetricsSource("prometheus_adaptor", API_SERVER))
    watcher.want(["n1"])
    assert "no API server connection" in watcher.read_once().error
    assert _metrics_api_get(object()) is None
