"""backfill: places zero-request (best-effort) tasks of admitted jobs on any node that passes
the predicates (the pod-count limit included), best score first: the pending ones, and, as
Volcano's backfill does, those an earlier action only pipelined, taken back first. A job asking
for hard network topology places them within one HyperNode (its placed pods' and of its tier,
tightest first: actions/bundles.py), all of them or none; a soft one in the tightest HyperNode
holding its placed pods where all of them fit, widening tier by tier, else wherever they fit, as
a job without topology. A job with sub-groups (spec.subGroupPolicy)
places each sub-group's within one HyperNode of the sub-group's own tier holding its placed pods
(tightest first, then by name), all of the sub-group's or none, inside the job's HyperNode when the
job asks for hard topology (the first of its HyperNodes, tightest tier first, where every sub-group's
fit; none there: none placed). Volcano's backfill places them anywhere (runtime/README.md)."""

from __future__ import annotations

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.actions import topology
from runtime.engine.actions.bundles import (DEFAULT_MAX_DOMAINS, Turn, asks_hard_topology, asks_soft_topology,
                                            held_by_hypernodes, hypernode_tiers, place_tasks, within_hypernodes)
from runtime.engine.actions.common import eligible_jobs, failure_reason, place_run
from runtime.engine.session import Session
from runtime.engine.snapshot import PENDING, PIPELINED


def run(ssn: Session) -> None:
    held_jobs = frozenset(np.unique(ssn.snap.task_job[(ssn.status == PIPELINED) & ssn.zero]).tolist())
    zeros = np.zeros(ssn.snap.n_resources, dtype=np.int64)
    for heap in eligible_jobs(ssn, also=held_jobs, sub_groups=True).values():
        for _, j in sorted(heap):
            if j in ssn.snap.sub_groups:
                _sub_groups(ssn, j)
                continue
            hard = asks_hard_topology(ssn, j)
            if hard or asks_soft_topology(ssn, j):
                def attempt(rows, j=j) -> Turn | None:
                    stmt, placed_all = _turn(ssn, j)
                    if not placed_all and rows is not None:
                        stmt.discard()
                        return None
                    # rows None: a soft job's turn anywhere, which keeps as many as fit.
                    return Turn(stmt, zeros, ())
                turn = within_hypernodes(ssn, j, attempt, DEFAULT_MAX_DOMAINS)
                if turn is not None:
                    turn.stmt.commit()
                    continue
                if hard or held_by_hypernodes(ssn, j):
                    # Hard: none fits within its tier. Either: allocate holds the job for its HyperNodes.
                    _topology_reason(ssn, j)
                    continue
                # Soft, the whole cluster among its HyperNodes and not all fit together there:
                # as many as fit, as a job without topology.
            stmt, _ = _turn(ssn, j)
            stmt.commit()


def _turn(ssn: Session, j: int):
    """Job j's zero-request tasks placed (its pipelined ones taken back first) in a statement not
    yet committed, and whether all were placed."""
    tasks = ssn.snap.jobs[j].tasks
    held = [int(t) for t in tasks[(ssn.status[tasks] == PIPELINED) & ssn.zero[tasks]]]
    stmt = ssn.new_statement()
    for t in held:
        stmt.unplace(t)
    runs = [run for run in ssn.pending_runs(j, skip_zero=False) if ssn.zero[run[0]]]
    placed_all = True
    for run_tasks in runs:
        placed = place_run(ssn, stmt, run_tasks, len(run_tasks))
        if placed < len(run_tasks):
            placed_all = False
            reason = failure_reason(ssn, run_tasks[placed])
            for t in run_tasks[placed:]:
                if ssn.status[t] == PENDING:
                    ssn.add_reason(t, reason)
    return stmt, placed_all


def _topology_reason(ssn: Session, j: int) -> None:
    reason = d.Reason(d.GANG, "its pods that request nothing fit no HyperNode its network topology allows "
                      "(with its placed pods)", {"topology": True})
    for t in ssn.snap.jobs[j].tasks.tolist():
        if ssn.status[t] == PENDING and ssn.zero[t]:
            ssn.add_reason(t, reason)


def _sub_groups(ssn: Session, j: int) -> None:
    """Job j's zero-request tasks, sub-group by sub-group (the module's docstring)."""
    snap = ssn.snap
    if not asks_hard_topology(ssn, j):
        stmt, _ = _sub_group_turn(ssn, j, topology.CLUSTER, None)
        stmt.commit()
        return
    for tier in hypernode_tiers(ssn, j, DEFAULT_MAX_DOMAINS):
        for name, rows in tier:
            allowed = np.zeros(snap.n_nodes, dtype=bool)
            allowed[rows] = True
            saved = {t: list(ssn.task_reasons[t]) for t in snap.jobs[j].tasks.tolist() if t in ssn.task_reasons}
            stmt, placed_all = _sub_group_turn(ssn, j, name, allowed)
            if placed_all:
                stmt.commit()
                return
            stmt.discard()
            for t in snap.jobs[j].tasks.tolist():
                if t in saved:
                    ssn.task_reasons[t] = saved[t]
                else:
                    ssn.task_reasons.pop(t, None)
    _topology_reason(ssn, j)


def _sub_group_turn(ssn: Session, j: int, region: str, region_allowed: np.ndarray | None):
    """Job j's zero-request tasks (its pipelined ones taken back first) placed within the region,
    each sub-group's within one HyperNode of its tier, in a statement not yet committed; and
    whether all were placed."""
    snap = ssn.snap
    tasks = snap.jobs[j].tasks
    rule = ssn.hypernode_rule
    classes = frozenset(int(c) for c in snap.task_class[tasks].tolist())
    stmt = ssn.new_statement()
    for t in tasks[(ssn.status[tasks] == PIPELINED) & ssn.zero[tasks]].tolist():
        stmt.unplace(int(t))
    zero = np.zeros(snap.n_resources, dtype=np.int64)
    placed_all = True
    try:
        for group in sorted(snap.sub_groups[j], key=lambda g: topology.group_key(ssn, g, set())):
            waiting = [t for t in group.tasks.tolist() if ssn.status[t] == PENDING and ssn.zero[t]]
            if not waiting:
                continue
            placed = topology.required_nodes(ssn, j, group.tasks)
            levels, why = topology.sub_group_levels(ssn, group, region, region_allowed, placed, zero)
            done = False
            for level in levels or ():
                for name, allowed in level:
                    if rule is not None:
                        rule.restrict(classes, name if allowed is not None else "", allowed)
                    mark = stmt.mark()
                    if len(place_tasks(ssn, stmt, waiting, len(waiting))) == len(waiting):
                        done = True
                        break
                    stmt.rollback(mark)
                if done:
                    break
            if not done:
                placed_all = False
                text = why or "its pods that request nothing fit no HyperNode of its tier (with its placed pods)"
                reason = d.Reason(d.GANG, f"{topology.sub_group_said(ssn, j, group)}: {text}", {"topology": True})
                for t in waiting:
                    if ssn.status[t] == PENDING:
                        ssn.add_reason(t, reason)
    finally:
        if rule is not None:
            rule.restrict(classes, "", None)
    return stmt, placed_all
