"""The snapshot's placed pods (what the inter-pod rules count: every pod holding room on a
known node, whoever's) come from the pod scan's rows, not a second pass over the pods: they
are ClusterState.placed_pods() on known nodes, in its order, with their node rows — pods on
nodes the cluster no longer has, finished pods and pods only counted (ClusterState.settled)
included as that says; and a cycle decides alike on the listed and the counted state."""

from __future__ import annotations

import dataclasses

import pytest

from runtime.cluster.model import QUEUE_ANNOTATION, ClusterState, PodAffinityTerm, PodRules, SpreadConstraint, settles
from runtime.cluster.selectors import LabelSelector
from runtime.engine.cycle import Options, run_cycle
from runtime.engine.snapshot import SnapshotCache, build_snapshot
from runtime.kube.settled import SettledLedger
from runtime_helpers import STANDARD_TIERS, node, placements, pod, policy

HOST = "kubernetes.io/hostname"
ZONE = "zone"
PLAN = policy(STANDARD_TIERS, actions="enqueue, allocate")


def cluster() -> ClusterState:
    state = ClusterState()
    for i in range(6):
        node(state, f"n{i}", cpu=8000, labels={HOST: f"n{i}", ZONE: f"z{i % 2}"})
    anti = PodRules(anti_affinity=(PodAffinityTerm(HOST, LabelSelector((("app", "web"),)), frozenset({"ns"})),))
    spread = PodRules(spread=(SpreadConstraint(1, ZONE, "DoNotSchedule", LabelSelector((("app", "db"),))),))
    for i in range(4):          # bound, with rules: each holds its node against the waiting ones
        pod(state, f"web-bound-{i}", node_name=f"n{i}", labels={"app": "web"}, rules=anti)
    pod(state, "db-bound", node_name="n0", labels={"app": "db"}, rules=spread)
    pod(state, "plain-bound", node_name="n5", labels={"app": "web"})            # selected, no rules itself
    pod(state, "gone-node", node_name="n-removed", labels={"app": "web"}, rules=anti)
    done = pod(state, "finished", node_name="n4", labels={"app": "web"}, rules=anti)
    done.phase = "Succeeded"
    for i in range(3):
        pod(state, f"web-{i}", labels={"app": "web"}, rules=anti)
        pod(state, f"db-{i}", labels={"app": "db"}, rules=spread)
    return state


def reference(state: ClusterState, snap) -> tuple[list[str], list[int]]:
    rows = {name: i for i, name in enumerate(snap.node_names)}
    known = [p for p in state.placed_pods() if p.node_name in rows]
    return [p.key for p in known], [rows[p.node_name] for p in known]


@pytest.mark.parametrize("pure", [False, True])
def test_placed_pods_are_those_on_known_nodes_in_state_order(pure):
    from runtime.engine.kernels import load
    state = cluster()
    snap = build_snapshot(state, PLAN, "volcano", SnapshotCache(), load(pure))
    assert ([p.key for p in snap.placed_pods], snap.placed_rows.tolist()) == reference(state, snap)
    assert "ns/gone-node" not in {p.key for p in snap.placed_pods}
    assert "ns/finished" not in {p.key for p in snap.placed_pods}


@pytest.mark.parametrize("pure", [False, True])
def test_counted_pods_are_placed_pods_too_and_decide_alike(pure):
    from runtime.engine.kernels import load
    state = cluster()
    ledger = SettledLedger("volcano")
    in_play = {}
    for key, p in state.pods.items():
        if settles(p, "volcano"):
            ledger.add(p, p.annotations.get(QUEUE_ANNOTATION))
        else:
            in_play[key] = p
    settled = [p for key, p in state.pods.items() if key not in in_play]
    assert settled, "the cluster must have counted pods for this test to mean anything"
    counted = dataclasses.replace(state, pods=in_play, settled=ledger.view(), settled_pods=lambda: settled)
    snap = build_snapshot(counted, PLAN, "volcano", SnapshotCache(), load(pure), True)
    assert sorted(zip((p.key for p in snap.placed_pods), snap.placed_rows.tolist())) == \
        sorted(zip(*reference(state, snap)))
    listed = placements(run_cycle(PLAN, state, Options(pure_python=pure)))
    assert listed == placements(run_cycle(PLAN, counted, Options(pure_python=pure, fold_settled=True)))
    # the rules held: no web pod beside another, the db pods one per zone at most apart
    web_nodes = [n for k, n in listed.items() if "web-" in k]
    assert len(web_nodes) == len(set(web_nodes)) and not {"n0", "n1", "n2", "n3"} & set(web_nodes)


@pytest.mark.parametrize("pure", [False, True])
def test_placed_pods_are_listed_again_only_after_a_pod_changed(pure):
    # The snapshot cache keeps the list while its scan reads no pod again; after a change it is
    # the state's again (a pod bound, one removed, one finished in place).
    from runtime.engine.kernels import load
    from runtime.cluster.model import pod_changed
    state = cluster()
    cache = SnapshotCache()
    first = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    again = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    assert again.placed_pods is first.placed_pods
    # So is the list of the pods with rules, which the cache knows by identity (rule_reading).
    assert again.rule_pods is first.rule_pods and again.rule_objects is first.rule_objects
    state.pods["ns/web-0"].node_name = "n4"
    pod_changed(state.pods["ns/web-0"])
    state.remove_pod("ns/web-bound-1")
    state.pods["ns/db-bound"].phase = "Succeeded"
    pod_changed(state.pods["ns/db-bound"])
    snap = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    assert snap.placed_pods is not first.placed_pods and snap.rule_pods is not first.rule_pods
    fresh = build_snapshot(state, PLAN, "volcano", SnapshotCache(), load(pure))
    assert [p.key for p in snap.rule_pods] == [p.key for p in fresh.rule_pods]
    assert snap.rule_objects == fresh.rule_objects and snap.label_keys == fresh.label_keys
    assert ([p.key for p in snap.placed_pods], snap.placed_rows.tolist()) == reference(state, snap)
