"""pkg/scheduler/plugins/drf/hdrf_test.go (Volcano v1.14.1), TestHDRF case by case.

Volcano's hierarchical drf reads the tree from Queue annotations (volcano.sh/hierarchy
"root/eng/dev", volcano.sh/hierarchy-weights "100/50/50"); the inner nodes ("eng") are not
Queue objects. We have no such annotations: the translation makes the tree out of Queue objects
with spec.parent and the annotations' weights, inner nodes included, jobs in the leaves.

The Go test's check compares the whole expected map with one job's allocation
(`DeepEqual(test.expected, job.Allocated)`), which is never equal, so it never fails: the
expected allocations below are the test's stated intent, unverified by Volcano's own run.
The tier (drf with hierarchy, proportion in the same tier) is one Volcano's config loader
refuses, as our lint does (PD402); the Go test builds it directly.
"""

from __future__ import annotations

from collections import Counter

import pytest

from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check


TIERS = [[plugin("drf", "hierarchy", "queue_order", "job_order"),
          plugin("proportion", "job_enqueued", "queue_order", "reclaimable")]]


def make_pods(num: int, cpu: str, mem: str, group: str):
    return [pod("default", f"{group}-p{i}", "", "Pending", res(cpu, mem), group) for i in range(num)]


def per_job(want: dict[str, int]):
    """The Go test's expected job.Allocated, as the number of each job's pods bound (every pod
    of a job requests the same)."""
    def probe(ssn, decisions):
        got = Counter(b.pod.split("/")[1].rsplit("-p", 1)[0] for b in decisions.bindings)
        assert dict(got) == want, dict(got)
    return probe


CASES = [
    # TestHDRF / "rescaling test": sci (50) and eng (50: dev 50, prod 50); dev asks cpu only,
    # prod memory only, so eng's share is rescaled: each job gets 5 pods of the 10-cpu/10G node.
    Case("TestHDRF / rescaling test", TIERS, ("allocate",),
         nodes=[node("n", res("10", "10G", {"pods": "50"}))],
         pods=make_pods(10, "1", "1G", "pg1") + make_pods(10, "1", "0G", "pg21") + make_pods(10, "0", "1G", "pg22"),
         podgroups=[podgroup("pg1", "default", "root-sci", 0), podgroup("pg21", "default", "root-eng-dev", 0),
                    podgroup("pg22", "default", "root-eng-prod", 0)],
         queues=[queue("root-sci", 50), queue("eng", 50), queue("root-eng-dev", 50, parent="eng"),
                 queue("root-eng-prod", 50, parent="eng")],
         expect=Expect(binds=None, evicted=[]), probe=per_job({"pg1": 5, "pg21": 5, "pg22": 5}),
         lint_refuses="PD402"),
    # TestHDRF / "blocking nodes test": pg1, pg2 and pg3's pg31 ask cpu; pg32 (in pg31's queue)
    # and pg4 memory. CPU is split 10/10/10; memory 15/15 between pg32 and pg4.
    Case("TestHDRF / blocking nodes test", TIERS, ("allocate",),
         nodes=[node("n", res("30", "30G", {"pods": "500"}))],
         pods=(make_pods(30, "1", "0G", "pg1") + make_pods(30, "1", "0G", "pg2") + make_pods(30, "1", "0G", "pg31")
               + make_pods(30, "0", "1G", "pg32") + make_pods(30, "0", "1G", "pg4")),
         podgroups=[podgroup("pg1", "default", "root-pg1", 0), podgroup("pg2", "default", "root-pg2", 0),
                    podgroup("pg31", "default", "root-pg3-pg31", 0), podgroup("pg32", "default", "root-pg3-pg31", 0),
                    podgroup("pg4", "default", "root-pg4", 0)],
         queues=[queue("root-pg1", 25), queue("root-pg2", 25), queue("pg3", 25),
                 queue("root-pg3-pg31", 50, parent="pg3"), queue("root-pg3-pg32", 50, parent="pg3"), queue("root-pg4", 25)],
         expect=Expect(binds=None, evicted=[]),
         probe=per_job({"pg1": 10, "pg2": 10, "pg31": 10, "pg32": 15, "pg4": 15}),
         lint_refuses="PD402"),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_drf_case(case, pure):
    run_and_check(case, pure)
