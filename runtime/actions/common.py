"""What several actions share: which jobs are eligible, queue/job turn order, placing runs of
identical tasks with the placement kernel (or card by card for device requests)."""

from __future__ import annotations

import numpy as np

from runtime import decisions as d
from runtime.session import Session
from runtime.snapshot import PENDING


def admitted(ssn: Session, j: int) -> bool:
    """Allocation skips Pending PodGroups while the policy has an enqueue action (Volcano)."""
    return not ("enqueue" in ssn.plan.actions and ssn.job_phase[j] == "Pending")


def eligible_jobs(ssn: Session, want_pending: bool = True) -> dict[int, list]:
    """Admitted, valid jobs with pending tasks, per queue as (rank in job order, job) lists
    sorted in job order (so heaps too)."""
    pending = ssn.job_pending.tolist()
    gated = "enqueue" in ssn.plan.actions        # admitted() for every job at once
    phases = ssn.job_phase
    chosen = []
    for job in ssn.snap.jobs:
        j = job.index
        if want_pending and pending[j] == 0:
            continue
        if gated and phases[j] == "Pending":
            continue
        reason = ssn.job_valid(j)
        if reason is not None:
            ssn.job_reasons.setdefault(j, [reason])
            continue
        chosen.append(j)
    # Appended in job order, each list is already a heap.
    heaps: dict[int, list] = {}
    jobs = ssn.snap.jobs
    for rank, j in enumerate(ssn.job_order(chosen)):
        heaps.setdefault(jobs[j].queue, []).append((rank, j))
    return heaps


def place_run(ssn: Session, stmt, run: list[int], limit: int) -> int:
    """Place up to `limit` tasks of one run; returns how many were placed (stops at a failure)."""
    snap = ssn.snap
    t0 = run[0]
    cid = int(snap.task_class[t0])
    mask, static, req = ssn.class_inputs(cid)
    hooks = ssn.device_hooks
    if hooks is not None and hooks.needs(t0):
        placed = 0
        for t in run[:limit]:
            dev_mask = (mask.astype(bool) & hooks.node_mask(t)).view(np.uint8) if hooks.filter else mask
            dev_score = static + hooks.score(t) * hooks.weight
            nodes = np.empty(1, dtype=np.int64)
            kinds = np.empty(1, dtype=np.int8)
            if ssn.k.place_batch(snap.allocatable, ssn.used, ssn.releasing, ssn.pipelined, req, dev_mask, dev_score,
                                 ssn.score_params, 1, nodes, kinds) == 0:
                break
            ssn.task_devices[t] = hooks.assign(t, int(nodes[0]))
            stmt.placed([t], nodes, kinds, 1)
            placed += 1
        return placed
    tree = class_tree(ssn, cid, req, mask, static)
    placed = tree.place(limit)
    stmt.placed(run, tree.out_nodes, tree.out_kinds, placed)
    # The tree already re-keyed the nodes it placed on.
    ssn.trees[cid] = (tree, ssn.ledger.log_n)
    return placed


def class_tree(ssn: Session, cid: int, req, mask, static):
    """The class's placement tree, brought up to date: built when new or when many nodes
    changed since its last use, else only the changed nodes re-keyed."""
    snap = ssn.snap
    tree, seen = ssn.trees.get(cid, (None, 0))
    logged = ssn.ledger.log_n
    if tree is None:
        tree = ssn.k.PlacementTree(snap.allocatable, ssn.used, ssn.releasing, ssn.pipelined, req, mask, static,
                                   ssn.score_params)
        tree.build()
    elif logged - seen > max(64, snap.n_nodes // 8):
        tree.build()
    elif logged > seen:
        tree.refresh(ssn.ledger.log_since(seen))
    return tree


def failure_reason(ssn: Session, t: int) -> d.Reason:
    hooks = ssn.device_hooks
    extra = hooks.node_checks(t) if hooks is not None and hooks.filter and hooks.needs(t) else ()
    return ssn.no_node_reason(t, extra)


def gang_reason(ssn: Session, j: int) -> d.Reason:
    """Called before the statement is discarded: ready counts this attempt's placements."""
    job = ssn.snap.jobs[j]
    got = int(ssn.job_ready[j]) + int(ssn.job_pipelined[j])
    short = max(job.min_member - got, 0)
    return d.Reason(d.GANG, f"gang short by {short} ({got}/{job.min_member})",
                    {"ready": got, "min_member": job.min_member})


def pending_of(ssn: Session, j: int) -> list[int]:
    return [int(t) for t in ssn.snap.jobs[j].tasks if ssn.status[t] == PENDING]
