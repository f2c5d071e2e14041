"""The connector's logic that needs no API server: status diffs, rate limits, retries and their
classification, the metrics endpoint, the Plan swap point, the embedded cluster."""

from __future__ import annotations

import dataclasses
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from polling import wait_for

from compiler.pipeline import compile_text
from runtime.cluster.decisions import Binding, Eviction, Reason
from runtime.kube import status as st
from runtime.kube.api import ApiError, _lines, post_each
from runtime.kube.binder import BOUND, FAILED, REFUSED, Binder, binding_body
from runtime.service.embedded import EmbeddedCluster
from runtime.kube.events import EventRecorder, InvolvedObject
from runtime.kube.evictor import BLOCKED, EVICTED, GONE, Evictor
from runtime.kube.leader import LeaseElector
from runtime.kube.ratelimit import TokenBucket
from runtime.service.loop import PAUSE_PER_CYCLE, Scheduler
from runtime.cluster.connection import QueueUsage
from runtime.service.server import MetricsServer
from runtime.kube.metrics import Metrics
from runtime.cluster.model import ClusterState, Condition, Node, Pod, PodGroup

from .connector_helpers import GANG_POLICY


def plan(text: str = GANG_POLICY):
    compilation = compile_text(text, "test.policy")
    assert compilation.plan is not None
    return compilation.plan


# --- status diffs -------------------------------------------------------------------------------

UNSCHEDULABLE = Condition("Unschedulable", "True", "NotEnoughResources", "8/8 tasks in gang unschedulable: x")
WRITTEN = {"phase": "Inqueue", "running": 0, "succeeded": 0,
           "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                           "message": "8/8 tasks in gang unschedulable: x", "transitionID": "old",
                           "lastTransitionTime": "2024-01-01T00:00:00Z"}]}


@pytest.mark.parametrize("current, phase, conditions, counts, changed", [
    (None, "Inqueue", (UNSCHEDULABLE,), {"running": 0}, True),
    (None, "Pending", (), {"running": 0}, False),  # no status yet reads as Pending
    (None, "Pending", (UNSCHEDULABLE,), {"running": 0}, True),
    (WRITTEN, "Inqueue", (UNSCHEDULABLE,), {"running": 0}, False),
    (WRITTEN, "Inqueue", (), {"running": 0}, False),  # no conditions from the engine: keep
    (WRITTEN, "Running", (UNSCHEDULABLE,), {"running": 0}, True),
    (WRITTEN, "Inqueue", (UNSCHEDULABLE,), {"running": 3}, True),
    (WRITTEN, "Inqueue", (Condition("Unschedulable", "True", "NotEnoughResources", "7/8 ..."),), {}, True),
])
def test_podgroup_status_is_written_only_when_it_changes(current, phase, conditions, counts, changed) -> None:
    update = st.podgroup_update("ns/pg", current, phase, conditions, counts, now="NOW", transition_id="new")
    assert (update is not None) == changed


def test_condition_transition_time_moves_only_with_its_status() -> None:
    message_only = Condition("Unschedulable", "True", "NotEnoughResources", "7/8 tasks in gang unschedulable")
    update = st.podgroup_update("ns/pg", WRITTEN, "Inqueue", (message_only,), {}, now="NOW", transition_id="new")
    assert update is not None
    assert update.status["conditions"][0]["lastTransitionTime"] == "2024-01-01T00:00:00Z"
    scheduled = Condition("Scheduled", "True", "Scheduled", "8/8 tasks ready")
    update = st.podgroup_update("ns/pg", WRITTEN, "Running", (scheduled,), {}, now="NOW", transition_id="new")
    assert update is not None and update.status["conditions"][0]["lastTransitionTime"] == "NOW"
    assert [c["type"] for c in update.patch["conditions"]] == ["Scheduled"]


def test_queue_status_patch_removes_resources_no_longer_allocated() -> None:
    current = {"allocated": {"cpu": "4", "nvidia.com/gpu": "2"}, "running": 2, "pending": 0, "inqueue": 0,
               "completed": 0}
    update = st.queue_update("q", current, {"cpu": 2000, "memory": 2**30, "pods": 2}, ["Running", "Pending"])
    assert update is not None
    assert update.status == {"pending": 1, "inqueue": 0, "running": 1, "completed": 0,
                             "allocated": {"cpu": "2", "memory": "1Gi"}}
    assert update.patch["allocated"] == {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": None}
    assert st.queue_update("q", update.status, {"cpu": 2000, "memory": 2**30}, ["Running", "Pending"]) is None


# --- events ------------------------------------------------------------------------------------------

def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10.0, burst=3, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    now[0] += 1.0  # a second later: ten tokens earned, three kept (the burst), one owed
    assert bucket.reserve() == 0.0
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)


