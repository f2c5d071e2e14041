"""Device-plugin stand-ins for the tests: what a node's device plugin does when the kubelet calls
Allocate for a container, written from the plugins' documented behaviour. They read only the
annotations the scheduler writes (and write only what the plugins write), never our engine, so
a test can tell whether each pod would get the cards the scheduler chose for it.

- volcano-sh/devices (GPU share, resource volcano.sh/gpu-memory; GPU number, volcano.sh/gpu-number;
  pkg/plugin/nvidia server.go Allocate, utils.go): it lists the node's Pending pods, keeps those
  asking its resource that are neither assigned (volcano.sh/gpu-assigned) nor being deleted,
  sorts them by volcano.sh/predicate-time (a pod without one, or with one that does not parse,
  sorts last), takes the first with a container asking exactly as many devices as the kubelet's
  request, serves the cards of its volcano.sh/gpu-index and marks it volcano.sh/gpu-assigned=true.
  The kubelet does not say which pod the call is for: the plugin guesses by the time.
- HAMi's volcano-vgpu-device-plugin (pkg/plugin/vgpu/util getOldestPod, PodAllocationSuccess; HAMi's
  docs/develop/protocol.md): it lists the node's Pending pods with volcano.sh/bind-time,
  volcano.sh/bind-phase `allocating` and volcano.sh/vgpu-node naming the node, takes the one with
  the smallest volcano.sh/vgpu-time (missing: last; ties: the first listed), sets its vgpu-time to
  the largest uint64 so it is not taken again, serves the first container's devices of
  volcano.sh/devices-to-allocate, erases them there and, with none left, flips bind-phase to
  `success`.
Both release the node lock after the call (when the scheduler takes one: Volcano's NodeLockEnable).

Pods are dicts as the API server returns them; each function returns the chosen pod, the cards
served and the annotations the plugin writes on it (the caller applies them: to the dict in a
unit test, to the API server on the dev cluster).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes.utils import parse_quantity

GPU_INDEX = "volcano.sh/gpu-index"
PREDICATE_TIME = "volcano.sh/predicate-time"
GPU_ASSIGNED = "volcano.sh/gpu-assigned"
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
VGPU_NODE = "volcano.sh/vgpu-node"
VGPU_TIME = "volcano.sh/vgpu-time"
BIND_TIME = "volcano.sh/bind-time"
BIND_PHASE = "volcano.sh/bind-phase"
TO_ALLOCATE = "volcano.sh/devices-to-allocate"
MAX_UINT64 = 2**64 - 1
GPU_SHARE_LOCK, VGPU_LOCK = "gpu", "hamivgpu"


@dataclass(frozen=True)
class Served:
    """One Allocate call's answer: the pod the plugin took it for, the cards it handed out
    (indices for volcano-sh/devices, UUIDs for HAMi), and what it writes on that pod."""

    pod: str                          # namespace/name
    cards: tuple
    writes: dict[str, str] = field(default_factory=dict)
    # The node lock the plugin releases after the call (Volcano's NodeLockEnable): volcano-sh/devices
    # `gpu`, HAMi's plugin util.VGPUDeviceName `hamivgpu`.
    node_lock: str = ""


class NoCandidate(Exception):
    """The plugin fails the Allocate call (the kubelet then fails the pod's admission)."""


def key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def _notes(pod: dict) -> dict:
    return pod["metadata"].get("annotations") or {}


def limit(container: dict, resource: str) -> int:
    """A container's limit of `resource` (the API server writes 3000 as "3k")."""
    value = ((container.get("resources") or {}).get("limits") or {}).get(resource, 0)
    return int(parse_quantity(value))


def _pending(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase", "Pending") == "Pending"


def _uint(text: str | None) -> int:
    try:
        value = int(text) if text is not None else MAX_UINT64
    except ValueError:
        return MAX_UINT64
    return value if 0 <= value <= MAX_UINT64 else MAX_UINT64


def volcano_allocate(node_pods: list[dict], resource: str, requested: int) -> Served:
    """volcano-sh/devices' Allocate on one node for a container asking `requested` devices of
    `resource` (gpu-memory in share mode, with a memory factor of 1; gpu-number in number mode)."""
    candidates = [p for p in node_pods
                  if _pending(p) and sum(limit(c, resource) for c in p["spec"]["containers"]) > 0
                  and _notes(p).get(GPU_ASSIGNED, "false") == "false"
                  and not p["metadata"].get("deletionTimestamp")]
    candidates.sort(key=lambda p: _uint(_notes(p).get(PREDICATE_TIME)))     # stable: list order on ties
    for pod in candidates:
        if any(limit(c, resource) == requested for c in pod["spec"]["containers"]):
            index = _notes(pod).get(GPU_INDEX)
            if not index:
                raise NoCandidate(f"{key(pod)} has no {GPU_INDEX}")
            try:
                cards = tuple(int(i) for i in index.split(","))
            except ValueError:
                raise NoCandidate(f"{key(pod)} has {GPU_INDEX}={index!r}") from None
            return Served(key(pod), cards, {GPU_ASSIGNED: "true"}, GPU_SHARE_LOCK)
    raise NoCandidate(f"no pending pod asks for {requested} {resource}")


def hami_allocate(node_pods: list[dict], node: str) -> Served:
    """HAMi's volcano-vgpu-device-plugin Allocate on `node`, one call per container: the pod's
    devices-to-allocate holds one list per vGPU container (`;`-separated, spec order); the call
    serves the first list not yet served and blanks it, and bind-phase turns `success` when none is
    left (HAMi's GetNextDeviceRequest / EraseNextDeviceTypeFromAnnotation)."""
    oldest = None
    for pod in node_pods:
        notes = _notes(pod)
        if not _pending(pod) or BIND_TIME not in notes or notes.get(BIND_PHASE) != "allocating" \
                or notes.get(VGPU_NODE) != node:
            continue
        if oldest is None or _uint(_notes(oldest).get(VGPU_TIME)) > _uint(notes.get(VGPU_TIME)):
            oldest = pod
    if oldest is None:
        raise NoCandidate("cannot get valid pod")
    containers = (_notes(oldest).get(TO_ALLOCATE) or "").split(";")
    served: tuple = ()
    rest: list[str] = []
    for entry in containers:
        devices = [d for d in entry.split(":") if d.count(",") >= 3]
        if not served and any(d.split(",")[1] == "NVIDIA" for d in devices):
            served = tuple(d.split(",")[0] for d in devices if d.split(",")[1] == "NVIDIA")
            rest.append("")
        else:
            rest.append(entry)
    if not served:
        raise NoCandidate(f"{key(oldest)}: device request not found")
    writes = {VGPU_TIME: str(MAX_UINT64), TO_ALLOCATE: ";".join(rest)}
    if not any(rest):
        writes[BIND_PHASE] = "success"
    return Served(key(oldest), served, writes, VGPU_LOCK)
