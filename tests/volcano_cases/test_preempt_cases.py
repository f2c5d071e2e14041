"""pkg/scheduler/actions/preempt/preempt_test.go (Volcano v1.14.1), case by case: TestPreempt
(normal preemption) and TestTopologyAwarePreempt (enableTopologyAwarePreemption: true, the
same cases plus one with pod anti-affinity). Only the preempt action runs, as in Go."""

from __future__ import annotations

import pytest

from runtime.cluster.model import PREEMPT_NEVER, PodAffinityTerm, PodRules
from runtime.cluster.selectors import LabelSelector
from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

PREEMPTABLE = "volcano.sh/preemptable"
YES, NO = {PREEMPTABLE: "true"}, {PREEMPTABLE: "false"}
PRIORITY_CLASSES = {"high-priority": 100000, "low-priority": 10}

TIERS = [[
    plugin("conformance", "preemptable"),
    plugin("gang", "preemptable", "job_pipelined", "job_starving"),
    plugin("priority", "task_order", "job_order", "preemptable", "job_pipelined", "job_starving"),
    plugin("proportion", "overused", "allocatable", "queue_order"),
]]
TOPOLOGY_TIERS = [[
    plugin("conformance", "preemptable"),
    plugin("gang", "preemptable", "job_pipelined", "job_starving"),
    plugin("priority", "task_order", "job_order", "preemptable", "job_pipelined", "job_starving"),
    plugin("proportion", "overused", "allocatable", "queue_order", "predicate"),
    plugin("predicates", "preemptable", "predicate"),
]]


def node10(name: str, cpu: str, memory: str, pods: str = "10"):
    return node(name, res(cpu, memory, {"pods": pods}))


def shared_cases(source: str, tiers, action_args) -> list[Case]:
    """The ten cases TestPreempt and TestTopologyAwarePreempt share (same inputs, same
    expectations); `source` names the Go test function."""
    def case(name: str, **kw) -> Case:
        return Case(f"{source} / {name}", tiers, ("preempt",), priority_classes=PRIORITY_CLASSES,
                    action_args=action_args, **kw)

    return [
        # "do not preempt if there are enough idle resources": pg1 (min 3) runs 2; its third pod
        # fits the idle room, so nothing is evicted.
        case("do not preempt if there are enough idle resources",
             nodes=[node10("n1", "10", "10G")],
             pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1"),
                   pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1"),
                   pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg1")],
             podgroups=[podgroup("pg1", "c1", "q1", 3, {"": 3})],
             queues=[queue("q1", 1)],
             expect=Expect()),
        # "do not preempt if job is pipelined": pg2 (min 1) already runs a pod: not starving.
        case("do not preempt if job is pipelined",
             nodes=[node10("n1", "3", "3G")],
             pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1"),
                   pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1"),
                   pod("c1", "preemptee3", "n1", "Running", res("1", "1G"), "pg2"),
                   pod("c1", "preemptor2", "", "Pending", res("1", "1G"), "pg2")],
             podgroups=[podgroup("pg1", "c1", "q1", 1, {"": 2}), podgroup("pg2", "c1", "q1", 1, {"": 2})],
             queues=[queue("q1", 1)],
             expect=Expect()),
        # "preempt one task of different job to fit both jobs on one node": preemptee2 carries
        # the *label* volcano.sh/preemptable=false, so only preemptee1 may go.
        case("preempt one task of different job to fit both jobs on one node",
             nodes=[node10("n1", "2", "2G")],
             pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1", YES),
                   pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1", NO),
                   pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg2"),
                   pod("c1", "preemptor2", "", "Pending", res("1", "1G"), "pg2")],
             podgroups=[podgroup("pg1", "c1", "q1", 1, {"": 2}, priority_class="low-priority"),
                        podgroup("pg2", "c1", "q1", 1, {"": 2}, priority_class="high-priority")],
             queues=[queue("q1", 1)],
             expect=Expect(evicted=["c1/preemptee1"])),
        # "preempt enough tasks to fit large task of different job": 3 idle cpu, the 5-cpu
        # preemptor needs two of the three 1-cpu pods; preemptee3 is labelled not preemptable.
        case("preempt enough tasks to fit large task of different job",
             nodes=[node10("n1", "6", "6G")],
             pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1", YES),
                   pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1", YES),
                   pod("c1", "preemptee3", "n1", "Running", res("1", "1G"), "pg1", NO),
                   pod("c1", "preemptor1", "", "Pending", res("5", "5G"), "pg2")],
             podgroups=[podgroup("pg1", "c1", "q1", 1, {"": 3}, priority_class="low-priority"),
                        podgroup("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority")],
             queues=[queue("q1", 1)],
             # Agrees, though we do not read preemptee3's label: the victim order picks 1 and 2 first.
             expect=Expect(evicted=["c1/preemptee2", "c1/preemptee1"])),
        # "preempt low priority job in same queue" (#3161): the node has room, but q1's
        # capability (4 cpu) does not: Volcano evicts preemptee1 so the queue may allocate.
        case("preempt low priority job in same queue",
             nodes=[node10("n1", "12", "12G")],
             pods=[pod("c1", "preemptee1", "n1", "Running", res("3", "3G"), "pg1", YES),
                   pod("c1", "preemptor1", "", "Pending", res("3", "3G"), "pg2")],
             podgroups=[podgroup("pg1", "c1", "q1", 0, {}, priority_class="low-priority"),
                        podgroup("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority")],
             queues=[queue("q1", 1, res("4", "4G"))],
             expect=Expect(evicted=["c1/preemptee1"])),
        # "preempt low priority job in same queue: allocatable and has enough resource, don't
        # preempt" (#3161): capability 6 cpu: the queue may allocate, nothing is evicted.
        case("preempt low priority job in same queue: allocatable and has enough resource, don't preempt",
             nodes=[node10("n1", "12", "12G")],
             pods=[pod("c1", "preemptee1", "n1", "Running", res("3", "3G"), "pg1", YES),
                   pod("c1", "preemptor1", "", "Pending", res("3", "3G"), "pg2")],
             podgroups=[podgroup("pg1", "c1", "q1", 1, {}, priority_class="low-priority"),
                        podgroup("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority")],
             queues=[queue("q1", 1, res("6", "6G"))],
             expect=Expect()),
        # "preempt low priority job in same queue but not pod with preemptable=false or higher
        # priority" (#2232): q1 at its 3-cpu capability; only preemptee2 may go (preemptee1 is
        # labelled not preemptable; preemptee3 has a high pod priority but a low job priority).
        case("preempt low priority job in same queue but not pod with preemptable=false or higher priority",
             nodes=[node10("n1", "12", "12G")],
             pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1", NO),
                   pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1", YES),
                   pod("c1", "preemptee3", "n1", "Running", res("1", "1G"), "pg1", YES, priority=100000),
                   pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg2")],
             podgroups=[podgroup("pg1", "c1", "q1", 1, {}, priority_class="low-priority"),
                        podgroup("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority")],
             queues=[queue("q1", 1, res("3", "3G"))],
             expect=Expect(evicted=["c1/preemptee2"])),
        # "unBestEffort high-priority pod preempt BestEffort low-priority pod in same queue"
        # (#3335): the node's only pod slot is held by a best-effort pod.
        case("unBestEffort high-priority pod preempt BestEffort low-priority pod in same queue",
             nodes=[node10("n1", "12", "12G", pods="1")],
             pods=[pod("c1", "preemptee1", "n1", "Running", {}, "pg1", YES),
                   pod("c1", "preemptor1", "", "Pending", res("3", "3G"), "pg2")],
             podgroups=[podgroup("pg1", "c1", "q1", 0, {}, priority_class="low-priority"),
                        podgroup("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority")],
             queues=[queue("q1", 1, res("6", "6G"))],
             expect=Expect(evicted=["c1/preemptee1"])),
        # "BestEffort high-priority pod preempt BestEffort low-priority pod in same queue" (#3335):
        # a preemptor requesting nothing but a pod slot still preempts for the slot.
        case("BestEffort high-priority pod preempt BestEffort low-priority pod in same queue",
             nodes=[node10("n1", "12", "12G", pods="1")],
             pods=[pod("c1", "preemptee1", "n1", "Running", {}, "pg1", YES),
                   pod("c1", "preemptor1", "", "Pending", {}, "pg2")],
             podgroups=[podgroup("pg1", "c1", "q1", 0, {}, priority_class="low-priority"),
                        podgroup("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority")],
             queues=[queue("q1", 1, res("6", "6G"))],
             expect=Expect(evicted=["c1/preemptee1"])),
        # "can not preempt resources when task preemption policy is never" (#3642).
        case("can not preempt resources when task preemption policy is never",
             nodes=[node10("n1", "1", "1Gi", pods="1")],
             pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg1", YES),
                   pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg2", preemption_policy=PREEMPT_NEVER)],
             podgroups=[podgroup("pg1", "c1", "q1", 0, None, priority_class="low-priority"),
                        podgroup("pg2", "c1", "q1", 1, None, priority_class="high-priority")],
             queues=[queue("q1", 1)],
             expect=Expect()),
    ]


