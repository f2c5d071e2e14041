"""pkg/scheduler/plugins/capacity/capacity_test.go (Volcano v1.14.1), case by case:
Test_capacityPlugin_OnSessionOpenWithoutHierarchy, TestEnqueueAndAllocatable,
Test_capacityPlugin_OnSessionOpenWithHierarchy and Test_updateQueueAttrShare.

util.BuildQueueWithResourcesQuantity(name, deserved, capability) gives weight 1; the hierarchy
cases' buildQueueWithParents adds spec.parent (a Queue object named root is the root's own).
The actions run in the Go test's order (the hierarchy test runs enqueue, reclaim, allocate)."""

from __future__ import annotations

import pytest

from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

PODS10 = {"pods": "10"}
NO = {"volcano.sh/preemptable": "false"}


def dq(name: str, deserved=None, capability=None, parent: str | None = None, **kw):
    """BuildQueueWithResourcesQuantity / buildQueueWithParents."""
    return queue(name, 1, capability, deserved=deserved, parent=parent, **kw)


# --- Test_capacityPlugin_OnSessionOpenWithoutHierarchy ---------------------------------------

FLAT = [[plugin("capacity", "allocatable", "preemptive", "reclaimable", "queue_order"),
         plugin("predicates", "predicate"), plugin("gang", "job_starving")]]
N1 = node("n1", res("2", "4Gi", PODS10), {"selector": "worker"})
N2 = node("n2", res("2", "4Gi", PODS10))


def flat(name: str, **kw) -> Case:
    return Case(f"Test_capacityPlugin_OnSessionOpenWithoutHierarchy / {name}", FLAT, ("allocate", "reclaim"), **kw)


