"""reclaim: across queues. For starving jobs of queues that are not overused and may reclaim
(preemptive), evicts pods of other queues whose `reclaimable` is not false, as the reclaimable
plugins allow (proportion/capacity: only while the victim's queue is above its deserved share;
gang; conformance) — the fewest that make room. Placements are pipelined reservations, never bindings;
committed only when the job is pipelined.

No ping-pong (a deliberate difference, runtime/README.md): where plugins say which queue may
reclaim (proportion, capacity: `preemptive`), a victim is taken only if its queue, with the
cycle's evictions, could not reclaim its room back (the reclaimer's queue is not reclaimable, or
the victim's would be overused, or not `preemptive` for the victim) — whichever tier chose the
victims. In Volcano the first tier that answers decides, and with
conformance there (as its default configuration has it) any pod is a victim: two queues below
their shares can take room from each other in one cycle and trade it back in the next. Across
cycles, what happens in between (the leftover of a reclaim given to the taker past its share, a
preemption inside the victim's queue lowering its allocation) can still make a take-back look
fair; so a job does not reclaim from a queue it lost pods to within the eviction audit's window
(Options.lost_to, runtime/engine/evictions.py).

A job asking for hard network topology reclaims within one HyperNode, its pods placed on idle room
there first (a gang may need idle and freed room together); a soft one the same in the tightest
HyperNode that works, widening tier by tier to the whole cluster (Volcano's reclaim evicts for it
anywhere); and a job with sub-groups
sub-group by sub-group, each within one HyperNode of its own tier inside the job's
(actions/bundles.py, within_sub_groups; Volcano's reclaim ignores their tiers). The
gang-aware variant, `gang_reclaim` (Volcano's gangreclaim), takes victims by bundles: the tasks
above gangs' minimums first, then — with `whole_gangs` — whole gangs (actions/bundles.py), with
the same queue rules as reclaim."""

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
    """gang_reclaim: Volcano's gangreclaim."""
    _run(ssn, gang=True)


def _run(ssn: Session, gang: bool) -> None:
    settings = ssn.plan.action_arguments.get("gang_reclaim", {}) if gang else {}
    whole_gangs = bool(settings.get("whole_gangs", True))
    limit = int(settings.get("max_domains") or DEFAULT_MAX_DOMAINS)
    heaps = eligible_jobs(ssn, sub_groups=True)
    on_node = pods_by_node(ssn)
    for q in sorted((q for q in heaps if q >= 0), key=ssn.queue_key):
        if ssn.overused(q):
            continue
        jobs = heaps[q]
        # As in preempt: the queue's reservations count too (held, preempt's of this cycle, and
        # those committed for its earlier jobs here).
        committed = ssn.queue_reserved(q)
        while jobs:
            _, j = heapq.heappop(jobs)
            if not ssn.job_starving(j):
                continue
            if gang:
                def attempt(rows, j=j, committed=committed) -> Turn | None:
                    return _bundle_turn(ssn, q, j, rows, committed, on_node, whole_gangs)
            else:
                def attempt(rows, j=j, committed=committed) -> Turn | None:
                    return _turn(ssn, q, j, committed, on_node, rows is not None)
            group_attempt = _group_attempt(ssn, q, j, committed, on_node, gang, whole_gangs) \
                if j in ssn.snap.sub_groups else None
            turn = within_hypernodes(ssn, j, attempt, limit, group_attempt)
            if turn is not None and settle(ssn, turn.stmt, j):
                committed += turn.reserved


def _may_evict(ssn: Session, q: int, lost_to: frozenset[str], best_effort: bool, v: int) -> bool:
    snap = ssn.snap
    vq = snap.jobs[snap.task_job[v]].queue
    return (vq != q and vq >= 0 and snap.queues[vq].reclaimable and preemptable(snap, v)
            and snap.queues[vq].name not in lost_to
            and (not best_effort or bool(ssn.zero[v]))
            and not could_take_back(ssn, v, evicted=False, taker=q))


def _turn(ssn: Session, q: int, j: int, committed: np.ndarray, on_node: dict[int, list[int]],
          trial: bool) -> Turn | None:
    """Job j's turn, task by task, in a statement not yet settled; `trial`: None unless the job
    is then pipelined (the statement discarded)."""
    snap = ssn.snap
    name = snap.queues[q].name
    stmt = ssn.new_statement()
    # Queues this job lost pods to lately: taking room from them would trade it back.
    lost_to = ssn.lost_to.get(snap.jobs[j].key, frozenset())
    reserved = np.zeros(snap.n_resources, dtype=np.int64)   # the job's pipelined reclaimers
    failed: set[int] = set()       # classes that found no room: their other tasks would not
    for t in pending_of(ssn, j):
        if not ssn.job_starving(j):
            break
        if int(snap.task_class[t]) in failed or not ssn.preemptive(q, t):
            continue
        pod = snap.pods[t].key
        best_effort = ssn.zero_request(t)

        def reason_for(v: int, pod=pod) -> d.Reason:
            return d.Reason(d.RECLAIM, f"reclaimed by queue {name} for {pod}", {"queue": name, "for": pod})

        def may_evict(v: int, best_effort=best_effort) -> bool:
            return _may_evict(ssn, q, lost_to, best_effort, v)

        def allowed_by_queue(t=t, start=stmt.mark()) -> bool:
            # Evicting buys nothing unless the queue may then allocate the task and the
            # job's earlier reservations, and no victim's queue may take it back.
            return (ssn.allocatable_count(q, committed + reserved + snap.request[t], 1)[0] >= 1
                    and not any(could_take_back(ssn, v, evicted=True, taker=q)
                                for v in stmt.evicted_since(start)))

        if trial and idle_first(ssn, stmt, t, lambda t=t: ssn.allocatable_count(
                q, committed + reserved + snap.request[t], 1)[0] >= 1):
            reserved += snap.request[t]
        elif evict_for(ssn, stmt, t, "reclaimable", may_evict, reason_for, on_node, allowed_by_queue, 1):
            reserved += snap.request[t]
        else:
            if snap.pods[t].preemption_policy != PREEMPT_NEVER:   # a pod's own choice, not its class's
                failed.add(int(snap.task_class[t]))
    if trial and not ssn.job_pipelined_ok(j):
        stmt.discard()
        return None
    return Turn(stmt, reserved, turn_cost(ssn, stmt))


