"""A queue's dequeue strategy (Queue spec.dequeueStrategy, the policy's `dequeue`), on both kernels.

The table is the example of Volcano's docs/design/dequeue-strategy.md (its tests:
pkg/scheduler/actions/allocate/allocate_priority_fifo_test.go): a node of 2 CPU; job A
(priority 1000, 4 CPU) cannot allocate; then B (priority 1000, 1 CPU) and C (priority 500,
1 CPU). traverse places B and C; fifo holds both; priorityfifo places B and holds C."""

from __future__ import annotations

import pytest

from runtime.cluster.objects import ObjectError, load_objects
from runtime_helpers import cycle, placements, policy

PLAN = policy("tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n}\n",
              actions="allocate")


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def documents(strategy: str | None, jobs=(("a", 1000, "4"), ("b", 1000, "1"), ("c", 500, "1"))) -> list:
    spec = {"weight": 1} if strategy is None else {"weight": 1, "dequeueStrategy": strategy}
    out = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}, "spec": spec},
           {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}}]
    out += [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"p{p}"}, "value": p}
            for p in sorted({p for _, p, _ in jobs})]
    for i, (name, priority, cpu) in enumerate(jobs):
        out.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "ns", "creationTimestamp": f"2026-01-01T00:00:0{i}Z"},
                    "spec": {"minMember": 1, "queue": "q", "priorityClassName": f"p{priority}"},
                    "status": {"phase": "Inqueue"}})
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "ns", "creationTimestamp": f"2026-01-01T00:00:0{i}Z",
                                 "annotations": {"scheduling.k8s.io/group-name": name}},
                    "spec": {"schedulerName": "volcano", "priorityClassName": f"p{priority}",
                             "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})
    return [("cluster.yaml", o) for o in out]


@pytest.mark.parametrize("strategy, placed, held", [
    (None, {"ns/b", "ns/c"}, set()),
    ("traverse", {"ns/b", "ns/c"}, set()),
    ("fifo", set(), {"ns/b", "ns/c"}),
    ("priorityfifo", {"ns/b"}, {"ns/c"}),
])
def test_volcano_dequeue_strategy_example(strategy, placed, held, pure):
    decisions = cycle(PLAN, load_objects(documents(strategy)), pure)
    assert set(placements(decisions)) == placed
    for key in held:
        assert any("dequeues" in r.message and "priority 1000" in r.message for r in decisions.reasons_for(key))
    assert not any("dequeues" in r.message for r in decisions.reasons_for("ns/a"))


def test_fifo_blocks_nothing_before_a_failure(pure):
    # In priority order A and B fit the node; C, the last, fails with no job left to hold.
    jobs = (("a", 1000, "1"), ("b", 1000, "1"), ("c", 500, "4"))
    decisions = cycle(PLAN, load_objects(documents("fifo", jobs)), pure)
    assert set(placements(decisions)) == {"ns/a", "ns/b"}


def test_a_higher_priority_job_after_a_failure_still_runs(pure):
    # D (2000) goes first and runs; A (1000, 4 CPU) fails; B (1000) is then held by fifo.
    jobs = (("a", 1000, "4"), ("b", 1000, "1"), ("d", 2000, "1"))
    decisions = cycle(PLAN, load_objects(documents("fifo", jobs)), pure)
    assert set(placements(decisions)) == {"ns/d"}


def test_the_policy_queue_sets_its_strategy(pure):
    plan = policy("tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n}\n"
                  "queue q {\n  dequeue = priorityfifo\n}\n", actions="allocate")
    state = load_objects([d for d in documents(None) if d[1]["kind"] != "Queue"])
    assert set(placements(cycle(plan, state, pure))) == {"ns/b"}


def test_an_unknown_strategy_is_a_located_error():
    bad = documents("lifo")[:1]
    with pytest.raises(ObjectError) as err:
        load_objects(bad)
    assert "Queue q" in str(err.value) and "spec.dequeueStrategy" in str(err.value) and "lifo" in str(err.value)
