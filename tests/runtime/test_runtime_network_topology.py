"""Gangs placed within their network topology (a PodGroup's `spec.networkTopology` over Volcano's
HyperNodes; runtime/engine/actions/topology.py), on both kernels.

The tables marked with a Go test case are translated from Volcano's
pkg/scheduler/actions/allocate/allocate_test.go, TestAllocateWithNetWorkTopologies (nodes of 2 cpu
and 4Gi, pods of 2 cpu and 4G: one pod per node). Every placement is checked by `hard_ok`, written
here from the pods' nodes and the HyperNodes' leaf sets, not with the engine.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.model import ClusterState, NetworkTopology, PodGroup
from runtime.cluster.topology import HyperNode, Member
from runtime_helpers import GiB, STANDARD_TIERS, cycle, node, placements, pod, policy

PLAN = policy(STANDARD_TIERS)
ACTIONS = "enqueue, allocate, preempt, reclaim, backfill"
FULL = policy(STANDARD_TIERS, actions=ACTIONS)


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def hypernode(name: str, tier: int, *members: str, kind: str = "Node", tier_name: str = "") -> HyperNode:
    return HyperNode(name, tier, tier_name, tuple(Member(kind, exact=m) for m in members))


def two_switches(state: ClusterState, spine: bool = True, tier_names: bool = False) -> None:
    """Volcano's usual table tree: s0 = {s0-n1, s0-n2}, s1 = {s1-n3, s1-n4} (tier 1), s2 over both (tier 2)."""
    for name in ("s0-n1", "s0-n2", "s1-n3", "s1-n4"):
        node(state, name, cpu=2000, memory=4 * GiB)
    leaf = "volcano.sh/task-spec" if tier_names else ""
    state.add_hypernode(hypernode("s0", 1, "s0-n1", "s0-n2", tier_name=leaf))
    state.add_hypernode(hypernode("s1", 1, "s1-n3", "s1-n4", tier_name=leaf))
    if spine:
        state.add_hypernode(hypernode("s2", 2, "s0", "s1", kind="HyperNode",
                                      tier_name="volcano.sh/job-spec" if tier_names else ""))


def topo_gang(state: ClusterState, name: str, pods: int, min_member: int, mode: str = "hard",
              tier: int | None = 1, tier_name: str | None = None, nodes: tuple[str, ...] = (), cpu: int = 2000,
              memory: int = 4 * 10**9, **kwargs) -> None:
    request = None if mode is None else NetworkTopology(mode, tier, tier_name)
    state.add_podgroup(PodGroup("ns", name, min_member=min_member, phase="Inqueue", uid=f"pg-{name}",
                                network_topology=request))
    for i in range(pods):
        pod(state, f"{name}-{i}", cpu=cpu, memory=memory, group=name,
            node_name=nodes[i] if i < len(nodes) else None, **kwargs)


def hard_ok(state: ClusterState, bound: dict[str, str], group: str, highest: int) -> bool:
    """Independent checker: the gang's pods (running before, or bound now) all lie within the leaf
    set of one HyperNode of tier <= highest (leaf sets computed here, by walking members); a tier
    above every HyperNode's allows the whole cluster (Volcano's virtual top HyperNode)."""
    def leaf_set(name: str, seen=()) -> set[str]:
        h = state.hypernodes[name]
        out: set[str] = set()
        for m in h.members:
            if m.type == "Node":
                out.add(m.exact)
            elif m.exact in state.hypernodes and m.exact not in seen:
                out |= leaf_set(m.exact, (*seen, name))
        return out

    where = {p.node_name for p in state.pods.values() if p.group == group and p.node_name}
    where |= {n for k, n in bound.items() if state.pods[k].group == group}
    if not where:
        return True
    if state.hypernodes and highest > max(h.tier for h in state.hypernodes.values()):
        return True        # Volcano's virtual HyperNode of every node, one tier above the highest
    return any(h.tier <= highest and where <= leaf_set(h.name) for h in state.hypernodes.values())


# --- TestAllocateWithNetWorkTopologies --------------------------------------------------------

