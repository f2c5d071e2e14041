"""allocate: queue → job → task. Each turn takes the best queue (skipping overused ones), its
best job, and places the job's pending tasks: runs of identical tasks in one placement-kernel
call each (idle-fitting nodes first, then nodes that fit once releasing pods leave, best score
wins). The job's placements are one Statement: committed when the job is ready (gang),
kept as pipelined reservations when it is pipelined, discarded otherwise. Zero-request tasks
are left to backfill."""

from __future__ import annotations

import heapq

from runtime import decisions as d
from runtime.actions.common import eligible_jobs, failure_reason, gang_reason, place_run
from runtime.session import Session
from runtime.snapshot import PENDING, READY_STATUSES


def run(ssn: Session) -> None:
    heaps = eligible_jobs(ssn)
    # Each queue's heap is a list in job order: reversed, its next job is its last item.
    for jobs in heaps.values():
        jobs.reverse()
    queues = [(ssn.queue_key(q), q) for q in heaps if q >= 0]
    heapq.heapify(queues)
    while queues:
        _, q = heapq.heappop(queues)
        jobs = heaps[q]
        if ssn.overused(q):
            name = ssn.snap.queues[q].name
            reason = d.Reason(d.QUEUE, f"queue {name} is overused (at its deserved share)", {"queue": name})
            for _, j in reversed(jobs):
                ssn.job_reasons.setdefault(j, []).append(reason)
            continue
        _, j = jobs.pop()
        allocate_job(ssn, j)
        if jobs:
            heapq.heappush(queues, (ssn.queue_key(q), q))


def allocate_job(ssn: Session, j: int) -> None:
    snap = ssn.snap
    job = snap.jobs[j]
    runs = ssn.pending_runs(j, skip_zero=True)
    if not runs:
        return
    ssn.attempted.add(j)
    stmt = ssn.new_statement()
    failed_roles: set[str] = set()
    for run_tasks in runs:
        limit, queue_reason = ssn.allocatable_count(job.queue, snap.request[run_tasks[0]], len(run_tasks))
        placed = place_run(ssn, stmt, run_tasks, limit) if limit > 0 else 0
        if placed < len(run_tasks):
            # The run's other tasks are alike: they fail alike, and keep their own reason; the
            # job's other tasks are still tried (Volcano's NeedContinueAllocating).
            rest = run_tasks[placed:]
            reason = queue_reason if placed >= limit and queue_reason is not None else failure_reason(ssn, rest[0])
            for t in rest:
                ssn.add_reason(t, reason)
            if placed < limit or queue_reason is None:
                failed_roles.add(snap.pods[rest[0]].task_role)
            if not keeps_trying(ssn, j, failed_roles):
                break
    if ssn.job_ready_ok(j):
        stmt.commit()
    elif ssn.job_pipelined_ok(j):
        stmt.to_pipelined()
        stmt.commit()
    else:
        gang = gang_reason(ssn, j)
        stmt.discard()
        if job.min_member > 1:
            for t in (t for run in runs for t in run):
                ssn.add_reason(t, gang)


def keeps_trying(ssn: Session, j: int, failed_roles: set[str]) -> bool:
    """After a task found no node, whether the job's other tasks are still worth trying
    (Volcano's NeedContinueAllocating): not when every task must run; when the roles' minimums
    add up to more than minMember, while the tasks of roles that have not failed can still make
    it ready; otherwise while every failed role already has its minimum."""
    job = ssn.snap.jobs[j]
    if job.min_member == len(job.tasks):
        return False
    mins = job.min_task_member
    if job.min_member < sum(mins.values()):
        pending = [t for t in job.tasks.tolist() if ssn.status[t] == PENDING]
        left = sum(1 for t in pending if ssn.snap.pods[t].task_role not in failed_roles)
        return int(ssn.job_ready[j]) + left >= job.min_member
    allocated = ssn.role_counts(job, READY_STATUSES)
    return all(allocated.get(role, 0) >= mins.get(role, 0) for role in failed_roles)
