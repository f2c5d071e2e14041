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
by rules/hypernodes.py while it is tried, so every placement lies within it. A soft job (mode
soft) the same over every tier and then the whole cluster, then anywhere as a job without
topology: it lands as tight as its victims allow (a tighter HyperNode wins even where a wider one
would take fewer victims: the tier is what the job asked for), and within the HyperNode chosen
its victims are the fewest as any job's.

Sub-groups. A job with sub-groups (spec.subGroupPolicy, Volcano's SubJobs) takes its eviction turn
sub-group by sub-group (`within_sub_groups`): each within one HyperNode of its own tier inside the
job's region, on idle room first and then on what its victims there free, the cheapest candidate of
the tightest tier that works; the turn is kept only if the job is then pipelined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.actions import topology
from runtime.cluster.model import PREEMPT_NEVER
from runtime.engine.actions.common import minimums_first, place_run
from runtime.engine.actions.eviction import sub_group_slack
from runtime.engine.rules.hypernodes import asks_topology, sub_group_count, sub_group_ready
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


def asks_soft_topology(ssn: Session, j: int) -> bool:
    job = ssn.snap.jobs[j]
    return ssn.hypernode_rule is not None and asks_topology(job) and not job.podgroup.network_topology.hard


def held_by_hypernodes(ssn: Session, j: int) -> bool:
    """Whether allocate holds job j, which asks for topology (itself or a sub-group policy), for
    a HyperNode cycle or second parent (actions/topology.py): an eviction for it would buy a
    reservation nothing binds."""
    tree = ssn.snap.hypernodes
    podgroup = ssn.snap.jobs[j].podgroup
    return tree is not None and bool(tree.blocking) and podgroup is not None and podgroup.asks_topology


def hypernode_tiers(ssn: Session, j: int, limit: int | None) -> list[list[tuple[str, np.ndarray]]]:
    """The HyperNodes (name, node rows) a job asking for topology may use, per tier, tightest
    first: each up to its allowed tier (soft: every tier, then the whole cluster), holding all its
    placed pods, with room enough once every running pod on it were gone (a HyperNode that could
    not hold the gang's next tasks even empty is not tried); within a tier the most such room
    first, then by name. At most `limit` in all (Volcano's maxDomains). Empty when none may be
    used (allocate says why a hard job waits)."""
    snap = ssn.snap
    tree = snap.hypernodes
    rule = ssn.hypernode_rule
    if tree is None or tree.blocking:
        return []
    request = snap.jobs[j].podgroup.network_topology
    if request.hard:
        highest, _ = topology.highest_tier(request, tree)
        if highest is None:
            return []
    else:
        highest = max(tree.tiers, default=0) + 1     # soft: up to Volcano's virtual HyperNode, the cluster
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
                      limit: int | None, group_attempt: GroupAttempt | None = None) -> Turn | None:
    """For a job asking for topology: `attempt` (the job's eviction turn, on node rows or None
    for any node) in each HyperNode it may use (`hypernode_tiers`), tier by tier, tightest first;
    the cheapest of the first tier where one succeeds is run again for real and returned (its
    statement not settled). A hard job: None if none. A soft job: then `attempt(None)`, as any
    job, unless the whole cluster was among the HyperNodes tried (so it lands as tight as its
    victims allow, and widens only when no tighter HyperNode makes it pipelined). Any other job:
    `attempt(None)`. While allocate holds the job for its HyperNodes (`held_by_hypernodes`),
    None. A job with sub-groups (`spec.subGroupPolicy`) takes its turn sub-group by sub-group
    (`within_sub_groups`, with `group_attempt`; None without one)."""
    if held_by_hypernodes(ssn, j):
        return None
    if j in ssn.snap.sub_groups:
        return within_sub_groups(ssn, j, group_attempt, limit) if group_attempt is not None else None
    hard = asks_hard_topology(ssn, j)
    if not hard and not asks_soft_topology(ssn, j):
        return attempt(None)
    rule = ssn.hypernode_rule
    snap = ssn.snap
    job = snap.jobs[j]
    classes = frozenset(int(c) for c in snap.task_class[job.tasks].tolist())
    widened = False
    try:
        for tier in hypernode_tiers(ssn, j, limit):
            widened = widened or any(name == topology.CLUSTER for name, _ in tier)
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
    finally:
        rule.restrict(classes, "", None)
    # Soft: no HyperNode tried makes it pipelined (or none could be: no tier, maxDomains spent),
    # so anywhere, as a job without topology.
    return None if hard or widened else attempt(None)


