"""Victim selection shared by preempt and reclaim.

As in Volcano, a preemptor is placed only where it evicts (never on idle room: allocate places
there), on a node with allowed victims, once with them gone it fits the node and its queue may
allocate it (with the job's earlier preemptors); a node where its victims cannot make that so
gives way to the next. Victims are taken in Volcano's victim order — from the queue latest in
queue order first, then the job of lowest priority, then the task of lowest priority, newest
first — until that holds.

We evict no more than needed (runtime/README.md): on each node, each victim taken is kept back
again (highest priority first) where the rest still suffice, so one victim is taken where one
suffices; across nodes, fewest victims, then lowest highest-victim priority, then best node
score. Where stateful rules concern the preemptor (inter-pod affinity, host ports), a victim set
counts only if with it gone every rule lets the preemptor onto the node.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from runtime.cluster import decisions as d
from runtime.cluster.model import PREEMPT_NEVER
from runtime.engine.session import Session
from runtime.engine.extension import MASK_PASS
from runtime.engine.snapshot import BOUND, PIPELINED, READY_STATUSES, Snapshot


def pods_by_node(ssn: Session) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for t in np.nonzero((ssn.status == BOUND) & (ssn.task_node >= 0))[0]:   # a running pod on no node frees nothing
        out.setdefault(int(ssn.task_node[t]), []).append(int(t))
    return out


def _covers(freed: np.ndarray, need: np.ndarray) -> bool:
    return bool(np.all(freed >= need))


def spare(ssn: Session, j: int) -> int:
    """How many ready pods job j can lose: a gang (minMember > 1) never goes below its minimum,
    whatever the tiers say; a one-pod job is not a gang."""
    job = ssn.snap.jobs[j]
    ready = int(ssn.job_ready[j])
    return ready - job.min_member if job.min_member > 1 else ready


def sub_group_slack(ssn: Session, J: int) -> tuple[dict[int, tuple[int, int]], dict[int, int], set[int]]:
    """For a job with sub-groups (spec.subGroupPolicy; Volcano's SubJobs, as its CreateJobBundles
    counts them): each pod's (policy, sub-group), how many ready sub-groups each policy has above
    its minSubGroups, and the sub-groups already broken (fewer than subGroupSize pods ready). A
    pod may go only where its sub-group is already broken or its policy has a ready one to spare."""
    groups = ssn.snap.sub_groups.get(J, ())
    if not groups:
        return {}, {}, set()
    policies = ssn.snap.jobs[J].podgroup.sub_groups
    group_of: dict[int, tuple[int, int]] = {}
    surplus = {i: -p.min_groups for i, p in enumerate(policies)}
    broken: set[int] = set()
    for k, sg in enumerate(groups):
        if sg.policy < 0:
            continue                  # the default sub-group: no minimum of its own
        tasks = sg.tasks.tolist()
        group_of.update((t, (sg.policy, k)) for t in tasks)
        if sum(1 for t in tasks if ssn.status[t] in READY_STATUSES) >= sg.size:
            surplus[sg.policy] += 1
        else:
            broken.add(k)
    return group_of, surplus, broken


class Slack:
    """What victims job j can lose, taken one by one: `spare` pods, and (a job with sub-groups)
    none that would leave a policy with fewer ready sub-groups than its minSubGroups (Volcano's
    gang plugin counts only minMember and so breaks them)."""

    def __init__(self, ssn: Session, j: int):
        self.left = spare(ssn, j)
        self.group_of, self.surplus, self.broken = sub_group_slack(ssn, j)

    def can(self, v: int) -> bool:
        if self.left <= 0:
            return False
        k = self.group_of.get(v)
        return k is None or k[1] in self.broken or self.surplus[k[0]] > 0

    def take(self, v: int) -> None:
        self.left -= 1
        k = self.group_of.get(v)
        if k is not None and k[1] not in self.broken:    # its first pod gone: the sub-group breaks
            self.broken.add(k[1])
            self.surplus[k[0]] -= 1


def wants_victims(ssn: Session) -> bool:
    """Whether preempt or reclaim could evict anything now: some admitted, valid job has a task
    still pending and is starving (both actions consider no other: eligible_jobs). Where none
    has, their answer is nothing, whichever pods could be victims. A gang whose pods are still
    being created is such a job that is not valid (fewer pods than its minMember)."""
    gated = "enqueue" in ssn.plan.actions
    for j in np.flatnonzero(ssn.job_pending).tolist():
        if gated and ssn.job_phase[j] == "Pending":
            continue
        if ssn.job_starving(j) and ssn.job_valid(j) is None:
            return True
    return False


def victim_order(ssn: Session, victims: list[int]) -> list[int]:
    """Volcano's victim order (BuildVictimsPriorityQueue): the queue latest in queue order first,
    then the job of lowest priority, then the task of lowest priority, newest first."""
    snap = ssn.snap
    jobs = snap.jobs
    queues = {jobs[snap.task_job[v]].queue for v in victims}
    late_first = {q: rank for rank, q in enumerate(sorted(queues, key=ssn.queue_key, reverse=True))}
    return sorted(victims, key=lambda v: (late_first[jobs[snap.task_job[v]].queue], jobs[snap.task_job[v]].priority,
                                          snap.task_priority[v], -snap.pods[v].creation, v))


def minimal_victims(ssn: Session, need: np.ndarray, victims: list[int]) -> list[int] | None:
    """Fewest victims (in victim order) whose requests cover `need`, no gang taken below its
    minimum (nor its minSubGroups: `Slack`); None if no such set exists."""
    req = ssn.snap.request
    task_job = ssn.snap.task_job
    left: dict[int, Slack] = {}
    for v in victims:
        j = int(task_job[v])
        if j not in left:
            left[j] = Slack(ssn, j)
    ordered = [v for v in victim_order(ssn, victims) if left[int(task_job[v])].can(v)]
    for v in ordered:
        if _covers(req[v], need):
            return [v]
    chosen, freed = [], np.zeros_like(need)
    for v in ordered:
        slack = left[int(task_job[v])]
        if not slack.can(v):
            continue
        slack.take(v)
        chosen.append(v)
        freed = freed + req[v]
        if _covers(freed, need):
            break
    else:
        return None
    return _reprieve(ssn, chosen, lambda kept: bool(kept) and _covers(req[kept].sum(axis=0), need))


def _reprieve(ssn: Session, chosen: list[int], enough: Callable[[list[int]], bool]) -> list[int]:
    """Keep back every victim (highest priority first) whose eviction the others make needless."""
    pri = ssn.snap.task_priority
    for v in sorted(chosen, key=lambda v: (-pri[v], v)):
        rest = [c for c in chosen if c != v]
        if enough(rest):
            chosen = rest
    return chosen


def turn_cost(ssn: Session, stmt) -> tuple[int, int]:
    """What a turn's statement evicts, to compare turns: how many victims, then the highest
    victim priority."""
    evicted = stmt.evicted_since(0)
    return len(evicted), max((int(ssn.snap.task_priority[v]) for v in evicted), default=-(2 ** 62))


def settle(ssn: Session, stmt, j: int) -> bool:
    """End of a preemptor job's turn in preempt or reclaim: its placements are reservations
    (pipelined: a later allocate binds them, checking the queue's share and the gang again),
    committed with their evictions when the job is pipelined, otherwise undone. Returns whether
    they were committed."""
    if ssn.job_pipelined_ok(j):
        stmt.commit()
        return True
    stmt.discard()
    return False


def evict_for(ssn: Session, stmt, t: int, point: str, may_evict: Callable[[int], bool],
              reason_for: Callable[[int], d.Reason], on_node: dict[int, list[int]],
              allowed_by_queue: Callable[[], bool], least: int) -> bool:
    """Evict for task t the cheapest victim set that lets it onto a node (it fits, every stateful
    rule lets it, `allowed_by_queue()` holds with the victims gone), and pipeline it there; a
    node counts only if it has allowed victims, and at least `least` of them are taken (Volcano:
    preempt 0 — it pipelines beside victims it does not need —, reclaim 1). Returns whether t
    was placed."""
    snap = ssn.snap
    if snap.pods[t].preemption_policy == PREEMPT_NEVER:
        return False
    cid = int(snap.task_class[t])
    cp = ssn.fresh_placement(cid)
    # The HyperNode restriction (rules/hypernodes.py) does not depend on other pods: victims
    # change nothing in it, and a job asking for hard topology evicts within it.
    within = ssn.hypernode_rule.allowed if ssn.hypernode_rule is not None and cid in ssn.hypernode_rule.classes \
        else None
    if not all(rule.preempts or (rule is ssn.hypernode_rule and within is not None) for rule in cp.filters):
        return False   # card-level preemption is not modelled (runtime/README.md)
    req = cp.req
    if ssn.zero_request(t):
        # A best-effort pod needs only a pod slot: where one is free, backfill places it; it
        # preempts only where every node it may use is full.
        pods = snap.resource_index["pods"]
        free = snap.allocatable[:, pods] - ssn.used[:, pods] - ssn.pipelined[:, pods] > 0
        if (free & (cp.mask & MASK_PASS).astype(bool)).any():
            return False
    future = snap.allocatable - ssn.used + ssn.releasing - ssn.pipelined
    scores = np.empty(snap.n_nodes, dtype=np.float64)
    ssn.k.score_nodes(snap.allocatable, ssn.used, req, ssn.score_params, cp.score, scores)
    # Each node with allowed victims, by the cheapest set that could cover its room alone: a
    # lower bound of what the node costs (the queue or a rule may ask for more).
    nodes = []
    candidates_at = on_node.items() if within is None else \
        ((n, on_node[n]) for n in np.flatnonzero(within).tolist() if n in on_node)
    for node, tasks in candidates_at:
        if not cp.static_mask[node]:
            continue
        candidates = [v for v in tasks if ssn.status[v] == BOUND and may_evict(v)]
        allowed = ssn.victims(point, t, candidates) if candidates else []
        if not allowed:
            continue
        need = np.maximum(req - future[node], 0)
        cheapest = minimal_victims(ssn, need, allowed) if need.any() else []
        if cheapest is None:
            continue
        bound = (max(len(cheapest), least), max((int(snap.task_priority[v]) for v in cheapest), default=-(2 ** 62)),
                 -scores[node], node)
        nodes.append((bound, node, allowed))
    nodes.sort()
    best = None
    for bound, node, allowed in nodes:
        if best is not None and bound >= best[0]:
            break
        chosen = _victims_on(ssn, stmt, cid, node, allowed, reason_for, allowed_by_queue, least)
        if chosen is None:
            continue
        cost = (len(chosen), max((int(snap.task_priority[v]) for v in chosen), default=-(2 ** 62)), -scores[node], node)
        if best is None or cost < best[0]:
            best = (cost, node, chosen)
    if best is None:
        return False
    _, node, chosen = best
    for v in chosen:
        stmt.evict(v, reason_for(v))
    stmt.place(t, node, PIPELINED)
    return True


def _victims_on(ssn: Session, stmt, cid: int, node: int, allowed: list[int], reason_for: Callable[[int], d.Reason],
                allowed_by_queue: Callable[[], bool], least: int) -> list[int] | None:
    """Victims on `node` in victim order (at least `least`) until, with them gone, the task fits
    the node, every stateful rule lets it and its queue may take it; then each kept back again
    where the rest (still `least`) suffice. Tried in the statement and rolled back; None when
    even all would not do."""
    snap = ssn.snap
    task_job = snap.task_job
    cp = ssn.placement(cid)
    at = np.array([node], dtype=np.int64)
    left = {int(task_job[v]): Slack(ssn, int(task_job[v])) for v in allowed}

    def passes() -> bool:
        room = snap.allocatable[node] - ssn.used[node] + ssn.releasing[node] - ssn.pipelined[node]
        if not _covers(room, cp.req):
            return False
        if cp.filters and not ssn.stateful_codes(cid, at)[0] & MASK_PASS:
            return False
        return allowed_by_queue()

    def evicting(victims: list[int]) -> bool:
        """Whether `victims` suffice (evicted in the statement for the check, then undone)."""
        mark = stmt.mark()
        for v in victims:
            stmt.evict(v, reason_for(v))
        ok = passes()
        stmt.rollback(mark)
        return ok

    if not least and passes():
        return []
    mark = stmt.mark()
    chosen: list[int] = []
    found = False
    for v in victim_order(ssn, allowed):
        slack = left[int(task_job[v])]
        if not slack.can(v):
            continue
        slack.take(v)
        stmt.evict(v, reason_for(v))
        chosen.append(v)
        if len(chosen) >= least and passes():
            found = True
            break
    stmt.rollback(mark)
    if not found:
        return None
    return _reprieve(ssn, chosen, lambda rest: len(rest) >= least and evicting(rest))


def preemptable(snap: Snapshot, v: int) -> bool:
    """Whether task v may be a victim: its pod's volcano.sh/preemptable (annotation, else label)
    says, else its PodGroup's spec.preemptable, else yes."""
    own = snap.pods[v].preemptable_setting
    if own is not None:
        return own
    group = snap.jobs[snap.task_job[v]].podgroup
    return group is None or group.preemptable is not False
