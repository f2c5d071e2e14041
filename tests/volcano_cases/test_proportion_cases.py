"""pkg/scheduler/plugins/proportion/proportion_test.go (Volcano v1.14.1), case by case.

TestProportion runs allocate in a goroutine every 3 s against a live Prometheus endpoint and
deletes PodGroups between rounds; of what it reads only the queue's allocated cpu is a fact
about the scheduler, so "pod-deallocate" is translated as that: q1's allocated resources as the
proportion plugin counts them at session open, before and after each PodGroup is deleted. (Its
`expected` maps are never read by the Go test; "realcapability-test" checks nothing beyond the
same metric, read from whichever queue's line the text parsing meets last, so it is left out.)
TestEnqueueAndAllocable and TestAllocate are translated case by case.
"""

from __future__ import annotations

import pytest

from runtime.cluster.model import PodAffinityTerm, PodRules
from runtime.cluster.selectors import LabelSelector, MatchExpression
from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

# --- TestProportion / pod-deallocate ---------------------------------------------------------

WORKER_ANTI = PodRules(anti_affinity=(PodAffinityTerm(
    "kubernetes.io/hostname", LabelSelector(match_expressions=(MatchExpression("role", "In", ("worker",)),)),
    frozenset({"ns1"})),))
PROPORTION_TIERS = [[plugin("proportion", "predicate"), plugin("gang", "job_ready", "job_pipelined"),
                     plugin("priority", "job_order")]]


def deallocate_case(deleted: tuple[str, ...], cpu: int, label: str) -> Case:
    """w1, w2 (pg1) and w3 (pg2) are Running with no nodeName; q1 and q2 have weight 0."""
    groups = [podgroup("pg1", "ns1", "q1", 2, None, priority_class="p2"),
              podgroup("pg2", "ns1", "q1", 1, None, priority_class="p1")]

    def q1_allocated(ssn):
        q1 = ssn.snap.queue_index["q1"]
        got = int(ssn.queue_allocated[q1][ssn.snap.resource_index["cpu"]])
        assert got == cpu, f"q1 allocated cpu {got}m, want {cpu}m"

    return Case(f"TestProportion / pod-deallocate ({label})", PROPORTION_TIERS, ("allocate",),
                priority_classes={"p1": 1, "p2": 2},
                nodes=[node("node1", res("4", "4k", {"pods": "15"}), {"selector": "worker", "kubernetes.io/hostname": "node1"}),
                       node("node2", res("3", "3k", {"pods": "15"}), {"kubernetes.io/hostname": "node2"})],
                pods=[pod("ns1", "worker-1", "", "Running", res("3", "3k"), "pg1", {"role": "worker"},
                          {"selector": "worker"}, rules=WORKER_ANTI),
                      pod("ns1", "worker-2", "", "Running", res("5", "5k"), "pg1", {"role": "worker"}, rules=WORKER_ANTI),
                      pod("ns1", "worker-3", "", "Running", res("4", "4k"), "pg2", {"role": "worker"}, rules=WORKER_ANTI)],
                podgroups=[g for g in groups if g.name not in deleted],
                queues=[queue("q1", 0), queue("q2", 0, res("2", "2k", {"pods": "10", "nvidia.com/gpu": "4"}))],
                expect=Expect(binds=None, evicted=None), setup=q1_allocated)


CASES = [
    # Round 1: the Go test logs "init queue_allocated metrics is ok" for 12000 (3 + 5 + 4 cpu).
    deallocate_case((), 12000, "round 1: all PodGroups"),
    # Round 2: pg1 deleted, its pods no longer count: 4000.
    deallocate_case(("pg1",), 4000, "round 2: pg1 deleted"),
    # Round 3: pg2 deleted too: the Go test fails unless the metric reads 0 (or 2000).
    deallocate_case(("pg1", "pg2"), 0, "round 3: pg1 and pg2 deleted"),
]
# Round 3 agrees: nothing is left in q1 either way. (Both queues have weight 0, which Volcano's
# water-filling stops on; no round reads a deserved share, so that is not checked here.)

# --- TestEnqueueAndAllocable ----------------------------------------------------------------

R1C2G, R2C1G, R1C0G, R0C1G, R1C1G = (res("1", "2G"), res("2", "1G"), res("1", "0G"), res("0", "1G"), res("1", "1G"))
N1N2 = [node("n1", res("2", "2G", {"pods": "10"})), node("n2", res("2", "2G", {"pods": "10"}))]
ALL_ENABLE = [[plugin("proportion", "allocatable", "overused", "job_enqueued")]]
ENQUEUEABLE = [[plugin("proportion", "job_enqueued")]]
ALLOCATABLE = [[plugin("proportion", "allocatable")]]
P1 = pod("ns1", "pod1", "n1", "Running", R1C2G, "pg1")
P2 = pod("ns1", "pod2", "n2", "Running", R2C1G, "pg2")
PG1 = podgroup("pg1", "ns1", "q1", 1, None, "Running", min_resources=R1C2G)
PG2 = podgroup("pg2", "ns1", "q2", 1, None, "Running", min_resources=R2C1G)
Q1, Q2 = queue("q1", 1, res("2", "2G")), queue("q2", 1, res("3", "3G"))


