"""The pdb plugin, on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/pdb/pdb_test.go
TestPreemptableAndReclaimableFn: two pods of job-1; without budgets both are victims, with a
budget allowing 0 neither, allowing 1 the first. Then cycles: a budget bounds preemption within a
cycle across preemptors, disruptedPods do not count, and where budgets are not read no pod is a
victim."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, DisruptionBudget, PodGroup
from runtime.cluster.objects import ObjectError, load_objects
from runtime.cluster.selectors import LabelSelector
from runtime.engine.cycle import open_session, run_cycle
from runtime.engine.session import Options
from runtime_helpers import node, pod, policy

JOB_LABEL = {"volcano.sh/job-name": "job-1"}
TIERS = "tier {\n  plugin priority\n  plugin gang\n  plugin conformance\n  plugin pdb\n}\n" \
        "tier {\n  plugin drf\n  plugin predicates\n  plugin proportion\n}\n"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def budget_object(allowed: int | None, disrupted: dict | None = None, selector: dict | None = None) -> dict:
    status = {} if allowed is None else {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = disrupted
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "test-pdb", "namespace": "default"},
            "spec": {"selector": selector if selector is not None else {"matchLabels": JOB_LABEL}},
            "status": status}


def pod_object(name: str, labels: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"schedulerName": "volcano", "nodeName": "n1",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running"}}


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


@pytest.mark.parametrize("budgets, expected", [
    ([], ["test-pod1", "test-pod2"]),
    ([budget_object(0)], []),
    ([budget_object(1)], ["test-pod1"]),
    ([budget_object(0, {"test-pod1": "2026-01-01T00:00:00Z"})], ["test-pod1"]),   # already disrupted: not counted
    ([budget_object(0, selector={})], ["test-pod1", "test-pod2"]),                # an empty selector: skipped
], ids=["test without pdbs", "test with pdbs(can evict 0 pod)", "test with pdbs(can evict 1 pod)",
        "disrupted pods", "empty selector"])
def test_preemptable_and_reclaimable_fn(budgets, expected, pure):
    docs = [("t.yaml", o) for o in (NODE, pod_object("test-pod1", JOB_LABEL), pod_object("test-pod2", JOB_LABEL),
                                    *budgets)]
    ssn = open_session(policy(TIERS, actions="enqueue, allocate, preempt, reclaim"), load_objects(docs),
                       Options(pure_python=pure))
    names = [p.name for p in ssn.snap.pods]
    order = sorted(range(len(names)), key=lambda t: names[t])
    for point in ("preemptable", "reclaimable"):
        fn = next(f for tier in ssn.fns(point) for name, f in tier if name == "pdb")
        assert [names[t] for t in fn(-1, order)] == expected


def test_a_budget_without_status_is_a_located_error():
    with pytest.raises(ObjectError) as err:
        load_objects([("t.yaml", budget_object(None))])
    assert "status.disruptionsAllowed" in str(err.value) and "test-pdb" in str(err.value)


def cluster(budget: DisruptionBudget | None, read: bool = True) -> ClusterState:
    state = ClusterState()
    node(state, "n1", cpu=2000)
    for i in range(2):
        pod(state, f"low-{i}", cpu=1000, priority=1, node_name="n1", labels=dict(JOB_LABEL), creation=float(i))
    for i in range(2):       # two one-pod jobs: each commits its own preemption
        state.add_podgroup(PodGroup("ns", f"high-{i}", min_member=1, phase="Inqueue", uid=f"pg-{i}"))
        pod(state, f"high-{i}-0", cpu=1000, priority=100, group=f"high-{i}")
    if read:
        state.disruption_budgets = {} if budget is None else {"ns/b": budget}
    return state


def run(state: ClusterState, pure: bool):
    return run_cycle(policy(TIERS, actions="enqueue, allocate, preempt, backfill"), state, Options(pure_python=pure))


def test_a_budget_bounds_the_cycles_evictions(pure):
    # Two preemptor jobs each want one victim; the budget allows one eviction in all (a gang of
    # both would get none: its second pod finds no victim and the turn is undone).
    selector = LabelSelector(tuple(JOB_LABEL.items()))
    assert len(run(cluster(None), pure).evictions) == 2
    assert len(run(cluster(DisruptionBudget("ns", "b", selector, 1)), pure).evictions) == 1
    assert len(run(cluster(DisruptionBudget("ns", "b", selector, 0)), pure).evictions) == 0
    # Another namespace's budget does not apply.
    assert len(run(cluster(DisruptionBudget("other", "b", selector, 0)), pure).evictions) == 2


def test_where_budgets_are_not_read_no_pod_is_a_victim(pure):
    assert run(cluster(None, read=False), pure).evictions == []
