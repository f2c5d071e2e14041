"""Builders of Dynamic Resource Allocation objects as Kubernetes dicts (resource.k8s.io/v1) for
the DRA tests: device classes, slices in the shape of kubernetes-sigs/dra-example-driver's GPUs,
claims, templates, pods that use them."""

from __future__ import annotations

API = "resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def node_doc(name: str, labels: dict | None = None, cpu: str = "32") -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"allocatable": {"cpu": cpu, "memory": "256Gi", "pods": "110"}}}


def device_class(name: str = "gpu", *expressions: str, driver: str = DRIVER) -> dict:
    selectors = [{"cel": {"expression": e}} for e in (f'device.driver == "{driver}"', *expressions)]
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": {"selectors": selectors}}


def gpu(name: str, memory: str = "80Gi", qualified: dict | None = None, taints: list | None = None,
        **attributes) -> dict:
    """A device; `attributes` by bare name (the driver's domain), `qualified` by full name."""
    attrs = {}
    for key, value in {**attributes, **(qualified or {})}.items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        attrs[key] = {kind: value}
    if taints:
        return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}, "taints": taints}
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}


def slice_doc(name: str, devices: list[dict], node: str | None = None, pool: str | None = None,
              driver: str = DRIVER, generation: int = 1, count: int = 1, node_selector: dict | None = None,
              all_nodes: bool = False, counters: list | None = None) -> dict:
    spec: dict = {"driver": driver, "pool": {"name": pool or node or name, "generation": generation,
                                             "resourceSliceCount": count}, "devices": devices}
    if node:
        spec["nodeName"] = node
    elif node_selector is not None:
        spec["nodeSelector"] = node_selector
    elif all_nodes:
        spec["allNodes"] = True
    if counters:
        spec["sharedCounters"] = counters
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def gpus_on(node: str, n: int = 4, **attributes) -> dict:
    return slice_doc(f"{node}-gpus", [gpu(f"gpu-{i}", index=i, **attributes) for i in range(n)], node=node)


def request(name: str = "gpu", cls: str = "gpu", count: int | None = None, mode: str | None = None,
            selectors: tuple[str, ...] = (), tolerations: list | None = None) -> dict:
    exact: dict = {"deviceClassName": cls}
    if count is not None:
        exact["count"] = count
    if mode:
        exact["allocationMode"] = mode
    if selectors:
        exact["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if tolerations:
        exact["tolerations"] = tolerations
    return {"name": name, "exactly": exact}


def first_available(name: str, *alternatives: dict) -> dict:
    return {"name": name, "firstAvailable": [{"name": a["name"], **a["exactly"]} for a in alternatives]}


def claim_spec(*requests: dict, match: list[tuple[str, list[str]]] | None = None) -> dict:
    devices: dict = {"requests": list(requests or [request()])}
    if match:
        devices["constraints"] = [{"matchAttribute": attr, **({"requests": reqs} if reqs else {})}
                                  for attr, reqs in match]
    return {"devices": devices}


def claim_doc(name: str, *requests: dict, ns: str = "ns", match=None, allocation: dict | None = None,
              reserved_for: list[str] | None = None) -> dict:
    doc: dict = {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
                 "spec": claim_spec(*requests, match=match)}
    status: dict = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": u, "uid": u} for u in reserved_for]
    if status:
        doc["status"] = status
    return doc


def allocation(node: str, *devices: tuple[str, str], pool: str | None = None, driver: str = DRIVER) -> dict:
    return {"devices": {"results": [{"request": r, "driver": driver, "pool": pool or node, "device": d}
                                    for r, d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def template_doc(name: str, *requests: dict, ns: str = "ns", match=None) -> dict:
    return {"apiVersion": API, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": claim_spec(*requests, match=match)}}


def pod_doc(name: str, claims: dict[str, str] | None = None, templates: dict[str, str] | None = None,
            group: str | None = None, ns: str = "ns", node: str | None = None, cpu: str = "1",
            priority: int | None = None, uid: str | None = None, deleting: bool = False) -> dict:
    refs = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    refs += [{"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()]
    meta: dict = {"name": name, "namespace": ns, "uid": uid or f"uid-{name}"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict = {"schedulerName": "volcano", "resourceClaims": refs,
                  "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


def podgroup_doc(name: str, min_member: int, ns: str = "ns", queue: str = "default") -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": min_member, "queue": queue}, "status": {"phase": "Inqueue"}}
