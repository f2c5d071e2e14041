"""Folding settled lone pods out of the snapshot's tasks (runtime.engine.snapshot.folds_settled)
changes what a cycle costs, never what it decides: same bindings, same reasons, same queue
totals, with either kernel, on generated clusters."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.engine.cycle import Options, run_cycle
from runtime.cluster.model import QUEUE_ANNOTATION, ClusterState, PodGroup, QueueObject
from runtime.engine.snapshot import SnapshotCache, build_snapshot, folds_settled
from runtime_helpers import GiB, STANDARD_TIERS, node, pod, policy

QUEUES = """
queue parent {
  weight = 1
  queue q1 { weight = 2 capability = { cpu: 9 } }
}
queue q2 { weight = 1 guarantee = { cpu: 2 } }
"""
PLANS = {
    "proportion": policy(STANDARD_TIERS + QUEUES),
    "capacity": policy(STANDARD_TIERS.replace("plugin proportion", "plugin capacity") + QUEUES.replace(
        "weight = 2", "deserved = { cpu: 6 }")),
}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clusters(draw):
    """Lone pods in every state (waiting, bound, releasing, succeeded, failed, on a node the
    cluster does not have), in known, unknown, parent and object-only queues; and a few gangs."""
    state = ClusterState()
    state.queues["from-object"] = QueueObject("from-object", weight=3)
    for i in range(draw(st.integers(1, 4))):
        node(state, f"n{i}", cpu=draw(st.sampled_from([2000, 4000, 8000])), memory=16 * GiB)
    names = sorted(state.nodes) + ["gone-node"]
    for i in range(draw(st.integers(0, 14))):
        where = draw(st.sampled_from([None, None, *names]))
        queue = draw(st.sampled_from([None, "q1", "q2", "parent", "from-object", "nowhere", "default"]))
        cpu = draw(st.sampled_from([0, 500, 1000, 3000]))
        p = pod(state, f"lone-{i}", cpu=cpu, memory=GiB if cpu else 0, node_name=where, creation=float(i),
                priority=draw(st.integers(0, 2)), annotations={QUEUE_ANNOTATION: queue} if queue else {})
        fate = draw(st.sampled_from(["as is", "as is", "releasing", "Succeeded", "Failed", "other scheduler"]))
        if fate == "releasing" and where:
            state.pods[p.key] = replace(p, releasing=True)
        elif fate in ("Succeeded", "Failed"):
            state.pods[p.key] = replace(p, phase=fate)
        elif fate == "other scheduler":
            state.pods[p.key] = replace(p, scheduler_name="someone-else")
    for j in range(draw(st.integers(0, 3))):
        size = draw(st.integers(1, 3))
        running = draw(st.booleans())
        state.add_podgroup(PodGroup("ns", f"g{j}", min_member=size, queue=draw(st.sampled_from(["q1", "q2"])),
                                    phase="Running" if running else "Inqueue", uid=f"pg{j}", creation=float(j)))
        for t in range(size):
            pod(state, f"g{j}-{t}", cpu=1000, group=f"g{j}", creation=float(j),
                node_name=draw(st.sampled_from(sorted(state.nodes))) if running else None)
    return state


class Totals:
    """The cycle observer: each queue's totals when the session closes."""

    def __init__(self) -> None:
        self.seen: dict[str, np.ndarray] = {}

    def action_finished(self, action: str, seconds: float) -> None:
        pass

    def session_finished(self, ssn) -> None:
        names = [q.name for q in ssn.snap.queues]
        self.seen = {"names": names, "allocated": ssn.queue_allocated.copy(), "request": ssn.queue_request.copy(),
                     "deserved": None if ssn.queue_deserved is None else ssn.queue_deserved.copy()}