A100 = {"nvidia.com/A100": "10"}
GPU = "nvidia.com/gpu"
CASES = [
    # case0: q1 (capability 2 cpu) runs 1 cpu; p2 (selector worker) binds on n1.
    flat("case0: Pod allocatable when queue has not exceed capability", nodes=[N1, N2],
         pods=[pod("ns1", "p1", "n1", "Running", res("1", "1Gi"), "pg1"),
               pod("ns1", "p2", "", "Pending", res("1", "1Gi"), "pg2", {}, {"selector": "worker"})],
         podgroups=[podgroup("pg1", "ns1", "q1", 1, None, "Running"), podgroup("pg2", "ns1", "q1", 1)],
         queues=[dq("q1", None, res("2", "2Gi"))],
         expect=Expect(binds={"ns1/p2": "n1"})),
    # case1: capability 1.5 cpu; 1 + 1 would exceed it.
    flat("case1: Pod not allocatable when queue exceed queue capability", nodes=[N1, N2],
         pods=[pod("ns1", "p3", "n1", "Running", res("1", "1Gi"), "pg3"),
               pod("ns1", "p4", "", "Pending", res("1", "1Gi"), "pg4")],
         podgroups=[podgroup("pg3", "ns1", "q2", 1, None, "Running"), podgroup("pg4", "ns1", "q2", 1)],
         queues=[dq("q2", None, res("1.5", "1.5Gi"))],
         expect=Expect(binds={})),
    # case2: q3 holds both nodes (deserved one); q4 (deserved one node) reclaims p6 on n2
    # (p5 is labelled not preemptable).
    flat("case2: Can reclaim from other queues when allocated < deserved", nodes=[N1, N2],
         pods=[pod("ns1", "p5", "n1", "Running", res("2", "4Gi"), "pg5", NO),
               pod("ns1", "p6", "n2", "Running", res("2", "4Gi"), "pg5"),
               pod("ns1", "p7", "", "Pending", res("2", "4Gi"), "pg6")],
         podgroups=[podgroup("pg5", "ns1", "q3", 1, None, "Running"), podgroup("pg6", "ns1", "q4", 1)],
         queues=[dq("q3", res("2", "4Gi")), dq("q4", res("2", "4Gi"))],
         expect=Expect(evicted=["ns1/p6"], pipelined={"ns1/pg6": ["n2"]})),
    # case3: cpu and memory are overused by q6, A100 is not; the preemptor asks A100 only:
    # q5 reclaims p9 (p8 labelled not preemptable).
    flat("case3: CPU & Memory are overused, scalar resource is not overused, but candidate pod has not request CPU & Memory, reclaim should happen",
         nodes=[node("n3", res("2", "4Gi", {**A100, **PODS10}), {"selector": "worker"}),
                node("n4", res("2", "4Gi", {**A100, **PODS10}))],
         pods=[pod("ns1", "p8", "n3", "Running", res("0", "0Gi", A100), "pg7", NO),
               pod("ns1", "p9", "n4", "Running", res("0", "0Gi", A100), "pg7"),
               pod("ns1", "p10", "n3", "Running", res("2", "4Gi"), "pg8"),
               pod("ns1", "p11", "n4", "Running", res("2", "4Gi"), "pg8"),
               pod("ns1", "p12", "", "Pending", res("0", "0Gi", A100), "pg9")],
         podgroups=[podgroup("pg7", "ns1", "q5", 1, None, "Running"), podgroup("pg8", "ns1", "q6", 1, None, "Running"),
                    podgroup("pg9", "ns1", "q6", 1)],
         queues=[dq("q5", res("2", "4Gi", A100)), dq("q6", res("2", "4Gi", A100))],
         expect=Expect(evicted=["ns1/p9"], pipelined={"ns1/pg9": ["n4"]})),
    # case4: only n6 is free; q9 (priority 10) goes before q8 (priority 1).
    flat("case4: Pods are assigned according to the order of Queue Priority in which PGs are placed",
         nodes=[node("n5", res("2", "4Gi", PODS10)), node("n6", res("2", "4Gi", PODS10))],
         pods=[pod("ns1", "p13", "n5", "Running", res("2", "4Gi"), "pg10"),
               pod("ns1", "p14", "", "Pending", res("2", "4Gi"), "pg11"),
               pod("ns1", "p15", "", "Pending", res("2", "4Gi"), "pg12")],
         podgroups=[podgroup("pg10", "ns1", "q7", 1, None, "Running"), podgroup("pg11", "ns1", "q8", 1),
                    podgroup("pg12", "ns1", "q9", 1)],
         queues=[dq("q7", None, res("2", "4Gi"), priority=5), dq("q8", None, res("2", "4Gi"), priority=1),
                 dq("q9", None, res("2", "4Gi"), priority=10)],
         expect=Expect(binds={"ns1/p15": "n6"})),
    # case5: q10 (deserved 2 cpu / 2Gi) holds 1 cpu / 3Gi; p17 (1 cpu / 1Gi) is within deserved
    # on cpu (1 + 1 <= 2) though not on memory: Volcano reclaims p18 from q11 (deserved 0).
    flat("case5: Can reclaim from other queues when allocated + req <= deserved on one dimension", nodes=[N1],
         pods=[pod("ns1", "p16", "n1", "Running", res("1", "3Gi"), "pg16"),
               pod("ns1", "p17", "", "Pending", res("1", "1Gi"), "pg17"),
               pod("ns1", "p18", "n1", "Running", res("1", "1Gi"), "pg18")],
         podgroups=[podgroup("pg16", "ns1", "q10", 1, None, "Running"), podgroup("pg17", "ns1", "q10", 1),
                    podgroup("pg18", "ns1", "q11", 1, None, "Running")],
         queues=[dq("q10", res("2", "2Gi"), res("4", "4Gi")), dq("q11", res("0", "0Gi"), res("2", "2Gi"))],
         expect=Expect(evicted=["ns1/p18"], pipelined={"ns1/pg17": ["n1"]})),
    # case6: p20 (1 cpu / 2Gi) exceeds q12's deserved on both dimensions: no reclaim.
    flat("case6: Can not reclaim from other queues when allocated + req > deserved", nodes=[N1],
         pods=[pod("ns1", "p19", "n1", "Running", res("1", "1Gi"), "pg19"),
               pod("ns1", "p20", "", "Pending", res("1", "2Gi"), "pg20"),
               pod("ns1", "p21", "n1", "Running", res("1", "1Gi"), "pg21")],
         podgroups=[podgroup("pg19", "ns1", "q12", 1, None, "Running"), podgroup("pg20", "ns1", "q12", 1),
                    podgroup("pg21", "ns1", "q13", 1, None, "Running")],
         queues=[dq("q12", res("1", "2Gi"), res("4", "4Gi")), dq("q13", res("0", "0Gi"), res("2", "2Gi"))],
         expect=Expect()),
    # case7 (volcano#4918 bug 2): p22's queue14 is within its deserved gpu (it uses none), so
    # p22 may not be reclaimed even though it holds cpu; without it p25 cannot fit: nothing.
    flat("case7: allocated does not contain scalar dimension (GPU), deserved does; should not reclaim",
         nodes=[node("n7", res("4", "8Gi", {GPU: "4", **PODS10}))],
         pods=[pod("ns1", "p22", "n7", "Running", res("2", "4Gi"), "pg22"),
               pod("ns1", "p23", "n7", "Running", res("0", "0Gi", {GPU: "1"}), "pg23"),
               pod("ns1", "p24", "n7", "Running", res("2", "1Gi", {GPU: "1"}), "pg24"),
               pod("ns1", "p25", "", "Pending", res("2", "3Gi", {GPU: "1"}), "pg25")],
         podgroups=[podgroup("pg22", "ns1", "queue14", 1, None, "Running"),
                    podgroup("pg23", "ns1", "queue15", 1, None, "Running"),
                    podgroup("pg24", "ns1", "queue16", 1, None, "Running"), podgroup("pg25", "ns1", "queue16", 1)],
         queues=[dq("queue14", res("2", "4Gi", {GPU: "2"})), dq("queue15"), dq("queue16", res("2", "4Gi", {GPU: "2"}))],
         expect=Expect()),
    # case8 (volcano#4918 bug 1): p30 wants 1 cpu and the only gpu: only p28 (gpu) goes.
    flat("case8: reclaimer dimensions are considered properly while evicting reclaimees",
         nodes=[node("n8", res("4", "8Gi", {GPU: "1", **PODS10}))],
         pods=[pod("ns1", "p26", "n8", "Running", res("0", "4Gi"), "pg26"),
               pod("ns1", "p27", "n8", "Running", res("1", "0Gi"), "pg27"),
               pod("ns1", "p28", "n8", "Running", res("0", "0Gi", {GPU: "1"}), "pg28"),
               pod("ns1", "p29", "n8", "Running", res("2", "4Gi"), "pg29"),
               pod("ns1", "p30", "", "Pending", res("1", "0Gi", {GPU: "1"}), "pg30")],
         podgroups=[podgroup(f"pg{i}", "ns1", "queue17", 1, None, "Running") for i in (26, 27, 28)]
         + [podgroup("pg29", "ns1", "queue18", 1, None, "Running"), podgroup("pg30", "ns1", "queue18", 1)],
         queues=[dq("queue17", res("2", "2Gi")), dq("queue18", res("2", "4Gi", {GPU: "1"}))],
         expect=Expect(evicted=["ns1/p28"], pipelined={"ns1/pg30": ["n8"]})),
    # case9 (volcano#4918 bug 3): queue19 deserves only a gpu and uses one: within deserved, so
    # p31 is not reclaimed for p32's cpu/memory, though p31 holds all the cpu.
    flat("case9: reclaimee has intersecting scalar dimensions with deserved shouldn't be reclaimed on cpu/memory",
         nodes=[node("n8", res("4", "8Gi", {GPU: "1", **PODS10}))],
         pods=[pod("ns1", "p31", "n8", "Running", res("4", "4Gi", {GPU: "1"}), "pg31"),
               pod("ns1", "p32", "", "Pending", res("1", "1Gi"), "pg32")],
         podgroups=[podgroup("pg31", "ns1", "queue19", 1, None, "Running"), podgroup("pg32", "ns1", "queue20", 1)],
         queues=[dq("queue19", res("", "", {GPU: "1"})), dq("queue20", res("2", "2Gi"))],
         expect=Expect()),
]

