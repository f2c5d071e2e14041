"""Preemption between the tasks of one job on a real API server (runtime/engine/actions/preempt.py
`_within_job`): a high-priority pod of a PodGroup evicts a lower-priority pod of the same PodGroup
through the Eviction API, takes its room once a kubelet stand-in has removed it, and the
scheduler's eviction audit counts the eviction bought, not wasted or repeated."""

from __future__ import annotations

import pytest

from .connector_helpers import FakeKubelet, InProcess, Objects, unique_scheduler_name, wait_for

pytestmark = pytest.mark.integration

# Volcano's default tiers with gang's job_starving off: with it on, a job at its minimum is not
# starving and preempts nothing (Session.JobStarving), in Volcano as here.
POLICY = """policy "within-job" version 1
actions [enqueue, allocate, preempt, backfill]
tier {
  plugin priority
  plugin gang {
    enable_job_starving = false
  }
  plugin conformance
}
tier {
  plugin drf
  plugin predicates
  plugin proportion
  plugin nodeorder
  plugin binpack
}
"""


def test_a_high_priority_pod_takes_the_room_of_a_lower_one_of_its_own_job(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    ns = objects.namespace
    objects.priority_class(f"{ns}-worker", 10)
    objects.priority_class(f"{ns}-master", 1000)
    node = f"{ns}-n0"
    objects.node(node, cpu="2", memory="8Gi")
    objects.podgroup("job", 1)
    for i in range(2):
        objects.pod(f"worker-{i}", name, cpu="1", group="job", priority_class=f"{ns}-worker")
    scheduler: InProcess = in_process(name, POLICY)
    wait_for(lambda: scheduler.sees(ns, 2, nodes=1), "the cache to see the workers", 10)
    with FakeKubelet(objects.api, ns) as kubelet:
        scheduler.cycle_until(lambda: len(objects.bound()) == 2, 15, "the workers to be bound")
        wait_for(lambda: all(p["status"]["phase"] == "Running" for p in objects.pods().values()),
                 "the workers to run", 10)
        objects.pod("master", name, cpu="1", group="job", priority_class=f"{ns}-master")
        wait_for(lambda: scheduler.sees(ns, 3), "the cache to see the master", 10)

        first = scheduler.cycle()
        [eviction] = first.decisions.evictions
        assert eviction.reason.message == f"preempted by {ns}/master of its own job (priority 1000)"
        assert first.applied.evicted == 1 and first.decisions.pipelined == {f"{ns}/master": node}
        scheduler.cycle_until(lambda: objects.bound().get("master") == node, 30, "the master to be bound")
        assert kubelet.deleted == [eviction.pod.split("/")[1]]
    audit = scheduler.scheduler.audit
    assert (audit.bought, audit.wasted, audit.repeats, audit.exchanges) == (1, 0, 0, 0)
    preempted = [e for e in objects.events_for(eviction.pod.split("/")[1]) if e["reason"] == "Preempted"]
    assert preempted, "the victim is told why"
