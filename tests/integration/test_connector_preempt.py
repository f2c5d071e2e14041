"""Preemption on a real API server: real Evictions, a kubelet stand-in removes the victims,
and a PodDisruptionBudget is respected."""

from __future__ import annotations

from pathlib import Path

import pytest

from .connector_helpers import (
    FakeKubelet, InProcess, Objects, SchedulerProcess, unique_scheduler_name, wait_for,
)
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration

PREEMPT_POLICY = """policy "preempt-test" version 1
actions [enqueue, allocate, preempt, backfill]
tier {
  plugin priority
  plugin gang
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


def fill_node_with_low_priority_pods(objects: Objects, scheduler: str) -> tuple[str, str, str]:
    ns = objects.namespace
    low, high = f"{ns}-low", f"{ns}-high"
    objects.priority_class(low, 10)
    objects.priority_class(high, 1000)
    node = f"{ns}-n0"
    objects.node(node, cpu="4", memory="16Gi")
    objects.podgroup("low", 1, priority_class=low)
    for i in range(2):
        objects.pod(f"low-{i}", scheduler, cpu="2", group="low", priority_class=low, labels={"app": "low"})
    return low, high, node


def test_higher_priority_job_preempts_through_evictions(
    objects: Objects, kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    name = unique_scheduler_name()
    low, high, node = fill_node_with_low_priority_pods(objects, name)
    with FakeKubelet(objects.api, objects.namespace) as kubelet, \
            SchedulerProcess(tmp_path, PREEMPT_POLICY, kube_cluster.kubeconfig, name) as scheduler:
        wait_for(lambda: len(objects.bound()) == 2, "the low-priority pods to run", 30)
        objects.podgroup("high", 1, priority_class=high)
        preemptor = objects.pod("high-0", name, cpu="2", group="high", priority_class=high)

        wait_for(lambda: objects.bound().get("high-0") == node, "the high-priority pod to be bound", 30)

        assert len(kubelet.deleted) == 1 and kubelet.deleted[0].startswith("low-")
        victim = kubelet.deleted[0]
        survivors = objects.bound()
        assert set(survivors) == {"high-0", ({"low-0", "low-1"} - {victim}).pop()}
        assert scheduler.metric("policydsl_evictions_total", result="evicted") == 1
        assert scheduler.metric("policydsl_pods_scheduled_total") == 3
        assert scheduler.terminate() == 0
    preempted = [e for e in objects.events_for(victim) if e["reason"] == "Preempted"]
    # kube-scheduler's wording: the preemptor by UID, never its namespace/name (runtime/kube/events.py)
    assert preempted and preempted[0]["message"] == f"Preempted by pod {preemptor['metadata']['uid']} on node {node}"


def test_disruption_budget_blocks_the_eviction(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    low, high, node = fill_node_with_low_priority_pods(objects, name)
    objects.api.post(f"/apis/policy/v1/namespaces/{objects.namespace}/poddisruptionbudgets",
                     {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep-low"},
                      "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "low"}}}})
    scheduler: InProcess = in_process(name, PREEMPT_POLICY)
    wait_for(lambda: scheduler.sees(objects.namespace, 2), "the cache to see the pods", 10)
    assert scheduler.cycle().binds.bound == 2
    # Budgets guard only running pods (evicting a pending one disrupts nothing).
    with FakeKubelet(objects.api, objects.namespace):
        wait_for(lambda: all(p["status"]["phase"] == "Running" for p in objects.pods().values()),
                 "the low-priority pods to run", 10)
    objects.podgroup("high", 1, priority_class=high)
    objects.pod("high-0", name, cpu="2", group="high", priority_class=high)
    wait_for(lambda: scheduler.sees(objects.namespace, 3), "the cache to see the preemptor", 10)

    first = scheduler.cycle()
    second = scheduler.cycle()

    assert len(first.decisions.evictions) == 1
    assert first.applied.eviction_blocked == 1 and first.applied.evicted == 0
    # Refused (429), so tried again next cycle; the victim keeps running meanwhile.
    assert second.applied.eviction_blocked == 1
    pods = objects.pods()
    assert not any(p["metadata"].get("deletionTimestamp") for p in pods.values())
    assert set(objects.bound()) == {"low-0", "low-1"}
