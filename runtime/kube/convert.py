"""Kubernetes objects as the API sends them (JSON dicts) to the cluster model.

Parsing is `runtime.cluster.objects`' (the same code reads snapshot files), one object at a time.
Items of a List answer carry no `kind`, so the caller says which kind it listed. Objects the
typed client returned can be turned into dicts with `ApiClient.sanitize_for_serialization`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.cluster.model import (
    POD_FAILED, POD_SUCCEEDED, ClusterState, DisruptionBudget, Node, Pod, PodGroup, QueueObject, ResourceQuota,
)
from runtime.cluster.objects import ObjectError, read_object
from runtime.cluster.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from runtime.cluster.numa import NUMATOPOLOGY_API, NumaTopology
from runtime.cluster.topology import TOPOLOGY_API, HyperNode

VOLCANO_API = "scheduling.volcano.sh/v1beta1"


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool


def _with_kind(obj: dict[str, Any], kind: str, api_version: str) -> dict[str, Any]:
    if obj.get("kind") == kind and obj.get("apiVersion"):
        return obj
    return {**obj, "kind": kind, "apiVersion": obj.get("apiVersion") or api_version}


def node_from(obj: dict[str, Any]) -> Node:
    scratch = ClusterState()
    read_object(_with_kind(obj, "Node", "v1"), scratch)
    return next(iter(scratch.nodes.values()))


def pod_from(obj: dict[str, Any], priority_classes: Mapping[str, int]) -> Pod:
    """The pod; its priority from spec.priority, else from `priority_classes` (only read)."""
    scratch = ClusterState(priority_classes=priority_classes)  # type: ignore[arg-type]
    read_object(_with_kind(obj, "Pod", "v1"), scratch)
    return next(iter(scratch.pods.values()))


def podgroup_from(obj: dict[str, Any]) -> PodGroup:
    scratch = ClusterState()
    read_object(_with_kind(obj, "PodGroup", VOLCANO_API), scratch)
    return next(iter(scratch.podgroups.values()))


def hypernode_from(obj: dict[str, Any]) -> HyperNode:
    """A HyperNode (topology.volcano.sh/v1alpha1), as the cache watches them."""
    scratch = ClusterState()
    read_object(_with_kind(obj, "HyperNode", TOPOLOGY_API), scratch)
    return next(iter(scratch.hypernodes.values()))


def numatopology_from(obj: dict[str, Any]) -> NumaTopology:
    """A node's Numatopology (nodeinfo.volcano.sh/v1alpha1, Volcano's resource exporter), for numa-aware."""
    scratch = ClusterState()
    read_object(_with_kind(obj, "Numatopology", NUMATOPOLOGY_API), scratch)
    return next(iter(scratch.numatopologies.values()))


def queue_from(obj: dict[str, Any]) -> QueueObject:
    scratch = ClusterState()
    read_object(_with_kind(obj, "Queue", VOLCANO_API), scratch)
    return next(iter(scratch.queues.values()))


def priority_class_from(obj: dict[str, Any]) -> PriorityClass:
    scratch = ClusterState()
    read_object(_with_kind(obj, "PriorityClass", "scheduling.k8s.io/v1"), scratch)
    name, value = next(iter(scratch.priority_classes.items()))
    return PriorityClass(name, value, bool(obj.get("globalDefault")))


def namespace_from(obj: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """A Namespace's name and labels."""
    scratch = ClusterState()
    read_object(_with_kind(obj, "Namespace", "v1"), scratch)
    return next(iter(scratch.namespaces.items()))


def volume_from(obj: dict[str, Any]) -> PersistentVolume:
    scratch = ClusterState()
    read_object(_with_kind(obj, "PersistentVolume", "v1"), scratch)
    return next(iter(scratch.storage.volumes.values()))


def claim_from(obj: dict[str, Any]) -> PersistentVolumeClaim:
    """The claim as the API server holds it: its class already defaulted by admission (a claim
    that names none stays without; the PV controller may assign the default later)."""
    scratch = ClusterState()
    read_object(_with_kind(obj, "PersistentVolumeClaim", "v1"), scratch)
    return next(iter(scratch.storage.claims.values()))


def storage_class_from(obj: dict[str, Any]) -> StorageClass:
    scratch = ClusterState()
    read_object(_with_kind(obj, "StorageClass", "storage.k8s.io/v1"), scratch)
    return next(iter(scratch.storage.classes.values()))


def csinode_from(obj: dict[str, Any]) -> CSINode:
    scratch = ClusterState()
    read_object(_with_kind(obj, "CSINode", "storage.k8s.io/v1"), scratch)
    return next(iter(scratch.storage.csinodes.values()))


def resource_quota_from(obj: dict[str, Any]) -> ResourceQuota:
    """A namespace's ResourceQuota (status.hard and status.used, as the resourcequota plugin reads them)."""
    scratch = ClusterState()
    read_object(_with_kind(obj, "ResourceQuota", "v1"), scratch)
    return next(iter((scratch.resource_quotas or {}).values()))


def disruption_budget_from(obj: dict[str, Any]) -> DisruptionBudget:
    """A PodDisruptionBudget (spec.selector, the disruption controller's status), for the pdb plugin."""
    scratch = ClusterState()
    read_object(_with_kind(obj, "PodDisruptionBudget", "policy/v1"), scratch)
    return next(iter((scratch.disruption_budgets or {}).values()))


def pod_matters(pod: Pod, scheduler_name: str) -> bool:
    """Pods the scheduler must know: its own (to place, or counting for their gang), and every
    other pod that holds room on a node."""
    if pod.scheduler_name == scheduler_name:
        return pod.phase != POD_FAILED
    return pod.node_name is not None and pod.phase not in (POD_SUCCEEDED, POD_FAILED)


def object_key(obj: dict[str, Any]) -> str:
    """namespace/name for namespaced objects, name otherwise."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


__all__ = [
    "ObjectError", "PriorityClass", "node_from", "pod_from", "namespace_from", "podgroup_from", "queue_from", "priority_class_from",
    "volume_from", "claim_from", "storage_class_from", "csinode_from", "resource_quota_from", "disruption_budget_from",
    "pod_matters", "object_key",
]
