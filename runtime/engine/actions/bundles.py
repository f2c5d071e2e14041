"""Victims by bundles (gang_preempt, gang_reclaim: Volcano v1.15's gangpreempt/gangreclaim), and
the HyperNode a preemptor asking for hard network topology evicts within (every evicting action).

Bundles. A starving job's turn is job-wide: its victims are chosen so that the tasks it still
needs to be pipelined (its gang's minimum) fit together. Each candidate victim job offers SAFE
bundles, one per task above its minimum (its minMember and, where minMember covers their sum, each
role's minTaskMember; lowest task priority first, newest first), and — when `whole_gangs` allows
it — one WHOLE bundle: every running task of the job, wherever it runs, so a gang is either kept
at or above its minimum or evicted whole, never left partly running below it (Volcano evicts only
the whole bundle's tasks inside the HyperNode, leaving the rest of the gang running broken). A
job already below its minimum offers only its WHOLE bundle (Volcano: all SAFE). The plugins vote
on every task once (the gang plugin's own vote — never below a minimum — is what the bundles
keep, so it is not asked); a WHOLE bundle counts only if every task of it is allowed.

Bundles are taken in Volcano's order (SAFE before WHOLE, then the victim job order — the queue
latest in queue order first, then the job of lowest priority —, then the most room freed where
the job needs it per room taken from the victim job, then task order) until the job's tasks,
placed by the placement kernel with the victims gone, make it pipelined and its queue may take
them; then every bundle the rest make needless is kept back (WHOLE ones first, the largest first;
then SAFE tasks, highest priority first), so no evicted bundle is one the preemptor could do
without: Volcano evicts its boundary bundle whole (volcano#5984: a preemptor needing one pod's
room drains a job to its minimum).

HyperNodes. A job asking for hard network topology (`spec.networkTopology`, mode hard) evicts
within one HyperNode: tiers tightest first up to the one it allows (as allocate,
actions/topology.py), HyperNodes holding all its placed pods; within a tier each HyperNode is
tried (its statement discarded) and the cheapest kept — fewest WHOLE bundles, fewest victims,
lowest highest victim priority, then the name. The job's classes are restricted to the HyperNode
by rules/hypernodes.py while it is tried, so every placement lies within it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.actions import topology
from runtime.engine.actions.common import place_run
from runtime.engine.rules.hypernodes import asks_topology
from runtime.engine.session import Session, Statement
from runtime.engine.snapshot import BOUND, PENDING, PIPELINED, READY_STATUSES

NO_PRIORITY = -(2 ** 62)
# HyperNodes a job asking for hard topology tries for victims (Volcano's gangpreempt maxDomains
# default; preempt and reclaim, which have no such argument, use it too).
DEFAULT_MAX_DOMAINS = 8


@dataclass(frozen=True)
class Bundle:
    """Victims evicted together: one task above its job's minimum (SAFE), or every running task
    of a job (WHOLE)."""

    whole: bool
    job: int
    tasks: tuple[int, ...]
    local: np.ndarray        # what they free on the domain's nodes
    taken: np.ndarray        # what they take from their job: everything a WHOLE bundle runs


@dataclass(frozen=True)
class Turn:
    """A job's evictions and reservations, in a statement not yet settled."""

    stmt: Statement
    reserved: np.ndarray     # what the job's pipelined tasks request
    cost: tuple


# --- HyperNodes ---------------------------------------------------------------------------------

def asks_hard_topology(ssn: Session, j: int) -> bool:
    job = ssn.snap.jobs[j]
    return ssn.hypernode_rule is not None and asks_topology(job) and job.podgroup.network_topology.hard


