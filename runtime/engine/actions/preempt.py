"""preempt: for starving jobs, within one queue: evicts preemptable pods of other jobs of the
same queue that the preemptable plugins allow (priority, gang, conformance, drf), the fewest
that make room (runtime.engine.actions.eviction). A preemptor the queue may not allocate even once its
victims are gone (the allocatable plugins: deserved share, capability) evicts nothing: its
reservation would never bind. The preemptor's placements are reservations only (pipelined,
never bindings); they and the evictions commit only when the job becomes pipelined, otherwise
they are discarded.

Then, as Volcano's preempt ("Preemption between Task within Job"), each job that was starving
takes its turn again within itself: its pending tasks, in task order, each evict running tasks of
the same job that the preemptable plugins allow (priority: a lower task priority; gang: the job
stays above its minimum; conformance), and are pipelined in their room; each task's evictions
commit at once (the job keeps its count: one pod out, one in), and the job's first task that
finds no room ends its turn.

A job asking for hard network topology evicts within one HyperNode, its pods placed on idle room
there first (a gang may need idle room and freed room together; Volcano places a preemptor only
where it evicts, and skips such jobs); a soft one the same in the tightest HyperNode that works,
widening tier by tier to the whole cluster (Volcano v1.14.1 skips it too); and a job with sub-groups
(spec.subGroupPolicy) sub-group by sub-group, each within one HyperNode of its own tier inside the
job's (actions/bundles.py, within_sub_groups; Volcano v1.14.1 skips both, volcano#4374). The
gang-aware variant, `gang_preempt` (Volcano's gangpreempt), takes victims by bundles: the tasks
above gangs' minimums first, then — with `whole_gangs` — whole gangs (actions/bundles.py); a
victim's job always has a lower priority than the preemptor's, as Volcano's gangpreempt."""

from __future__ import annotations

import heapq

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.actions.bundles import (DEFAULT_MAX_DOMAINS, GroupAttempt, Turn, by_bundles, evict_bundles,
                                            idle_first, pipelined_of, task_by_task, within_hypernodes)
from runtime.engine.actions.common import eligible_jobs, pending_of
from runtime.engine.actions.eviction import evict_for, pods_by_node, preemptable, settle, turn_cost
from runtime.cluster.model import PREEMPT_NEVER
from runtime.engine.session import Session


def run(ssn: Session) -> None:
    _run(ssn, gang=False)


def run_by_bundles(ssn: Session) -> None:
    """gang_preempt: Volcano's gangpreempt."""
    _run(ssn, gang=True)


def _run(ssn: Session, gang: bool) -> None:
    settings = ssn.plan.action_arguments.get("gang_preempt", {}) if gang else {}
    whole_gangs = bool(settings.get("whole_gangs", True))
    limit = int(settings.get("max_domains") or DEFAULT_MAX_DOMAINS)
    heaps = eligible_jobs(ssn, sub_groups=True)
    on_node = pods_by_node(ssn)
    # With the priority plugin voting on victims, its refusal is final: a victim's job has a
    # lower priority than the preemptor's. (Volcano lets a later tier, e.g. drf, evict pods of
    # equal priority when priority's answer is empty — runtime/README.md.) gang_preempt always
    # asks it, as Volcano's gangpreempt.
    by_priority = gang or ssn.answers("preemptable", "priority")
    under_request: list[tuple[int, int]] = []        # (queue, job) starving when its turn came
    committed_of: dict[int, np.ndarray] = {}
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
            under_request.append((q, j))
            if gang:
                def attempt(rows, j=j, committed=committed) -> Turn | None:
                    return _bundle_turn(ssn, q, j, rows, committed, on_node, by_priority, whole_gangs)
            else:
                def attempt(rows, j=j, committed=committed) -> Turn | None:
                    return _turn(ssn, q, j, committed, on_node, by_priority, rows is not None)
            group_attempt = _group_attempt(ssn, q, j, committed, on_node, by_priority, gang, whole_gangs) \
                if j in ssn.snap.sub_groups else None
            turn = within_hypernodes(ssn, j, attempt, limit, group_attempt)
            if turn is not None and settle(ssn, turn.stmt, j):
                committed += turn.reserved
        committed_of[q] = committed
    if not gang:    # Volcano's gangpreempt has no such phase
        for q, j in under_request:
            if j in ssn.snap.sub_groups:
                # A pod taking a sibling's room would break the sibling's sub-group and join its
                # own alone, a reservation no allocate binds (sub-groups are placed whole).
                continue
            committed_of[q] = _within_job(ssn, q, j, committed_of[q], on_node, by_priority)


def _within_job(ssn: Session, q: int, j: int, committed: np.ndarray, on_node: dict[int, list[int]],
                by_priority: bool) -> np.ndarray:
    """Job j's tasks preempting its own (Volcano v1.14.1 actions/preempt, "Preemption between Task
    within Job"): each pending task, in task order, evicts running tasks of job j the preemptable
    plugins allow and is pipelined in their room, committed at once; the first that cannot ends the
    job's turn. Returns the queue's committed reservations with this job's added."""
    snap = ssn.snap
    for t in pending_of(ssn, j):
        pod = snap.pods[t].key
        best_effort = ssn.zero_request(t)

        def reason_for(v: int, pod=pod, t=t) -> d.Reason:
            return d.Reason(d.PREEMPTION, f"preempted by {pod} of its own job (priority {int(snap.task_priority[t])})",
                            {"preemptor": pod})

        def may_evict(v: int, t=t, best_effort=best_effort) -> bool:
            # With the priority plugin voting, its refusal is final here too: a lower task priority.
            return (int(snap.task_job[v]) == j and preemptable(snap, v) and (not best_effort or bool(ssn.zero[v]))
                    and (not by_priority or snap.task_priority[v] < snap.task_priority[t]))

        def allowed_by_queue(t=t) -> bool:
            return ssn.allocatable_count(q, committed + snap.request[t], 1)[0] >= 1

        stmt = ssn.new_statement()
        if not evict_for(ssn, stmt, t, "preemptable", may_evict, reason_for, on_node, allowed_by_queue, 0):
            stmt.discard()
            break
        stmt.commit()
        committed = committed + snap.request[t]
    return committed


