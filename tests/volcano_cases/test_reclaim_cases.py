"""pkg/scheduler/actions/reclaim/reclaim_test.go (Volcano v1.14.1), TestReclaim case by case.
Each Go case registers its own plugins; the shared tier keeps only those (`only`)."""

from __future__ import annotations

import pytest

from runtime.cluster.model import PREEMPT_NEVER
from vcase import Case, Expect, node, only, params, plugin, pod, podgroup, queue, res, run_and_check

PREEMPTABLE = "volcano.sh/preemptable"
YES, NO = {PREEMPTABLE: "true"}, {PREEMPTABLE: "false"}
PODS10 = {"pods": "10"}

# TestReclaim's tier. proportion and capacity both appear, but each case registers one.
TIERS = [[
    plugin("conformance", "reclaimable"),
    plugin("gang", "reclaimable", "job_starving"),
    plugin("proportion", "reclaimable", "queue_order", "preemptive"),
    plugin("capacity", "reclaimable", "queue_order", "preemptive"),
    plugin("priority", "reclaimable", "job_order", "task_order"),
]]
BASIC = only(TIERS, "conformance", "gang", "proportion")
WITH_PRIORITY = only(TIERS, "conformance", "gang", "proportion", "priority")
WITH_CAPACITY = only(TIERS, "conformance", "gang", "capacity")


def case(name: str, tiers, **kw) -> Case:
    return Case(f"TestReclaim / {name}", tiers, ("reclaim",), **kw)


