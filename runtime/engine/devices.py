"""Device resources whose device plugin serves a pod only with the cards the scheduler chose.

Volcano's GPU share and GPU number (volcano-sh/devices) and HAMi's vGPU read the cards from
annotations the scheduler writes; a pod placed by node totals alone gets no card, or another
pod's. So a pending pod asking such a resource that none of the policy's device plans evaluates
is held (Snapshot status HELD) with a reason naming the resource, rather than placed as if it
were an ordinary extended resource. Resources of other device plugins (nvidia.com/gpu, ...) pick
their cards on the node themselves and stay ordinary resources unless a `device` block manages
them.

Also here: the node annotation by which volcano-sh/devices takes cards out of service
(volcano.sh/gpu-unhealthy-ids, card indices separated by commas).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from compiler.plan import DevicePlan
from runtime.engine import devices_vgpu as vg

GPU_NUMBER = "volcano.sh/gpu-number"
GPU_MEMORY = "volcano.sh/gpu-memory"
# Written on the Binding (the API server copies its annotations onto the pod), as Volcano's
# deviceshare does at allocation: the cards, and when they were chosen (nanoseconds since the
# epoch), by which volcano-sh/devices picks which pending pod on the node an Allocate call serves.
GPU_INDEX = "volcano.sh/gpu-index"
PREDICATE_TIME = "volcano.sh/predicate-time"
# Node annotation of volcano-sh/devices: the indices of its cards that are unhealthy.
UNHEALTHY_GPU_IDS = "volcano.sh/gpu-unhealthy-ids"
VGPU_RESOURCES = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-memory-percentage",
                  "volcano.sh/vgpu-cores")
# Every resource whose device plugin needs the scheduler's card choice.
CHOSEN_BY_SCHEDULER = (GPU_NUMBER, GPU_MEMORY, *VGPU_RESOURCES)
# Ascend NPUs shared as Volcano's device code defines them: HAMi's vNPU (AscendHAMiVNPUEnable;
# how_to_use_vnpu.md and Volcano's default device config: a chip count `huawei.com/Ascend<chip>`
# with its `huawei.com/Ascend<chip>-memory`) and MindCluster's vNPU (AscendMindClusterVNPUEnable:
# `huawei.com/npu-core`). Their device plugins serve the chips the scheduler wrote, and neither
# mode is evaluated here: with device sharing on, a pod asking one waits naming it. (MindCluster's
# whole-chip names, e.g. huawei.com/Ascend910, are chosen by their device plugin: ordinary.)
ASCEND_VNPU_CHIPS = ("huawei.com/Ascend310P", "huawei.com/Ascend910A", "huawei.com/Ascend910B2",
                     "huawei.com/Ascend910B3", "huawei.com/Ascend910B4", "huawei.com/Ascend910B4-1")
ASCEND_NPU_CORE = "huawei.com/npu-core"


def is_ascend_vnpu(resource: str) -> bool:
    """Whether `resource` is an Ascend vNPU resource of Volcano's device code (see above)."""
    return resource in ASCEND_VNPU_CHIPS or resource == ASCEND_NPU_CORE or \
        (resource.startswith("huawei.com/Ascend") and resource.endswith("-memory"))


@dataclass(frozen=True)
class DeviceHold:
    """Why a pending pod is held for its device request: the field named and the sentence."""

    field: str
    message: str


def evaluated_resources(plans: Iterable[DevicePlan]) -> set[str]:
    """The resources some device plan places card by card."""
    out: set[str] = set()
    for plan in plans:
        out.add(plan.resource)
        if plan.sharing == "memory":
            out.add(plan.memory_resource or GPU_MEMORY)
            if plan.cores_resource:
                out.add(plan.cores_resource)
    return out


def _why_not(resource: str) -> str:
    if resource in VGPU_RESOURCES:
        return "no device plan places it (deviceshare's `vgpu` is off), so no card would be written for HAMi's " \
               "device plugin"
    if resource == GPU_MEMORY:
        return "no device plan places it (deviceshare's `gpu_sharing` is off), so no card would be written for " \
               "volcano-sh/devices"
    return "no device plan places it (deviceshare's `gpu_number` is off), so no card would be written for " \
           "volcano-sh/devices"