def eaa(name: str, tiers, pods, groups, queues, binds) -> Case:
    return Case(f"TestEnqueueAndAllocable / {name}", tiers, ("enqueue", "allocate"), nodes=N1N2, pods=pods,
                podgroups=groups, queues=queues, expect=Expect(binds=binds))


CASES += [
    # case0: q1 holds 2G of its 2G memory; a job asking only cpu is admitted and placed.
    eaa("case0: memory exceed derserved, job only request cpu can be enqueued and allocated", ALL_ENABLE,
        [P1, P2, pod("ns1", "pod3", "", "Pending", R1C0G, "pg3")],
        [PG1, PG2, podgroup("pg3", "ns1", "q1", 1, None, "Pending", min_resources=R1C0G)], [Q1, Q2],
        {"ns1/pod3": "n1"}),
    # case1: q2 holds 2 cpu, its whole deserved cpu; a job asking only memory is admitted and placed.
    eaa("case1: cpu exceed derserved, job only request memory can be enqueued and allocated", ALL_ENABLE,
        [P1, P2, pod("ns1", "pod4", "", "Pending", R0C1G, "pg4")],
        [PG1, PG2, podgroup("pg4", "ns1", "q2", 1, None, "Pending", min_resources=R0C1G)], [Q1, Q2],
        {"ns1/pod4": "n2"}),
    # case2: 1 cpu + 1G more exceeds q1's capability (memory): not admitted.
    eaa("case2: exceed capacity, can not enqueue", ENQUEUEABLE,
        [P1, P2, pod("ns1", "pod5", "", "Pending", R1C1G, "pg5")],
        [PG1, PG2, podgroup("pg5", "ns1", "q1", 1, None, "Pending", min_resources=R1C1G)], [Q1, Q2], {}),
    # case3: without job_enqueued everything is admitted; allocatable refuses (deserved).
    eaa("case3: exceed deserved, can not allocate", ALLOCATABLE,
        [P1, P2, pod("ns1", "pod5", "", "Pending", R1C1G, "pg5")],
        [PG1, PG2, podgroup("pg5", "ns1", "q1", 1, None, "Pending", min_resources=R1C1G)], [Q1, Q2], {}),
    # case4: a Closed queue admits nothing.
    eaa("case4: queue with non-open state, can not enqueue", ENQUEUEABLE,
        [pod("ns1", "pod6", "", "Pending", R1C1G, "pg6")],
        [podgroup("pg6", "ns1", "q3", 1, None, "Pending", min_resources=R1C1G)],
        [queue("q3", 1, res("3", "3G"), state="closed")], {}),
]

# --- TestAllocate -----------------------------------------------------------------------------

CASES += [
    # TestAllocate / "case0: Pods are assigned according to the order of Queue Priority in
    # which PGs are placed": only n2 is free; q3 (priority 10) goes before q2 (priority 1).
    Case("TestAllocate / case0: Pods are assigned according to the order of Queue Priority in which PGs are placed",
         [[plugin("proportion", "queue_order")]], ("allocate", "reclaim"),
         nodes=[node("n1", res("2", "4Gi", {"pods": "10"})), node("n2", res("2", "4Gi", {"pods": "10"}))],
         pods=[pod("ns1", "p1", "n1", "Running", res("2", "4Gi"), "pg1"),
               pod("ns1", "p2", "", "Pending", res("2", "4Gi"), "pg2"),
               pod("ns1", "p3", "", "Pending", res("2", "4Gi"), "pg3")],
         podgroups=[podgroup("pg1", "ns1", "q1", 1, None, "Running"), podgroup("pg2", "ns1", "q2", 1, None),
                    podgroup("pg3", "ns1", "q3", 1, None)],
         queues=[queue("q1", priority=5, capability=res("2", "4Gi")), queue("q2", priority=1, capability=res("2", "4Gi")),
                 queue("q3", priority=10, capability=res("2", "4Gi"))],
         expect=Expect(binds={"ns1/p3": "n2"}),
         # No plugin picks reclaim victims here (Go enables only queue order).
         lint_refuses="PD304"),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_proportion_case(case, pure):
    run_and_check(case, pure)
