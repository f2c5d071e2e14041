"""enqueue: admits pending jobs, PodGroup Pending → Inqueue. A job whose PodGroup has no
minResources is admitted (if its queue is open) without taking a turn. The others take turns:
queues in queue order, one job per turn (job order), and every enqueue plugin must admit it
(tier voting). A PodGroup without pods yet is admitted like any other (runtime.engine.snapshot:
pod-less PodGroups are jobs)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.session import Session
from runtime.engine.extension import REJECT


def run(ssn: Session) -> None:
    waiting = []
    jobs = ssn.snap.jobs
    phases = ssn.job_phase
    rest: Iterable[int] = range(len(jobs))
    if not ssn.enqueue_listeners:
        # A job without minResources in an open queue (most jobs at scale: a Deployment's pods)
        # is admitted whenever its turn comes (below): all at once, _admit's one step for it.
        cols = ssn.job_cols
        is_open = np.array([queue.open for queue in ssn.snap.queues] + [False], dtype=bool)
        plain = ~cols.problem & (cols.queue >= 0) & ~cols.sized & is_open[cols.queue]
        for j in np.flatnonzero(plain).tolist():
            if phases[j] == "Pending":
                phases[j] = "Inqueue"
        rest = np.flatnonzero(~plain).tolist()
    for j in rest:
        job = jobs[j]
        if phases[j] != "Pending":
            continue
        # Only a job that cannot run at all waits here (an unknown PodGroup or queue, a queue
        # that is not a leaf): as Volcano's enqueue, admission asks no job_valid plugin, so a
        # gang whose pods do not all exist yet — a vcjob's, whose pods the controller creates
        # once its PodGroup is Inqueue — is admitted on its minResources.
        if job.problem or job.queue < 0:
            ssn.job_reasons.setdefault(j, [d.Reason(d.JOB, job.problem or f"queue {job.queue_name} does not exist")])
            continue
        if job.min_resources is None:
            # Admitted whenever its turn comes (if its queue is open): it asks no plugin and adds
            # nothing to its queue's inqueue total, so no other job's admission depends on when.
            # Most jobs at scale (a Deployment's pods) are such: they take no turn.
            _admit(ssn, j)
            continue
        waiting.append(j)
    # Each queue's jobs in job order (the order a heap of (job_key, j) pops them, the keys taken
    # now), next job last: one sort of every job instead of a heap per queue.
    turns: dict[int, list[int]] = {}
    for j in reversed(ssn.job_order(waiting)):
        turns.setdefault(jobs[j].queue, []).append(j)
    queues = [(ssn.queue_key(q), q) for q in turns]
    heapq.heapify(queues)
    while queues:
        _, q = heapq.heappop(queues)
        left = turns[q]
        _admit(ssn, left.pop())
        if left:
            heapq.heappush(queues, (ssn.queue_key(q), q))


def _admit(ssn: Session, j: int) -> None:
    job = ssn.snap.jobs[j]
    queue = ssn.snap.queues[job.queue]
    if not queue.open:
        ssn.job_reasons.setdefault(j, []).append(
            d.Reason(d.QUEUE, f"queue {queue.name} is closed", {"queue": queue.name}))
        return
    if job.min_resources is not None:
        verdict = ssn.job_enqueueable(j)
        if verdict.vote is REJECT:
            reason = verdict.reason or d.Reason(d.ENQUEUE, "not admitted by the enqueue plugins")
            ssn.job_reasons.setdefault(j, []).append(reason)
            return
    ssn.job_phase[j] = "Inqueue"
    if job.min_resources is not None:
        for q in ssn.queue_chain[job.queue]:
            ssn.queue_inqueue[q] += job.min_resources
    for listener in ssn.enqueue_listeners:
        listener(j)
