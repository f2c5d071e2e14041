"""backfill: places zero-request (best-effort) tasks of admitted jobs on any node that passes
the predicates (the pod-count limit included), best score first: the pending ones, and, as
Volcano's backfill does, those an earlier action only pipelined, taken back first. A job asking
for hard network topology places them within one HyperNode (its placed pods' and of its tier,
tightest first: actions/bundles.py), all of them or none; a job with sub-groups is left out."""

from __future__ import annotations

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.actions.bundles import DEFAULT_MAX_DOMAINS, Turn, asks_hard_topology, within_hypernodes
from runtime.engine.actions.common import eligible_jobs, failure_reason, place_run
from runtime.engine.session import Session
from runtime.engine.snapshot import PENDING, PIPELINED


def run(ssn: Session) -> None:
    held_jobs = frozenset(np.unique(ssn.snap.task_job[(ssn.status == PIPELINED) & ssn.zero]).tolist())
    zeros = np.zeros(ssn.snap.n_resources, dtype=np.int64)
    for heap in eligible_jobs(ssn, also=held_jobs).values():
        for _, j in sorted(heap):
            if getattr(ssn.snap.jobs[j].podgroup, "sub_groups", ()):
                continue
            if asks_hard_topology(ssn, j):
                def attempt(rows, j=j) -> Turn | None:
                    stmt, placed_all = _turn(ssn, j)
                    if not placed_all:
                        stmt.discard()
                        return None
                    return Turn(stmt, zeros, ())
                turn = within_hypernodes(ssn, j, attempt, DEFAULT_MAX_DOMAINS)
                if turn is not None:
                    turn.stmt.commit()
                else:
                    _topology_reason(ssn, j)
                continue
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
