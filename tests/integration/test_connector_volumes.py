"""Storage on the dev cluster: local PVs pinned to nodes, WaitForFirstConsumer claims of a gang,
dynamic provisioning, a claim that does not exist yet, a device claim that does not exist (DRA), a provisioning that
never comes. The dev cluster runs no PV controller and no provisioner: tests/integration/
pv_controller.py plays them (binding a claim to the PV the scheduler pre-bound, provisioning for
the node it selected), a second after each claim is ready, so the tests see pods wait for their
claims."""

from __future__ import annotations

import time
from typing import Any

import pytest
from polling import wait_for

from runtime.kube.api import KubeApi

from .connector_helpers import Objects, unique_scheduler_name
from .poller import Poller
from .pv_controller import SELECTED_NODE, PVController

pytestmark = pytest.mark.integration

HOST = "kubernetes.io/hostname"


def _class(objects: Objects, name: str, provisioner: str = "kubernetes.io/no-provisioner") -> str:
    objects.api.post("/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"})
    objects.cluster_objects.append(f"/apis/storage.k8s.io/v1/storageclasses/{name}")
    return name


def _local_pv(objects: Objects, name: str, node: str, cls: str, size: str = "10Gi") -> None:
    objects.api.post("/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                 "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/{name}"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": HOST, "operator": "In", "values": [node]}]}]}}}})
    objects.cluster_objects.append(f"/api/v1/persistentvolumes/{name}")


def _claim(objects: Objects, name: str, cls: str, size: str = "5Gi") -> None:
    objects.api.post(f"/api/v1/namespaces/{objects.namespace}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                 "resources": {"requests": {"storage": size}}}})


def _pod(objects: Objects, name: str, scheduler: str, claims: list[str] = (), group: str | None = None,
         **spec: Any) -> None:
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group} if group else {}},
        "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}}],
                 "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)],
                 **spec}}
    objects.api.post(f"/api/v1/namespaces/{objects.namespace}/pods", body)


def _claims(objects: Objects) -> dict[str, dict]:
    items = objects.api.get(f"/api/v1/namespaces/{objects.namespace}/persistentvolumeclaims")["items"]
    return {c["metadata"]["name"]: c for c in items}


def _pv_node(api: KubeApi, name: str) -> str:
    pv = api.get(f"/api/v1/persistentvolumes/{name}")
    return pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]


