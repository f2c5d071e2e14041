"""Victim selection shared by preempt and reclaim: on every candidate node, the smallest set of
allowed victims that makes the preemptor fit; the node whose set is cheapest wins.

Volcano evicts lowest-priority victims one by one until the preemptor fits on the first node
that can work. We evict no more than needed: per node, one victim where one suffices (the
lowest-priority single victim whose release alone makes room), otherwise lowest priority first
and then drop every victim the others make unnecessary; across nodes, fewest victims, then
lowest highest-victim priority, then best node score."""

from __future__ import annotations

from typing import Callable

import numpy as np

from runtime import decisions as d
from runtime.model import PREEMPT_NEVER
from runtime.session import MASK_PASS, Session
from runtime.snapshot import BOUND, PIPELINED


def pods_by_node(ssn: Session) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for t in np.nonzero(ssn.status == BOUND)[0]:
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


def minimal_victims(ssn: Session, need: np.ndarray, victims: list[int]) -> list[int] | None:
    """Fewest victims (lowest priority preferred) whose requests cover `need`, no gang taken
    below its minimum; None if no such set exists."""
    req = ssn.snap.request
    pri = ssn.snap.task_priority
    task_job = ssn.snap.task_job
    left: dict[int, int] = {}
    for v in victims:
        j = int(task_job[v])
        if j not in left:
            left[j] = spare(ssn, j)
    victims = [v for v in victims if left[int(task_job[v])] > 0]
    ordered = sorted(victims, key=lambda v: (pri[v], -ssn.snap.pods[v].creation, v))
    for v in ordered:
        if _covers(req[v], need):
            return [v]
    chosen, freed = [], np.zeros_like(need)
    for v in ordered:
        j = int(task_job[v])
        if left[j] <= 0:
            continue
        left[j] -= 1
        chosen.append(v)
        freed = freed + req[v]
        if _covers(freed, need):
            break
    else:
        return None
    for v in sorted(chosen, key=lambda v: (-pri[v], v)):
        if _covers(freed - req[v], need):
            chosen.remove(v)
            freed = freed - req[v]
    return chosen


def settle(ssn: Session, stmt, j: int) -> None:
    """End of a preemptor job's turn in preempt or reclaim. As in Volcano, these actions only
    reserve: every placement becomes pipelined (a task that happened to fit on idle room
    included) and binds in a later allocate, which checks the queue's share and the gang again.
    Binding it here would bind part of a gang that is only pipelined, not ready. Committed when
    the job is pipelined, otherwise the evictions are undone."""
    if ssn.job_pipelined_ok(j):
        stmt.to_pipelined()
        stmt.commit()
    else:
        stmt.discard()


def evict_for(ssn: Session, stmt, t: int, point: str, may_evict: Callable[[int], bool],
              reason_for: Callable[[int], d.Reason], on_node: dict[int, list[int]]) -> bool:
    """Make room for task t: pipeline it where releasing pods already make room, else evict the
    cheapest victim set. Returns whether t was placed (pipelined). A pod whose preemption
    policy is Never evicts nothing; where stateful rules concern t (inter-pod affinity, ports),
    a victim set counts only if, with it gone, every rule lets t onto the node."""
    snap = ssn.snap
    cid = int(snap.task_class[t])
    cp = ssn.fresh_placement(cid)
    if ssn.zero_request(t):
        # A best-effort pod needs only a pod slot: where one is free, backfill places it; it
        # preempts only where every node it may use is full.
        pods = snap.resource_index["pods"]
        free = snap.allocatable[:, pods] - ssn.used[:, pods] - ssn.pipelined[:, pods] > 0
        if (free & (cp.mask & MASK_PASS).astype(bool)).any():
            return False
    elif cp.tree.place(1):
        stmt.placed([t], cp.tree.out_nodes, cp.tree.out_kinds, 1)
        cp.seen = ssn.ledger.log_n
        return True
    if snap.pods[t].preemption_policy == PREEMPT_NEVER or not all(rule.preempts for rule in cp.filters):
        return False   # card-level preemption is not modelled (runtime/README.md)
    req = cp.req
    future = snap.allocatable - ssn.used + ssn.releasing - ssn.pipelined
    scores = np.empty(snap.n_nodes, dtype=np.float64)
    ssn.k.score_nodes(snap.allocatable, ssn.used, req, ssn.score_params, cp.score, scores)
    best = None
    for node, tasks in on_node.items():
        if not cp.static_mask[node]:
            continue
        need = np.maximum(req - future[node], 0)
        if not cp.filters and not need.any():
            continue
        candidates = [v for v in tasks if ssn.status[v] == BOUND and may_evict(v)]
        if not candidates:
            continue
        allowed = ssn.victims(point, t, candidates)
        if not allowed:
            continue
        if cp.filters:
            chosen = _victims_for_rules(ssn, stmt, cid, node, need, allowed, reason_for)
        else:
            chosen = minimal_victims(ssn, need, allowed)
        if not chosen:
            continue
        cost = (len(chosen), max(int(snap.task_priority[v]) for v in chosen), -scores[node], node)
        if best is None or cost < best[0]:
            best = (cost, node, chosen)
    if best is None:
        return False
    _, node, chosen = best
    for v in chosen:
        stmt.evict(v, reason_for(v))
    stmt.place(t, node, PIPELINED)
    return True


def _victims_for_rules(ssn: Session, stmt, cid: int, node: int, need: np.ndarray, allowed: list[int],
                       reason_for: Callable[[int], d.Reason]) -> list[int] | None:
    """Victims on `node` whose eviction makes room and lets every stateful rule of class cid
    pass there (kube-scheduler's dry run): lowest priority first until it does, then each kept
    back again, highest priority first, where the rest still suffice. Tried in the statement
    and rolled back; None when even all of them would not do."""
    req = ssn.snap.request
    pri = ssn.snap.task_priority
    task_job = ssn.snap.task_job
    left = {int(task_job[v]): spare(ssn, int(task_job[v])) for v in allowed}
    ordered = sorted(allowed, key=lambda v: (pri[v], -ssn.snap.pods[v].creation, v))
    at = np.array([node], dtype=np.int64)

    def passes(victims: list[int]) -> bool:
        freed = req[victims].sum(axis=0) if victims else np.zeros_like(need)
        return _covers(freed, need) and bool(ssn.stateful_codes(cid, at)[0] & MASK_PASS)

    mark = stmt.mark()
    chosen: list[int] = []
    found = passes(chosen)
    for v in ordered:
        if found:
            break
        j = int(task_job[v])
        if left[j] <= 0:
            continue
        left[j] -= 1
        stmt.evict(v, reason_for(v))
        chosen.append(v)
        found = passes(chosen)
    if not found or not chosen:
        stmt.rollback(mark)
        return None
    for v in sorted(chosen, key=lambda v: (-pri[v], v)):
        trial = [c for c in chosen if c != v]
        stmt.rollback(mark)
        for c in trial:
            stmt.evict(c, reason_for(c))
        if passes(trial):
            chosen = trial
    stmt.rollback(mark)
    return chosen
