"""The live device view (`GET /api/v1/devices`, the dashboard's Devices section): per node with
shared or counted cards, each card's memory, cores and tasks against its split count, used and
free, and the pods holding it (runtime.engine.cards, from the last cycle's inventories: Volcano's
GPU share and GPU number, `device` blocks, HAMi vGPU); the nodes whose free card memory no waiting
pod uses because it is split over cards; and for Dynamic Resource Allocation, per DeviceClass and
node, the devices ResourceSlices publish that the class's selectors match and how many claims hold
(runtime.simulation.devices.DeviceMeter, the simulator's own count), this cycle's allocations
included.

Worked out once per cycle, when first asked (the pods' cards are read off the state then), and
bounded: MAX_CARDS cards and MAX_CLASS_ROWS class rows listed, the counts exact. The figures are
the cycle's whose session facts the view holds (`figuresCycle`), the holders the last cycle's.

Who sees what (secure serving, issue 30): the view needs `list nodes`, as the dashboard's Nodes
section; a holder is named only where the caller may list pods in its namespace (the others
counted in `hiddenPods`); the DRA rows need `list resourceslices.resource.k8s.io`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compiler.quantities import format_base_units
from runtime.cluster.dra import with_allocation
from runtime.engine.cards import Card, SplitNode, cards, placed_pods, split_card_memory
from runtime.service.views import CycleView, cycle_header
from runtime.simulation.devices import DeviceMeter

MAX_CARDS = 10_000
MAX_CLASS_ROWS = 10_000
RESOURCE_API = "resource.k8s.io"


@dataclass(frozen=True)
class ClassNode:
    """One DeviceClass's devices on one node (or on every node / a node selector's)."""

    device_class: str
    node: str
    published: int
    allocated: int

    def to_dict(self) -> dict[str, Any]:
        return {"deviceClass": self.device_class, "node": self.node, "published": self.published,
                "allocated": self.allocated, "free": self.published - self.allocated}


@dataclass(frozen=True)
class DeviceFacts:
    cards: tuple[Card, ...]
    split: tuple[SplitNode, ...]
    classes: tuple[ClassNode, ...]


_lock = threading.Lock()
_cached: tuple[CycleView, DeviceFacts] | None = None     # the last cycle's, worked out once
_meter = DeviceMeter()     # which devices a class matches, kept while slices and classes stay the same


def device_facts(view: CycleView) -> DeviceFacts:
    global _cached
    with _lock:
        if _cached is not None and _cached[0] is view:
            return _cached[1]
        facts = _work_out(view)
        _cached = (view, facts)
        return facts


def _work_out(view: CycleView) -> DeviceFacts:
    state, decisions = view.state, view.decisions
    all_cards: list[Card] = []
    split: list[SplitNode] = []
    session = view.facts
    if session is not None and (session.card_inventories or session.vgpu_inventory is not None):
        bound = [(state.pods[b.pod], b.node, b.devices) for b in decisions.bindings if b.pod in state.pods]
        all_cards = cards(session.node_names, session.card_inventories, session.vgpu_inventory,
                          placed_pods(state.pods.values(), bound))
        waiting = [p for key in view.reasons() if (p := state.pods.get(key)) is not None]
        split = split_card_memory(session.node_names, state.nodes, session.card_inventories,
                                  session.vgpu_inventory, waiting)
    classes: list[ClassNode] = []
    if state.dra.slices and state.dra.classes:
        dra = state.dra
        if decisions.claims:
            dra = dra.copy()
            for allocations in decisions.claims.values():
                for claim, allocation in allocations:
                    with_allocation(dra, claim, allocation, ())
        counts = _meter.counts(dra)      # under device_facts' lock
        for cls, nodes in sorted(counts.items()):
            for node, (published, allocated) in sorted(nodes.items()):
                classes.append(ClassNode(cls, node, published, allocated))
    return DeviceFacts(tuple(all_cards), tuple(split), tuple(classes))



def _card_dict(card: Card, visible: Callable[[str], bool]) -> dict[str, Any]:
    shown = [p for p in card.holders if visible(_namespace_of(p))]
    return {"node": card.node, "device": card.device, "card": card.index, "uuid": card.uuid or None,
            "memory": _bytes(card.memory), "usedMemory": _bytes(card.used_memory),
            "freeMemory": _bytes(card.free_memory), "usedCores": card.used_cores, "freeCores": card.free_cores,
            "tasks": card.tasks, "split": card.split, "whole": card.whole, "healthy": card.healthy,
            "takesMore": card.usable, "pods": shown, "hiddenPods": len(card.holders) - len(shown)}


def devices_document(view: CycleView, visible: Callable[[str], bool] = lambda namespace: True,
                     classes_visible: bool = True) -> dict[str, Any]:
    """The JSON of GET /api/v1/devices: `visible` says which namespaces' pods may be named,
    `classes_visible` whether the DRA rows may be shown (else `deviceClassesHidden`)."""
    facts = device_facts(view)
    out: dict[str, Any] = {
        **cycle_header(view),
        "cards": [_card_dict(c, visible) for c in facts.cards[:MAX_CARDS]],
        "cardsTotal": len(facts.cards),
        "splitCardMemory": [s.to_dict() for s in facts.split],
    }
    if classes_visible:
        out["deviceClasses"] = [c.to_dict() for c in facts.classes[:MAX_CLASS_ROWS]]
        out["deviceClassRows"] = len(facts.classes)
    else:
        out["deviceClasses"] = []
        out["deviceClassesHidden"] = True
    return out


def _bytes(value: int) -> str:
    return format_base_units("memory", value)


def _namespace_of(key: str) -> str:
    return key.partition("/")[0] if "/" in key else "default"
