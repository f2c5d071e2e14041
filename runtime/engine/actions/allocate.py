"""allocate: queue → job → task, in turns. Each turn takes the best queue (skipping overused
ones) and its best job, and places the job's pending tasks until the job is ready (gang); runs
of identical tasks go in one placement-kernel call each (idle-fitting nodes first, then nodes
that fit once releasing pods leave, best score wins). The turn's placements are one Statement:
committed when the job is ready, kept as pipelined reservations when it is pipelined, discarded
otherwise. As in Volcano, a ready job that still has pending tasks goes back to its queue and
takes one more task per later turn, and the queue goes back into the queue order: queue and
job shares (drf, proportion) interleave the jobs task by task. Zero-request tasks are left to
backfill."""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.actions import topology
from runtime.engine.actions.common import eligible_jobs, failure_reason, gang_reason, minimums_first, place_run
from runtime.engine.queueshare import overused_reason
from runtime.engine.session import Session
from runtime.engine.extension import MASK_PASS
from runtime.engine.rules.hypernodes import asks_topology
from runtime.engine.snapshot import ALLOCATED, PENDING, PIPELINED, READY_STATUSES


def run(ssn: Session) -> None:
    # Jobs holding reservations (actions/reservations.py) take their turn to bind them.
    heaps = eligible_jobs(ssn, also=frozenset(int(ssn.snap.task_job[t]) for t in ssn.held), sub_groups=True)
    # Each queue's jobs in job order, as a list whose next job is its last item; and the jobs
    # that took a turn and still have tasks, back in a heap by their job key at that moment.
    fresh = {q: [j for _, j in reversed(jobs)] for q, jobs in heaps.items() if q >= 0}
    again: dict[int, list] = {q: [] for q in fresh}
    order = itertools.count()
    queues = [(ssn.queue_key(q), q) for q in fresh]
    heapq.heapify(queues)
    failed_at: dict[int, int] = {}     # queue -> highest priority of its jobs that failed (dequeue strategy)
    # Read every turn: bound once (the session's plugins do not change within an action).
    overused, queue_key = ssn.overused, ssn.queue_key
    traverse = [queue.dequeue == "traverse" for queue in ssn.snap.queues]
    best = heapq.heappop(queues) if queues else None
    while best is not None:
        q = best[1]
        if overused(q):
            reason = overused_reason(ssn, q)
            for j in (*fresh[q], *(j for _, _, j in again[q])):
                ssn.job_reasons.setdefault(j, []).append(reason)
            best = heapq.heappop(queues) if queues else None
            continue
        one_task = bool(again[q]) and (not fresh[q] or again[q][0][0] < ssn.job_key(fresh[q][-1]))
        j = heapq.heappop(again[q])[2] if one_task else fresh[q].pop()
        if failed_at and dequeue_blocked(ssn, q, j, failed_at):     # no failure yet: nothing blocks
            more = False
        else:
            more = allocate_job(ssn, j, one_task)
            if not traverse[q] and j in ssn.attempted and not (
                    ssn.job_ready_ok(j) or ssn.job_pipelined_ok(j)):
                priority = ssn.snap.jobs[j].priority
                failed_at[q] = max(failed_at.get(q, priority), priority)
        if more:
            heapq.heappush(again[q], (ssn.job_key(j), next(order), j))
        # Back in the queue order and the next best taken in one step (often the same queue,
        # the heap then untouched).
        if fresh[q] or again[q]:
            best = heapq.heappushpop(queues, (queue_key(q), q))
        else:
            best = heapq.heappop(queues) if queues else None


def dequeue_blocked(ssn: Session, q: int, j: int, failed_at: dict[int, int]) -> bool:
    """Whether job j waits this cycle by its queue's dequeue strategy (Volcano's
    docs/design/dequeue-strategy.md): once a job of priority P failed to allocate, fifo holds
    the jobs of priority <= P, priorityfifo those < P; traverse holds none. Said on the job."""
    strategy = ssn.snap.queues[q].dequeue
    threshold = failed_at.get(q)
    if strategy == "traverse" or threshold is None:
        return False
    priority = ssn.snap.jobs[j].priority
    if priority > threshold or (strategy == "priorityfifo" and priority == threshold):
        return False
    name = ssn.snap.queues[q].name
    below = "of the same or lower priority" if strategy == "fifo" else "of lower priority"
    reason = d.Reason(d.QUEUE, f"queue {name} dequeues {strategy}: a job of priority {threshold} could not allocate "
                               f"this cycle, so its jobs {below} wait ({'FIFOBlocked' if strategy == 'fifo' else 'PriorityFIFOBlocked'})")
    ssn.attempted.add(j)
    ssn.job_reasons.setdefault(j, []).append(reason)
    for t in ssn.snap.jobs[j].tasks.tolist():
        if ssn.status[t] == PENDING:
            ssn.add_reason(t, reason)
    return True


