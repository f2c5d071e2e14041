"""The volume rule's tables kept across cycles (runtime.engine.rules.volumes.VolumeTables, beside
the snapshot cache): each kind of change to what they were made from — a PV replaced, added,
removed or moved, a StorageClass's topology, a CSINode's limits, the node set — must reach the
next cycle run with the same cache, which then decides as a cycle with a fresh cache does.
Each test first runs a cycle that fills the tables, then changes the state (no binding in
between: the decisions are not applied), and asserts the second cycle's placement."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runtime.cluster.model import ClusterState
from runtime.cluster.objects import load_objects
from runtime.cluster.storage import ClaimRef
from runtime.engine.cycle import Options, run_cycle
from runtime.engine.snapshot import SnapshotCache
from runtime_helpers import STANDARD_TIERS, policy
from storage_docs import ZONE, claim_pod, csinode_doc, node_doc, pv_doc, pvc_doc, storage_class

PLAN = policy(STANDARD_TIERS)
DRIVER = "disk.csi.example.com"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def load(docs) -> ClusterState:
    return load_objects(("test", d) for d in docs)


def placed(state: ClusterState, cache: SnapshotCache, pure: bool) -> dict[str, tuple[str, dict]]:
    """pod -> (node, claim -> PV or None) of a cycle with `cache`, checked against a fresh cache's."""
    def one(c: SnapshotCache) -> dict[str, tuple[str, dict]]:
        decisions = run_cycle(PLAN, state, Options(pure_python=pure), c)
        volumes = {pod: {ch.claim.split("/")[1]: ch.volume for ch in choices}
                   for pod, choices in decisions.volumes.items()}
        return {b.pod.split("/")[1]: (b.node, volumes.get(b.pod, {})) for b in decisions.bindings}
    kept = one(cache)
    assert kept == one(SnapshotCache())
    return kept


def local_state(*pvs: dict, nodes=("n1", "n2"), request: str = "5Gi") -> ClusterState:
    return load([storage_class("local"), *(node_doc(n) for n in nodes), *pvs, pvc_doc("c", size=request),
                 claim_pod("p", ["c"])])


def test_a_pv_taken_by_another_claim_and_a_new_one_reach_the_next_cycle(pure):
    state = local_state(pv_doc("pv1", "n1"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": ("n1", {"c": "pv1"})}
    st = state.storage
    st.volumes["pv1"] = replace(st.volumes["pv1"], claim_ref=ClaimRef("ns", "other"), phase="Bound")
    st.volumes.update(load([pv_doc("pv2", "n2")]).storage.volumes)
    assert placed(state, cache, pure) == {"p": ("n2", {"c": "pv2"})}


def test_a_removed_pv_reaches_the_next_cycle(pure):
    state = local_state(pv_doc("pv1", "n1"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": ("n1", {"c": "pv1"})}
    del state.storage.volumes["pv1"]
    assert placed(state, cache, pure) == {}
    decisions = run_cycle(PLAN, state, Options(pure_python=pure), cache)
    assert BIND_CONFLICT in str(decisions.reasons_for("ns/p")[0].message)


def test_a_pv_whose_node_affinity_changed_is_reached_where_it_is_now(pure):
    state = local_state(pv_doc("pv1", "n1"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": ("n1", {"c": "pv1"})}
    st = state.storage
    st.volumes["pv1"] = replace(st.volumes["pv1"],
                                node_affinity=load([pv_doc("pv1", "n2")]).storage.volumes["pv1"].node_affinity)
    assert placed(state, cache, pure) == {"p": ("n2", {"c": "pv1"})}


def test_a_claim_that_grew_gets_the_candidates_of_its_new_size(pure):
    # No table is dropped for a claim: its shape (size included) is what its candidates are kept by.
    state = local_state(pv_doc("pv1", "n1", size="10Gi"), pv_doc("pv2", "n2", size="50Gi"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": ("n1", {"c": "pv1"})}
    state.storage.claims.update(load([pvc_doc("c", size="20Gi")]).storage.claims)
    assert placed(state, cache, pure) == {"p": ("n2", {"c": "pv2"})}


def test_a_storage_class_whose_topology_changed_provisions_where_it_now_says(pure):
    nodes = [node_doc("n1", labels={ZONE: "a"}), node_doc("n2", labels={ZONE: "b"})]
    state = load([storage_class("zonal", provisioner=DRIVER, topologies=[(ZONE, ["a"])]), *nodes,
                  pvc_doc("c", cls="zonal"), claim_pod("p", ["c"])])
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": ("n1", {"c": None})}
    state.storage.classes.update(load([storage_class("zonal", provisioner=DRIVER,
                                                     topologies=[(ZONE, ["b"])])]).storage.classes)
    assert placed(state, cache, pure) == {"p": ("n2", {"c": None})}


def test_a_csinode_whose_limit_changed_limits_the_next_cycle(pure):
    state = load([storage_class("fast", provisioner=DRIVER), node_doc("n1"), node_doc("n2"),
                  csinode_doc("n1", {DRIVER: 0}), pvc_doc("c", cls="fast"), claim_pod("p", ["c"])])
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": ("n2", {"c": None})}
    state.storage.csinodes.clear()
    state.storage.csinodes.update(load([csinode_doc("n2", {DRIVER: 0})]).storage.csinodes)
    assert placed(state, cache, pure) == {"p": ("n1", {"c": None})}


def test_a_new_node_moves_the_rows_the_pvs_are_reached_from(pure):
    # n0 sorts first: every node's row moves up one; a PV's kept rows would name n1.
    state = local_state(pv_doc("pv2", "n2"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": ("n2", {"c": "pv2"})}
    state.add_node(load([node_doc("n0")]).nodes["n0"])
    assert placed(state, cache, pure) == {"p": ("n2", {"c": "pv2"})}


def test_a_node_that_arrives_makes_its_local_pv_reachable(pure):
    state = local_state(pv_doc("pv3", "n3"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {}
    state.add_node(load([node_doc("n3")]).nodes["n3"])
    assert placed(state, cache, pure) == {"p": ("n3", {"c": "pv3"})}
