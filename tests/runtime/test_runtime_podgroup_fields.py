"""Every field of a PodGroup's spec is either evaluated or makes the group wait, naming it:
a `subGroupPolicy` sub-field not evaluated holds the group back; `networkTopology` is
placed (tests/runtime/test_runtime_network_topology.py): here, that its request is read and bad
values refused; `preemptable` decides whether its pods may be victims where a pod says nothing."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup
from runtime.cluster.objects import ObjectError, load_objects
from runtime_helpers import STANDARD_TIERS, cycle, node, placements, pod, policy

PLAN = policy(STANDARD_TIERS)


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def load(*objects: dict) -> ClusterState:
    return load_objects([("test.yaml", obj) for obj in objects])


def podgroup_object(name: str, spec: dict, phase: str = "Inqueue") -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"minMember": 2, "queue": "default", **spec}, "status": {"phase": phase}}


def node_object(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


def pod_object(name: str, group: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "volcano",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


@pytest.mark.parametrize("field, value, named", [
    # Sub-groups are evaluated (tests/runtime/test_subgroups.py); a sub-field that is not waits.
    ("subGroupPolicy", [{"name": "workers", "subGroupSize": 2, "subGroupTimeout": "5m"}],
     "spec.subGroupPolicy[0].subGroupTimeout"),
])
def test_a_group_asking_for_a_field_not_evaluated_waits_naming_it(field, value, named, pure):
    state = load(node_object("n1"), podgroup_object("train", {field: value}),
                 pod_object("train-0", "train"), pod_object("train-1", "train"))
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions) == {}
    for key in ("ns/train-0", "ns/train-1"):
        assert any(named in r.message for r in decisions.reasons_for(key))


def test_a_group_without_its_pods_yet_is_admitted_when_it_asks_for_topology(pure):
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate")
    state = load(node_object("n1"), podgroup_object("asks", {"networkTopology": {"mode": "hard"}}, phase="Pending"),
                 podgroup_object("plain", {}, phase="Pending"))
    phases = {s.name: s.phase for s in cycle(plan, state, pure).podgroups}
    assert phases == {"ns/asks": "Inqueue", "ns/plain": "Inqueue"}


def test_a_topology_request_is_read():
    state = load(podgroup_object("a", {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}),
                 podgroup_object("b", {"networkTopology": {"highestTierName": "spine"}}),
                 podgroup_object("c", {"networkTopology": {}}))
    a, b, c = (state.podgroups[f"ns/{n}"].network_topology for n in "abc")
    assert (a.mode, a.highest_tier, a.hard) == ("soft", 2, False)
    assert (b.mode, b.highest_tier, b.highest_tier_name, b.hard) == ("hard", None, "spine", True)
    assert c is None


@pytest.mark.parametrize("value, field", [
    ({"mode": "strict"}, "spec.networkTopology.mode"),
    ({"highestTierAllowed": -1}, "spec.networkTopology.highestTierAllowed"),
    ({"highestTierAllowed": "two"}, "spec.networkTopology.highestTierAllowed"),
    ({"highestTierName": ""}, "spec.networkTopology.highestTierName"),
    ({"tier": 1}, "spec.networkTopology.tier"),
    ("hard", "spec.networkTopology"),
])
def test_bad_topology_requests_are_refused_naming_the_field(value, field):
    with pytest.raises(ObjectError) as err:
        load(podgroup_object("g", {"networkTopology": value}))
    assert field in str(err.value)


def test_an_empty_topology_request_is_no_request(pure):
    state = load(node_object("n1"), podgroup_object("train", {"networkTopology": {}}),
                 pod_object("train-0", "train"), pod_object("train-1", "train"))
    assert len(placements(cycle(PLAN, state, pure))) == 2


def test_preemptable_must_be_a_boolean():
    with pytest.raises(ObjectError) as err:
        load(podgroup_object("g", {"preemptable": "no"}))
    assert "spec.preemptable" in str(err.value)


@pytest.mark.parametrize("group_says, pod_says, evicted", [
    (None, None, True),
    (False, None, False),                 # the group's spec.preemptable, where the pod says nothing
    (True, None, True),
    (False, "true", True),                # the pod's own annotation first
    (True, "false", False),
])
def test_a_groups_preemptable_decides_where_its_pods_say_nothing(group_says, pod_says, evicted, pure):
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "n1", cpu=2000)
    state.add_podgroup(PodGroup("ns", "low", min_member=1, phase="Running", uid="pg-low", preemptable=group_says))
    annotations = {} if pod_says is None else {"volcano.sh/preemptable": pod_says}
    for i in range(2):
        pod(state, f"low-{i}", cpu=1000, priority=1, group="low", node_name="n1", annotations=annotations)
    state.add_podgroup(PodGroup("ns", "high", min_member=1, phase="Inqueue", uid="pg-high"))
    pod(state, "high-0", cpu=1000, priority=100, group="high")
    decisions = cycle(plan, state, pure)
    assert bool(decisions.evictions) is evicted