def _group_attempt(ssn: Session, q: int, j: int, committed: np.ndarray, on_node: dict[int, list[int]],
                   gang: bool, whole_gangs: bool) -> GroupAttempt:
    """Job j's attempt for one sub-group's tasks (bundles.within_sub_groups): by bundles under
    gang_reclaim, task by task under reclaim; the same queue rules as the job's turn."""
    snap = ssn.snap
    name = snap.queues[q].name
    before = pipelined_of(ssn, j)
    lost_to = ssn.lost_to.get(snap.jobs[j].key, frozenset())
    if gang:
        def bundles(stmt, rows, tasks, want, queue_ok) -> Turn | None:
            return _bundle_turn(ssn, q, j, rows, committed, on_node, whole_gangs, stmt, tasks, want, queue_ok)

        def queue_ok(request: np.ndarray, evicted: list[int]) -> bool:
            return (ssn.allocatable_count(q, committed + request, 1)[0] >= 1
                    and not any(could_take_back(ssn, v, evicted=True, taker=q) for v in evicted))
        return by_bundles(ssn, j, before, queue_ok, bundles)

    def evict(stmt, t: int, queue_ok) -> bool:
        pod = snap.pods[t].key
        best_effort = ssn.zero_request(t)
        start = stmt.mark()

        def reason_for(v: int) -> d.Reason:
            return d.Reason(d.RECLAIM, f"reclaimed by queue {name} for {pod}", {"queue": name, "for": pod})

        def allowed_by_queue() -> bool:
            return queue_ok() and not any(could_take_back(ssn, v, evicted=True, taker=q)
                                          for v in stmt.evicted_since(start))

        return evict_for(ssn, stmt, t, "reclaimable", lambda v: _may_evict(ssn, q, lost_to, best_effort, v),
                         reason_for, on_node, allowed_by_queue, 1)

    return task_by_task(ssn, j, before, lambda t: ssn.preemptive(q, t),
                        lambda request: ssn.allocatable_count(q, committed + request, 1)[0] >= 1, evict)


def _bundle_turn(ssn: Session, q: int, j: int, rows, committed: np.ndarray, on_node: dict[int, list[int]],
                 whole_gangs: bool, stmt=None, tasks: list[int] | None = None, want: int = 0,
                 queue_ok=None) -> Turn | None:
    snap = ssn.snap
    name = snap.queues[q].name
    lost_to = ssn.lost_to.get(snap.jobs[j].key, frozenset())
    pending = pending_of(ssn, j) if tasks is None else tasks
    if not pending or not all(ssn.preemptive(q, t) for t in pending):
        return None       # Volcano's gangreclaim asks Preemptive for the job's pending tasks at once

    def reason_for(v: int, t: int, whole_gang: bool) -> d.Reason:
        pod = snap.pods[t].key
        whole = f" (gang {snap.jobs[snap.task_job[v]].key} evicted whole)" if whole_gang else ""
        return d.Reason(d.RECLAIM, f"reclaimed by queue {name} for {pod}{whole}", {"queue": name, "for": pod})

    def queue_allows(request: np.ndarray, evicted: list[int]) -> bool:
        return (ssn.allocatable_count(q, committed + request, 1)[0] >= 1
                and not any(could_take_back(ssn, v, evicted=True, taker=q) for v in evicted))

    return evict_bundles(ssn, j, rows, "reclaimable", lambda v: _may_evict(ssn, q, lost_to, False, v),
                         reason_for, queue_ok or queue_allows, on_node, whole_gangs, stmt, tasks, want)


def could_take_back(ssn: Session, v: int, evicted: bool, taker: int) -> bool:
    """Whether victim v's queue could reclaim v's room back from queue `taker` (taker is
    reclaimable, v's queue not overused and `preemptive` for v), with the evictions made so
    far — v's too, or, when not `evicted`, as if v's were made. False where no plugin says
    which queue may reclaim (no shares to go by)."""
    if not ssn.fns("preemptive") or not ssn.snap.queues[taker].reclaimable:
        return False
    q = ssn.snap.jobs[ssn.snap.task_job[v]].queue
    if q < 0:
        return False
    if evicted:
        return not ssn.overused(q) and ssn.preemptive(q, v)
    # What-if on the queue's allocation alone (the plugins' answers read it, nothing else
    # of the eviction).
    with ssn.allocated_as_if(q, -ssn.snap.request[v]):
        return not ssn.overused(q) and ssn.preemptive(q, v)
