"""allocate for a job that asks for network topology (a PodGroup's `spec.networkTopology`,
Volcano's HyperNodes): the job's turn is placed within ONE HyperNode.

As Volcano's allocate (`allocateForJob`): tiers are tried tightest first (tier 1, 2, ... up to
`highestTierAllowed`, or the tier of the HyperNodes whose `tierName` is `highestTierName`;
default 1); within a tier every HyperNode is a dry run (the turn placed with the job's classes
restricted to the HyperNode's nodes by rules/hypernodes.py, its statement discarded), and the
best is placed for real. As Volcano, the best is the one the network-topology-aware plugin scores
highest (`Session.hypernode_order`, plugins/network_topology.py) when the policy enables it, a
ready gang before a pipelined one and ties by name. Without the plugin (Volcano then has no score
and takes the first candidate), a documented stand-in rule, deterministic: a ready gang first,
in the HyperNode that would have the least free room left, for the resources the job requests,
once the gang's need is placed (binpack: whole HyperNodes stay free for other gangs), then the
name; where no HyperNode makes it ready, the most of its tasks placed, then the least room left.
Candidates are tried in that rank (`trial_order`), and the first where the gang is ready is
kept: no later one could rank above it, so a tier of a hundred HyperNodes costs one or two dry
runs, not a hundred (with the plugin, while the job has no pod placed: the score's tie-break
counts placed pods, so such a job tries them all).
A job with pods already placed (elastic, reserved, or after a restart) is tried only in the
HyperNodes that hold them all (their lowest common HyperNode and its ancestors) and, while it has
one placed, the HyperNode its PodGroup's volcano.sh/job-allocated-hypernode annotation records.

A job with sub-groups (spec.subGroupPolicy, Volcano's SubJobs) takes its turn sub-group by
sub-group (`attempt_sub_groups`): each sub-group placed until it has subGroupSize members within
one HyperNode of its own networkTopology, inside the job's HyperNode (the search above).

Hard mode: if no HyperNode of an allowed tier fits the gang, the job waits, its reason giving the
task count and the room of the best HyperNodes for the resource that binds. Soft mode: the same
search over every tier, and finally the whole cluster. A cycle or a second parent among the
HyperNodes (`Topology.blocking`) holds every job that asks for topology, naming the HyperNodes.
As Volcano's session, a virtual HyperNode `<cluster>` holds every node one tier above the highest
real one (a hard request of tier 3 over a two-tier tree may span the cluster; a job whose placed
pods share no real HyperNode may still grow within it). Without any HyperNode, unlike Volcano (whose
virtual HyperNode is then of tier 1), a hard job waits ("no HyperNode of tier <= 1") rather than be
spread, and a soft one is placed anywhere."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import numpy as np

from runtime.cluster import decisions as d
from runtime.cluster.model import NetworkTopology
from runtime.cluster.topology import Topology
from runtime.engine.actions.common import failure_reason, place_run
from runtime.engine.queueshare import figure
from runtime.engine.rules.hypernodes import sub_group_count, sub_group_ready
from runtime.engine.session import Session
from runtime.engine.snapshot import PENDING, PIPELINED, READY_STATUSES, SubGroup

READY, PIPELINED_OUTCOME = 2, 1
CLUSTER = "<cluster>"       # Volcano's ClusterTopHyperNode: every node, above the highest tier
Candidate = tuple[str, "np.ndarray | None"]     # a HyperNode (or a region) and its nodes as a mask (None: all)


def highest_tier(request: NetworkTopology, tree: Topology) -> tuple[int | None, str]:
    """The highest tier the job may span (None: no HyperNode has the named tier), and how to say it."""
    if request.highest_tier_name is not None:
        tiers = sorted({h.tier for h in tree.hypernodes.values() if h.tier_name == request.highest_tier_name})
        return (tiers[0] if tiers else None), f"tier {request.highest_tier_name!r}"
    if request.highest_tier is not None:
        return request.highest_tier, f"tier {request.highest_tier}"
    return 1, "tier 1"


def allocate_within(ssn: Session, j: int, one_task: bool, attempt: Callable, finish: Callable,
                    bind: Callable | None = None) -> bool:
    """Job j's turn within one HyperNode (the module's docstring). A job with sub-groups
    (spec.subGroupPolicy) takes its turn sub-group by sub-group (`attempt_sub_groups`, `bind`
    taking its held reservations), within the job's HyperNode when it asks for one."""
    snap = ssn.snap
    job = snap.jobs[j]
    request: NetworkTopology | None = job.podgroup.network_topology
    tree: Topology | None = snap.hypernodes
    rule = ssn.hypernode_rule
    if j in snap.sub_groups:
        attempt = partial(attempt_sub_groups, bind=bind)
    if tree is not None and tree.blocking and job.podgroup.asks_topology:
        at_fault = sorted({h for p in tree.blocking for h in p.hypernodes})
        return wait(ssn, j, f"HyperNodes are not ready for topology-aware placement "
                            f"({'; '.join(str(p) for p in tree.blocking)}): HyperNodes at fault: {', '.join(at_fault)}")
    if request is None or tree is None or rule is None:
        # Sub-groups under no job-level request: the turn over the whole cluster.
        tried = attempt(ssn, j, one_task)
        return finish(ssn, j, tried) if tried is not None else False
    highest, said = highest_tier(request, tree)
    # As Volcano's session (addClusterTopHyperNode): a virtual HyperNode over every node, one tier
    # above the highest real one, so a request reaching above every real tier spans the cluster.
    top = max(tree.tiers) + 1 if tree.tiers else None
    levels: list[tuple[int, tuple[str, ...]]] = [(t, tuple(tree.by_tier[t])) for t in tree.tiers]
    if top is not None:
        levels.append((top, (CLUSTER,)))
    if request.hard:
        if highest is None:
            return wait(ssn, j, f"gang asks for network topology within {said}, which no HyperNode has")
        levels = [(t, names) for t, names in levels if t <= highest]
        if not levels:
            return wait(ssn, j, f"gang asks for network topology within {said}: no HyperNode of tier <= {highest}")
    classes = frozenset(int(c) for c in snap.task_class[job.tasks].tolist())
    placed_names = set(required_nodes(ssn, j, job.tasks, job.podgroup.allocated_hypernode))
    need, need_req = gang_need(ssn, j)
    columns = np.flatnonzero(need_req > 0)
    rooms: list[tuple[str, np.ndarray]] = []          # the HyperNodes the search looked at, with their room

    def leaves_of(name: str) -> frozenset[str]:
        return frozenset(snap.node_names) if name == CLUSTER else tree.leaves.get(name, frozenset())

    try:
        free = node_free(ssn)
        for _, names in levels:
            results = []
            level_rows, level_room = rule.rooms(names, leaves_of, free)
            short = (level_room[:, columns] < need_req[columns]).any(axis=1)
            picked: list[int] = []
            for i, name in enumerate(names):
                if placed_names and not placed_names <= leaves_of(name):
                    continue
                rooms.append((name, level_room[i]))
                if len(level_rows[i]) == 0 or short[i]:
                    continue                  # cannot hold the gang whatever the order: no dry run
                picked.append(i)
            candidates = Candidates([names[i] for i in picked], [level_rows[i] for i in picked],
                                    level_room[picked], rule.totals(names, leaves_of)[picked])
            ordered, first_ready_wins = trial_order(ssn, j, candidates, need_req, columns, bool(placed_names))
            for name, rows in ordered:
                allowed = np.zeros(snap.n_nodes, dtype=bool)
                allowed[rows] = True
                rule.restrict(classes, name, allowed)
                tried = dry_run(ssn, j, one_task, attempt, rows, columns, keep_ready=first_ready_wins)
                if tried is None:
                    return False              # nothing to place
                outcome, placed, left, kept = tried
                if kept is not None:
                    # The first ready one wins (trial_order): its dry run is the turn itself,
                    # kept rather than undone and placed again the same way.
                    return finish(ssn, j, kept)
                if outcome:
                    results.append((-outcome, -placed, left, name, allowed, rows))
            if results:
                if ssn.hypernode_order is not None:
                    # The network-topology-aware plugin's score, as Volcano's selectBestHyperNode;
                    # a ready gang still before a pipelined one, ties by name.
                    scores = ssn.hypernode_order(j, {r[3]: r[5] for r in results})
                    key = lambda r: (r[0], -scores[r[3]], r[3])      # noqa: E731
                else:
                    # None is ready (the first ready one is kept as the turn, above): the most
                    # tasks placed, the least room left, the name.
                    key = lambda r: r[:4]      # noqa: E731
                _, _, _, name, allowed, _ = min(results, key=key)
                rule.restrict(classes, name, allowed)
                tried = attempt(ssn, j, one_task)
                return finish(ssn, j, tried) if tried is not None else False
        if not request.hard and top is None:
            rule.restrict(classes, "", None)      # soft, and no HyperNode at all: the whole cluster
            tried = attempt(ssn, j, one_task)
            return finish(ssn, j, tried) if tried is not None else False
    finally:
        rule.restrict(classes, "", None)
    if not request.hard:
        # Soft, and not even the whole cluster holds it: the turn as any job's, for its reasons.
        tried = attempt(ssn, j, one_task)
        return finish(ssn, j, tried) if tried is not None else False
    return wait(ssn, j, shortage_text(ssn, need, need_req, rooms, highest, placed_names))