@pytest.mark.parametrize("case, mode, tier, min_member, pods, running, binds", [
    ("soft network topology constrain, can allocate job when resources are enough", "soft", None, 3, 3, (), 3),
    ("soft network topology constrain, can allocate job when minavailable < replicas", "soft", None, 1, 2, (), 2),
    ("soft network topology constrain and tasks in job rescheduled, can allocate job when resources are enough",
     "soft", None, 2, 3, ("s0-n1", "s0-n2"), 1),
    ("hard network topology constrain, can not allocate job when cross highestTierAllowed tier", "hard", 1, 3, 3, (), 0),
    ("hard network topology constrain, can allocate job when highestTierAllowed not reached", "hard", 2, 3, 3, (), 3),
    ("hard network topology constrain, can allocate job when multi hyperNodes are available", "hard", 1, 2, 2, (), 2),
    ("hard network topology constrain, can allocate job when minavailable < replicas", "hard", 1, 1, 2, (), 2),
    ("hard network topology constrain and tasks in job rescheduled, can allocate job when highestTierAllowed "
     "not reached", "hard", 2, 2, 3, ("s0-n1", "s0-n2"), 1),
    ("hard network topology constrain and tasks in job rescheduled, can not allocate job when cross "
     "highestTierAllowed tier", "hard", 1, 2, 3, ("s0-n1", "s0-n2"), 0),
])
def test_volcano_allocate_with_network_topologies(case, mode, tier, min_member, pods, running, binds, pure):
    state = ClusterState()
    two_switches(state)
    topo_gang(state, "pg1", pods, min_member, mode, tier, nodes=running)
    bound = placements(cycle(PLAN, state, pure))
    assert len(bound) == binds, case
    if mode == "hard":
        assert hard_ok(state, bound, "pg1", tier)
        if min_member < pods and not running and binds:          # later members join their siblings
            assert len({n[:2] for n in bound.values()}) == 1


def test_volcano_hard_lca_hypernode_empty_spans_the_virtual_top(pure):
    """"hard network topology constrain and tasks in job rescheduled, can allocate job when
    LCAHyperNode is empty": no tier-2 HyperNode, highestTierAllowed 2: Volcano's virtual cluster
    HyperNode (tier 2 here) holds the job, so its third pod goes to s1."""
    state = ClusterState()
    two_switches(state, spine=False)
    topo_gang(state, "pg1", 3, 2, "hard", 2, nodes=("s0-n1", "s0-n2"))
    bound = placements(cycle(PLAN, state, pure))
    assert list(bound.values()) in (["s1-n3"], ["s1-n4"])


@pytest.mark.parametrize("case, tier_name, pods, binds", [
    ("hard network topology constrain, can not allocate job when cross highestTierName tier",
     "volcano.sh/task-spec", 3, 0),
    ("hard network topology constrain, can allocate job when the tier corresponding to highestTierName not reached",
     "volcano.sh/job-spec", 3, 3),
])
def test_volcano_highest_tier_name(case, tier_name, pods, binds, pure):
    state = ClusterState()
    two_switches(state, tier_names=True)
    topo_gang(state, "pg1", pods, pods, "hard", None, tier_name=tier_name)
    assert len(placements(cycle(PLAN, state, pure))) == binds, case


def test_volcano_hard_with_affinity_goes_to_the_hypernode_whose_node_matches(pure):
    """"hard network topology constrain, two available hyperNodes, can allocate job to nodes with affinity"."""
    state = ClusterState()
    node(state, "s0-n1", cpu=2000, memory=4 * GiB)
    node(state, "s1-n2", cpu=2000, memory=4 * GiB, labels={"nodeRole": "master"})
    state.add_hypernode(hypernode("s0", 1, "s0-n1"))
    state.add_hypernode(hypernode("s1", 1, "s1-n2"))
    topo_gang(state, "pg1", 1, 1, "hard", 1, node_selector={"nodeRole": "master"})
    assert placements(cycle(PLAN, state, pure)) == {"ns/pg1-0": "s1-n2"}


def three_tiers(state: ClusterState) -> None:
    """Volcano's three-tier table tree: s0 (tier 3) over s1, s2 (tier 2), over s3..s6 (tier 1) of two nodes each."""
    for leaf in ("s3", "s4", "s5", "s6"):
        for i in (1, 2):
            node(state, f"{leaf}-n{i}", cpu=2000, memory=4 * GiB)
        state.add_hypernode(hypernode(leaf, 1, f"{leaf}-n1", f"{leaf}-n2"))
    state.add_hypernode(hypernode("s1", 2, "s3", "s4", kind="HyperNode"))
    state.add_hypernode(hypernode("s2", 2, "s5", "s6", kind="HyperNode"))
    state.add_hypernode(hypernode("s0", 3, "s1", "s2", kind="HyperNode"))


