"""Node quantities bounded on read, so no sum over nodes wraps int64 (issue 30).

Two nodes offering 9·10^18 of a resource once wrapped the cluster's total negative: nothing bound
anywhere and the reason blamed GPUs. Now a Node read from the API above MAX_NODE_QUANTITY of any
resource is invalid with a field-named reason; a node given in memory is bounded to it; the
cluster's total is summed without wrap; huge Queue guarantees are summed exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from runtime.cluster.model import MAX_NODE_QUANTITY, ClusterState, QueueObject
from runtime.cluster.objects import ObjectError, load_objects, read_object
from runtime.engine.cycle import Options, open_session, run_cycle
from runtime.engine.queueshare import real_capabilities, real_capability, unmet_promises
from runtime.engine.snapshot import UNLIMITED, cluster_total
from tests.runtime.runtime_helpers import STANDARD_TIERS, node, pod, policy

PLAN = policy(STANDARD_TIERS)
HUGE = 9 * 10**18          # below int64's 9.22·10^18: two of them wrap


def node_dict(name: str, **allocatable: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110", **allocatable}}}


def test_a_node_offering_more_than_the_bound_is_invalid_naming_the_field() -> None:
    state = ClusterState()
    with pytest.raises(ObjectError) as err:
        read_object(node_dict("big", **{"nvidia.com/gpu": str(HUGE)}), state)
    assert "`status.allocatable.nvidia.com/gpu`" in str(err.value) and "big" in str(err.value)
    assert state.nodes == {}
    read_object(node_dict("edge", **{"nvidia.com/gpu": str(MAX_NODE_QUANTITY)}), state)
    assert set(state.nodes) == {"edge"}


def test_load_objects_names_each_bad_node() -> None:
    docs = [("a.yaml", node_dict("big-0", **{"example.com/foo": str(HUGE)})),
            ("a.yaml", node_dict("big-1", **{"example.com/foo": str(HUGE)})), ("a.yaml", node_dict("fine"))]
    with pytest.raises(ObjectError) as err:
        load_objects(docs)
    problems = err.value.problems
    assert sorted(p.name for p in problems) == ["big-0", "big-1"]
    assert all("`status.allocatable.example.com/foo`" in p.message for p in problems)


@pytest.mark.parametrize("pure", [False, True])
def test_two_nodes_of_9e18_do_not_stop_other_pods_binding(pure: bool) -> None:
    state = ClusterState()
    node(state, "big-0", cpu=8000, **{"nvidia.com/gpu": HUGE})
    node(state, "big-1", cpu=8000, **{"nvidia.com/gpu": HUGE})
    node(state, "plain", cpu=8000)
    for i in range(3):
        pod(state, f"p{i}", cpu=4000)
    pod(state, "gpu", cpu=1000, requests={"nvidia.com/gpu": 1})
    snap = open_session(PLAN, state).snap
    gpu = snap.resource_index["nvidia.com/gpu"]
    assert snap.total[gpu] == 2 * MAX_NODE_QUANTITY and (snap.total >= 0).all()
    decisions = run_cycle(PLAN, state, Options(pure_python=pure))
    assert sorted(b.pod for b in decisions.bindings) == ["ns/gpu", "ns/p0", "ns/p1", "ns/p2"]
    assert decisions.unschedulable == []


def test_the_cluster_total_never_wraps() -> None:
    rows = np.full((10_000, 2), MAX_NODE_QUANTITY, dtype=np.int64)     # 10,000 nodes at the bound
    total = cluster_total(rows, np.ones(10_000, dtype=bool))
    assert list(total) == [UNLIMITED - 1, UNLIMITED - 1]
    assert list(cluster_total(rows[:3], np.array([True, False, True]))) == [2 * MAX_NODE_QUANTITY] * 2


def test_huge_sibling_guarantees_are_summed_without_wrap() -> None:
    state = ClusterState()
    node(state, "n0", cpu=8000)
    for name in ("a", "b", "c"):
        state.add_queue(QueueObject(name, guarantee={"cpu": HUGE}))
    state.add_queue(QueueObject("d"))
    ssn = open_session(PLAN, state)
    d = ssn.snap.queue_index["d"]
    cpu = ssn.snap.resource_index["cpu"]
    assert real_capability(ssn, d)[cpu] == 0 and real_capabilities(ssn)[d][cpu] == 0
    unmet_promises(ssn.snap)     # sums them too, without an overflow warning or error


def pod_dict(name: str, *memory: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"schedulerName": "volcano",
                     "containers": [{"name": f"c{i}", "resources": {"requests": {"cpu": "1", "memory": m}}}
                                    for i, m in enumerate(memory)]}}


@pytest.mark.parametrize("pure", [False, True])
def test_pods_asking_9e18_wait_alone_and_their_queue_schedules(pure: bool) -> None:
    # Two containers of 9·10^18 each pass int64 within one pod; two such pods wrap the queue's request.
    docs = [("a.yaml", node_dict("n0")), ("a.yaml", pod_dict("big-0", str(HUGE), str(HUGE))),
            ("a.yaml", pod_dict("big-1", str(HUGE)))] + [("a.yaml", pod_dict(f"p{i}", "1Gi")) for i in range(3)]
    state = load_objects(docs)
    assert state.pods["ns/big-0"].requests["memory"] == MAX_NODE_QUANTITY + 1
    decisions = run_cycle(PLAN, state, Options(pure_python=pure))
    assert sorted(b.pod for b in decisions.bindings) == ["ns/p0", "ns/p1", "ns/p2"]
    assert sorted(u.pod for u in decisions.unschedulable) == ["ns/big-0", "ns/big-1"]