@dataclass(frozen=True)
class Candidates:
    """A tier's HyperNodes that could hold the gang: names, node rows, free room and allocatable
    (rows of the last two by candidate, columns by resource)."""
    names: list[str]
    rows: list[np.ndarray]
    room: np.ndarray
    total: np.ndarray


def trial_order(ssn: Session, j: int, candidates: Candidates, need_req: np.ndarray,
                columns: np.ndarray, has_placed: bool) -> tuple[list[tuple[str, np.ndarray]], bool]:
    """The order to dry-run a tier's candidate HyperNodes in, and whether the first where the
    gang is ready wins (so the search stops there instead of trying every HyperNode of the tier).
    With the network-topology-aware plugin, its score does not depend on the dry run while the
    job has no pod placed (the score's tie-break counts placed pods): best score first, then the
    name, is the order the choice ranks ready outcomes in. Without it, the stand-in rule ranks a
    ready gang by the room the HyperNode would have left once the gang's need is placed, least
    first (binpack), then the name. A job with placed pods under the plugin tries them all."""
    pairs = list(zip(candidates.names, candidates.rows))
    if ssn.hypernode_order is not None:
        if has_placed:
            return pairs, False
        scores = ssn.hypernode_order(j, dict(pairs))
        return sorted(pairs, key=lambda c: (-scores[c[0]], c[0])), True
    # Σ over the requested resources of (room - need) / allocatable, column by column in the
    # order a per-candidate sum would take (equal sums must stay equal: the name breaks ties).
    left = np.zeros(len(pairs), dtype=np.float64)
    for c in columns.tolist():
        total = candidates.total[:, c]
        with np.errstate(divide="ignore", invalid="ignore"):
            left += np.where(total > 0, (candidates.room[:, c] - need_req[c]) / np.where(total > 0, total, 1), 0.0)
    order = sorted(range(len(pairs)), key=lambda i: (float(left[i]), pairs[i][0]))
    return [pairs[i] for i in order], True