def device_hold(requests: Mapping[str, int], plans: list[DevicePlan], evaluated: set[str],
                sharing: bool = False) -> DeviceHold | None:
    """Why a pod asking `requests` cannot be placed with cards its device plugin honours, or None.
    `sharing`: the policy turned device sharing on (a device plan, or deviceshare's `vgpu`)."""
    if sharing:
        for resource in sorted(r for r, amount in requests.items()
                               if amount > 0 and is_ascend_vnpu(r) and r not in evaluated):
            return DeviceHold(f"resources {resource}",
                              f"pod asks for {resource}, an Ascend vNPU resource whose device plugin serves the "
                              "chips the scheduler chose; this scheduler does not evaluate Ascend vNPU yet "
                              "(Volcano's AscendHAMiVNPUEnable / AscendMindClusterVNPUEnable), so it is not placed "
                              "without its chips")
    for resource in CHOSEN_BY_SCHEDULER:
        if requests.get(resource, 0) > 0 and resource not in evaluated:
            return DeviceHold(f"resources {resource}",
                              f"pod asks for {resource}, which this scheduler does not evaluate: "
                              f"{_why_not(resource)}; it is not placed without its cards")
    for plan in plans:
        memory = plan.memory_resource or GPU_MEMORY
        if plan.sharing == "memory" and plan.resource == GPU_NUMBER and memory == GPU_MEMORY \
                and requests.get(GPU_NUMBER, 0) > 0 and requests.get(GPU_MEMORY, 0) > 0:
            # Volcano (v1.14.1 gpushare Allocate) puts the memory on one card, then overwrites
            # volcano.sh/gpu-index with gpu-number idle cards that its filter never checked, still
            # charging the first card: no placement of both that volcano-sh/devices would serve.
            return DeviceHold(f"resources {GPU_NUMBER}",
                              f"pod asks for {GPU_NUMBER} beside {GPU_MEMORY}: GPU sharing places a pod's "
                              f"{GPU_MEMORY} on one card and volcano-sh/devices serves no card count beside it "
                              f"(ask {GPU_MEMORY} alone to share a card, or {GPU_NUMBER} alone with deviceshare's "
                              "`gpu_number` for whole cards); it is not placed")
        if plan.sharing == "memory" and not plan.card_memory and requests.get(plan.resource, 0) > 0 \
                and not requests.get(memory, 0):
            # A shared plan knows a card request only by its memory: without it the card's share
            # is unknown (Volcano's GPU share does not place it and its device plugin serves it no card).
            hint = " (deviceshare's `gpu_number` places whole cards)" if plan.resource == GPU_NUMBER else ""
            return DeviceHold(f"resources {plan.resource}",
                              f"pod asks for {plan.resource} without {memory}: cards of {plan.resource} are shared "
                              f"by memory{hint}; it is not placed without its share of a card")
    return None


def held_for_devices(pods: list, requests: np.ndarray, status: np.ndarray, pending: int,
                     resource_index: Mapping[str, int], plans: list[DevicePlan],
                     vgpu: bool = False) -> dict[int, DeviceHold]:
    """Pending tasks held for their device requests (task -> why). Only tasks asking one of the
    resources in question are looked at, so clusters without them pay one column test each.
    `vgpu`: deviceshare places HAMi vGPU (its resources are evaluated, its pods checked for what
    of vGPU is not: runtime.engine.devices_vgpu.vgpu_hold)."""
    columns = [resource_index[r] for r in CHOSEN_BY_SCHEDULER if r in resource_index]
    sharing = vgpu or bool(plans)
    if sharing:
        columns += [i for r, i in resource_index.items() if is_ascend_vnpu(r)]
    if not columns:
        return {}
    asking = np.flatnonzero((requests[:, columns] > 0).any(axis=1) & (status == pending))
    if not len(asking):
        return {}
    evaluated = evaluated_resources(plans) | (set(VGPU_RESOURCES) if vgpu else set())
    out = {}
    for t in asking.tolist():
        why = device_hold(pods[t].requests, plans, evaluated, sharing)
        if why is None and vgpu and any(pods[t].requests.get(r, 0) > 0 for r in VGPU_RESOURCES):
            why = _vgpu_hold(pods[t])
        if why is not None:
            out[t] = why
    return out


