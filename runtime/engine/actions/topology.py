"""allocate for a job that asks for network topology (a PodGroup's `spec.networkTopology`,
Volcano's HyperNodes): the job's turn is placed within ONE HyperNode.

As Volcano's allocate (`allocateForJob`): tiers are tried tightest first (tier 1, 2, ... up to
`highestTierAllowed`, or the tier of the HyperNodes whose `tierName` is `highestTierName`;
default 1); within a tier every HyperNode is a dry run (the turn placed with the job's classes
restricted to the HyperNode's nodes by rules/hypernodes.py, its statement discarded), and the
best is placed for real. As Volcano, the best is the one the network-topology-aware plugin scores
highest (`Session.hypernode_order`, plugins/network_topology.py) when the policy enables it, a
ready gang before a pipelined one and ties by name. Without the plugin (Volcano then has no score
and takes the first candidate), a documented stand-in rule, deterministic: a ready gang before a
pipelined one, then the most of the job's tasks placed, then the least free room left in the
HyperNode for the resources the job requests (binpack: whole HyperNodes stay free for other
gangs), then the name.
A job with pods already placed (elastic, reserved, or after a restart) is tried only in the
HyperNodes that hold them all (their lowest common HyperNode and its ancestors).

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

from typing import Callable

import numpy as np

from runtime.cluster import decisions as d
from runtime.cluster.model import NetworkTopology
from runtime.cluster.topology import Topology
from runtime.engine.queueshare import figure
from runtime.engine.session import Session
from runtime.engine.snapshot import PENDING, PIPELINED, READY_STATUSES

READY, PIPELINED_OUTCOME = 2, 1
CLUSTER = "<cluster>"       # Volcano's ClusterTopHyperNode: every node, above the highest tier


def highest_tier(request: NetworkTopology, tree: Topology) -> tuple[int | None, str]:
    """The highest tier the job may span (None: no HyperNode has the named tier), and how to say it."""
    if request.highest_tier_name is not None:
        tiers = sorted({h.tier for h in tree.hypernodes.values() if h.tier_name == request.highest_tier_name})
        return (tiers[0] if tiers else None), f"tier {request.highest_tier_name!r}"
    if request.highest_tier is not None:
        return request.highest_tier, f"tier {request.highest_tier}"
    return 1, "tier 1"


def allocate_within(ssn: Session, j: int, one_task: bool, attempt: Callable, finish: Callable) -> bool:
    snap = ssn.snap
    job = snap.jobs[j]
    request: NetworkTopology = job.podgroup.network_topology
    tree: Topology = snap.hypernodes
    rule = ssn.hypernode_rule
    if tree.blocking:
        at_fault = sorted({h for p in tree.blocking for h in p.hypernodes})
        return wait(ssn, j, f"HyperNodes are not ready for topology-aware placement "
                            f"({'; '.join(str(p) for p in tree.blocking)}): HyperNodes at fault: {', '.join(at_fault)}")
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
    settled = [t for t in job.tasks.tolist() if ssn.status[t] in (*READY_STATUSES, PIPELINED) and ssn.task_node[t] >= 0]
    placed_names = {snap.node_names[int(ssn.task_node[t])] for t in settled}
    need, need_req = gang_need(ssn, j)
    columns = np.flatnonzero(need_req > 0)
    rooms: list[tuple[str, np.ndarray]] = []          # the HyperNodes the search looked at, with their room
    everything = frozenset(snap.node_names)
    try:
        for _, names in levels:
            results = []
            for name in names:
                leaves = everything if name == CLUSTER else tree.leaves.get(name, frozenset())
                if not placed_names <= leaves:
                    continue
                rows = rule.rows(name, leaves)
                room = free_room(ssn, rows)
                rooms.append((name, room))
                if len(rows) == 0 or (room[columns] < need_req[columns]).any():
                    continue                  # cannot hold the gang whatever the order: no dry run
                allowed = np.zeros(snap.n_nodes, dtype=bool)
                allowed[rows] = True
                rule.restrict(classes, name, allowed)
                outcome = dry_run(ssn, j, one_task, attempt, rows, columns)
                if outcome is None:
                    return False              # nothing to place
                if outcome[0]:
                    results.append((-outcome[0], -outcome[1], outcome[2], name, allowed, rows))
            if results:
                if ssn.hypernode_order is not None:
                    # The network-topology-aware plugin's score, as Volcano's selectBestHyperNode;
                    # a ready gang still before a pipelined one, ties by name.
                    scores = ssn.hypernode_order(j, {r[3]: r[5] for r in results})
                    key = lambda r: (r[0], -scores[r[3]], r[3])      # noqa: E731
                else:
                    key = lambda r: r[:4]                           # noqa: E731
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


def gang_need(ssn: Session, j: int) -> tuple[int, np.ndarray]:
    """How many more tasks the gang needs placed (at least one), and what the first of its pending
    tasks that many request together."""
    job = ssn.snap.jobs[j]
    have = int(ssn.job_ready[j]) + int(ssn.job_pipelined[j])
    need = max(job.min_member - have, 1)
    pending = [t for t in job.tasks.tolist() if ssn.status[t] == PENDING][:need]
    req = ssn.snap.request[pending].sum(axis=0) if pending else np.zeros(ssn.snap.request.shape[1], dtype=np.int64)
    return len(pending) or need, req


def free_room(ssn: Session, rows: np.ndarray) -> np.ndarray:
    """The room on `rows` now and once leaving pods go, less what reservations hold."""
    if len(rows) == 0:
        return np.zeros(ssn.snap.allocatable.shape[1], dtype=np.int64)
    free = ssn.snap.allocatable[rows] - ssn.used[rows] + ssn.releasing[rows] - ssn.pipelined[rows]
    return np.maximum(free, 0).sum(axis=0)


def dry_run(ssn: Session, j: int, one_task: bool, attempt: Callable, rows: np.ndarray,
            columns: np.ndarray) -> tuple[int, int, float] | None:
    """The turn placed within the HyperNode and undone: (outcome, tasks placed, room left as a
    share of the HyperNode's), outcome READY, PIPELINED_OUTCOME or 0. Reasons it wrote are undone."""
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
    return outcome, placed, left


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