def placed_nodes(ssn: Session, tasks: np.ndarray) -> set[str]:
    """The nodes where these tasks are placed (allocated, bound, succeeded or pipelined)."""
    snap = ssn.snap
    return {snap.node_names[int(ssn.task_node[t])] for t in tasks.tolist()
            if ssn.status[t] in (*READY_STATUSES, PIPELINED) and ssn.task_node[t] >= 0}


def required_nodes(ssn: Session, j: int, tasks: np.ndarray, recorded: str = "") -> frozenset[str]:
    """The nodes a HyperNode must hold for these tasks of job j to join their siblings: where
    they are placed and, while any is, the nodes of the job's recorded HyperNode (the
    volcano.sh/job-allocated-hypernode annotation, read back after a restart; as Volcano, it
    counts only while the job has a pod placed and names a HyperNode that still exists)."""
    placed = placed_nodes(ssn, tasks)
    tree = ssn.snap.hypernodes
    if placed and recorded and tree is not None and recorded in tree.leaves:
        placed |= tree.leaves[recorded]
    return frozenset(placed)


def gang_need(ssn: Session, j: int) -> tuple[int, np.ndarray]:
    """How many more tasks the gang needs placed (at least one, but see below), and the least
    that many of its pending tasks request together, per resource (the smallest asks of each
    resource summed: whichever tasks make up the gang need at least that, so a HyperNode with
    less room is passed over rightly; a gang completed by pods that request nothing needs no
    room for the others). A gang that reaches its minMember only with its reservations
    (pipelined tasks: a preemptor's, held) needs no room at all: its turn binds them without room
    for one more (were its HyperNode passed over for lacking room its extra pods would want, the
    reservations, and the evictions that bought them, would never bind)."""
    job = ssn.snap.jobs[j]
    have = int(ssn.job_ready[j]) + int(ssn.job_pipelined[j])
    if int(ssn.job_pipelined[j]) and have >= job.min_member:
        return 0, np.zeros(ssn.snap.request.shape[1], dtype=np.int64)
    need = max(job.min_member - have, 1)
    pending = [t for t in job.tasks.tolist() if ssn.status[t] == PENDING]
    return min(len(pending), need) or need, least_request(ssn, pending, need)


