"""The numa-aware plugin on a real API server: Volcano's Numatopology CRD installed (copied from
v1.14.1, tests/integration/crds/), the objects written as Volcano's resource exporter would, and
Guaranteed pods asking volcano.sh/numa-topology-policy bound by our scheduler only where one NUMA
node holds their CPUs. Checked from the API server: where each pod was bound, and the waiting pod's
PodScheduled condition naming why. Unit level: tests/runtime/test_runtime_numa_aware.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from policydsl.cli import devcluster

from .connector_helpers import InProcess, Objects, unique_scheduler_name, wait_for

pytestmark = pytest.mark.integration

CRD = Path(__file__).resolve().parent / "crds" / "nodeinfo.volcano.sh_numatopologies.yaml"
NUMA_API = "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies"
POLICY = """policy "numa-test" version 1
actions [enqueue, allocate, backfill]
tier {
  plugin priority
  plugin gang
}
tier {
  plugin predicates
  plugin proportion
  plugin nodeorder
  plugin numa-aware weight 10
}
"""


def numatopology(name: str, free: str) -> dict:
    """Two NUMA nodes (= sockets) of four CPUs, two threads a core, single-numa-node, static."""
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name},
            "spec": {"policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                     "numares": {"cpu": {"allocatable": free, "capacity": 8}},
                     "cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2} for c in range(8)}}}


def guaranteed_pod(name: str, scheduler: str, cpu: str) -> dict:
    resources = {"cpu": cpu, "memory": "1Gi"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"volcano.sh/numa-topology-policy": "single-numa-node"}},
            "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": resources, "limits": resources}}]}}


def test_pods_bind_only_where_one_numa_node_holds_their_cpus(kube_cluster, objects: Objects, in_process,
                                                             tmp_path) -> None:
    shutil.copy(CRD, tmp_path / CRD.name)
    devcluster.install_crds(kube_cluster.cluster, tmp_path)
    name = unique_scheduler_name()
    ns = objects.namespace
    split, whole = f"{ns}-split", f"{ns}-whole"
    for node in (split, whole):
        objects.node(node, cpu="16", memory="32Gi")
    # `split` has 2 + 2 free CPUs (no NUMA node holds 4); `whole` all 8.
    for node, free in ((split, "0-1,6-7"), (whole, "0-7")):
        objects.api.post(NUMA_API, numatopology(node, free))
        objects.cluster_objects.append(f"{NUMA_API}/{node}")
    scheduler: InProcess = in_process(name, POLICY)
    for i in range(3):
        objects.api.post(f"/api/v1/namespaces/{ns}/pods", guaranteed_pod(f"p{i}", name, "4"))
    wait_for(lambda: scheduler.sees(ns, 3, nodes=2), "the cache to see the pods and nodes", 10)
    wait_for(lambda: {split, whole} <= set(scheduler.cluster.snapshot().numatopologies),
             "the Numatopologies to be read", 10)

    first = scheduler.cycle()
    assert first.binds.bound == 2
    assert sorted(map(sorted, first.decisions.numa.values())) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in objects.pods().values()}
    assert sorted(n for n in bound.values() if n) == [whole, whole]
    [waiting] = [p for p, n in bound.items() if not n]
    # The exporter has not reported the bound pods' CPUs yet: the scheduler's view keeps them taken.
    assert scheduler.cycle().binds.bound == 0

    def reason() -> str:
        pod = objects.pods()[waiting]
        conditions = (pod.get("status") or {}).get("conditions") or []
        return " ".join(c.get("message") or "" for c in conditions if c.get("type") == "PodScheduled")
    scheduler.cycle_until(lambda: "could not align the pod's exclusive CPUs" in reason(), 15,
                          "the waiting pod's condition to say why")
    assert "had no free CPUs in their Numatopology" in reason()
