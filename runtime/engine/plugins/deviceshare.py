"""deviceshare: places device requests on cards.

Per DevicePlan (the policy's `device` blocks, plus Volcano's volcano.sh/gpu-number with
gpu-memory when `gpu_sharing`/`gpu_number` is on):
- whole cards: a request of N `resource` takes N idle cards;
- shared cards (`sharing = memory`): a request of `memory_resource` (per card, rounded up to the
  plan's `slice`; Volcano's volcano.sh/gpu-memory counts MiB) on `resource` cards (default 1),
  with compute from `cores_resource` or `compute_percent` per slice (≤ 100 per card), at most
  `max_tasks_per_card` tasks; a card's memory is never oversubscribed;
- model: with `models`, only nodes whose `model_label` value is listed host the device;
- topology (`nvlink`/`numa`): node label policydsl.io/nvlink-islands or policydsl.io/gpu-numa,
  card groups like `0-3_4-7` (or `0.1_2.3`); a multi-card task prefers one group, and (with a
  plugin weight: Volcano's ScheduleWeight, default 0) nodes where it fits in one group score higher;
- card choice: `policy` binpack takes the fullest fitting card, spread the emptiest.
The cards are recorded in the binding's `devices` and the pod annotation volcano.sh/gpu-index.
"""

from __future__ import annotations

import numpy as np

from compiler import catalog as cat
from compiler.quantities import format_base_units
from runtime.engine.plugins.base import Plugin
from runtime.engine.extension import Check, StatefulRule
from runtime.engine import devices_vgpu as vg
from runtime.engine.devices import GFD_MEMORY, GFD_PRODUCT, card_model
from runtime.engine.snapshot import DeviceInventory, DeviceNeed, Snapshot, device_need

