"""Shared cards one by one, as a session's inventories hold them: what each card of each node has
used and free (memory, cores, tasks against its split count) and which pods hold it, for the
dashboard's per-card view (runtime.service.devices); and the card memory a waiting pod cannot use
because it is split over cards (runtime.simulation.metrics samples it over a run).

Two kinds of cards: a device plan's (runtime.engine.snapshot.DeviceInventory: Volcano's GPU share
and GPU number, and our own `device` blocks) and HAMi vGPU's (runtime.engine.devices_vgpu.VgpuInventory,
cards from the node's volcano.sh/node-vgpu-register).

*Split card memory* of a node, for one device: the free memory on its cards when some waiting
pod's ask would fit in that much memory on one card (a card of the node is big enough for it
empty, and the node's free memory adds up to what it asks) yet no waiting pod's ask fits on the
node now ("pod needs 10Gi; node g3's cards have 8Gi, 6Gi, 4Gi and 0 free"). Only cards that can
take one more task count as free (healthy, not taken whole, under their split count; vGPU: of a
usable type, cores left). A pod that the node's labels or taints keep off (runtime.engine.
fragmentation.admits) is no ask for it; vGPU asks by percentage of a card's memory are left out
(their size depends on the card, so no "adds up" applies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.quantities import readable_base_units
from runtime.cluster.model import Node, Pod
from runtime.engine import devices_vgpu as vg
from runtime.engine.devices import held_cards
from runtime.engine.fragmentation import admits
from runtime.engine.snapshot import DeviceInventory, device_need

MIB = 1024 * 1024


@dataclass(frozen=True)
class Card:
    """One card of one node after the cycle (memory in bytes, cores in percent of the card)."""

    node: str
    device: str                    # the resource that counts cards (volcano.sh/vgpu-number for vGPU)
    index: int                     # its place on the node (Volcano's card index / the register's order)
    uuid: str                      # vGPU: the card's UUID; "" otherwise
    memory: int                    # 0: unknown
    used_memory: int
    used_cores: int | None         # None: the device counts no cores (Volcano's GPU share, whole cards)
    tasks: int
    split: int | None              # tasks it may hold (None: no limit)
    whole: bool                    # taken whole by one task
    healthy: bool
    usable: bool                   # takes one more task now (see the module's docstring)
    holders: tuple[str, ...]       # pods holding it (namespace/name), bound before or by the cycle

    @property
    def free_memory(self) -> int:
        return max(self.memory - self.used_memory, 0) if self.usable else 0

    @property
    def free_cores(self) -> int | None:
        if self.used_cores is None:
            return None
        return max(100 - self.used_cores, 0) if self.usable else 0


def _holders(placed: Iterable[tuple[Pod, str, Mapping[str, tuple[int, ...]] | None]], node_pos: Mapping[str, int],
             key_of) -> dict[tuple[int, int], list[str]]:
    """(node, card) -> pods; key_of(pod, the cards its binding named or None, node index) gives one pod's cards."""
    out: dict[tuple[int, int], list[str]] = {}
    for pod, node, devices in placed:
        ni = node_pos.get(node)
        if ni is None:
            continue
        for c in key_of(pod, devices, ni):
            out.setdefault((ni, c), []).append(pod.key)
    return out


def placed_pods(pods: Iterable[Pod], bindings: Iterable = ()) -> list[tuple[Pod, str, Mapping | None]]:
    """(pod, node, the cards its binding named or None) of every pod on a node and every pod a
    cycle bound (`bindings`: runtime.cluster.decisions.Binding with pods looked up by the caller)."""
    bound = list(bindings)
    keys = {p.key for p, _, _ in bound}    # a state the binding was applied to lists the pod placed too
    return [(p, p.node_name, None) for p in pods if p.node_name and not p.terminal and p.key not in keys] + bound


@dataclass(frozen=True)
class CardArrays:
    """One device's cards as arrays (bytes): whose node, their place on it, whether each takes one
    more task now (see the module's docstring), its free memory there (0 where it takes none) and its
    memory when healthy (0 when not: it holds nothing even empty)."""

    device: str
    card_node: np.ndarray
    local: np.ndarray
    usable: np.ndarray
    free: np.ndarray
    capacity: np.ndarray