# --- sub-groups (spec.subGroupPolicy; Volcano's SubJobs) as preemptors ------------------------

# An action's eviction turn for some tasks of a sub-group: (statement, the sub-group's pending tasks
# in task order, how many to place, the sub-group's HyperNode's node rows) -> how many it placed,
# evictions and reservations made in the statement (whatever it placed: the caller rolls back
# a short turn).
GroupAttempt = Callable[[Statement, list[int], int, np.ndarray], int]


def within_sub_groups(ssn: Session, j: int, group_attempt: GroupAttempt, limit: int | None) -> Turn | None:
    """Job j (with sub-groups) as a preemptor: the job's region — for a job asking for topology
    each HyperNode it may use (`hypernode_tiers`, tightest tier first, the cheapest of the first
    tier that works, as `within_hypernodes`; a soft job then the whole cluster), else the whole
    cluster — and within it the job's turn sub-group by sub-group (`_sub_group_pass`). Returns the
    turn (statement not settled) or None when no region makes the job pipelined."""
    snap = ssn.snap
    rule = ssn.hypernode_rule
    classes = frozenset(int(c) for c in snap.task_class[snap.jobs[j].tasks].tolist())
    everywhere = np.ones(snap.n_nodes, dtype=bool)
    hard = asks_hard_topology(ssn, j)

    def anywhere() -> Turn | None:
        try:
            return _sub_group_pass(ssn, j, topology.CLUSTER, everywhere, group_attempt, limit)
        finally:
            if rule is not None:
                rule.restrict(classes, "", None)

    if not hard and not asks_soft_topology(ssn, j):
        return anywhere()
    widened = False
    try:
        for tier in hypernode_tiers(ssn, j, limit):
            widened = widened or any(name == topology.CLUSTER for name, _ in tier)
            results = []
            for name, rows in tier:
                allowed = np.zeros(snap.n_nodes, dtype=bool)
                allowed[rows] = True
                saved = _reasons(ssn, j)
                turn = _sub_group_pass(ssn, j, name, allowed, group_attempt, limit)
                if turn is not None:
                    results.append((turn.cost, name, allowed))
                    turn.stmt.discard()
                _restore(ssn, j, saved)
            if results:
                _, name, allowed = min(results, key=lambda r: (r[0], r[1]))
                return _sub_group_pass(ssn, j, name, allowed, group_attempt, limit)
    finally:
        rule.restrict(classes, "", None)
    return None if hard or widened else anywhere()


def _freeable(ssn: Session) -> Callable[[Session, np.ndarray], np.ndarray]:
    """Rows -> the most room any victim set could make there: free room (once leaving pods go,
    less reservations) plus every running pod's request, per node computed once."""
    snap = ssn.snap
    per_node = np.maximum(snap.allocatable - ssn.used + ssn.releasing - ssn.pipelined, 0)
    running = np.flatnonzero((ssn.status == BOUND) & (ssn.task_node >= 0))
    np.add.at(per_node, ssn.task_node[running], snap.request[running])
    return lambda _ssn, rows: per_node[rows].sum(axis=0)