def decide(plan, state: ClusterState, fold: bool, pure: bool):
    totals = Totals()
    decisions = run_cycle(plan, state, Options(pure_python=pure, fold_settled=fold), observer=totals)
    return decisions, totals.seen


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("plan_name", sorted(PLANS))
@SETTINGS
@given(state=clusters())
def test_folding_decides_the_same(plan_name: str, pure: bool, state: ClusterState) -> None:
    plan = PLANS[plan_name]
    folded, folded_totals = decide(plan, state, True, pure)
    kept, kept_totals = decide(plan, state, False, pure)
    assert folded == kept
    assert folded_totals["names"] == kept_totals["names"]
    for what in ("allocated", "request", "deserved"):
        assert np.array_equal(folded_totals[what], kept_totals[what]), what


def test_settled_lone_pods_are_folded_and_counted_in_their_queue() -> None:
    plan = PLANS["proportion"]
    state = ClusterState()
    node(state, "n0", cpu=8000)
    pod(state, "bound", cpu=1000, node_name="n0", annotations={QUEUE_ANNOTATION: "q2"})
    pod(state, "waiting", cpu=1000, annotations={QUEUE_ANNOTATION: "q2"})
    pod(state, "done", cpu=1000, node_name="n0", annotations={QUEUE_ANNOTATION: "q2"})
    state.pods["ns/done"] = replace(state.pods["ns/done"], phase="Succeeded")
    pod(state, "leaving", cpu=1000, node_name="n0")
    state.pods["ns/leaving"] = replace(state.pods["ns/leaving"], releasing=True)
    snap = build_snapshot(state, plan, cache=SnapshotCache(), fold_settled=True)
    assert snap.task_keys == ["ns/leaving", "ns/waiting"]
    assert snap.settled_pods == 1
    q2 = snap.queue_index["q2"]
    assert snap.settled[q2, snap.resource_index["cpu"]] == 1000
    assert snap.settled[q2, snap.resource_index["pods"]] == 1
    assert snap.settled.sum(axis=0)[snap.resource_index["cpu"]] == 1000
    # Waiting pods are never folded: with nothing settled there is nothing to count.
    unfolded = build_snapshot(state, plan, cache=SnapshotCache(), fold_settled=False)
    assert unfolded.settled is None and len(unfolded.task_keys) == 4


@pytest.mark.parametrize("actions, folds", [
    ("enqueue, allocate, backfill", True),
    ("enqueue, allocate, preempt, backfill", False),
    ("enqueue, allocate, reclaim", False),
])
def test_only_plans_without_victims_fold(actions: str, folds: bool) -> None:
    assert folds_settled(policy(STANDARD_TIERS, actions=actions)) is folds


def test_a_settled_gang_counts_once_in_its_queues_podgroup_phases() -> None:
    # A settled gang's pods are folded out and its queue counts it (SettledPods.groups); its
    # PodGroup object, Running, is still in the state. The Volcano-named gauges and the
    # dashboard read these counts: one Running PodGroup, not two.
    from runtime.engine.cycle import open_session
    from runtime.cluster.model import SettledPods
    from runtime.service.views import session_facts, with_podgroup_phases

    plan = PLANS["proportion"]
    state = ClusterState()
    node(state, "n0", cpu=8000)
    state.add_podgroup(PodGroup("ns", "done", min_member=2, queue="q2", phase="Running", uid="pg-done"))
    state.add_podgroup(PodGroup("ns", "next", min_member=1, queue="q2", phase="Inqueue", uid="pg-next"))
    pod(state, "next-0", cpu=1000, group="next")
    state.settled = SettledPods("volcano", {("q2", (("cpu", 2000), ("pods", 2))): 2}, {}, {"q2": 1}, {})
    ssn = open_session(plan, state, Options(fold_settled=True))
    facts = session_facts(ssn)
    ssn.close()
    decisions = run_cycle(plan, state, Options(fold_settled=True))
    rows = {row.name: row for row in with_podgroup_phases(facts, decisions, state).queues}
    assert rows["q2"].podgroups == {"Running": 2}      # the settled gang, and "next" now placed