def test_events_are_deduplicated_until_the_message_changes() -> None:
    recorder = EventRecorder(api=None, component="volcano", instance="test", refresh_s=300.0)  # type: ignore[arg-type]
    pod = InvolvedObject("Pod", "v1", "ns", "p", "uid-1")
    assert recorder.record(pod, "Warning", "FailedScheduling", "0/4 nodes are available: 4 Insufficient cpu")
    assert not recorder.record(pod, "Warning", "FailedScheduling", "0/4 nodes are available: 4 Insufficient cpu")
    assert recorder.record(pod, "Warning", "FailedScheduling", "0/4 nodes are available: 4 Insufficient memory")
    other = InvolvedObject("Pod", "v1", "ns", "p", "uid-2")  # same name, a new pod
    assert recorder.record(other, "Warning", "FailedScheduling", "0/4 nodes are available: 4 Insufficient memory")
    recorder.forget(lambda key: False)
    assert recorder.record(pod, "Warning", "FailedScheduling", "0/4 nodes are available: 4 Insufficient memory")


# --- binds and evictions ------------------------------------------------------------------------------

class ScriptedApi:
    """Answers each POST with the next scripted outcome (an exception or a value)."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.posts: list[tuple[str, dict]] = []
        self.rounds: list[list[str]] = []

    def post(self, path: str, body: dict) -> object:
        self.posts.append((path, body))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def post_many(self, requests: list[tuple[str, dict]], allowed=None) -> list[object] | None:
        """A pipelined round: the next answer for each request, errors returned, not raised."""
        if allowed is not None and not allowed():
            return None
        self.rounds.append([body["metadata"]["name"] for _, body in requests])
        return post_each(self.post, requests)


POD = Pod("ns", "p", {"cpu": 1000}, uid="uid-p")
CONFLICT = 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "{node}"'


@pytest.mark.parametrize("answers, result, posts", [
    ([{}], BOUND, 1),
    ([ApiError(500, "Internal Server Error"), ApiError(0, "ProtocolError"), {}], BOUND, 3),
    ([ApiError(404, "Not Found")], REFUSED, 1),
    ([ApiError(409, "Conflict", CONFLICT.format(node="other"))], REFUSED, 1),
    # The first attempt went through but its answer was lost: bound, not dropped.
    ([ApiError(0, "ReadTimeoutError"), ApiError(409, "Conflict", CONFLICT.format(node="n1"))], BOUND, 2),
    ([ApiError(403, "Forbidden", "no")], REFUSED, 1),
    ([ApiError(422, "Unprocessable Entity", "invalid")], REFUSED, 1),
    ([ApiError(429, "Too Many Requests"), ApiError(401, "Unauthorized"), {}], BOUND, 3),
    ([ApiError(503, "Service Unavailable")] * 4, FAILED, 4),
])
def test_bind_outcomes(answers: list, result: str, posts: int) -> None:
    api = ScriptedApi(*answers)
    ((_, outcome),) = Binder(api, attempts=4).bind_all([(Binding("ns/p", "n1"), POD)])  # type: ignore[arg-type]
    assert outcome.result == result
    assert len(api.posts) == posts


def test_bind_all_sends_rounds_of_the_pods_still_worth_a_try() -> None:
    pods = {name: Pod("ns", name, {"cpu": 1000}, uid=f"uid-{name}") for name in "abcde"}
    lost = ApiError(0, "ConnectionError", "the connection ended before the answer")
    api = ScriptedApi(
        {}, ApiError(404, "Not Found"), lost, ApiError(403, "Forbidden", "no"), ApiError(503, "Unavailable"),
        ApiError(409, "Conflict", CONFLICT.format(node="n1")),  # c's lost answer: it went through
        {},  # e, in the second round
    )
    items = [(Binding(f"ns/{name}", "n1"), pods[name]) for name in "abcde"] + [(Binding("ns/gone", "n1"), None)]

    outcomes = [(i, o.pod, o.result) for i, o in Binder(api, attempts=4).bind_all(items)]  # type: ignore[arg-type]

    assert outcomes == [(5, "ns/gone", REFUSED), (0, "ns/a", BOUND), (1, "ns/b", REFUSED), (3, "ns/d", REFUSED),
                        (2, "ns/c", BOUND), (4, "ns/e", BOUND)]
    assert api.rounds == [list("abcde"), ["c", "e"]]


def test_binding_carries_uid_precondition_and_device_cards() -> None:
    body = binding_body(Binding("ns/p", "n1", {"nvidia.com/gpu": (2, 3)}), POD)
    # Volcano's deviceshare writes the cards with the time they were chosen (ns), on the Binding.
    stamp = body["metadata"]["annotations"].pop("volcano.sh/predicate-time")
    assert int(stamp) > 1_700_000_000 * 10**9
    assert body["metadata"] == {"name": "p", "namespace": "ns", "uid": "uid-p",
                                "annotations": {"volcano.sh/gpu-index": "2,3"}}
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


def test_no_write_once_leadership_is_lost() -> None:
    api = ScriptedApi()
    ((_, outcome),) = Binder(api, may_write=lambda: False).bind_all([(Binding("ns/p", "n1"), POD)])  # type: ignore[arg-type]
    assert outcome.result == FAILED
    assert api.posts == []


@pytest.mark.parametrize("answer, result", [
    ({}, EVICTED),
    (ApiError(429, "Too Many Requests", "Cannot evict pod as it would violate the pod's disruption budget."), BLOCKED),
    (ApiError(404, "Not Found"), GONE),
    (ApiError(409, "Conflict", "uid precondition"), GONE),
])
def test_eviction_outcomes(answer: object, result: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    api = ScriptedApi(answer)
    with ThreadPoolExecutor(1) as pool:
        outcome = Evictor(api, pool).evict(Eviction("ns/p", Reason("preemption", "x")), POD)  # type: ignore[arg-type]
    assert outcome.result == result
    assert api.posts[0][1]["deleteOptions"] == {"preconditions": {"uid": "uid-p"}}


def test_leader_election_durations_must_nest() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaseElector(None, "ns", "lease", "me", lease_duration=5, renew_deadline=5, retry_period=1)  # type: ignore[arg-type]


# --- watch stream framing -------------------------------------------------------------------------------

class Chunks:
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def stream(self, amt: object = None, decode_content: bool = False) -> Iterator[bytes]:
        return iter(self.chunks)


def test_watch_lines_survive_any_chunking() -> None:
    assert list(_lines(Chunks(b'{"a"', b':1}\n{"b":2}\n{"c"', b":3}\n"))) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert list(_lines(Chunks(b'{"a":1}\n{"tail":1}'))) == [b'{"a":1}', b'{"tail":1}']


# --- metrics ----------------------------------------------------------------------------------------------

def test_queue_gauges_drop_queues_that_are_gone() -> None:
    metrics = Metrics()
    metrics.set_queues({"a": QueueUsage({"cpu": 2000}, {"cpu": 4000.0}, 0.5),
                        "b": QueueUsage({"cpu": 1000}, None, None)})
    text = metrics.render().decode()
    assert 'policydsl_queue_allocated_cpu_cores{queue="b"} 1.0' in text
    assert 'policydsl_queue_share_ratio{queue="a"} 0.5' in text
    metrics.set_queues({"a": QueueUsage({"cpu": 3000}, {"cpu": 4000.0}, 0.75)})
    text = metrics.render().decode()
    assert 'queue="b"' not in text
    assert 'policydsl_queue_allocated_cpu_cores{queue="a"} 3.0' in text


def test_metrics_server_endpoints() -> None:
    healthy = [True]
    server = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (False, "cache not synced yet"),
                           healthy=lambda: (healthy[0], "ok" if healthy[0] else "loop silent"))
    server.start()
    try:
        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(f"http://{server.address}{path}", timeout=5) as answer:
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as err:
                return err.code, err.read().decode()

        assert get("/healthz") == (200, "ok")
        assert get("/readyz") == (503, "cache not synced yet")
        healthy[0] = False
        assert get("/healthz") == (500, "loop silent")   # as kube-scheduler's healthz
        status, text = get("/metrics")
        assert status == 200 and "policydsl_e2e_scheduling_duration_seconds_bucket" in text
        assert get("/other")[0] == 404
    finally:
        server.stop()


# --- the loop -------------------------------------------------------------------------------------------------

def small_cluster(pods: int = 2) -> ClusterState:
    state = ClusterState()
    state.add_node(Node("n1", {"cpu": 8000, "memory": 32 * 2**30, "pods": 110}))
    for i in range(pods):
        state.add_pod(Pod("ns", f"p{i}", {"cpu": 1000}, uid=f"u{i}", scheduler_name="volcano", creation=float(i)))
    return state


class SwapDuringCycle(EmbeddedCluster):
    """Calls set_plan while a cycle is under way (between its snapshot and its actions)."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(state)
        self.scheduler: Scheduler | None = None
        self.swap_to = None

    def snapshot(self, fold_settled: bool = False) -> ClusterState:
        if self.scheduler is not None and self.swap_to is not None:
            self.scheduler.set_plan(self.swap_to)
            self.swap_to = None
        return super().snapshot()


