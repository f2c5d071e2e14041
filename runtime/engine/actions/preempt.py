"""preempt: for starving jobs, within one queue: evicts preemptable pods of other jobs of the
same queue that the preemptable plugins allow (priority, gang, conformance, drf), the fewest
that make room (runtime.engine.actions.eviction). A preemptor the queue may not allocate even once its
victims are gone (the allocatable plugins: deserved share, capability) evicts nothing: its
reservation would never bind. The preemptor's placements are reservations only (pipelined,
never bindings); they and the evictions commit only when the job becomes pipelined, otherwise
they are discarded."""

from __future__ import annotations

import heapq

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.actions.common import eligible_jobs, pending_of
from runtime.engine.actions.eviction import evict_for, pods_by_node, preemptable, settle
from runtime.cluster.model import PREEMPT_NEVER
from runtime.engine.session import Session


def run(ssn: Session) -> None:
    snap = ssn.snap
    heaps = eligible_jobs(ssn, hard_topology=False)
    on_node = pods_by_node(ssn)
    # With the priority plugin voting on victims, its refusal is final: a victim's job has a
    # lower priority than the preemptor's. (Volcano lets a later tier, e.g. drf, evict pods of
    # equal priority when priority's answer is empty — runtime/README.md.)
    by_priority = ssn.answers("preemptable", "priority")
    for q in sorted((q for q in heaps if q >= 0), key=ssn.queue_key):
        jobs = heaps[q]
        # Pipelined room does not count in the queue's allocation: the queue's reservations
        # (held, and committed for its earlier jobs) are added by hand, or two jobs that each fit
        # the queue's capability alone would both evict for reservations that cannot both bind.
        committed = ssn.queue_reserved(q)
        while jobs:
            _, j = heapq.heappop(jobs)
            if not ssn.job_starving(j):
                continue
            stmt = ssn.new_statement()
            reserved = np.zeros(snap.n_resources, dtype=np.int64)   # the job's pipelined preemptors
            failed: set[int] = set()       # classes that found no room: their other tasks would not
            for t in pending_of(ssn, j):
                if not ssn.job_starving(j):
                    break
                if int(snap.task_class[t]) in failed:
                    continue
                pod = snap.pods[t].key
                best_effort = ssn.zero_request(t)

                def reason_for(v: int, pod=pod, t=t) -> d.Reason:
                    return d.Reason(d.PREEMPTION, f"preempted by {pod} (priority {int(snap.task_priority[t])})",
                                    {"preemptor": pod})

                def may_evict(v: int, best_effort=best_effort) -> bool:
                    victim = snap.jobs[snap.task_job[v]]
                    # A best-effort preemptor (a pod slot, nothing more) evicts only best-effort pods.
                    return (victim.queue == q and victim.index != j and preemptable(snap, v)
                            and (not best_effort or bool(ssn.zero[v]))
                            and (not by_priority or victim.priority < snap.jobs[j].priority))

                def allowed_by_queue(t=t) -> bool:
                    # May the queue take this preemptor and the job's earlier ones once the
                    # victims are gone (the statement has taken them off the queue)? If not, the
                    # reservation would never bind and the evictions would buy nothing.
                    return ssn.allocatable_count(q, committed + reserved + snap.request[t], 1)[0] >= 1

                if evict_for(ssn, stmt, t, "preemptable", may_evict, reason_for, on_node, allowed_by_queue, 0):
                    reserved += snap.request[t]
                    continue
                if snap.pods[t].preemption_policy != PREEMPT_NEVER:   # a pod's own choice, not its class's
                    failed.add(int(snap.task_class[t]))
                allowed, why = ssn.allocatable_count(q, committed + reserved + snap.request[t], 1)
                if allowed < 1 and why is not None:
                    ssn.add_reason(t, why)
            if settle(ssn, stmt, j):
                committed += reserved