@pytest.mark.parametrize("case, mode, tier, binds, within", [
    ("soft network topology constrain and tasks in job rescheduled, can allocate job when cross "
     "highestTierAllowed tier and hyperNodesInfo has three tier", "soft", None, 1, "s4"),
    ("hard network topology constrain and tasks in job rescheduled, can allocate job when highestTierAllowed "
     "not reached and hyperNodesInfo has three tier", "hard", 2, 1, "s4"),
    ("hard network topology constrain and tasks in job rescheduled, can not allocate job when cross "
     "highestTierAllowed tier and hyperNodesInfo has three tier", "hard", 1, 0, None),
])
def test_volcano_three_tiers_rescheduled(case, mode, tier, binds, within, pure):
    state = ClusterState()
    three_tiers(state)
    topo_gang(state, "pg1", 3, 2, mode, tier, nodes=("s3-n1", "s3-n2"))
    bound = placements(cycle(PLAN, state, pure))
    assert len(bound) == binds, case
    if within:                     # the tightest HyperNode holding its siblings with room: s1, so s4
        assert all(n.startswith(within) for n in bound.values())


def test_volcano_hard_allocates_under_the_lca_hypernode(pure):
    """"hard network topology constrain, allocate task to node under LCAHyperNode": 4 pods of a
    whole node each, 3 leaf switches of 2 nodes under s3 (tier 2), highestTierAllowed 2."""
    state = ClusterState()
    for leaf, names in (("s0", ("s0-n1", "s0-n2")), ("s1", ("s1-n3", "s1-n4")), ("s2", ("s2-n5", "s2-n6"))):
        for n in names:
            node(state, n, cpu=4000, memory=8 * GiB)
        state.add_hypernode(hypernode(leaf, 1, *names))
    state.add_hypernode(hypernode("s3", 2, "s0", "s1", "s2", kind="HyperNode"))
    topo_gang(state, "pg1", 4, 4, "hard", 2, cpu=4000, memory=8 * GiB)
    bound = placements(cycle(PLAN, state, pure))
    assert len(bound) == 4 and hard_ok(state, bound, "pg1", 2)
    per_leaf = sorted(sum(1 for n in bound.values() if n.startswith(leaf)) for leaf in ("s0", "s1", "s2"))
    assert per_leaf == [0, 2, 2]        # Volcano's ExpectBindNumsInHyperNode {2, 2}


# --- our rules --------------------------------------------------------------------------------

def test_the_best_hypernode_is_the_tightest_fit_then_the_name(pure):
    state = ClusterState()
    two_switches(state)
    pod(state, "other", cpu=2000, memory=GiB, node_name="s1-n4")     # s1 has one node left
    topo_gang(state, "pg1", 1, 1, "hard", 1)
    assert placements(cycle(PLAN, state, pure)) == {"ns/pg1-0": "s1-n3"}   # binpack: s1, the fuller
    state2 = ClusterState()
    two_switches(state2)
    topo_gang(state2, "pg1", 2, 2, "hard", 1)
    assert set(placements(cycle(PLAN, state2, pure)).values()) == {"s0-n1", "s0-n2"}   # a tie: by name


def test_soft_lands_in_the_tightest_tier_that_fits_then_the_cluster(pure):
    state = ClusterState()
    two_switches(state)
    topo_gang(state, "two", 2, 2, "soft", None)
    bound = placements(cycle(PLAN, state, pure))
    assert len({n[:2] for n in bound.values()}) == 1                  # one leaf switch
    state = ClusterState()
    two_switches(state, spine=False)
    topo_gang(state, "four", 4, 4, "soft", None)
    assert len(placements(cycle(PLAN, state, pure))) == 4            # no HyperNode holds it: the cluster


def test_a_hard_gang_waits_with_figures(pure):
    state = ClusterState()
    for name, gpus in (("a1", 4), ("a2", 4), ("b1", 4), ("c1", 2), ("c2", 2)):
        node(state, name, cpu=8000, memory=32 * GiB, **{"nvidia.com/gpu": gpus})
    state.add_hypernode(hypernode("s1", 1, "a1", "a2"))
    state.add_hypernode(hypernode("s3", 1, "b1"))
    state.add_hypernode(hypernode("s7", 1, "c1", "c2"))
    topo_gang(state, "train", 4, 4, "hard", 1, cpu=1000, memory=GiB, requests={"nvidia.com/gpu": 4})
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions) == {}
    text = " ".join(r.message for r in decisions.reasons_for("ns/train-0"))
    assert "gang needs 4 task(s), 16 nvidia.com/gpu" in text and "tier <= 1" in text
    assert "the largest, s1, has 8 free" in text and "s3 4" in text and "s7 4" in text


def test_without_hypernodes_hard_waits_and_soft_goes_anywhere(pure):
    state = ClusterState()
    node(state, "n1")
    topo_gang(state, "hard", 1, 1, "hard", 1, cpu=1000, memory=GiB)
    topo_gang(state, "soft", 1, 1, "soft", None, cpu=1000, memory=GiB)
    pod(state, "plain", cpu=1000)
    decisions = cycle(PLAN, state, pure)
    assert set(placements(decisions)) == {"ns/soft-0", "ns/plain"}
    assert any("no HyperNode of tier <= 1" in r.message for r in decisions.reasons_for("ns/hard-0"))