def least_request(ssn: Session, tasks: list[int], count: int) -> np.ndarray:
    """The least any `count` of `tasks` ask together, per resource: the `count` smallest asks of
    each resource summed (so room below it holds no such choice). DRA device counts are left
    out: queues count them, no node offers them."""
    snap = ssn.snap
    req = np.sort(snap.request[tasks], axis=0)[:count].sum(axis=0) if len(tasks) and count > 0 else \
        np.zeros(snap.request.shape[1], dtype=np.int64)
    if snap.queue_only is not None:
        req[snap.queue_only] = 0
    return req


def free_room(ssn: Session, rows: np.ndarray) -> np.ndarray:
    """The room on `rows` now and once leaving pods go, less what reservations hold."""
    if len(rows) == 0:
        return np.zeros(ssn.snap.allocatable.shape[1], dtype=np.int64)
    free = ssn.snap.allocatable[rows] - ssn.used[rows] + ssn.releasing[rows] - ssn.pipelined[rows]
    return np.maximum(free, 0).sum(axis=0)


def node_free(ssn: Session) -> np.ndarray:
    """`free_room`'s per-node terms for every node: a HyperNode's room is their sum over its rows."""
    snap = ssn.snap
    return np.maximum(snap.allocatable - ssn.used + ssn.releasing - ssn.pipelined, 0)


def dry_run(ssn: Session, j: int, one_task: bool, attempt: Callable, rows: np.ndarray,
            columns: np.ndarray, keep_ready: bool = False) -> tuple[int, int, float, Any] | None:
    """The turn placed within the HyperNode and undone: (outcome, tasks placed, room left as a
    share of the HyperNode's, None), outcome READY, PIPELINED_OUTCOME or 0. Reasons it wrote are
    undone. With `keep_ready`, a READY turn is kept instead: (READY, placed, 0.0, the attempt's
    answer, for the caller to finish)."""
    job = ssn.snap.jobs[j]
    saved = {t: list(ssn.task_reasons[t]) for t in job.tasks.tolist() if t in ssn.task_reasons}
    job_saved = list(ssn.job_reasons.get(j, []))
    tried = attempt(ssn, j, one_task)
    if tried is None:
        return None
    stmt = tried[0]
    if ssn.job_ready_ok(j):
        outcome = READY
    elif ssn.job_pipelined_ok(j):
        outcome = PIPELINED_OUTCOME
    else:
        outcome = 0
    placed = int(ssn.job_ready[j]) + int(ssn.job_pipelined[j])
    if keep_ready and outcome == READY:
        return outcome, placed, 0.0, tried
    left = 0.0
    if outcome:
        total = ssn.snap.allocatable[rows].sum(axis=0)
        room = free_room(ssn, rows)
        left = float(sum(room[c] / total[c] for c in columns.tolist() if total[c] > 0))
    stmt.discard()
    for t in job.tasks.tolist():
        if t in saved:
            ssn.task_reasons[t] = saved[t]
        else:
            ssn.task_reasons.pop(t, None)
    if job_saved:
        ssn.job_reasons[j] = job_saved
    else:
        ssn.job_reasons.pop(j, None)
    return outcome, placed, left, None