# --- TestEnqueueAndAllocatable ---------------------------------------------------------------

EA = [[plugin("capacity", "allocatable", "preemptive", "overused", "job_enqueued")]]
EA_NODES = [node("n1", res("3", "3G", PODS10)), node("n2", res("3", "3G", PODS10))]
R1C3G, R3C1G, R1C0G, R0C1G, R1C1G = (res("1", "3G"), res("3", "1G"), res("1", "0G"), res("0", "1G"), res("1", "1G"))
EA_RUNNING = [pod("ns1", "pod1", "n1", "Running", R1C3G, "pg1"), pod("ns1", "pod2", "n2", "Running", R3C1G, "pg2")]
EA_GROUPS = [podgroup("pg1", "ns1", "q1", 1, None, "Running", min_resources=R1C3G),
             podgroup("pg2", "ns1", "q2", 1, None, "Running", min_resources=R3C1G)]
EA_QUEUES = [dq("q1", res("2", "2G"), res("2", "2G")), dq("q2", res("2", "2G"), res("3", "3G"))]


def ea(name: str, pods, groups, queues, binds) -> Case:
    return Case(f"TestEnqueueAndAllocatable / {name}", EA, ("enqueue", "allocate"), nodes=EA_NODES,
                pods=pods, podgroups=groups, queues=queues, expect=Expect(binds=binds))


