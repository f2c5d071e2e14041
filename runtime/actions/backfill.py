"""backfill: places zero-request (best-effort) pending tasks of admitted jobs on any node that
passes the predicates (the pod-count limit included), best score first."""

from __future__ import annotations

from runtime.actions.common import eligible_jobs, failure_reason, place_run
from runtime.session import Session
from runtime.snapshot import PENDING


def run(ssn: Session) -> None:
    for heap in eligible_jobs(ssn).values():
        for _, j in sorted(heap):
            runs = [run for run in ssn.pending_runs(j, skip_zero=False) if ssn.zero[run[0]]]
            if not runs:
                continue
            stmt = ssn.new_statement()
            for run_tasks in runs:
                placed = place_run(ssn, stmt, run_tasks, len(run_tasks))
                if placed < len(run_tasks):
                    reason = failure_reason(ssn, run_tasks[placed])
                    for t in run_tasks[placed:]:
                        if ssn.status[t] == PENDING:
                            ssn.add_reason(t, reason)
            stmt.commit()