def shortage_text(ssn: Session, need: int, need_req: np.ndarray, rooms: list[tuple[str, np.ndarray]],
                  highest: int | None, placed: set[str]) -> str:
    """"gang needs 4 tasks (16 nvidia.com/gpu) within tier 1; the largest tier-1 HyperNode s3 has
    12 free (s1 8, s7 4)": the resource that binds is the one the best HyperNode is shortest of."""
    within = f"tier <= {highest}" if highest is not None else "any tier"
    where = f" holding its placed pods ({len(placed)} node(s))" if placed else ""
    columns = [c for c in np.flatnonzero(need_req > 0).tolist()]
    if not rooms or not columns:
        return (f"gang needs {need} task(s) within one HyperNode of {within}{where}; "
                f"none fits them" if rooms else f"gang needs {need} task(s) within one HyperNode of {within}{where}; "
                f"there is no such HyperNode")

    def shortfall(c: int, room: np.ndarray) -> float:
        return float(room[c]) / float(need_req[c])

    # The binding resource: the one whose best room falls furthest short of the need.
    binding = min(columns, key=lambda c: (max(shortfall(c, r) for _, r in rooms), c))
    ranked = sorted(rooms, key=lambda nr: (-int(nr[1][binding]), nr[0]))
    name, room = ranked[0]
    others = ", ".join(f"{n} {figure(ssn, binding, float(r[binding]))}" for n, r in ranked[1:4])
    resource = ssn.snap.resources[binding]
    text = (f"gang needs {need} task(s), {figure(ssn, binding, float(need_req[binding]))} {resource}, within one "
            f"HyperNode of {within}{where}; the largest, {name}, has {figure(ssn, binding, float(room[binding]))} free")
    if others:
        text += f" ({others}{', ...' if len(ranked) > 4 else ''})"
    return text


def wait(ssn: Session, j: int, text: str) -> bool:
    """The job waits for topology: its reason on the job and on each pending task."""
    reason = d.Reason(d.GANG, text, {"topology": True})
    ssn.attempted.add(j)
    ssn.job_reasons.setdefault(j, []).append(reason)
    for t in ssn.snap.jobs[j].tasks.tolist():
        if ssn.status[t] == PENDING:
            ssn.add_reason(t, reason)
    return False


# --- sub-groups (spec.subGroupPolicy; Volcano's SubJobs) --------------------------------------