CASES += [
    # case0: q1 is past its memory (3G of 2G) but a job asking only cpu is admitted and placed.
    ea("case0: memory exceed derserved, job only request cpu can be enqueued and allocated",
       EA_RUNNING + [pod("ns1", "pod3", "", "Pending", R1C0G, "pg3")],
       EA_GROUPS + [podgroup("pg3", "ns1", "q1", 1, None, "Pending", min_resources=R1C0G)], EA_QUEUES,
       {"ns1/pod3": "n1"}),
    # case1: q2 is past its cpu (3 of 3 capability); a job asking only memory is placed on n2.
    ea("case1: cpu exceed derserved, job only request memory can be enqueued and allocated",
       EA_RUNNING + [pod("ns1", "pod4", "", "Pending", R0C1G, "pg4")],
       EA_GROUPS + [podgroup("pg4", "ns1", "q2", 1, None, "Pending", min_resources=R0C1G)], EA_QUEUES,
       {"ns1/pod4": "n2"}),
    # case2: 1 cpu + 1G more exceeds q1's capability: not admitted.
    ea("case2: exceed capacity, can not enqueue",
       EA_RUNNING + [pod("ns1", "pod5", "", "Pending", R1C1G, "pg5")],
       EA_GROUPS + [podgroup("pg5", "ns1", "q1", 1, None, "Pending", min_resources=R1C1G)], EA_QUEUES, {}),
    # case4: a Closed queue admits nothing.
    ea("case4: queue with non-open state, can not enqueue",
       [pod("ns1", "pod6", "", "Pending", R1C1G, "pg6")],
       [podgroup("pg6", "ns1", "q3", 1, None, "Pending", min_resources=R1C1G)],
       [queue("q3", 1, res("3", "3G"), state="closed")], {}),
]

# --- Test_capacityPlugin_OnSessionOpenWithHierarchy ------------------------------------------

HIER = [[plugin("capacity", "allocatable", "preemptive", "reclaimable", "queue_order", "hierarchy", "job_enqueued"),
         plugin("predicates", "predicate"), plugin("gang", "job_starving")]]
