"""Fragmentation: free room that waiting pods cannot use. Of the free room on nodes (or, for
GPUs shared by memory, cards) that could hold a waiting pod's request were they empty, the part
where none fits now. The simulator samples it over time (runtime.simulation.metrics), the live
views show the last cycle's (runtime.service.views)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from runtime.cluster.model import ClusterState, Node, Pod
from runtime.engine.snapshot import DeviceInventory, device_need


def node_fragmentation(state: ClusterState, used_by_node, resources: list[str],
                       waiting: Iterable[Pod]) -> dict[str, float]:
    """Per resource: of the free room on schedulable nodes that could hold one of the `waiting`
    pods were they empty, the part on nodes where none of them fits now (`used_by_node`: node ->
    resource -> used). "Could hold" is the pod's request and the node filters that do not depend
    on other pods: its node selector, required node affinity and the taints it does not tolerate
    (room on a GPU node a pod may not use is not fragmentation for that pod)."""
    names = [n for n, node in state.nodes.items() if not node.unschedulable]
    if not names:
        return {}
    kinds: dict[tuple, np.ndarray] = {}          # (request, constraints) -> the nodes that admit it
    for pod in waiting:
        request = tuple(pod.requests.get(r, 0) for r in resources)
        key = (request, tuple(sorted(pod.node_selector.items())), pod.required_terms, pod.tolerations)
        if key not in kinds:
            kinds[key] = np.array([admits(state.nodes[n], pod) for n in names], dtype=bool)
    if not kinds:
        return {}
    allocatable = np.array([[state.nodes[n].allocatable.get(r, 0) for r in resources] for n in names],
                           dtype=np.int64)
    used = np.array([[used_by_node.get(n, {}).get(r, 0) for r in resources] for n in names], dtype=np.int64)
    free = np.maximum(allocatable - used, 0)
    requests = np.array([key[0] for key in kinds], dtype=np.int64)
    hosts = np.stack(list(kinds.values()), axis=1)                              # (nodes, kinds)
    fits_now = (requests[None, :, :] <= free[:, None, :]).all(axis=2) & hosts
    fits_empty = (requests[None, :, :] <= allocatable[:, None, :]).all(axis=2) & hosts
    out = {}
    for i, r in enumerate(resources):
        # Only the waiting pods that ask for r, on nodes that could hold one of them empty:
        # free r there that none of them fits now is stranded.
        asking = requests[:, i] > 0
        if not asking.any():
            continue
        candidate = fits_empty[:, asking].any(axis=1)
        stranded = candidate & ~fits_now[:, asking].any(axis=1)
        total_free = int(free[candidate, i].sum())
        if total_free > 0:
            out[r] = float(free[stranded, i].sum()) / total_free
    return out


def admits(node: Node, pod: Pod) -> bool:
    """Whether the node's labels and taints let the pod on (selector, required affinity with
    matchFields on the name, NoSchedule/NoExecute taints), whatever runs there."""
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_terms and not any(
            term and all((node.name in e.values) == (e.operator == "In") if e.field else e.matches(node.labels)
                         for e in term)
            for term in pod.required_terms):
        return False
    return all(any(t.tolerates(taint) for t in pod.tolerations)
               for taint in node.taints if taint.effect in ("NoSchedule", "NoExecute"))


def card_fragmentation(inventories: Iterable[DeviceInventory], waiting: list[dict[str, int]]) -> dict[str, float]:
    """Per card for devices shared by memory (the session's inventories hold the cycle's
    placements): of the idle memory on cards that could hold a waiting task's slice were
    they empty, the part on cards where no waiting task's slice fits now."""
    out = {}
    for inv in inventories:
        if inv.plan.sharing != "memory" or not len(inv.card_node) or inv.memory_resource is None:
            continue
        needs = {device_need(inv.plan, inv.memory_resource, inv.memory_unit, requests).memory for requests in waiting}
        needs.discard(0)
        if not needs:
            continue
        sizes = np.array(sorted(needs), dtype=np.int64)
        free = np.where(inv.whole, 0, np.maximum(inv.card_memory - inv.used_memory, 0))
        hosts = inv.model_ok[inv.card_node] & ~inv.whole
        candidate = hosts & (inv.card_memory[:, None] >= sizes[None, :]).any(axis=1)
        stranded = candidate & ~(free[:, None] >= sizes[None, :]).any(axis=1)
        total_free = int(free[candidate].sum())
        if total_free > 0:
            out[inv.memory_resource] = float(free[stranded].sum()) / total_free
    return out
