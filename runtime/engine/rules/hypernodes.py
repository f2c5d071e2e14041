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

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.session import Session


def asks_topology(job) -> bool:
    """Whether a snapshot job asks for network topology (a non-empty spec.networkTopology)."""
    return job.podgroup is not None and job.podgroup.network_topology is not None


class HyperNodeRule(StatefulRule):
    name = "network-topology"
    preempts = False

    def __init__(self, ssn: Session):
        self.ssn = ssn
        snap = ssn.snap
        self.concerned: set[int] = set()
        for job in snap.jobs:
            if asks_topology(job):
                self.concerned.update(int(c) for c in snap.task_class[job.tasks].tolist())
        self.node_pos = {name: i for i, name in enumerate(snap.node_names)}
        self._rows: dict[str, np.ndarray] = {}
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