CASES = [
    # "Two Queue with one Queue overusing resource, should reclaim": q1 holds the whole 3-cpu
    # node; of its pods only preemptee2 is preemptable (the others carry the *label*
    # volcano.sh/preemptable=false). No PriorityClass objects: both jobs have priority 0.
    case("Two Queue with one Queue overusing resource, should reclaim", BASIC,
         nodes=[node("n1", res("3", "3Gi", PODS10))],
         pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1", NO),
               pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1", YES),
               pod("c1", "preemptee3", "n1", "Running", res("1", "1G"), "pg1", NO),
               pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg2")],
         podgroups=[podgroup("pg1", "c1", "q1", 1, None, priority_class="low-priority"),
                    podgroup("pg2", "c1", "q2", 1, None, priority_class="high-priority")],
         queues=[queue("q1", 1), queue("q2", 1)],
         expect=Expect(evicted=["c1/preemptee2"])),
    # "sort reclaimees when reclaiming from overusing queue": victims of several queues on one
    # node are ordered by Volcano's BuildVictimsPriorityQueue: other queues by the victim-queue
    # order, then the lower-priority job first: pg2 (low-priority) gives preemptee2-1.
    case("sort reclaimees when reclaiming from overusing queue", WITH_PRIORITY,
         priority_classes={"low-priority": 100, "mid-priority": 500, "high-priority": 1000},
         nodes=[node("n1", res("4", "4Gi", PODS10))],
         pods=[pod("c1", "preemptee1-1", "n1", "Running", res("1", "1G"), "pg1", YES),
               pod("c1", "preemptee1-2", "n1", "Running", res("1", "1G"), "pg1", YES),
               pod("c1", "preemptee2-1", "n1", "Running", res("1", "1G"), "pg2", YES),
               pod("c1", "preemptee2-2", "n1", "Running", res("1", "1G"), "pg2", NO),
               pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg3")],
         podgroups=[podgroup("pg1", "c1", "q1", 1, None, priority_class="mid-priority"),
                    podgroup("pg2", "c1", "q2", 1, None, priority_class="low-priority"),
                    podgroup("pg3", "c1", "q3", 1, None, priority_class="high-priority")],
         queues=[queue("q1", 1), queue("q2", 1), queue("q3", 1)],
         expect=Expect(evicted=["c1/preemptee2-1"])),
    # "sort reclaimees when reclaiming from overusing queues with different queue priority":
    # the victim in the lowest-priority queue goes first (q1, priority 5; q2 has 10).
    case("sort reclaimees when reclaiming from overusing queues with different queue priority", BASIC,
         nodes=[node("n1", res("4", "4Gi", PODS10))],
         pods=[pod("c1", "preemptee1-1", "n1", "Running", res("1", "1G"), "pg1", YES),
               pod("c1", "preemptee1-2", "n1", "Running", res("1", "1G"), "pg1", NO),
               pod("c1", "preemptee2-1", "n1", "Running", res("1", "1G"), "pg2", YES),
               pod("c1", "preemptee2-2", "n1", "Running", res("1", "1G"), "pg2", NO),
               pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg3")],
         podgroups=[podgroup("pg1", "c1", "q1", 1, None, priority_class="mid-priority"),
                    podgroup("pg2", "c1", "q2", 1, None, priority_class="mid-priority"),
                    podgroup("pg3", "c1", "q3", 1, None, priority_class="mid-priority")],
         queues=[queue("q1", priority=5), queue("q2", priority=10), queue("q3", priority=1)],
         # Agrees, by our tie-break (equal task priority, then the lower index) rather than by
         # the queue order Volcano sorts victims with.
         expect=Expect(evicted=["c1/preemptee1-1"])),
    # "can not reclaim resources when task preemption policy is never" (#3642).
    case("can not reclaim resources when task preemption policy is never", BASIC,
         priority_classes={"low-priority": 100, "high-priority": 1000},
         nodes=[node("n1", res("1", "1Gi", {"pods": "1"}))],
         pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1", YES),
               pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg2", preemption_policy=PREEMPT_NEVER)],
         podgroups=[podgroup("pg1", "c1", "q1", 0, None, priority_class="low-priority"),
                    podgroup("pg2", "c1", "q2", 0, None, priority_class="high-priority")],
         queues=[queue("q1", 5), queue("q2", 10)],
         expect=Expect()),
    # "can not reclaim resources when queue is not open(proportion plugin)": the preemptor's
    # queue q2 is Closed; proportion's preemptive refuses it.
    case("can not reclaim resources when queue is not open(proportion plugin)", BASIC,
         nodes=[node("n1", res("3", "3Gi", PODS10))],
         pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1", NO),
               pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1", YES),
               pod("c1", "preemptee3", "n1", "Running", res("1", "1G"), "pg1", NO),
               pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg2")],
         podgroups=[podgroup("pg1", "c1", "q1", 1, None, "Running", priority_class="low-priority"),
                    podgroup("pg2", "c1", "q2", 1, None, priority_class="high-priority")],
         queues=[queue("q1", 1), queue("q2", 1, state="closed")],
         expect=Expect()),
    # "can not reclaim resources when queue is not open(capacity plugin)".
    case("can not reclaim resources when queue is not open(capacity plugin)", WITH_CAPACITY,
         nodes=[node("n1", res("3", "3Gi", PODS10))],
         pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1", NO),
               pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1", YES),
               pod("c1", "preemptee3", "n1", "Running", res("1", "1G"), "pg1", NO),
               pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg2")],
         podgroups=[podgroup("pg1", "c1", "q1", 1, None, "Running", priority_class="low-priority"),
                    podgroup("pg2", "c1", "q2", 1, None, priority_class="high-priority")],
         queues=[queue("q1", 1), queue("q2", 1, state="closed")],
         # Agrees, though not for the closed state: q2 has no deserved, so capacity's preemptive
         # (allocated + request <= deserved) already refuses it.
         expect=Expect()),
    # "Node available resources should be included in reclaimed resources": cpu is idle, memory
    # is short by less than one victim's 1G; the victim comes from q1 (queue priority 1 < 2).
    case("Node available resources should be included in reclaimed resources", WITH_PRIORITY,
         priority_classes={"low-priority": 100, "mid-priority": 500, "high-priority": 1000},
         nodes=[node("n1", res("10", "2Gi", PODS10))],
         pods=[pod("c1", "preemptee1-1", "n1", "Running", res("1", "1G"), "pg1", YES),
               pod("c1", "preemptee2-1", "n1", "Running", res("1", "1G"), "pg2", YES),
               pod("c1", "preemptor1", "", "Pending", res("2", "1G"), "pg3")],
         podgroups=[podgroup("pg1", "c1", "q1", 0, None, "Running", priority_class="mid-priority"),
                    podgroup("pg2", "c1", "q2", 0, None, "Running", priority_class="mid-priority"),
                    podgroup("pg3", "c1", "q3", 1, None, priority_class="mid-priority")],
         queues=[queue("q1", priority=1), queue("q2", priority=2), queue("q3", 3)],
         expect=Expect(evicted=["c1/preemptee1-1"])),
    # "Reclaim succeeds for second task when first task has PreemptionPolicy=Never": the
    # job's first preemptor may not preempt; Volcano skips it and reclaims for the second.
    case("Reclaim succeeds for second task when first task has PreemptionPolicy=Never", WITH_PRIORITY,
         priority_classes={"low-priority": 100, "high-priority-no-preempt": 1000, "high-priority-can-preempt": 900},
         nodes=[node("n1", res("2", "2G", PODS10))],
         pods=[pod("c1", "victim-pod-no", "n1", "Running", res("1", "1G"), "pg-victim", NO),
               pod("c1", "victim-pod", "n1", "Running", res("1", "1G"), "pg-victim", YES),
               pod("c1", "preemptor-task1-non-preemptable", "", "Pending", res("1", "1G"), "pg-preemptor",
                   preemption_policy=PREEMPT_NEVER),
               pod("c1", "preemptor-task2-preemptable", "", "Pending", res("1", "1G"), "pg-preemptor")],
         podgroups=[podgroup("pg-victim", "c1", "q1", 1, None, "Running", priority_class="low-priority"),
                    podgroup("pg-preemptor", "c1", "q2", 2, None, priority_class="high-priority-no-preempt")],
         queues=[queue("q1", 1), queue("q2", 1)],
         expect=Expect(evicted=["c1/victim-pod"])),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_reclaim_case(case, pure):
    run_and_check(case, pure)
