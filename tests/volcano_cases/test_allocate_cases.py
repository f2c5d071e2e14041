"""pkg/scheduler/actions/allocate/allocate_test.go (Volcano v1.14.1), case by case.

TestAllocate and TestFareShareAllocate are translated. TestAllocateWithNetWorkTopologies,
TestNodeLevelScoreWithNetWorkTopologies, TestHyperNodeBinpackWithNetWorkTopologies and
TestAllocateWithPartitionPolicyNetworkTopology need HyperNodes, TestAllocateWithPVC volumes and
TestAllocateWithDRA ResourceClaims; none is modelled (see /work/notes/volcano-cases.md).
"""

from __future__ import annotations

import pytest

from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

PODS10 = {"pods": "10"}

# TestAllocate's tier: gang (job order/ready/pipelined/starving), drf (preemptable, job order),
# proportion (queue order, reclaimable, allocatable: not overused), predicates, nodeorder.
ALLOCATE_TIERS = [[
    plugin("gang", "job_order", "job_ready", "job_pipelined", "job_starving"),
    plugin("drf", "preemptable", "job_order"),
    plugin("proportion", "queue_order", "reclaimable", "allocatable"),
    plugin("predicates", "predicate"),
    plugin("nodeorder", "node_order"),
]]

MASTER, WORKER = {"volcano.sh/task-spec": "master"}, {"volcano.sh/task-spec": "worker"}

CASES = [
    # TestAllocate / "prepredicate failed: node selector does not match": p1 (selector master)
    # fits no node; p2 still binds. The roles are pod *labels* in the Go case (BuildPod's labels
    # argument), which Volcano reads as well as annotations.
    Case("TestAllocate / prepredicate failed: node selector does not match", ALLOCATE_TIERS, ("allocate",),
         nodes=[node("n1", res("2", "4Gi", PODS10), {"nodeRole": "worker"})],
         pods=[pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1", MASTER, {"nodeRole": "master"}),
               pod("c1", "p2", "", "Pending", res("1", "1G"), "pg1", WORKER, {"nodeRole": "worker"})],
         podgroups=[podgroup("pg1", "c1", "c1", 1)],
         queues=[queue("c1", 1)],
         expect=Expect(binds={"c1/p2": "n1"})),
    # TestAllocate / "prepredicate failed and tasks are not used up, continue on until min member
    # meet": minMember 2, one master and one worker each; a master fits n1, a worker n2.
    Case("TestAllocate / prepredicate failed and tasks are not used up, continue on until min member meet",
         ALLOCATE_TIERS, ("allocate",),
         nodes=[node("n1", res("1", "2Gi", PODS10), {"nodeRole": "master"}),
                node("n2", res("1", "2Gi", PODS10), {"nodeRole": "worker"})],
         pods=[pod("c1", "p0", "", "Pending", res("1", "1G"), "pg1", MASTER, {"nodeRole": "master"}),
               pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1", MASTER, {"nodeRole": "master"}),
               pod("c1", "p2", "", "Pending", res("1", "1G"), "pg1", WORKER, {"nodeRole": "worker"}),
               pod("c1", "p3", "", "Pending", res("1", "1G"), "pg1", WORKER, {"nodeRole": "worker"})],
         podgroups=[podgroup("pg1", "c1", "c1", 2, {"master": 1, "worker": 1})],
         queues=[queue("c1", 1)],
         expect=Expect(binds={"c1/p0": "n1", "c1/p2": "n2"})),
    # TestAllocate / "master's min member can not be allocated, break from allocating": the
    # master role needs 2 but only one master fits: nothing binds.
    Case("TestAllocate / master's min member can not be allocated, break from allocating", ALLOCATE_TIERS,
         ("allocate",),
         nodes=[node("n1", res("1", "2Gi", PODS10), {"nodeRole": "master"}),
                node("n2", res("2", "2Gi", PODS10), {"nodeRole": "worker"})],
         pods=[pod("c1", "p0", "", "Pending", res("1", "1G"), "pg1", MASTER, {"nodeRole": "master"}),
               pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1", MASTER, {"nodeRole": "master"}),
               pod("c1", "p2", "", "Pending", res("1", "1G"), "pg1", WORKER, {"nodeRole": "worker"}),
               pod("c1", "p3", "", "Pending", res("1", "1G"), "pg1", WORKER, {"nodeRole": "worker"})],
         podgroups=[podgroup("pg1", "c1", "c1", 2, {"master": 2, "worker": 0})],
         queues=[queue("c1", 1)],
         expect=Expect(binds={})),
    # TestAllocate / "one Job with two Pods on one node" (minMember 0).
    Case("TestAllocate / one Job with two Pods on one node", ALLOCATE_TIERS, ("allocate",),
         nodes=[node("n1", res("2", "4Gi", PODS10))],
         pods=[pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1"),
               pod("c1", "p2", "", "Pending", res("1", "1G"), "pg1")],
         podgroups=[podgroup("pg1", "c1", "c1", 0)],
         queues=[queue("c1", 1)],
         expect=Expect(binds={"c1/p1": "n1", "c1/p2": "n1"})),
    # TestAllocate / "two Jobs on one node": two queues of equal weight share a 2-cpu node, one
    # pod each (proportion's deserved share is 1 cpu per queue).
    Case("TestAllocate / two Jobs on one node", ALLOCATE_TIERS, ("allocate",),
         nodes=[node("n1", res("2", "4G", PODS10))],
         pods=[pod("c1", "pg1-p-1", "", "Pending", res("1", "1G"), "pg1"),
               pod("c1", "pg1-p-2", "", "Pending", res("1", "1G"), "pg1"),
               pod("c2", "pg2-p-1", "", "Pending", res("1", "1G"), "pg2"),
               pod("c2", "pg2-p-2", "", "Pending", res("1", "1G"), "pg2")],
         podgroups=[podgroup("pg1", "c1", "c1", 0), podgroup("pg2", "c2", "c2", 0)],
         queues=[queue("c1", 1), queue("c2", 1)],
         expect=Expect(binds={"c2/pg2-p-1": "n1", "c1/pg1-p-1": "n1"})),
    # TestAllocate / "high priority queue should not block others": q c1's 3-cpu pod fits no
    # 2-cpu node; q c2's 1-cpu pod binds.
    Case("TestAllocate / high priority queue should not block others", ALLOCATE_TIERS, ("allocate",),
         nodes=[node("n1", res("2", "4G", PODS10))],
         pods=[pod("c1", "p1", "", "Pending", res("3", "1G"), "pg1"),
               pod("c1", "p2", "", "Pending", res("1", "1G"), "pg2")],
         podgroups=[podgroup("pg1", "c1", "c1", 0), podgroup("pg2", "c1", "c2", 0)],
         queues=[queue("c1", 1), queue("c2", 1)],
         expect=Expect(binds={"c1/p2": "n1"})),
]