def test_blocking_topology_problems_hold_only_topology_jobs(pure):
    state = ClusterState()
    two_switches(state)
    state.add_hypernode(hypernode("s9", 2, "s0", kind="HyperNode"))    # s0 gets a second parent
    topo_gang(state, "asks", 1, 1, "hard", 2, cpu=1000, memory=GiB)
    topo_gang(state, "soft", 1, 1, "soft", None, cpu=1000, memory=GiB)
    pod(state, "plain", cpu=1000)
    decisions = cycle(PLAN, state, pure)
    assert set(placements(decisions)) == {"ns/plain"}
    text = " ".join(r.message for r in decisions.reasons_for("ns/asks-0"))
    assert "not ready" in text and "s0" in text and "s2" in text and "s9" in text


def test_no_rule_without_a_request(pure):
    from runtime.engine.snapshot import build_snapshot
    state = ClusterState()
    two_switches(state)
    pod(state, "plain", cpu=1000)
    assert build_snapshot(state, PLAN).hypernodes is None
    topo_gang(state, "asks", 1, 1, "hard", 1, cpu=1000, memory=GiB)
    assert build_snapshot(state, PLAN).hypernodes is not None


def test_preempt_and_reclaim_never_place_a_hard_gang_outside(pure):
    state = ClusterState()
    two_switches(state)
    for n in ("s0-n1", "s1-n3"):
        pod(state, f"low-{n}", cpu=2000, memory=GiB, node_name=n, priority=1)
    topo_gang(state, "high", 2, 2, "hard", 1, priority=100)
    decisions = cycle(FULL, state, pure)
    # Within its switch the gang's pods take the idle node first and evict for the other (Volcano
    # places a preemptor only where it evicts): one eviction, both pods in one switch, never
    # across the two switches' free nodes.
    assert placements(decisions) == {} and len(decisions.evictions) == 1
    where = set(decisions.pipelined.values())
    assert where in ({"s0-n1", "s0-n2"}, {"s1-n3", "s1-n4"})
    assert state.pods[decisions.evictions[0].pod].node_name in where


# --- property: no hard gang ever spans above its tier ----------------------------------------

@st.composite
def clusters(draw):
    switches = draw(st.integers(1, 4))
    per = draw(st.integers(1, 3))
    spines = draw(st.integers(1, 2))
    gangs = draw(st.lists(st.tuples(st.integers(1, 8), st.sampled_from(["hard", "soft", None]),
                                    st.integers(1, 3), st.integers(1, 4), st.booleans()), min_size=1, max_size=5))
    busy = draw(st.lists(st.integers(0, switches * per - 1), max_size=3))
    return switches, per, spines, gangs, busy


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.booleans())
def test_no_hard_gang_spans_above_its_tier(spec, pure):
    switches, per, spines, gangs, busy = spec
    state = ClusterState()
    names = []
    for s in range(switches):
        members = [f"s{s}-n{i}" for i in range(per)]
        for m in members:
            node(state, m, cpu=4000, memory=8 * GiB)
        names.extend(members)
        state.add_hypernode(hypernode(f"s{s}", 1, *members))
    for p in range(spines):
        under = [f"s{s}" for s in range(switches) if s % spines == p]
        if under:
            state.add_hypernode(hypernode(f"spine{p}", 2, *under, kind="HyperNode"))
    for i, b in enumerate(busy):
        pod(state, f"busy-{i}", cpu=3000, memory=GiB, node_name=names[b])
    requests = {}
    for g, (size, mode, tier, cpu, partial) in enumerate(gangs):
        min_member = max(1, size // 2) if partial else size
        topo_gang(state, f"g{g}", size, min_member, mode, tier if mode == "hard" else None,
                  cpu=cpu * 1000, memory=GiB)
        requests[f"g{g}"] = (mode, tier, min_member)
    plan = FULL
    for _ in range(2):                          # a second cycle: later members join their siblings
        decisions = cycle(plan, state, pure)
        bound = placements(decisions)
        pipelined = dict(decisions.pipelined)
        for group, (mode, tier, min_member) in requests.items():
            if mode == "hard":
                assert hard_ok(state, {**bound, **pipelined}, group, tier), (group, bound)
        # gang: a group either reaches minMember or binds nothing new
        for group, (mode, tier, min_member) in requests.items():
            have = sum(1 for p in state.pods.values() if p.group == group and p.node_name)
            new = sum(1 for k in bound if state.pods[k].group == group)
            assert new == 0 or have + new >= min_member
        state.apply(decisions)
