"""The extension points' vocabulary: the points a plugin may answer, the votes, the node mask
codes the placement kernels read, a static predicate's `Check`, and `StatefulRule`, the base of
the filters and scorers whose answer depends on where pods are (runtime.engine.rules).

The session (runtime.engine.session) asks the plugins through these; plugins and rules import
them from here, not from the session, so the rules and the session do not import each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.snapshot import Domains

ORDER_POINTS = ("job_order", "queue_order", "task_order")
# Every extension point a plugin may answer (compiler.catalog's PluginSpec.points name them).
POINTS = frozenset({
    "job_order", "queue_order", "task_order", "job_ready", "job_pipelined", "job_starving", "job_valid",
    "job_enqueued", "preemptable", "reclaimable", "preemptive", "overused", "allocatable", "predicate",
    "node_order",
    # shuffle's question (Volcano's VictimTasks): which running pods to evict, each with its reason.
    "victim",
})
PERMIT, REJECT, ABSTAIN = True, False, None
# Node mask codes the placement kernels read (runtime/engine/kernels/place.py): bit 0 the node passes
# the class's filters; bit 1 it passes only once releasing pods have left it (a stateful rule's
# room is held by pods that are leaving), so a placement there is pipelined, not bound.
MASK_FAIL, MASK_PASS, MASK_RELEASING = 0, 1, 2
MASK_LATER = MASK_PASS | MASK_RELEASING


@dataclass(frozen=True)
class Check:
    """One static predicate over all nodes for a task class: `passing[n]` and the message for
    the nodes that fail it ("node(s) didn't match Pod's node affinity/selector")."""

    message: str
    passing: np.ndarray


class StatefulRule:
    """A filter and/or scorer whose answer depends on where pods are (kube-scheduler's
    PreFilter/Filter/Score with AddPod/RemovePod, Volcano's allocate/deallocate event
    handlers). One object keeps the rule's counts for the session: the session calls
    `placed`/`unplaced` for every placement made or undone (a statement discarded, a gang
    rolled back) and `evicted`/`unevicted` for every victim, and the rule calls
    `Session.mark_dirty` for the classes and nodes whose answer those changed.

    A plugin registers it at `predicate` (then `filters`, `codes` and `checks` answer) and/or
    at `node_order` (`scores` and `score`). `cid` is a task class (Snapshot.classes)."""

    name = ""
    # Whether evicting pods can make the filter pass (preempt and reclaim then consider the
    # node); device cards are not freed by preemption (runtime/README.md).
    preempts = True

    def filters(self, cid: int) -> bool:
        """Whether the filter concerns class cid at all (else it passes every node)."""
        return False

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        """Mask codes (MASK_FAIL, MASK_PASS, MASK_LATER) of class cid on `nodes` (all when None)."""
        raise NotImplementedError

    def code_at(self, cid: int, row: int) -> int:
        """`codes` on the one node row `row`, as an int: a placement re-asks a class about the
        node it touched, thousands of times a cycle, and a rule that answers a node in Python
        spares the arrays (overridden where it does)."""
        return int(self.codes(cid, np.array([row], dtype=np.int64))[0])

    def passing_nodes(self, cid: int, most: int) -> np.ndarray | None:
        """The only nodes (distinct, read only) where the filter may pass class cid now, when
        they are at most `most`; None when they are more, or the rule does not say. A class
        most of whose nodes fail (a hard zone spread passing in one zone) places by a scan of
        these instead of a search of the shared tree or a tree of its own (Session.place_few)."""
        return None

    def domain_verdicts(self, cid: int) -> tuple["Domains", np.ndarray] | None:
        """Where the filter's answer for class cid is one per topology domain, only passing or
        failing, and the domains are few (a hard zone spread): (the domains, per domain 0.0
        where it passes and -inf where it fails, with one entry more for the nodes lacking the
        key), kept current as placements move it. A class this filter alone concerns (no other
        filter, no stateful scorer) then places by its request's DomainTree, failing domains
        left out (Session.place_by_domain), rather than by codes on every node of a domain
        whose verdict flips. None: the rule does not say (or not for this class)."""
        return None

    def checks(self, cid: int) -> list["Check"]:
        """Why nodes fail now, one Check per cause (kube-scheduler's words), for reasons."""
        return []

    def scores(self, cid: int) -> bool:
        return False

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        """Weighted node scores of class cid on `nodes` (all when None)."""
        raise NotImplementedError

    def domain_scores(self, cid: int) -> tuple["Domains", np.ndarray] | None:
        """Where class cid's weighted score is one per topology domain and the domains are few:
        (the domains, the score per domain with one entry more, for the nodes lacking the key),
        so that score(cid, nodes) is the scores read through the nodes' domains (Domains.of, -1
        reading the last entry). A class scored by this rule alone, with no stateful filter,
        then places by its request's DomainTree (Session.place_by_domain). None: the rule does
        not say (or not for this class)."""
        return None

    def unchanged_by_own(self, cid: int) -> bool:
        """Whether placing tasks of class cid leaves the rule's answers for class cid as they
        were (then a run of them is placed in one call, as a class no rule concerns)."""
        return False

    def excludes_own_node(self, cid: int) -> bool:
        """Whether placing a task of class cid on a node makes the rule fail that node for class
        cid and changes nothing else of its answers for it (a local volume's only PV taken);
        with every other rule of the class unchanged_by_own, a run is placed in one call."""
        return False

    def listens(self, cid: int) -> bool:
        """Whether placing, undoing or evicting a pending task of class cid can change the rule's
        state (else the session does not tell it of them)."""
        return True

    def placed(self, t: int, node: int) -> None:
        pass

    def unplaced(self, t: int, node: int) -> None:
        pass

    def evicted(self, t: int, node: int) -> None:
        pass

    def unevicted(self, t: int, node: int) -> None:
        pass
