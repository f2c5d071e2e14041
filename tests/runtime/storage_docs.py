"""Kubernetes dicts of the storage a pod claims, for tests: nodes, PersistentVolumes, claims,
StorageClasses, CSINodes and pods with claim volumes, as YAML files or an API server hold them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
LOCAL = "local"              # WaitForFirstConsumer, no provisioner: static local PVs only
NS = "ns"


def node_doc(name: str, cpu: str = "4", labels: Mapping[str, str] | None = None,
             allocatable: Mapping[str, object] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {HOST: name, **(labels or {})}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110", **(allocatable or {})}}}


def storage_class(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner",
                  topologies: Iterable[tuple[str, Iterable[str]]] = (), default: bool = False) -> dict:
    doc: dict = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                 "provisioner": provisioner, "volumeBindingMode": mode}
    topologies = list(topologies)
    if topologies:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in topologies]}]
    if default:
        doc["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return doc


def pv_doc(name: str, node: str | None = None, size: str = "10Gi", cls: str = LOCAL,
           modes: Iterable[str] = ("ReadWriteOnce",), claim: str | None = None, labels: Mapping[str, str] | None = None,
           driver: str | None = None, affinity: list | None = None, phase: str | None = None,
           volume_mode: str | None = None) -> dict:
    spec: dict = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
                  "persistentVolumeReclaimPolicy": "Retain"}
    if node is not None:
        affinity = [{"matchExpressions": [{"key": HOST, "operator": "In", "values": [node]}]}]
    if affinity is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": affinity}}
    if claim is not None:
        spec["claimRef"] = {"namespace": NS, "name": claim}
    if driver is not None:
        spec["csi"] = {"driver": driver, "volumeHandle": f"handle-{name}"}
    else:
        spec["local"] = {"path": f"/mnt/{name}"}
    if volume_mode:
        spec["volumeMode"] = volume_mode
    doc = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": dict(labels or {})},
           "spec": spec}
    if phase:
        doc["status"] = {"phase": phase}
    return doc


def pvc_doc(name: str, cls: str | None = LOCAL, size: str = "5Gi", volume: str | None = None,
            modes: Iterable[str] = ("ReadWriteOnce",), annotations: Mapping[str, str] | None = None,
            phase: str | None = None, deleting: bool = False, selector: dict | None = None,
            owner: str | None = None) -> dict:
    spec: dict = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    if selector is not None:
        spec["selector"] = selector
    meta: dict = {"name": name, "namespace": NS, "uid": f"uid-claim-{name}", "annotations": dict(annotations or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{NS}-{owner}",
                                    "controller": True}]
    doc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
    if volume is not None:
        spec["volumeName"] = volume
        doc["status"] = {"phase": phase or "Bound"}
        meta["annotations"].setdefault("pv.kubernetes.io/bind-completed", "yes")
    elif phase:
        doc["status"] = {"phase": phase}
    return doc


def csinode_doc(node: str, limits: Mapping[str, int]) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
            "spec": {"drivers": [{"name": d, "nodeID": node, "allocatable": {"count": c}} for d, c in limits.items()]}}


def claim_pod(name: str, claims: Iterable[str] = (), cpu: str = "100m", group: str | None = None,
              node: str | None = None, ephemeral: Iterable[str] = (), extra_volumes: Iterable[dict] = (),
              priority: int | None = None, scheduler: str = "volcano", **spec: object) -> dict:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    volumes += [{"name": e, "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                                                                          "resources": {"requests": {"storage": "1Gi"}}}}}}
                for e in ephemeral]
    volumes += list(extra_volumes)
    body: dict = {"schedulerName": scheduler, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                  **spec}
    if volumes:
        body["volumes"] = volumes
    if node:
        body["nodeName"] = node
    if priority is not None:
        body["priority"] = priority
    meta: dict = {"name": name, "namespace": NS, "uid": f"uid-{NS}-{name}", "creationTimestamp": "2026-01-01T00:00:00Z"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body,
            "status": {"phase": "Running" if node else "Pending"}}


def podgroup_doc(name: str, min_member: int) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
            "spec": {"minMember": min_member}, "status": {"phase": "Inqueue"}}
