"""HAMi vGPU as Volcano's deviceshare places it (`deviceshare { vgpu = true }`, Volcano's
VGPUEnable; semantics from pkg/scheduler/api/devices/nvidia/vgpu and HAMi's protocol).

Cards: a node takes part when its allocatable has volcano.sh/vgpu-number, vgpu-memory and
vgpu-cores above 0 and it carries the device plugin's register annotation
`volcano.sh/node-vgpu-register`: one `UUID,split count,memory MiB,type,health,mode` per card,
cards separated by `:` (a card entry with fewer than six fields voids the node, as in Volcano).
The node's mode is `mig` if its cards say so, else `hami-core` (Volcano reads `mps` and anything
else as hami-core).

A pod asks for vGPU by volcano.sh/vgpu-number (cards, default 1 when only memory is given),
volcano.sh/vgpu-memory (MiB per card) or volcano.sh/vgpu-memory-percentage (of each card's memory;
without either, the whole card's memory), and volcano.sh/vgpu-cores (percent of a card's compute;
100 takes the card alone). A card fits when it is healthy, has room for one more task (its split
count), the memory free, cores within 100 (an exclusive ask only on an unused card, no zero-core
ask on a card at 100) and its type is NVIDIA's. Cards are taken in `schedule_policy` order
(binpack: most memory used first; spread: fewest tasks first; then register order).

What the device plugin reads goes on the Binding, as Volcano writes it: volcano.sh/vgpu-node,
volcano.sh/vgpu-time and volcano.sh/bind-time (Unix seconds; the binder stamps vgpu-time again in
nanoseconds right before sending, runtime.kube.binder._NodeOrder), volcano.sh/vgpu-ids-new and
volcano.sh/devices-to-allocate (`UUID,NVIDIA,memory,cores:` per card, one list per container,
containers separated by `;`) and volcano.sh/bind-phase `allocating`.

volcano.sh/vgpu-podgroup-policy: spread (Volcano's vgpu after #5049): the pod takes no card on which
a pod of its PodGroup (the scheduling.k8s.io/group-name annotation, else scheduling.volcano.sh/group-name,
in its namespace; annotated or not) holds memory or cores; its own containers may share a card.
A pod without a group is not narrowed.

Multi-container pods (volcano#4505): each container asking vgpu-number or vgpu-memory gets its own
device list, in spec order, and a container asking none an empty one, as HAMi's protocol lists
them (Volcano lists only the asking containers, but HAMi's plugin takes the n-th list for
spec.containers[n], so a sidecar before them would get a vGPU container's list); the containers are fitted one after another on the node, a later one seeing
the cards the earlier ones took (so two containers may share a card within its split count, as in
Volcano's checkNodeGPUSharingPredicateAndScore). A vGPU ask in an init container waits naming it:
Volcano reads only spec.containers and writes it no device list.

The pod annotations that narrow its cards are evaluated as Volcano does: nvidia.com/use-gputype /
nvidia.com/nouse-gputype (card type, case aside) and volcano.sh/vgpu-use-gpuuuid /
volcano.sh/vgpu-nouse-gpuuuid (exact UUIDs, the denylist wins). Not evaluated yet, so such pods
wait naming it: MIG mode (its geometries), a vGPU ask in an init container, a
volcano.sh/vgpu-podgroup-policy other than `spread`; volcano.sh/vgpu-mode
`hami-core` is what every node here is, any other mode waits.

GPU exclusive rules (`gpu_exclusive_rules`, Volcano's deviceshare.GPUExclusiveRules, v1.15, #5213):
each rule a map of labels; a pod carrying all of one rule's labels is exclusive and never shares a
card with another exclusive pod (whichever rule either matched: the cards of every rule are kept
from every matching pod, as Volcano's wrapper does); pods matching no rule share as ever, also with
exclusive pods' cards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:   # annotations only
    from runtime.cluster.model import Pod

REGISTER = "volcano.sh/node-vgpu-register"
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_PERCENT = "volcano.sh/vgpu-memory-percentage"
VGPU_CORES = "volcano.sh/vgpu-cores"
IDS = "volcano.sh/vgpu-ids-new"
TO_ALLOCATE = "volcano.sh/devices-to-allocate"
ASSIGNED_NODE = "volcano.sh/vgpu-node"
ASSIGNED_TIME = "volcano.sh/vgpu-time"
BIND_TIME = "volcano.sh/bind-time"
BIND_PHASE = "volcano.sh/bind-phase"
MODE = "volcano.sh/vgpu-mode"
HAMI_CORE, MIG = "hami-core", "mig"
NVIDIA = "NVIDIA"
USE_TYPE, NOUSE_TYPE = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
USE_UUID, NOUSE_UUID = "volcano.sh/vgpu-use-gpuuuid", "volcano.sh/vgpu-nouse-gpuuuid"
# Pod annotations that narrow the cards (evaluated: a pod's class is told apart by them).
PODGROUP_POLICY = "volcano.sh/vgpu-podgroup-policy"
FILTERS = (USE_TYPE, NOUSE_TYPE, USE_UUID, NOUSE_UUID, PODGROUP_POLICY)
# Pod annotations not evaluated yet (see the module's docstring).
NOT_EVALUATED: tuple[str, ...] = ()
GROUP_NAME_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
NO_PERCENT = 101           # Volcano's "no percentage asked"
ExclusiveRules = tuple[tuple[tuple[str, str], ...], ...]


def exclusive_rules(plan) -> ExclusiveRules:
    """deviceshare's gpu_exclusive_rules as sorted label pairs (rules without labels match nothing,
    as Volcano drops them)."""
    share = plan.plugin("deviceshare")
    rules = share.arguments.get("gpu_exclusive_rules") if share is not None else None
    return tuple(tuple(sorted(rule.items())) for rule in (rules or ()) if rule)


def is_exclusive(labels: Mapping[str, str], rules: ExclusiveRules) -> bool:
    """Whether a pod with `labels` carries every label of some rule (Volcano's podMatchesRule)."""
    return any(all(labels.get(k) == v for k, v in rule) for rule in rules)


@dataclass(frozen=True)
class VgpuCard:
    uuid: str
    split: int             # tasks it may hold
    memory: int            # MiB
    type: str
    healthy: bool


def parse_register(value: str) -> tuple[list[VgpuCard], str] | None:
    """The node's cards and mode from its register annotation; None when it names no card or a
    card entry is short (Volcano then ignores the node's vGPUs)."""
    if ":" not in value:
        return None
    cards, mode = [], HAMI_CORE
    for entry in value.split(":"):
        if "," not in entry:
            continue
        items = entry.split(",")
        if len(items) < 6:
            return None
        cards.append(VgpuCard(items[0], _int(items[1]), _int(items[2]), items[3],
                              items[4].strip().lower() in ("1", "t", "true")))
        mode = MIG if items[5] == MIG else HAMI_CORE
    return (cards, mode) if cards else None


def type_allowed(annotations: Mapping[str, str], card_type: str) -> bool:
    """Volcano's checkGPUtype: nvidia.com/use-gputype (when set, the card's type must contain one
    of its comma-separated names), else nvidia.com/nouse-gputype (none of its names); case aside."""
    kind = card_type.upper()
    if USE_TYPE in annotations:
        return any(name.upper() in kind for name in annotations[USE_TYPE].split(","))
    if NOUSE_TYPE in annotations:
        return not any(name.upper() in kind for name in annotations[NOUSE_TYPE].split(","))
    return True


def uuid_allowed(annotations: Mapping[str, str], uuid: str) -> bool:
    """Volcano's gpuUUIDFilter: volcano.sh/vgpu-use-gpuuuid an allowlist, volcano.sh/vgpu-nouse-gpuuuid
    a denylist (exact UUIDs, trimmed, empty entries ignored; the denylist wins; with either, a card
    without a UUID is never taken)."""
    allow = [u.strip() for u in annotations.get(USE_UUID, "").split(",") if u.strip()]
    deny = [u.strip() for u in annotations.get(NOUSE_UUID, "").split(",") if u.strip()]
    if (allow or deny) and not uuid:
        return False
    return (not allow or uuid in allow) and uuid not in deny


def filter_key(annotations: Mapping[str, str]) -> tuple | None:
    """What of a pod's annotations narrows its vGPU cards (its class is told apart by it), or None."""
    key = tuple((k, annotations[k]) for k in FILTERS if k in annotations)
    if annotations.get(PODGROUP_POLICY) == "spread":     # which group's cards it avoids
        key += tuple((k, annotations[k]) for k in GROUP_NAME_ANNOTATIONS if k in annotations)
    return key or None


def vgpu_class_key(rules: ExclusiveRules = ()) -> Callable[[Pod], tuple | None]:
    """What tells a pending pod's task class apart for the vGPU rule, which answers for a class by
    its first pod: the annotations narrowing its cards, and whether `rules` make it exclusive."""
    def key_of(p: Pod) -> tuple | None:
        key = filter_key(p.annotations)
        if rules and is_exclusive(p.labels, rules):
            key = (*(key or ()), ("gpu_exclusive_rules", "matched"))
        return key
    return key_of


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0      # as Go's strconv.Atoi leaves it


@dataclass(frozen=True)
class VgpuNeed:
    cards: int
    memory: int            # MiB per card, when no percentage is asked
    percent: int           # of each card's memory; NO_PERCENT: `memory` applies
    cores: int

    def memory_on(self, card_memory: np.ndarray | int):
        return card_memory * self.percent // 100 if self.percent != NO_PERCENT else self.memory


def vgpu_need(requests: Mapping[str, int]) -> VgpuNeed | None:
    """What a pod asks of vGPU (Volcano's ExtractResourceRequest), or None: only a pod asking
    vgpu-number or vgpu-memory asks for vGPU at all."""
    number, memory = int(requests.get(VGPU_NUMBER, 0)), int(requests.get(VGPU_MEMORY, 0))
    if not number and not memory:
        return None
    percent = int(requests.get(VGPU_PERCENT, 0)) or NO_PERCENT
    if percent == NO_PERCENT and memory == 0:
        percent = 100
    return VgpuNeed(number or 1, memory, percent, int(requests.get(VGPU_CORES, 0)))


def vgpu_needs(pod) -> tuple[VgpuNeed, ...]:
    """One need per container asking vGPU, in spec order (Pod.vgpu_containers when several ask,
    else the pod's summed requests); () when it asks none."""
    if getattr(pod, "vgpu_containers", ()):
        return tuple(n for n in (vgpu_need(c) for c in pod.vgpu_containers) if n is not None)
    need = vgpu_need(pod.requests)
    return () if need is None else (need,)


def group_key(pod) -> tuple[str, str] | None:
    """The pod's PodGroup as Volcano's vgpu getPodGroupKey names it (namespace, group), or None."""
    name = next((pod.annotations[k] for k in GROUP_NAME_ANNOTATIONS if pod.annotations.get(k)), "")
    return (pod.namespace, name) if name else None


def spread_group(pod) -> tuple[str, str] | None:
    """The group whose cards the pod avoids (volcano.sh/vgpu-podgroup-policy: spread), or None."""
    return group_key(pod) if pod.annotations.get(PODGROUP_POLICY) == "spread" else None


def group_cards_in_use(inv: "VgpuInventory", pods, node_pos: Mapping[str, int]) -> dict:
    """For each group a pending pod spreads by: (C,) count of its placed pods holding memory or
    cores on each card (Volcano's deviceHasPodFromSameGroup); {} when no pending pod spreads."""
    keys = {key for p in pods if not p.node_name and (key := spread_group(p)) is not None}
    if not keys:
        return {}
    out = {key: np.zeros(len(inv.uuid), dtype=np.int64) for key in keys}
    for p in pods:
        key = group_key(p)
        if key not in out or not p.node_name or p.terminal or node_pos.get(p.node_name, -1) not in inv.first:
            continue
        ni = node_pos[p.node_name]
        first, count = inv.first[ni], int(np.count_nonzero(inv.card_node == ni))
        for i, memory, cores in vgpu_cards_held(p, inv.uuid[first:first + count]):
            if memory != 0 or cores > 0:      # -1: its ask, charged per card
                out[key][first + i] += 1
    return out


def vgpu_hold(pod) -> tuple[str, str] | None:
    """(field, why) when a pod's vGPU ask is not evaluated yet, else None."""
    if pod.annotations.get(PODGROUP_POLICY, "spread") != "spread":
        return (f"metadata.annotations[{PODGROUP_POLICY}]",
                f"pod asks for vGPU PodGroup policy {pod.annotations[PODGROUP_POLICY]!r}; Volcano knows only spread")
    if pod.annotations.get(MODE, HAMI_CORE) != HAMI_CORE:
        return (f"metadata.annotations[{MODE}]",
                f"pod asks for vGPU mode {pod.annotations[MODE]}, which this scheduler does not evaluate yet "
                "(only hami-core)")
    for key in NOT_EVALUATED:
        if key in pod.annotations:
            return (f"metadata.annotations[{key}]",
                    f"pod narrows its vGPU cards by {key}, which this scheduler does not evaluate yet")
    return None


@dataclass
class VgpuInventory:
    """Every vGPU card of every node (flat arrays; `card_node` says whose, `local` its place in
    the node's register)."""

    card_node: np.ndarray        # (C,)
    local: np.ndarray            # (C,)
    uuid: list[str]
    type: list[str]
    split: np.ndarray
    memory: np.ndarray           # MiB
    healthy: np.ndarray          # bool
    usable: np.ndarray           # bool: NVIDIA, on a hami-core node
    used_num: np.ndarray
    used_mem: np.ndarray
    used_core: np.ndarray
    node_mode: list[str | None]  # per node: its mode, None without vGPUs
    first: dict[int, int]        # node -> its first card
    _every: np.ndarray | None = None
    # Per group its pending pods spread by: placed pods of the group per card (group_cards_in_use).
    group_use: dict | None = None
    # Per card: devices held by pods exclusive by gpu_exclusive_rules (an exclusive pod takes no
    # card with one); None when no rule is set.
    exclusive: np.ndarray | None = None

    def allowed(self, annotations: Mapping[str, str]) -> np.ndarray:
        """(C,) bool: cards the pod's type and UUID annotations let it use."""
        if not any(k in annotations for k in FILTERS):
            if self._every is None:     # one shared answer for the pods that narrow nothing
                self._every = np.ones(len(self.uuid), dtype=bool)
                self._every.flags.writeable = False
            return self._every
        return np.array([type_allowed(annotations, t) and uuid_allowed(annotations, u)
                         for t, u in zip(self.type, self.uuid)], dtype=bool)

    def fit(self, need: VgpuNeed, cards: slice | np.ndarray | None = None, exclusive: bool = False) -> np.ndarray:
        """(C,) bool: cards that take one more device of `need` now (only `cards` when given); an
        `exclusive` pod only cards no exclusive pod holds."""
        at = slice(None) if cards is None else cards
        used_num, used_core, memory = self.used_num[at], self.used_core[at], self.memory[at]
        ok = self.healthy[at] & self.usable[at] & (used_num < self.split[at])
        ok &= memory - self.used_mem[at] >= need.memory_on(memory)
        ok &= used_core + need.cores <= 100
        if need.cores == 100:
            ok &= used_num == 0
        if need.cores == 0:
            ok &= used_core < 100
        if exclusive and self.exclusive is not None:
            ok &= self.exclusive[at] == 0
        return ok

    def take(self, c: int, need: VgpuNeed, sign: int = 1, exclusive: bool = False) -> None:
        if exclusive and self.exclusive is not None:
            self.exclusive[c] += sign
        self.used_num[c] += sign
        self.used_mem[c] += sign * int(need.memory_on(int(self.memory[c])))
        self.used_core[c] += sign * need.cores

    def choose_containers(self, needs: Sequence[VgpuNeed], cards: slice, allowed: np.ndarray,
                          policy: str) -> list[int] | None:
        """The cards (flat, container after container) `needs` take among `cards` of one node, each
        container fitted on what the earlier ones left (a card at most once per container); None
        when a container does not fit. The inventory is left as it was."""
        chosen: list[int] = []
        taken: list[tuple[int, VgpuNeed]] = []
        try:
            for need in needs:
                ok = cards.start + np.flatnonzero(self.fit(need, cards) & allowed[cards])
                mine = self.order(ok, policy)[:need.cards]
                if len(mine) < need.cards:
                    return None
                for c in mine:
                    self.take(c, need)
                    taken.append((c, need))
                chosen += mine
            return chosen
        finally:
            for c, need in taken:
                self.take(c, need, -1)

    def order(self, cards: np.ndarray, policy: str) -> list[int]:
        """Cards in the order Volcano tries them: binpack most memory used first, spread fewest
        tasks first; ties by register order."""
        if policy == "spread":
            return sorted(cards.tolist(), key=lambda c: (int(self.used_num[c]), int(self.local[c])))
        return sorted(cards.tolist(), key=lambda c: (-int(self.used_mem[c]), int(self.local[c])))


def build_vgpu_inventory(node_objects: list, pods, node_pos: Mapping[str, int],
                         rules: ExclusiveRules = ()) -> VgpuInventory:
    card_node, local, uuid, types, split, memory, healthy, usable = [], [], [], [], [], [], [], []
    node_mode: list[str | None] = [None] * len(node_objects)
    first: dict[int, int] = {}
    for ni, node in enumerate(node_objects):
        if not all(node.allocatable.get(r, 0) > 0 for r in (VGPU_NUMBER, VGPU_MEMORY, VGPU_CORES)):
            continue
        parsed = parse_register(node.annotations.get(REGISTER, ""))
        if parsed is None:
            continue
        cards, mode = parsed
        node_mode[ni] = mode
        first[ni] = len(card_node)
        for i, card in enumerate(cards):
            card_node.append(ni)
            local.append(i)
            uuid.append(card.uuid)
            types.append(card.type)
            split.append(card.split)
            memory.append(card.memory)
            healthy.append(card.healthy)
            usable.append(mode == HAMI_CORE and NVIDIA in card.type)
    n = len(card_node)
    inv = VgpuInventory(np.array(card_node, dtype=np.int64), np.array(local, dtype=np.int64), uuid, types,
                        np.array(split, dtype=np.int64), np.array(memory, dtype=np.int64),
                        np.array(healthy, dtype=bool), np.array(usable, dtype=bool), np.zeros(n, dtype=np.int64),
                        np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), node_mode, first)
    if rules:
        inv.exclusive = np.zeros(n, dtype=np.int64)
    for pod in pods:
        if not pod.node_name or pod.terminal or node_pos.get(pod.node_name, -1) not in first:
            continue
        ni = node_pos[pod.node_name]
        on_node = range(first[ni], first[ni] + int(np.count_nonzero(inv.card_node == ni)))
        needs = [n for n in vgpu_needs(pod) for _ in range(n.cards)]   # a device's ask, in order
        exclusive = bool(rules) and is_exclusive(pod.labels, rules)
        for i, mem, cores in vgpu_cards_held(pod, inv.uuid[on_node.start:on_node.stop]):
            c = first[ni] + i
            if exclusive:
                inv.exclusive[c] += 1
            if mem >= 0:
                inv.used_num[c] += 1
                inv.used_mem[c] += mem
                inv.used_core[c] += cores
            elif needs:
                inv.take(c, needs.pop(0))
    inv.group_use = group_cards_in_use(inv, pods, node_pos)
    return inv


