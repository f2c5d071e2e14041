"""task-topology: a job's tasks placed by their affinity to each other, as Volcano's plugin of that
name (v1.14.1 pkg/scheduler/plugins/task-topology; design docs/design/task-topology-scheduling.md,
"Bucket: Task Affinity/Anti-Affinity within Job").

A job asks it with PodGroup annotations (Volcano's job controller copies a Job's annotations to
the PodGroup it creates; a task's name is its pod's `volcano.sh/task-spec` annotation):
- `volcano.sh/task-topology-affinity: "ps,worker;ps,evaluator"`: groups separated by `;`, task
  names by `,`; tasks of one group are best on the same node (a group of one task: its pods
  together);
- `volcano.sh/task-topology-anti-affinity: "ps;worker,chief"`: the same, best on different nodes;
- `volcano.sh/task-topology-task-order: "ps,worker"`: tasks listed first are placed first.
Every name must be a task of the job, and no group may name a task twice; otherwise the job
waits with a reason naming the annotation (Volcano logs it and places the job without the plugin),
while the plugin's task_order or node_order is on.

As Volcano's, at session open, for each job with pending tasks and annotations:
- its tasks named in an affinity or anti-affinity group are put in buckets: tasks on a node
  first (one bucket per node, nodes by name), then pending ones in task order (user order, then
  the strongest relation: self anti-affinity 4, affinity 3, self affinity 2, anti-affinity 1,
  then pod name), each into the bucket whose tasks it likes best (affinities count +1, anti
  -1 per task), ties to the bucket asking fewer resources (1 CPU = 1 Gi = 1 device), or a new
  bucket when the best is negative;
- task_order: tasks in a bucket before those in none; within the job the bucket with the most
  pending tasks first, then the older bucket; within a bucket user order, then relation;
- node_order: for a task on node n: 0 when the task does not fit n's idle and releasing room;
  else its bucket's tasks on n, minus the tasks of the job placed on n it is anti-affine to,
  plus its bucket's pending tasks, minus one for each of them that must be left out for the
  bucket's pending request to fit n; times `weight`, times 100 over the largest bucket.
Stateful within the cycle: each placement moves its task out of its bucket's pending tasks and
onto the node, and counts it on the node for anti-affinity (Volcano's AllocateFunc).

Deliberate differences (runtime/README.md): Volcano takes bucket tasks out "randomly (by map)"
when the bucket does not fit a node; here the last in bucket order first (the scored task's
class-mates last). A placement undone (a statement discarded, a gang rolled back) is undone
here too (Volcano registers no DeallocateFunc, so its buckets keep it). The job's tasks already
running count for anti-affinity on their nodes (Volcano counts only this cycle's placements, so
a restarted `ps` could land beside its running sibling)."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import ge, le
from typing import Iterable, Mapping

import numpy as np

from runtime.cluster import decisions as d
from runtime.cluster.model import TASK_SPEC_ANNOTATION
from runtime.engine.extension import StatefulRule
from runtime.engine.kernels.codes import ALLOCATED, BOUND, HELD, PENDING, PIPELINED
from runtime.engine.plugins.base import Plugin

AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"
MAX_NODE_SCORE = 100.0
SCALAR_NODES = 16         # a score on at most this many nodes is worked out without array calls
# Volcano's affinityPriority: the larger, the earlier a task is placed and bucketed.
SELF_ANTI_AFFINITY, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI_AFFINITY = 4, 3, 2, 1
WAITING = (PENDING, HELD)
# Tasks of the job on a node that count for anti-affinity at session open (not leaving, not done).
HOLDING = (ALLOCATED, PIPELINED, BOUND)


@dataclass(frozen=True)
class TaskTopology:
    """A job's annotations split as Volcano's readTopologyFromPgAnnotations does (None: absent)."""

    affinity: tuple[tuple[str, ...], ...] | None = None
    anti_affinity: tuple[tuple[str, ...], ...] | None = None
    task_order: tuple[str, ...] | None = None


def _groups_problem(groups: Iterable[Iterable[str]], roles: set[str]) -> str | None:
    """Volcano's affinityCheck: every non-empty name a task of the job, none twice in a group."""
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in roles:
                known = ", ".join(f"`{r}`" for r in sorted(roles) if r) or "none"
                return f"task `{name}` is not a task of the job (its tasks: {known})"
            if name in seen:
                return f"task `{name}` is named twice in one group"
            seen.add(name)
    return None


