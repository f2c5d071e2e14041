"""Reservations (issue 17): a pod nominated to a node (Pod.nominated_node, the cluster's
status.nominatedNodeName) holds the room there across cycles, binds when it is free, and is
released with a reason when it cannot stay. Both kernels."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup
from runtime.engine.session import Options
from runtime.engine.cycle import run_cycle
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
    from runtime.cluster.model import Taint
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


# Found by the chaos soak (docs/reliability.md): two gangs of one queue, each pipelined by
# preempt within the queue's capability alone, both bound the next cycle, 15 CPUs allocated
# under a capability of 12. Each reservation was checked against the queue on its own, and a
# held reservation became a binding without the queue being asked again.
SIX = policy(STANDARD_TIERS + "queue q { weight = 1 capability = { cpu: 6 } }", actions=ACTIONS)


def _capped_queue_with_two_nominated_gangs(state: ClusterState) -> None:
    node(state, "a", cpu=16000, memory=64 * GiB)
    pod(state, "running", cpu=2000, node_name="a", priority=1, annotations={"scheduling.volcano.sh/queue-name": "q"})
    for name in ("g1", "g2"):   # each alone: 2 + 4 <= 6; both: 10
        gang(state, name, size=2, cpu=2000, queue="q", priority=100, creation=1.0 if name == "g1" else 2.0)
        for i in range(2):
            member = state.pods[f"ns/{name}-{i}"]
            member.nominated_node, member.nominated_at = "a", NOW - 5


def test_reservations_of_one_queue_are_held_together_within_its_capability(pure):
    state = ClusterState()
    _capped_queue_with_two_nominated_gangs(state)
    decisions = run(state, pure, plan=SIX)
    assert placements(decisions) == {"ns/g1-0": "a", "ns/g1-1": "a"}
    assert set(decisions.released) == {"ns/g2-0", "ns/g2-1"}
    assert "queue q may no longer allocate it" in released(decisions, "ns/g2-0")


def test_a_held_reservation_binds_only_where_its_queue_may_still_allocate_it(pure):
    state = ClusterState()
    _capped_queue_with_two_nominated_gangs(state)
    for i in range(2):
        del state.pods[f"ns/g2-{i}"]
    state.podgroups.pop("ns/g2")
    # A job of the queue that comes first in this cycle's allocate takes what the held gang
    # counted on: 2 + 2 leaves room for one of its two members, and a gang binds all or none.
    pod(state, "first", cpu=2000, priority=1000, annotations={"scheduling.volcano.sh/queue-name": "q"})
    decisions = run(state, pure, plan=SIX)
    assert placements(decisions) == {"ns/first": "a"}
    assert set(decisions.pipelined) == {"ns/g1-0", "ns/g1-1"}


def test_preempt_counts_the_queues_earlier_reservations_of_the_cycle(pure):
    # The soak's case in one cycle: a queue capped at 12 CPUs holds 10 of low priority (5 on
    # each node, 3 idle on each); two gangs of 2 x 2 CPUs preempt in it. Each gang alone is
    # within the capability after a few evictions; both need enough evictions for 8 CPUs.
    twelve = policy(STANDARD_TIERS + "queue q { weight = 1 capability = { cpu: 12 } }", actions=ACTIONS)
    state = ClusterState()
    for name in ("a", "b"):
        node(state, name, cpu=8000, memory=64 * GiB)
        for i in range(5):
            pod(state, f"low-{name}{i}", cpu=1000, node_name=name, priority=1,
                annotations={"scheduling.volcano.sh/queue-name": "q"})
    for name, created in (("g1", 1.0), ("g2", 2.0)):
        gang(state, name, size=2, cpu=2000, queue="q", priority=100, creation=created)
    decisions = run(state, pure, plan=twelve)
    evicted = {e.pod for e in decisions.evictions}
    kept = sum(1000 for key in state.pods if key.startswith("ns/low-") and key not in evicted)
    assert len(decisions.pipelined) == 4
    assert kept + 4 * 2000 <= 12000, f"{len(evicted)} evicted: the reservations cannot all bind"


# A reservation made within its queue's deserved share, and then another queue's demand: qb's
# waiting pod shrinks qa's share (proportion splits 8 CPUs 4/4 where qa alone had 6), so qa's
# running 3 CPUs and the reservation's 2 are above it.
def two_queues(qa: str = ""):
    return policy(STANDARD_TIERS + f"queue qa {{ weight = 1 {qa} }}\nqueue qb {{ weight = 1 }}", actions=ACTIONS)


@pytest.mark.parametrize("qa, held", [
    ("", True),                  # may borrow: held up to its capability, and binds
    ("borrow = false", False),   # may not borrow: its deserved share is the bound, as asked
    ("borrow_limit = { cpu: 0 }", False),
])
def test_a_reservation_outlives_a_share_that_moved_unless_the_queue_may_not_borrow(pure, qa, held):
    plan = two_queues(qa)
    state = ClusterState()
    node(state, "a", cpu=8000, memory=16 * GiB)
    for name, queue in (("g", "qa"), ("other", "qb")):
        state.add_podgroup(PodGroup("ns", name, min_member=1, queue=queue, phase="Inqueue", uid=f"pg-{name}"))
    pod(state, "running", cpu=3000, node_name="a", group="g", priority=100)
    nominated(state, "p", "a", group="g")
    pod(state, "waiting", cpu=1000, group="other", priority=100)
    decisions = run(state, pure, plan=plan)
    if held:
        assert placements(decisions)["ns/p"] == "a" and not decisions.released
    else:
        assert "queue qa may no longer allocate it" in released(decisions, "ns/p")


def test_a_pod_of_the_queue_does_not_take_the_share_a_reservation_holds(pure):
    # qa deserves 4 of 8 (qb waits for 4); it runs 2 and holds a reservation for 2 more. A pod
    # of qa whose job comes first in drf's job order (it has nothing yet) is refused the share.
    plan = two_queues()
    state = ClusterState()
    node(state, "a", cpu=8000, memory=16 * GiB)
    for name, queue in (("g", "qa"), ("first", "qa"), ("other", "qb")):
        state.add_podgroup(PodGroup("ns", name, min_member=1, queue=queue, phase="Inqueue", uid=f"pg-{name}"))
    pod(state, "running", cpu=2000, node_name="a", group="g", priority=100)
    leaving(state, "victim", "a", cpu=4000)
    nominated(state, "p", "a", group="g")
    pod(state, "rival", cpu=2000, group="first", priority=100)
    pod(state, "waiting", cpu=4000, group="other", priority=100)
    decisions = run(state, pure, plan=plan)
    assert "ns/rival" not in placements(decisions)
    [why] = [u.reasons for u in decisions.unschedulable if u.pod == "ns/rival"]
    assert any("held for reservations" in r.message for r in why), why
