"""Device usage in a simulation (Dynamic Resource Allocation): per DeviceClass, the devices the
ResourceSlices publish that the class's selectors match, and how many of them claims hold; per
node at the end of the run, and over the run as the mean of allocated ÷ published (each cycle's
sample weighted by how long it held, as the other time averages of runtime.simulation.metrics).

A device counts under every class whose selectors it matches (a class "gpu" and a class "a100"
both count an A100), and as allocated when any claim's `status.allocation` holds it, whichever
class its request named. Devices of a slice that no single node owns (`allNodes`, a node
selector) are counted under ALL_NODES or SELECTED_NODES instead of a node. A class whose
selector errs (a CEL runtime error) counts no device, as the queue quotas' class totals do.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.cluster.dra import Dra, SubRequest, allocated_devices
from runtime.cluster.draalloc import AllocationError, Entry, build_inventory

ALL_NODES = "(all nodes)"
SELECTED_NODES = "(node selector)"

DeviceId = tuple[str, str, str]       # (driver, pool, device)


@dataclass(frozen=True)
class ClassUsage:
    """One DeviceClass's devices: published and allocated at the end, per node, and the mean over the run."""

    published: int
    allocated: int
    utilization: float | None          # mean allocated ÷ published over the run (None: never published)
    nodes: dict[str, tuple[int, int]]  # node (or ALL_NODES / SELECTED_NODES) -> (published, allocated)

    def to_dict(self) -> dict:
        return {"published": self.published, "allocated": self.allocated,
                "utilization": None if self.utilization is None else round(self.utilization, 4),
                "nodes": {node: {"published": p, "allocated": a} for node, (p, a) in sorted(self.nodes.items())}}


def _node_of(entry: Entry) -> str:
    piece, device = entry.slice, entry.device
    if piece.per_device_nodes:
        if device.node_name:
            return device.node_name
        return ALL_NODES if device.all_nodes else SELECTED_NODES
    if piece.node_name:
        return piece.node_name
    return ALL_NODES if piece.all_nodes else SELECTED_NODES


class DeviceMeter:
    """Counts, per class and node, the devices published and allocated in a cluster's DRA objects.
    Which devices a class matches is worked out once per set of slices and classes (CEL is
    evaluated then, not at every sample)."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._members: dict[str, list[tuple[DeviceId, str]]] = {}
        self._objects: tuple = ()

    def _membership(self, dra: Dra) -> dict[str, list[tuple[DeviceId, str]]]:
        # The objects themselves are the key: the simulator replaces a slice or class it changes.
        # They are kept alive with the key (self._objects), so no new object can take an old one's id.
        key = (tuple(map(id, dra.slices.values())), tuple(map(id, dra.classes.values())))
        if key != self._key:
            self._objects = (tuple(dra.slices.values()), tuple(dra.classes.values()))
            inventory = build_inventory(dra)
            members: dict[str, list[tuple[DeviceId, str]]] = {}
            for cls in sorted(dra.classes):
                probe = SubRequest("usage", cls)
                try:
                    members[cls] = [(e.device_id, _node_of(e)) for e in inventory.entries
                                    if inventory.selectable(probe, e.index, "device usage")]
                except AllocationError:
                    members[cls] = []
            self._key, self._members = key, members
        return self._members

    def counts(self, dra: Dra) -> dict[str, dict[str, tuple[int, int]]]:
        """class -> node -> (published, allocated); empty without DeviceClasses and slices."""
        if not dra.classes or not dra.slices:
            return {}
        held = allocated_devices(dra.claims.values())
        out: dict[str, dict[str, tuple[int, int]]] = {}
        for cls, members in self._membership(dra).items():
            nodes: dict[str, tuple[int, int]] = {}
            for device_id, node in members:
                published, allocated = nodes.get(node, (0, 0))
                nodes[node] = (published + 1, allocated + (device_id in held))
            out[cls] = nodes
        return out

    def fractions(self, dra: Dra) -> dict[str, float]:
        """class -> allocated ÷ published now (classes that match no device left out)."""
        out = {}
        for cls, nodes in self.counts(dra).items():
            published = sum(p for p, _ in nodes.values())
            if published:
                out[cls] = sum(a for _, a in nodes.values()) / published
        return out


def usage(end_counts: dict[str, dict[str, tuple[int, int]]], samples: list[dict[str, float]],
          weights: list[float]) -> dict[str, ClassUsage]:
    """Each class's usage: `end_counts` from DeviceMeter.counts at the end, `samples` each cycle's
    DeviceMeter.fractions with their holding times (a class missing from a sample published nothing then)."""
    out = {}
    for cls, nodes in sorted(end_counts.items()):
        held = [(s[cls], w) for s, w in zip(samples, weights) if cls in s]
        total = sum(w for _, w in held)
        mean = sum(f * w for f, w in held) / total if total else (held[-1][0] if held else None)
        out[cls] = ClassUsage(sum(p for p, _ in nodes.values()), sum(a for _, a in nodes.values()), mean, nodes)
    return out