def read_topology(annotations: Mapping[str, str], roles: Iterable[str],
                  where: str = "PodGroup") -> tuple[TaskTopology | None, str | None]:
    """(topology, problem) from a PodGroup's task-topology annotations; `roles`: the job's task
    names (each pod's volcano.sh/task-spec annotation, else label); `where` names the PodGroup in a
    problem. No annotation: (None, None)."""
    if not any(k in annotations for k in (AFFINITY, ANTI_AFFINITY, TASK_ORDER)):
        return None, None
    known = set(roles)
    parts: dict[str, object] = {}
    for key in (AFFINITY, ANTI_AFFINITY):
        if key in annotations:
            groups = tuple(tuple(s.split(",")) for s in annotations[key].split(";"))
            problem = _groups_problem(groups, known)
            if problem:
                return None, f"{where} annotation {key} `{annotations[key]}`: {problem}"
            parts[key] = groups
    if TASK_ORDER in annotations:
        order = tuple(annotations[TASK_ORDER].split(","))
        problem = _groups_problem([order], known)
        if problem:
            return None, f"{where} annotation {TASK_ORDER} `{annotations[TASK_ORDER]}`: {problem}"
        parts[TASK_ORDER] = order
    return TaskTopology(parts.get(AFFINITY), parts.get(ANTI_AFFINITY), parts.get(TASK_ORDER)), None  # type: ignore[arg-type]


@dataclass
class Bucket:
    """Tasks that like each other: the pending ones (in bucket order; `pending[t]` False once
    placed), their summed request and score, and the bucket's tasks per node."""

    index: int
    order: list[int] = field(default_factory=list)     # pending tasks when built, in bucket order
    pending: dict[int, bool] = field(default_factory=dict)
    names: dict[str, int] = field(default_factory=dict)   # task name -> tasks of it in the bucket
    request: np.ndarray | None = None
    req_score: float = 0.0
    bound: int = 0
    node: dict[int, int] = field(default_factory=dict)
    version: int = 0        # bumped when `pending` and `request` change (BucketScore.steps)

    @property
    def n_pending(self) -> int:
        return sum(self.pending.values())


def request_score(row: np.ndarray, resources: tuple[str, ...]) -> float:
    """Volcano's Bucket.CalcResReq score: milli-CPU + memory in MiB + each other resource in
    milli-units (1 CPU, 1 Gi and 1 device weigh about alike); pods are no resource there."""
    total = 0.0
    for value, name in zip(row.tolist(), resources):
        if not value or name == "pods":
            continue
        total += value if name == "cpu" else value / 1024 / 1024 if name == "memory" else value * 1000.0
    return total


