"""The cdp plugin (cooldown protection), on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/cdp/cdp_test.go:
Test_CooldownTimePlugin_podPreemptStableTime (the duration read from the label or annotation) and
TestPreemptableFn (of three running pods with cooldown 600s: scheduled 100s ago is kept, an
invalid duration and scheduled 800s ago are victims). Then cycles: preempt and reclaim pass over a
cooling pod and take one whose cooldown has passed; the simulator's clock starts the cooldown."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup, QueueObject
from runtime.cluster.objects import load_objects
from runtime.engine.cycle import open_session, run_cycle
from runtime.engine.plugins.cdp import COOLDOWN_TIME, cooldown_seconds, go_duration
from runtime.engine.session import Options
from runtime_helpers import node, placements, pod, policy

NOW = 1_000_000.0
TIERS = """
tier {
  plugin priority
  plugin gang
  plugin conformance
  plugin cdp
}
tier {
  plugin drf
  plugin predicates
  plugin proportion
}
"""


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("text, seconds", [
    ("600s", 600.0), ("600abcde", None), ("1h30m", 5400.0), ("1.5h", 5400.0), ("300ms", 0.3), ("0", 0.0),
    ("-10s", -10.0), ("10", None), ("", None), ("s", None),
])
def test_go_durations(text, seconds):
    assert go_duration(text) == seconds


def test_cooldown_read_from_label_first_then_annotation():
    # podPreemptStableTime "normal" and "not-enabled"; the label wins, as Volcano reads it.
    from runtime.cluster.model import Pod
    assert cooldown_seconds(Pod("ns", "p", annotations={COOLDOWN_TIME: "600s"})) == 600.0
    assert cooldown_seconds(Pod("ns", "p", annotations={COOLDOWN_TIME: "600abcde"})) is None
    assert cooldown_seconds(Pod("ns", "p", labels={COOLDOWN_TIME: "60s"}, annotations={COOLDOWN_TIME: "600s"})) == 60.0
    assert cooldown_seconds(Pod("ns", "p")) is None


def running_pod(name: str, cooldown: str | None, scheduled_ago: float | None) -> tuple[str, dict]:
    status: dict = {"phase": "Running"}
    if scheduled_ago is not None:
        stamp = NOW - scheduled_ago
        import datetime
        status["conditions"] = [{"type": "PodScheduled", "status": "True",
                                 "lastTransitionTime": datetime.datetime.fromtimestamp(
                                     stamp, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}]
    return ("test.yaml", {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "default",
                                       "annotations": {COOLDOWN_TIME: cooldown} if cooldown else {}},
                          "spec": {"schedulerName": "volcano", "nodeName": "n1",
                                   "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                          "status": status})


def test_preemptable_fn(pure):
    # TestPreemptableFn: task1 cooling (100s of 600s), task2 invalid duration, task3 past (800s).
    docs = [("test.yaml", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
            running_pod("task1", "600s", 100), running_pod("task2", "600abcde", 100),
            running_pod("task3", "600s", 800), running_pod("unset", None, 10)]
    plan = policy(TIERS, actions="enqueue, allocate, preempt")
    ssn = open_session(plan, load_objects(docs), Options(pure_python=pure))
    ssn.now = NOW
    names = [p.name for p in ssn.snap.pods]
    tasks = list(range(len(names)))
    fn = next(f for tier in ssn.fns("preemptable") for name, f in tier if name == "cdp")
    assert sorted(names[t] for t in fn(-1, tasks)) == ["task2", "task3", "unset"]
    fn = next(f for tier in ssn.fns("reclaimable") for name, f in tier if name == "cdp")
    assert sorted(names[t] for t in fn(-1, tasks)) == ["task2", "task3", "unset"]


def test_a_pending_pod_or_one_without_a_scheduled_time_is_not_protected():
    from runtime.cluster.model import Pod
    from runtime.engine.plugins.cdp import cooling
    assert not cooling(Pod("ns", "p", annotations={COOLDOWN_TIME: "600s"}, scheduled_at=NOW), NOW)  # Pending
    assert not cooling(Pod("ns", "p", annotations={COOLDOWN_TIME: "600s"}, phase="Running"), NOW)
    assert cooling(Pod("ns", "p", annotations={COOLDOWN_TIME: "600s"}, phase="Running", scheduled_at=NOW - 599), NOW)
    assert not cooling(Pod("ns", "p", annotations={COOLDOWN_TIME: "600s"}, phase="Running", scheduled_at=NOW - 600),
                       NOW)


def test_preempt_passes_over_a_cooling_pod(pure):
    plan = policy(TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "n1", cpu=2000)
    # The newest low-priority pod would be the first victim; it is cooling.
    pod(state, "old", cpu=1000, priority=1, node_name="n1", creation=0.0,
        annotations={COOLDOWN_TIME: "10m"}, scheduled_at=NOW - 700)
    pod(state, "new", cpu=1000, priority=1, node_name="n1", creation=1.0,
        annotations={COOLDOWN_TIME: "10m"}, scheduled_at=NOW - 100)
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "high", cpu=1000, priority=100, group="job")
    decisions = run_cycle(plan, state, Options(pure_python=pure, now=NOW))
    assert [e.pod for e in decisions.evictions] == ["ns/old"]
    assert decisions.pipelined == {"ns/high": "n1"}


def test_preempt_finds_no_victim_while_every_pod_cools(pure):
    plan = policy(TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "n1", cpu=1000)
    pod(state, "low", cpu=1000, priority=1, node_name="n1", annotations={COOLDOWN_TIME: "600s"},
        scheduled_at=NOW - 10)
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "high", cpu=1000, priority=100, group="job")
    decisions = run_cycle(plan, state, Options(pure_python=pure, now=NOW))
    assert decisions.evictions == [] and placements(decisions) == {}
    # Once the cooldown has passed, the same cycle preempts.
    decisions = run_cycle(plan, state, Options(pure_python=pure, now=NOW + 600))
    assert [e.pod for e in decisions.evictions] == ["ns/low"]


def test_reclaim_passes_over_a_cooling_pod(pure):
    plan = policy(TIERS, actions="enqueue, allocate, reclaim, backfill")
    state = ClusterState()
    node(state, "n1", cpu=2000)
    state.add_queue(QueueObject("a", weight=1))
    state.add_queue(QueueObject("b", weight=1))
    state.add_podgroup(PodGroup("ns", "greedy", min_member=1, queue="b", phase="Running", uid="pg-b"))
    pod(state, "greedy-0", cpu=1000, group="greedy", node_name="n1", creation=0.0)
    pod(state, "greedy-1", cpu=1000, group="greedy", node_name="n1", creation=1.0,
        annotations={COOLDOWN_TIME: "1h"}, scheduled_at=NOW - 60)
    state.add_podgroup(PodGroup("ns", "starved", min_member=1, queue="a", phase="Inqueue", uid="pg-a"))
    pod(state, "starved-0", cpu=1000, group="starved")
    decisions = run_cycle(plan, state, Options(pure_python=pure, now=NOW))
    assert [e.pod for e in decisions.evictions] == ["ns/greedy-0"]


def test_a_binding_starts_the_cooldown_on_the_cycle_clock():
    from runtime.cluster.decisions import Binding, Decisions
    state = ClusterState()
    node(state, "n1")
    pod(state, "p")
    state.apply(Decisions(bindings=[Binding("ns/p", "n1")], now=NOW))
    assert state.pods["ns/p"].scheduled_at == NOW