def test_a_new_plan_takes_effect_at_the_next_cycle_never_during_one() -> None:
    first, second = plan(), plan(GANG_POLICY.replace('"connector-test"', '"second"'))
    cluster = SwapDuringCycle(small_cluster())
    scheduler = Scheduler(first, cluster, period=0.01)
    cluster.scheduler, cluster.swap_to = scheduler, second

    scheduler.run_once()
    assert scheduler.plan is first  # the cycle that saw set_plan finished with the plan it began with
    scheduler.run_once()
    assert scheduler.plan is second


def test_embedded_cluster_applies_decisions_between_cycles() -> None:
    cluster = EmbeddedCluster(small_cluster(3))
    scheduler = Scheduler(plan(), cluster, period=0.01)
    stop = threading.Event()
    scheduler.run(stop, max_cycles=2)
    assert scheduler.cycles == 2
    assert {p.node_name for p in cluster.state.pods.values()} == {"n1"}
    assert scheduler.metrics.registry.get_sample_value("policydsl_pods_scheduled_total") == 3


def test_podgroup_naming_an_unknown_queue_is_left_out_not_fatal() -> None:
    state = small_cluster(1)
    state.add_podgroup(PodGroup("ns", "lost", min_member=1, queue="nowhere", uid="g"))
    state.add_pod(Pod("ns", "lost-0", {"cpu": 1000}, uid="l0", scheduler_name="volcano", group="lost"))
    cluster = EmbeddedCluster(state)
    report = Scheduler(plan(), cluster, period=0.01).run_once()
    assert [b.pod for b in report.decisions.bindings] == ["ns/p0"]
    assert "ns/lost" in cluster.state.podgroups  # left out of the cycle, not forgotten