TOPOLOGY_BONUS = 100.0


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class DeviceHooks:
    def __init__(self, snap: Snapshot, policy_override: str | None):
        self.snap = snap
        self.inventories = snap.devices
        self.policy_override = policy_override
        self._needs: dict[int, list[tuple[int, DeviceNeed]]] = {}
        self._known: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def known(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(N,) bool per node for inventory i: its card memory is known (a shared plan), its card
        model is named (a plan with models): neither is ever assumed."""
        if i not in self._known:
            inv, n = self.inventories[i], self.snap.n_nodes
            memory = np.ones(n, dtype=bool)
            if inv.plan.sharing == "memory":
                memory[inv.card_node[inv.card_memory <= 0]] = False
            model = np.ones(n, dtype=bool)
            if inv.plan.models:
                model = np.array([card_model(node.labels, inv.plan.model_label) is not None
                                  for node in self.snap.node_objects], dtype=bool)
            self._known[i] = (memory, model)
        return self._known[i]

    def needs(self, t: int) -> list[tuple[int, DeviceNeed]]:
        cached = self._needs.get(t)
        if cached is None:
            requests = self.snap.pods[t].requests
            cached = []
            for i, inv in enumerate(self.inventories):
                need = device_need(inv.plan, inv.memory_resource, inv.memory_unit, requests)
                if need.cards:
                    cached.append((i, need))
            self._needs[t] = cached
        return cached

    def _card_ok(self, inv: DeviceInventory, need: DeviceNeed) -> np.ndarray:
        ok = inv.healthy.copy() if inv.healthy is not None else np.ones(len(inv.card_node), dtype=bool)
        if inv.plan.sharing == "whole":
            return ok & (~inv.whole) & (inv.tasks == 0)
        ok &= ~inv.whole & (inv.card_memory - inv.used_memory >= need.memory)
        if need.compute:
            ok &= inv.used_compute + need.compute <= 100
        if inv.plan.max_tasks_per_card:
            ok &= inv.tasks < inv.plan.max_tasks_per_card
        return ok

    def node_checks(self, t: int) -> list[tuple[str, np.ndarray]]:
        """(message, passing nodes) per device need, in the order a reason should name them."""
        out = []
        n = self.snap.n_nodes
        for i, need in self.needs(t):
            inv = self.inventories[i]
            res = inv.plan.resource
            in_service = inv.healthy if inv.healthy is not None else np.ones(len(inv.card_node), dtype=bool)
            has = np.bincount(inv.card_node[in_service], minlength=n) >= need.cards
            broken = len(in_service) - int(in_service.sum())
            out.append((f"node(s) had too few {res} cards" + (" in service" if broken else ""), has))
            memory_known, model_known = self.known(i)
            if inv.plan.sharing == "memory":
                source = f", no allocatable {inv.memory_resource}" if inv.memory_resource else ""
                out.append((f"node(s) did not say how much memory a {res} card has (no `card_memory` in the "
                            f"device block{source}, no GPU Feature Discovery label {GFD_MEMORY})", memory_known))
            if inv.plan.models:
                labels = inv.plan.model_label if inv.plan.model_label == GFD_PRODUCT \
                    else f"{inv.plan.model_label} or {GFD_PRODUCT}"
                out.append((f"node(s) did not name their {res} card model (no label {labels})", model_known))
                out.append((f"node(s) had no {res} of model {'/'.join(inv.plan.models)}", inv.model_ok))
            ok = self._card_ok(inv, need)
            fits = np.bincount(inv.card_node[ok], minlength=n) >= need.cards
            out.append((self._short_message(inv, need, has & inv.model_ok & memory_known & ~fits), fits))
        return out

    def _short_message(self, inv: DeviceInventory, need: DeviceNeed, short: np.ndarray) -> str:
        """Why the nodes in `short` (enough cards, too few of them free) fail, with figures: what
        the pod needs per card, and the free room on each card of the node that comes closest."""
        res = inv.plan.resource
        if inv.plan.sharing == "whole":
            message = f"insufficient idle {res} cards (pod needs {need.cards})"
            idle = self._card_ok(inv, need)
            counts = np.bincount(inv.card_node[idle], minlength=self.snap.n_nodes)
            if short.any():
                best = int(np.flatnonzero(short)[np.argmax(counts[short])])
                message += f"; node {self.snap.node_names[best]} has {int(counts[best])} idle"
            return message
        memory = format_base_units("memory", need.memory)
        cards = "a card" if need.cards == 1 else f"{need.cards} cards"
        usable = inv.healthy if inv.healthy is not None else np.ones(len(inv.card_node), dtype=bool)
        largest = int(inv.card_memory[usable].max()) if usable.any() else 0
        if need.memory > largest:
            # Not fragmentation: no card, however empty, holds the ask.
            return (f"no {res} card holds {memory} of memory (pod needs {memory} on {cards}; the largest "
                    f"card has {format_base_units('memory', largest)})")
        message = f"device memory fragmented: pod needs {memory} of {res} memory on {cards}"
        if need.compute:
            message += f" and {need.compute}% of each card's compute"
        if not short.any():
            return message
        free = np.where(usable & ~inv.whole, np.maximum(inv.card_memory - inv.used_memory, 0), 0)
        best_free = np.zeros(self.snap.n_nodes, dtype=np.int64)
        np.maximum.at(best_free, inv.card_node, free)
        candidates = np.flatnonzero(short)
        node = int(candidates[np.argmax(best_free[candidates])])
        on_node = np.flatnonzero(inv.card_node == node)
        figures = sorted((int(free[c]) for c in on_node), reverse=True)
        message += f"; node {self.snap.node_names[node]}'s cards have "
        message += _and([format_base_units("memory", f) for f in figures]) + " free"
        if need.compute:
            cores = sorted((100 - int(inv.used_compute[c]) for c in on_node), reverse=True)
            message += f" ({_and([f'{c}%' for c in cores])} of their compute)"
        return message

    def node_mask(self, t: int) -> np.ndarray:
        mask = np.ones(self.snap.n_nodes, dtype=bool)
        for _, passing in self.node_checks(t):
            mask &= passing
        return mask

    def score(self, t: int) -> np.ndarray:
        n = self.snap.n_nodes
        out = np.zeros(n, dtype=np.float64)
        for i, need in self.needs(t):
            inv = self.inventories[i]
            ok = self._card_ok(inv, need)
            policy = self.policy_override or inv.plan.policy
            if inv.plan.sharing == "memory" and len(inv.card_node):
                fill = np.where(inv.card_memory > 0, inv.used_memory / np.maximum(inv.card_memory, 1), 0.0)
                best = np.zeros(n)
                np.maximum.at(best, inv.card_node[ok], fill[ok])
                out += (best if policy == "binpack" else 1.0 - best) * 100.0
            if inv.plan.topology != "none" and need.cards > 1 and len(inv.card_node):
                key = inv.card_node[ok] * 4096 + inv.card_island[ok]
                groups, counts = np.unique(key, return_counts=True)
                together = np.zeros(n, dtype=bool)
                together[groups[counts >= need.cards] // 4096] = True
                out += together * TOPOLOGY_BONUS
        return out

    def assign(self, t: int, node: int) -> dict[str, tuple[int, ...]]:
        devices: dict[str, tuple[int, ...]] = {}
        for i, need in self.needs(t):
            inv = self.inventories[i]
            on_node = np.nonzero(inv.card_node == node)[0]
            ok = on_node[self._card_ok(inv, need)[on_node]]
            chosen = self._choose(inv, need, ok)
            for c in chosen:
                if inv.plan.sharing == "whole":
                    inv.whole[c] = True
                else:
                    inv.used_memory[c] += need.memory
                    inv.used_compute[c] += need.compute
                inv.tasks[c] += 1
            devices[inv.plan.resource] = tuple(int(inv.card_local[c]) for c in chosen)
        return devices

    def _choose(self, inv: DeviceInventory, need: DeviceNeed, ok: np.ndarray) -> list[int]:
        policy = self.policy_override or inv.plan.policy
        if inv.plan.sharing == "whole":
            fill = np.zeros(len(ok))
        else:
            fill = inv.used_memory[ok] / np.maximum(inv.card_memory[ok], 1)
        # binpack: fullest first; spread: emptiest first; then card index.
        order = sorted(range(len(ok)), key=lambda k: (-fill[k] if policy == "binpack" else fill[k], inv.card_local[ok[k]]))
        ranked = [int(ok[k]) for k in order]
        if inv.plan.topology != "none" and need.cards > 1:
            groups: dict[int, list[int]] = {}
            for c in ranked:
                groups.setdefault(int(inv.card_island[c]), []).append(c)
            # The smallest group that holds the whole task keeps larger groups free.
            whole = [cards for cards in groups.values() if len(cards) >= need.cards]
            if whole:
                return min(whole, key=len)[:need.cards]
            ranked = [c for cards in sorted(groups.values(), key=len, reverse=True) for c in cards]
        return ranked[:need.cards]

    def release(self, t: int, node: int, devices: dict[str, tuple[int, ...]]) -> None:
        for i, need in self.needs(t):
            inv = self.inventories[i]
            for local in devices.get(inv.plan.resource, ()):
                c = np.nonzero((inv.card_node == node) & (inv.card_local == local))[0]
                if not len(c):
                    continue
                c = c[0]
                if inv.plan.sharing == "whole":
                    inv.whole[c] = False
                else:
                    inv.used_memory[c] -= need.memory
                    inv.used_compute[c] -= need.compute
                inv.tasks[c] -= 1


class DeviceRule(StatefulRule):
    """Cards as a stateful filter and scorer: a class with a device need passes the nodes whose
    idle cards hold it; a placement takes cards (recorded for the binding), an undo gives them
    back, and either marks the node changed for every class with a device need."""

    name = "deviceshare"
    preempts = False

    def __init__(self, ssn, hooks: DeviceHooks, weight: float):
        self.ssn = ssn
        self.hooks = hooks
        self.weight = weight

    def _head(self, cid: int) -> int:
        return self.ssn.snap.classes[cid].head

    def _needs(self, cid: int) -> bool:
        return bool(self.hooks.needs(self._head(cid)))

    def filters(self, cid: int) -> bool:
        return self._needs(cid)

    def scores(self, cid: int) -> bool:
        return self.weight != 0 and self._needs(cid)

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        mask = self.hooks.node_mask(self._head(cid)).astype(np.uint8)
        return mask if nodes is None else mask[nodes]

    def checks(self, cid: int) -> list[Check]:
        return [Check(message, passing) for message, passing in self.hooks.node_checks(self._head(cid))]

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        scores = self.hooks.score(self._head(cid)) * self.weight
        return scores if nodes is None else scores[nodes]

    def placed(self, t: int, node: int) -> None:
        if self.hooks.needs(t):
            # Merged: the vGPU rule records its cards for the same binding.
            self.ssn.task_devices[t] = {**self.ssn.task_devices.get(t, {}), **self.hooks.assign(t, node)}
            self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)

    def unplaced(self, t: int, node: int) -> None:
        devices = self.ssn.task_devices.get(t)
        mine = {inv.plan.resource for inv in self.hooks.inventories}
        if devices and mine & set(devices):
            self.hooks.release(t, node, devices)
            rest = {r: c for r, c in devices.items() if r not in mine}
            if rest:
                self.ssn.task_devices[t] = rest
            else:
                self.ssn.task_devices.pop(t, None)
            self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)


class VgpuRule(StatefulRule):
    """HAMi vGPU cards (runtime.engine.devices_vgpu) as a stateful filter and scorer: a class asking
    vGPU passes the nodes with enough fitting cards; a placement takes them (recorded for the
    binding under volcano.sh/vgpu-number, as places in the node's register), an undo gives them back."""

    name = "deviceshare"
    preempts = False
    # deviceshare's node_lock: one vGPU pod a node waits for its plugin at a time. HAMi's plugin
    # re-stamps a pod's volcano.sh/vgpu-time at each Allocate call (one per container), so a later
    # container's call goes to another pod waiting on the node: multi-container pods need the lock.
    node_lock = False
    MULTI_NEEDS_LOCK = ("node(s) not usable for a pod asking vGPU in several containers without deviceshare's "
                        "node_lock: HAMi's device plugin re-stamps volcano.sh/vgpu-time at each container's "
                        "Allocate, so another pod waiting on the node would get its later containers' devices")

    def __init__(self, ssn, inventory: vg.VgpuInventory, policy: str, weight: float):
        self.ssn = ssn
        self.inv = inventory
        self.policy = policy
        self.weight = weight
        self._needs: dict[int, vg.VgpuNeed | None] = {}
        self._allowed: dict[int, np.ndarray] = {}       # task -> cards its annotations allow
        self._rules = vg.exclusive_rules(ssn.plan) if inventory.exclusive is not None else ()
        self._exclusive: dict[int, bool] = {}          # task -> exclusive by gpu_exclusive_rules
        self._registered = np.array([mode is not None for mode in inventory.node_mode], dtype=bool)
        self._hami = np.array([mode == vg.HAMI_CORE for mode in inventory.node_mode], dtype=bool)
        self._card_count = np.bincount(inventory.card_node, minlength=ssn.snap.n_nodes)

    def need(self, t: int) -> vg.VgpuNeed | None:
        if t not in self._needs:
            self._needs[t] = vg.vgpu_need(self.ssn.snap.pods[t].requests)
        return self._needs[t]

    def flat_needs(self, t: int) -> list[vg.VgpuNeed]:
        """Each device's ask, container after container (one per card the pod takes)."""
        return [n for n in vg.vgpu_needs(self.ssn.snap.pods[t]) for _ in range(n.cards)]

    def multi(self, t: int) -> bool:
        """Whether several of the pod's containers ask vGPU (one device list each)."""
        return len(vg.vgpu_needs(self.ssn.snap.pods[t])) > 1

    def _multi_fits(self, t: int, nodes) -> np.ndarray:
        """Per node of `nodes`: whether every container of a multi-container pod fits there."""
        if not self.node_lock:     # see MULTI_NEEDS_LOCK
            return np.zeros(len(nodes), dtype=bool)
        needs, allowed, inv = vg.vgpu_needs(self.ssn.snap.pods[t]), self._cards_allowed(t), self.inv
        out = np.zeros(len(nodes), dtype=bool)
        for i, node in enumerate(nodes):
            first = inv.first.get(int(node))
            if first is not None and self._hami[node]:
                cards = slice(first, first + int(self._card_count[node]))
                out[i] = inv.choose_containers(needs, cards, allowed, self.policy) is not None
        return out

    def _take_multi(self, t: int, cards, sign: int) -> tuple:
        """Take (sign 1) or give back (-1) a multi-container pod's devices, each at its container's
        ask; () so that the caller's one-ask loop has nothing left to do."""
        for c, one in zip(cards, self.flat_needs(t)):
            self.inv.take(c, one, sign, exclusive=self.exclusive(t))
        return ()

    def allowed(self, t: int) -> np.ndarray:
        if t not in self._allowed:
            self._allowed[t] = self.inv.allowed(self.ssn.snap.pods[t].annotations)
        key = vg.spread_group(self.ssn.snap.pods[t])
        use = self.inv.group_use.get(key) if key is not None and self.inv.group_use else None
        # volcano.sh/vgpu-podgroup-policy: spread: not the cards its group's pods hold now.
        return self._allowed[t] if use is None else self._allowed[t] & (use == 0)

    def _charge_group(self, t: int, cards, sign: int) -> None:
        """A placed (1) or undone (-1) pod's cards counted for its group, when a pending pod spreads by it."""
        key = vg.group_key(self.ssn.snap.pods[t])
        use = self.inv.group_use.get(key) if key is not None and self.inv.group_use else None
        if use is None:
            return
        for c, one in zip(cards, self.flat_needs(t)):
            if one.cores > 0 or one.memory_on(int(self.inv.memory[c])) > 0:
                use[c] += sign

    def exclusive(self, t: int) -> bool:
        if t not in self._exclusive:
            self._exclusive[t] = bool(self._rules) and vg.is_exclusive(self.ssn.snap.pods[t].labels, self._rules)
        return self._exclusive[t]

    def _cards_allowed(self, t: int) -> np.ndarray:
        """allowed(t), less the cards exclusive pods hold when t is one (read now: placements change
        them; a multi-container pod's containers are fitted on these)."""
        allowed = self.allowed(t)
        return allowed & (self.inv.exclusive == 0) if self.exclusive(t) else allowed

    def _head(self, cid: int) -> int:
        return self.ssn.snap.classes[cid].head

    def filters(self, cid: int) -> bool:
        return self.need(self._head(cid)) is not None

    def scores(self, cid: int) -> bool:
        return self.weight != 0 and self.filters(cid)

    def _node_checks(self, t: int) -> list[tuple[str, np.ndarray]]:
        need, allowed = self.need(t), self.allowed(t)
        inv, n = self.inv, self.ssn.snap.n_nodes
        registered, hami = self._registered, self._hami
        out = [(f"node(s) had no vGPU cards registered ({vg.REGISTER})", registered),
               ("node(s) had vGPU mode mig, which this scheduler does not evaluate yet", hami | ~registered)]
        if not allowed.all():
            narrowed = np.bincount(inv.card_node[allowed], minlength=n) >= need.cards
            named = ", ".join(f"{k}={v}" for k, v in vg.filter_key(self.ssn.snap.pods[t].annotations))
            out.append((f"node(s) had too few vGPU cards the pod's {named} allows", narrowed | ~(registered & hami)))
        ok = inv.fit(need) & allowed
        fits = np.bincount(inv.card_node[ok], minlength=n) >= need.cards
        if self.multi(t):      # containers fitted one after another (devices_vgpu.choose_containers)
            fits = self._multi_fits(t, np.arange(n))
            if not self.node_lock:
                out.append((self.MULTI_NEEDS_LOCK, np.zeros(n, dtype=bool)))
        out.append((self._short_message(need, registered & hami & ~fits), fits))
        if self.exclusive(t):
            alone = np.bincount(inv.card_node[ok & (inv.exclusive == 0)], minlength=n) >= need.cards
            if self.multi(t):
                alone = self._multi_fits(t, np.arange(n))
            out.append(("node(s) had too few vGPU cards free of pods exclusive by deviceshare's "
                        "gpu_exclusive_rules (the pod's labels match a rule)", alone | ~fits))
        return out

    def _short_message(self, need: vg.VgpuNeed, short: np.ndarray) -> str:
        memory = f"{need.percent}% of a card's memory" if need.percent != vg.NO_PERCENT else f"{need.memory} MiB"
        cards = "a vGPU card" if need.cards == 1 else f"{need.cards} vGPU cards"
        message = f"insufficient vGPU: pod needs {cards} with {memory} and {need.cores}% of the cores free"
        if not short.any():
            return message
        inv = self.inv
        free = np.where(inv.healthy & inv.usable, np.maximum(inv.memory - inv.used_mem, 0), 0)
        best = np.zeros(self.ssn.snap.n_nodes, dtype=np.int64)
        np.maximum.at(best, inv.card_node, free)
        candidates = np.flatnonzero(short)
        node = int(candidates[np.argmax(best[candidates])])
        on_node = np.flatnonzero(inv.card_node == node)
        figures = ", ".join(f"{int(free[c])} MiB/{100 - int(inv.used_core[c])}%/{int(inv.split[c] - inv.used_num[c])} "
                            f"slot{'s' if inv.split[c] - inv.used_num[c] != 1 else ''}"
                            + ("" if inv.healthy[c] else " (unhealthy)") for c in on_node)
        return message + f"; node {self.ssn.snap.node_names[node]}'s cards have {figures} free"

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        if nodes is not None and len(nodes) <= 64:
            return self._few_codes(self._head(cid), nodes)
        mask = np.ones(self.ssn.snap.n_nodes, dtype=bool)
        for _, passing in self._node_checks(self._head(cid)):
            mask &= passing
        mask = mask.astype(np.uint8)
        return mask if nodes is None else mask[nodes]

    def _few_codes(self, t: int, nodes: np.ndarray) -> np.ndarray:
        """codes() for a few nodes (those a placement changed), card by card on those nodes only:
        the same answer as the full mask, without a pass over every card of the cluster."""
        need, allowed, inv = self.need(t), self.allowed(t), self.inv
        if self.multi(t):
            return self._multi_fits(t, nodes.tolist()).astype(np.uint8)
        out = np.zeros(len(nodes), dtype=np.uint8)
        for i, node in enumerate(nodes.tolist()):
            first = inv.first.get(node)
            if first is None or not self._hami[node]:
                continue
            cards = slice(first, first + int(self._card_count[node]))
            out[i] = int(np.count_nonzero(inv.fit(need, cards, self.exclusive(t)) & allowed[cards])) >= need.cards
        return out

    def checks(self, cid: int) -> list[Check]:
        return [Check(m, p) for m, p in self._node_checks(self._head(cid))]

    def _choose(self, t: int, node: int) -> list[int]:
        need, first = self.need(t), self.inv.first.get(node)
        if first is None:
            return []
        cards = slice(first, first + int(self._card_count[node]))
        if self.multi(t):
            return self.inv.choose_containers(vg.vgpu_needs(self.ssn.snap.pods[t]), cards, self._cards_allowed(t),
                                              self.policy) or []
        ok = first + np.flatnonzero(self.inv.fit(need, cards, self.exclusive(t)) & self.allowed(t)[cards])
        return self.inv.order(ok, self.policy)[:need.cards]

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        head = self._head(cid)
        need = self.need(head)
        rows = np.arange(self.ssn.snap.n_nodes) if nodes is None else nodes
        out = np.zeros(len(rows), dtype=np.float64)
        flat = self.flat_needs(head)
        for i, node in enumerate(rows.tolist()):
            for c, need in zip(self._choose(head, node), flat):
                # Volcano's GPUScore: binpack by the card's memory use with this pod's share on it,
                # spread for each card the pod would have alone.
                if self.policy == "spread":
                    out[i] += 100.0 if self.inv.used_num[c] == 0 else 0.0
                else:
                    used = self.inv.used_mem[c] + need.memory_on(int(self.inv.memory[c]))
                    out[i] += 100.0 * used / max(int(self.inv.memory[c]), 1)
        return out * self.weight

    def placed(self, t: int, node: int) -> None:
        need = self.need(t)
        if need is None:
            return
        chosen = self._choose(t, node)
        for c in (chosen if not self.multi(t) else self._take_multi(t, chosen, 1)):
            self.inv.take(c, need, exclusive=self.exclusive(t))
        devices = dict(self.ssn.task_devices.get(t, {}))
        devices[vg.VGPU_NUMBER] = tuple(int(self.inv.local[c]) for c in chosen)
        self._charge_group(t, chosen, 1)
        self.ssn.task_devices[t] = devices
        self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)

    def unplaced(self, t: int, node: int) -> None:
        need = self.need(t)
        devices = self.ssn.task_devices.get(t)
        if need is None or not devices or vg.VGPU_NUMBER not in devices:
            return
        first = self.inv.first.get(node)
        mine = devices[vg.VGPU_NUMBER]
        if first is not None:
            self._charge_group(t, [first + local for local in mine], -1)
        if self.multi(t) and first is not None:
            mine = self._take_multi(t, [first + local for local in mine], -1)
        for local in mine:
            if first is not None:
                self.inv.take(first + local, need, -1, exclusive=self.exclusive(t))
        rest = {r: c for r, c in devices.items() if r != vg.VGPU_NUMBER}
        if rest:
            self.ssn.task_devices[t] = rest
        else:
            self.ssn.task_devices.pop(t, None)
        self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)


