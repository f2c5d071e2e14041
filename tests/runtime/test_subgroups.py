"""Sub-group gangs (a PodGroup's `spec.subGroupPolicy`, Volcano's SubJobs): pods grouped by
labelSelector + matchLabelKeys, each sub-group a gang of subGroupSize within one HyperNode of its
own networkTopology, the whole job within the job's, minSubGroups a gang condition; and the job's
HyperNode written to and read back from the annotation volcano.sh/job-allocated-hypernode.

The table is translated from Volcano v1.14.1's pkg/scheduler/actions/allocate/allocate_test.go,
TestAllocateWithPartitionPolicyNetworkTopology (nodes of 2 cpu / 4Gi and pods of 2 cpu / 4G: one
pod per node; each row names its Go case). Every placement is checked by `hard_ok`, written here
from the pods' labels, the policies and the HyperNodes' members, not with the engine's code.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.model import JOB_ALLOCATED_HYPERNODE, ClusterState, NetworkTopology, PodGroup, SubGroupPolicy
from runtime.cluster.objects import ObjectError, load_objects
from runtime.cluster.selectors import LabelSelector
from runtime.cluster.topology import HyperNode, Member
from runtime.engine.snapshot import build_snapshot
from runtime.kube import status as kube_status
from runtime_helpers import GiB, STANDARD_TIERS, cycle, node, placements, pod, policy

PLAN = policy(STANDARD_TIERS)
FULL = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, reclaim, backfill")
SPEC, INSTANCE = "volcano.sh/task-spec", "volcano.sh/task-instance"
KEYS = {"spec": SPEC, "instance": INSTANCE}

# Volcano's table trees: name -> (tier, members); a member that is a key is a HyperNode.
TWO = {"s0": (1, ("s0-n1", "s0-n2")), "s1": (1, ("s1-n3", "s1-n4")), "s2": (2, ("s0", "s1"))}
TWO_SMALL = {"s0": (1, ("s0-n1", "s0-n2")), "s1": (1, ("s1-n3",)), "s2": (2, ("s0", "s1"))}
TWO_NO_SPINE = {"s0": (1, ("s0-n1", "s0-n2")), "s1": (1, ("s1-n3", "s1-n4"))}
FIVE = {"s0": (1, ("s0-n1", "s0-n2")), "s1": (1, ("s1-n3", "s1-n4")), "s2": (1, ("s2-n5",)),
        "s3": (2, ("s0", "s1", "s2"))}
THREE_TIERS = {"s0": (3, ("s1", "s2")), "s1": (2, ("s3", "s4")), "s2": (2, ("s5", "s6")),
               **{f"s{i}": (1, (f"s{i}-n1", f"s{i}-n2")) for i in (3, 4, 5, 6)}}


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def build(tree: dict, pg: tuple, policies: list[tuple], pods: list[tuple]) -> ClusterState:
    """pg: (minMember, mode or None, highestTierAllowed, annotation); a policy: (name, key,
    mode or None, highestTierAllowed, subGroupSize, minSubGroups); a pod: (name, node or None,
    {key: value})."""
    state = ClusterState()
    for name, (tier, members) in tree.items():
        for m in members:
            if m not in tree:
                node(state, m, cpu=2000, memory=4 * GiB)
        state.add_hypernode(HyperNode(name, tier, "", tuple(
            Member("HyperNode" if m in tree else "Node", exact=m) for m in members)))
    min_member, mode, tier, annotation = pg
    state.add_podgroup(PodGroup(
        "c1", "pg1", min_member=min_member, phase="Inqueue", uid="pg1",
        network_topology=NetworkTopology(mode, tier) if mode else None, allocated_hypernode=annotation,
        sub_groups=tuple(SubGroupPolicy(name, size, least, None, (KEYS[key],),
                                        NetworkTopology(m, t) if m else None)
                         for name, key, m, t, size, least in policies)))
    for name, where, labels in pods:
        pod(state, name, cpu=2000, memory=4 * 10**9, group="pg1", ns="c1", node_name=where,
            labels={KEYS[k]: v for k, v in labels.items()})
    return state


def leaf_set(state: ClusterState, name: str) -> set[str]:
    out: set[str] = set()
    for m in state.hypernodes[name].members:
        out |= {m.exact} if m.type == "Node" else leaf_set(state, m.exact)
    return out


def within(state: ClusterState, nodes: set[str], highest: int) -> bool:
    """Whether one HyperNode of tier <= highest holds all `nodes` (a tier above every HyperNode's
    is Volcano's virtual HyperNode of the whole cluster)."""
    if not nodes or highest > max(h.tier for h in state.hypernodes.values()):
        return True
    return any(h.tier <= highest and nodes <= leaf_set(state, h.name) for h in state.hypernodes.values())


def hard_ok(state: ClusterState, placed: dict[str, str]) -> bool:
    """Independent checker: for each PodGroup, its pods (running before, bound or pipelined now,
    or reserved by an earlier cycle: nominated) within its hard tier; each hard sub-group's (pods grouped here from their labels: the
    first policy whose selector matches and all of whose matchLabelKeys the pod carries) within
    its own."""
    for key, group in state.podgroups.items():
        members = [p for p in state.pods.values() if f"{p.namespace}/{p.group}" == key]
        where = {p.key: p.node_name or placed.get(p.key) or p.nominated_node for p in members}
        request = group.network_topology
        if request is not None and request.hard and \
                not within(state, {n for n in where.values() if n}, request.highest_tier or 1):
            return False
        sub: dict[tuple, set[str]] = {}
        for p in members:
            for i, pol in enumerate(group.sub_groups):
                if pol.selector is not None and not pol.selector.matches(p.labels):
                    continue
                values = tuple(p.labels.get(k) for k in pol.match_label_keys)
                if pol.match_label_keys and all(values):
                    if where[p.key]:
                        sub.setdefault((i, values), set()).add(where[p.key])
                    break
        for (i, _), nodes in sub.items():
            req = group.sub_groups[i].network_topology
            if req is not None and req.hard and not within(state, nodes, req.highest_tier or 1):
                return False
    return True


def run(state: ClusterState, pure: bool, plan=PLAN) -> dict[str, str]:
    decisions = cycle(plan, state, pure)
    bound = placements(decisions)
    assert hard_ok(state, {**bound, **decisions.pipelined})
    return bound


M, W = {"spec": "master"}, {"spec": "worker"}

# (Go case name, tree, pg, policies, pods, binds, some expected bindings)
CASES = [
    ("podgroup hard network topology constrain and subGroup soft network topology constrain, can allocate job "
     "when resources are enough", TWO, (3, "hard", 2, ""), [("task1", "spec", "soft", 0, 1, 0)],
     [("p1", None, M), ("p2", None, W), ("p3", None, W)], 3, {}),
    ("podgroup hard network topology constrain and subGroup soft network topology constrain, can allocate job "
     "when minavailable < replicas", TWO, (1, "hard", 1, ""), [("task1", "spec", "soft", 0, 1, 0)],
     [("p1", None, M), ("p2", None, W)], 2, {}),
    ("podgroup hard network topology constrain and subGroup soft network topology constrain and tasks in job "
     "rescheduled, can allocate job when resources are enough", TWO, (2, "hard", 2, "s2"),
     [("task1", "spec", "soft", 0, 1, 0)], [("p1", "s0-n1", M), ("p2", "s0-n2", W), ("p3", None, W)], 1, {}),
    ("podgroup hard network topology constrain and subGroup soft network topology constrain and tasks in job "
     "rescheduled, can allocate job when resources are enough and minavailable = replicas", TWO,
     (3, "hard", 2, "s2"), [("task1", "spec", "soft", 0, 1, 0)],
     [("p1", "s0-n1", M), ("p2", "s0-n2", W), ("p3", None, W)], 1, {}),
    ("podgroup soft network topology constrain and subGroup hard network topology constrain, can allocate job "
     "when resources are enough", TWO_SMALL, (3, "soft", 0, ""),
     [("task1", "spec", "hard", 1, 2, 0), ("task2", "instance", "hard", 1, 1, 0)],
     [("p1", None, M), ("p2", None, M), ("p3", None, {"instance": "worker"})], 3,
     {"c1/p1": "s0", "c1/p2": "s0", "c1/p3": "s1-n3"}),
    ("podgroup soft network topology constrain and subGroup hard network topology constrain, can allocate job "
     "when minavailable < replicas", TWO, (1, "soft", 0, ""), [("task1", "spec", "hard", 1, 1, 0)],
     [("p1", None, M), ("p2", None, W)], 2, {}),
    # The worker sub-group's three pods fit no tier-1 switch (Volcano's isEligibleHyperNode asks
    # room for all its pending pods).
    ("podgroup soft network topology constrain and subGroup hard network topology constrain, can not allocate "
     "job when cross highestTierAllowed tier", TWO, (3, "soft", 0, ""), [("task1", "spec", "hard", 1, 1, 0)],
     [("p1", None, M), ("p2", None, W), ("p3", None, W), ("p4", None, W)], 0, {}),
    ("podgroup soft network topology constrain and subGroup hard network topology constrain and tasks in job "
     "rescheduled, can allocate job when resources are enough", TWO, (2, "soft", 0, "s2"),
     [("task1", "spec", "hard", 1, 1, 0)], [("p1", "s0-n1", M), ("p2", "s1-n3", W), ("p3", None, W)], 1,
     {"c1/p3": "s1-n4"}),
    ("podgroup soft network topology constrain and subGroup hard network topology constrain and tasks in job "
     "rescheduled, can not allocate job when cross highestTierAllowed tier and hyperNodesInfo has three tier",
     THREE_TIERS, (2, "soft", 0, "s1"), [("task1", "spec", "hard", 2, 1, 0)],
     [("p1", "s3-n1", M), ("p2", "s3-n2", W), ("p3", "s4-n1", W), ("p4", "s4-n2", W), ("p5", None, W)], 0, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain, can allocate job "
     "when highestTierAllowed not reached", TWO, (3, "hard", 2, ""), [("task1", "spec", "hard", 1, 1, 0)],
     [("p1", None, M), ("p2", None, W), ("p3", None, W)], 3, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain, can allocate job "
     "according to the network topology constrain of subGroup policy", TWO_SMALL, (3, "hard", 2, ""),
     [("task1", "spec", "hard", 1, 1, 0), ("task2", "instance", "hard", 1, 2, 0)],
     [("p1", None, M), ("p2", None, {"instance": "worker"}), ("p3", None, {"instance": "worker"})], 3,
     {"c1/p1": "s1-n3", "c1/p2": "s0", "c1/p3": "s0"}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain and tasks in job "
     "rescheduled, two available hyperNodes, can allocate job to nodes with affinity", TWO, (2, "hard", 2, ""),
     [("task1", "spec", "hard", 1, 1, 0)], [("p1", "s0-n1", M), ("p2", "s1-n3", W), ("p3", None, W)], 1,
     {"c1/p3": "s1-n4"}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain and tasks in job "
     "rescheduled, can allocate job when highestTierAllowed not reached and minavailable = replicas", TWO,
     (3, "hard", 2, "s0"), [("task1", "spec", "hard", 2, 1, 0)],
     [("p1", "s0-n1", M), ("p2", "s0-n2", W), ("p3", None, W)], 1, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain and tasks in job "
     "rescheduled, can allocate job when highestTierAllowed not reached and hyperNodesInfo has three tier",
     THREE_TIERS, (2, "hard", 3, "s3"), [("task1", "spec", "hard", 2, 1, 0)],
     [("p1", "s3-n1", M), ("p2", "s3-n2", W), ("p3", None, W)], 1, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain and tasks in job "
     "rescheduled, can not allocate job when cross highestTierAllowed tier", TWO, (2, "hard", 2, "s0"),
     [("task1", "spec", "hard", 1, 1, 0)], [("p1", "s0-n1", M), ("p2", "s0-n2", W), ("p3", None, W)], 0, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain and tasks in job "
     "rescheduled, can not allocate job when cross highestTierAllowed tier and hyperNodesInfo has three tier",
     THREE_TIERS, (2, "hard", 3, "s3"), [("task1", "spec", "hard", 2, 1, 0)],
     [("p1", "s3-n1", M), ("p2", "s3-n2", W), ("p3", "s4-n1", W), ("p4", "s4-n2", W), ("p5", None, W)], 0, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain and tasks in job "
     "rescheduled, can allocate job when LCAHyperNode is empty", TWO_NO_SPINE, (2, "hard", 3, "s0"),
     [("task1", "spec", "hard", 2, 1, 0)], [("p1", "s0-n1", M), ("p2", "s0-n2", W), ("p3", None, W)], 1, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain, can allocate job "
     "according to the network topology constrain of subGroup policy with minSubGroups", FIVE,
     (5, "hard", 2, ""), [("task1", "spec", "hard", 1, 1, 1), ("task2", "instance", "hard", 1, 2, 2)],
     [("p1", None, M), ("p2", None, {"instance": "worker"}), ("p3", None, {"instance": "worker"}),
      ("p4", None, {"instance": "worker2"}), ("p5", None, {"instance": "worker2"})], 5, {"c1/p1": "s2-n5"}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain, can allocate job "
     "according to the network topology constrain of subGroup policy with minSubGroups and minavailable = "
     "replicas", TWO_SMALL, (3, "hard", 2, ""),
     [("task1", "spec", "hard", 1, 1, 1), ("task2", "instance", "hard", 1, 2, 1)],
     [("p1", None, M), ("p2", None, {"instance": "worker"}), ("p3", None, {"instance": "worker"}),
      ("p4", None, {"instance": "worker2"}), ("p5", None, {"instance": "worker2"})], 3, {"c1/p1": "s1-n3"}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain, can allocate job "
     "according to the network topology constrain of subGroup policy with minSubGroups and hypernode resources "
     "meet minSubGroups", TWO, (3, "hard", 2, ""),
     [("task1", "spec", "hard", 1, 1, 2), ("task2", "instance", "hard", 1, 2, 1)],
     [("p1", None, M), ("p2", None, {"spec": "master2"}), ("p3", None, {"spec": "master3"}),
      ("p4", None, {"spec": "master4"}), ("p5", None, {"instance": "worker"}), ("p6", None, {"instance": "worker"}),
      ("p7", None, {"instance": "worker2"}), ("p8", None, {"instance": "worker2"})], 4, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain, can not allocate "
     "job when minMember is not satisfied", TWO, (5, "hard", 2, ""),
     [("task1", "spec", "hard", 1, 1, 1), ("task2", "instance", "hard", 1, 2, 1)],
     [("p1", None, M), ("p2", None, {"instance": "worker"}), ("p3", None, {"instance": "worker"}),
      ("p4", None, {"instance": "worker2"}), ("p5", None, {"instance": "worker2"})], 0, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain, can not allocate "
     "job when minSubGroups is not satisfied", TWO, (3, "hard", 2, ""),
     [("task1", "spec", "hard", 1, 1, 1), ("task2", "instance", "hard", 1, 2, 2)],
     [("p1", None, M), ("p2", None, {"instance": "worker"}), ("p3", None, {"instance": "worker"}),
      ("p4", None, {"instance": "worker2"}), ("p5", None, {"instance": "worker2"})], 0, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain with minSubGroups "
     "and tasks in job rescheduled, two available hyperNodes, can allocate job to nodes with affinity", TWO,
     (2, "hard", 2, ""), [("task1", "spec", "hard", 1, 2, 1)],
     [("p1", "s0-n1", M), ("p2", "s1-n3", W), ("p3", None, W)], 1, {"c1/p3": "s1-n4"}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain with minSubGroups "
     "and tasks in job rescheduled, can not allocate job when hypernode resources are insufficient.", TWO,
     (2, "hard", 2, ""), [("task1", "spec", "hard", 1, 2, 1)],
     [("p1", "s0-n1", M), ("p2", "s1-n3", W), ("p3", "s1-n4", W), ("p4", None, W)], 0, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain with minSubGroups "
     "and tasks in job rescheduled, can allocate job when highestTierAllowed not reached and minAvailable = "
     "replicas", TWO, (4, "hard", 2, "s0"), [("task1", "spec", "hard", 2, 2, 2)],
     [("p1", "s0-n1", M), ("p2", "s0-n2", W), ("p3", None, W), ("p4", None, M)], 2, {}),
    ("podgroup hard network topology constrain and subGroup hard network topology constrain with minSubGroups "
     "and tasks in job rescheduled, can allocate job when subGroup is rescheduled", TWO, (3, "hard", 2, ""),
     [("task1", "spec", "hard", 1, 1, 2), ("task2", "instance", "hard", 1, 2, 1)],
     [("p1", None, M), ("p2", None, {"spec": "master2"}), ("p3", "s0-n1", {"spec": "master3"}),
      ("p4", "s0-n2", {"spec": "master4"}), ("p5", None, {"instance": "worker"}),
      ("p6", None, {"instance": "worker"}), ("p7", None, {"instance": "worker2"}),
      ("p8", None, {"instance": "worker2"})], 2, {}),
    ("rescheduling scenario: SubJob with single pending task", TWO, (3, "hard", 2, "s0"),
     [("task1", "spec", "hard", 1, 3, 0)], [("p1", "s0-n1", W), ("p2", "s0-n2", W), ("p3", None, W)], 0, {}),
    # Volcano binds p3 and p4 in s1 here, the sub-group then spanning s0 and s1 (tier 2) though it
    # asks for tier 1; a hard request is never broken here: they wait (runtime/README.md).
    ("rescheduling scenario: SubJob with multiple pending tasks, GetMinResources returns sum of all pending "
     "tasks resources", TWO, (4, "hard", 2, "s0"), [("task1", "spec", "hard", 1, 4, 0)],
     [("p1", "s0-n1", W), ("p2", "s0-n2", W), ("p3", None, W), ("p4", None, W)], 0, {}),
    ("no network topology at job or subgroup level but has SubJobPolicy, can allocate job successfully", TWO,
     (2, None, 0, ""), [("worker", "spec", None, 0, 1, 2)],
     [("p1", None, {"spec": "worker-0"}), ("p2", None, {"spec": "worker-1"})], 2, {}),
]


@pytest.mark.parametrize("case, tree, pg, policies, pods, binds, where", CASES, ids=[c[0][-60:] for c in CASES])
def test_volcano_allocate_with_partition_policy_network_topology(case, tree, pg, policies, pods, binds, where, pure):
    state = build(tree, pg, policies, pods)
    bound = run(state, pure)
    assert len(bound) == binds, (case, bound)
    for key, at in where.items():           # a node, or a HyperNode holding it
        assert bound[key] == at or bound[key] in leaf_set(state, at), (case, key, bound)


def test_the_three_tier_case_with_a_soft_subgroup_joins_the_lca(pure):
    """"podgroup hard network topology constrain and subGroup soft network topology constrain and
    tasks in job rescheduled, can allocate job when cross highestTierAllowed tier and
    hyperNodesInfo has three tier": the job's pods run in s3 (under s1, tier 2), the job asks for
    tier 2: the third pod goes under s1."""
    state = build(THREE_TIERS, (2, "hard", 2, "s1"), [("task1", "spec", "soft", 0, 1, 0)],
                  [("p1", "s3-n1", M), ("p2", "s3-n2", W), ("p3", None, W)])
    bound = run(state, pure)
    assert list(bound) == ["c1/p3"] and bound["c1/p3"] in leaf_set(state, "s1")


# --- grouping -------------------------------------------------------------------------------

def test_pods_are_grouped_as_volcano_does():
    """getSubJobMatchValues: a pod goes to the first policy whose labelSelector matches and all of
    whose matchLabelKeys it carries, non-empty; a policy without matchLabelKeys takes no pod;
    the others are the default sub-group."""
    state = ClusterState()
    node(state, "n1")
    only_workers = LabelSelector((("role", "worker"),))
    state.add_podgroup(PodGroup("ns", "g", min_member=1, phase="Inqueue", uid="g", sub_groups=(
        SubGroupPolicy("none", 1, 0, None, ()),
        SubGroupPolicy("workers", 2, 0, only_workers, ("rack", "slot")),
        SubGroupPolicy("racks", 1, 0, None, ("rack",)))))
    labels = {"a": {"role": "worker", "rack": "r1", "slot": "1"}, "b": {"role": "worker", "rack": "r1", "slot": "1"},
              "c": {"role": "worker", "rack": "r1"}, "d": {"role": "ps", "rack": "r2", "slot": "1"},
              "e": {"role": "worker", "rack": "", "slot": "1"}, "f": {}}
    for name, lab in labels.items():
        pod(state, name, group="g", labels=lab)
    snap = build_snapshot(state, PLAN)
    groups = snap.sub_groups[0]
    named = {(g.policy, g.values): sorted(snap.pods[t].name for t in g.tasks.tolist()) for g in groups}
    assert named == {(1, ("r1", "1")): ["a", "b"], (2, ("r1",)): ["c"], (2, ("r2",)): ["d"], (-1, ()): ["e", "f"]}
    assert [g.size for g in groups] == [2, 1, 1, 1]


def test_a_job_with_fewer_sub_groups_than_min_sub_groups_waits_for_its_pods(pure):
    """CheckSubJobValid: two workers' sub-groups exist, minSubGroups 3: the job waits, saying so."""
    state = build(TWO, (2, None, 0, ""), [("worker", "spec", None, 0, 1, 3)],
                  [("p1", None, {"spec": "w0"}), ("p2", None, {"spec": "w1"})])
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions) == {}
    assert any("2 of 3 sub-groups (minSubGroups) of subGroupPolicy worker" in r.message
               for r in decisions.reasons_for("c1/p1"))