HN1 = node("n1", res("8", "8Gi", {"pods": "11"}))
ROOT = dq("root")
Q1, Q2 = dq("q1", None, res("4", "4Gi"), "root"), dq("q2", None, res("4", "4Gi"), "root")
Q11, Q12 = dq("q11", None, res("1", "1Gi"), "q1"), dq("q12", None, res("3", "3Gi"), "q1")
Q3 = dq("q3", res("4", "4Gi", {"pods": "10"}), res("4", "4Gi", {"pods": "10"}), "root")
Q4 = dq("q4", res("2", "2Gi", {"pods": "1"}), res("4", "4Gi", {"pods": "4"}), "root")
Q31 = dq("q31", res("2", "2Gi", {"pods": "2"}), res("4", "4Gi", {"pods": "4"}), "q3")
Q32 = dq("q32", res("2", "2Gi", {"pods": "2"}), res("4", "4Gi", {"pods": "4"}), "q3")
Q33 = dq("q33", res("0", "0Gi", {"pods": "2"}), res("4", "4Gi", {"pods": "4"}), "q3")
P6 = pod("ns1", "p6", "n1", "Running", res("2", "2Gi"), "pg5", NO)
PG5 = podgroup("pg5", "ns1", "q31", 1, None, "Running")
PG7 = podgroup("pg7", "ns1", "q32", 1, None, "Running")


def hier(name: str, **kw) -> Case:
    return Case(f"Test_capacityPlugin_OnSessionOpenWithHierarchy / {name}", HIER, ("enqueue", "reclaim", "allocate"),
                **kw)