def _vgpu_hold(pod) -> DeviceHold | None:
    if vg.vgpu_need(pod.requests) is None:
        asked = [r for r in (vg.VGPU_CORES, vg.VGPU_PERCENT) if pod.requests.get(r, 0) > 0]
        return DeviceHold(f"resources {asked[0]}",
                          f"pod asks for {' and '.join(asked)} without {vg.VGPU_NUMBER} or "
                          f"{vg.VGPU_MEMORY}: Volcano places no vGPU for it; it is not placed without its cards")
    field_why = vg.vgpu_hold(pod)
    return DeviceHold(*field_why) if field_why is not None else None


def held_cards(pod: Any, device: str, memory_resource: str | None) -> tuple[int, ...]:
    """The cards of `device` on its node a placed pod holds: the cards its binding named (kept on the
    pod), else Volcano's volcano.sh/gpu-index annotation when it asks the device; () when none or
    the annotation does not parse."""
    cards = pod.devices.get(device)
    if cards is not None:
        return tuple(cards)
    asks = pod.requests.get(device) or (memory_resource and pod.requests.get(memory_resource))
    if not asks or GPU_INDEX not in pod.annotations:
        return ()
    try:
        return tuple(int(c) for c in pod.annotations[GPU_INDEX].split(",") if c != "")
    except ValueError:
        return ()


def unhealthy_cards(annotations: Mapping[str, str]) -> set[int]:
    """The card indices volcano-sh/devices marks unhealthy on a node. An index that is not a
    number is skipped, as Volcano does (it logs a warning)."""
    value = annotations.get(UNHEALTHY_GPU_IDS)
    if not value:
        return set()
    out = set()
    for part in value.split(","):
        try:
            out.add(int(part.strip()))
        except ValueError:
            continue
    return out


# --- what the node's own device software says about its cards ------------------------------
# NVIDIA GPU Feature Discovery (k8s-device-plugin docs/gpu-feature-discovery): the model, the
# memory of one card in MiB and the number of cards. Under MIG's `single` strategy the three
# describe the MIG devices nvidia.com/gpu then counts; under `mixed`, each device type
# nvidia.com/mig-<g>g.<mem>gb has its own `<type>.memory` and `<type>.count`.
GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_COUNT = "nvidia.com/gpu.count"
MIG_PREFIX = "nvidia.com/mig-"
MIB = 1024 * 1024
# HAMi's device plugin registers each card with its NUMA node: `UUID,count,memory MiB,cores,type,
# numa,health:` per card (HAMi's docs/develop/protocol.md), or a JSON list of {id, ..., numa} in
# later releases.
HAMI_REGISTER = "hami.io/node-nvidia-register"


def _label_int(labels: Mapping[str, str], key: str) -> int | None:
    try:
        value = int(str(labels.get(key, "")).strip())
    except ValueError:
        return None
    return value if value > 0 else None


def gfd_card_memory(labels: Mapping[str, str], resource: str, advertised: int) -> int | None:
    """Bytes of one advertised card of `resource` by GPU Feature Discovery's labels, or None when
    they do not say. Only NVIDIA's resources; a MIG resource reads its own type's labels. When the
    node advertises more of the resource than GFD counts cards (time-slicing replicas of one card),
    a card's memory is divided among them, so a card's memory is never counted twice."""
    if not resource.startswith("nvidia.com/"):
        return None
    if resource.startswith(MIG_PREFIX):
        memory, count = _label_int(labels, resource + ".memory"), _label_int(labels, resource + ".count")
    else:
        memory, count = _label_int(labels, GFD_MEMORY), _label_int(labels, GFD_COUNT)
    if memory is None:
        return None
    total = memory * MIB
    if count and advertised > count:
        return total * count // advertised
    return total


def card_model(labels: Mapping[str, str], model_label: str) -> str | None:
    """The node's card model: the device block's `model_label` where the node has it (our own
    label overrides), else GPU Feature Discovery's nvidia.com/gpu.product; None when neither."""
    value = labels.get(model_label)
    if value:
        return value
    return labels.get(GFD_PRODUCT) or None


def hami_numa_groups(annotations: Mapping[str, str]) -> dict[int, int]:
    """Card index -> NUMA node from HAMi's register annotation; {} when absent or unreadable
    (a card without a readable NUMA field is left out: no group is guessed for it)."""
    value = annotations.get(HAMI_REGISTER, "").strip()
    if not value:
        return {}
    out: dict[int, int] = {}
    if value.startswith("["):
        try:
            cards = json.loads(value)
        except ValueError:
            return {}
        for i, card in enumerate(cards if isinstance(cards, list) else []):
            numa = card.get("numa") if isinstance(card, dict) else None
            if isinstance(numa, int) and not isinstance(numa, bool) and numa >= 0:
                out[i] = numa
        return out
    entries = [e for e in value.split(":") if "," in e]
    for i, entry in enumerate(entries):
        items = entry.split(",")
        if len(items) < 7:
            continue
        try:
            numa = int(items[5])
        except ValueError:
            continue
        if numa >= 0:
            out[i] = numa
    return out