class BindTimes(Poller):
    """When each pod of the namespace was first seen with a node (time.monotonic)."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        super().__init__(0.05)
        self.api, self.path = api, f"/api/v1/namespaces/{namespace}/pods"
        self.seen: dict[str, float] = {}

    def poll(self) -> None:
        for pod in self.api.get(self.path)["items"]:
            if pod["spec"].get("nodeName"):
                self.seen.setdefault(pod["metadata"]["name"], time.monotonic())


def test_a_gang_gets_a_distinct_local_volume_per_member_bound_before_its_pods(objects: Objects, in_process) -> None:
    name, ns = unique_scheduler_name(), objects.namespace
    cls = _class(objects, f"local-{ns}")
    nodes = [f"{ns}-n{i}" for i in range(4)]
    for i, node in enumerate(nodes):
        objects.node(node, cpu="1")                      # one member per node: a pod takes half of it
        _local_pv(objects, f"{ns}-pv{i}", node, cls)
    _local_pv(objects, f"{ns}-small", nodes[0], cls, size="1Gi")     # too small for any claim
    objects.podgroup("train", 4)
    for i in range(4):
        _claim(objects, f"data-{i}", cls)
        _pod(objects, f"train-{i}", name, [f"data-{i}"], group="train",
             affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                 {"labelSelector": {"matchLabels": {"job": "train"}}, "topologyKey": HOST}]}})
    scheduler = in_process(name)
    with PVController(objects.api, ns, {cls}, delay=1.0) as controller, BindTimes(objects.api, ns) as times:
        wait_for(lambda: scheduler.sees(ns, 4), "the cache to see the pods")
        scheduler.cycle_until(lambda: len(objects.bound()) == 4, 60, "the gang bound")
        wait_for(lambda: len(times.seen) == 4, "the bind times")
        bound = objects.bound()
        claims = _claims(objects)
        volumes = {pod: claims[f"data-{pod.split('-')[1]}"]["spec"]["volumeName"] for pod in bound}
        assert len(set(volumes.values())) == 4 and f"{ns}-small" not in volumes.values()
        assert len(set(bound.values())) == 4
        for pod, node in bound.items():
            assert _pv_node(objects.api, volumes[pod]) == node        # each member on its volume's node
            claim = f"data-{pod.split('-')[1]}"
            assert times.seen[pod] > controller.bound_at[claim], "a pod was bound before its claim"


def test_a_pod_whose_claim_is_missing_waits_then_runs_once_it_exists(objects: Objects, in_process) -> None:
    name, ns = unique_scheduler_name(), objects.namespace
    cls = _class(objects, f"local-{ns}")
    objects.node(f"{ns}-n0", cpu="2")
    _local_pv(objects, f"{ns}-pv0", f"{ns}-n0", cls)
    _pod(objects, "app", name, ["later"])
    scheduler = in_process(name)
    with PVController(objects.api, ns, {cls}):
        wait_for(lambda: scheduler.sees(ns, 1), "the cache to see the pod")
        decisions = scheduler.cycle().decisions
        assert [r.message for r in decisions.reasons_for(f"{ns}/app")] == [
            '0/1 nodes are available: persistentvolumeclaim "later" not found.']
        wait_for(lambda: objects.events_for("app"), "a FailedScheduling Event")
        _claim(objects, "later", cls)
        scheduler.cycle_until(lambda: objects.bound().get("app") == f"{ns}-n0", 30, "the pod bound")
        assert _claims(objects)["later"]["spec"]["volumeName"] == f"{ns}-pv0"


def test_a_pod_claiming_a_device_that_does_not_exist_waits_saying_so(objects: Objects, in_process) -> None:
    name, ns = unique_scheduler_name(), objects.namespace
    objects.node(f"{ns}-n0", cpu="2")
    _pod(objects, "gpu", name, resourceClaims=[{"name": "gpu", "resourceClaimName": "one-gpu"}])
    scheduler = in_process(name)
    wait_for(lambda: scheduler.sees(ns, 1), "the cache to see the pod")
    decisions = scheduler.cycle().decisions
    (reason,) = decisions.reasons_for(f"{ns}/gpu")
    # kube-scheduler's DynamicResources PreFilter words (test_connector_dra.py allocates devices)
    assert reason.message == '0/1 nodes are available: resourceclaim "one-gpu" not found.'
    event = wait_for(lambda: objects.events_for("gpu"), "a FailedScheduling Event")[0]
    assert 'resourceclaim "one-gpu" not found' in event["message"]
    assert objects.bound() == {}


def test_provisioning_for_the_selected_node_and_giving_back_what_never_comes(objects: Objects, in_process) -> None:
    name, ns = unique_scheduler_name(), objects.namespace
    fast = _class(objects, f"fast-{ns}", provisioner="csi.test.example.com")
    never = _class(objects, f"never-{ns}", provisioner="csi.test.example.com")
    for i in range(2):
        objects.node(f"{ns}-n{i}", cpu="2")
    _claim(objects, "fast-data", fast)
    _claim(objects, "stuck-data", never)
    _pod(objects, "fast", name, ["fast-data"])
    scheduler = in_process(name, volume_bind_timeout=3.0)
    with PVController(objects.api, ns, {fast, never}, provisions={fast}, delay=0.5):
        wait_for(lambda: scheduler.sees(ns, 1), "the cache to see the pod")
        scheduler.cycle_until(lambda: objects.bound().get("fast"), 30, "the provisioned pod bound")
        claim = _claims(objects)["fast-data"]
        assert claim["metadata"]["annotations"][SELECTED_NODE] == objects.bound()["fast"]
        assert _pv_node(objects.api, claim["spec"]["volumeName"]) == objects.bound()["fast"]

        # A claim nobody provisions: the scheduler waits (without holding up other pods), then gives it back.
        _pod(objects, "stuck", name, ["stuck-data"])
        wait_for(lambda: scheduler.sees(ns, 2), "the cache to see the pod")
        report = scheduler.scheduler.run_once()             # no drain: the wait goes on in the background
        assert f"{ns}/stuck" in report.decisions.volumes
        wait_for(lambda: (_claims(objects)["stuck-data"]["metadata"].get("annotations") or {}).get(SELECTED_NODE),
                 "the selected node written")
        _pod(objects, "plain", name)
        wait_for(lambda: scheduler.sees(ns, 3), "the cache to see the pod")
        scheduler.scheduler.run_once()
        wait_for(lambda: objects.bound().get("plain"), "the plain pod bound while the other waits", 10)
        assert "stuck" not in objects.bound()
        event = wait_for(lambda: [e for e in objects.events_for("stuck") if e["reason"] == "FailedBinding"],
                         "the give-back", 20)[0]
        assert "volume binding: its volumes were not bound within 3s" in event["message"]
        annotations = _claims(objects)["stuck-data"]["metadata"].get("annotations") or {}
        assert SELECTED_NODE not in annotations                # taken back: it may go elsewhere next time
        assert "stuck" not in objects.bound()
