"""A preemptor or reclaimer asking for SOFT network topology (`spec.networkTopology`, mode soft;
and a soft sub-group) under preempt, reclaim, gang_preempt and gang_reclaim, on both kernels: its
victims are chosen inside the tightest HyperNode that can hold it (every candidate of a tier tried,
the cheapest kept, as for a hard job), widening tier by tier and only then to the whole cluster;
within the HyperNode chosen it evicts no more than it needs (runtime/engine/actions/bundles.py).

Volcano v1.14.1 has no table for this: its preempt skips every job containing network topology,
soft ones too (preempt.go, volcano#4374), and its reclaim evicts for such a job wherever its pods
fit, ignoring the tiers. The cases are ours; where the preemptor lands and what is evicted are read
from the decisions and checked against the HyperNodes' members written here.

The tree (one pod of 1 cpu fills a node): switches s0 = {n0, n1}, s1 = {n2, n3}, s2 = {n4, n5}
(tier 1); pods p0 over s0 and s1, p1 over s2 (tier 2); the cluster above.
"""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, NetworkTopology
from runtime.cluster.topology import HyperNode, Member
from runtime_helpers import cycle
from test_gang_preempt import HIGH, LOW, RECLAIM_TIERS, cluster, group, outcome, plan, queues
from test_subgroup_eviction import sub_job

SOFT = NetworkTopology("soft", 1, None)
SWITCHES = {"s0": {"n0", "n1"}, "s1": {"n2", "n3"}, "s2": {"n4", "n5"}}
PODS = {"p0": {"n0", "n1", "n2", "n3"}, "p1": {"n4", "n5"}}
PREEMPTING = {"preempt": plan("enqueue, allocate, preempt, backfill"),
              "gang_preempt": plan("enqueue, allocate, gang_preempt, backfill")}
RECLAIMING = {"reclaim": plan("enqueue, allocate, reclaim, backfill", RECLAIM_TIERS),
              "gang_reclaim": plan("enqueue, allocate, gang_reclaim, backfill", RECLAIM_TIERS)}


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def tree(state: ClusterState) -> None:
    for name, members in SWITCHES.items():
        state.add_hypernode(HyperNode(name, 1, "", tuple(Member("Node", exact=n) for n in sorted(members))))
    state.add_hypernode(HyperNode("p0", 2, "", (Member("HyperNode", exact="s0"), Member("HyperNode", exact="s1"))))
    state.add_hypernode(HyperNode("p1", 2, "", (Member("HyperNode", exact="s2"),)))


def tightest(where: set[str]) -> str:
    """The tightest HyperNode (by the members above) holding every node of `where`."""
    for level in (SWITCHES, PODS):
        for name, members in level.items():
            if where <= members:
                return name
    return "<cluster>"


def low(state: ClusterState, n: str, priority: int = LOW, queue: str = "default") -> None:
    """One low one-pod job on node n."""
    group(state, f"low-{n}", 1, 1, priority, queue=queue, running_on=[n])


def evicted_nodes(state: ClusterState, decisions) -> set[str]:
    return {state.pods[e.pod].node_name for e in decisions.evictions}