def attempt_sub_groups(ssn: Session, j: int, one_task: bool = False, bind: Callable | None = None):
    """Job j's turn sub-group by sub-group, as Volcano's allocateForJob over its SubJobs, within
    the region the HyperNode rule restricts the job to now (a HyperNode, or the whole cluster):
    the sub-groups with pending tasks in order (those needed for each policy's minSubGroups
    first, then those not ready, the highest task priority, the first label value read as a
    number, the policy and values); each placed until it has subGroupSize members, within one
    HyperNode of its own networkTopology (`place_sub_group`), or not at all; a sub-group that
    is ready and still has pending tasks goes back in line and takes one more; the turn ends
    when the job is ready. Returns (statement, runs, placed_any, False) as allocate's attempt_job
    (its finish_job asks whether the job is ready), or None when the job has nothing to place."""
    snap = ssn.snap
    stmt = ssn.new_statement()
    holds = bind(ssn, stmt, j) if bind is not None else 0
    pending = [t for run in ssn.pending_runs(j, skip_zero=True) for t in run]
    if not pending and not holds:
        stmt.discard()
        return None
    ssn.attempted.add(j)
    rule = ssn.hypernode_rule
    region = (rule.hypernode, None if rule.allowed is None else rule.allowed.copy()) if rule is not None else ("", None)
    waiting = set(pending)
    groups = [g for g in snap.sub_groups[j] if any(t in waiting for t in g.tasks.tolist())]
    required = needed_for_minimum(ssn, j)
    line = sorted(groups, key=lambda g: group_key(ssn, g, required))
    placed_any = False
    try:
        while line:
            group = line.pop(0)
            if place_sub_group(ssn, stmt, j, group, region, waiting) == 0:
                continue                      # neither ready nor pipelined: its tasks keep their reasons
            placed_any = True
            if any(ssn.status[t] == PENDING for t in group.tasks.tolist() if t in waiting):
                line.append(group)
                line.sort(key=lambda g: group_key(ssn, g, required))
            if ssn.job_ready_ok(j):
                break
    finally:
        if rule is not None:
            restrict(ssn, j, *region)
    return stmt, [pending], placed_any, False


def group_key(ssn: Session, group: SubGroup, required: set[tuple[int, tuple[str, ...]]]) -> tuple:
    """The order of sub-groups in a turn (Volcano: the minSubGroups set first, then gang's and
    priority's SubJobOrderFn — not ready first, highest priority — then MatchIndex); then the
    policy and values, so that it is total."""
    return ((group.policy, group.values) not in required, sub_group_ready(ssn, group),
            -int(ssn.snap.task_priority[group.tasks].max()), group.match_index, group.policy < 0, group.policy,
            group.values)


def needed_for_minimum(ssn: Session, j: int) -> set[tuple[int, tuple[str, ...]]]:
    """The fewest sub-groups not ready yet, in order, that make each policy's minSubGroups
    (Volcano's requireSubJobs in organizeJobWorksheet)."""
    groups = ssn.snap.sub_groups[j]
    policies = ssn.snap.jobs[j].podgroup.sub_groups
    have = {i: sum(1 for g in groups if g.policy == i and sub_group_ready(ssn, g)) for i in range(len(policies))}
    out: set[tuple[int, tuple[str, ...]]] = set()
    for g in sorted((g for g in groups if g.policy >= 0 and not sub_group_ready(ssn, g)),
                    key=lambda g: group_key(ssn, g, set())):
        if have[g.policy] < policies[g.policy].min_groups:
            out.add((g.policy, g.values))
            have[g.policy] += 1
    return out


def restrict(ssn: Session, j: int, name: str, allowed: np.ndarray | None) -> None:
    """Job j's task classes pass only `allowed` nodes (None: every node)."""
    rule = ssn.hypernode_rule
    classes = frozenset(int(c) for c in ssn.snap.task_class[ssn.snap.jobs[j].tasks].tolist())
    rule.restrict(classes, name if allowed is not None else "", allowed)


