"""Device asks the pod's per-container shape decides, read from the Pod object.

HAMi's vGPU device plugin gets one device list per container; the scheduler's model of a pod
keeps its summed requests, and, when more than one container asks vGPU, each asking container's
vGPU requests (Pod.vgpu_containers; volcano#4505: such a pod crashed Volcano's scheduler with
volcano-vgpu-device-plugin). An init container's vGPU ask is named as not evaluated
(Pod.unsupported): Volcano's ExtractResourceRequest reads only spec.containers, so it writes no
device list for an init container, and the device plugin would then serve the init container the
first regular container's list.
"""

from __future__ import annotations

from typing import Any

from runtime.cluster.podspec import container_requests

VGPU_PREFIX = "volcano.sh/vgpu-"


def _asks_vgpu(container: Any) -> bool:
    if not isinstance(container, dict):
        return False
    resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    return any(isinstance(part, dict) and any(str(name).startswith(VGPU_PREFIX) for name in part)
               for part in (resources.get("limits"), resources.get("requests")))


def vgpu_container_problem(obj: dict) -> str | None:
    """The field to name when the pod's vGPU ask cannot be written one device list per container."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    init = spec.get("initContainers") if isinstance(spec.get("initContainers"), list) else []
    asking_init = [f"spec.initContainers[{i}]" for i, c in enumerate(init) if _asks_vgpu(c)]
    if asking_init:
        return f"volcano.sh/vgpu-* in an init container ({', '.join(asking_init)})"
    return None


def vgpu_container_asks(obj: dict) -> tuple[dict[str, int], ...]:
    """Per spec.containers entry, in order, its vGPU requests (limits standing in) when it asks vGPU
    count or memory (as Volcano's ExtractResourceRequest picks them), else {}; () for a pod of one
    container or none asking. Every container keeps its place: HAMi's protocol writes one device
    list per container, and its plugin takes the n-th list for spec.containers[n]."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    containers = spec.get("containers") if isinstance(spec.get("containers"), list) else []
    asks: list[dict[str, int]] = []
    for i, c in enumerate(containers):
        mine: dict[str, int] = {}
        if _asks_vgpu(c):
            requests = container_requests(c, f"spec.containers[{i}]")
            mine = {k: v for k, v in requests.items() if k.startswith(VGPU_PREFIX)}
            if not (mine.get(VGPU_PREFIX + "number", 0) or mine.get(VGPU_PREFIX + "memory", 0)):
                mine = {}
        asks.append(mine)
    return tuple(asks) if len(asks) > 1 and any(asks) else ()