CASES += [
    # case0: q11 is a leaf: p1 binds.
    hier("case0: Pod allocatable when queue is leaf queue", nodes=[HN1],
         pods=[pod("ns1", "p1", "", "Pending", res("1", "1Gi"), "pg1")], podgroups=[podgroup("pg1", "ns1", "q11", 1)],
         queues=[ROOT, Q1, Q2, Q11, Q12], expect=Expect(binds={"ns1/p1": "n1"})),
    # case1: q1 has children: a job there is not scheduled.
    hier("case1: Pod not allocatable when queue is not leaf queue", nodes=[HN1],
         pods=[pod("ns1", "p2", "", "Pending", res("1", "1Gi"), "pg2")],
         podgroups=[podgroup("pg2", "ns1", "q1", 1, None, "Pending")],
         queues=[ROOT, Q1, Q2, Q11, Q12], expect=Expect(binds={})),
    # case2: a gang of two 2-cpu pods in q31 (capability 4) binds whole.
    # (reclaim runs before allocate in this Go test; with no victims anywhere it does nothing.)
    hier("case2: Pod allocatable when queue has not exceed capability", nodes=[HN1],
         pods=[pod("ns1", "p3", "", "Pending", res("2", "2Gi"), "pg3"),
               pod("ns1", "p4", "", "Pending", res("2", "2Gi"), "pg3")],
         podgroups=[podgroup("pg3", "ns1", "q31", 2)],
         queues=[ROOT, Q3, Q4, Q31, Q32], expect=Expect(binds={"ns1/p3": "n1", "ns1/p4": "n1"})),
    # case3: the node is full; q32 is below its deserved and reclaims p7 from q31 (above its
    # deserved 2 cpu; p6 is labelled not preemptable), not p5 of q4.
    hier("case3: Can reclaim from other queues when allocated < deserved", nodes=[HN1],
         pods=[pod("ns1", "p5", "n1", "Running", res("4", "4Gi"), "pg4"), P6,
               pod("ns1", "p7", "n1", "Running", res("2", "2Gi"), "pg5"),
               pod("ns1", "p8", "", "Pending", res("2", "2Gi"), "pg6")],
         podgroups=[podgroup("pg4", "ns1", "q4", 1, None, "Running"), PG5, podgroup("pg6", "ns1", "q32", 1)],
         queues=[ROOT, Q3, Q31, Q32, Q4],
         expect=Expect(evicted=["ns1/p7"], pipelined={"ns1/pg6": ["n1"]})),
    # case4: q3's real capability (4 cpu) is used up by q31 and q32: q33's p10 may not go.
    hier("case4: Pod is not allocatable when ancestor queue's real capability not enough", nodes=[HN1],
         pods=[P6, pod("ns1", "p9", "n1", "Running", res("2", "2Gi"), "pg7"),
               pod("ns1", "p10", "", "Pending", res("3", "3Gi"), "pg8")],
         podgroups=[PG5, PG7, podgroup("pg8", "ns1", "q33", 1)],
         queues=[ROOT, Q3, Q31, Q32, Q33], expect=Expect(binds={})),
    # case5: q51's capability names no cpu; it inherits q5's (none: unlimited): p11 binds.
    hier("case5: If the capability cpu or memory is not specified, the value should be inherited from parent queue",
         nodes=[HN1], pods=[pod("ns1", "p11", "", "Pending", res("1", ""), "pg9")],
         podgroups=[podgroup("pg9", "ns1", "q51", 1, None, "Running")],
         queues=[ROOT, dq("q5", None, res("", "4Gi"), "root"), dq("q51", None, res("", "2Gi"), "q5")],
         expect=Expect(binds={"ns1/p11": "n1"})),
]
Q6 = dq("q6", None, res("2", "4Gi"), "root")
Q61, Q62 = dq("q61", None, None, "q6"), dq("q62", None, None, "q6")
PG10 = podgroup("pg10", "ns1", "q61", 1, None, "Pending", min_resources=res("2", "4Gi"))
PG11 = podgroup("pg11", "ns1", "q62", 1, None, "Pending", min_resources=res("2", "4Gi"))
CASES += [
    # case6: pg10 and pg11 each want all of q6's capability: the first admitted (Inqueue), the
    # second not. Neither has pods in the Go case.
    hier("case6: podgroup can't be enqueued when any ancestor queue's capability is not enough", nodes=[HN1],
         podgroups=[PG10, PG11], queues=[ROOT, Q6, Q61, Q62],
         expect=Expect(phases={"ns1/pg10": "Inqueue", "ns1/pg11": "Pending"})),
    # case6, variant: one pending pod each (requesting its minResources), so the jobs exist
    # for us; the admission arithmetic is the case's. Enqueue alone, so pg10's admission is
    # not followed by a binding that would count twice.
    Case("Test_capacityPlugin_OnSessionOpenWithHierarchy / case6 (variant: one pending pod each)", HIER, ("enqueue",),
         nodes=[HN1], podgroups=[PG10, PG11], queues=[ROOT, Q6, Q61, Q62],
         pods=[pod("ns1", "p10", "", "Pending", res("2", "4Gi"), "pg10"),
               pod("ns1", "p11", "", "Pending", res("2", "4Gi"), "pg11")],
         expect=Expect(phases={"ns1/pg10": "Inqueue", "ns1/pg11": "Pending"})),
    # case7: q71 and q72 guarantee more than q7 may hold; the cycle must just run.
    hier("case7: the sum of sub queue 71 and 72's guarantee exceeds the capacity of queue7, but should not panic",
         nodes=[HN1],
         queues=[ROOT, dq("q7", None, res("6", "4Gi"), "root"),
                 dq("q71", None, res("6", "4Gi"), "q7", guarantee=res("4", "3Gi")),
                 dq("q72", None, res("6", "4Gi"), "q7", guarantee=res("4", "3Gi"))]),
    # case8: a gpu named in the deserved shares of q8/q81: p12 (1 gpu) binds.
    hier("case8: When the queue's deserved value has a scalar resource set, the check can pass",
         nodes=[node("n-gpu", res("8", "8Gi", {GPU: "8", **PODS10}))],
         pods=[pod("ns1", "p12", "", "Pending", res("2", "2Gi", {GPU: "1"}), "pg12")],
         podgroups=[podgroup("pg12", "ns1", "q81", 1)],
         queues=[ROOT, dq("q8", res("4", "4Gi", {GPU: "8"}), None, "root"),
                 dq("q81", res("2", "2Gi", {GPU: "4"}), None, "q8"), dq("q82", res("2", "2Gi", {GPU: "4"}), None, "q8")],
         expect=Expect(binds={"ns1/p12": "n-gpu"})),
    # case9: deserved names hugepages-1Gi: 0 (the node has 0 too): p13 still binds.
    hier("case9: When some scalar resources are 0 in deserved, the check can still pass",
         nodes=[node("n2", res("8", "8Gi", {GPU: "8", **PODS10, "hugepages-1Gi": "0"}))],
         pods=[pod("ns1", "p13", "", "Pending", res("2", "2Gi", {GPU: "1"}), "pg13")],
         podgroups=[podgroup("pg13", "ns1", "q91", 1)],
         queues=[ROOT, dq("q9", res("2", "2Gi", {GPU: "8", "hugepages-1Gi": "0"}), None, "root"),
                 dq("q91", res("2", "2Gi", {GPU: "4", "hugepages-1Gi": "0"}), None, "q9")],
         expect=Expect(binds={"ns1/p13": "n2"})),
    # case10: root's capability (16 cpu) is above the cluster's 8; the cycle must just run.
    hier("case10: root queue's capability > cluster total resource, but should not panic", nodes=[HN1],
         queues=[dq("root", None, res("16", "16Gi")), dq("q10", None, res("10", "4Gi"), "root")]),
    # case11: the children name no gpu capability and inherit the parent's (none): both bind.
    hier("case11: If the capability scalar resources is not specified, the value should be inherited from parent queue",
         nodes=[node("n2", res("8", "8Gi", {GPU: "8", **PODS10, "hugepages-1Gi": "0"}))],
         pods=[pod("ns1", "p14", "", "Pending", res("1", "1Gi", {GPU: "4"}), "pg14"),
               pod("ns1", "p15", "", "Pending", res("1", "1Gi", {GPU: "4"}), "pg15")],
         podgroups=[podgroup("pg14", "ns1", "case11_queue11", 1), podgroup("pg15", "ns1", "case11_queue12", 1)],
         queues=[ROOT, dq("case11_queue1", None, None, "root"),
                 dq("case11_queue11", None, res("4", "4Gi", {GPU: "4"}), "case11_queue1"),
                 dq("case11_queue12", None, res("4", "4Gi", {GPU: "4"}), "case11_queue1")],
         expect=Expect(binds={"ns1/p14": "n2", "ns1/p15": "n2"})),
    # case12: case12_queue11 deserves 2 a100 and uses none; case12_queue12 (no deserved) holds
    # 4 of the node's 5: it reclaims p17 (p18 labelled not preemptable), deciding on the a100
    # dimension alone (its deserved names no cpu or memory).
    hier("case12: Can reclaim from other queues when allocated <= deserved on a single scalar dimension",
         nodes=[node("n3", res("16", "16Gi", {"nvidia.com/a100": "5", "rdma/hca": "1001", "pods": "11"}))],
         pods=[pod("ns1", "p16", "", "Pending", res("1", "1Gi", {"nvidia.com/a100": "2", "rdma/hca": "1"}), "pg16"),
               pod("ns1", "p17", "n3", "Running", res("1", "1Gi", {"nvidia.com/a100": "2", "rdma/hca": "1"}), "pg17"),
               pod("ns1", "p18", "n3", "Running", res("1", "1Gi", {"nvidia.com/a100": "2", "rdma/hca": "1"}), "pg18", NO)],
         podgroups=[podgroup("pg16", "ns1", "case12_queue11", 1),
                    podgroup("pg17", "ns1", "case12_queue12", 1, None, "Running"),
                    podgroup("pg18", "ns1", "case12_queue12", 1, None, "Running")],
         queues=[dq("root", res("16", "16Gi", {"nvidia.com/a100": "4", "rdma": "1000"})),
                 dq("case12_queue1", res("", "", {"nvidia.com/a100": "2"}), None, "root"),
                 dq("case12_queue11", res("", "", {"nvidia.com/a100": "2"}), None, "case12_queue1"),
                 dq("case12_queue12", None, None, "case12_queue1")],
         expect=Expect(evicted=["ns1/p17"], pipelined={"ns1/pg16": ["n3"]})),
]