def card_arrays(inventories: Iterable[DeviceInventory], vgpu: vg.VgpuInventory | None) -> list[CardArrays]:
    out = []
    for inv in inventories:
        if not len(inv.card_node):
            continue
        plan = inv.plan
        healthy = inv.healthy if inv.healthy is not None else np.ones(len(inv.card_node), dtype=bool)
        usable = healthy & inv.model_ok[inv.card_node] & ~inv.whole
        if plan.sharing != "memory":
            usable &= inv.tasks == 0
        elif plan.max_tasks_per_card is not None:
            usable &= inv.tasks < plan.max_tasks_per_card
        free = np.where(usable, np.maximum(inv.card_memory - inv.used_memory, 0), 0)
        out.append(CardArrays(plan.resource, inv.card_node, inv.card_local, usable, free,
                              np.where(healthy, inv.card_memory, 0)))
    if vgpu is not None and len(vgpu.card_node):
        usable = vgpu.healthy & vgpu.usable & (vgpu.used_num < vgpu.split) & (vgpu.used_core < 100)
        free = np.where(usable, np.maximum(vgpu.memory - vgpu.used_mem, 0) * MIB, 0)
        out.append(CardArrays(vg.VGPU_NUMBER, vgpu.card_node, vgpu.local, usable, free,
                              np.where(vgpu.healthy, vgpu.memory * MIB, 0)))
    return out


def cards(node_names: Sequence[str], inventories: Sequence[DeviceInventory], vgpu: vg.VgpuInventory | None,
          placed: Sequence[tuple[Pod, str, Mapping | None]]) -> list[Card]:
    """Every shared or counted card of the session's inventories, by node then device then card."""
    node_pos = {name: i for i, name in enumerate(node_names)}
    arrays = {a.device: a for a in card_arrays(inventories, vgpu)}
    out: list[Card] = []
    for inv in inventories:
        if inv.plan.resource not in arrays:
            continue
        plan, mem_res, usable = inv.plan, inv.memory_resource, arrays[inv.plan.resource].usable

        def of_plan(pod, devices, ni, plan=plan, mem_res=mem_res):
            if devices is not None:
                return tuple(devices.get(plan.resource, ()))
            return held_cards(pod, plan.resource, mem_res)

        holders = _holders(placed, node_pos, of_plan)
        healthy = inv.healthy if inv.healthy is not None else np.ones(len(inv.card_node), dtype=bool)
        split = plan.max_tasks_per_card if plan.sharing == "memory" else 1
        counts_cores = plan.sharing == "memory" and bool(plan.cores_resource or plan.compute_percent)
        for ci in range(len(inv.card_node)):
            ni, local = int(inv.card_node[ci]), int(inv.card_local[ci])
            out.append(Card(node_names[ni], plan.resource, local, "", int(inv.card_memory[ci]),
                            int(inv.used_memory[ci]), int(inv.used_compute[ci]) if counts_cores else None,
                            int(inv.tasks[ci]), split, bool(inv.whole[ci]), bool(healthy[ci]), bool(usable[ci]),
                            tuple(holders.get((ni, local), ()))))
    if vg.VGPU_NUMBER in arrays:
        usable = arrays[vg.VGPU_NUMBER].usable
        uuids_of: dict[int, list[str]] = {}
        for c in range(len(vgpu.card_node)):
            uuids_of.setdefault(int(vgpu.card_node[c]), []).append(vgpu.uuid[c])

        def of_vgpu(pod, devices, ni):
            if devices is not None:
                return tuple(devices.get(vg.VGPU_NUMBER, ()))
            return tuple(c for c, _, _ in vg.vgpu_cards_held(pod, uuids_of.get(ni, [])))

        holders = _holders(placed, node_pos, of_vgpu)
        for c in range(len(vgpu.card_node)):
            ni, local = int(vgpu.card_node[c]), int(vgpu.local[c])
            used_num, used_core = int(vgpu.used_num[c]), int(vgpu.used_core[c])
            out.append(Card(node_names[ni], vg.VGPU_NUMBER, local, vgpu.uuid[c], int(vgpu.memory[c]) * MIB,
                            int(vgpu.used_mem[c]) * MIB, used_core, used_num, int(vgpu.split[c]),
                            used_core >= 100 and used_num == 1, bool(vgpu.healthy[c]), bool(usable[c]),
                            tuple(holders.get((ni, local), ()))))
    out.sort(key=lambda c: (c.node, c.device, c.index))
    return out


# --- card memory split over cards -------------------------------------------------------------

