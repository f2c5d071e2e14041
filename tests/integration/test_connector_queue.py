"""Queues on a real API server: a Queue object's capability holds; its status is written."""

from __future__ import annotations

import pytest

from polling import wait_for

from .connector_helpers import InProcess, Objects, unique_scheduler_name

pytestmark = pytest.mark.integration


def test_queue_capability_holds_and_queue_status_is_written(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    queue = f"capped-{objects.namespace}"
    objects.queue(queue, {"weight": 1, "capability": {"cpu": "4", "memory": "64Gi"}})
    for i in range(2):
        objects.node(f"{objects.namespace}-n{i}", cpu="8", memory="32Gi")
    jobs = [f"job{i}" for i in range(4)]
    for job in jobs:
        objects.gang(job, 1, name, queue=queue, cpu="2", memory="1Gi")
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(objects.namespace, 4) and queue in scheduler.cluster.snapshot().queues,
             "the cache to see the pods and the queue", 10)

    first = scheduler.cycle()
    second = scheduler.cycle()

    # 16 cpus free, but the queue may hold 4: two of the 2-cpu jobs.
    assert first.binds.bound == 2 and second.binds.bound == 0
    assert len(objects.bound()) == 2
    waiting = second.decisions.unschedulable
    assert len(waiting) == 2
    assert all(any(f"queue {queue}" in r.message for r in w.reasons) for w in waiting), waiting
    # Nothing changed between the cycles: nothing written the second time.
    assert first.applied.status_writes > 0 and second.applied.status_writes == 0

    status = wait_for(lambda: objects.api.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{queue}")
                      .get("status", {}).get("allocated"), "the Queue status", 10)
    assert status == {"cpu": "4", "memory": "2Gi"}
    full = objects.api.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{queue}")["status"]
    assert full["running"] == 2
    assert full["pending"] + full["inqueue"] == 2