def _may_evict(ssn: Session, q: int, j: int, by_priority: bool, best_effort: bool, v: int) -> bool:
    snap = ssn.snap
    victim = snap.jobs[snap.task_job[v]]
    # A best-effort preemptor (a pod slot, nothing more) evicts only best-effort pods.
    return (victim.queue == q and victim.index != j and preemptable(snap, v)
            and (not best_effort or bool(ssn.zero[v]))
            and (not by_priority or victim.priority < snap.jobs[j].priority))


def _turn(ssn: Session, q: int, j: int, committed: np.ndarray, on_node: dict[int, list[int]], by_priority: bool,
          trial: bool) -> Turn | None:
    """Job j's turn, task by task, in a statement not yet settled; `trial`: None unless the job
    is then pipelined (the statement discarded)."""
    snap = ssn.snap
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
            return _may_evict(ssn, q, j, by_priority, best_effort, v)

        def allowed_by_queue(t=t) -> bool:
            # May the queue take this preemptor and the job's earlier ones once the
            # victims are gone (the statement has taken them off the queue)? If not, the
            # reservation would never bind and the evictions would buy nothing.
            return ssn.allocatable_count(q, committed + reserved + snap.request[t], 1)[0] >= 1

        if trial and idle_first(ssn, stmt, t, allowed_by_queue):
            reserved += snap.request[t]
            continue
        if evict_for(ssn, stmt, t, "preemptable", may_evict, reason_for, on_node, allowed_by_queue, 0):
            reserved += snap.request[t]
            continue
        if snap.pods[t].preemption_policy != PREEMPT_NEVER:   # a pod's own choice, not its class's
            failed.add(int(snap.task_class[t]))
        allowed, why = ssn.allocatable_count(q, committed + reserved + snap.request[t], 1)
        if allowed < 1 and why is not None:
            ssn.add_reason(t, why)
    if trial and not ssn.job_pipelined_ok(j):
        stmt.discard()
        return None
    return Turn(stmt, reserved, turn_cost(ssn, stmt))


def _group_attempt(ssn: Session, q: int, j: int, committed: np.ndarray, on_node: dict[int, list[int]],
                   by_priority: bool, gang: bool, whole_gangs: bool) -> GroupAttempt:
    """Job j's attempt for one sub-group's tasks (bundles.within_sub_groups): by bundles under
    gang_preempt, task by task under preempt."""
    snap = ssn.snap
    before = pipelined_of(ssn, j)
    if gang:
        def bundles(stmt, rows, tasks, want, queue_ok) -> Turn | None:
            return _bundle_turn(ssn, q, j, rows, committed, on_node, by_priority, whole_gangs, stmt, tasks, want,
                                queue_ok)
        return by_bundles(ssn, j, before, lambda request, evicted: ssn.allocatable_count(
            q, committed + request, 1)[0] >= 1, bundles)

    def evict(stmt, t: int, queue_ok) -> bool:
        pod = snap.pods[t].key
        best_effort = ssn.zero_request(t)

        def reason_for(v: int) -> d.Reason:
            return d.Reason(d.PREEMPTION, f"preempted by {pod} (priority {int(snap.task_priority[t])})",
                            {"preemptor": pod})

        return evict_for(ssn, stmt, t, "preemptable", lambda v: _may_evict(ssn, q, j, by_priority, best_effort, v),
                         reason_for, on_node, queue_ok, 0)

    return task_by_task(ssn, j, before, lambda t: True,
                        lambda request: ssn.allocatable_count(q, committed + request, 1)[0] >= 1, evict)


def _bundle_turn(ssn: Session, q: int, j: int, rows, committed: np.ndarray, on_node: dict[int, list[int]],
                 by_priority: bool, whole_gangs: bool, stmt=None, tasks: list[int] | None = None, want: int = 0,
                 queue_ok=None) -> Turn | None:
    snap = ssn.snap

    def reason_for(v: int, t: int, whole_gang: bool) -> d.Reason:
        pod = snap.pods[t].key
        whole = f" (gang {snap.jobs[snap.task_job[v]].key} evicted whole)" if whole_gang else ""
        return d.Reason(d.PREEMPTION, f"preempted by {pod} (priority {int(snap.task_priority[t])}){whole}",
                        {"preemptor": pod})

    def queue_allows(request: np.ndarray, evicted: list[int]) -> bool:
        return ssn.allocatable_count(q, committed + request, 1)[0] >= 1

    return evict_bundles(ssn, j, rows, "preemptable", lambda v: _may_evict(ssn, q, j, by_priority, False, v),
                         reason_for, queue_ok or queue_allows, on_node, whole_gangs, stmt, tasks, want)