class JobBuckets:
    """One job's relations and buckets (Volcano's JobManager)."""

    def __init__(self, topology: TaskTopology):
        self.inter_affinity: dict[str, set[str]] = {}
        self.self_affinity: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.priority: dict[str, int] = {}
        self.user_order: dict[str, int] = {}
        for groups, inter, self_set, one, many in (
                (topology.affinity, self.inter_affinity, self.self_affinity, SELF_AFFINITY, INTER_AFFINITY),
                (topology.anti_affinity, self.inter_anti, self.self_anti, SELF_ANTI_AFFINITY, INTER_ANTI_AFFINITY)):
            for group in groups or ():
                if len(group) == 1:
                    self_set.add(group[0])
                    self._mark(group[0], one)
                    continue
                for i, src in enumerate(group):
                    for dst in group[:i]:
                        inter.setdefault(src, set()).add(dst)
                        inter.setdefault(dst, set()).add(src)
                    self._mark(src, many)
        order = topology.task_order or ()
        for i, name in enumerate(order):
            self.user_order[name] = len(order) - i
        self.buckets: list[Bucket] = []
        self.bucket_of: dict[int, int] = {}       # task -> bucket index (tasks in a bucket only)
        self.name_of: dict[int, str] = {}         # task -> task name (tasks of the job with one)
        self.bucket_max = 0
        self.on_node: dict[int, dict[str, int]] = {}   # node -> task name -> tasks of the job there

    def _mark(self, name: str, priority: int) -> None:
        if priority > self.priority.get(name, 0):
            self.priority[name] = priority

    def rank(self, name: str) -> tuple[int, int]:
        """Larger first: the user's order, then the strongest relation (taskAffinityOrder)."""
        return self.user_order.get(name, 0), self.priority.get(name, 0)

    def affinity(self, name: str, counts: Mapping[str, int], only_anti: bool) -> int:
        """Volcano's checkTaskSetAffinity: +count per liked task, -count per disliked one."""
        total = 0
        if not name:
            return total
        for other, count in counts.items():
            same = other == name
            if not only_anti and (name in self.self_affinity if same else other in self.inter_affinity.get(name, ())):
                total += count
            if name in self.self_anti if same else other in self.inter_anti.get(name, ()):
                total -= count
        return total

    def build(self, tasks: list[int], names: list[str], waiting: list[bool], nodes: list[int],
              node_names: list[str], pod_names: list[str], request: np.ndarray, resources: tuple[str, ...]) -> None:
        """Buckets of the job's tasks (Volcano's ConstructBucket): `waiting[i]` task i is pending,
        else on node `nodes[i]`; tasks whose name no relation names are in no bucket."""
        members = [i for i, name in enumerate(names) if name and name in self.priority]
        for i, name in enumerate(names):
            if name:
                self.name_of[tasks[i]] = name
        # Bound first, by node name; then pending, larger rank first, then pod name.
        members.sort(key=lambda i: (0, node_names[nodes[i]], "") if not waiting[i] else
                     (1, tuple(-x for x in self.rank(names[i])), pod_names[i]))
        by_node: dict[int, Bucket] = {}
        for i in members:
            t, name = tasks[i], names[i]
            selected: Bucket | None = None
            best = -(2 ** 31)
            if not waiting[i]:
                best = 0
                selected = by_node.get(nodes[i])
            else:
                for bucket in self.buckets:
                    score = self.affinity(name, bucket.names, False)
                    if score > best:
                        best, selected = score, bucket
                    elif score == best and selected is not None and bucket.req_score < selected.req_score:
                        selected = bucket
            if best < 0 or selected is None:
                selected = Bucket(len(self.buckets), request=np.zeros(request.shape[1], dtype=np.int64))
                self.buckets.append(selected)
                if not waiting[i]:
                    by_node[nodes[i]] = selected
            self.bucket_of[t] = selected.index
            selected.names[name] = selected.names.get(name, 0) + 1
            if not waiting[i]:
                selected.node[nodes[i]] = selected.node.get(nodes[i], 0) + 1
                selected.bound += 1
            else:
                selected.order.append(t)
                selected.pending[t] = True
                selected.request += request[t]
                selected.req_score += request_score(request[t], resources)
            self.bucket_max = max(self.bucket_max, len(selected.order) + selected.bound)

    def count_on_node(self, t: int, node: int, sign: int) -> None:
        name = self.name_of.get(t)
        if name:
            counts = self.on_node.setdefault(node, {})
            counts[name] = counts.get(name, 0) + sign

    def bucket(self, t: int) -> Bucket | None:
        b = self.bucket_of.get(t)
        return self.buckets[b] if b is not None else None


def job_buckets(podgroup, tasks: np.ndarray, pods: list, status: np.ndarray, task_node: np.ndarray,
                node_names: list[str], request: np.ndarray,
                resources: tuple[str, ...]) -> tuple[JobBuckets | None, str | None]:
    """(buckets, problem) of one job: None, None when it asks nothing or has no pending task."""
    pairs = dict(podgroup.task_topology) if podgroup is not None else {}
    rows = tasks.tolist()
    if not pairs or not any(int(status[t]) in WAITING for t in rows):
        return None, None
    topology, problem = read_topology(pairs, [pods[t].task_role for t in rows], f"PodGroup {podgroup.key}")
    if topology is None:
        return None, problem
    jb = JobBuckets(topology)
    keep = [t for t in rows if int(status[t]) in WAITING or int(task_node[t]) >= 0]
    jb.build(keep, [pods[t].annotations.get(TASK_SPEC_ANNOTATION, "") for t in keep],
             [int(status[t]) in WAITING for t in keep], [int(task_node[t]) for t in keep], node_names,
             [pods[t].name for t in keep], request, resources)
    for t in rows:
        if int(status[t]) in HOLDING and int(task_node[t]) >= 0:
            jb.count_on_node(t, int(task_node[t]), 1)
    return jb, None