# --- Test_updateQueueAttrShare ---------------------------------------------------------------
# The Go test sets a queue attribute's deserved, allocated and request and calls
# updateQueueAttrShare. Ours: one queue "test-queue" whose allocated comes from a Running pod and
# whose request from a Pending pod, the capacity plugin's queue-order share read from the session.

SHARE = [[plugin("capacity", "queue_order")]]


def share_case(name: str, deserved, allocated, request, want: float, xfail=None) -> Case:
    pods = []
    if any(allocated.values()):
        pods.append(pod("ns1", "running", "big", "Running", allocated, "pg-running"))
    if any(request.values()):
        pods.append(pod("ns1", "waiting", "", "Pending", request, "pg-waiting"))
    groups = [podgroup(g, "ns1", "test-queue", 1, None, "Running" if g == "pg-running" else "Inqueue")
              for g in ("pg-running", "pg-waiting") if any(p.group == g for p in pods)]

    def share_is(ssn, decisions):
        q = ssn.snap.queue_index["test-queue"]
        got = ssn.flat("queue_order")[0](q)[1]      # the queue order plugin's key: (-priority, share)
        assert got == pytest.approx(want), f"share {got}, want {want}"

    return Case(f"Test_updateQueueAttrShare / {name}", SHARE, (), nodes=[node("big", res("100", "100Gi", {"pods": "100"}))],
                pods=pods, podgroups=groups, queues=[dq("test-queue", deserved)],
                expect=Expect(binds=None, evicted=None), probe=share_is, also_listed=("reclaim",),
                lint_refuses="PD304", xfail=xfail)


