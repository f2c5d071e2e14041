"""Reclaim on a real API server, with victims that take 5 s to terminate (the kubelet stand-in
deletes them only then): the reclaimer is nominated to the node (status.nominatedNodeName)
while they leave, no other pod takes the room meanwhile — not even one of a queue first in
queue order —, the reclaimer binds there, and nothing more is evicted (issue 17)."""

from __future__ import annotations

import time

import pytest

from .connector_helpers import FakeKubelet, InProcess, Objects, unique_scheduler_name, wait_for

pytestmark = pytest.mark.integration

TERMINATION_S = 5.0


def reclaim_policy(online: str, batch: str) -> str:
    return f"""policy "reclaim-test" version 1
actions [enqueue, allocate, preempt, reclaim, backfill]
tier {{
  plugin priority
  plugin gang
  plugin conformance
}}
tier {{
  plugin drf
  plugin predicates
  plugin capacity
  plugin binpack
}}
queue {online} {{ priority = 1 deserved = {{ cpu: 4 }} capability = {{ cpu: 8 }} }}
queue {batch} {{ deserved = {{ cpu: 4 }} capability = {{ cpu: 8 }} }}
"""


def test_reclaimer_holds_the_freed_room_while_its_victims_terminate(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    ns = objects.namespace
    online, batch = f"{ns}-online", f"{ns}-batch"
    node = f"{ns}-n0"
    objects.node(node, cpu="8", memory="32Gi")
    objects.priority_class(f"{ns}-high", 1000)
    for i in range(4):
        objects.podgroup(f"api-{i}", 1, queue=online, priority_class=f"{ns}-high")
        objects.pod(f"api-{i}", name, cpu="2", group=f"api-{i}", priority_class=f"{ns}-high")
    scheduler: InProcess = in_process(name, reclaim_policy(online, batch))
    evicted: list[str] = []

    def cycle() -> None:
        evicted.extend(e.pod for e in scheduler.cycle().decisions.evictions)

    with FakeKubelet(objects.api, ns, termination_seconds=TERMINATION_S) as kubelet:
        wait_for(lambda: scheduler.sees(ns, 4), "the cache to see the online pods", 10)
        wait_for(lambda: (cycle(), len(objects.bound()) == 4)[1], "the online pods to be bound", 20)

        objects.podgroup("etl", 2, queue=batch)
        for i in range(2):
            objects.pod(f"etl-{i}", name, cpu="2", group="etl")
        wait_for(lambda: (cycle(), len(evicted) == 2)[1], "reclaim to evict for the gang", 20)
        victims = {key.split("/", 1)[1] for key in evicted}
        assert victims <= {f"api-{i}" for i in range(4)}

        def nominated() -> dict[str, str | None]:
            pods = objects.pods()
            return {p: pods[p].get("status", {}).get("nominatedNodeName") for p in ("etl-0", "etl-1")}

        wait_for(lambda: nominated() == {"etl-0": node, "etl-1": node}, "the gang to be nominated", 10)
        # An online pod arrives while the victims terminate: its queue comes first and may grow
        # to its capability, but the room being freed is the gang's.
        objects.podgroup("api-extra", 1, queue=online, priority_class=f"{ns}-high")
        objects.pod("api-extra", name, cpu="2", group="api-extra", priority_class=f"{ns}-high")
        started = time.monotonic()
        while any(v in objects.pods() for v in victims) and time.monotonic() - started < 3 * TERMINATION_S:
            cycle()
            assert "api-extra" not in objects.bound()
            assert "etl-0" not in objects.bound() and "etl-1" not in objects.bound()
            time.sleep(0.2)
        assert set(kubelet.deleted) == victims

        wait_for(lambda: (cycle(), {"etl-0", "etl-1"} <= set(objects.bound()))[1], "the gang to bind", 20)
        assert objects.bound()["etl-0"] == objects.bound()["etl-1"] == node
        assert nominated() == {"etl-0": None, "etl-1": None}
        for _ in range(10):     # the extra online pod keeps waiting: nothing is evicted for it
            cycle()
        assert len(evicted) == 2 and "api-extra" not in objects.bound()
    sample = scheduler.scheduler.metrics.registry.get_sample_value
    assert sample("policydsl_wasted_evictions_total") == 0
    assert sample("policydsl_traded_evictions_total") == 0