def topology_class_keys(plain: np.ndarray, class_keys: dict | None, jobs: list, task_job: np.ndarray,
                        pods: list, status: np.ndarray, task_node: np.ndarray, node_names: list[str],
                        request: np.ndarray, resources: tuple[str, ...]) -> tuple[np.ndarray, dict | None]:
    """(plain, class keys) that also tell apart pending tasks of different buckets or task names
    (their node scores differ); other tasks keep their keys."""
    out = dict(class_keys) if class_keys else {}
    plain = plain.copy()
    changed = False
    for job in jobs:
        if job.podgroup is None or not job.podgroup.task_topology or not len(job.tasks):
            continue
        jb, _ = job_buckets(job.podgroup, job.tasks, pods, status, task_node, node_names, request, resources)
        if jb is None:
            continue
        for bucket in jb.buckets:
            for t in bucket.order:
                if int(status[t]) != PENDING:
                    continue        # held: never placed, and its class is not the bucket's
                plain[t] = False
                out[t] = (out.get(t), "task-topology", job.index, bucket.index, jb.name_of[t])
                changed = True
    return (plain, out) if changed else (plain, class_keys)


class BucketScore(StatefulRule):
    """The node score of tasks in buckets (Volcano's calcBucketScore and NodeOrderFn)."""

    name = "task-topology"

    def __init__(self, ssn, managers: dict[int, JobBuckets], weight: float):
        self.ssn = ssn
        snap = ssn.snap
        self.managers = managers
        self.weight = weight
        # class -> (job, bucket index, task name); a class never spans two (topology_class_keys).
        self.of_class: dict[int, tuple[int, int, str]] = {}
        self.classes_of_bucket: dict[tuple[int, int], set[int]] = {}
        self.classes_of_job: dict[int, set[int]] = {}
        # A placement anywhere changes its node's room, and so these classes' score there: only
        # classes scored already (their placement exists) and with tasks still waiting are told.
        self.waiting: dict[int, int] = {}
        self.scored: set[int] = set()
        self.live: set[int] = set()
        self.task_class: list[int] = snap.task_class.tolist()    # fixed for the session
        status = snap.status.tolist()
        for j, jb in managers.items():
            for bucket in jb.buckets:
                for t in bucket.order:
                    if status[t] != PENDING:
                        continue    # held: its class is no bucket's (topology_class_keys)
                    cid = self.task_class[t]
                    self.of_class[cid] = (j, bucket.index, jb.name_of[t])
                    self.classes_of_bucket.setdefault((j, bucket.index), set()).add(cid)
                    self.classes_of_job.setdefault(j, set()).add(cid)
                    self.waiting[cid] = self.waiting.get(cid, 0) + 1
        # Volcano compares Idle + Releasing: every resource but the pod count and per-card columns.
        self.class_request: dict[int, np.ndarray] = {}
        self.kept_steps: dict[int, tuple[int, tuple]] = {}
        self.bucket_least: dict[tuple[int, int], np.ndarray] = {}
        self.free: np.ndarray | None = None     # room per node in `columns` (`room`)
        self.free_seen = 0
        self.columns = np.array([name != "pods" and not managed for name, managed
                                 in zip(snap.resources, snap.device_managed.tolist())], dtype=bool)

    def request_of(self, cid: int) -> np.ndarray:
        """Class cid's request in the compared columns (cached: a class's request never changes)."""
        req = self.class_request.get(cid)
        if req is None:
            req = self.class_request[cid] = np.asarray(self.ssn.snap.classes[cid].request, dtype=np.int64)[self.columns]
        return req

    def smallest_request(self, j: int, b: int, classes: Iterable[int]) -> np.ndarray:
        """The least of each compared column over the requests of bucket (j, b)'s classes: a node
        short of it scores 0 for every one of them."""
        least = self.bucket_least.get((j, b))
        if least is None:
            rows = [self.request_of(cid) for cid in classes]
            least = self.bucket_least[(j, b)] = (np.min(rows, axis=0) if rows else
                                                 np.zeros(int(self.columns.sum()), dtype=np.int64))
        return least

    def scores(self, cid: int) -> bool:
        return cid in self.of_class and self.weight != 0

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        """Volcano's score less a constant of the class (its bucket's tasks placed this cycle, by
        unit, on every node the task fits): the same choices, and a placement from a bucket then
        re-scores only the nodes the bucket did not fit whole (`moved`), not every node."""
        return self.volcano_score(cid, nodes, offset=True)

    def room(self, nodes: np.ndarray | None) -> np.ndarray:
        """Idle + releasing room in the compared columns on `nodes` (all when None), kept for every
        node and brought up to date from the ledger's log of nodes whose room changed since."""
        ssn = self.ssn
        logged = ssn.ledger.log_n
        if self.free is None:
            snap = ssn.snap
            self.free = (snap.allocatable - ssn.used + ssn.releasing - ssn.pipelined)[:, self.columns]
        elif logged > self.free_seen:
            snap = ssn.snap
            rows = ssn.ledger.log_since(self.free_seen)    # a node logged twice gets the same row twice
            self.free[rows] = (snap.allocatable[rows] - ssn.used[rows] + ssn.releasing[rows]
                               - ssn.pipelined[rows])[:, self.columns]
        self.free_seen = logged
        return self.free if nodes is None else self.free[nodes]

    def steps(self, cid: int, bucket: Bucket) -> tuple[int, int, list[list[int]]]:
        """(pending tasks, others, left) of class cid's task in `bucket`: `left[k]` the
        bucket's pending request in the compared columns after k others are taken out, from the last
        in bucket order (the scored task is its class's last). Kept until the bucket changes."""
        kept = self.kept_steps.get(cid)
        if kept is not None and kept[0] == bucket.version:
            return kept[1]
        snap, cols = self.ssn.snap, self.columns
        pending = [t for t in bucket.order if bucket.pending[t]]
        others = list(reversed(pending))
        task_class = self.task_class
        mine = next((i for i, t in enumerate(others) if task_class[t] == cid), None)
        if mine is not None:
            del others[mine]
        # Plain integers (a bucket has a few tasks): left[0] the whole request, then each taken out.
        row = bucket.request[cols].tolist()
        left = [row]
        for ask in (snap.request[others][:, cols].tolist() if others else ()):
            row = [x - a for x, a in zip(row, ask)]
            left.append(row)
        answer = (len(pending), len(others), left)
        self.kept_steps[cid] = (bucket.version, answer)
        return answer

    def volcano_score(self, cid: int, nodes: np.ndarray | None, offset: bool = False) -> np.ndarray:
        """Volcano's NodeOrderFn of class cid's tasks on `nodes` (all when None)."""
        snap = self.ssn.snap
        j, b, name = self.of_class[cid]
        if cid not in self.scored:
            self.scored.add(cid)
            if self.waiting.get(cid, 0) > 0:
                self.live.add(cid)
        jb = self.managers[j]
        bucket = jb.buckets[b]
        free = self.room(nodes)
        req = self.request_of(cid)
        n_pending, n_others, steps_left = self.steps(cid, bucket)
        constant = len(bucket.order) if offset else n_pending
        # Per node: the bucket's tasks there, less the job's tasks there the class is anti-affine to.
        extra: dict[int, int] = dict(bucket.node)
        for n, counts in jb.on_node.items():
            extra[n] = extra.get(n, 0) + min(0, jb.affinity(name, counts, True))
        scale = MAX_NODE_SCORE / jb.bucket_max if jb.bucket_max else None
        if nodes is not None and len(nodes) <= SCALAR_NODES:
            # A few nodes (a placement's): plain numbers, the same sums in the same order.
            weight, need = self.weight, req.tolist()
            out = np.zeros(len(nodes), dtype=np.float64)
            for i, (n, room) in enumerate(zip(nodes.tolist(), free.tolist())):
                if not all(map(ge, room, need)):
                    continue
                taken = next((k for k, row in enumerate(steps_left) if all(map(le, row, room))), n_others)
                value = float(constant + extra.get(n, 0) - taken) * weight
                out[i] = value * scale if scale is not None else value
            return out
        rows = np.arange(snap.n_nodes) if nodes is None else nodes
        fits = (free >= req).all(axis=1)
        full = np.full(snap.n_nodes, float(constant), dtype=np.float64)
        if extra:
            full[np.fromiter(extra.keys(), dtype=np.int64, count=len(extra))] += np.fromiter(
                extra.values(), dtype=np.float64, count=len(extra))
        out = full[rows]
        # Nothing taken out where the whole pending request fits; elsewhere the first count that fits.
        left = np.array(steps_left, dtype=np.int64)     # (k+1, R): after 0..k taken out
        short = np.flatnonzero(fits & ~(left[0] <= free).all(axis=1))
        if len(short):
            ok = (left[None, :, :] <= free[short][:, None, :]).all(axis=2)   # (short nodes, k+1)
            out[short] -= np.where(ok.any(axis=1), ok.argmax(axis=1), n_others)
        out *= self.weight
        if scale is not None:
            out *= scale
        return np.where(fits, out, 0.0)

    def room_changed(self, node: int) -> np.ndarray:
        at = np.array([node], dtype=np.int64)
        for cid in self.live:
            self.ssn.mark_dirty(cid, at)
        return at

    def moved(self, t: int, node: int, sign: int) -> None:
        ssn = self.ssn
        cid = self.task_class[t]
        if cid in self.waiting:
            self.waiting[cid] -= sign
            if self.waiting[cid] > 0 and cid in self.scored:
                if cid not in self.live:        # back from done (undone): rooms changed meanwhile
                    self.live.add(cid)
                    ssn.mark_dirty(cid, None)
            else:
                self.live.discard(cid)
        at = self.room_changed(node)
        j = int(ssn.snap.task_job[t])
        jb = self.managers.get(j)
        if jb is None:
            return
        jb.count_on_node(t, node, sign)
        # Only classes still to place are told: one not scored yet is scored whole at its first
        # use, one done is marked whole if a task of it comes back (above).
        live = self.live
        for cid in self.classes_of_job.get(j, ()):
            if cid in live:
                ssn.mark_dirty(cid, at)
        bucket = jb.bucket(t)
        if bucket is None or t not in bucket.pending:
            return
        if bucket.pending[t] is (sign < 0):
            return      # told twice (never expected): the counts stay as they are
        # The nodes where the bucket's pending request, before or after, does not fit whole: there
        # the tasks taken out change; elsewhere only the pending count, a constant `score` leaves out.
        snap, cols = ssn.snap, self.columns
        classes = self.classes_of_bucket.get((j, bucket.index), ())
        told = [cid for cid in classes if cid in live]
        if told:
            larger = bucket.request if sign > 0 else bucket.request + snap.request[t]
            free = self.room(None)
            smallest = self.smallest_request(j, bucket.index, classes)
            over = np.flatnonzero((free >= smallest).all(axis=1) & ~(larger[cols] <= free).all(axis=1))
            free_over = free[over]
        if sign > 0:
            bucket.pending[t] = False
            bucket.version += 1
            bucket.request -= ssn.snap.request[t]
        else:
            bucket.pending[t] = True
            bucket.version += 1
            bucket.request += ssn.snap.request[t]
        bucket.node[node] = bucket.node.get(node, 0) + sign
        bucket.bound += sign
        # A class scores 0 wherever its own request does not fit (rooms elsewhere are unchanged,
        # and a room's change marks its node), so only the nodes of `over` it fits can move.
        for cid in told:
            fitting = over[(free_over >= self.request_of(cid)).all(axis=1)]
            if len(fitting):
                ssn.mark_dirty(cid, fitting)

    def placed(self, t: int, node: int) -> None:
        self.moved(t, node, 1)

    def unplaced(self, t: int, node: int) -> None:
        self.moved(t, node, -1)

    def evicted(self, t: int, node: int) -> None:
        self.room_changed(node)     # its releasing room changed

    def unevicted(self, t: int, node: int) -> None:
        self.evicted(t, node)


