"""Fragmentation counts only room a waiting pod may use (issue 32: it ignored taints and
selectors, so packing that left a tainted GPU node idle read as less fragmented): a node the
pod's selector, required affinity or an untolerated taint keeps it off is no candidate."""

from __future__ import annotations

from runtime.cluster.model import ClusterState, Node, Pod, Taint, Toleration
from runtime.cluster.selectors import MatchExpression
from runtime.engine.fragmentation import node_fragmentation

RESOURCES = ["cpu"]


def cluster() -> ClusterState:
    state = ClusterState()
    state.add_node(Node("plain", {"cpu": 4000, "pods": 110}, labels={"pool": "a"}))
    state.add_node(Node("gpu", {"cpu": 4000, "pods": 110}, labels={"pool": "b"},
                        taints=(Taint("gpu", "yes", "NoSchedule"),)))
    return state


USED = {"plain": {"cpu": 3000}}       # plain has 1 CPU free, gpu 4


def waiting(**kwargs) -> Pod:
    return Pod("ns", "w", {"cpu": 2000}, uid="w", **kwargs)


def test_room_behind_an_untolerated_taint_is_no_candidate():
    # The pod may only use `plain`, where its 1 free CPU cannot hold 2: all its usable room is stranded.
    assert node_fragmentation(cluster(), USED, RESOURCES, [waiting()]) == {"cpu": 1.0}


def test_a_tolerating_pod_counts_the_tainted_node():
    pod = waiting(tolerations=(Toleration("gpu", "Equal", "yes", "NoSchedule"),))
    # It fits `gpu` now: only plain's 1 CPU of the 5 free is stranded.
    assert node_fragmentation(cluster(), USED, RESOURCES, [pod]) == {"cpu": 0.2}


def test_a_selector_and_required_affinity_narrow_the_candidates():
    tolerant = (Toleration("gpu", "Exists", "", ""),)
    on_b = waiting(node_selector={"pool": "b"}, tolerations=tolerant)
    assert node_fragmentation(cluster(), USED, RESOURCES, [on_b]) == {"cpu": 0.0}
    by_name = waiting(required_terms=((MatchExpression("metadata.name", "In", ("plain",), field=True),),),
                      tolerations=tolerant)
    assert node_fragmentation(cluster(), USED, RESOURCES, [by_name]) == {"cpu": 1.0}


def test_no_node_admits_the_pod_means_no_fragmentation_to_speak_of():
    pod = waiting(node_selector={"pool": "z"})
    assert node_fragmentation(cluster(), USED, RESOURCES, [pod]) == {}