def hypernode_tiers(ssn: Session, j: int, limit: int | None) -> list[list[tuple[str, np.ndarray]]]:
    """The HyperNodes (name, node rows) a job asking for hard topology may use, per tier, tightest
    first: each up to its allowed tier, holding all its placed pods, with room enough once every
    running pod on it were gone (a HyperNode that could not hold the gang's next tasks even empty
    is not tried); within a tier the most such room first, then by name. At most `limit` in all
    (Volcano's maxDomains). Empty when none may be used (allocate says why the job waits)."""
    snap = ssn.snap
    tree = snap.hypernodes
    rule = ssn.hypernode_rule
    if tree is None or tree.blocking:
        return []
    highest, _ = topology.highest_tier(snap.jobs[j].podgroup.network_topology, tree)
    if highest is None:
        return []
    levels: list[tuple[int, tuple[str, ...]]] = [(t, tuple(tree.by_tier[t])) for t in tree.tiers]
    if tree.tiers:
        levels.append((max(tree.tiers) + 1, (topology.CLUSTER,)))
    settled = [t for t in snap.jobs[j].tasks.tolist()
               if ssn.status[t] in (*READY_STATUSES, PIPELINED) and ssn.task_node[t] >= 0]
    placed = {snap.node_names[int(ssn.task_node[t])] for t in settled}
    _, need = topology.gang_need(ssn, j)
    columns = np.flatnonzero(need > 0)
    everything = frozenset(snap.node_names)
    out: list[list[tuple[str, np.ndarray]]] = []
    left = limit if limit is not None else len(snap.node_names) + len(tree.hypernodes) + 1
    # Room per node were every running pod gone: the most any victim set could free there.
    running = np.flatnonzero((ssn.status == BOUND) & (ssn.task_node >= 0))
    freeable = snap.allocatable - ssn.used + ssn.releasing - ssn.pipelined
    np.add.at(freeable, ssn.task_node[running], snap.request[running])
    for tier, names in levels:
        if tier > highest or left <= 0:
            break
        found = []
        for name in names:
            leaves = everything if name == topology.CLUSTER else tree.leaves.get(name, frozenset())
            if not placed <= leaves:
                continue
            rows = rule.rows(name, leaves)
            if len(rows) == 0:
                continue
            room = freeable[rows].sum(axis=0)
            if (room[columns] < need[columns]).any():
                continue
            share = float(sum(room[c] / need[c] for c in columns.tolist())) if len(columns) else 0.0
            found.append((-share, name, rows))
        found.sort(key=lambda f: (f[0], f[1]))
        found = found[:left]
        left -= len(found)
        if found:
            out.append([(name, rows) for _, name, rows in found])
    return out


def within_hypernodes(ssn: Session, j: int, attempt: Callable[[np.ndarray | None], Turn | None],
                      limit: int | None) -> Turn | None:
    """For a job asking for hard topology: `attempt` (the job's eviction turn, on node rows or
    None for any node) in each HyperNode it may use, tier by tier, tightest first; the cheapest
    of the first tier where one succeeds is run again for real and returned (its statement not
    settled), None if none. Any other job: `attempt(None)`. A job with sub-groups
    (`spec.subGroupPolicy`, each maybe with its own tier) is no preemptor: None."""
    if getattr(ssn.snap.jobs[j].podgroup, "sub_groups", ()):
        return None
    if not asks_hard_topology(ssn, j):
        return attempt(None)
    rule = ssn.hypernode_rule
    snap = ssn.snap
    job = snap.jobs[j]
    classes = frozenset(int(c) for c in snap.task_class[job.tasks].tolist())
    try:
        for tier in hypernode_tiers(ssn, j, limit):
            results = []
            for name, rows in tier:
                _restrict(ssn, classes, name, rows)
                saved = _reasons(ssn, j)
                turn = attempt(rows)
                if turn is not None:
                    results.append((turn.cost, name, rows))
                    turn.stmt.discard()
                _restore(ssn, j, saved)
            if results:
                _, name, rows = min(results, key=lambda r: (r[0], r[1]))
                _restrict(ssn, classes, name, rows)
                return attempt(rows)
        return None
    finally:
        rule.restrict(classes, "", None)


def _restrict(ssn: Session, classes: frozenset[int], name: str, rows: np.ndarray) -> None:
    allowed = np.zeros(ssn.snap.n_nodes, dtype=bool)
    allowed[rows] = True
    ssn.hypernode_rule.restrict(classes, name, allowed)


def _reasons(ssn: Session, j: int) -> tuple[dict, list]:
    tasks = ssn.snap.jobs[j].tasks.tolist()
    return ({t: list(ssn.task_reasons[t]) for t in tasks if t in ssn.task_reasons},
            list(ssn.job_reasons.get(j, [])))