class DeviceSharePlugin(Plugin):
    name = "deviceshare"
    answers = frozenset({"predicate", "node_order"})

    def on_session_open(self, ssn) -> None:
        # Node scores (card fill, topology groups, vGPU card use) count only with a weight; like
        # Volcano's deviceshare.ScheduleWeight the catalog's default is 0. Card choice on the
        # chosen node follows `policy` either way.
        weight = self.spec.weight if self.spec.weight is not None else cat.PLUGINS[self.name].default_weight
        # Card memory and cores are checked card by card, not by the node fit (the card count
        # stays in it: the kubelet sums it per node). vGPU memory and cores are registered node
        # resources the kubelet sums too; a memory percentage is no node resource at all (the
        # kubelet drops extended resources its node does not advertise).
        per_card = ssn.snap.device_managed.copy()
        if ssn.snap.vgpu is not None:
            if vg.VGPU_PERCENT in ssn.snap.resource_index:
                per_card[ssn.snap.resource_index[vg.VGPU_PERCENT]] = True
            vgpu = VgpuRule(ssn, ssn.snap.vgpu, self.args.get("schedule_policy", "binpack"), weight)
            vgpu.node_lock = bool(self.args.get("node_lock"))
            self.register(ssn, "predicate", vgpu)
            self.register(ssn, "node_order", vgpu)
            ssn.add_listener(vgpu)
        ssn.check_columns_per_card(per_card)
        if not ssn.snap.devices:
            return
        policy = self.args.get("schedule_policy") if self.args.get("gpu_sharing") else None
        rule = DeviceRule(ssn, DeviceHooks(ssn.snap, policy), weight)
        self.register(ssn, "predicate", rule)
        self.register(ssn, "node_order", rule)
        ssn.add_listener(rule)     # cards are taken on placement even with both points off


PLUGIN = DeviceSharePlugin