def _sub_group_pass(ssn: Session, j: int, region: str, region_allowed: np.ndarray, group_attempt: GroupAttempt,
                    limit: int | None) -> Turn | None:
    """Job j's eviction turn within the region, sub-group by sub-group in allocate's order
    (topology.group_key: those needed for minSubGroups first): each takes `group_attempt` until
    it has subGroupSize members placed or pipelined (one more when it already has), within one
    HyperNode of its own networkTopology inside the region (topology.sub_group_levels, counting
    the room victims could free; tightest tier first, every candidate of a tier tried and the
    cheapest kept — fewest victims, lowest highest victim priority, then the name; at most
    `limit` candidates per tier, those with the most idle room toward the need), or not at all (what it did rolled back); a sub-group that
    gained members and still has pending tasks goes back in line. The turn stops once the job
    is pipelined; it is None (its statement discarded) unless the job then is."""
    snap = ssn.snap
    rule = ssn.hypernode_rule
    start = [t for run in ssn.pending_runs(j, skip_zero=True) for t in run]
    if not start:
        return None
    waiting = set(start)
    groups = [g for g in snap.sub_groups[j] if any(t in waiting for t in g.tasks.tolist())]
    required = topology.needed_for_minimum(ssn, j)
    line = sorted(groups, key=lambda g: topology.group_key(ssn, g, required))
    stmt = ssn.new_statement()
    try:
        while line and not ssn.job_pipelined_ok(j):
            group = line.pop(0)
            tasks = [t for t in group.tasks.tolist() if t in waiting and ssn.status[t] == PENDING]
            if not tasks:
                continue
            want = 1 if sub_group_ready(ssn, group, pipelined=True) else \
                max(group.size - sub_group_count(ssn, group, True), 1)
            if _evict_for_group(ssn, stmt, j, group, tasks, want, region, region_allowed, group_attempt, limit):
                if any(ssn.status[t] == PENDING for t in tasks):
                    line.append(group)
                    line.sort(key=lambda g: topology.group_key(ssn, g, required))
    finally:
        if rule is not None:
            rule.restrict(frozenset(int(c) for c in snap.task_class[snap.jobs[j].tasks].tolist()), "", None)
    if not ssn.job_pipelined_ok(j):
        stmt.discard()
        return None
    placed = [t for t in start if ssn.status[t] == PIPELINED]
    evicted = stmt.evicted_since(0)
    top = max((int(snap.task_priority[v]) for v in evicted), default=NO_PRIORITY)
    return Turn(stmt, snap.request[placed].sum(axis=0) if placed else np.zeros(snap.n_resources, dtype=np.int64),
                (len(evicted), top))


def _evict_for_group(ssn: Session, stmt: Statement, j: int, group, tasks: list[int], want: int, region: str,
                     region_allowed: np.ndarray, group_attempt: GroupAttempt, limit: int | None) -> bool:
    """One sub-group's share of `_sub_group_pass`: whether it placed `want` tasks (kept in stmt)."""
    snap = ssn.snap
    rule = ssn.hypernode_rule
    placed = topology.required_nodes(ssn, j, group.tasks)
    need = topology.least_request(ssn, tasks, want)
    levels, why = topology.sub_group_levels(ssn, group, region, region_allowed, placed, need, _freeable(ssn))
    if levels is None:
        reason = d.Reason(d.GANG, f"{topology.sub_group_said(ssn, j, group)}: {why}", {"topology": True})
        for t in tasks:
            ssn.add_reason(t, reason)
        return False
    classes = frozenset(int(c) for c in snap.task_class[snap.jobs[j].tasks].tolist())

    def restrict(name: str, allowed: np.ndarray | None) -> np.ndarray:
        # A region of every node is still a restriction: evict_for evicts only within one.
        allowed = np.ones(snap.n_nodes, dtype=bool) if allowed is None else allowed
        if rule is not None:
            rule.restrict(classes, name, allowed)
        return np.flatnonzero(allowed)

    columns = np.flatnonzero(need > 0)
    idle = topology.node_free(ssn)

    def idle_share(allowed: np.ndarray | None) -> float:
        # How much of the need idle room there covers: the likeliest to need fewest victims.
        if not len(columns):
            return 0.0
        room = idle.sum(axis=0) if allowed is None else idle[allowed].sum(axis=0)
        return float((np.minimum(room[columns], need[columns]) / need[columns]).sum())

    for level in levels:
        results = []
        if limit is not None and len(level) > limit:
            # At most `limit` candidates a tier (maxDomains): most idle room toward the need first.
            level = sorted(level, key=lambda c: (-idle_share(c[1]), c[0]))[:max(limit, 1)]
        for name, allowed in level:
            rows = restrict(name, allowed)
            mark = stmt.mark()
            saved = _reasons(ssn, j)
            count = group_attempt(stmt, tasks, want, rows)
            if count >= want:
                evicted = stmt.evicted_since(mark)
                top = max((int(snap.task_priority[v]) for v in evicted), default=NO_PRIORITY)
                results.append(((len(evicted), top), name, allowed))
            stmt.rollback(mark)
            _restore(ssn, j, saved)
        if results:
            _, name, allowed = min(results, key=lambda r: (r[0], r[1]))
            rows = restrict(name, allowed)
            mark = stmt.mark()
            if group_attempt(stmt, tasks, want, rows) >= want:
                return True
            stmt.rollback(mark)        # not expected: the same turn in the same state
            return False
    return False


