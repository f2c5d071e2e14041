"""Network topology (Volcano's HyperNodes): while allocate tries a job that asks for topology
within one HyperNode (actions/topology.py), the job's task classes pass only that HyperNode's
nodes. Registered only when some job asks for topology (the snapshot then carries the resolved
HyperNodes); it concerns only the classes of such jobs' tasks, and answers "pass everywhere"
when no HyperNode is being tried, so other jobs' classes (and these outside the turn) pay
nothing. A class shared by a topology job and a plain one is restricted only during the
topology job's turn, when only that job's tasks are placed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from runtime.engine.extension import MASK_FAIL, MASK_PASS, Check, StatefulRule
from runtime.engine.snapshot import ALLOCATED, BOUND, PENDING, PIPELINED, SUCCEEDED, SubGroup

READY_COUNTED = (ALLOCATED, BOUND, SUCCEEDED)
PIPELINED_COUNTED = (ALLOCATED, BOUND, SUCCEEDED, PIPELINED)

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.session import Session


def asks_topology(job) -> bool:
    """Whether a snapshot job asks for network topology itself (a non-empty spec.networkTopology;
    its sub-group policies' are `PodGroup.asks_topology`)."""
    return job.podgroup is not None and job.podgroup.network_topology is not None


def row_memo(snap) -> dict:
    """What is derived from the resolved HyperNodes and the snapshot's node list alone (node
    positions, each HyperNode's rows, their stacking, their allocatable): kept on the resolution
    for the next cycles while both are the same objects (the node list is SnapshotCache's, and
    its allocatable with it)."""
    memo = snap.hypernodes.row_memo if snap.hypernodes is not None else {}
    if memo.get("node_names") is not snap.node_names:
        memo.clear()
        memo.update(node_names=snap.node_names, node_pos={name: i for i, name in enumerate(snap.node_names)},
                    rows={}, stacked={}, allocatable={})
    return memo


class HyperNodeRule(StatefulRule):
    name = "network-topology"
    preempts = False

    def __init__(self, ssn: Session):
        self.ssn = ssn
        snap = ssn.snap
        self.concerned: set[int] = set()
        for job in snap.jobs:
            if job.podgroup is not None and job.podgroup.asks_topology:
                self.concerned.update(int(c) for c in snap.task_class[job.tasks].tolist())
        memo = row_memo(snap)
        self.node_pos: dict[str, int] = memo["node_pos"]
        self._rows: dict[str, np.ndarray] = memo["rows"]
        self._totals: dict[tuple[str, ...], np.ndarray] = {}
        self._stacked: dict[tuple[str, ...], tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]] = \
            memo["stacked"]
        self.allowed: np.ndarray | None = None     # bool per node row, while a HyperNode is tried
        self.hypernode = ""
        self.classes: frozenset[int] = frozenset()

    def rows(self, name: str, leaves) -> np.ndarray:
        """The node rows of a HyperNode's leaves (those that are nodes of the snapshot), cached."""
        found = self._rows.get(name)
        if found is None:
            found = self._rows[name] = np.array(sorted(self.node_pos[n] for n in leaves if n in self.node_pos),
                                                dtype=np.int64)
        return found

    def rooms(self, names: tuple[str, ...], leaves_of, free: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """The node rows of each HyperNode in `names` and their room (sum of `free`, a per-node
        matrix, over each one's rows) in one gather: a tier of a hundred HyperNodes is looked at
        for every gang's turn, so its rows are stacked once per session."""
        found = self._stacked.get(names)
        if found is None:
            rows = [self.rows(name, leaves_of(name)) for name in names]
            filled = np.array([len(r) > 0 for r in rows], dtype=bool)
            lengths = np.array([len(r) for r in rows if len(r)], dtype=np.int64)
            stacked = np.concatenate([r for r in rows if len(r)]) if len(lengths) else np.zeros(0, dtype=np.int64)
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if len(lengths) else lengths
            found = self._stacked[names] = (rows, filled, stacked, starts)
        rows, filled, stacked, starts = found
        room = np.zeros((len(names), free.shape[1]), dtype=free.dtype)
        if len(stacked):
            room[filled] = np.add.reduceat(free[stacked], starts, axis=0)
        return rows, room

    def totals(self, names: tuple[str, ...], leaves_of) -> np.ndarray:
        """Each HyperNode's allocatable (`rooms` over the nodes' allocatable), once per session."""
        found = self._totals.get(names)
        if found is None:
            found = self._totals[names] = self.rooms(names, leaves_of, self.ssn.snap.allocatable)[1]
        return found

    def restrict(self, classes: frozenset[int], hypernode: str, allowed: np.ndarray | None) -> None:
        """Restrict `classes` to the nodes `allowed` (None: lift the restriction)."""
        if self.allowed is not None and allowed is not None and classes == self.classes:
            # From one HyperNode to another: only the nodes of either changed their answer.
            changed = np.flatnonzero(self.allowed ^ allowed)
            for cid in classes:
                self.ssn.mark_dirty(cid, changed)
        else:
            for cid in self.classes | classes:
                self.ssn.mark_dirty(cid, None)
        self.classes = classes if allowed is not None else frozenset()
        self.allowed = allowed
        self.hypernode = hypernode

    def filters(self, cid: int) -> bool:
        return cid in self.concerned

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        n = self.ssn.snap.n_nodes if nodes is None else len(nodes)
        if self.allowed is None or cid not in self.classes:
            return np.full(n, MASK_PASS, dtype=np.uint8)
        allowed = self.allowed if nodes is None else self.allowed[nodes]
        return np.where(allowed, MASK_PASS, MASK_FAIL).astype(np.uint8)

    def checks(self, cid: int) -> list[Check]:
        if self.allowed is None or cid not in self.classes:
            return []
        return [Check(f"node(s) outside HyperNode {self.hypernode}", self.allowed.copy())]


# --- sub-groups (spec.subGroupPolicy): Volcano's SubJob gang conditions ------------------------

def sub_group_count(ssn: Session, group: SubGroup, pipelined: bool) -> int:
    """The sub-group's members that run or will: allocated, bound or succeeded (and pipelined when
    asked), and pending zero-request ones (Volcano's SubJobInfo.ReadyTaskNum + PendingBestEffortTaskNum)."""
    status = ssn.status[group.tasks]
    counted = PIPELINED_COUNTED if pipelined else READY_COUNTED
    return int(np.isin(status, counted).sum() + ((status == PENDING) & ssn.zero[group.tasks]).sum())


def sub_group_ready(ssn: Session, group: SubGroup, pipelined: bool = False) -> bool:
    """Whether the sub-group has its subGroupSize members (SubJobInfo.IsReady / IsPipelined)."""
    return sub_group_count(ssn, group, pipelined) >= group.size


def sub_groups_short(ssn: Session, j: int, pipelined: bool = False) -> tuple[str, int, int] | None:
    """The first policy with minSubGroups whose sub-groups ready (or pipelined) fall short:
    (policy name, how many are, minSubGroups); None when every policy has its minimum
    (Volcano's JobInfo.CheckSubJobReady / CheckSubJobPipelined)."""
    groups = ssn.snap.sub_groups.get(j)
    if not groups:
        return None
    policies = ssn.snap.jobs[j].podgroup.sub_groups
    for i, policy in enumerate(policies):
        if policy.min_groups <= 0:
            continue
        have = sum(1 for g in groups if g.policy == i and sub_group_ready(ssn, g, pipelined))
        if have < policy.min_groups:
            return policy.name or f"#{i}", have, policy.min_groups
    return None


def sub_groups_missing(ssn: Session, j: int) -> tuple[str, int, int] | None:
    """The first policy with fewer sub-groups (by its pods' labels) than its minSubGroups:
    (policy name, how many there are, minSubGroups), or None (JobInfo.CheckSubJobValid)."""
    job = ssn.snap.jobs[j]
    if job.podgroup is None or not job.podgroup.sub_groups:
        return None
    groups = ssn.snap.sub_groups.get(j, ())
    for i, policy in enumerate(job.podgroup.sub_groups):
        count = sum(1 for g in groups if g.policy == i)
        if count < policy.min_groups:
            return policy.name or f"#{i}", count, policy.min_groups
    return None


# --- the job's HyperNode (volcano.sh/job-allocated-hypernode) ----------------------------------

def lowest_hypernode(tree, nodes: set[str]) -> str:
    """The lowest-tier HyperNode holding every one of `nodes` (ties by name), "" if none does."""
    if not nodes:
        return ""
    first = next(iter(nodes))
    for name in tree.chains.get(first, ()):          # lowest tier first
        if nodes <= tree.leaves.get(name, frozenset()):
            return name
    return ""


def job_hypernodes(ssn: Session) -> dict[str, str]:
    """For each PodGroup asking for network topology whose recorded HyperNode (the annotation
    volcano.sh/job-allocated-hypernode) is not where its pods now run (allocated, bound or
    succeeded): PodGroup key -> the lowest HyperNode holding them all ("" when no HyperNode
    holds them, or none runs: the annotation is removed, as Volcano forgets a job's HyperNode
    once none of its pods runs)."""
    snap = ssn.snap
    tree = snap.hypernodes
    out: dict[str, str] = {}
    if tree is None:
        return out
    for job in snap.jobs:
        group = job.podgroup
        if group is None or job.implicit or not group.asks_topology or not len(job.tasks):
            continue
        placed = {snap.node_names[int(ssn.task_node[t])] for t in job.tasks.tolist()
                  if ssn.status[t] in (ALLOCATED, BOUND) and ssn.task_node[t] >= 0}
        where = lowest_hypernode(tree, placed)
        if where != group.allocated_hypernode:
            out[job.key] = where
    return out
