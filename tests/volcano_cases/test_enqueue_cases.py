"""pkg/scheduler/actions/enqueue/enqueue_test.go (Volcano v1.14.1), TestEnqueue case by case.

The Go tier also has the sla plugin (sla-waiting-time 3m), which we do not have. With no
creation time the Go jobs have waited "forever", so sla votes Permit; a permit changes nothing
where no plugin rejects (the default is yes) and a reject still wins, so leaving it out changes
none of these outcomes. No case has nodes, as in Go.
"""

from __future__ import annotations

import pytest

from vcase import Case, Expect, params, plugin, pod, podgroup, queue, res, run_and_check

TIERS = [[
    plugin("drf", "job_order", "job_enqueued"),
    plugin("proportion", "queue_order", "job_enqueued"),
    plugin("gang", "job_order"),
]]


def case(name: str, **kw) -> Case:
    return Case(f"TestEnqueue / {name}", TIERS, ("enqueue",), **kw)


CASES = [
    # "when podgroup status is inqueue": an Inqueue PodGroup stays Inqueue.
    case("when podgroup status is inqueue",
         pods=[pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1"),
               pod("c1", "p2", "", "Pending", res("1", "1G"), "pg1")],
         podgroups=[podgroup("pg1", "c1", "c1", 2)],
         queues=[queue("c1", 1, res("4", "4G")), queue("c2", 1, res("4", "4G"))],
         expect=Expect(phases={"c1/pg1": "Inqueue"})),
    # "when podgroup status is pending": no minResources, so both are admitted.
    case("when podgroup status is pending",
         pods=[pod("c1", "p1", "", "Pending", res("3", "1G"), "pg1"),
               pod("c1", "p2", "", "Pending", res("1", "1G"), "pg2")],
         podgroups=[podgroup("pg1", "c1", "c1", 1, phase="Pending"), podgroup("pg2", "c1", "c2", 1, phase="Pending")],
         queues=[queue("c1", 1, res("4", "4G")), queue("c2", 1, res("4", "4G"))],
         expect=Expect(phases={"c1/pg1": "Inqueue", "c1/pg2": "Inqueue"})),
    # "when podgroup status is running": its two pods are Running but have no nodeName; Volcano
    # counts them as running tasks (getTaskStatus: Running is Running, whatever the node), so
    # the PodGroup stays Running.
    case("when podgroup status is running",
         pods=[pod("c1", "p1", "", "Running", res("1", "1G"), "pg1"),
               pod("c1", "p2", "", "Running", res("1", "1G"), "pg1")],
         podgroups=[podgroup("pg1", "c1", "c1", 2, phase="Running")],
         queues=[queue("c1", 1, res("4", "4G"))],
         expect=Expect(phases={"c1/pg1": "Running"})),
    # "pggroup cannot enqueue because the specified queue is c1, but there is only c2": Volcano
    # skips the job (its queue is unknown) and checks nothing; the cycle must just run.
    case("pggroup cannot enqueue because the specified queue is c1, but there is only c2",
         podgroups=[podgroup("pg1", "c1", "c1", 0, phase="Pending")],
         queues=[queue("c2", 1, res("4", "4G"))],
         expect=Expect(phases={"c1/pg1": "Pending"})),
    # "pggroup cannot enqueue because queue resources are less than podgroup MinResources":
    # minResources 8 cpu, capability 1 cpu: stays Pending. The case has no nodes, so no resource
    # is one a node offers, and admission compares none (a documented difference): admitted.
    case("pggroup cannot enqueue because queue resources are less than podgroup MinResources",
         podgroups=[podgroup("pg1", "c1", "c1", 1, phase="Pending", min_resources=res("8", "8G"))],
         queues=[queue("c1", 1, res("1", "1G"))],
         expect=Expect(phases={"c1/pg1": "Pending"}),
         ours=Expect(phases={"c1/pg1": "Inqueue"}),
         readme="Resources no node has (e.g. a card-memory request the device plugin checks per card) do not enter"),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_enqueue_case(case, pure):
    run_and_check(case, pure)
