"""The shuffle action on a real API server: rescheduling's lowNodeUtilization moves one pod off a
crowded node through the Eviction API, the pod's Event says why (both nodes), and it moves nothing
more once the node is within its target. Unit level: tests/runtime/test_runtime_rescheduling.py."""

from __future__ import annotations

import time

import pytest

from .connector_helpers import FakeKubelet, InProcess, Objects, unique_scheduler_name, wait_for

pytestmark = pytest.mark.integration

RESCHEDULING_POLICY = """policy "shuffle-test" version 1
actions [enqueue, allocate, backfill, shuffle]
tier {
  plugin priority
  plugin gang
  plugin rescheduling {
    interval = "1s"
    thresholds = { cpu: 20 }
    target_thresholds = { cpu: 50 }
  }
}
tier {
  plugin predicates
  plugin proportion
  plugin nodeorder
}
"""


def test_rescheduling_moves_one_pod_off_the_crowded_node_saying_why(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    ns = objects.namespace
    crowded, empty = f"{ns}-a", f"{ns}-b"
    objects.node(crowded, cpu="4", memory="16Gi")
    # Closed at first, so that the scheduler itself puts the three pods on the other node.
    objects.node(empty, cpu="4", memory="16Gi", taints=[{"key": "closed", "value": "x", "effect": "NoSchedule"}])
    for i in range(3):
        objects.pod(f"p{i}", name, cpu="1")
    scheduler: InProcess = in_process(name, RESCHEDULING_POLICY)
    wait_for(lambda: scheduler.sees(ns, 3, nodes=2), "the cache to see the pods and nodes", 10)
    with FakeKubelet(objects.api, ns):
        scheduler.cycle_until(lambda: len(objects.bound()) == 3, 15, "the pods to be bound")
        assert set(objects.bound().values()) == {crowded}
        wait_for(lambda: all(p["status"]["phase"] == "Running" for p in objects.pods().values()), "the pods to run", 10)

        node = objects.api.get(f"/api/v1/nodes/{empty}")
        node["spec"]["taints"] = []
        objects.api.put(f"/api/v1/nodes/{empty}", node)
        wait_for(lambda: not scheduler.cluster.snapshot().nodes[empty].taints, "the cache to see the node open", 10)

        moves: list = []

        def evicts() -> bool:
            moves[:] = scheduler.cycle().decisions.evictions
            return bool(moves)

        wait_for(evicts, "rescheduling to evict a pod (its interval is 1s)", 15, interval=0.3)
        assert len(moves) == 1 and moves[0].reason.kind == "shuffle"
        wait_for(lambda: len(objects.pods()) == 2, "the evicted pod to go", 15)
        [gone] = {f"p{i}" for i in range(3)} - set(objects.pods())
        events = objects.events_for(gone)
        messages = [e.get("message") or e.get("note") or "" for e in events]
        assert any(m.startswith(f"Evicted by shuffle on node {crowded}: node {crowded} is above its target "
                                f"utilization; the pod can run on {empty}") for m in messages), messages

        # Within its target now (2 of 4 CPUs): later runs move nothing.
        for _ in range(8):
            assert scheduler.cycle().decisions.evictions == []
            time.sleep(0.3)
        assert len(objects.pods()) == 2


TDM_POLICY = """policy "tdm-test" version 1
actions [enqueue, allocate, backfill, shuffle]
tier {
  plugin priority
  plugin gang
  plugin tdm {
    revocable_zones = { rz1: "10:00-11:00" }
  }
}
tier {
  plugin predicates
  plugin proportion
  plugin nodeorder
}
"""


class ShiftedClock:
    """The service loop's `time` with its wall clock moved to a chosen UTC time of day (the cycle's
    clock, which tdm reads); everything else is the real module."""

    def __init__(self) -> None:
        self.offset = 0.0

    def at(self, hour: int, minute: int) -> None:
        now = time.time()
        self.offset = (now - now % 86400 + hour * 3600 + minute * 60) - now

    def time(self) -> float:
        return time.time() + self.offset

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_tdm_lends_a_revocable_node_in_its_window_and_empties_it_after(objects: Objects, in_process,
                                                                       monkeypatch) -> None:
    from runtime.service import loop
    clock = ShiftedClock()
    monkeypatch.setattr(loop, "time", clock)
    clock.at(10, 30)
    name = unique_scheduler_name()
    ns = objects.namespace
    revocable, normal = f"{ns}-r1", f"{ns}-n1"
    objects.node(revocable, cpu="4", memory="16Gi", labels={"volcano.sh/revocable-zone": "rz1"})
    objects.node(normal, cpu="4", memory="16Gi")
    for pod, notes in (("batch", {"volcano.sh/preemptable": "true"}), ("web", {})):
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "annotations": notes},
                "spec": {"schedulerName": name, "containers": [{"name": "main", "image": "busybox",
                                                                 "resources": {"requests": {"cpu": "1"}}}]}}
        objects.api.post(f"/api/v1/namespaces/{ns}/pods", body)
    scheduler: InProcess = in_process(name, TDM_POLICY)
    wait_for(lambda: scheduler.sees(ns, 2, nodes=2), "the cache to see the pods and nodes", 10)
    with FakeKubelet(objects.api, ns):
        scheduler.cycle_until(lambda: len(objects.bound()) == 2, 15, "the pods to be bound")
        assert objects.bound() == {"batch": revocable, "web": normal}
        wait_for(lambda: all(p["status"]["phase"] == "Running" for p in objects.pods().values()), "the pods to run", 10)

        clock.at(11, 30)     # the window has closed
        moves: list = []

        def evicts() -> bool:
            moves[:] = scheduler.cycle().decisions.evictions
            return bool(moves)

        wait_for(evicts, "tdm to empty the closed zone", 15, interval=0.3)
        assert [e.pod for e in moves] == [f"{ns}/batch"]
        wait_for(lambda: "batch" not in objects.pods(), "the evicted pod to go", 15)
        messages = [e.get("message") or "" for e in objects.events_for("batch")]
        assert any(m.startswith(f"Evicted by shuffle on node {revocable}: revocable zone rz1 (10:00-11:00) is closed")
                   for m in messages), messages
        assert "web" in objects.pods()