def _restore(ssn: Session, j: int, saved: tuple[dict, list]) -> None:
    tasks, job = saved
    for t in ssn.snap.jobs[j].tasks.tolist():
        if t in tasks:
            ssn.task_reasons[t] = tasks[t]
        else:
            ssn.task_reasons.pop(t, None)
    if job:
        ssn.job_reasons[j] = job
    else:
        ssn.job_reasons.pop(j, None)


# --- bundles ------------------------------------------------------------------------------------

def votes(ssn: Session, point: str, preemptor: int, candidates: list[int]) -> set[int]:
    """The plugins' answer at `point` (Session.victims: the first tier whose plugins agree on
    some candidate), the gang plugin answering "all": the bundles keep its rule themselves."""
    for tier in ssn.fns(point):
        chosen: set[int] | None = None
        for name, fn in tier:
            picked = set(candidates) if name == "gang" else set(fn(preemptor, candidates))
            chosen = picked if chosen is None else chosen & picked
        if chosen:
            return chosen
    return set()


def bundles_in(ssn: Session, j: int, rows: np.ndarray | None, point: str, may_evict: Callable[[int], bool],
               on_node: dict[int, list[int]], whole_gangs: bool, need: np.ndarray) -> list[Bundle]:
    """The bundles on `rows` (None: every node) for job j, in the order they are taken."""
    snap = ssn.snap
    task_job = snap.task_job
    nodes = on_node.keys() if rows is None else (int(r) for r in rows.tolist())
    local = [v for node in nodes for v in on_node.get(node, ()) if ssn.status[v] == BOUND and may_evict(v)]
    if not local:
        return []
    local_set = set(local)
    by_job: dict[int, list[int]] = {}
    for v in local:
        by_job.setdefault(int(task_job[v]), []).append(v)
    touched = sorted(by_job)
    running = {J: [int(v) for v in snap.jobs[J].tasks.tolist() if ssn.status[v] == BOUND] for J in touched}
    elsewhere = [v for J in touched for v in running[J] if v not in local_set and may_evict(v)]
    preemptor = next((t for t in snap.jobs[j].tasks.tolist() if ssn.status[t] == PENDING), int(snap.jobs[j].tasks[0]))
    allowed = votes(ssn, point, preemptor, local + elsewhere) if local else set()
    in_rows = np.zeros(snap.n_nodes, dtype=bool)
    if rows is None:
        in_rows[:] = True
    else:
        in_rows[rows] = True
    req = snap.request
    zero = np.zeros(snap.n_resources, dtype=np.int64)
    out: list[Bundle] = []
    for J in touched:
        job = snap.jobs[J]
        mine = _task_order(ssn, [v for v in by_job[J] if v in allowed])
        surplus = int(ssn.job_ready[J]) - job.min_member
        mins = job.min_task_member if job.min_member >= sum(job.min_task_member.values()) else {}
        roles = ssn.role_counts(job, READY_STATUSES) if mins else {}
        role_surplus = {r: roles.get(r, 0) - m for r, m in mins.items()}
        group_of, group_surplus, broken = _sub_group_slack(ssn, J)
        safe = []
        for v in mine:
            role = snap.pods[v].task_role
            k = group_of.get(v)
            group_ok = k is None or k[1] in broken or group_surplus[k[0]] > 0
            if surplus > 0 and role_surplus.get(role, 1) > 0 and group_ok:
                safe.append(v)
                surplus -= 1
                if role in role_surplus:
                    role_surplus[role] -= 1
                if k is not None and k[1] not in broken:    # its first pod gone: the sub-group breaks
                    broken.add(k[1])
                    group_surplus[k[0]] -= 1
        out.extend(Bundle(False, J, (v,), req[v], zero) for v in safe)
        kept = set(safe)
        breaks = [v for v in by_job[J] if v not in kept]
        if whole_gangs and breaks and all(v in allowed for v in running[J]):
            tasks = tuple(running[J])
            on_rows = [v for v in tasks if in_rows[ssn.task_node[v]]]
            out.append(Bundle(True, J, tasks, req[on_rows].sum(axis=0), req[list(tasks)].sum(axis=0)))
    return _ordered(ssn, out, need)