class ArrivalsCluster(EmbeddedCluster):
    """An embedded cluster that tells the scheduler when work arrives, and records when cycles start."""

    def __init__(self, state) -> None:
        super().__init__(state)
        self.notify = lambda: None
        self.snapshots: list[float] = []

    def on_work(self, callback) -> None:
        self.notify = callback

    def snapshot(self, fold_settled: bool = False):
        self.snapshots.append(time.monotonic())
        return super().snapshot()


def _run_in_background(scheduler: Scheduler) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    return stop, thread


def test_arriving_work_starts_a_cycle_before_the_period_is_over() -> None:
    cluster = ArrivalsCluster(small_cluster(1))
    scheduler = Scheduler(plan(), cluster, period=3600.0, min_interval=0.0)
    stop, thread = _run_in_background(scheduler)
    try:
        wait_for(lambda: scheduler.cycles == 1, "the first cycle", 20)
        cluster.state.add_pod(Pod("ns", "late", {"cpu": 1000}, uid="late", scheduler_name="volcano"))
        cluster.notify()
        wait_for(lambda: scheduler.cycles == 2, "a cycle on the notice", 20)
        assert cluster.state.pods["ns/late"].node_name is not None
    finally:
        stop.set()
        thread.join(5)


def test_without_arrivals_or_with_min_interval_at_the_period_cycles_keep_the_period() -> None:
    for min_interval, notify in ((0.0, False), (3600.0, True)):
        cluster = ArrivalsCluster(small_cluster(1))
        scheduler = Scheduler(plan(), cluster, period=3600.0, min_interval=min_interval)
        stop, thread = _run_in_background(scheduler)
        try:
            wait_for(lambda: scheduler.cycles == 1, "the first cycle", 20)
            if notify:
                cluster.notify()
            time.sleep(0.3)
            assert scheduler.cycles == 1
        finally:
            stop.set()
            thread.join(5)
        assert not thread.is_alive()  # stop ends the pause


