"""Device asks the pod's per-container shape decides, read from the Pod object.

HAMi's vGPU device plugin gets one device list per container; the scheduler's model of a pod
keeps only its summed requests. A pod whose vGPU ask is split over several containers, or sits in
an init container, is therefore named as not evaluated (Pod.unsupported), so it waits rather than
be given one device list for all its containers (volcano#4505: a multi-container vGPU pod crashed
Volcano's scheduler with volcano-vgpu-device-plugin).
"""

from __future__ import annotations

from typing import Any

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
    containers = spec.get("containers") if isinstance(spec.get("containers"), list) else []
    init = spec.get("initContainers") if isinstance(spec.get("initContainers"), list) else []
    asking = [f"spec.containers[{i}]" for i, c in enumerate(containers) if _asks_vgpu(c)]
    asking_init = [f"spec.initContainers[{i}]" for i, c in enumerate(init) if _asks_vgpu(c)]
    if asking_init:
        return f"volcano.sh/vgpu-* in an init container ({', '.join(asking_init)})"
    if len(asking) > 1:
        return f"volcano.sh/vgpu-* in more than one container ({', '.join(asking)})"
    return None
