"""The cache's running count of settled pods (runtime.cluster.model.SettledPods), kept per watch event
so that a snapshot for a plan that folds them copies the pods still in play and a few counts,
not every pod of the cluster.

    ledger = SettledLedger("volcano")
    ledger.add(pod, queue)     # a pod that settles arrived, counted under `queue`
    ledger.remove(pod, queue)  # ... changed or left: the same object and queue that were added
    ledger.add_group(queue, 1, elastic)  # a gang settled (-1: it is in play again)
    ledger.view()              # SettledPods: copies of the counts

A lone pod settles by itself (runtime.cluster.model.settles). A gang settles whole or not at all
(`gang_settles`): every member bound (or succeeded), its PodGroup Running, and the PodGroup's
status already what a cycle would compute for it, so that leaving it out changes no decision
and no write. A kubelet starting a member changes the pod counts the status carries: the gang
is in play again until the cycle has written them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.kube.statusfacts import podgroup_says
from runtime.cluster.model import PG_RUNNING, POD_RUNNING, POD_SUCCEEDED, Pod, PodGroup, SettledPods, scheduled_condition, total


class SettledLedger:
    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self._by_queue: dict[tuple[str | None, tuple], int] = {}
        self._by_node: dict[tuple[str, tuple, bool], int] = {}
        self._groups: dict[str, int] = {}
        self._elastic: dict[str, dict[str, int]] = {}

    def add(self, pod: Pod, queue: str | None) -> None:
        self._count(pod, queue, 1)

    def remove(self, pod: Pod, queue: str | None) -> None:
        self._count(pod, queue, -1)

    def add_group(self, queue: str, step: int, elastic: Mapping[str, int]) -> None:
        """A gang settled under `queue` (step 1) or is in play again (-1, with the same
        `elastic` it settled with: gang_elastic)."""
        _bump(self._groups, queue, step)
        if elastic:
            held = self._elastic.setdefault(queue, {})
            for res, amount in elastic.items():
                _bump(held, res, step * amount)
            if not held:
                del self._elastic[queue]

    def view(self) -> SettledPods:
        return SettledPods(self.scheduler_name, dict(self._by_queue), dict(self._by_node), dict(self._groups),
                           {q: dict(held) for q, held in self._elastic.items()})

    def clear(self) -> None:
        self._by_queue.clear()
        self._by_node.clear()
        self._groups.clear()
        self._elastic.clear()

    def _count(self, pod: Pod, queue: str | None, step: int) -> None:
        ours = pod.scheduler_name == self.scheduler_name
        if ours and pod.phase == POD_SUCCEEDED:
            return  # holds nothing, counts nowhere
        items = tuple(pod.requests.items())
        _bump(self._by_node, (pod.node_name, items, ours), step)
        if ours:
            _bump(self._by_queue, (queue, items), step)


def _bump(counts: dict, key: Any, step: int) -> None:
    left = counts.get(key, 0) + step
    if left:
        counts[key] = left
    else:
        del counts[key]


@dataclass
class Gang:
    """Our pods naming one PodGroup, with the tallies `gang_settles` reads."""

    members: dict[str, tuple[Pod, bool]] = field(default_factory=dict)  # key -> (pod, can settle)
    blocked: int = 0  # members that cannot settle (waiting, releasing, failed, holding cards)
    running: int = 0
    succeeded: int = 0
    folded: str | None = None  # while settled: the queue its members are counted under
    elastic: dict[str, int] = field(default_factory=dict)  # while settled: what it held beyond minResources

    def join(self, key: str, pod: Pod, can_settle: bool) -> None:
        self.leave(key)
        self.members[key] = (pod, can_settle)
        self._tally(pod, can_settle, 1)

    def leave(self, key: str) -> None:
        left = self.members.pop(key, None)
        if left is not None:
            self._tally(*left, -1)

    def _tally(self, pod: Pod, can_settle: bool, step: int) -> None:
        if not can_settle:
            self.blocked += step
        if pod.phase == POD_RUNNING:
            self.running += step
        elif pod.phase == POD_SUCCEEDED:
            self.succeeded += step


def gang_settles(group: PodGroup | None, status: Mapping[str, Any] | None, gang: Gang,
                 hypernodes: bool = False) -> bool:
    """Whether a cycle would change nothing of this gang: nothing to place or evict (every member
    can settle), its PodGroup stays Running (minMember ready, not all succeeded) with the status
    it has, and it holds its minResources (else the shortfall counts as inqueue in its queue).
    With `hypernodes` (the cluster has a topology), a gang asking for topology also needs its
    HyperNode annotation written: the cycle writes it (a soft gang no HyperNode holds stays in
    play, at the cost of a look each cycle)."""
    size = len(gang.members)
    if group is None or gang.blocked or not size or group.phase != PG_RUNNING:
        return False
    if hypernodes and not group.allocated_hypernode and group.asks_topology:
        return False
    if size < group.min_member or gang.succeeded == size:
        return False
    counts = {"running": gang.running, "succeeded": gang.succeeded}
    if not podgroup_says(status, PG_RUNNING, (scheduled_condition(size, size),), counts):
        return False
    if group.min_resources:
        held = total(pod.requests for pod, _ in gang.members.values() if pod.phase != POD_SUCCEEDED)
        return all(amount <= held.get(res, 0) for res, amount in group.min_resources.items())
    return True


def gang_elastic(group: PodGroup, gang: Gang) -> dict[str, int]:
    """What the gang's members hold beyond its minResources (all of it without minResources),
    as Volcano's JobInfo.GetElasticResources counts it."""
    held = total(pod.requests for pod, _ in gang.members.values() if pod.phase != POD_SUCCEEDED)
    minimum = group.min_resources or {}
    return {res: amount - minimum.get(res, 0) for res, amount in held.items() if amount > minimum.get(res, 0)}