def vgpu_cards_held(pod: Any, uuids: Sequence[str]) -> list[tuple[int, int, int]]:
    """(card on the node, memory MiB, cores) per vGPU device a placed pod holds, `uuids` the node's
    cards in register order: from volcano.sh/vgpu-ids-new (a device is the card whose UUID it
    contains, as Volcano matches them), else the cards its binding named, memory -1: what it asks
    (VgpuInventory.take charges it)."""
    if IDS in pod.annotations:
        out = []
        for container in decode_pod_devices(pod.annotations[IDS]):
            for dev_uuid, _, memory, cores in container:
                c = next((c for c, u in enumerate(uuids) if u and u in dev_uuid), None)
                if c is not None:
                    out.append((c, memory, cores))
        return out
    if not vgpu_needs(pod) or not pod.devices.get(VGPU_NUMBER):
        return []
    return [(c, -1, 0) for c in pod.devices[VGPU_NUMBER] if c < len(uuids)]


def decode_pod_devices(value: str) -> list[list[tuple[str, str, int, int]]]:
    """volcano.sh/vgpu-ids-new: per container, (uuid, type, memory MiB, cores) per device; entries
    that do not parse are skipped, as Volcano does."""
    out = []
    for container in value.split(";"):
        devices = []
        for entry in container.split(":"):
            items = entry.split(",")
            if len(items) < 4:
                continue
            try:
                devices.append((items[0], items[1], int(items[2]), int(items[3])))
            except ValueError:
                continue
        out.append(devices)
    return out