def pipelined_of(ssn: Session, j: int) -> frozenset[int]:
    """Job j's pipelined tasks now."""
    tasks = ssn.snap.jobs[j].tasks
    return frozenset(int(t) for t in tasks[ssn.status[tasks] == PIPELINED].tolist())


def reserved_since(ssn: Session, j: int, before: frozenset[int]) -> np.ndarray:
    """What job j's tasks pipelined since `before` (`pipelined_of` then) request: the job's
    reservations of this turn so far."""
    tasks = sorted(pipelined_of(ssn, j) - before)
    return ssn.snap.request[tasks].sum(axis=0) if tasks else np.zeros(ssn.snap.n_resources, dtype=np.int64)


def idle_first(ssn: Session, stmt: Statement, t: int, queue_ok: Callable[[], bool]) -> bool:
    """Pipeline task t on idle room where the HyperNode rule lets it (a hard-topology preemptor's
    turn within one HyperNode), if its queue may take it; whether it was. A zero-request task is
    backfill's."""
    if ssn.zero_request(t) or not queue_ok():
        return False
    if place_run(ssn, stmt, [t], 1):
        stmt.to_pipelined()
        return True
    return False


def task_by_task(ssn: Session, j: int, before: frozenset[int], eligible: Callable[[int], bool],
                 queue_allows: Callable[[np.ndarray], bool],
                 evict: Callable[[Statement, int, Callable[[], bool]], bool]) -> GroupAttempt:
    """preempt's and reclaim's sub-group attempt: the sub-group's pending tasks in task order,
    each (if `eligible`) pipelined on idle room within the sub-group's HyperNode where there is
    some, else where `evict(stmt, t, queue_ok)` evicts for it (evict_for: Volcano places a
    preemptor only where it evicts; a sub-group may need both, runtime/README.md), as long as
    its queue may take it with the job's reservations of this turn (`queue_allows(request)`,
    `before`: the job's pipelined tasks before the turn); a class that finds neither is not
    tried again."""
    snap = ssn.snap

    def attempt(stmt: Statement, tasks: list[int], want: int, rows: np.ndarray) -> int:
        placed = 0
        failed: set[int] = set()
        for t in tasks:
            if placed >= want:
                break
            cid = int(snap.task_class[t])
            if ssn.status[t] != PENDING or cid in failed or not eligible(t):
                continue

            def queue_ok(t=t) -> bool:
                # Asked with the victims gone (evict_for), or before an idle placement.
                return queue_allows(reserved_since(ssn, j, before) + snap.request[t])

            if idle_first(ssn, stmt, t, queue_ok) or evict(stmt, t, queue_ok):
                placed += 1
                continue
            if snap.pods[t].preemption_policy != PREEMPT_NEVER:    # a pod's own choice, not its class's
                failed.add(cid)
        return placed

    return attempt


