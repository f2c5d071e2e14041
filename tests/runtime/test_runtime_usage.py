"""The usage plugin, on both kernels, and its node load reader against stand-in metrics sources.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/usage/usage_test.go:
TestUsage_predicateFn (CPU over 80 fails with the CPU text, memory over 80 with the memory text,
80/79 passes, figures 6 minutes old or never read pass) and TestUsage_nodeOrderFn (the scores
300/225/150/0/0 at weights 1/1 and 270/240/120/0/0 at cpu 2, memory 8, usage weight 5).

The stand-in Prometheus is a local HTTP server answering /api/v1/query as Prometheus does, and
only for the exact PromQL Volcano sends (runtime.cluster.nodeusage.prometheus_queries) with the
node as `instance`; the stand-in Elasticsearch answers `<index>/_search` with the aggregations
Volcano reads. They are how a test (or a person trying the plugin) feeds node load without a
monitoring stack."""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from runtime.cluster.model import ClusterState
from runtime.cluster.objects import ObjectError, load_objects
from runtime.cluster.nodeusage import (
    ES_CPU_FIELD, METRICS_ACTIVE_S, MetricsSource, NodeUsage, NodeUsageFeed, NodeUsageWatcher, elasticsearch_query,
    prometheus_queries,
)
from runtime.engine.cycle import open_session, run_cycle
from runtime.engine.plugins import usage as usage_plugin
from runtime.engine.plugins.usage import CPU_OVER, MEMORY_OVER
from runtime.engine.session import Options
from runtime.kube.metrics import Metrics
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime_helpers import node, placements, pod, policy

NOW = 1_800_000_000.0


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def usage_policy(arguments: str = "", weight: str = "") -> str:
    return (f"tier {{\n  plugin usage{weight} {{\n{arguments}  }}\n}}\n"
            "tier {\n  plugin predicates\n  plugin proportion\n}\n")


def five_nodes(figures: dict[str, tuple[float, float, float]]) -> ClusterState:
    state = ClusterState()
    for name in ("n1", "n2", "n3", "n4", "n5"):
        node(state, name)
    pod(state, "p1")
    state.node_usage = {name: NodeUsage(cpu, mem, at) for name, (cpu, mem, at) in figures.items()}
    return state


def answers(plan_body: str, state: ClusterState, point: str, pure: bool):
    ssn = open_session(policy(plan_body), state, Options(pure_python=pure, now=NOW))
    ssn.now = NOW
    fn = next(f for tier in ssn.fns(point) for name, f in tier if name == "usage")
    return ssn, fn(ssn.snap.classes[0])


PREDICATE_FIGURES = {"n1": (81, 60, NOW), "n2": (60, 81, NOW), "n3": (80, 79, NOW),
                     "n4": (90, 81, NOW - 6 * 60), "n5": (90, 81, 0.0)}


def test_usage_predicate_fn(pure):
    """TestUsage_predicateFn: each node's verdict and Volcano's text."""
    ssn, checks = answers(usage_policy("    cpu_threshold = 80\n    memory_threshold = 80\n", " weight 5"),
                          five_nodes(PREDICATE_FIGURES), "predicate", pure)
    failed = {}
    for check in checks:
        for i in np.flatnonzero(~check.passing).tolist():
            failed.setdefault(ssn.snap.node_names[i], []).append(check.message)
    assert failed == {"n1": [CPU_OVER], "n2": [MEMORY_OVER]}


SCORE_FIGURES = {"n1": (30, 50, NOW), "n2": (60, 50, NOW), "n3": (60, 80, NOW),
                 "n4": (10, 20, NOW - 6 * 60), "n5": (0, 0, 0.0)}


@pytest.mark.parametrize("weights, expected", [
    ("", {"n1": 300, "n2": 225, "n3": 150, "n4": 0, "n5": 0}),
    ("    cpu_weight = 2\n    memory_weight = 8\n", {"n1": 270, "n2": 240, "n3": 120, "n4": 0, "n5": 0}),
], ids=["Node scoring in the default weight configuration scenario.",
        "Node scoring gives priority to memory resources"])