def sub_group_levels(ssn: Session, group: SubGroup, region: str, region_allowed: np.ndarray | None,
                     placed: frozenset[str], need: np.ndarray,
                     room: Callable[[Session, np.ndarray], np.ndarray] | None = None,
                     ) -> tuple[list[list[Candidate]] | None, str]:
    """Where the sub-group may go, tightest tier first: lists of (HyperNode, its nodes as an
    allowed mask), each within the region and holding the sub-group's placed pods. Hard: tiers
    up to its highest; soft: every tier, then the region itself; no request: the region. As
    Volcano's isEligibleHyperNode, a hard sub-group with nothing placed yet goes only where the
    room left (once leaving pods go) holds `need`, all its pending tasks together. None and why
    when a hard request names a tier no HyperNode has, or no HyperNode qualifies. `room` (rows ->
    room; default `free_room`): what the evicting actions may count on, the room once victims go."""
    room = room or free_room
    request = group.network_topology
    whole = [[(region, region_allowed)]]
    rule = ssn.hypernode_rule
    tree: Topology | None = ssn.snap.hypernodes
    if request is None or rule is None or tree is None:
        return whole, ""
    highest, said = highest_tier(request, tree)
    if request.hard and highest is None:
        return None, f"sub-group asks for network topology within {said}, which no HyperNode has"
    everything = frozenset(ssn.snap.node_names)
    levels: list[list[Candidate]] = []
    for tier in tree.tiers:
        if request.hard and tier > highest:
            break
        level = []
        for name in tree.by_tier[tier]:
            leaves = tree.leaves.get(name, frozenset())
            if not placed <= leaves:
                continue
            rows = rule.rows(name, leaves)
            if len(rows) == 0 or (region_allowed is not None and not region_allowed[rows].all()):
                continue
            if request.hard and not placed and (room(ssn, rows) < need).any():
                continue
            allowed = np.zeros(ssn.snap.n_nodes, dtype=bool)
            allowed[rows] = True
            level.append((name, allowed))
        if level:
            levels.append(level)
    # The region itself last: for a soft request, and for a hard one whose tier reaches it (the
    # whole cluster is Volcano's virtual HyperNode, one tier above the highest real one).
    region_tier = (tree.hypernodes[region].tier if region in tree.hypernodes
                   else (max(tree.tiers) + 1 if tree.tiers else None))
    region_nodes = (everything if region_allowed is None
                    else frozenset(ssn.snap.node_names[r] for r in np.flatnonzero(region_allowed).tolist()))
    if placed <= region_nodes and (not request.hard or (region_tier is not None and region_tier <= highest)):
        rows = np.flatnonzero(region_allowed) if region_allowed is not None else np.arange(ssn.snap.n_nodes)
        roomy = not (request.hard and not placed and (room(ssn, rows) < need).any())
        if roomy and not any(name == region for level in levels for name, _ in level):
            levels.append([(region, region_allowed)])
    if request.hard and not levels:
        asked = ", ".join(f"{figure(ssn, c, float(need[c]))} {ssn.snap.resources[c]}"
                          for c in np.flatnonzero(need > 0).tolist())
        where = "the cluster" if not region or region == CLUSTER else f"HyperNode {region}"
        return None, (f"no HyperNode of tier <= {highest} within {where} holds "
                      f"{'its placed pods and ' if placed else ''}its pending pods together ({asked})")
    return levels, ""