def _sub_group_slack(ssn: Session, J: int) -> tuple[dict[int, tuple[int, int]], dict[int, int], set[int]]:
    """For a job with sub-groups (spec.subGroupPolicy; Volcano's SubJobs, as its CreateJobBundles
    counts them): each pod's (policy, sub-group), how many ready sub-groups each policy has above
    its minSubGroups, and the sub-groups already broken (fewer than subGroupSize pods ready). A
    pod is SAFE only where its sub-group is already broken or its policy has a ready one to spare."""
    groups = getattr(ssn.snap, "sub_groups", {}).get(J, ())
    if not groups:
        return {}, {}, set()
    policies = ssn.snap.jobs[J].podgroup.sub_groups
    group_of: dict[int, tuple[int, int]] = {}
    surplus = {i: -p.min_groups for i, p in enumerate(policies)}
    broken: set[int] = set()
    for k, sg in enumerate(groups):
        if sg.policy < 0:
            continue                  # the default sub-group: no minimum of its own
        tasks = sg.tasks.tolist()
        group_of.update((t, (sg.policy, k)) for t in tasks)
        if sum(1 for t in tasks if ssn.status[t] in READY_STATUSES) >= sg.size:
            surplus[sg.policy] += 1
        else:
            broken.add(k)
    return group_of, surplus, broken


def _task_order(ssn: Session, tasks: list[int]) -> list[int]:
    snap = ssn.snap
    return sorted(tasks, key=lambda v: (snap.task_priority[v], -snap.pods[v].creation, v))


def _ordered(ssn: Session, bundles: list[Bundle], need: np.ndarray) -> list[Bundle]:
    """SAFE before WHOLE, then the victim job order, then local gain per room taken, then task order."""
    snap = ssn.snap
    jobs = snap.jobs
    queues = {jobs[b.job].queue for b in bundles}
    late_first = {q: rank for rank, q in enumerate(sorted(queues, key=ssn.queue_key, reverse=True))}
    columns = np.flatnonzero(need > 0).tolist()

    def roi(b: Bundle) -> float:
        gain = sum(min(float(b.local[c]), float(need[c])) / float(need[c]) for c in columns)
        cost = sum(float(b.taken[c]) / float(need[c]) for c in columns)
        return gain / cost if cost else float("inf")

    def key(b: Bundle) -> tuple:
        first = b.tasks[0]
        return (b.whole, late_first[jobs[b.job].queue], jobs[b.job].priority, -roi(b), snap.task_priority[first],
                -snap.pods[first].creation, b.job, first)

    return sorted(bundles, key=key)


def _local(bundles: list[Bundle], n_resources: int) -> np.ndarray:
    """At least what `bundles` free on the domain's nodes together (a SAFE pod of a job whose
    WHOLE bundle is there too counts twice: an upper bound, for a test that only rules out)."""
    total = np.zeros(n_resources, dtype=np.int64)
    for b in bundles:
        total = total + b.local
    return total


def place_needed(ssn: Session, stmt: Statement, j: int) -> list[int]:
    """Job j's pending tasks (not zero-request ones: backfill's), task by task in task order,
    until the job is pipelined or a class finds no node; returns those placed."""
    placed: list[int] = []
    for run in ssn.pending_runs(j, skip_zero=True):
        for t in run:
            if place_run(ssn, stmt, [t], 1) == 0:
                break
            placed.append(t)
            if ssn.job_pipelined_ok(j):
                return placed
    return placed