def allocate_job(ssn: Session, j: int, one_task: bool = False) -> bool:
    """One turn of job j: its tasks until it is ready (`one_task`: it is, and takes one more).
    Returns whether it is ready with tasks still pending, for another turn. A job that asks for
    network topology is placed within one HyperNode, a job with sub-groups sub-group by
    sub-group (actions/topology.py)."""
    if j in ssn.snap.sub_groups or (ssn.hypernode_rule is not None and asks_topology(ssn.snap.jobs[j])):
        return topology.allocate_within(ssn, j, one_task, attempt_job, finish_job, bind_reservations)
    one = -1 if ssn.held else ssn.ledger.one_pending(j)
    if one >= 0:
        # Most turns at scale (a Deployment-like pod's, its job of one task to place; in any
        # task order): finish_job's steps here, and nothing is left to place after the turn (the
        # job's other pending tasks, if any, request nothing: backfill's).
        runs = [[one]]
        stmt, _, _, ready = attempt_one(ssn, j, runs)
        if ready or ssn.job_ready_ok(j):
            stmt.commit()
        else:
            not_ready(ssn, j, stmt, runs[0])
        return False
    tried = attempt_job(ssn, j, one_task)
    return finish_job(ssn, j, tried) if tried is not None else False


def attempt_job(ssn: Session, j: int, one_task: bool = False, runs: list[list[int]] | None = None):
    """Job j's placements for one turn, in a statement not yet committed or discarded:
    (statement, runs, placed_any, ready: whether the job was found ready after its last
    placement), or None when the job has nothing to place. `runs`: its pending runs, when the
    caller has them (no reservation held)."""
    snap = ssn.snap
    # Reservations held from earlier cycles (ssn.held) are few and rare: most turns look none up.
    if runs is None and not ssn.held:
        runs = ssn.pending_runs(j, skip_zero=True)
    if runs is not None and len(runs) == 1 and len(runs[0]) == 1:
        return attempt_one(ssn, j, runs)    # most turns: a Deployment-like pod's, its job of one task
    job = snap.jobs[j]
    stmt = ssn.new_statement()
    holds = bind_reservations(ssn, stmt, j) if ssn.held else 0
    if runs is None:
        runs = ssn.pending_runs(j, skip_zero=True)
    if job.min_task_member and not one_task:     # most jobs have no roles: no call on their turn
        runs = minimums_first(ssn, j, runs)
    if not runs and not holds:
        stmt.discard()
        return None
    ssn.attempted.add(j)
    failed_roles: set[str] = set()
    placed_any = False
    ready = False
    for run_tasks in runs:
        at = 0          # a run is placed in chunks of what the job still misses, until it is ready
        while at < len(run_tasks) and not ready:
            chunk = run_tasks[at:]
            # One task left in the run is one wanted (missing() is at least one): most turns are
            # a Deployment-like pod's, its job of one task.
            want = 1 if one_task or len(chunk) == 1 else min(len(chunk), missing(ssn, j, snap.pods[chunk[0]].task_role))
            held = held_beside(ssn, job.queue, chunk[0]) if ssn.held else None
            if held is None:
                limit, queue_reason = ssn.allocatable_count(job.queue, snap.request[chunk[0]], want)
            else:
                with ssn.allocated_as_if(job.queue, held, held=True):
                    limit, queue_reason = ssn.allocatable_count(job.queue, snap.request[chunk[0]], want)
            placed = place_run(ssn, stmt, chunk, limit) if limit > 0 else 0
            placed_any = placed_any or placed > 0
            at += placed
            if placed < want:
                # The run's other tasks are alike: they fail alike, and keep their own reason;
                # the job's other tasks are still tried (Volcano's NeedContinueAllocating).
                rest = run_tasks[at:]
                say_unplaced(ssn, rest, placed, limit, queue_reason)
                if placed < limit or queue_reason is None:
                    failed_roles.add(snap.pods[rest[0]].task_role)
                break
            # Ready: the turn ends here (the job's other tasks wait for its next turn).
            ready = ssn.job_ready_ok(j)
        if ready or (at < len(run_tasks) and not keeps_trying(ssn, j, failed_roles)):
            break
    return stmt, runs, placed_any, ready


def attempt_one(ssn: Session, j: int, runs: list[list[int]]):
    """attempt_job of a job with one task to place (one run of one task) and no reservation
    held: the same steps without the loop over runs and chunks (most turns at scale)."""
    run = runs[0]
    t = run[0]
    snap = ssn.snap
    stmt = ssn.new_statement()
    ssn.attempted.add(j)
    limit, queue_reason = ssn.allocatable_count(snap.jobs[j].queue, t, 1)     # t: its row, read in place
    if limit > 0 and place_run(ssn, stmt, run, limit):
        return stmt, runs, True, ssn.job_ready_ok(j)
    say_unplaced(ssn, run, 0, limit, queue_reason)
    return stmt, runs, False, False