def test_a_sub_group_that_fits_nowhere_says_so_with_its_tier(pure):
    state = build(TWO, (3, "soft", 0, ""), [("task1", "spec", "hard", 1, 3, 0)],
                  [("p1", None, W), ("p2", None, W), ("p3", None, W)])
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions) == {}
    message = " ".join(r.message for r in decisions.reasons_for("c1/p1"))
    assert "sub-group worker of subGroupPolicy task1" in message and "tier <= 1" in message


def test_a_sub_group_tier_name_no_hypernode_has_waits(pure):
    state = build(TWO, (1, None, 0, ""), [("task1", "spec", None, 0, 1, 0)], [("p1", None, W)])
    group = state.podgroups["c1/pg1"]
    group.sub_groups = (SubGroupPolicy("task1", 1, 0, None, (SPEC,), NetworkTopology("hard", None, "spine")),)
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions) == {}
    assert any("tier 'spine', which no HyperNode has" in r.message for r in decisions.reasons_for("c1/p1"))


# --- reading spec.subGroupPolicy --------------------------------------------------------------

def podgroup_object(spec: dict, annotations: dict | None = None) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ns", "uid": "uid-g", "annotations": annotations or {}},
            "spec": {"minMember": 2, "queue": "default", **spec}, "status": {"phase": "Inqueue"}}