def anti_affinity(ns: str, labels: dict[str, str]) -> PodRules:
    """buildPodWithPodAntiAffinity: required anti-affinity on kubernetes.io/hostname against pods
    carrying all of the pod's own labels, in its namespace."""
    selector = LabelSelector(match_labels=tuple(sorted(labels.items())))
    return PodRules(anti_affinity=(PodAffinityTerm("kubernetes.io/hostname", selector, frozenset({ns})),))


CASES = shared_cases("TestPreempt", TIERS, {"preempt": {"topology_aware": False}})
CASES += shared_cases("TestTopologyAwarePreempt", TOPOLOGY_TIERS, {"preempt": {"topology_aware": True}})
CASES += [
    # TestTopologyAwarePreempt / "preempt low-priority pod when high-priority pod has
    # PodAntiAffinity conflict": the preemptor repels preemptee2 (label test=test); evicting
    # preemptee2 frees the pod slot and the anti-affinity at once.
    Case("TestTopologyAwarePreempt / preempt low-priority pod when high-priority pod has PodAntiAffinity conflict",
         TOPOLOGY_TIERS, ("preempt",), priority_classes=PRIORITY_CLASSES,
         action_args={"preempt": {"topology_aware": True}},
         nodes=[node("n1", res("2", "2Gi", {"pods": "2"}), {"kubernetes.io/hostname": "n1"})],
         pods=[pod("c1", "preemptee1", "n1", "Running", res("1", "1G"), "pg2", YES),
               pod("c1", "preemptee2", "n1", "Running", res("1", "1G"), "pg1", {**YES, "test": "test"},
                   rules=anti_affinity("c1", {**YES, "test": "test"})),
               pod("c1", "preemptor1", "", "Pending", res("1", "1G"), "pg3", {"test": "test"},
                   rules=anti_affinity("c1", {"test": "test"}))],
         podgroups=[podgroup("pg1", "c1", "q1", 0, {}, priority_class="low-priority"),
                    podgroup("pg2", "c1", "q1", 0, {}, priority_class="low-priority"),
                    podgroup("pg3", "c1", "q1", 1, {"": 1}, priority_class="high-priority")],
         queues=[queue("q1", 1, res("2", "2G"))],
         expect=Expect(evicted=["c1/preemptee2"])),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_preempt_case(case, pure):
    run_and_check(case, pure)
