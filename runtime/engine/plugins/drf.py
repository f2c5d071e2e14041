"""drf: dominant resource fairness. share(job) = max over resources of allocated / cluster
total; lower share first. A victim is allowed when the preemptor's share with its task is at
most (within 1e-6) the victim job's share without the victim. Flat drf orders no queues and
picks no reclaim victims, as in Volcano: the queue order is the next plugin's (proportion's,
capacity's).

With `enable_hierarchy` (Volcano's hdrf), drf orders queues by hierarchical DRF and picks
reclaim victims by it. The hierarchy
is each queue's path (QueueInfo.hierarchy: Volcano's volcano.sh/hierarchy annotations, else its
parents), jobs its leaves. Bottom up, a job is saturated when it holds its whole request on a
resource, or requests one nobody demands any more; a node's allocation is its children's, each
unsaturated one scaled to the smallest dominant share among them; a node is saturated when all
its children are. Queues compare level by level from the top: an unsaturated node first, then
the lower share / weight."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from runtime.engine.plugins.base import Plugin

SHARE_DELTA = 1e-6


def dominant_share(allocated: np.ndarray, total: np.ndarray) -> float:
    mask = total > 0
    if not mask.any():
        return 0.0
    return float((allocated[mask] / total[mask]).max())


@dataclass(eq=False)
class _Node:
    weight: float
    children: dict[str, "_Node"] = field(default_factory=dict)
    jobs: list[int] = field(default_factory=list)
    allocated: np.ndarray | None = None
    share: float = 0.0
    saturated: bool = False


class DrfPlugin(Plugin):
    name = "drf"
    answers = frozenset({"job_order", "queue_order", "preemptable", "reclaimable"})

    def on_session_open(self, ssn) -> None:
        total = ssn.total.astype(np.float64)
        # The pods column is a count, not a resource to share.
        total_for_share = total.copy()
        total_for_share[ssn.snap.resource_index["pods"]] = 0
        self.total = total_for_share

        def job_shares() -> np.ndarray:
            out = np.empty(len(ssn.job_allocated), dtype=np.float64)
            ssn.k.dominant_shares(ssn.job_allocated, total_for_share, out)
            return out

        self.register(ssn, "job_order", ssn.k.RowShare(ssn.job_allocated, total_for_share).of, column=job_shares)

        def victims(preemptor: int, candidates: list[int]) -> list[int]:
            pj = ssn.snap.task_job[preemptor]
            mine = dominant_share(ssn.job_allocated[pj] + ssn.snap.request[preemptor], total_for_share)
            out = []
            for c in candidates:
                cj = ssn.snap.task_job[c]
                theirs = dominant_share(ssn.job_allocated[cj] - ssn.snap.request[c], total_for_share)
                # A task of the preemptor's own job (preempt between tasks of one job) is compared
                # the same way, as Volcano's: the job less the victim is below the job plus the
                # preemptor, so drf alone gives no sibling (tiers before it may).
                if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
                    out.append(c)
            return out

        self.register(ssn, "preemptable", victims)
        if not self.spec.flags.get("hierarchy", False):
            return
        tree = HierarchicalShares(ssn, total_for_share)
        self.register(ssn, "queue_order", tree.key)
        self.register(ssn, "reclaimable", tree.reclaimable)


class HierarchicalShares:
    """The hdrf tree of one session, recomputed when placements changed since it was last read
    (as Volcano updates it on every allocation)."""

    def __init__(self, ssn, total: np.ndarray):
        self.ssn = ssn
        self.total = total
        self._seen = -1
        self._keys: dict[int, tuple] = {}

    def _build(self, changed: dict[int, np.ndarray] | None = None) -> dict[int, tuple]:
        """Each queue's key; `changed` replaces some jobs' allocations (a reclaim being weighed)."""
        ssn = self.ssn
        snap = ssn.snap
        root = _Node(1.0)
        queue_node: dict[int, list[_Node]] = {}
        allocated = ssn.job_allocated.astype(np.float64)
        for j, row in (changed or {}).items():
            allocated[j] = row
        for job in snap.jobs:
            if job.queue <= 0:
                continue
            node, path = root, [root]
            for name, weight in snap.queues[job.queue].hierarchy:
                node = node.children.setdefault(name, _Node(weight))
                path.append(node)
            node.jobs.append(job.index)
            queue_node.setdefault(job.queue, path)
        for q, info in enumerate(snap.queues):
            if q and q not in queue_node:
                node, path = root, [root]
                for name, weight in info.hierarchy:
                    node = node.children.setdefault(name, _Node(weight))
                    path.append(node)
                queue_node[q] = path
        total_allocated = allocated.sum(axis=0) if len(allocated) else np.zeros_like(self.total)
        demanding = total_allocated < self.total
        self._fill(root, allocated, demanding)
        return {q: tuple((n.saturated, n.share / n.weight) for n in path[1:]) for q, path in queue_node.items()}

    def _fill(self, root: _Node, allocated: np.ndarray, demanding: np.ndarray) -> None:
        """Fill every node of the tree, children before their parent (no recursion: however
        deep a tree, snapshot bounds it at MAX_QUEUE_DEPTH, but a walk must not depend on it)."""
        order = [root]
        for node in order:
            order.extend(node.children.values())
        for node in reversed(order):
            self._fill_one(node, allocated, demanding)

    def _fill_one(self, node: _Node, allocated: np.ndarray, demanding: np.ndarray) -> None:
        parts = []          # (allocation, share, saturated) of each child and job
        for child in node.children.values():
            parts.append((child.allocated, child.share, child.saturated))
        request = self.ssn.job_request
        for j in node.jobs:
            alloc = allocated[j]
            req = request[j]
            saturated = bool(((alloc != 0) & (req != 0) & (alloc >= req)).any() or ((~demanding) & (req != 0)).any())
            parts.append((alloc, dominant_share(alloc, self.total), saturated))
        least = min((dominant_share(a, self.total) for a, s, sat in parts if s != 0 and not sat), default=1.0)
        out = np.zeros_like(self.total)
        for alloc, share, saturated in parts:
            if share != 0:
                out += alloc if saturated else alloc * (least / share)
        node.allocated = out
        node.share = dominant_share(out, self.total)
        node.saturated = all(sat for _, _, sat in parts)

    def key(self, q: int) -> tuple:
        if self._seen != self.ssn.ledger.log_n:
            self._keys = self._build()
            self._seen = self.ssn.ledger.log_n
        return self._keys.get(q, ())

    def reclaimable(self, reclaimer: int, candidates: list[int]) -> list[int]:
        """Victims whose queue, with the reclaimer's task placed and the victim gone, would
        come after the reclaimer's queue."""
        snap = self.ssn.snap
        rj = int(snap.task_job[reclaimer])
        mine = self.ssn.job_allocated[rj] + snap.request[reclaimer]
        out = []
        for c in candidates:
            cj = int(snap.task_job[c])
            changed = {rj: mine, cj: self.ssn.job_allocated[cj] - snap.request[c]} if cj != rj else {rj: mine}
            keys = self._build(changed)
            if keys.get(snap.jobs[rj].queue, ()) < keys.get(snap.jobs[cj].queue, ()):
                out.append(c)
        return out


PLUGIN = DrfPlugin