class TaskTopologyPlugin(Plugin):
    name = "task-topology"
    answers = frozenset({"task_order", "node_order", "job_valid"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        managers: dict[int, JobBuckets] = {}
        problems: dict[int, str] = {}
        for job in snap.jobs:
            if job.podgroup is None or not job.podgroup.task_topology or not len(job.tasks):
                continue
            jb, problem = job_buckets(job.podgroup, job.tasks, snap.pods, snap.status, snap.task_node,
                                      snap.node_names, snap.request, snap.resources)
            if jb is not None:
                managers[job.index] = jb
            elif problem:
                problems[job.index] = problem
        weight = float(self.spec.weight if self.spec.weight is not None else 1.0)
        self.managers = managers
        out_of_bucket = (1, 0, 0, 0, 0)

        def task_order(t: int) -> tuple:
            jb = managers.get(int(snap.task_job[t]))
            bucket = jb.bucket(t) if jb is not None else None
            if bucket is None:
                return out_of_bucket
            user, relation = jb.rank(jb.name_of[t])
            return 0, -bucket.n_pending, bucket.index, -user, -relation

        def valid(j: int) -> d.Reason | None:
            problem = problems.get(j)
            return d.Reason(d.JOB, problem + "; the task-topology plugin cannot place the job by it") \
                if problem else None

        if managers:
            self.register(ssn, "task_order", task_order)
            self.register(ssn, "node_order", BucketScore(ssn, managers, weight))
        # A job is held for its annotations only while the plugin reads them for something.
        if problems and (self.spec.enabled("task_order") or self.spec.enabled("node_order")):
            self.register(ssn, "job_valid", valid)


PLUGIN = TaskTopologyPlugin
