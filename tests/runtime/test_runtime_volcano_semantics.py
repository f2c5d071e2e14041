"""Volcano semantics our engine used to differ from by accident (issue 16's classes), each as a
small cluster with the outcome Volcano's actions and plugins give."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup
from runtime_helpers import GiB, STANDARD_TIERS, cycle, node, placements, pod, policy

PLAN = policy(STANDARD_TIERS)


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def test_allocate_tries_a_jobs_other_tasks_after_one_finds_no_node(pure):
    # Volcano's NeedContinueAllocating: with minMember below the job's size, a task that fits
    # nowhere does not stop its siblings, and each keeps its own reason.
    state = ClusterState()
    node(state, "n1", cpu=2000)
    node(state, "n2", cpu=2000)
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "big", cpu=3000, group="job", priority=10)      # first in task order, fits on no node
    pod(state, "small-0", cpu=1000, group="job")
    pod(state, "small-1", cpu=1000, group="job")
    decisions = cycle(PLAN, state, pure)
    assert set(placements(decisions)) == {"ns/small-0", "ns/small-1"}
    assert "0/2 nodes are available: 2 Insufficient cpu." in [r.message for r in decisions.reasons_for("ns/big")]


def test_a_job_all_of_whose_tasks_must_run_stops_at_the_first_that_cannot(pure):
    state = ClusterState()
    node(state, "n1", cpu=2000)
    node(state, "n2", cpu=2000)
    state.add_podgroup(PodGroup("ns", "gang", min_member=3, phase="Inqueue", uid="pg"))
    pod(state, "big", cpu=3000, group="gang", priority=10)
    pod(state, "small-0", cpu=1000, group="gang")
    pod(state, "small-1", cpu=1000, group="gang")
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions) == {}
    assert any("gang short" in r.message for r in decisions.reasons_for("ns/small-0"))


@pytest.mark.parametrize("annotations, labels, expect", [
    ({}, {}, True),
    ({"volcano.sh/preemptable": "false"}, {}, False),
    ({}, {"volcano.sh/preemptable": "false"}, False),            # the label, when no annotation
    ({"volcano.sh/preemptable": "true"}, {"volcano.sh/preemptable": "false"}, True),   # the annotation first
    ({"volcano.sh/preemptable": "maybe"}, {}, False),            # not a boolean: not preemptable
    ({"volcano.sh/preemptable": "F"}, {}, False),
])
def test_preemptable_is_read_from_annotation_then_label(annotations, labels, expect):
    from runtime.cluster.model import Pod
    assert Pod("ns", "p", annotations=annotations, labels=labels).preemptable is expect


def test_task_spec_is_read_from_annotation_then_label():
    from runtime.cluster.model import Pod
    assert Pod("ns", "p", labels={"volcano.sh/task-spec": "worker"}).task_role == "worker"
    assert Pod("ns", "p", annotations={"volcano.sh/task-spec": "ps"},
               labels={"volcano.sh/task-spec": "worker"}).task_role == "ps"


@pytest.mark.parametrize("plugin", ["proportion", "capacity"])
def test_a_closed_queue_neither_allocates_nor_reclaims(plugin, pure):
    from runtime.cluster.model import QueueObject
    tiers = STANDARD_TIERS.replace("plugin proportion", f"plugin {plugin}")
    plan = policy(tiers, actions="enqueue, allocate, reclaim, backfill")
    state = ClusterState()
    node(state, "n1", cpu=4000)
    state.add_queue(QueueObject("shut", state="closed", guarantee={"cpu": 4000}, deserved={"cpu": 4000}))
    state.add_queue(QueueObject("busy", deserved={"cpu": 0}))
    state.add_podgroup(PodGroup("ns", "admitted", min_member=1, queue="shut", phase="Inqueue", uid="pg1"))
    pod(state, "admitted-0", cpu=1000, group="admitted")
    state.add_podgroup(PodGroup("ns", "other", min_member=1, queue="busy", phase="Running", uid="pg2"))
    for i in range(4):
        pod(state, f"other-{i}", cpu=1000, group="other", node_name="n1")
    decisions = cycle(plan, state, pure)
    assert placements(decisions) == {} and decisions.evictions == []
    assert [r.message for r in decisions.reasons_for("ns/admitted-0")] == ["queue shut is closed"]


def test_a_best_effort_preemptor_frees_a_pod_slot_from_best_effort_pods_only(pure):
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "n1", cpu=4000)
    state.nodes["n1"].allocatable["pods"] = 2
    pod(state, "low-be", cpu=0, memory=0, priority=1, node_name="n1")
    pod(state, "low-cpu", cpu=1000, priority=1, node_name="n1")
    pod(state, "high-be", cpu=0, memory=0, priority=100)
    decisions = cycle(plan, state, pure)
    assert [e.pod for e in decisions.evictions] == ["ns/low-be"]
    assert decisions.pipelined == {"ns/high-be": "n1"}


def test_preemption_policy_never_is_skipped_and_the_next_task_still_preempts(pure):
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "n1", cpu=2000)
    pod(state, "low-0", cpu=1000, priority=1, node_name="n1")
    pod(state, "low-1", cpu=1000, priority=1, node_name="n1")
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "never", cpu=1000, priority=100, group="job", creation=0.0, preemption_policy="Never")
    pod(state, "may", cpu=1000, priority=100, group="job", creation=1.0)
    decisions = cycle(plan, state, pure)
    assert len(decisions.evictions) == 1 and decisions.pipelined == {"ns/may": "n1"}


def test_a_queue_of_weight_0_is_shared_nothing_but_its_guarantee(pure):
    from runtime.cluster.model import QueueObject
    plan = policy(STANDARD_TIERS)
    state = ClusterState()
    node(state, "n1", cpu=4000)
    state.add_queue(QueueObject("zero", weight=0))
    state.add_queue(QueueObject("kept", weight=0, guarantee={"cpu": 1000}))
    state.add_queue(QueueObject("one", weight=1))
    for q in ("zero", "kept", "one"):
        state.add_podgroup(PodGroup("ns", q, min_member=1, queue=q, phase="Inqueue", uid=f"pg-{q}"))
        for i in range(2):
            pod(state, f"{q}-{i}", cpu=1000, memory=0, group=q)   # cpu only: the guarantee's resource
    bound = placements(cycle(plan, state, pure))
    assert sum(p.startswith("ns/zero") for p in bound) == 0
    assert sum(p.startswith("ns/kept") for p in bound) == 1
    assert sum(p.startswith("ns/one") for p in bound) == 2


# Flat drf orders no queues (Volcano registers drf's queue order only with the hierarchy): with
# no other plugin to order them, the first queue (creation, then name) takes all it can.
@pytest.mark.parametrize("hierarchy, a_gets", [(True, 2), (False, 8)])
def test_hierarchical_drf_orders_queues_by_share_over_weight(hierarchy, a_gets, pure):
    from runtime.cluster.model import QueueObject
    flag = "{ enable_hierarchy = true }" if hierarchy else ""
    plan = policy(f"tier {{\n plugin priority\n plugin gang\n}}\ntier {{\n plugin drf {flag}\n plugin predicates\n}}")
    state = ClusterState()
    node(state, "n1", cpu=8000, memory=64 * GiB)
    for name, weights in (("a", "1/1"), ("b", "1/3")):     # Volcano's annotations: b weighs three times a
        state.add_queue(QueueObject(name, annotations={"volcano.sh/hierarchy": f"root/{name}",
                                                       "volcano.sh/hierarchy-weights": weights}))
        state.add_podgroup(PodGroup("ns", name, min_member=1, queue=name, phase="Inqueue", uid=f"pg-{name}"))
        for i in range(8):
            pod(state, f"{name}-{i}", cpu=1000, memory=GiB, group=name)
    bound = placements(cycle(plan, state, pure))
    assert len(bound) == 8 and sum(p.startswith("ns/a-") for p in bound) == a_gets


@pytest.mark.parametrize("workers_first", [False, True], ids=["ps-made-first", "workers-made-first"])
def test_a_gang_turn_places_what_each_role_needs(pure, workers_first):
    # minMember 3 with roles ps >= 1, worker >= 2 (their sum is minMember: the roles count), room
    # for 4: each role's minimum goes in the turn, whichever role's pods come first in task order
    # (the job controller makes them in any order): the workers first took all the room, and the
    # gang never started.
    state = ClusterState()
    node(state, "n1", cpu=2000)
    node(state, "n2", cpu=2000)
    state.add_podgroup(PodGroup("ns", "roles", min_member=3, min_task_member={"ps": 1, "worker": 2}, phase="Inqueue",
                                uid="pg"))
    for i in range(2):
        pod(state, f"ps-{i}", cpu=1000, group="roles", annotations={"volcano.sh/task-spec": "ps"},
            creation=1.0 if workers_first else 0.0)
    for i in range(4):
        pod(state, f"worker-{i}", cpu=1000, group="roles", annotations={"volcano.sh/task-spec": "worker"})
    bound = placements(cycle(PLAN, state, pure))
    assert len(bound) == 4 and sum(p.startswith("ns/worker") for p in bound) >= 2
    assert sum(p.startswith("ns/ps") for p in bound) >= 1