def place_sub_group(ssn: Session, stmt, j: int, group: SubGroup, region: Candidate,
                    waiting: set[int]) -> int:
    """Place the sub-group's pending tasks until it has subGroupSize members (one task if it
    already has), within the best HyperNode of the tightest tier that holds them (every
    candidate a dry run, as Volcano's allocateForSubJob; the best by the network-topology-aware
    plugin's score, else the most placed then the least room left, then the name). Returns how
    many it placed: 0 when it could end neither ready nor pipelined (its placements undone)."""
    snap = ssn.snap
    placed = required_nodes(ssn, j, group.tasks)
    pending = [t for t in group.tasks.tolist() if t in waiting and ssn.status[t] == PENDING]
    need = snap.request[pending].sum(axis=0) if pending else np.zeros(snap.request.shape[1], dtype=np.int64)
    if snap.queue_only is not None:     # DRA device counts: queues count them, no node offers them
        need[snap.queue_only] = 0
    levels, why = sub_group_levels(ssn, group, region[0], region[1], placed, need)
    if levels is None:
        reason = d.Reason(d.GANG, f"{sub_group_said(ssn, j, group)}: {why}", {"topology": True})
        for t in pending:
            ssn.add_reason(t, reason)
        return 0
    was_ready = sub_group_ready(ssn, group)
    rule = ssn.hypernode_rule
    columns = np.flatnonzero(snap.request[pending].sum(axis=0) > 0) if pending else np.zeros(0, dtype=np.int64)
    for level in levels:
        if len(level) == 1:           # one candidate: no dry run
            name, allowed = level[0]
            if rule is not None:
                restrict(ssn, j, name, allowed)
            count = place_members(ssn, stmt, j, group, pending, was_ready)
            if count:
                return count
            continue
        results = []
        for name, allowed in level:
            restrict(ssn, j, name, allowed)
            saved = {t: list(ssn.task_reasons[t]) for t in pending if t in ssn.task_reasons}
            mark = stmt.mark()
            count = place_members(ssn, stmt, j, group, pending, was_ready)
            left = 0.0
            if count:
                rows = np.flatnonzero(allowed) if allowed is not None else np.arange(snap.n_nodes)
                total = snap.allocatable[rows].sum(axis=0)
                room = free_room(ssn, rows)
                left = float(sum(room[c] / total[c] for c in columns.tolist() if total[c] > 0))
                outcome = READY if sub_group_ready(ssn, group) else PIPELINED_OUTCOME
                results.append((-outcome, -count, left, name, allowed))
            stmt.rollback(mark)
            for t in pending:
                if t in saved:
                    ssn.task_reasons[t] = saved[t]
                else:
                    ssn.task_reasons.pop(t, None)
        if results:
            if ssn.hypernode_order is not None:
                rows_of = {r[3]: (np.flatnonzero(r[4]) if r[4] is not None else np.arange(snap.n_nodes))
                           for r in results}
                scores = ssn.hypernode_order(j, rows_of, group.tasks.tolist())
                best = min(results, key=lambda r: (r[0], -scores[r[3]], r[3]))
            else:
                best = min(results, key=lambda r: r[:4])
            restrict(ssn, j, best[3], best[4])
            return place_members(ssn, stmt, j, group, pending, was_ready)
    short = max(group.size - sub_group_count(ssn, group, True), 1)
    reason = d.Reason(d.GANG, f"{sub_group_said(ssn, j, group)} needs {short} "
                              f"more pod(s) within one HyperNode of its tier; none of "
                              f"{', '.join(n for level in levels for n, _ in level[:4]) or 'them'} fits them",
                      {"topology": True})
    for t in pending:
        ssn.add_reason(t, reason)
    return 0


def sub_group_said(ssn: Session, j: int, group: SubGroup) -> str:
    if group.policy < 0:
        return "the job's pods outside its sub-groups"
    policy = ssn.snap.jobs[j].podgroup.sub_groups[group.policy]
    return f"sub-group {group.name} of subGroupPolicy {policy.name or '#' + str(group.policy)}"


def place_members(ssn: Session, stmt, j: int, group: SubGroup, pending: list[int], was_ready: bool) -> int:
    """Place the sub-group's pending tasks (those still pending, runs of one class at a time)
    until it has subGroupSize members, or one if it `was_ready`. Returns how many were placed;
    when the sub-group ends neither ready nor pipelined, they are undone and 0 is returned."""
    snap = ssn.snap
    queue = snap.jobs[j].queue
    want_total = 1 if was_ready else max(group.size - sub_group_count(ssn, group, False), 1)
    mark = stmt.mark()
    runs: list[list[int]] = []
    for t in pending:
        if ssn.status[t] != PENDING:
            continue
        if runs and snap.task_class[runs[-1][0]] == snap.task_class[t]:
            runs[-1].append(t)
        else:
            runs.append([t])
    placed = 0
    for run in runs:
        want = min(len(run), want_total - placed)
        limit, queue_reason = ssn.allocatable_count(queue, snap.request[run[0]], want)
        n = place_run(ssn, stmt, run, limit) if limit > 0 else 0
        placed += n
        if n < want:
            rest = run[n:]
            reason = queue_reason if n >= limit and queue_reason is not None else failure_reason(ssn, rest[0])
            for t in rest:
                ssn.add_reason(t, reason)
        if placed >= want_total:
            break
    if placed and not (sub_group_ready(ssn, group) or sub_group_ready(ssn, group, pipelined=True)):
        stmt.rollback(mark)
        return 0
    return placed