@dataclass(frozen=True)
class SplitNode:
    """One node whose free card memory of one device no waiting pod can use because it is split."""

    node: str
    device: str
    free: int                      # bytes: the node's free card memory of the device, all of it
    cards_free: tuple[int, ...]    # per card (register order), cards that take no task as 0
    ask: int                       # bytes per card: the largest waiting ask that would fit on one card

    def sentence(self) -> str:
        frees = [readable_base_units("memory", f) if f else "0" for f in sorted(self.cards_free, reverse=True)]
        listed = frees[0] if len(frees) == 1 else ", ".join(frees[:-1]) + " and " + frees[-1]
        return (f"pod needs {readable_base_units('memory', self.ask)} of card memory; node {self.node}'s cards "
                f"have {listed} free")

    def to_dict(self) -> dict:
        return {"node": self.node, "device": self.device, "free": self.free, "cardsFree": list(self.cards_free),
                "ask": self.ask, "text": self.sentence()}


@dataclass(frozen=True)
class _Ask:
    cards: int
    memory: int                    # bytes per card
    pod: Pod


def _asks(device: str, inventories: Sequence[DeviceInventory], waiting: Sequence[Pod]) -> list[_Ask]:
    """The distinct asks (cards, memory per card, where the pod may go) of the waiting pods for `device`."""
    out = []
    seen = set()
    inv = next((i for i in inventories if i.plan.resource == device), None)
    if inv is not None and (inv.plan.sharing != "memory" or inv.memory_resource is None):
        return out
    for pod in waiting:
        if inv is None:
            need = vg.vgpu_need(pod.requests)
            if need is None or need.percent != vg.NO_PERCENT or need.memory <= 0:
                continue
            cards_, memory = need.cards, need.memory * MIB
        else:
            need = device_need(inv.plan, inv.memory_resource, inv.memory_unit, pod.requests)
            cards_, memory = need.cards, need.memory
        if cards_ <= 0 or memory <= 0:
            continue
        key = (cards_, memory, tuple(sorted(pod.node_selector.items())), pod.required_terms, pod.tolerations)
        if key not in seen:
            seen.add(key)
            out.append(_Ask(cards_, memory, pod))
    return out


def split_card_memory(node_names: Sequence[str], nodes: Mapping[str, Node], inventories: Sequence[DeviceInventory],
                      vgpu: vg.VgpuInventory | None, waiting: Sequence[Pod]) -> list[SplitNode]:
    """The nodes (and devices) whose free card memory is split so that no waiting pod uses it (see
    the module's docstring), by device then node. Vectorized over cards: the simulator asks after
    every cycle while pods wait."""
    if not waiting:
        return []
    n = len(node_names)
    out = []
    for arrays in sorted(card_arrays(inventories, vgpu), key=lambda a: a.device):
        asks = _asks(arrays.device, inventories, waiting)
        if not asks:
            continue
        total = np.bincount(arrays.card_node, weights=arrays.free, minlength=n)
        with_cards = np.unique(arrays.card_node)
        open_nodes = [i for i in with_cards.tolist()
                      if node_names[i] in nodes and not nodes[node_names[i]].unschedulable]
        fits_now = np.zeros(n, dtype=bool)
        best = np.zeros(n, dtype=np.int64)              # the largest ask split over a node's cards
        admitted: dict[tuple, np.ndarray] = {}
        for ask in asks:
            key = (tuple(sorted(ask.pod.node_selector.items())), ask.pod.required_terms, ask.pod.tolerations)
            if key not in admitted:
                mask = np.zeros(n, dtype=bool)
                mask[[i for i in open_nodes if admits(nodes[node_names[i]], ask.pod)]] = True
                admitted[key] = mask
            mask = admitted[key]
            fitting = np.bincount(arrays.card_node, weights=arrays.free >= ask.memory, minlength=n)
            big_enough = np.bincount(arrays.card_node, weights=arrays.capacity >= ask.memory, minlength=n) > 0
            fits_now |= mask & (fitting >= ask.cards)
            split = mask & big_enough & (total >= ask.cards * ask.memory) & (fitting < ask.cards)
            best = np.where(split, np.maximum(best, ask.memory), best)
        for i in np.flatnonzero((best > 0) & ~fits_now & (total > 0)).tolist():
            mine = arrays.card_node == i
            order = np.argsort(arrays.local[mine], kind="stable")
            frees = tuple(int(f) for f in arrays.free[mine][order])
            out.append(SplitNode(node_names[i], arrays.device, int(total[i]), frees, int(best[i])))
    return out