def test_usage_node_order_fn(weights, expected, pure):
    ssn, scores = answers(usage_policy(weights, " weight 5"), five_nodes(SCORE_FIGURES), "node_order", pure)
    got = {name: float(scores[i]) for i, name in enumerate(ssn.snap.node_names)}
    assert got == pytest.approx(expected)


def test_the_default_weight_is_volcanos_5(pure):
    ssn, scores = answers(usage_policy(), five_nodes(SCORE_FIGURES), "node_order", pure)
    assert float(scores[ssn.snap.node_names.index("n1")]) == pytest.approx(300)


def cluster(figures: dict | None) -> ClusterState:
    state = ClusterState()
    node(state, "busy")
    node(state, "idle")
    pod(state, "p1")
    if figures is not None:
        state.node_usage = {name: NodeUsage(cpu, mem, NOW) for name, (cpu, mem) in figures.items()}
    return state


def run(state: ClusterState, pure: bool, body: str = ""):
    return run_cycle(policy(usage_policy(body)), state, Options(pure_python=pure, now=NOW))


def test_a_cycle_places_on_the_less_loaded_node(pure):
    assert placements(run(cluster({"busy": (70, 70), "idle": (10, 10)}), pure)) == {"ns/p1": "idle"}
    assert placements(run(cluster({"busy": (10, 10), "idle": (70, 70)}), pure)) == {"ns/p1": "busy"}


def test_a_pod_waits_naming_the_load_when_every_node_is_over_its_threshold(pure):
    decisions = run(cluster({"busy": (95, 10), "idle": (10, 95)}), pure)
    assert decisions.bindings == []
    text = " ".join(r.message for r in decisions.reasons_for("ns/p1"))
    assert CPU_OVER in text and MEMORY_OVER in text


def test_the_predicate_can_be_switched_off_as_volcanos_docs_do(pure):
    decisions = run(cluster({"busy": (95, 95), "idle": (99, 99)}), pure, "    enable_predicate = false\n")
    assert placements(decisions) == {"ns/p1": "busy"}


def test_without_figures_every_node_passes_and_scores_0_said_once(pure, caplog):
    caplog.set_level(logging.WARNING, "runtime.engine.plugins.usage")
    usage_plugin.blind_said[0] = False      # said once per process: start afresh
    decisions = run(cluster(None), pure)
    assert len(decisions.bindings) == 1
    run(cluster(None), pure)
    said = [r.message for r in caplog.records if "usage:" in r.message]
    assert len(said) == 1 and "no metrics source is read" in said[0]
    stale = cluster({"busy": (99, 99)})
    stale.node_usage = {"busy": NodeUsage(99, 99, NOW - METRICS_ACTIVE_S - 1)}
    assert len(run(stale, pure).bindings) == 1      # stale figures: no filter (Volcano's MetricsActiveTime)


# --- the stand-in sources ---------------------------------------------------------------------

class StandIn:
    """A local Prometheus / Elasticsearch stand-in: node -> (cpu %, memory %); records requests."""

    def __init__(self, load: dict[str, tuple[float, float]]):
        self.load = load
        self.requests: list[tuple[str, str]] = []
        self.gate = threading.Event()    # cleared: answers wait until it is set again
        self.gate.set()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                stand_in.gate.wait(30)
                stand_in.requests.append((self.path, body))
                if self.path == "/api/v1/query":
                    answer = stand_in.prometheus(urllib.parse.parse_qs(body)["query"][0])
                elif self.path.endswith("/_search"):
                    answer = stand_in.elasticsearch(json.loads(body))
                else:
                    self.send_error(404)
                    return
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def prometheus(self, query: str) -> dict:
        for name, (cpu, mem) in self.load.items():
            cpu_query, mem_query = prometheus_queries(name)
            if query in (cpu_query, mem_query):
                value = cpu if query == cpu_query else mem
                return {"status": "success", "data": {"resultType": "vector", "result": [
                    {"metric": {"instance": name}, "value": [time.time(), str(value)]}]}}
        return {"status": "success", "data": {"resultType": "vector", "result": []}}

    def elasticsearch(self, body: dict) -> dict:
        name = next(iter(body["query"]["bool"]["must"][1]["term"].values()))
        assert body == elasticsearch_query(name, "host.hostname")
        cpu, mem = self.load.get(name, (None, None))
        return {"aggregations": {"cpu": {"value": None if cpu is None else cpu / 100},
                                 "mem": {"value": None if mem is None else mem / 100}}}

    def close(self):
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in():
    server = StandIn({"n1": (42.5, 61.0), "n2": (90.0, 10.0)})
    yield server
    server.close()