def by_bundles(ssn: Session, j: int, before: frozenset[int], queue_ok: Callable[[np.ndarray, list[int]], bool],
               bundles: Callable[..., Turn | None]) -> GroupAttempt:
    """gang_preempt's and gang_reclaim's sub-group attempt: the sub-group's tasks on idle room
    within its HyperNode where they all fit, else `bundles(stmt, rows, tasks, want, queue_ok)`
    (evict_bundles on the sub-group's HyperNode, the job's reservations of this turn added to
    what the queue must take)."""
    snap = ssn.snap

    def attempt(stmt: Statement, tasks: list[int], want: int, rows: np.ndarray) -> int:
        held = reserved_since(ssn, j, before)
        mark = stmt.mark()
        placed = place_tasks(ssn, stmt, tasks, want)
        stmt.to_pipelined()
        if len(placed) >= want and queue_ok(held + snap.request[placed].sum(axis=0), []):
            return len(placed)
        stmt.rollback(mark)
        turn = bundles(stmt, rows, tasks, want, lambda request, evicted: queue_ok(held + request, evicted))
        return 0 if turn is None else sum(1 for t in tasks if ssn.status[t] == PIPELINED)

    return attempt


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
        group_of, group_surplus, broken = sub_group_slack(ssn, J)
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
    """Job j's pending tasks (not zero-request ones: backfill's), task by task in task order
    (those filling its roles' minimums first: minimums_first), until the job is pipelined or a
    class finds no node; returns those placed."""
    placed: list[int] = []
    for run in minimums_first(ssn, j, ssn.pending_runs(j, skip_zero=True)):
        for t in run:
            if place_run(ssn, stmt, [t], 1) == 0:
                break
            placed.append(t)
            if ssn.job_pipelined_ok(j):
                return placed
    return placed


def place_tasks(ssn: Session, stmt: Statement, tasks: list[int], want: int) -> list[int]:
    """`tasks` (pending ones, in order) placed one by one until `want` are; returns those placed."""
    placed: list[int] = []
    for t in tasks:
        if ssn.status[t] == PENDING and place_run(ssn, stmt, [t], 1):
            placed.append(t)
            if len(placed) >= want:
                break
    return placed


def evict_bundles(ssn: Session, j: int, rows: np.ndarray | None, point: str, may_evict: Callable[[int], bool],
                  reason_for: Callable[[int, int, bool], d.Reason], queue_ok: Callable[[np.ndarray, list[int]], bool],
                  on_node: dict[int, list[int]], whole_gangs: bool, stmt: Statement | None = None,
                  tasks: list[int] | None = None, want: int = 0) -> Turn | None:
    """Job j's turn by bundles on `rows` (None: every node): the victims evicted and the job's
    tasks pipelined in a statement not yet settled, or None (nothing placed, nothing evicted)
    when no set of bundles makes the job pipelined there. `queue_ok(request, evicted)`: whether
    the job's queue may take its pipelined tasks' `request` with `evicted` gone; `reason_for(v,
    t, whole)`: victim v's reason, for task t, v's gang evicted whole or not. With `tasks` (a
    sub-group's share of a turn, in `stmt`): the victims that let `want` of them be placed
    instead of the job pipelined; on failure `stmt` is left as it was."""
    snap = ssn.snap
    if tasks is None:
        _, need = topology.gang_need(ssn, j)
    else:
        need = topology.least_request(ssn, [t for t in tasks if ssn.status[t] == PENDING], want)
    bundles = bundles_in(ssn, j, rows, point, may_evict, on_node, whole_gangs, need)
    if not bundles:
        return None
    stmt = ssn.new_statement() if stmt is None else stmt
    base = stmt.mark()
    req = snap.request

    def place() -> tuple[list[int], bool]:
        if tasks is None:
            placed = place_needed(ssn, stmt, j)
            return placed, ssn.job_pipelined_ok(j)
        placed = place_tasks(ssn, stmt, tasks, want)
        return placed, len(placed) >= want

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
        placed, done = place()
        # Reservations, as they will be: pipelined room does not count in the queue's allocation
        # (queue_ok adds the request by hand).
        stmt.to_pipelined()
        ok = bool(placed) and done and queue_ok(req[placed].sum(axis=0), victims)
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
        stmt.rollback(base)
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
