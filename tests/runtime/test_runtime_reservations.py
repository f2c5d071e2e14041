"""Reservations (issue 17): a pod nominated to a node (Pod.nominated_node, the cluster's
status.nominatedNodeName) holds the room there across cycles, binds when it is free, and is
released with a reason when it cannot stay. Both kernels."""

from __future__ import annotations

import pytest

from runtime.model import ClusterState, PodGroup
from runtime.session import Options
from runtime.cycle import run_cycle
from runtime_helpers import STANDARD_TIERS, GiB, gang, node, placements, pod, policy

ACTIONS = "enqueue, allocate, preempt, reclaim, backfill"
PLAN = policy(STANDARD_TIERS + "queue q { weight = 1 }", actions=ACTIONS)
# The queue's share changed (a reload lowered its capability below what the pod needs).
CAPPED = policy(STANDARD_TIERS + "queue q { weight = 1 capability = { cpu: 1 } }", actions=ACTIONS)
NOW = 10_000.0


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def run(state: ClusterState, pure: bool, now: float = NOW, plan=PLAN):
    return run_cycle(plan, state, Options(pure_python=pure, now=now))


def nominated(state: ClusterState, name: str, node_name: str, cpu: int = 2000, at: float = NOW - 5,
              priority: int = 100, group: str | None = None):
    p = pod(state, name, cpu=cpu, priority=priority, group=group)
    p.nominated_node, p.nominated_at = node_name, at
    return p


def leaving(state: ClusterState, name: str, node_name: str, cpu: int = 2000):
    p = pod(state, name, cpu=cpu, node_name=node_name, priority=1)
    p.releasing = True
    return p


def released(decisions, key: str) -> str:
    return decisions.released[key].message


def test_a_reservation_binds_once_its_room_is_free(pure):
    state = ClusterState()
    node(state, "a", cpu=4000, memory=16 * GiB)
    node(state, "b", cpu=8000, memory=16 * GiB)     # more room elsewhere: it stays where it was nominated
    nominated(state, "p", "a")
    decisions = run(state, pure)
    assert placements(decisions) == {"ns/p": "a"} and not decisions.released


def test_the_room_being_freed_is_held_against_other_pods(pure):
    state = ClusterState()
    node(state, "a", cpu=4000, memory=16 * GiB)
    leaving(state, "victim", "a")
    nominated(state, "p", "a", cpu=4000)            # needs the victim's room and the idle half
    pod(state, "late", cpu=2000, priority=100)      # would fit the idle half, and block p for good
    decisions = run(state, pure)
    assert decisions.pipelined == {"ns/p": "a"}
    assert "ns/late" not in placements(decisions) and not decisions.evictions


@pytest.mark.parametrize("change, reason", [
    ("node gone", "the node is gone"),
    ("timeout", "held 400s, longer than 300s"),
    ("tainted", "the node no longer passes its predicates"),
    ("room taken", "its room was taken"),
    ("queue capped", "queue q may no longer allocate it"),
])
def test_a_reservation_that_cannot_stay_is_released_with_its_reason(pure, change, reason):
    from runtime.model import Taint
    state = ClusterState()
    node(state, "a", cpu=4000, memory=16 * GiB)
    state.add_podgroup(PodGroup("ns", "g", min_member=1, queue="q", phase="Inqueue", uid="pg-g"))
    p = nominated(state, "p", "a", group="g", at=NOW - (400 if change == "timeout" else 5))
    leaving(state, "victim", "a")
    if change == "node gone":
        p.nominated_node = "gone"
    elif change == "tainted":
        state.nodes["a"].taints = (Taint("dedicated", "x", "NoSchedule"),)
    elif change == "room taken":
        pod(state, "intruder", cpu=4000, node_name="a", priority=1000)
    decisions = run(state, pure, plan=CAPPED if change == "queue capped" else PLAN)
    assert reason in released(decisions, "ns/p")
    # Released, it is a pending pod again in the same cycle: placed where there is room now.
    if change == "node gone":
        assert placements(decisions) == {"ns/p": "a"}


def test_a_gang_keeps_all_its_reservations_or_none(pure):
    state = ClusterState()
    node(state, "a", cpu=4000, memory=16 * GiB)
    node(state, "b", cpu=4000, memory=16 * GiB)
    gang(state, "g", size=2, cpu=2000, priority=100)
    state.pods["ns/g-0"].nominated_node, state.pods["ns/g-0"].nominated_at = "a", NOW - 5
    state.pods["ns/g-1"].nominated_node, state.pods["ns/g-1"].nominated_at = "gone", NOW - 5
    leaving(state, "va", "a", cpu=4000)
    leaving(state, "vb", "b", cpu=4000)
    decisions = run(state, pure)
    assert set(decisions.released) == {"ns/g-0", "ns/g-1"}
    assert all("the node is gone" in r.message for r in decisions.released.values())