def test_the_watcher_reads_volcanos_prometheus_queries(stand_in):
    watcher = NodeUsageWatcher(MetricsSource("prometheus", stand_in.url), clock=lambda: NOW)
    watcher.want(["n1", "n2", "n3"])
    status = watcher.read_once()
    figures = watcher.figures()
    assert figures == {"n1": NodeUsage(42.5, 61.0, NOW), "n2": NodeUsage(90.0, 10.0, NOW)}
    assert status.error == "" and status.nodes_read == 2
    # n3: the source has no data for it, so it has no figures (Volcano would store 0% "now").
    sent = {urllib.parse.parse_qs(body)["query"][0] for path, body in stand_in.requests}
    assert sent == {q for n in ("n1", "n2", "n3") for q in prometheus_queries(n)}


def test_the_watcher_reads_elasticsearch(stand_in):
    watcher = NodeUsageWatcher(MetricsSource("elasticsearch", stand_in.url), clock=lambda: NOW)
    watcher.want(["n1", "n3"])
    watcher.read_once()
    assert watcher.figures() == {"n1": NodeUsage(pytest.approx(42.5), pytest.approx(61.0), NOW)}
    assert {path for path, _ in stand_in.requests} == {"/metricbeat-%2A/_search"}
    assert ES_CPU_FIELD in stand_in.requests[0][1]


def test_an_unreachable_source_is_said_and_figures_age_out(stand_in, caplog):
    caplog.set_level(logging.INFO, "runtime.cluster.nodeusage")
    clock = [NOW]
    watcher = NodeUsageWatcher(MetricsSource("prometheus", stand_in.url), clock=lambda: clock[0])
    watcher.want(["n1"])
    watcher.read_once()
    stand_in.close()
    clock[0] += 60
    status = watcher.read_once()
    assert "unreachable" in status.error and status.last_success == NOW
    assert watcher.figures() == {"n1": NodeUsage(42.5, 61.0, NOW)}   # kept: the plugin ages them out
    watcher.read_once()
    said = [r.message for r in caplog.records if "metrics source" in r.message]
    assert len(said) == 1 and "unreachable" in said[0] and "scores 0" in said[0]