def scattered(state: ClusterState, queue: str = "default") -> None:
    """Victims everywhere, but only s0 offers two: the cheapest (lowest priority) are scattered
    over s1 and s2, each switch's other node holding a pod no preemptor may take."""
    tree(state)
    low(state, "n0", LOW + 5, queue)
    low(state, "n1", LOW + 5, queue)
    for n in ("n2", "n4"):
        low(state, n, LOW, queue)
    for n in ("n3", "n5"):
        group(state, f"top-{n}", 1, 1, HIGH + 50, queue=queue, running_on=[n])


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_soft_preemptor_lands_in_the_switch_its_victims_allow(action, pure):
    """A soft gang of 2: the cheapest victims are scattered (n2, n4), only s0 holds two victims
    side by side; it evicts exactly those two and lands in s0."""
    state = cluster(6)
    scattered(state)
    group(state, "soft", 2, 2, HIGH, topology=SOFT, creation=1)
    decisions = cycle(PREEMPTING[action], state, pure)
    got = outcome(state, decisions)
    assert set(got.pipelined["soft"]) == {"n0", "n1"}
    assert got.evicted == {"low-n0": 1, "low-n1": 1}
    assert evicted_nodes(state, decisions) == {"n0", "n1"}


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_a_job_without_topology_takes_the_cheapest_victims_anywhere(action, pure):
    """The same cluster, the gang without topology: the scattered cheapest victims go (what the
    soft request changes above)."""
    state = cluster(6)
    scattered(state)
    group(state, "plain", 2, 2, HIGH, creation=1)
    decisions = cycle(PREEMPTING[action], state, pure)
    assert evicted_nodes(state, decisions) == {"n2", "n4"}
    assert set(outcome(state, decisions).pipelined["plain"]) == {"n2", "n4"}


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_soft_preemptor_takes_idle_room_in_its_switch_and_evicts_one(action, pure):
    """s0 has an idle node and one victim; cheaper victims elsewhere: one eviction, in s0."""
    state = cluster(6)
    tree(state)
    low(state, "n0", LOW + 5)
    for n in ("n2", "n3", "n4", "n5"):
        low(state, n, LOW)
    group(state, "soft", 2, 2, HIGH, topology=SOFT, creation=1)
    decisions = cycle(PREEMPTING[action], state, pure)
    got = outcome(state, decisions)
    assert set(got.pipelined["soft"]) == {"n0", "n1"} and got.evicted == {"low-n0": 1}


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_soft_preemptor_widens_to_the_tier_that_holds_it(action, pure):
    """A soft gang of 3: no switch holds it, p0 (tier 2) does; three victims, all inside p0,
    though cheaper ones run in p1."""
    state = cluster(6)
    tree(state)
    for n in ("n0", "n1", "n2", "n3"):
        low(state, n, LOW + 5)
    for n in ("n4", "n5"):
        low(state, n, LOW)
    group(state, "soft", 3, 3, HIGH, topology=SOFT, creation=1)
    decisions = cycle(PREEMPTING[action], state, pure)
    where = set(outcome(state, decisions).pipelined["soft"])
    assert len(decisions.evictions) == 3 and len(where) == 3
    assert tightest(where) == "p0" and evicted_nodes(state, decisions) == where


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_soft_preemptor_widens_to_the_cluster_when_no_hypernode_holds_it(action, pure):
    """A soft gang of 5: no HyperNode holds it; it spans the cluster with five evictions, no more
    (the sixth node's pod stays)."""
    state = cluster(6)
    tree(state)
    for n in sorted(SWITCHES["s0"] | SWITCHES["s1"] | SWITCHES["s2"]):
        low(state, n)
    group(state, "soft", 5, 5, HIGH, topology=SOFT, creation=1)
    decisions = cycle(PREEMPTING[action], state, pure)
    where = set(outcome(state, decisions).pipelined["soft"])
    assert len(where) == 5 and len(decisions.evictions) == 5
    assert tightest(where) == "<cluster>" and evicted_nodes(state, decisions) == where


def test_soft_gang_preemptor_keeps_a_victim_gang_at_its_minimum_in_its_switch(pure):
    """gang_preempt: a low gang of 4 (min 2) over s0 and s1 and cheap one-pod jobs in s2; the soft
    gang of 2 takes the gang's two SAFE pods where they share a switch, not the cheaper s2 pods."""
    state = cluster(6)
    tree(state)
    group(state, "victim", 4, 2, LOW + 5, running_on=["n0", "n2", "n1", "n3"])
    low(state, "n4")
    group(state, "top-n5", 1, 1, HIGH + 50, running_on=["n5"])
    group(state, "soft", 2, 2, HIGH, topology=SOFT, creation=1)
    decisions = cycle(PREEMPTING["gang_preempt"], state, pure)
    got = outcome(state, decisions)
    where = set(got.pipelined["soft"])
    assert got.evicted == {"victim": 2} and tightest(where) in ("s0", "s1")
    assert evicted_nodes(state, decisions) == where


@pytest.mark.parametrize("action", sorted(RECLAIMING))
def test_soft_reclaimer_lands_in_the_switch_its_victims_allow(action, pure):
    """reclaim: q2 overuses its deserved share; its pods are the victims, placed as above; the
    soft reclaimer of q1 takes the two in s0, not the cheaper scattered ones."""
    state = cluster(6)
    queues(state, {"q1": 3, "q2": 1})
    scattered(state, queue="q2")
    group(state, "soft", 2, 2, LOW, queue="q1", topology=SOFT, creation=1)
    decisions = cycle(RECLAIMING[action], state, pure)
    got = outcome(state, decisions)
    assert set(got.pipelined["soft"]) == {"n0", "n1"}
    assert evicted_nodes(state, decisions) == {"n0", "n1"}


