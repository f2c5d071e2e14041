"""pkg/scheduler/plugins/overcommit/overcommit_test.go (Volcano v1.14.1), TestOvercommitPlugin.

The Go test calls ssn.JobEnqueued(job) and then ssn.JobEnqueueable(job) on Inqueue PodGroups
that have no pods. Observably that is whether the enqueue action admits the PodGroup: each case
runs enqueue on the same PodGroup set Pending and expects Inqueue exactly when the Go test
expects "enqueueable". (Go counts the job's minResources twice, once by JobEnqueued first; no
case is near the boundary, so the verdicts are the same either way.)

As written the PodGroups have no pods, which our engine never admits (issue 16's first point).
Each case therefore also has a variant with one pending pod requesting the PodGroup's
minResources (or 1 cpu / 1G where it has none), so that the factor arithmetic is still checked.
"""

from __future__ import annotations

import pytest

from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

NODES = [node("n1", res("2", "4Gi")), node("n2", res("4", "16Gi"))]   # no pods entry, as in Go
HUGE, NORMAL, SMALL = res("20000m", "20G"), res("2000m", "2G"), res("200m", "0.5G")


def tiers(factor: float):
    return [[plugin("overcommit", "job_enqueued", factor=factor)]]


def cases(name: str, factor: float, group_min: dict | None, queue_cap: dict | None, admitted: bool) -> list[Case]:
    ns = "test-namespace"
    group = podgroup("pg1" if group_min is NORMAL else "pg2", ns, "c1", 2, None, "Pending", min_resources=group_min)
    want = Expect(binds=None, evicted=None, phases={group.key: "Inqueue" if admitted else "Pending"})
    source = f"TestOvercommitPlugin / {name}"
    # One pod, so minMember 1 (no gang plugin here: it only sizes the gang). Only enqueue runs.
    with_pods = Case(f"{source} (variant: one pending pod, so the job exists for us)", tiers(factor), ("enqueue",),
                     nodes=NODES, queues=[queue("c1", 1, queue_cap)],
                     podgroups=[podgroup(group.name, ns, "c1", 1, None, "Pending", min_resources=group_min)],
                     pods=[pod(ns, "p0", "", "Pending", group_min or res("1", "1G"), group.name)],
                     expect=Expect(binds=None, evicted=None,
                                   phases={group.key: "Inqueue" if admitted else "Pending"}))
    without = Case(source, tiers(factor), ("enqueue",), nodes=NODES, queues=[queue("c1", 1, queue_cap)],
                   podgroups=[group], expect=want)

    # Refused, the pod-less PodGroup agrees only by omission: we never look at it, so it stays Pending.
    return [without, with_pods]


CASES = (
    # "overCommitFactor is more than 0": 2 cpu / 2G against (6 cpu, 20Gi) x 1.2.
    cases("overCommitFactor is more than 0", 1.2, NORMAL, None, True)
    # "overCommitFactor is less than 0": 0.8 is below 1.0 and reset to 1.2.
    + cases("overCommitFactor is less than 0", 0.8, NORMAL, None, True)
    # "when the required resources of pg are too large": 20 cpu > 7.2.
    + cases("when the required resources of pg are too large", 1.2, HUGE, None, False)
    # "when pg does not fill MinResources": no minResources: always admitted.
    + cases("when pg does not fill MinResources", 1.2, None, SMALL, True)
)


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_overcommit_case(case, pure):
    run_and_check(case, pure)