# TestFareShareAllocate's tier: drf (preemptable, job order), proportion (queue order,
# reclaimable; allocatable explicitly false), predicates, nodeorder; no gang.
FAIR_TIERS = [[
    plugin("drf", "preemptable", "job_order"),
    plugin("proportion", "queue_order", "reclaimable"),
    plugin("predicates", "predicate"),
    plugin("nodeorder", "node_order"),
]]
NODE1 = [node("node-1", res("5", "5G", PODS10))]

CASES += [
    # TestFareShareAllocate / "queue with low DRF share value has high priority, should allocate
    # first": q-1 already runs 1 cpu, so q-2 (share 0) goes first; then q-1's 2-cpu pod no
    # longer fits (5 - 1 - 3 = 1 cpu).
    Case("TestFareShareAllocate / queue with low DRF share value has high priority, should allocate first",
         FAIR_TIERS, ("allocate",), nodes=NODE1,
         pods=[pod("ns-1", "pod-small-1", "node-1", "Running", res("1", "1G"), "pg-small-1"),
               pod("ns-1", "pod-large-1", "", "Pending", res("2", "2G"), "pg-large-1"),
               pod("ns-1", "pod-large-2", "", "Pending", res("3", "2G"), "pg-large-2")],
         podgroups=[podgroup("pg-small-1", "ns-1", "q-1", 0, phase="Running"),
                    podgroup("pg-large-1", "ns-1", "q-1", 0), podgroup("pg-large-2", "ns-1", "q-2", 0)],
         queues=[queue("q-1", 1), queue("q-2", 1)],
         expect=Expect(binds={"ns-1/pod-large-2": "node-1"})),
    # TestFareShareAllocate / "queue's DRF share value will be updated and its priority will
    # change before it is put back into the priority queue": order q-2/large-2, q-1/large-1,
    # then q-2/small-2 no longer fits.
    Case("TestFareShareAllocate / queue's DRF share value will be updated and its priority will change",
         FAIR_TIERS, ("allocate",), nodes=NODE1,
         pods=[pod("ns-1", "pod-small-1", "node-1", "Running", res("1", "1G"), "pg-small-1"),
               pod("ns-1", "pod-large-1", "", "Pending", res("2", "2G"), "pg-large-1"),
               pod("ns-1", "pod-large-2", "", "Pending", res("2", "2G"), "pg-large-2"),
               pod("ns-1", "pod-small-2", "", "Pending", res("1", "1G"), "pg-small-2")],
         podgroups=[podgroup("pg-small-1", "ns-1", "q-1", 0, phase="Running"),
                    podgroup("pg-large-1", "ns-1", "q-1", 0), podgroup("pg-small-2", "ns-1", "q-2", 0),
                    podgroup("pg-large-2", "ns-1", "q-2", 0)],
         queues=[queue("q-1", 1), queue("q-2", 1)],
         expect=Expect(binds={"ns-1/pod-large-1": "node-1", "ns-1/pod-large-2": "node-1"})),
    # TestFareShareAllocate / "queue's one jobs has no pending tasks, should be put back to
    # queues for next job".
    Case("TestFareShareAllocate / queue's one jobs has no pending tasks, should be put back to queues",
         FAIR_TIERS, ("allocate",), nodes=NODE1,
         pods=[pod("ns-1", "pod-1", "node-1", "Running", res("1", "1G"), "pg-1"),
               pod("ns-1", "pod-2", "", "Pending", res("2", "2G"), "pg-2")],
         podgroups=[podgroup("pg-1", "ns-1", "q-1", 0, phase="Running"), podgroup("pg-2", "ns-1", "q-1", 0)],
         queues=[queue("q-1", 1)],
         expect=Expect(binds={"ns-1/pod-2": "node-1"})),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_allocate_case(case, pure):
    run_and_check(case, pure)