@pytest.mark.parametrize("action", sorted(RECLAIMING))
def test_soft_reclaimer_widens_to_the_cluster(action, pure):
    """reclaim: q2 (deserved nothing) runs one pod in each switch; the other nodes run pods of q3, which
    may not be reclaimed. The soft reclaimer of 3 (q1, deserved 3) finds no HyperNode with three
    victims: the cluster, three evictions, no more."""
    state = cluster(6)
    queues(state, {"q1": 3, "q2": 0, "q3": 3}, reclaimable={"q3": False})
    tree(state)
    for n in ("n0", "n2", "n4"):
        low(state, n, queue="q2")
    for n in ("n1", "n3", "n5"):
        low(state, n, queue="q3")
    group(state, "soft", 3, 3, LOW, queue="q1", topology=SOFT, creation=1)
    decisions = cycle(RECLAIMING[action], state, pure)
    where = set(outcome(state, decisions).pipelined["soft"])
    assert where == {"n0", "n2", "n4"} and tightest(where) == "<cluster>"
    assert evicted_nodes(state, decisions) == where and len(decisions.evictions) == 3


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_soft_sub_groups_of_a_soft_job_land_in_one_switch(action, pure):
    """A soft job with two sub-groups of 2 (soft tier 1 each, minSubGroups 2): the job lands in p0
    (tier 2), each sub-group in one switch, four evictions, none in p1 where the cheapest are."""
    state = cluster(6)
    tree(state)
    for n in ("n0", "n1", "n2", "n3"):
        low(state, n, LOW + 5)
    for n in ("n4", "n5"):
        low(state, n, LOW)
    sub_job(state, "soft", {"a": 2, "b": 2}, 2, 4, HIGH, sub_topology=SOFT, topology=SOFT, min_groups=2)
    decisions = cycle(PREEMPTING[action], state, pure)
    where = {k: n for k, n in decisions.pipelined.items() if state.pods[k].group == "soft"}
    assert len(where) == 4 and len(decisions.evictions) == 4
    assert tightest(set(where.values())) == "p0"
    for value in ("a", "b"):
        assert tightest({n for k, n in where.items() if f"soft-{value}-" in k}) in SWITCHES


def test_soft_preemptor_with_a_placed_pod_grows_in_its_switch(pure):
    """An elastic soft job runs one pod on n2 (min 2 now needs one more): it evicts its sibling's
    switch-mate n3, not the cheaper victims of s0 or s2."""
    state = cluster(6)
    tree(state)
    for n in ("n0", "n1", "n4", "n5"):
        low(state, n, LOW)
    low(state, "n3", LOW + 5)
    group(state, "soft", 2, 2, HIGH, topology=SOFT, running_on=["n2"], creation=1)
    decisions = cycle(PREEMPTING["preempt"], state, pure)
    got = outcome(state, decisions)
    assert got.pipelined.get("soft") == ["n3"] and evicted_nodes(state, decisions) == {"n3"}


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_soft_sub_groups_of_a_job_without_topology_each_land_in_one_switch(action, pure):
    """A job without topology, two sub-groups of 2 (soft tier 1, minSubGroups 2): the cheapest
    victims are one in each switch (n1, n3, n5); each sub-group still takes both victims of one
    switch (four evictions in all, each beside a pod of the job), not two scattered cheap ones."""
    state = cluster(6)
    tree(state)
    for n in ("n0", "n2", "n4"):
        low(state, n, LOW + 5)
    for n in ("n1", "n3", "n5"):
        low(state, n, LOW)
    sub_job(state, "job", {"a": 2, "b": 2}, 2, 4, HIGH, sub_topology=SOFT, min_groups=2)
    decisions = cycle(PREEMPTING[action], state, pure)
    where = {k: n for k, n in decisions.pipelined.items() if state.pods[k].group == "job"}
    assert len(where) == 4 and len(decisions.evictions) == 4
    assert evicted_nodes(state, decisions) == set(where.values())
    for value in ("a", "b"):
        assert tightest({n for k, n in where.items() if f"job-{value}-" in k}) in SWITCHES


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_a_soft_job_held_for_its_hypernodes_evicts_nothing(action, pure):
    """s0 with two parents (p0 and p1): allocate holds every job asking for topology, naming
    them, so a soft preemptor evicts nothing (its reservations would never bind); a job without
    topology still preempts."""
    state = cluster(6)
    tree(state)
    state.add_hypernode(HyperNode("p1", 2, "", (Member("HyperNode", exact="s2"), Member("HyperNode", exact="s0"))))
    for n in sorted(SWITCHES["s0"] | SWITCHES["s1"] | SWITCHES["s2"]):
        low(state, n)
    group(state, "soft", 2, 2, HIGH, topology=SOFT, creation=1)
    decisions = cycle(PREEMPTING[action], state, pure)
    assert not decisions.evictions and not decisions.pipelined
    state = cluster(6)
    tree(state)
    state.add_hypernode(HyperNode("p1", 2, "", (Member("HyperNode", exact="s2"), Member("HyperNode", exact="s0"))))
    for n in sorted(SWITCHES["s0"] | SWITCHES["s1"] | SWITCHES["s2"]):
        low(state, n)
    group(state, "plain", 2, 2, HIGH, creation=1)
    assert len(cycle(PREEMPTING[action], state, pure).evictions) == 2


