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
from runtime.engine.snapshot import DeviceInventory, DeviceNeed, Snapshot, device_need

TOPOLOGY_BONUS = 100.0


class DeviceHooks:
    def __init__(self, snap: Snapshot, policy_override: str | None):
        self.snap = snap
        self.inventories = snap.devices
        self.policy_override = policy_override
        self._needs: dict[int, list[tuple[int, DeviceNeed]]] = {}

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
        if inv.plan.sharing == "whole":
            return (~inv.whole) & (inv.tasks == 0)
        ok = ~inv.whole & (inv.card_memory - inv.used_memory >= need.memory)
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
            has = np.bincount(inv.card_node, minlength=n) >= need.cards
            out.append((f"node(s) had too few {res} cards", has))
            if inv.plan.models:
                out.append((f"node(s) had no {res} of model {'/'.join(inv.plan.models)}", inv.model_ok))
            ok = self._card_ok(inv, need)
            fits = np.bincount(inv.card_node[ok], minlength=n) >= need.cards
            if inv.plan.sharing == "whole":
                message = f"insufficient idle {res} cards"
            else:
                message = f"device memory fragmented: no card with {format_base_units('memory', need.memory)} idle"
                if need.cards > 1:
                    message = (f"device memory fragmented: fewer than {need.cards} cards with "
                               f"{format_base_units('memory', need.memory)} idle")
            out.append((message, fits))
        return out

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
            self.ssn.task_devices[t] = self.hooks.assign(t, node)
            self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)

    def unplaced(self, t: int, node: int) -> None:
        devices = self.ssn.task_devices.pop(t, None)
        if devices:
            self.hooks.release(t, node, devices)
            self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)


class DeviceSharePlugin(Plugin):
    name = "deviceshare"
    answers = frozenset({"predicate", "node_order"})

    def on_session_open(self, ssn) -> None:
        if not ssn.snap.devices:
            return
        policy = self.args.get("schedule_policy") if self.args.get("gpu_sharing") else None
        hooks = DeviceHooks(ssn.snap, policy)
        # Node scores (card fill, topology groups) count only with a weight; like Volcano's
        # deviceshare.ScheduleWeight the catalog's default is 0. Card choice on the chosen node
        # follows `policy` either way.
        weight = self.spec.weight if self.spec.weight is not None else cat.PLUGINS[self.name].default_weight
        rule = DeviceRule(ssn, hooks, weight)
        # Card memory and cores are checked card by card, not by the node fit (the card count
        # stays in it: the kubelet sums it per node).
        ssn.check_columns_per_card(ssn.snap.device_managed)
        self.register(ssn, "predicate", rule)
        self.register(ssn, "node_order", rule)
        ssn.add_listener(rule)     # cards are taken on placement even with both points off


PLUGIN = DeviceSharePlugin
