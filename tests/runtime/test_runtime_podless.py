"""PodGroups that have no pods yet (Volcano's job controller creates a vcjob's PodGroup first
and its pods only once enqueue moved the PodGroup to Inqueue): admitted on minResources and
minMember as Volcano's enqueue does, their reservation counted, their pods bound on arrival."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup
from runtime_helpers import STANDARD_TIERS, cycle, node, placements, pod, policy

PLAN = policy(STANDARD_TIERS + "\nqueue small { capability = { cpu: 4 } }")


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def podless(state: ClusterState, name: str, cpu: int, queue: str = "default", min_member: int = 4) -> None:
    state.add_podgroup(PodGroup("ns", name, min_member=min_member, queue=queue, phase="Pending", uid=f"pg-{name}",
                                min_resources={"cpu": cpu, "memory": 0}))


def phase(decisions, name: str) -> str:
    return next(p.phase for p in decisions.podgroups if p.name == f"ns/{name}")


def test_a_podgroup_without_pods_is_admitted_then_its_pods_bound(pure):
    state = ClusterState()
    node(state, "n1", cpu=8000)
    podless(state, "job", cpu=4000)
    decisions = cycle(PLAN, state, pure)
    assert phase(decisions, "job") == "Inqueue"
    state.apply(decisions)
    for i in range(4):                                      # the controller creates the pods
        pod(state, f"job-{i}", cpu=1000, group="job")
    decisions = cycle(PLAN, state, pure)
    assert len(placements(decisions)) == 4 and phase(decisions, "job") == "Running"


def test_an_admitted_podless_group_holds_its_queue_room(pure):
    state = ClusterState()
    node(state, "n1", cpu=8000)
    podless(state, "first", cpu=3000, queue="small")
    podless(state, "second", cpu=3000, queue="small")      # both together exceed the queue's 4 cpu
    decisions = cycle(PLAN, state, pure)
    assert sorted(phase(decisions, n) for n in ("first", "second")) == ["Inqueue", "Pending"]
    state.apply(decisions)
    decisions = cycle(PLAN, state, pure)                    # the first still holds its minResources
    assert sorted(phase(decisions, n) for n in ("first", "second")) == ["Inqueue", "Pending"]


def test_a_podless_group_over_its_queue_waits_with_the_reason(pure):
    state = ClusterState()
    node(state, "n1", cpu=8000)
    podless(state, "big", cpu=6000, queue="small")
    decisions = cycle(PLAN, state, pure)
    assert phase(decisions, "big") == "Pending"
    (status,) = [p for p in decisions.podgroups if p.name == "ns/big"]
    assert status.conditions and "small" in status.conditions[0].message


def test_finished_groups_without_pods_are_left_alone(pure):
    state = ClusterState()
    node(state, "n1")
    state.add_podgroup(PodGroup("ns", "done", min_member=2, phase="Completed", uid="pg-done"))
    state.add_podgroup(PodGroup("ns", "ran", min_member=2, phase="Running", uid="pg-ran"))
    assert {p.name for p in cycle(PLAN, state, pure).podgroups} == set()
