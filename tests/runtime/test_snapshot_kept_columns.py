"""The snapshot cache keeps group_tasks' and task_columns' answers across cycles
(SnapshotCache.group_tasks, .task_columns): group_tasks' while the pod scan memo reads no pod
again, task_columns' while every input is the same; and the cluster's total with the node
arrays. Each test changes one input and asserts the answer is the kernel's on the new inputs
(each fails without that input's check), and that nothing changed keeps it; and cycles decide
alike with a kept and a fresh cache."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.cluster.model import ClusterState, Pod, pod_changed
from runtime.cluster.selectors import LabelSelector, SelectorSet
from runtime.engine.kernels import load
from runtime.engine.snapshot import BOUND, PENDING, SnapshotCache, build_snapshot
from runtime_helpers import STANDARD_TIERS, node, pod, policy

PLAN = policy(STANDARD_TIERS, actions="enqueue, allocate")


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def k(request):
    return load(request.param)


def inputs() -> dict:
    """Six pending tasks of two request rows, every third with a node selector (not plain)."""
    pods = [Pod("ns", f"p{i}", {"cpu": 1000}, labels={"app": "a" if i % 2 else "b"},
                node_selector={"zone": "z1"} if i % 3 == 0 else {}) for i in range(6)]
    return {"pods": pods, "status": np.full(6, PENDING, dtype=np.int8), "plain": np.zeros(6, dtype=np.uint8),
            "task_shape": np.array([0, 0, 1, 1, 0, 1], dtype=np.int64), "row_of_shape": np.array([0, 1], dtype=np.int64),
            "label_keys": None, "extra_keys": None, "selectors": None}


def columns(answer) -> tuple:
    return answer.task_class.tolist(), list(answer.class_heads)


def kernel(k, given: dict) -> tuple:
    return columns(k.task_columns(*given.values()))


def changed(name: str, given: dict) -> dict:
    """`given` with input `name` (alone) changed so that the classes differ."""
    out = dict(given)
    if name == "pods":
        out["pods"] = list(given["pods"])
        out["pods"][1] = Pod("ns", "other", {"cpu": 1000}, node_selector={"zone": "z2"})
    elif name == "status":
        out["status"] = given["status"].copy()
        out["status"][0] = BOUND
    elif name == "plain":          # plain tasks are classed by their request row alone
        out["plain"] = np.ones(6, dtype=np.uint8)
    elif name == "task_shape":
        out["task_shape"] = np.zeros(6, dtype=np.int64)
    elif name == "row_of_shape":
        out["row_of_shape"] = np.array([0, 0], dtype=np.int64)
    elif name == "label_keys":
        out["label_keys"] = ("app",)
    elif name == "extra_keys":
        out["extra_keys"] = {1: "y", 3: "y"}
    elif name == "selectors":      # selects nothing: the labels no longer part pods
        out["selectors"] = SelectorSet([], ("app",))
    return out


@pytest.mark.parametrize("name", ["pods", "status", "plain", "task_shape", "row_of_shape", "label_keys",
                                  "extra_keys", "selectors"])
def test_task_columns_follow_each_input(k, name):
    cache = SnapshotCache()
    given = inputs()
    if name == "selectors":     # from one selector set to another over the same keys
        given["label_keys"] = ("app",)
        given["selectors"] = SelectorSet([LabelSelector((("app", "b"),))], ("app",))
    first = cache.task_columns(k, *given.values())
    assert columns(first) == kernel(k, given)
    again = changed(name, given)
    assert kernel(k, again) != columns(first), "the change must change the classes"
    assert columns(cache.task_columns(k, *again.values())) == kernel(k, again)


def test_task_columns_are_kept_while_nothing_changes(k):
    cache = SnapshotCache()
    given = inputs()
    first = cache.task_columns(k, *given.values())
    kept = cache._columns
    second = cache.task_columns(k, *dict(given, status=given["status"].copy()).values())
    assert cache._columns is kept and columns(second) == columns(first)
    second.task_class[:] = 7        # the session's copy: the kept answer is not changed
    assert columns(cache.task_columns(k, *given.values())) == columns(first)


@pytest.mark.parametrize("pure", [False, True])
def test_tasks_are_kept_while_no_pod_is_read_again(pure):
    state = ClusterState()
    for name in ("n1", "n2"):
        node(state, name, cpu=4000)
    for i in range(4):
        pod(state, f"p{i}", cpu=1000, labels={"app": f"a{i % 2}"})
    pod(state, "bound", cpu=1000, node_name="n1")
    cache = SnapshotCache()
    first = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    again = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    assert again.pods is first.pods
    state.pods["ns/p1"].node_selector = {"zone": "z"}
    pod_changed(state.pods["ns/p1"])
    pod(state, "p9", cpu=2000)
    snap = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    fresh = build_snapshot(state, PLAN, "volcano", SnapshotCache(), load(pure))
    assert snap.pods is not first.pods
    assert snap.task_keys == fresh.task_keys and snap.task_class.tolist() == fresh.task_class.tolist()
    assert [c.head for c in snap.classes] == [c.head for c in fresh.classes]


@pytest.mark.parametrize("pure", [False, True])
def test_the_cluster_total_is_kept_with_the_node_arrays(pure):
    state = ClusterState()
    for name in ("n1", "n2"):
        node(state, name, cpu=4000)
    pod(state, "p", cpu=1000)
    cache = SnapshotCache()
    first = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    again = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    assert again.total.tolist() == first.total.tolist() and again.total is not first.total   # each its own
    node(state, "n3", cpu=8000)
    snap = build_snapshot(state, PLAN, "volcano", cache, load(pure))
    assert snap.total.tolist() == build_snapshot(state, PLAN, "volcano", SnapshotCache(), load(pure)).total.tolist()
    assert snap.total[snap.resource_index["cpu"]] == 16000
