"""What several actions share: which jobs are eligible, queue/job turn order, placing runs of
identical tasks with the placement kernel (or card by card for device requests)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.session import Session
from runtime.engine.snapshot import PENDING, PIPELINED, READY_STATUSES


def admitted(ssn: Session, j: int) -> bool:
    """Allocation skips Pending PodGroups while the policy has an enqueue action (Volcano)."""
    return not ("enqueue" in ssn.plan.actions and ssn.job_phase[j] == "Pending")


def eligible_jobs(ssn: Session, want_pending: bool = True, also: frozenset[int] = frozenset(),
                  hard_topology: bool = True, sub_groups: bool = False) -> dict[int, list]:
    """Admitted, valid jobs with pending tasks (and those in `also`), per queue as (rank in job
    order, job) lists sorted in job order (so heaps too). `hard_topology=False` leaves out jobs
    whose network topology is hard (only allocate places them, within one HyperNode); jobs with
    sub-groups (spec.subGroupPolicy) are left out unless `sub_groups` (allocate's)."""
    jobs = ssn.snap.jobs
    if want_pending:    # the jobs with pending tasks (and `also`), found as arrays: in job order
        wanted = ssn.job_pending > 0
        if also:
            wanted[list(also)] = True
        candidates: Iterable[int] = np.flatnonzero(wanted).tolist()
    else:
        candidates = range(len(jobs))
    gated = "enqueue" in ssn.plan.actions        # admitted() for every job at once
    phases = ssn.job_phase
    grouped = ssn.snap.sub_groups
    ask = ssn.jobs_to_validate()       # most jobs are valid by every plugin's column: not asked
    chosen = []
    for j in candidates:
        if not sub_groups and j in grouped:
            continue          # only allocate places a job with sub-groups (sub-group by sub-group)
        if not hard_topology:
            group = jobs[j].podgroup
            if group is not None and group.network_topology is not None and group.network_topology.hard:
                continue
        if gated and phases[j] == "Pending":
            continue
        if ask is None or ask[j]:
            reason = ssn.job_valid(j)
            if reason is not None:
                ssn.job_reasons.setdefault(j, [reason])
                continue
        chosen.append(j)
    # Each queue's (rank, job) in job order (a heap already), the queues in the order of their
    # first job; grouped as arrays (a cycle at scale has thousands of jobs, queues a few).
    order = np.array(ssn.job_order(chosen), dtype=np.int64)
    queue_of = ssn.job_queue[order]
    by_queue = np.argsort(queue_of, kind="stable")      # ranks ascending within each queue
    groups = np.split(by_queue, np.flatnonzero(np.diff(queue_of[by_queue])) + 1) if len(order) else []
    groups.sort(key=lambda ranks: ranks[0])
    return {int(queue_of[ranks[0]]): list(zip(ranks.tolist(), order[ranks].tolist())) for ranks in groups}


def place_run(ssn: Session, stmt, run: list[int], limit: int) -> int:
    """Place up to `limit` tasks of one run; returns how many were placed (stops at a failure).
    A class no stateful rule concerns (or none whose answers for it its own placements change)
    places the run in one tree call, as does one whose placements only exclude their own node
    for it (each node keyed out for the rest of the call); otherwise task by task, each
    placement's effect on the rules (and so on the class's next node) taken in first."""
    cid = ssn.snap.task_class.item(run[0])
    cp = ssn.placements.get(cid) or ssn.placement(cid)      # placement's lookup inline: most classes have one
    if cp.lazy:     # by its shared tree, its codes asked only where it looks
        tree = ssn.place_lazy(cp)
        if tree is None:
            return 0
        stmt.placed(run[:1], tree.out_nodes, tree.out_kinds, 1)
        ssn.placed_by(cp)
        return 1 if limit == 1 else 1 + place_run(ssn, stmt, run[1:], limit - 1)
    # A class scored per domain places by its request's DomainTree, its scores read per domain
    # (place_one): not refreshed, its scores are not made per node.
    by_domain = cp.by_domain is not None
    if not by_domain:
        cp = ssn.refresh(cp)
    if not cp.stateful or cp.unchanged:
        placed = cp.tree.place(limit)
        stmt.placed(run, cp.tree.out_nodes, cp.tree.out_kinds, placed)
        # The tree already re-keyed the nodes it placed on.
        cp.seen = ssn.ledger.log_n
        return placed
    placed = 0
    while cp.excludes_own and limit - placed > 1:
        tree, got, over = ssn.place_excluding(cp, limit - placed)
        if got:
            stmt.placed(run[placed:], tree.out_nodes, tree.out_kinds, got)
            if not over:
                ssn.placed_by(cp)
            placed += got
        if not over:
            return placed
        cp = ssn.fresh_placement(cid)      # a tree of its own now: the rest in one call of it
    while placed < limit:
        if by_domain:
            tree = ssn.place_by_domain(cp)      # place_one's first case, called as it
        else:
            if placed:
                cp = ssn.refresh(cp)
            tree = ssn.place_one(cp)
        if tree is None:
            break
        stmt.placed(run[placed:placed + 1], tree.out_nodes, tree.out_kinds, 1)
        ssn.placed_by(cp)
        placed += 1
    return placed


def minimums_first(ssn: Session, j: int, runs: list[list[int]]) -> list[list[int]]:
    """Job j's pending runs with the tasks that fill its roles' minimums first (each role's in
    task order), then the others in task order, as runs of one class again. Where the minimums
    count (minMember at least their sum), a role placed first could otherwise take the room
    another role needs for its own minimum, and the gang would never be ready (2 ps of minimum 1
    and 4 workers of minimum 2, room for 4, the workers' pods made first)."""
    job = ssn.snap.jobs[j]
    mins = job.min_task_member
    if not mins or job.min_member < sum(mins.values()):
        return runs
    counts = ssn.role_counts(job, (*READY_STATUSES, PIPELINED))
    short = {role: need - counts.get(role, 0) for role, need in mins.items()}
    first: list[int] = []
    rest: list[int] = []
    pods = ssn.snap.pods
    for t in (t for run in runs for t in run):
        role = pods[t].task_role
        if short.get(role, 0) > 0:
            short[role] -= 1
            first.append(t)
        else:
            rest.append(t)
    if not first or not rest:
        return runs
    return ssn.runs_of((*first, *rest))


def failure_reason(ssn: Session, t: int) -> d.Reason:
    return ssn.no_node_reason(t)


def gang_reason(ssn: Session, j: int) -> d.Reason:
    """Called before the statement is discarded: ready counts this attempt's placements."""
    job = ssn.snap.jobs[j]
    got = int(ssn.job_ready[j]) + int(ssn.job_pipelined[j])
    short = max(job.min_member - got, 0)
    return d.Reason(d.GANG, f"gang short by {short} ({got}/{job.min_member})",
                    {"ready": got, "min_member": job.min_member})


def pending_of(ssn: Session, j: int) -> list[int]:
    """Job j's pending tasks in task order, those filling its roles' minimums first."""
    tasks = [int(t) for t in ssn.snap.jobs[j].tasks if ssn.status[t] == PENDING]
    return [t for run in minimums_first(ssn, j, [tasks]) for t in run]
