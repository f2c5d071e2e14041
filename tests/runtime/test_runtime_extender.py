"""The extender plugin against a local stand-in extender (a good one, a slow one, a failing one),
on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/extender/extender_test.go:
TestIsInterested (its cases; a pod's containers, init containers, requests and limits come to the
scheduler as the pod's effective requests, so each case is the request names it adds up to) and
TestMaxBodySizeLimit2 (an answer over 10 MiB is an error). TestHasManagedResources and
TestHasResourcesInList test the two helpers IsInterested is made of (containers, then a resource
list); their cases are IsInterested's once the pod's requests are added up, so they are not
repeated. The rest are the protocol: Volcano's
verbs, bodies and answers (argument.go), its failure rules with `ignorable`, and our bounds on
the time a cycle spends asking."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import pytest

from runtime.cluster import extenderclient
from runtime.cluster.extenderclient import MAX_BODY, ExtenderClient, ExtenderError
from runtime.cluster.model import ClusterState, PodGroup
from runtime.engine.cycle import run_cycle
from runtime.engine.plugins.extender import interested
from runtime.engine.session import Options
from runtime.kube.metrics import Metrics
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime_helpers import node, placements, pod, policy


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


class StandIn:
    """A local extender: verb -> handler(body) -> (HTTP status, answer); every call recorded."""

    def __init__(self, handlers: dict[str, Callable[[dict], tuple[int, object]]], delay: float = 0.0):
        self.handlers = handlers
        self.delay = delay
        self.calls: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
                verb = self.path.strip("/")
                with stand_in.lock:
                    stand_in.calls.append((verb, body))
                if stand_in.delay:
                    time.sleep(stand_in.delay)
                handler = stand_in.handlers.get(verb)
                status, answer = handler(body) if handler else (404, {})
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass            # the scheduler gave up waiting (the slow stand-in)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def verbs(self) -> list[str]:
        return [v for v, _ in self.calls]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_ins():
    made: list[StandIn] = []

    def make(handlers, delay=0.0) -> StandIn:
        made.append(StandIn(handlers, delay))
        return made[-1]

    yield make
    for s in made:
        s.close()


def extender_policy(url: str, settings: str, actions: str = "enqueue, allocate") -> object:
    return policy("tier {\n  plugin priority\n  plugin gang\n}\n"
                  f"tier {{\n  plugin predicates\n  plugin proportion\n  plugin extender {{\n"
                  f"    url_prefix = \"{url}\"\n{settings}  }}\n}}\n", actions=actions)


def two_nodes(phase: str = "Inqueue") -> ClusterState:
    state = ClusterState()
    node(state, "n1")
    node(state, "n2")
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase=phase, uid="pg-job", min_resources={"cpu": 1000}))
    pod(state, "p1", group="job")
    return state


def run(plan, state: ClusterState, pure: bool):
    return run_cycle(plan, state, Options(pure_python=pure))


def reasons(decisions, key: str = "ns/p1") -> str:
    return " ".join(r.message for r in decisions.reasons_for(key))


# --- Volcano's tests ---------------------------------------------------------------------------

@pytest.mark.parametrize("managed, requests, expected", [
    ([], {"cpu"}, True),
    (["nvidia.com/gpu"], {"cpu", "nvidia.com/gpu"}, True),
    (["nvidia.com/gpu"], {"nvidia.com/gpu"}, True),                      # in limits only
    (["nvidia.com/gpu"], {"cpu", "nvidia.com/gpu"}, True),               # in an init container
    (["nvidia.com/gpu"], {"cpu", "memory"}, False),
    (["nvidia.com/gpu", "amd.com/gpu"], {"cpu", "amd.com/gpu"}, True),
], ids=["empty managed resources - should return true", "container has managed resource in requests",
        "container has managed resource in limits", "init container has managed resource",
        "no managed resources in containers", "multiple managed resources - one match"])
def test_is_interested(managed, requests, expected):
    assert interested(frozenset(managed), {r: 1 for r in requests}) is expected


def test_max_body_size_limit(stand_ins):
    big = stand_ins({"test": lambda body: (200, b'{"padding":"' + b"a" * (MAX_BODY + 1) + b'"}')})
    with pytest.raises(ExtenderError, match="answer larger than"):
        ExtenderClient(big.url, 5.0).send("test", {"task": {}, "node": {}})


# --- the protocol in a cycle ----------------------------------------------------------------

def test_predicate_fails_the_nodes_the_extender_names(stand_ins, pure):
    ext = stand_ins({"predicate": lambda b: (200, {"status": "reserved" if b["node"]["Name"] == "n1" else "",
                                                   "code": 0})})
    decisions = run(extender_policy(ext.url, '    predicate_verb = "predicate"\n'), two_nodes(), pure)
    assert placements(decisions) == {"ns/p1": "n2"}
    task = ext.calls[0][1]["task"]
    assert (task["Name"], task["Namespace"], task["Job"], task["Resreq"]["MilliCPU"]) == ("p1", "ns", "ns/job", 1000)
    assert {c[1]["node"]["Name"] for c in ext.calls} == {"n1", "n2"}


def test_a_pod_every_node_refuses_waits_with_the_extenders_words(stand_ins, pure):
    ext = stand_ins({"predicate": lambda b: (200, {"status": "no licence left", "code": 0})})
    decisions = run(extender_policy(ext.url, '    predicate_verb = "predicate"\n'), two_nodes(), pure)
    assert decisions.bindings == [] and "no licence left" in reasons(decisions)


def test_prioritize_scores_are_added(stand_ins, pure):
    ext = stand_ins({"prioritize": lambda b: (200, {"nodeScore": {"n2": 1000.0}})})
    decisions = run(extender_policy(ext.url, '    prioritize_verb = "prioritize"\n'), two_nodes(), pure)
    assert placements(decisions) == {"ns/p1": "n2"}
    [(verb, body)] = ext.calls
    assert verb == "prioritize" and sorted(n["Name"] for n in body["nodes"]) == ["n1", "n2"]


def test_session_open_and_close_are_called_once_each(stand_ins, pure):
    ext = stand_ins({"onSessionOpen": lambda b: (200, {}), "onSessionClose": lambda b: (200, {})})
    run(extender_policy(ext.url, '    on_session_open_verb = "onSessionOpen"\n'
                                 '    on_session_close_verb = "onSessionClose"\n'), two_nodes(), pure)
    assert ext.verbs() == ["onSessionOpen", "onSessionClose"]
    opened = ext.calls[0][1]
    assert set(opened) == {"Jobs", "Nodes", "Queues", "NamespaceInfo", "RevocableNodes", "NodeList"}
    assert sorted(opened["NodeList"]) == ["n1", "n2"] and "ns/job" in opened["Jobs"]


def test_job_enqueueable_reject_holds_the_job(stand_ins, pure):
    ext = stand_ins({"jobEnqueueable": lambda b: (200, {"status": -1})})
    state = two_nodes("Pending")
    decisions = run(extender_policy(ext.url, '    job_enqueueable_verb = "jobEnqueueable"\n'), state, pure)
    assert decisions.bindings == [] and "may not be enqueued" in reasons(decisions)
    assert ext.calls[0][1]["job"]["UID"] == "ns/job"


def test_managed_resources_leave_other_pods_alone(stand_ins, pure):
    ext = stand_ins({"predicate": lambda b: (200, {"status": "no"})})
    decisions = run(extender_policy(ext.url, '    predicate_verb = "predicate"\n'
                                             '    managed_resources = ["nvidia.com/gpu"]\n'), two_nodes(), pure)
    assert len(decisions.bindings) == 1 and ext.calls == []


def victims_state() -> ClusterState:
    state = ClusterState()
    node(state, "n1", cpu=2000)
    for i in range(2):
        pod(state, f"low-{i}", cpu=1000, priority=1, node_name="n1", creation=float(i))
    state.add_podgroup(PodGroup("ns", "high", min_member=1, phase="Inqueue", uid="pg-high"))
    pod(state, "high-0", cpu=1000, priority=100, group="high")
    return state


def test_preemptable_victims_are_the_extenders(stand_ins, pure):
    def choose(body):
        assert body["evictor"]["Name"] == "high-0"
        return 200, {"status": 1, "victims": [e for e in body["evictees"] if e["Name"] == "low-1"]}

    ext = stand_ins({"preemptable": choose})
    decisions = run(extender_policy(ext.url, '    preemptable_verb = "preemptable"\n',
                                    actions="enqueue, allocate, preempt"), victims_state(), pure)
    assert [e.pod for e in decisions.evictions] == ["ns/low-1"]


# --- failures ----------------------------------------------------------------------------------

def test_a_failing_extender_not_ignorable_holds_the_pods_naming_it(stand_ins, pure, caplog):
    caplog.set_level(logging.WARNING, "runtime.engine.plugins.extender")
    ext = stand_ins({"predicate": lambda b: (500, {})})
    decisions = run(extender_policy(ext.url, '    predicate_verb = "predicate"\n'), two_nodes(), pure)
    assert decisions.bindings == []
    text = reasons(decisions)
    assert f"{ext.url}/predicate" in text and "HTTP 500" in text
    assert len(ext.calls) <= 2     # the calls in flight at once; none after the verb failed this cycle
    assert sum("not ignorable" in r.message for r in caplog.records) == 1


def test_a_failing_extender_ignorable_is_gone_on_without_and_said(stand_ins, pure, caplog):
    caplog.set_level(logging.WARNING, "runtime.engine.plugins.extender")
    ext = stand_ins({"predicate": lambda b: (500, {}), "prioritize": lambda b: (500, {}),
                     "jobEnqueueable": lambda b: (500, {})})
    state = two_nodes("Pending")
    decisions = run(extender_policy(ext.url, '    predicate_verb = "predicate"\n    prioritize_verb = "prioritize"\n'
                                             '    job_enqueueable_verb = "jobEnqueueable"\n    ignorable = true\n'),
                    state, pure)
    assert len(decisions.bindings) == 1
    said = [r.message for r in caplog.records if "ignorable" in r.message]
    assert len(said) == 3 and all(ext.url in m for m in said)


def test_a_failing_prioritize_not_ignorable_holds_the_pod(stand_ins, pure):
    ext = stand_ins({"prioritize": lambda b: (200, {"errorMessage": "scores unavailable"})})
    decisions = run(extender_policy(ext.url, '    prioritize_verb = "prioritize"\n'), two_nodes(), pure)
    assert decisions.bindings == [] and "scores unavailable" in reasons(decisions)


def test_an_unreachable_extender_fails_fast(pure):
    with socket.socket() as closed:        # a port nothing listens on once this is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    plan = extender_policy(f"http://127.0.0.1:{port}", '    predicate_verb = "predicate"\n')
    decisions = run(plan, two_nodes(), pure)
    assert decisions.bindings == [] and f"http://127.0.0.1:{port}/predicate" in reasons(decisions)


def test_a_slow_extender_cannot_hold_the_cycle(stand_ins, pure):
    ext = stand_ins({"predicate": lambda b: (200, {"status": ""})}, delay=10.0)
    state = two_nodes()
    for i in range(3, 41):
        node(state, f"n{i}")
    started = time.monotonic()
    decisions = run(extender_policy(ext.url, '    predicate_verb = "predicate"\n    http_timeout = "100ms"\n'),
                    state, pure)
    # The cycle ended long before any answer came (each takes 10 s): it did not wait for them.
    assert time.monotonic() - started < 10
    assert decisions.bindings == [] and "no answer within 0.1 s" in reasons(decisions)
    # One round of calls in flight (16) timed out; the other nodes were not asked.
    assert len(ext.calls) <= 16


def test_a_cycles_calls_share_one_budget(stand_ins, monkeypatch):
    ext = stand_ins({"v": lambda b: (200, {})})
    clock = [0.0]

    def monotonic() -> float:                    # each reading 0.075 s later: a call "takes" 0.075 s
        clock[0] += 0.075
        return clock[0]

    monkeypatch.setattr(extenderclient, "monotonic", monotonic)
    client = ExtenderClient(ext.url, 0.1)        # budget: ten timeouts, at least 1 s
    client.open()
    answered, refused = 0, ""
    for _ in range(40):
        try:
            client.send("v", {})
            answered += 1
        except ExtenderError as err:
            refused = str(err)
            break
    assert 13 <= answered <= 14 and "time for this cycle (1 s) is spent" in refused
    client.open()                                 # the next cycle asks again
    client.send("v", {})


def test_a_lasting_failure_is_logged_once_and_its_end_too(stand_ins, caplog):
    caplog.set_level(logging.INFO, "runtime")
    failing = [True]
    ext = stand_ins({"predicate": lambda b: (500, {}) if failing[0] else (200, {"status": ""})})
    plan = extender_policy(ext.url, '    predicate_verb = "predicate"\n    ignorable = true\n')
    for _ in range(3):
        assert len(run(plan, two_nodes(), False).bindings) == 1
    failing[0] = False
    run(plan, two_nodes(), False)
    said = [r.message for r in caplog.records if ext.url in r.message]
    assert len(said) == 2 and "HTTP 500" in said[0] and "answers again" in said[1]


def test_the_scheduler_counts_failed_verbs(stand_ins):
    ext = stand_ins({"predicate": lambda b: (500, {})})
    state = two_nodes()
    metrics = Metrics()
    scheduler = Scheduler(extender_policy(ext.url, '    predicate_verb = "predicate"\n'), EmbeddedCluster(state),
                          metrics=metrics)
    scheduler.run_once()
    scheduler.run_once()
    assert metrics.registry.get_sample_value("policydsl_extender_failures_total",
                                             {"verb": "predicate", "ignorable": "false"}) == 2


def test_pods_alike_but_for_their_labels_are_asked_each(stand_ins, pure):
    # The extender keeps app=db pods off n1 and app=web pods off n2: one answer per pod class
    # would place both the same way.
    ext = stand_ins({"predicate": lambda b: (200, {"status": "kept off" if (
        b["task"]["Pod"]["metadata"]["labels"].get("app"), b["node"]["Name"]) in (("db", "n1"), ("web", "n2"))
        else ""})})
    state = ClusterState()
    node(state, "n1")
    node(state, "n2")
    state.add_podgroup(PodGroup("ns", "job", min_member=2, phase="Inqueue", uid="pg-job"))
    pod(state, "db", group="job", labels={"app": "db"})
    pod(state, "web", group="job", labels={"app": "web"})
    decisions = run(extender_policy(ext.url, '    predicate_verb = "predicate"\n'), state, pure)
    assert placements(decisions) == {"ns/db": "n2", "ns/web": "n1"}
