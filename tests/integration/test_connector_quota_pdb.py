"""ResourceQuotas and PodDisruptionBudgets read by the connector on a real API server (watched
while the resourcequota / pdb plugin is on, runtime/kube/cache.py). The dev cluster runs no quota or
disruption controller, so each test writes the status those controllers would (status.hard/used,
status.disruptionsAllowed), as the plugins read it. Unit level: tests/runtime/test_connector_plugin_kinds.py."""

from __future__ import annotations

from typing import Any

import pytest

from .connector_helpers import FakeKubelet, InProcess, Objects, unique_scheduler_name, wait_for

pytestmark = pytest.mark.integration

QUOTA_POLICY = """policy "quota-test" version 1
actions [enqueue, allocate, backfill]
tier {
  plugin priority
  plugin gang
  plugin resourcequota
}
tier {
  plugin drf
  plugin predicates
  plugin proportion
  plugin nodeorder
}
"""

# Every plugin answering preemptable in pdb's tier: as in Volcano's tiers, a tier whose plugins
# leave no victim hands the choice to the next, where drf alone would pick one (runtime/README.md).
PDB_POLICY = """policy "pdb-test" version 1
actions [enqueue, allocate, preempt, backfill]
tier {
  plugin priority
  plugin gang
  plugin conformance
  plugin drf
  plugin pdb
}
tier {
  plugin predicates
  plugin proportion
  plugin nodeorder
  plugin binpack
}
"""


def write_status(objects: Objects, path: str, status: dict[str, Any]) -> None:
    """Write `status` as the object's controller would (read, then PUT the status subresource)."""
    body = objects.api.get(path)
    body["status"] = {**(body.get("status") or {}), **status,
                      **({"observedGeneration": body["metadata"].get("generation", 1)}
                         if "disruptionsAllowed" in status else {})}
    objects.api.put(f"{path}/status", body)


def set_quota(objects: Objects, name: str, cpu: str) -> None:
    path = f"/api/v1/namespaces/{objects.namespace}/resourcequotas/{name}"
    body = objects.api.get(path)
    body["spec"]["hard"] = {"cpu": cpu}
    objects.api.put(path, body)
    write_status(objects, path, {"hard": {"cpu": cpu}})


def phase(objects: Objects, group: str) -> str:
    return str((objects.read_podgroup(group).get("status") or {}).get("phase") or "")


def test_a_namespace_quota_holds_a_job_at_enqueue_until_raised(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    ns = objects.namespace
    objects.node(f"{ns}-n0", cpu="8", memory="32Gi")
    objects.api.post(f"/api/v1/namespaces/{ns}/resourcequotas",
                     {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team"},
                      "spec": {"hard": {"cpu": "2"}}})
    write_status(objects, f"/api/v1/namespaces/{ns}/resourcequotas/team", {"hard": {"cpu": "2"}, "used": {"cpu": "0"}})
    scheduler: InProcess = in_process(name, QUOTA_POLICY)
    objects.podgroup("job", 2, min_resources={"cpu": "4"})   # its pods come once it is Inqueue (as vcjob's)
    wait_for(lambda: f"{ns}/job" in scheduler.cluster.snapshot().podgroups, "the cache to see the PodGroup", 10)
    wait_for(lambda: f"{ns}/team" in (scheduler.cluster.snapshot().resource_quotas or {}), "the quota to be read", 10)

    held = scheduler.cycle()
    [status] = [p for p in held.decisions.podgroups if p.name == f"{ns}/job"]
    assert status.phase == "Pending"
    assert any("resource quota team insufficient" in c.message and "limited: cpu 2" in c.message
               for c in status.conditions), status.conditions
    scheduler.cycle_until(lambda: any("resource quota team insufficient" in (c.get("message") or "")
                                      for c in (objects.read_podgroup("job").get("status") or {}).get("conditions")
                                      or []), 10, "the PodGroup condition to name the quota")
    assert phase(objects, "job") == "Pending"

    set_quota(objects, "team", "8")
    scheduler.cycle_until(lambda: phase(objects, "job") == "Inqueue", 15, "the job to be admitted once raised")
    for i in range(2):
        objects.pod(f"job-{i}", name, cpu="1", group="job")
    scheduler.cycle_until(lambda: len(objects.bound()) == 2, 15, "the job's pods to be bound")


def fill_node(objects: Objects, scheduler: str) -> str:
    ns = objects.namespace
    objects.priority_class(f"{ns}-low", 10)
    objects.priority_class(f"{ns}-high", 1000)
    node = f"{ns}-n0"
    objects.node(node, cpu="4", memory="16Gi")
    objects.podgroup("low", 1, priority_class=f"{ns}-low")
    for i in range(2):
        objects.pod(f"low-{i}", scheduler, cpu="2", group="low", priority_class=f"{ns}-low", labels={"app": "low"})
    return node


def test_a_budget_with_no_disruption_allowed_keeps_its_pods_from_preemption(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    ns = objects.namespace
    node = fill_node(objects, name)
    path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/keep-low"
    objects.api.post(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
                     {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep-low"},
                      "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "low"}}}})
    write_status(objects, path, {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2,
                                 "expectedPods": 2})
    scheduler: InProcess = in_process(name, PDB_POLICY)
    wait_for(lambda: scheduler.sees(ns, 2, nodes=1), "the cache to see the pods", 10)
    assert scheduler.cycle().binds.bound == 2
    with FakeKubelet(objects.api, ns):
        wait_for(lambda: all(p["status"]["phase"] == "Running" for p in objects.pods().values()),
                 "the low-priority pods to run", 10)
        objects.podgroup("high", 1, priority_class=f"{ns}-high")
        objects.pod("high-0", name, cpu="2", group="high", priority_class=f"{ns}-high")
        wait_for(lambda: scheduler.sees(ns, 3), "the cache to see the preemptor", 10)
        wait_for(lambda: f"{ns}/keep-low" in (scheduler.cluster.snapshot().disruption_budgets or {}),
                 "the budget to be read", 10)

        for _ in range(3):
            cycle = scheduler.cycle()
            # No victim chosen at all (without the plugin one is, and its Eviction answered 429:
            # test_connector_preempt.py), so nothing is even tried.
            assert cycle.decisions.evictions == [] and cycle.applied.eviction_blocked == 0
        assert set(objects.bound()) == {"low-0", "low-1"}

        # The budget allows one disruption now: one low pod is evicted and the preemptor takes its room.
        write_status(objects, path, {"disruptionsAllowed": 1})
        wait_for(lambda: scheduler.cluster.snapshot().disruption_budgets[f"{ns}/keep-low"].allowed == 1,
                 "the cache to see the budget's new status", 10)
        scheduler.cycle_until(lambda: objects.bound().get("high-0") == node, 30, "the preemptor to be bound")
    bound = objects.bound()
    assert len([p for p in bound if p.startswith("low-")]) == 1