def test_what_the_job_controller_writes_for_a_partition_policy_is_read():
    """Volcano v1.14.1's vc-controller-manager (job_controller_actions.go getSubGroupPolicy) turns
    a task's partitionPolicy into this entry: the task's name, partitionSize, minPartitions, the
    task's pods by volcano.sh/task-spec, grouped by volcano.sh/partition-id."""
    state = load_objects([("pg.yaml", podgroup_object({
        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
        "subGroupPolicy": [{"name": "worker", "subGroupSize": 4, "minSubGroups": 2,
                            "labelSelector": {"matchLabels": {SPEC: "worker"}},
                            "matchLabelKeys": ["volcano.sh/partition-id"],
                            "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]},
        {JOB_ALLOCATED_HYPERNODE: "s0"}))])
    group = state.podgroups["ns/g"]
    (p,) = group.sub_groups
    assert (p.name, p.size, p.min_groups, p.match_label_keys) == ("worker", 4, 2, ("volcano.sh/partition-id",))
    assert p.selector.matches({SPEC: "worker"}) and not p.selector.matches({SPEC: "ps"})
    assert (p.network_topology.mode, p.network_topology.highest_tier) == ("hard", 1)
    assert group.problem is None and group.asks_topology and group.allocated_hypernode == "s0"
    assert p.key_of({SPEC: "worker", "volcano.sh/partition-id": "1"}) == ("1",)


@pytest.mark.parametrize("entry, field", [
    ({"subGroupSize": 0}, "spec.subGroupPolicy[0].subGroupSize"),
    ({"subGroupSize": "two"}, "spec.subGroupPolicy[0].subGroupSize"),
    ({"minSubGroups": -1}, "spec.subGroupPolicy[0].minSubGroups"),
    ({"matchLabelKeys": "rack"}, "spec.subGroupPolicy[0].matchLabelKeys"),
    ({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
     "spec.subGroupPolicy[0].labelSelector.matchExpressions[0]"),
    ({"networkTopology": {"mode": "strict"}}, "spec.subGroupPolicy[0].networkTopology.mode"),
    ({"name": 3}, "spec.subGroupPolicy[0].name"),
    ("worker", "spec.subGroupPolicy[0]"),
])
def test_bad_sub_group_policies_are_refused_naming_the_field(entry, field):
    with pytest.raises(ObjectError) as err:
        load_objects([("pg.yaml", podgroup_object({"subGroupPolicy": [entry]}))])
    assert field in str(err.value)


# --- the job's HyperNode: written, and read back after a restart -------------------------------

def test_the_job_hypernode_is_written_and_later_members_join_their_siblings(pure):
    """The annotation names the lowest HyperNode holding the job's running pods; after a restart
    (the state read back with it) and with the pods that ran there gone, a later member of the
    elastic job still goes there."""
    state = build(TWO, (2, "hard", 2, ""), [], [("p1", None, {}), ("p2", None, {})])
    decisions = cycle(PLAN, state, pure)
    bound = placements(decisions)
    assert len(bound) == 2
    where = decisions.hypernodes["c1/pg1"]
    assert where in ("s0", "s1") and set(bound.values()) <= leaf_set(state, where)
    state.apply(decisions)
    assert state.podgroups["c1/pg1"].allocated_hypernode == where
    assert cycle(PLAN, state, pure).hypernodes == {}            # unchanged: nothing to write
    # One of the two finishes, a later member arrives, and the other switch is emptier.
    state.complete_pod("c1/p2")
    pod(state, "p3", cpu=2000, memory=4 * 10**9, group="pg1", ns="c1")
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions)["c1/p3"] in leaf_set(state, where)


def test_without_the_annotation_only_placed_pods_decide(pure):
    """A recorded HyperNode that no longer exists is ignored; placed pods still are used."""
    state = build(TWO, (1, "hard", 1, "gone"), [], [("p1", "s1-n3", {}), ("p2", None, {})])
    bound = run(state, pure)
    assert bound == {"c1/p2": "s1-n4"}


def test_the_annotation_is_removed_once_no_pod_runs(pure):
    state = build(TWO, (1, "hard", 1, "s0"), [], [("p1", None, {})])
    for n in ("s0-n1", "s0-n2", "s1-n3", "s1-n4"):
        state.nodes[n].unschedulable = True
    assert cycle(PLAN, state, pure).hypernodes == {"c1/pg1": ""}


# --- property: no hard sub-group ever spans above its tier -----------------------------------

@st.composite
def clusters(draw):
    switches = draw(st.integers(1, 4))
    per = draw(st.integers(1, 3))
    spines = draw(st.integers(1, 2))
    jobs = draw(st.lists(st.tuples(
        st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=3),  # (pods, size) per sub-group
        st.sampled_from(["hard", "soft", None]), st.sampled_from(["hard", "soft", None]),  # job / sub-group mode
        st.integers(1, 3), st.integers(1, 3), st.integers(0, 2), st.booleans()),
        min_size=1, max_size=4))
    busy = draw(st.lists(st.integers(0, switches * per - 1), max_size=3))
    return switches, per, spines, jobs, busy


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.booleans())
def test_no_hard_sub_group_spans_above_its_tier(spec, pure):
    """Independent of the engine: after each of two cycles (bindings applied between them, so
    later members join their siblings), every hard sub-group's pods (bound before, bound now or
    pipelined) lie within one HyperNode of its tier, every hard job's within its own; and a job
    binds nothing new unless it then has minMember pods placed."""
    switches, per, spines, jobs, busy = spec
    state = ClusterState()
    names = []
    for s in range(switches):
        members = [f"s{s}-n{i}" for i in range(per)]
        for m in members:
            node(state, m, cpu=4000, memory=8 * GiB)
        names.extend(members)
        state.add_hypernode(HyperNode(f"s{s}", 1, "", tuple(Member("Node", exact=m) for m in members)))
    for p in range(spines):
        under = [f"s{s}" for s in range(switches) if s % spines == p]
        if under:
            state.add_hypernode(HyperNode(f"spine{p}", 2, "", tuple(Member("HyperNode", exact=u) for u in under)))
    for i, b in enumerate(busy):
        pod(state, f"busy-{i}", cpu=3000, memory=GiB, node_name=names[b])
    for g, (subs, job_mode, sub_mode, job_tier, sub_tier, least, partial) in enumerate(jobs):
        total = sum(n for n, _ in subs)
        state.add_podgroup(PodGroup(
            "ns", f"g{g}", min_member=max(1, total // 2) if partial else total, phase="Inqueue", uid=f"g{g}",
            network_topology=NetworkTopology(job_mode, job_tier if job_mode == "hard" else None) if job_mode else None,
            sub_groups=(SubGroupPolicy("part", min(size for _, size in subs), min(least, len(subs)), None,
                                       ("volcano.sh/partition-id",),
                                       NetworkTopology(sub_mode, sub_tier) if sub_mode else None),)))
        for s, (count, _) in enumerate(subs):
            for i in range(count):
                pod(state, f"g{g}-{s}-{i}", cpu=1000 * (1 + (g + i) % 3), memory=GiB, group=f"g{g}",
                    labels={"volcano.sh/partition-id": str(s)})
    for _ in range(2):
        decisions = cycle(FULL, state, pure)
        bound = placements(decisions)
        assert hard_ok(state, {**bound, **decisions.pipelined}), bound
        for key, group in state.podgroups.items():
            have = sum(1 for p in state.pods.values() if f"{p.namespace}/{p.group}" == key and p.node_name)
            new = sum(1 for k in bound if f"{state.pods[k].namespace}/{state.pods[k].group}" == key)
            assert new == 0 or have + new >= group.min_member
        state.apply(decisions)


def test_the_connector_writes_the_annotation_in_the_podgroup_patch():
    """kube/status.py: the job's HyperNode goes in the same merge patch of the PodGroup as its
    status (or alone), "" removing it; a patch without status does not touch the cached status."""
    class Api:
        def __init__(self):
            self.patches = []

        def merge_patch(self, path, body):
            self.patches.append((path, body))

    class Cache:
        def __init__(self):
            self.recorded = []

        def record_podgroup_status(self, key, status, hypernode=None):
            self.recorded.append((key, status, hypernode))

    api, cache = Api(), Cache()
    writer = kube_status.StatusWriter(api, cache)
    update = kube_status.podgroup_update("ns/g", None, "Running", (), {"running": 2}, now="NOW", transition_id="t")
    assert writer.write_podgroup(kube_status.Update(update.key, update.status, update.patch,
                                                    kube_status.hypernode_annotation("s0")))
    assert writer.write_podgroup(kube_status.Update("ns/g", {}, {}, kube_status.hypernode_annotation("")))
    (path, first), (_, second) = api.patches
    assert path.endswith("/namespaces/ns/podgroups/g")
    assert first == {"status": update.patch, "metadata": {"annotations": {JOB_ALLOCATED_HYPERNODE: "s0"}}}
    assert second == {"metadata": {"annotations": {JOB_ALLOCATED_HYPERNODE: None}}}
    # The cache learns both at once: the next cycle neither writes the annotation again nor
    # leaves the gang in play for it; {} leaves the status as it was.
    assert cache.recorded == [("ns/g", update.status, "s0"), ("ns/g", {}, "")]


def test_a_placed_gang_gets_its_status_and_hypernode_in_one_patch_after_its_binds():
    """The gang is busy while its binds are out, so the cycle's own status pass skips it; the
    patch written when its last bind answers carries the job's HyperNode as well, and the cache
    holds it, so the gang settles instead of costing a second patch (or none: a settled gang is
    no longer looked at, and its annotation was never written)."""
    from runtime.kube.api import KubeApi
    from runtime.kube.binder import BOUND, BindOutcome
    from runtime.kube.cluster import KubeCluster
    from runtime.kube.settled import Gang, gang_settles

    state = build(TWO, (2, "hard", 2, ""), [], [("p1", None, {}), ("p2", None, {})])
    decisions = cycle(PLAN, state, False)
    where = decisions.hypernodes["c1/pg1"]
    kube = KubeCluster(KubeApi.__new__(KubeApi), "policydsl", identity="test")
    patches = []
    kube.status.api = type("Api", (), {"merge_patch": lambda self, path, body: patches.append(body)})()
    kube.binder.bind_all = lambda items: [(i, BindOutcome(b.pod, b.node, BOUND, "")) for i, (b, _) in
                                          enumerate(items)]
    kube.cache._state.podgroups.update(state.podgroups)
    try:
        kube.apply(decisions, state, {})
        kube.drain(timeout=10)
    finally:
        kube.binds.shutdown(wait=True)
        kube.writes.shutdown(wait=True)
    # One patch, whether the binds answered before the cycle's status pass ran or after it.
    [body] = patches
    assert body["status"]["phase"] == "Running"
    assert body["metadata"]["annotations"] == {JOB_ALLOCATED_HYPERNODE: where}
    group = kube.cache._state.podgroups["c1/pg1"]
    assert group.allocated_hypernode == where
    members = Gang()
    for binding in decisions.bindings:
        members.join(binding.pod, dataclasses.replace(state.pods[binding.pod], node_name=binding.node), True)
    status = kube.cache.podgroup_status("c1/pg1")
    assert gang_settles(group, status, members, hypernodes=True)
    # Without its HyperNode written, a gang asking for topology stays in play (where there are HyperNodes).
    unwritten = state.podgroups["c1/pg1"]
    unwritten = dataclasses.replace(unwritten, phase="Running")
    assert not gang_settles(unwritten, status, members, hypernodes=True)
    assert gang_settles(unwritten, status, members, hypernodes=False)


def test_a_cycle_from_before_the_gangs_patch_answered_does_not_write_its_hypernode_again():
    """The next cycle's snapshot was taken while the gang's patch (status and HyperNode) was out,
    so the engine still finds the annotation missing; by the cycle's status pass the patch has
    answered and the cache names the HyperNode: no second, annotation-only patch (it was 8% of
    the PodGroup writes of bench/e2e's (e)). A gang whose cache does not name it yet gets it."""
    from runtime.cluster import decisions as d
    from runtime.kube.api import KubeApi
    from runtime.kube.binder import BOUND, BindOutcome
    from runtime.kube.cluster import KubeCluster

    state = build(TWO, (2, "hard", 2, ""), [], [("p1", None, {}), ("p2", None, {})])
    decisions = cycle(PLAN, state, False)
    where = decisions.hypernodes["c1/pg1"]
    kube = KubeCluster(KubeApi.__new__(KubeApi), "policydsl", identity="test")
    patches = []
    kube.status.api = type("Api", (), {"merge_patch": lambda self, path, body: patches.append((path, body))})()
    kube.binder.bind_all = lambda items: [(i, BindOutcome(b.pod, b.node, BOUND, "")) for i, (b, _) in
                                          enumerate(items)]
    kube.cache._state.podgroups.update(state.podgroups)
    kube.cache._state.podgroups["c1/other"] = dataclasses.replace(state.podgroups["c1/pg1"], name="other")
    try:
        kube.apply(decisions, state, {})
        kube.drain(timeout=10)
        assert len(patches) == 1
        stale = d.Decisions(hypernodes={"c1/pg1": where, "c1/other": where})
        kube.apply(stale, state, {})
        kube.drain(timeout=10)
    finally:
        kube.binds.shutdown(wait=True)
        kube.writes.shutdown(wait=True)
    assert [(path.rsplit("/", 1)[1], body) for path, body in patches[1:]] == [
        ("other", {"metadata": {"annotations": {JOB_ALLOCATED_HYPERNODE: where}}})]


def test_a_hard_gang_completed_by_pods_requesting_nothing_needs_room_only_for_the_others(pure):
    """minMember 3 of a, b, c (1 cpu each) and z (nothing), created in that order, hard within
    tier 1; each switch holds 2 cpu. The first three pending pods ask 3 cpu, which no switch
    has; but a, b and z make the gang (Volcano counts a pod requesting nothing ready), so the
    search must not pass a switch over for the third cpu. (Found by the hypothesis property of
    test_subgroup_eviction_properties: reclaim pipelined a gang that allocate then never
    completed, its victims evicted for nothing.)"""
    state = ClusterState()
    for s in ("s0", "s1"):
        node(state, f"{s}-n1", cpu=2000, memory=4 * GiB)
        state.add_hypernode(HyperNode(s, 1, "", (Member("Node", exact=f"{s}-n1"),)))
    state.add_podgroup(PodGroup("c1", "pg1", min_member=3, phase="Inqueue", uid="pg1",
                                network_topology=NetworkTopology("hard", 1)))
    for i, (name, cpu) in enumerate((("a", 1000), ("b", 1000), ("c", 1000), ("z", 0))):
        pod(state, name, cpu=cpu, memory=0 if not cpu else GiB, group="pg1", ns="c1", creation=float(i))
    bound = run(state, pure)
    assert "c1/z" in bound and len(bound) == 3, bound
    assert len({bound[k] for k in bound}) == 1      # one switch (one node each here)
