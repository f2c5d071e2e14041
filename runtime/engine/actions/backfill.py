"""backfill: places zero-request (best-effort) tasks of admitted jobs on any node that passes
the predicates (the pod-count limit included), best score first: the pending ones, and, as
Volcano's backfill does, those an earlier action only pipelined, taken back first."""

from __future__ import annotations

import numpy as np

from runtime.engine.actions.common import eligible_jobs, failure_reason, place_run
from runtime.engine.session import Session
from runtime.engine.snapshot import PENDING, PIPELINED


def run(ssn: Session) -> None:
    held_jobs = frozenset(np.unique(ssn.snap.task_job[(ssn.status == PIPELINED) & ssn.zero]).tolist())
    for heap in eligible_jobs(ssn, also=held_jobs, hard_topology=False).values():
        for _, j in sorted(heap):
            tasks = ssn.snap.jobs[j].tasks
            held = [int(t) for t in tasks[(ssn.status[tasks] == PIPELINED) & ssn.zero[tasks]]]
            stmt = ssn.new_statement()
            for t in held:
                stmt.unplace(t)
            runs = [run for run in ssn.pending_runs(j, skip_zero=False) if ssn.zero[run[0]]]
            for run_tasks in runs:
                placed = place_run(ssn, stmt, run_tasks, len(run_tasks))
                if placed < len(run_tasks):
                    reason = failure_reason(ssn, run_tasks[placed])
                    for t in run_tasks[placed:]:
                        if ssn.status[t] == PENDING:
                            ssn.add_reason(t, reason)
            stmt.commit()