def say_unplaced(ssn: Session, rest: list[int], placed: int, limit: int, queue_reason: d.Reason | None) -> None:
    """The reasons on a run's tasks left unplaced after `placed` of them were (`limit`: what
    the queue allowed, `queue_reason` why not more)."""
    reasons = [queue_reason] if placed >= limit and queue_reason is not None else []
    if not reasons or not fits_an_empty_node(ssn, rest[0]):
        # No node could hold it even empty: that is the cause, whatever the queue says.
        reasons.insert(0, failure_reason(ssn, rest[0]))
    for t in rest:
        for reason in reasons:
            ssn.add_reason(t, reason)


def fits_an_empty_node(ssn: Session, t: int) -> bool:
    """Whether some schedulable node's allocatable covers task t's request."""
    snap = ssn.snap
    return bool(((snap.allocatable >= ssn.fit_request(t)).all(axis=1) & snap.schedulable).any())


def finish_job(ssn: Session, j: int, tried) -> bool:
    """Commit a turn's statement when the job is ready, keep it pipelined when it is pipelined,
    discard it otherwise (the gang's reason on its tasks)."""
    stmt, runs, placed_any, ready = tried
    # Found ready after the turn's last placement: nothing changed since. Not found so, it may
    # still be (a ready job's one more task that found no node).
    if ready or ssn.job_ready_ok(j):
        stmt.commit()
        # A job with no task pending left (most: a Deployment's pod is a job of one) has no run.
        return placed_any and ssn.job_pending.item(j) > 0 and bool(ssn.pending_runs(j, skip_zero=True))
    not_ready(ssn, j, stmt, [t for run in runs for t in run])
    return False


def not_ready(ssn: Session, j: int, stmt, tasks: list[int]) -> None:
    """The end of a turn that left job j not ready: its statement kept as reservations when the
    job is pipelined, else discarded, the gang's reason on the turn's `tasks`."""
    if ssn.job_pipelined_ok(j):
        stmt.to_pipelined()
        stmt.commit()
        return
    gang = gang_reason(ssn, j)
    stmt.discard()
    if ssn.snap.jobs[j].min_member > 1:
        for t in tasks:
            ssn.add_reason(t, gang)


def held_beside(ssn: Session, q: int, t: int) -> np.ndarray | None:
    """What queue q's held reservations that task t may not take request (None: nothing): those
    of pods of t's priority or higher still waiting to bind. Pipelined room does not count in the
    queue's allocation; without this, a pod of the same queue placed before a reservation's turn
    could take the share it needs, and the evictions made for it would buy nothing."""
    if not ssn.held or q < 0:
        return None
    held = ssn.queue_reserved(q, among=ssn.held, floor=int(ssn.snap.task_priority[t]))
    return held if held.any() else None


def bind_reservations(ssn: Session, stmt, j: int) -> int:
    """Job j's held reservations (actions/reservations.py) become placements to bind where
    their room is idle now and their queue may allocate them (jobs placed earlier in this cycle
    may have taken what the reservation counted on), and stay reservations otherwise. Returns how
    many the job holds."""
    if not ssn.held:        # no reservation held this cycle (the usual case): nothing to look up per job
        return 0
    snap = ssn.snap
    queue = snap.jobs[j].queue
    held = [t for t in snap.jobs[j].tasks.tolist() if t in ssn.held and ssn.status[t] == PIPELINED]
    for t in held:
        node = ssn.held[t]
        stmt.unplace(t)
        req = ssn.fit_request(t)
        free = snap.allocatable[node] - ssn.used[node]
        reserved = np.maximum(ssn.pipelined[node] - ssn.releasing[node], 0)
        code = ssn.stateful_codes(int(snap.task_class[t]), np.array([node], dtype=np.int64))[0]
        idle = bool((free - reserved >= req).all()) and code == MASK_PASS
        # An ALLOCATED placement counts in the queue's allocation at once, so each check here
        # includes the job's reservations bound before it.
        if idle and queue >= 0:
            idle = ssn.allocatable_count(queue, snap.request[t], 1, reserving=True)[0] >= 1
        stmt.place(t, node, ALLOCATED if idle else PIPELINED)
    return len(held)


def missing(ssn: Session, j: int, role: str) -> int:
    """How many tasks of `role` the job's turn takes at most before it asks whether the job is
    ready: the members it is short of, or the role's, whichever is more (at least one)."""
    job = ssn.snap.jobs[j]
    have = int(ssn.job_ready[j]) + int(ssn.job_pipelined[j])
    short = job.min_member - have
    need = job.min_task_member.get(role, 0)
    if need and job.min_member >= sum(job.min_task_member.values()):
        short = max(short, need - ssn.role_counts(job, (*READY_STATUSES, PIPELINED)).get(role, 0))
    return max(short, 1)


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
