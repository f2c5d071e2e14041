"""Dynamic Resource Allocation on the dev cluster: ResourceSlices published as a DRA driver would
(kubernetes-sigs/dra-example-driver's GPUs, node-local pools), a DeviceClass, ResourceClaims; the
connector watches them, allocates as kube-scheduler's DynamicResources plugin, writes each claim's
finalizer, `status.allocation` and `status.reservedFor` before the Binding, and a pod that no free
device fits waits with kube-scheduler's words. The dev cluster runs no DRA driver: the API server
validates what is written."""

from __future__ import annotations

from typing import Any

import pytest
from polling import wait_for

from .connector_helpers import Objects, unique_scheduler_name

pytestmark = pytest.mark.integration

API = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def _device_class(objects: Objects, name: str) -> None:
    objects.api.post(f"{API}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    objects.cluster_objects.append(f"{API}/deviceclasses/{name}")


def _gpus(objects: Objects, node: str, models: list[str]) -> None:
    name = f"{node}-gpus"
    objects.api.post(f"{API}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": m}, "index": {"int": i}},
                              "capacity": {"memory": {"value": "80Gi"}}} for i, m in enumerate(models)]}})
    objects.cluster_objects.append(f"{API}/resourceslices/{name}")


def _claim(objects: Objects, name: str, cls: str, count: int = 1, same_model: bool = False,
           model: str | None = None) -> None:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if model:
        exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}]
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}]}
    if same_model:
        devices["constraints"] = [{"matchAttribute": f"{DRIVER}/model"}]
    objects.api.post(f"{API}/namespaces/{objects.namespace}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": devices}})


def _pod(objects: Objects, name: str, scheduler: str, claim: str) -> None:
    objects.api.post(f"/api/v1/namespaces/{objects.namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}})


def _read_claim(objects: Objects, name: str) -> dict:
    return objects.api.get(f"{API}/namespaces/{objects.namespace}/resourceclaims/{name}")


def _cleanup_claims(objects: Objects) -> None:
    # allocated claims carry the delete-protection finalizer: take it off so the namespace goes
    for item in objects.api.get(f"{API}/namespaces/{objects.namespace}/resourceclaims")["items"]:
        path = f"{API}/namespaces/{objects.namespace}/resourceclaims/{item['metadata']['name']}"
        objects.api.merge_patch(path, {"metadata": {"finalizers": None}})


def test_claims_are_allocated_and_written_before_the_binding(objects: Objects, in_process) -> None:
    name, ns = unique_scheduler_name(), objects.namespace
    cls = f"gpu-{ns}"
    objects.node(f"{ns}-n0", cpu="4")
    objects.node(f"{ns}-n1", cpu="4")
    _device_class(objects, cls)
    _gpus(objects, f"{ns}-n0", ["A", "B"])           # no two of a model: the pair cannot go here
    _gpus(objects, f"{ns}-n1", ["A", "A", "B"])
    _claim(objects, "pair", cls, count=2, same_model=True)
    _claim(objects, "one", cls, model="B")
    _claim(objects, "too-many", cls, count=4)
    _pod(objects, "trainer", name, "pair")
    _pod(objects, "single", name, "one")
    _pod(objects, "greedy", name, "too-many")
    try:
        scheduler = in_process(name)
        wait_for(lambda: scheduler.sees(ns, 3), "the cache to see the pods")
        scheduler.cycle_until(lambda: len(objects.bound()) == 2, 30, "the two pods bound")
        assert objects.bound()["trainer"] == f"{ns}-n1"
        pair = _read_claim(objects, "pair")
        results = pair["status"]["allocation"]["devices"]["results"]
        assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
        assert {r["pool"] for r in results} == {f"{ns}-n1"}
        assert [r["name"] for r in pair["status"]["reservedFor"]] == ["trainer"]
        assert "resource.kubernetes.io/delete-protection" in pair["metadata"]["finalizers"]
        one = _read_claim(objects, "one")["status"]["allocation"]["devices"]["results"]
        node = objects.bound()["single"]
        taken = {(r["pool"], r["device"]) for r in results}
        assert len(one) == 1 and (one[0]["pool"], one[0]["device"]) not in taken and one[0]["pool"] == node
        decisions = scheduler.cycle().decisions
        (reason,) = decisions.reasons_for(f"{ns}/greedy")
        assert "cannot allocate all claims" in reason.message
        assert "allocation" not in (_read_claim(objects, "too-many").get("status") or {})
    finally:
        _cleanup_claims(objects)