E = {}
CASES += [
    share_case("best-effort queue with allocated resources", None, res("1", "1Gi"), E, 1.0),
    share_case("best-effort queue with pending requests only (no allocated)", None, E, res("1", "1Gi"), 1.0),
    share_case("best-effort queue with both allocated and request", None, res("1", "1Gi"), res("0.5", "0.5Gi"), 1.0),
    share_case("best-effort queue completely idle", None, E, E, 1.0),
    share_case("queue with deserved but no allocated", res("2", "2Gi"), E, E, 0.0),
    share_case("queue with deserved, allocated < deserved (CPU dimension)", res("2", "2Gi"), res("1", "1Gi"), E, 0.5),
    share_case("queue with deserved, allocated = deserved", res("2", "2Gi"), res("2", "2Gi"), E, 1.0),
    share_case("queue with deserved, allocated > deserved (CPU dimension)", res("2", "2Gi"), res("3", "2Gi"), E, 1.5),
    share_case("queue with deserved, memory is dominant resource", res("2", "4Gi"), res("1", "3Gi"), E, 0.75),
    share_case("queue with deserved, CPU is dominant resource", res("2", "4Gi"), res("1.5", "2Gi"), E, 0.75),
    share_case("queue with deserved, allocated exceeds on both dimensions", res("2", "2Gi"), res("3", "3Gi"), E, 1.5),
    share_case("queue with deserved, request should not affect share calculation", res("2", "2Gi"), res("1", "1Gi"),
               res("1", "1Gi"), 0.5),
    share_case("queue with deserved but zero values", res("0", "0Gi"), res("1", "1Gi"), E, 1.0),
    share_case("queue with deserved, allocated is zero", res("2", "2Gi"), res("0", "0Gi"), E, 0.0),
    share_case("best-effort queue with only CPU allocated", None, res("1", "0Gi"), E, 1.0),
    share_case("best-effort queue with only memory allocated", None, res("0", "1Gi"), E, 1.0),
    share_case("best-effort queue with only CPU request (no allocated)", None, E, res("1", "0Gi"), 1.0),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_capacity_case(case, pure):
    run_and_check(case, pure)
