"""`simulate --at T --snapshot-out FILE`: the simulated cluster at time T as Kubernetes objects,
the file `policydsl explain --snapshot` (and `simulate --snapshot`) reads.

Written from the run's own input documents (Workload generators expanded), so every field the
reader knows comes back as given: objects other than Pods and PodGroups as they were; each Pod
and PodGroup that exists at T with what the run changed — a pod's node, phase, uid, annotations
the scheduler wrote (device indices), its creation time (its arrival, as seconds from the Unix
epoch: the order jobs are taken in), deletionTimestamp while it is being evicted and its
nominated node; a PodGroup's phase and conditions; a Numatopology's free CPUs (the CPUs the run's
bound pods hold taken out, as the resource exporter would report them). The simulator's arrival annotation is
dropped (a placed pod cannot arrive later); the duration annotation stays (a run from this
snapshot starts each pod's duration again).

Pods with PersistentVolumeClaims or ResourceClaims are refused (SnapshotRefused): the run binds
and allocates their claims in place and those objects' state at T is not written yet.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

import yaml

from runtime.cluster.model import ClusterState
from runtime.cluster.numa import format_cpu_list
from runtime.simulation.workload import ARRIVAL_ANNOTATION, WORKLOAD_KIND, Document, flatten


class SnapshotRefused(ValueError):
    """The state cannot be written faithfully (the message says why, naming the objects)."""


def _key(doc: dict) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def state_documents(state: ClusterState, documents: list[Document], at: float) -> list[dict]:
    """The objects of `state` (the run's state at simulated time `at`), in input order."""
    claimed = sorted(k for k, p in state.pods.items() if p.volumes or p.resource_claims)
    if claimed:
        shown = ", ".join(claimed[:5]) + (f" and {len(claimed) - 5} more" if len(claimed) > 5 else "")
        raise SnapshotRefused(f"pods with PersistentVolumeClaims or ResourceClaims cannot be written at a time yet "
                              f"(the run binds and allocates their claims in place): {shown}")
    out: list[dict] = []
    written: set[tuple[str, str]] = set()
    for _, doc in flatten(documents):
        if not isinstance(doc, dict) or doc.get("kind") == WORKLOAD_KIND:
            continue
        kind = doc.get("kind")
        if kind == "Pod":
            key = _key(doc)
            pod = state.pods.get(key)
            if pod is None or ("Pod", key) in written:      # not arrived yet, or gone
                continue
            written.add(("Pod", key))
            obj = copy.deepcopy(doc)
            meta = obj.setdefault("metadata", {})
            annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != ARRIVAL_ANNOTATION}
            annotations.update({k: v for k, v in pod.annotations.items() if k != ARRIVAL_ANNOTATION})
            meta["annotations"] = annotations
            meta["uid"] = pod.uid
            meta["creationTimestamp"] = _timestamp(pod.creation)
            if pod.releasing:
                meta["deletionTimestamp"] = _timestamp(at)
            else:
                meta.pop("deletionTimestamp", None)
            spec = obj.setdefault("spec", {})
            if pod.node_name:
                spec["nodeName"] = pod.node_name
            else:
                spec.pop("nodeName", None)
            status: dict[str, Any] = {"phase": pod.phase}
            if pod.nominated_node:
                status["nominatedNodeName"] = pod.nominated_node
            obj["status"] = status
            out.append(obj)
        elif kind == "PodGroup":
            key = _key(doc)
            group = state.podgroups.get(key)
            if group is None or ("PodGroup", key) in written:
                continue
            written.add(("PodGroup", key))
            obj = copy.deepcopy(doc)
            meta = obj.setdefault("metadata", {})
            if meta.get("annotations"):
                meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != ARRIVAL_ANNOTATION}
            meta["creationTimestamp"] = _timestamp(group.creation)
            if group.uid:
                meta["uid"] = group.uid
            status = {"phase": group.phase}
            if group.conditions:
                status["conditions"] = [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                                        for c in group.conditions]
            obj["status"] = status
            out.append(obj)
        elif kind == "Numatopology" and (doc.get("metadata") or {}).get("name") in state.numatopologies:
            obj = copy.deepcopy(doc)
            topology = state.numatopologies[obj["metadata"]["name"]]
            cpu = obj.setdefault("spec", {}).setdefault("numares", {}).setdefault("cpu", {})
            cpu["allocatable"] = format_cpu_list(topology.free_cpus)
            out.append(obj)
        else:
            out.append(copy.deepcopy(doc))
    return out


def write_snapshot(path: str, state: ClusterState, documents: list[Document], at: float, header: str) -> None:
    """Write the state at `at` to `path` as a YAML stream. Raises SnapshotRefused, OSError."""
    objects = state_documents(state, documents, at)
    text = "".join(f"# {line}\n" for line in header.splitlines())
    text += yaml.safe_dump_all(objects, sort_keys=False, allow_unicode=True)
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(text)
