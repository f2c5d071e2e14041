"""pkg/scheduler/actions/backfill/backfill_test.go (Volcano v1.14.1), TestPickUpPendingTasks.

The Go test pipelines four best-effort and four other pods onto "node1" by hand, then checks
the order of backfill's pickUpPendingTasks: the best-effort tasks only, the pipelined ones
included (it un-pipelines them), queue by queue, job by job (pg2, priority 2, first), task by
task (higher pod priority first). The order itself is internal; what backfill then does with it
is observable: with the Go tier (priority and drf, no predicates) every picked task binds. So
the translation gives node1 a real node (the Go test has none) and runs backfill after the same
hand-made pipelining: all eight best-effort pods bind to node1, the four that were pipelined
too; the four pipelined pods that request cpu stay pipelined.
"""

from __future__ import annotations

import pytest

from runtime.engine.snapshot import PIPELINED
from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

TIERS = [[plugin("priority", "preemptable", "task_order", "job_order"), plugin("drf", "queue_order")]]
HALF = {"cpu": 500}
PENDING = [(g, kind, i) for g in ("pg1", "pg2") for i in (1, 3) for kind in ("besteffort", "unbesteffort")]
PIPELINED_PODS = [(g, kind, i) for g in ("pg1", "pg2") for i in (2, 4) for kind in ("besteffort", "unbesteffort")]


def build(spec):
    g, kind, i = spec
    return pod("default", f"{g}-{kind}-task-{i}", "", "Pending", {} if kind == "besteffort" else HALF, g, priority=i)


def pipeline_by_hand(ssn):
    """The Go test's stmt.Pipeline(task, "node1") for each of its pipelined pods."""
    node1 = ssn.snap.node_names.index("node1")
    stmt = ssn.new_statement()
    for spec in PIPELINED_PODS:
        stmt.place(ssn.snap.task_keys.index(f"default/{build(spec).name}"), node1, PIPELINED)
    stmt.commit()


BESTEFFORT = [f"default/{g}-besteffort-task-{i}" for g in ("pg1", "pg2") for i in (1, 2, 3, 4)]

CASES = [
    # TestPickUpPendingTasks / "test" (derived: node1 exists, with room for every pod).
    Case("TestPickUpPendingTasks / test (derived: backfill binds what it picks)", TIERS, ("backfill",),
         priority_classes={"job-priority-1": 1, "job-priority-2": 2},
         nodes=[node("node1", res("10", "10Gi", {"pods": "100"}))],
         pods=[build(s) for s in PENDING + PIPELINED_PODS],
         podgroups=[podgroup("pg1", "default", "q1", 1, {"": 3}, priority_class="job-priority-1"),
                    podgroup("pg2", "default", "q1", 1, {"": 3}, priority_class="job-priority-2")],
         queues=[queue("q1", 1)],
         setup=pipeline_by_hand,
         expect=Expect(binds={key: "node1" for key in BESTEFFORT}, evicted=[],
                       pipelined={"default/pg1": ["node1"], "default/pg2": ["node1"]})),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_backfill_case(case, pure):
    run_and_check(case, pure)