def test_the_feed_never_waits_and_follows_the_policy(stand_in):
    made: list[NodeUsageWatcher] = []

    def make(source):
        made.append(NodeUsageWatcher(source))
        return made[-1]

    feed = NodeUsageFeed(make)
    args = {"metrics_type": "prometheus", "metrics_address": stand_in.url, "metrics_interval": "50ms"}
    stand_in.gate.clear()                            # the source does not answer yet
    assert feed.figures(args, ["n1"]) == {}          # the first pass is not waited for
    stand_in.gate.set()
    deadline = time.monotonic() + 5
    while not feed.figures(args, ["n1"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert set(feed.figures(args, ["n1"])) == {"n1"}
    assert feed.figures(None, ["n1"]) is None and made[0]._stop.is_set()   # the policy dropped usage
    assert feed.figures({"metrics_type": "prometheus"}, ["n1"]) is None    # no address: Volcano reads nothing
    feed.close()


def test_a_source_without_type_or_address_is_none():
    assert MetricsSource.from_arguments({}) is None
    source = MetricsSource.from_arguments({"metrics_type": "prometheus", "metrics_address": "http://p:9090",
                                           "metrics_interval": "not a duration"})
    assert source is not None and source.interval_s == 30.0


def test_the_scheduler_reads_load_off_the_cycle_and_places_by_it():
    server = StandIn({"busy": (75.0, 75.0), "idle": (5.0, 5.0)})
    try:
        state = ClusterState()
        node(state, "busy")
        node(state, "idle")
        plan = policy(usage_policy(f'    metrics_type = prometheus\n    metrics_address = "{server.url}"\n'
                                   '    metrics_interval = "50ms"\n'))
        scheduler = Scheduler(plan, EmbeddedCluster(state))
        server.gate.clear()                # the source does not answer yet
        scheduler.run_once()               # starts the reader; the cycle does not wait for it
        assert scheduler.node_usage.watcher.figures() == {}
        server.gate.set()
        deadline = time.monotonic() + 10
        while len(scheduler.node_usage.watcher.figures()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        pod(state, "p1")
        scheduler.run_once()
        assert state.pods["ns/p1"].node_name == "idle"
    finally:
        scheduler.node_usage.close()
        server.close()


# --- the stand-in in snapshot files: metrics.k8s.io NodeMetrics -----------------------------------

def node_object(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def node_metrics(name: str, cpu: str, memory: str) -> dict:
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": name},
            "timestamp": "2026-12-02T05:00:00Z", "window": "20s", "usage": {"cpu": cpu, "memory": memory}}


def pending_pod_object() -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "ns"},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def test_node_metrics_in_a_snapshot_give_the_load(pure):
    # Listed before their Nodes on purpose: NodeMetrics are read last.
    docs = [("s.yaml", o) for o in (node_metrics("busy", "3600m", "2Gi"), node_metrics("idle", "400m", "1Gi"),
                                    node_object("busy"), node_object("idle"), pending_pod_object())]
    state = load_objects(docs)
    assert state.node_usage["busy"].cpu == pytest.approx(90.0) and state.node_usage["idle"].memory == 12.5
    decisions = run_cycle(policy(usage_policy()), state, Options(pure_python=pure))
    assert placements(decisions) == {"ns/p1": "idle"}       # busy is over 80% CPU: filtered
    state.node_usage["idle"] = NodeUsage(95.0, 10.0, state.node_usage["idle"].time)
    decisions = run_cycle(policy(usage_policy()), state, Options(pure_python=pure))
    assert decisions.bindings == [] and CPU_OVER in " ".join(r.message for r in decisions.reasons_for("ns/p1"))


def test_node_metrics_of_an_unknown_node_is_a_located_error():
    with pytest.raises(ObjectError) as err:
        load_objects([("s.yaml", node_metrics("ghost", "1", "1Gi"))])
    assert "ghost" in str(err.value) and "s.yaml" in str(err.value)


def test_the_scheduler_says_whether_the_source_answers():
    server = StandIn({"n1": (10.0, 10.0)})
    state = ClusterState()
    node(state, "n1")
    metrics = Metrics()
    plan = policy(usage_policy(f'    metrics_type = prometheus\n    metrics_address = "{server.url}"\n'
                               '    metrics_interval = "50ms"\n'))
    scheduler = Scheduler(plan, EmbeddedCluster(state), metrics=metrics)
    try:
        scheduler.run_once()
        deadline = time.monotonic() + 10
        while scheduler.node_usage.watcher.status().nodes_read < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        scheduler.run_once()
        assert metrics.registry.get_sample_value("policydsl_node_usage_source_up") == 1
        assert metrics.registry.get_sample_value("policydsl_node_usage_nodes") == 1
        server.close()
        while not scheduler.node_usage.watcher.status().error and time.monotonic() < deadline:
            time.sleep(0.02)
        scheduler.run_once()
        assert metrics.registry.get_sample_value("policydsl_node_usage_source_up") == 0
    finally:
        scheduler.node_usage.close()