# --- queue shares of vGPU memory and cores ------------------------------------------------
# HAMi's device plugin charges a vGPU pod per card: each card's memory (its vgpu-memory, or the
# card's memory times the percentage, or the whole card) and its cores, times the cards. A pod's
# request row holds what it asks once, so where a queue bounds volcano.sh/vgpu-memory or
# vgpu-cores, a pod whose charge differs from its ask would be counted short (Volcano's queues
# showed it as HAMi's volcano-vgpu-device-plugin#80 / volcano#4168). Until the per-card charge is
# counted, such a pod waits in such a queue, naming it, rather than pass a quota it would break.
QUOTA_KINDS = (("capability", "capability"), ("deserved", "deserved"), ("guarantee", "guarantee"))


def _named_by(snap, queue: int, column: int, unlimited: int) -> tuple[str, str] | None:
    """(queue name, setting) of the first queue from `queue` up to (not including) the root whose
    capability, deserved or guarantee bounds the column, or None."""
    while queue >= 0:
        info = snap.queues[queue]
        if info.parent < 0:
            return None       # the root: its bounds are the cluster's total, which charges nothing short
        for attr, setting in QUOTA_KINDS:
            values = getattr(snap, attr, None)
            if values is None:
                continue
            value = int(values[queue, column])
            if (setting == "guarantee" and value > 0) or (setting != "guarantee" and value < unlimited):
                return info.name, setting
        queue = info.parent
    return None


def held_for_vgpu_quota(snap, pending: int, unlimited: int) -> dict[int, DeviceHold]:
    """Pending vGPU tasks whose per-card charge a queue bounding vGPU memory or cores would count
    short (see above): task -> why."""
    columns = {r: snap.resource_index[r] for r in (vg.VGPU_MEMORY, vg.VGPU_CORES) if r in snap.resource_index}
    if not columns or snap.vgpu is None:
        return {}
    # Only the columns some queue below the root bounds: most clusters bound none, and pay nothing per pod.
    cols = list(columns.values())
    bounded = (snap.capability[1:, cols] < unlimited).any() or (snap.guarantee[1:, cols] > 0).any() \
        or (snap.deserved is not None and (snap.deserved[1:, cols] < unlimited).any())
    if not bounded:
        return {}
    out: dict[int, DeviceHold] = {}
    asking = np.flatnonzero(snap.status == pending)
    for t in asking.tolist():
        # Per container (a multi-container pod is charged each container's cards): the first whose
        # charge is not its request speaks for the pod; one-card containers sum to their requests.
        needs = vg.vgpu_needs(snap.pods[t])
        need = next((n for n in needs if n.cards > 1 or n.percent != vg.NO_PERCENT), needs[0] if needs else None)
        if need is None:
            continue
        job = snap.jobs[int(snap.task_job[t])]
        for resource, column in columns.items():
            if resource == vg.VGPU_MEMORY:
                if need.percent != vg.NO_PERCENT:
                    charge = "the memory of the cards it gets (" + (
                        f"{need.percent}% of each)" if need.percent != 100 or vg.VGPU_PERCENT in snap.pods[t].requests
                        else "whole cards)")
                elif need.cards > 1:
                    charge = f"{need.cards} x {need.memory} MiB"
                else:
                    continue
            else:
                if need.cards > 1 and need.cores:
                    charge = f"{need.cards} x {need.cores}% of a card's cores"
                else:
                    continue
            named = _named_by(snap, job.queue, column, unlimited)
            if named is None:
                continue
            queue, setting = named
            out[t] = DeviceHold(f"resources {resource}",
                                f"pod asks for vGPU on {need.cards} card{'s' if need.cards != 1 else ''}: HAMi's "
                                f"device plugin charges {charge} of {resource}, but queue {queue}'s {setting} "
                                f"names {resource} and this scheduler counts only the pod's request against it "
                                "(per-card charges are not evaluated yet); it is not placed to pass a share it "
                                "would break")
            break
    return out