def encode_pod_devices(containers: list[list[tuple[str, str, int, int]]]) -> str:
    return ";".join("".join(f"{u},{t},{m},{c}:" for u, t, m, c in devices) for devices in containers)


def binding_annotations(node, cards: tuple[int, ...], requests: Mapping[str, int],
                        now: float | None = None, containers: Sequence[Mapping[str, int]] = ()) -> dict[str, str]:
    """What Volcano's vGPU Allocate carries on the Binding for a pod given `cards` (places in
    the node's register, container after container) on `node`; `containers`: each asking
    container's vGPU requests when several ask (Pod.vgpu_containers); {} when the node's register
    no longer names the cards or they are not as many as asked."""
    parsed = parse_register(node.annotations.get(REGISTER, ""))
    needs = [vgpu_need(c) for c in containers] if containers else [vgpu_need(requests)]
    if parsed is None or not any(needs) or any(c >= len(parsed[0]) for c in cards) \
            or sum(n.cards for n in needs if n is not None) != len(cards):
        return {}
    lists: list[list[tuple[str, str, int, int]]] = []
    at = 0
    for need in needs:
        if need is None:       # a container asking no vGPU keeps its place with an empty list
            lists.append([])
            continue
        mine = cards[at:at + need.cards]
        at += need.cards
        lists.append([(parsed[0][c].uuid, NVIDIA, int(need.memory_on(parsed[0][c].memory)), need.cores)
                      for c in mine])
    ids = encode_pod_devices(lists)
    stamp = str(int(time.time() if now is None else now))
    return {ASSIGNED_NODE: node.name, ASSIGNED_TIME: stamp, IDS: ids, TO_ALLOCATE: ids,
            BIND_PHASE: "allocating", BIND_TIME: stamp}


def vgpu_on(plan) -> bool:
    """Whether the plan's deviceshare places HAMi vGPU."""
    share = plan.plugin("deviceshare")
    return bool(share is not None and share.arguments.get("vgpu"))
