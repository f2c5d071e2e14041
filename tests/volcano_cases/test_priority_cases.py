"""pkg/scheduler/plugins/priority/priority_test.go (Volcano v1.14.1), TestPreempt case by case:
allocate then preempt with the priority plugin alone (no gang: every job is ready, and starving
is priority's own rule, ready + pipelined < all tasks)."""

from __future__ import annotations

import pytest

from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

YES, NO = {"volcano.sh/preemptable": "true"}, {"volcano.sh/preemptable": "false"}
ENABLE_EVICT = [[plugin("priority", "task_order", "job_order", "preemptable", "reclaimable", "job_starving")]]
DISABLE_EVICT = [[plugin("priority", "task_order", "job_order", "job_starving")]]
CLASSES = {"low-priority": 100, "high-priority": 1000}
PODS10 = {"pods": "10"}

CASES = [
    # TestPreempt / "enable preempt low priority: enablePreemptable:true": node2 is too small,
    # node1 is full of pg1 (low); of its two pods the one with the lower pod priority goes
    # (preemptee2 has priority 1000), and the preemptor is pipelined onto node1.
    Case("TestPreempt / enable preempt low priority: enablePreemptable:true", ENABLE_EVICT, ("allocate", "preempt"),
         priority_classes=CLASSES,
         nodes=[node("node1", res("6", "6G", PODS10)), node("node2", res("2", "2G", PODS10))],
         pods=[pod("ns1", "preemptee1", "node1", "Running", res("3", "3G"), "pg1", YES),
               pod("ns1", "preemptee2", "node1", "Running", res("3", "3G"), "pg1", YES, priority=1000),
               pod("ns2", "preemptor1", "", "Pending", res("3", "3G"), "pg2")],
         podgroups=[podgroup("pg1", "ns1", "q1", 1, {}, priority_class="low-priority"),
                    podgroup("pg2", "ns2", "q1", 1, {}, priority_class="high-priority")],
         queues=[queue("q1", 1, res("6", "6G"))],
         expect=Expect(evicted=["ns1/preemptee1"], pipelined={"ns2/pg2": ["node1"]})),
    # TestPreempt / "disable preempt low priority: enablePreemptable:false": with priority's
    # preemptable switched off no plugin offers victims, so nothing is evicted or pipelined.
    # Our lint refuses preempt with no victim plugin (PD304, an error); the engine runs the plan
    # compiled without lint.
    Case("TestPreempt / disable preempt low priority: enablePreemptable:false", DISABLE_EVICT, ("allocate", "preempt"),
         priority_classes=CLASSES,
         nodes=[node("node1", res("3", "3G", PODS10)), node("node2", res("3", "3G", PODS10))],
         pods=[pod("ns1", "preemptee1", "node1", "Running", res("3", "3G"), "pg1", YES),
               pod("ns1", "preemptee2", "node2", "Running", res("3", "3G"), "pg1", NO),
               pod("ns2", "preemptor1", "", "Pending", res("3", "3G"), "pg2")],
         podgroups=[podgroup("pg1", "ns1", "q1", 1, {}, priority_class="low-priority"),
                    podgroup("pg2", "ns2", "q1", 1, {}, priority_class="high-priority")],
         queues=[queue("q1", 1, res("6", "6G"))],
         expect=Expect(), lint_refuses="PD304"),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_priority_case(case, pure):
    run_and_check(case, pure)