def evict_bundles(ssn: Session, j: int, rows: np.ndarray | None, point: str, may_evict: Callable[[int], bool],
                  reason_for: Callable[[int, int, bool], d.Reason], queue_ok: Callable[[np.ndarray, list[int]], bool],
                  on_node: dict[int, list[int]], whole_gangs: bool) -> Turn | None:
    """Job j's turn by bundles on `rows` (None: every node): the victims evicted and the job's
    tasks pipelined in a statement not yet settled, or None (nothing placed, nothing evicted)
    when no set of bundles makes the job pipelined there. `queue_ok(request, evicted)`: whether
    the job's queue may take its pipelined tasks' `request` with `evicted` gone; `reason_for(v,
    t, whole)`: victim v's reason, for task t, v's gang evicted whole or not."""
    snap = ssn.snap
    _, need = topology.gang_need(ssn, j)
    bundles = bundles_in(ssn, j, rows, point, may_evict, on_node, whole_gangs, need)
    if not bundles:
        return None
    stmt = ssn.new_statement()
    req = snap.request

    def victims_of(chosen: list[Bundle]) -> list[int]:
        seen: dict[int, None] = {}
        for b in chosen:
            for v in b.tasks:
                seen.setdefault(v, None)
        return list(seen)

    def fits(chosen: list[Bundle]) -> dict[int, int] | None:
        """Where the job's tasks go with `chosen` gone (task -> node), or None; rolled back."""
        mark = stmt.mark()
        victims = victims_of(chosen)
        for v in victims:
            stmt.evict(v, _PROBE)
        placed = place_needed(ssn, stmt, j)
        # Reservations, as they will be: pipelined room does not count in the queue's allocation
        # (queue_ok adds the request by hand).
        stmt.to_pipelined()
        ok = bool(placed) and ssn.job_pipelined_ok(j) and queue_ok(req[placed].sum(axis=0), victims)
        where = {t: int(ssn.task_node[t]) for t in placed} if ok else None
        stmt.rollback(mark)
        return where

    rows_all = np.arange(snap.n_nodes) if rows is None else rows
    free = np.maximum(snap.allocatable[rows_all] - ssn.used[rows_all] + ssn.releasing[rows_all]
                      - ssn.pipelined[rows_all], 0).sum(axis=0)
    columns = np.flatnonzero(need > 0)
    # Bundles in order until the job fits; after a failed try the next try waits for twice as
    # many more (what is taken beyond the need is kept back below).
    chosen: list[Bundle] = []
    freed = np.zeros(snap.n_resources, dtype=np.int64)
    where = None
    step, due = 1, 0
    for i, b in enumerate(bundles):
        chosen.append(b)
        freed = freed + b.local
        if (free[columns] + freed[columns] < need[columns]).any() or (i < due and i < len(bundles) - 1):
            continue
        where = fits(chosen)
        if where is not None:
            break
        due, step = i + step, step * 2
    if where is None:
        stmt.discard()
        return None
    # First keep back at once every bundle with no pod on a node the job's pods use.
    used = set(where.values())
    idle = [b for b in chosen if not any(int(ssn.task_node[v]) in used for v in b.tasks)]
    if idle:
        rest = [b for b in chosen if all(b is not i for i in idle)]
        found = fits(rest) if rest else None
        if found is not None:
            chosen, where = rest, found
    # Keep back every bundle the others make needless: WHOLE ones first (the most taken first),
    # then SAFE tasks (highest priority first).
    for b in sorted(chosen, key=lambda b: (not b.whole, -float(b.taken.sum()), -int(snap.task_priority[b.tasks[0]]),
                                           b.tasks[0])):
        rest = [c for c in chosen if c is not b]
        if (free[columns] + _local(rest, snap.n_resources)[columns] < need[columns]).any():
            continue                    # the rest cannot free the room the job needs: b is needed
        found = fits(rest)
        if found is not None:
            chosen, where = rest, found
    victims = victims_of(chosen)
    in_whole = {v for b in chosen if b.whole for v in b.tasks}
    placed = list(where)
    by_node: dict[int, int] = {}
    for t, node in where.items():
        by_node.setdefault(node, t)
    for v in victims:
        stmt.evict(v, reason_for(v, by_node.get(int(ssn.task_node[v]), placed[0]), v in in_whole))
    for t, node in where.items():
        stmt.place(t, node, PIPELINED)
    wholes = sum(1 for b in chosen if b.whole)
    top = max((int(snap.task_priority[v]) for v in victims), default=NO_PRIORITY)
    return Turn(stmt, req[placed].sum(axis=0), (wholes, len(victims), top))


_PROBE = d.Reason(d.PREEMPTION, "probe", {})    # a trial eviction's reason, always rolled back