def test_backfill_places_a_soft_jobs_best_effort_pods_beside_its_placed_pod(pure):
    """backfill: a soft tier-1 job runs one pod on n2; its two pods that request nothing join it
    in s1 (n2, n3), though the emptier s0 scores better and is where they go without topology.
    With s1's nodes out of pod slots they go elsewhere (a soft request widens; a hard one waits:
    test_gang_preempt's test_backfill_places_a_hard_gangs_best_effort_pods_within_its_switch)."""
    from runtime.cluster.model import PodGroup
    from runtime_helpers import GiB, node, pod
    from test_gang_preempt import GANG_PREEMPT, switches

    for topology, slots, expect in ((SOFT, 110, {"n2", "n3"}), (None, 110, {"n0", "n1"}),
                                    (SOFT, 2, {"n0", "n1"})):
        state = ClusterState()
        for i in range(4):
            node(state, f"n{i}", cpu=1000, memory=8 * GiB, pods=slots if i >= 2 else 110)
        switches(state)
        for n in ("n2", "n3"):
            pod(state, f"busy-{n}", cpu=600, memory=4 * GiB, node_name=n, priority=LOW)
        state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Running", uid="pg-job",
                                    network_topology=topology))
        pod(state, "job-run", cpu=0, memory=0, group="job", node_name="n2", priority=LOW)
        for i in range(2):
            pod(state, f"job-be-{i}", cpu=0, memory=0, group="job", priority=LOW)
        decisions = cycle(GANG_PREEMPT, state, pure)
        where = {b.node for b in decisions.bindings}
        assert len(decisions.bindings) == 2 and where <= expect, (topology, slots, where)


def test_backfill_keeps_as_many_of_a_soft_jobs_best_effort_pods_as_fit(pure):
    """backfill: when not all of a soft job's pods that request nothing fit anywhere together,
    as many as fit are placed (one pod slot free on each of n0, n1 and n3: three of four), and
    the fourth waits with a reason; none is placed twice."""
    from runtime.cluster.model import PodGroup
    from runtime_helpers import GiB, node, pod
    from test_gang_preempt import GANG_PREEMPT, switches

    state = ClusterState()
    for i, slots in enumerate((1, 1, 2, 2)):
        node(state, f"n{i}", cpu=1000, memory=8 * GiB, pods=slots)
    switches(state)
    for n in ("n2", "n3"):
        pod(state, f"busy-{n}", cpu=600, memory=4 * GiB, node_name=n, priority=LOW)
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Running", uid="pg-job", network_topology=SOFT))
    pod(state, "job-run", cpu=0, memory=0, group="job", node_name="n2", priority=LOW)
    for i in range(4):
        pod(state, f"job-be-{i}", cpu=0, memory=0, group="job", priority=LOW)
    decisions = cycle(GANG_PREEMPT, state, pure)
    where = sorted(b.node for b in decisions.bindings)
    assert where == ["n0", "n1", "n3"], where
    assert len({b.pod for b in decisions.bindings}) == 3
    left = {b.pod for b in decisions.bindings} ^ {f"ns/job-be-{i}" for i in range(4)}
    assert len(left) == 1 and left <= {u.pod for u in decisions.unschedulable}, (left, decisions.unschedulable)
