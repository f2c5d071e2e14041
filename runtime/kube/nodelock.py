"""Volcano's device node lock (deviceshare `node_lock`, Volcano's `deviceshare.NodeLockEnable`;
semantics from Volcano v1.14.1 pkg/scheduler/plugins/util/nodelock and the device Allocate calls).

Before a pod is given cards on a node, the scheduler sets a node annotation named after the device
(`gpu` for a GPU-share pod, i.e. one asking volcano.sh/gpu-memory; `hamivgpu` for a HAMi vGPU pod),
its value the time in RFC 3339. While it is set, no other such pod is given cards there: the node's
device plugin removes it once it has served the pod's Allocate call (volcano-sh/devices,
HAMi's volcano-vgpu-device-plugin), so the plugin never has two pending pods to tell apart. A lock
older than 5 minutes is stale and taken over; one whose value is no RFC 3339 time holds (Volcano
fails the allocation then too; remove the annotation). Written with the node's resourceVersion as
a precondition, so two schedulers never both take it. Here the lock is taken right before the
pod's Binding is sent, and released by the scheduler only when that Binding did not go through
(no plugin will serve the pod); a pod that finds the node locked is bound in a later cycle.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from runtime.cluster.decisions import Binding
from runtime.cluster.model import Pod
from runtime.engine import devices_vgpu as vg
from runtime.engine.devices import GPU_MEMORY
from runtime.kube.api import ApiError, KubeApi

GPU_SHARE_LOCK = "gpu"          # Volcano's gpushare Allocate: nodelock.LockNode(node, "gpu")
VGPU_LOCK = "hamivgpu"          # Volcano's vgpu DeviceName; HAMi's plugin releases util.VGPUDeviceName
STALE_S = 300.0
ATTEMPTS = 3
LOCKED = 423        # the status a bind not sent for a held lock reports (HTTP's Locked): no outage


def node_lock_on(plan) -> bool:
    """Whether the plan's deviceshare asks for the node lock."""
    share = plan.plugin("deviceshare")
    return bool(share is not None and share.arguments.get("node_lock"))


def lock_name(binding: Binding, pod: Pod | None) -> str | None:
    """The lock a binding takes, as Volcano's Allocate calls take them: a vGPU pod's, a GPU-share
    pod's (one asking gpu-memory: Volcano's GPU number takes none); None for any other pod."""
    if binding.devices.get(vg.VGPU_NUMBER):
        return VGPU_LOCK
    if pod is not None and pod.requests.get(GPU_MEMORY, 0) > 0 and \
            any(cards for resource, cards in binding.devices.items() if resource != vg.VGPU_NUMBER):
        return GPU_SHARE_LOCK
    return None


@dataclass(frozen=True)
class Held:
    node: str
    name: str
    stamp: str          # the value written: the lock is ours while the node still carries it


def rfc3339(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def parse_rfc3339(value: str) -> float | None:
    """Seconds since the epoch, or None when `value` is no RFC 3339 time (with its offset)."""
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


@dataclass(frozen=True)
class NotTaken:
    """Why the lock was not taken; `status` LOCKED when another holds it (the pod is bound in a
    later cycle: no outage), else the API server's answer (0: none came)."""

    detail: str
    status: int


def lock(api: KubeApi, node: str, name: str, now: float | None = None) -> Held | NotTaken:
    """Take the node's lock `name`: what is held, or why not. A write that lost a race with
    another change of the node (409) reads the node again, as Volcano retries (MaxLockRetry)."""
    now = time.time() if now is None else now
    path = f"/api/v1/nodes/{node}"
    for _ in range(ATTEMPTS):
        try:
            body = api.get(path)
        except ApiError as exc:
            return NotTaken(f"could not read node {node} to take its device lock {name}: {exc}", exc.status)
        held = (body["metadata"].get("annotations") or {}).get(name)
        if held is not None:
            since = parse_rfc3339(held)
            if since is None:
                return NotTaken(f"node {node}'s device lock annotation {name}={held!r} is no RFC 3339 time "
                                "(remove it)", LOCKED)
            if now - since <= STALE_S:
                return NotTaken(f"node {node} is locked for devices ({name} since {held}) until its device plugin "
                                f"serves the pod given cards there before, or for at most {STALE_S / 60:.0f} "
                                "minutes", LOCKED)
        stamp = rfc3339(now)
        try:
            api.merge_patch(path, {"metadata": {"resourceVersion": body["metadata"]["resourceVersion"],
                                                "annotations": {name: stamp}}})
        except ApiError as exc:
            if exc.status == 409:
                continue
            return NotTaken(f"could not take node {node}'s device lock {name}: {exc}", exc.status)
        return Held(node, name, stamp)
    return NotTaken(f"node {node} kept changing while its device lock {name} was taken", LOCKED)


def release(api: KubeApi, held: Held) -> None:
    """Remove the lock if the node still carries ours (never another's taken over since)."""
    path = f"/api/v1/nodes/{held.node}"
    try:
        body = api.get(path)
        if (body["metadata"].get("annotations") or {}).get(held.name) != held.stamp:
            return
        api.merge_patch(path, {"metadata": {"resourceVersion": body["metadata"]["resourceVersion"],
                                            "annotations": {held.name: None}}})
    except ApiError:
        pass    # it goes stale in STALE_S
