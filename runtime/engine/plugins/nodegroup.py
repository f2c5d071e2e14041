"""nodegroup: each queue's pods kept in (or out of) its node groups, as Volcano's nodegroup plugin.

A node's group is its `volcano.sh/nodegroup-name` label; a queue's groups are its Queue's
`spec.affinity` (nodeGroupAffinity / nodeGroupAntiAffinity, each required and preferred) or the
policy's `node_groups`, `preferred_node_groups`, `excluded_node_groups`, `avoided_node_groups`.

Filter (Volcano's predicateFn), for a pod of queue q on node n:
- n has no group: passes only when the plugin is not `strict` and q names no group at all;
- q names no group: fails (a grouped node is for the queues that name groups);
- else passes when n's group is required or preferred, or avoided (anti-preferred), and not
  excluded (anti-required) unless also avoided: Volcano checks in that order.
Score (Volcano's nodeOrderFn): 100 for a required group, +50 for a preferred one, and -1 instead
for an avoided one; 0 for a node without a group; times the plugin's `weight`.
With `enable_hierarchy`, a queue whose affinity is not set takes its nearest ancestor's.

Classes never span queues while this plugin is on (snapshot.queue_class_keys), so each answer
is one task class's."""

from __future__ import annotations

import numpy as np

from runtime.cluster.model import NODEGROUP_LABEL, NodeGroupAffinity
from runtime.engine.extension import Check
from runtime.engine.nodemasks import label_exists, label_match
from runtime.engine.plugins.base import Plugin
from runtime.engine.snapshot import Snapshot, TaskClass

BASE_SCORE = 100.0
# Volcano's fit error texts (pkg/scheduler/plugins/nodegroup/errors.go).
NO_LABEL = "node group label not found"
NO_AFFINITY = "node group affinity not specified"
UNSATISFIED = "node does not satisfy the node group affinity"


def resolved_groups(snap: Snapshot, hierarchy: bool) -> list[NodeGroupAffinity | None]:
    """Each queue's groups; with `hierarchy`, one not set takes its nearest ancestor's."""
    out = [q.node_groups for q in snap.queues]
    if hierarchy:
        for q in snap.queues:
            parent = q.parent
            while out[q.index] is None and parent >= 0:
                out[q.index] = snap.queues[parent].node_groups
                parent = snap.queues[parent].parent
    return out


def group_allows(groups: NodeGroupAffinity, group: str) -> bool:
    allowed = group in groups.required or group in groups.preferred
    if group in groups.anti_required:
        allowed = False
    if group in groups.anti_preferred:
        allowed = True
    return allowed


def group_score(groups: NodeGroupAffinity, group: str) -> float:
    score = 0.0
    if group in groups.required:
        score += BASE_SCORE
    if group in groups.preferred:
        score += 0.5 * BASE_SCORE
    if group in groups.anti_preferred:
        score = -1.0
    return score


class NodeGroupPlugin(Plugin):
    name = "nodegroup"
    answers = frozenset({"predicate", "node_order"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        strict = bool(self.args.get("strict", True))
        weight = float(self.spec.weight if self.spec.weight is not None else 1.0)
        groups_of = resolved_groups(snap, bool(self.spec.flags.get("hierarchy", False)))
        labelled = label_exists(snap, NODEGROUP_LABEL)
        node_group = {g: label_match(snap, NODEGROUP_LABEL, g)
                      for (key, g) in snap.label_index if key == NODEGROUP_LABEL}

        def queue_of(cls: TaskClass) -> int:
            return snap.jobs[int(snap.task_job[cls.head])].queue

        def predicate(cls: TaskClass) -> list[Check]:
            groups = groups_of[queue_of(cls)] if queue_of(cls) >= 0 else None
            unset = groups is None or groups.empty
            checks = []
            if strict or not unset:
                checks.append(Check(NO_LABEL, labelled))
            if unset:
                checks.append(Check(NO_AFFINITY, ~labelled))
            else:
                fails = np.zeros(snap.n_nodes, dtype=bool)
                for g, members in node_group.items():
                    if not group_allows(groups, g):
                        fails |= members
                checks.append(Check(UNSATISFIED, ~fails))
            return checks

        def score(cls: TaskClass) -> np.ndarray | None:
            groups = groups_of[queue_of(cls)] if queue_of(cls) >= 0 else None
            if groups is None or groups.empty or weight == 0:
                return None
            out = np.zeros(snap.n_nodes, dtype=np.float64)
            for g, members in node_group.items():
                out[members] = group_score(groups, g) * weight
            return out

        self.register(ssn, "predicate", predicate)
        self.register(ssn, "node_order", score)


PLUGIN = NodeGroupPlugin