def test_after_a_cycle_the_pause_lasts_twice_as_long_as_the_cycle_did() -> None:
    """Under a stream of arrivals the loop alternates cycle and pause: it never takes the whole CPU."""

    class SlowCluster(ArrivalsCluster):
        def snapshot(self, fold_settled: bool = False):
            state = super().snapshot()
            time.sleep(0.2)
            return state

    cluster = SlowCluster(small_cluster(1))
    scheduler = Scheduler(plan(), cluster, period=3600.0, min_interval=0.0)
    stop, thread = _run_in_background(scheduler)
    try:
        for _ in range(3):
            count = len(cluster.snapshots)
            cluster.notify()
            wait_for(lambda: len(cluster.snapshots) > count, "a cycle on the notice", 20)
    finally:
        stop.set()
        thread.join(5)
    starts = cluster.snapshots
    # A cycle of 0.2 s (the slow snapshot), then a pause of PAUSE_PER_CYCLE times that.
    assert all(later - earlier >= 0.2 * (1 + PAUSE_PER_CYCLE) for earlier, later in zip(starts, starts[1:]))


def test_pod_counts_per_podgroup_count_our_running_and_succeeded_pods_only() -> None:
    state = ClusterState()
    for name, phase, group, scheduler in (("a", "Running", "g", "volcano"), ("b", "Succeeded", "g", "volcano"),
                                          ("c", "Pending", "g", "volcano"), ("d", "Running", None, "volcano"),
                                          ("e", "Failed", "h", "volcano"), ("f", "Running", "h", "volcano"),
                                          ("g", "Running", "g", "someone-else")):
        state.add_pod(Pod("ns", name, {}, uid=name, phase=phase, group=group, node_name="n1", scheduler_name=scheduler))
    assert st.pod_counts(state, "volcano") == {"ns/g": {"running": 1, "succeeded": 1},
                                               "ns/h": {"running": 1, "succeeded": 0}}


# --- reservations and the eviction audit (issue 17) ----------------------------------------------

RECLAIM_POLICY = (Path(__file__).parents[1] / "simulation" / "thrash" / "reclaim-retake.policy").read_text()


class RecreatingCluster(EmbeddedCluster):
    """Evicted pods leave and their controller makes them again, pending (a ReplicaSet's way)."""

    def apply(self, decisions, state, usage):
        evicted = [self.state.pods[e.pod] for e in decisions.evictions if e.pod in self.state.pods]
        report = super().apply(decisions, state, usage)
        for pod in evicted:
            self.state.add_pod(dataclasses.replace(pod, node_name=None, phase="Pending", releasing=False,
                                                   uid=pod.uid + "-again"))
        return report


def reclaim_livelock_cluster() -> ClusterState:
    """The livelock of issue 17: online (first in queue order) fills the node; a batch gang of
    two waits in the queue that deserves half of it."""
    from runtime.cluster.model import QUEUE_ANNOTATION, QueueObject
    state = ClusterState()
    state.add_node(Node("n1", {"cpu": 8000, "memory": 32 * 2**30, "pods": 110}))
    state.priority_classes.update({"high": 1000, "low": 10})
    for q in ("online", "batch"):
        state.add_queue(QueueObject(q))
    for i in range(4):
        state.add_pod(Pod("web", f"api-{i}", {"cpu": 2000}, uid=f"api-{i}", node_name="n1", phase="Running",
                          priority_class="high", annotations={QUEUE_ANNOTATION: "online"}, creation=float(i)))
    state.add_podgroup(PodGroup("data", "etl", min_member=2, queue="batch", phase="Inqueue", uid="pg-etl"))
    for i in range(2):
        state.add_pod(Pod("data", f"etl-{i}", {"cpu": 2000}, uid=f"etl-{i}", group="etl", priority_class="low",
                          creation=10.0))
    return state


def test_reclaimed_room_is_held_for_the_gang_and_every_eviction_is_bought() -> None:
    cluster = RecreatingCluster(reclaim_livelock_cluster())
    scheduler = Scheduler(plan(RECLAIM_POLICY), cluster, period=0.01)
    sample = scheduler.metrics.registry.get_sample_value

    first = scheduler.run_once()
    assert len(first.decisions.evictions) == 2
    # Nominated while the victims leave, as kube-scheduler's status.nominatedNodeName.
    assert {cluster.state.pods[f"data/etl-{i}"].nominated_node for i in range(2)} == {"n1"}
    assert sample("policydsl_reservations") == 2

    second = scheduler.run_once()
    assert {b.pod for b in second.decisions.bindings} == {"data/etl-0", "data/etl-1"}
    assert not second.decisions.evictions
    assert all(cluster.state.pods[f"data/etl-{i}"].nominated_node is None for i in range(2))
    for _ in range(5):
        assert not scheduler.run_once().decisions.evictions   # the recreated online pods wait
    assert sample("policydsl_reservations") == 0
    for name in ("wasted", "repeated", "traded"):
        assert sample(f"policydsl_{name}_evictions_total") == 0
