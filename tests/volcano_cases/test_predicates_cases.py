"""pkg/scheduler/plugins/predicates/predicates_test.go (Volcano v1.14.1): TestEventHandler,
TestNodeNum and TestPodAntiAffinity (the scheduling ones; TestSetUpDynamicResourcesArgs_* and
TestInitPlugin check argument parsing and which kube-scheduler plugins are built, not decisions)."""

from __future__ import annotations

import pytest

from runtime.cluster.model import PodAffinityTerm, PodRules
from runtime.cluster.selectors import LabelSelector, MatchExpression
from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

# getWorkerAffinity: required anti-affinity to pods labelled role=worker, per hostname.
WORKER_ANTI = PodRules(anti_affinity=(PodAffinityTerm(
    "kubernetes.io/hostname", LabelSelector(match_expressions=(MatchExpression("role", "In", ("worker",)),)),
    frozenset({"ns1"})),))
WORKER = {"role": "worker"}

CASES = [
    # TestEventHandler / "pod-deallocate": pg1's two workers repel each other and both fit only
    # node1 (w1 by selector, w2 by size), so pg1 (minMember 2) cannot run; pg2's w3 binds to
    # node1. (The name recalls the predicates plugin's deallocate event handler: w1's trial
    # placement must be undone when pg1 is discarded, or w3 would be repelled too.)
    Case("TestEventHandler / pod-deallocate",
         [[plugin("predicates", "predicate"), plugin("gang", "job_ready", "job_pipelined"),
           plugin("priority", "job_order")]], ("allocate",),
         priority_classes={"p1": 1, "p2": 2},
         nodes=[node("node1", res("14", "14k", {"pods": "10"}), {"selector": "worker", "kubernetes.io/hostname": "node1"}),
                node("node2", res("3", "3k", {"pods": "10"}), {"kubernetes.io/hostname": "node2"})],
         pods=[pod("ns1", "worker-1", "", "Pending", res("3", "3k"), "pg1", WORKER, {"selector": "worker"},
                   rules=WORKER_ANTI),
               pod("ns1", "worker-2", "", "Pending", res("5", "5k"), "pg1", WORKER, rules=WORKER_ANTI),
               pod("ns1", "worker-3", "", "Pending", res("4", "4k"), "pg2", WORKER, rules=WORKER_ANTI)],
         podgroups=[podgroup("pg1", "ns1", "q1", 2, None, priority_class="p2"),
                    podgroup("pg2", "ns1", "q1", 1, None, priority_class="p1")],
         queues=[queue("q1", 0)],
         expect=Expect(binds={"ns1/worker-3": "node1"})),
    # TestNodeNum / "pod-predicate": three best-effort pods, one node with room for two pods:
    # allocate skips them, backfill binds pg1's two (pg1 before pg2 by UID).
    Case("TestNodeNum / pod-predicate", [[plugin("predicates", "predicate")]], ("allocate", "backfill"),
         priority_classes={"p1": 1, "p2": 2},
         nodes=[node("node1", res("4", "4k", {"pods": "2"}), {"selector": "worker"})],
         pods=[pod("ns1", "worker-1", "", "Pending", {}, "pg1", WORKER, {"selector": "worker"}),
               pod("ns1", "worker-2", "", "Pending", {}, "pg1", WORKER),
               pod("ns1", "worker-3", "", "Pending", {}, "pg2", WORKER)],
         podgroups=[podgroup("pg1", "ns1", "q1", 2, None, priority_class="p2"),
                    podgroup("pg2", "ns1", "q1", 1, None, priority_class="p1")],
         queues=[queue("q1", 0)],
         expect=Expect(binds={"ns1/worker-1": "node1", "ns1/worker-2": "node1"})),
    # TestPodAntiAffinity / "pod-anti-affinity": n1's two pod slots hold w1 (role=worker) and
    # w2 of the low-priority pg1; w3 (high, anti-affinity to workers) needs w1 gone. Volcano
    # evicts nothing: predicates is in the tier without enablePreemptable, which in v1.14.1 gates
    # its SimulateRemoveTaskFn, so topology-aware preemption never takes w1 out of the
    # inter-pod affinity state and w3 never fits (with the flag on, TestTopologyAwarePreempt's
    # anti-affinity case evicts the repelling pod).
    Case("TestPodAntiAffinity / pod-anti-affinity",
         [[plugin("predicates", "predicate"), plugin("priority", "preemptable", "job_starving")]],
         ("allocate", "preempt"), action_args={"preempt": {"topology_aware": True}},
         priority_classes={"high-priority": 100000, "low-priority": 10},
         nodes=[node("n1", res("12", "12G", {"pods": "2"}), {"kubernetes.io/hostname": "node1"})],
         pods=[pod("ns1", "worker-1", "n1", "Running", res("3", "3G"), "pg1", WORKER, priority=100000, rules=WORKER_ANTI),
               pod("ns1", "worker-2", "n1", "Running", res("3", "3G"), "pg1", priority=10),
               pod("ns1", "worker-3", "", "Pending", res("3", "3G"), "pg2", WORKER, priority=100000, rules=WORKER_ANTI)],
         podgroups=[podgroup("pg1", "ns1", "q1", 0, None, "Running", priority_class="low-priority"),
                    podgroup("pg2", "ns1", "q1", 1, None, priority_class="high-priority")],
         queues=[queue("q1", 0, res("9", "9G"))],
         expect=Expect(),
         ours=Expect(evicted=["ns1/worker-1"], pipelined={"ns1/pg2": ["n1"]}),
         readme="Preemption always sees its victims leave every stateful rule"),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_predicates_case(case, pure):
    run_and_check(case, pure)
