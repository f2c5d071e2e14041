"""What the running scheduler saw and decided in its last cycle, kept for the read-only views:
live explain, the queue visibility API, the dashboard and the Volcano-named metrics.

    view = LiveView()                       # Scheduler(..., view=view) records into it
    last = view.last                        # a CycleView, or None before the first cycle
    last.queues                             # QueueRow per queue, parents first
    last.pending["team-a"]                  # PendingJob per waiting job, in job order
    last.explain("ns/pod")                  # runtime.engine.explanation.Explanation

Cheap while the scheduler runs at full speed: a cycle hands over what it computed anyway (the
state it snapshotted, its Decisions, the session's queue arrays) and the few figures the views
need are taken from the session before it closes (queue rows, pending order, PodGroups per
phase: O(queues + jobs + PodGroups)), by one cycle a second at most (the scheduler's
FACTS_EVERY_S; `figuresCycle` in the documents names it). The reasons are each cycle's own.
Everything per pod (the reasons index, explanations, node utilization) is worked out only
when somebody asks, once per cycle at most. Memory is bounded: one cycle is kept (the
next replaces it), the per-pod reasons index holds at most MAX_EXPLAINED_PODS pods, each
queue's pending list at most MAX_PENDING_PER_QUEUE jobs, and the history a fixed ring of
samples (HISTORY_SAMPLES, one every HISTORY_EVERY_S: the last hour).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from compiler.quantities import format_base_units, readable_base_units
from runtime.cluster import decisions as d
from runtime.cluster.model import PG_PENDING, ClusterState, group_key_of
from runtime.cluster.topology import Span, Topology, room_by_hypernode, span_of
from runtime.engine.explanation import explain_group, explain_pod, names_by_namespace, resolve_target
from runtime.engine.fragmentation import card_fragmentation, node_fragmentation
from runtime.engine.queueshare import real_capability
from runtime.engine.queueshare import share as queue_share
from runtime.engine.session import Options
from runtime.engine.snapshot import PENDING, UNLIMITED

MAX_SPANS = 10_000                 # running gangs whose span the topology view lists (the count is exact)
MAX_EXPLAINED_PODS = 50_000        # waiting pods whose reasons are indexed for explain
MAX_PENDING_PER_QUEUE = 1_000      # pending jobs listed per queue (the count is always exact)
HISTORY_EVERY_S = 10.0             # one sample of shares and waiting jobs this often
HISTORY_SAMPLES = 360              # an hour of them
RELOADS_KEPT = 20                  # policy revisions remembered for the dashboard


@dataclass(frozen=True)
class QueueRow:
    """One queue after a cycle, in base units (millicores, bytes, device units) per resource.
    `capability` leaves out resources it does not cap; `deserved` and `borrowed` are None
    when no plugin of the policy computes deserved shares (proportion, capacity, drf's hdrf).
    `borrowed` is what it holds beyond its deserved share: the room reclaim may take back."""

    name: str
    parent: str | None
    depth: int
    weight: int
    priority: int
    open: bool
    reclaimable: bool
    declared_in_policy: bool
    allocated: Mapping[str, int]
    request: Mapping[str, int]     # what its jobs ask for, placed or not (Volcano's queue request)
    deserved: Mapping[str, float] | None
    guarantee: Mapping[str, int]
    capability: Mapping[str, int]
    real_capability: Mapping[str, int]   # capability within the parent's, less the siblings' guarantees
    overused: bool
    borrowed: Mapping[str, float] | None
    share: float | None
    pending_jobs: int              # jobs with a pod waiting, or not admitted yet
    unschedulable_jobs: int        # of those, the ones the cycle tried or knows a reason for
    waiting_pods: int
    podgroups: Mapping[str, int]   # PodGroups per phase

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "parent": self.parent, "depth": self.depth, "weight": self.weight,
                "priority": self.priority, "state": "Open" if self.open else "Closed",
                "reclaimable": self.reclaimable, "declaredInPolicy": self.declared_in_policy,
                "allocated": _quantities(self.allocated), "request": _quantities(self.request),
                "deserved": _quantities(self.deserved), "guarantee": _quantities(self.guarantee),
                "capability": _quantities(self.capability), "realCapability": _quantities(self.real_capability),
                "overused": self.overused,
                "borrowed": _quantities(self.borrowed), "share": _rounded(self.share),
                "pendingJobs": self.pending_jobs, "unschedulableJobs": self.unschedulable_jobs,
                "waitingPods": self.waiting_pods, "podGroups": dict(self.podgroups)}


@dataclass(frozen=True)
class PendingJob:
    """A job that waits, at its place in its queue's job order (what the next cycle tries first
    is position 1). `reason` is its PodGroup's condition message, else its first waiting pod's
    first reason."""

    key: str
    queue: str
    position: int
    priority: int
    phase: str
    min_member: int
    min_resources: Mapping[str, int]
    waiting_pods: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.key, "queue": self.queue, "position": self.position, "priority": self.priority,
                "phase": self.phase, "minMember": self.min_member, "minResources": _quantities(self.min_resources),
                "waitingPods": self.waiting_pods, "reason": self.reason}


@dataclass(frozen=True)
class _PendingEntry:
    """PendingJob before its reason is looked up (only when somebody asks)."""

    job: int
    key: str
    position: int
    priority: int
    phase: str
    min_member: int
    min_resources: Mapping[str, int]
    waiting_pods: int
    first_pod: str | None


@dataclass(frozen=True)
class NodeUse:
    name: str
    schedulable: bool
    allocatable: Mapping[str, int]
    used: Mapping[str, int]


@dataclass(frozen=True)
class CardUse:
    """The cards of one device on one node."""

    node: str
    resource: str
    cards: int
    idle: int                      # no task on it
    whole: int                     # taken whole by one task
    shared: int                    # partly used by slices
    memory: int                    # bytes, all cards
    used_memory: int


@dataclass(frozen=True)
class HyperNodeRoom:
    """One HyperNode after a cycle: where it sits and the room its nodes have free (base units)."""

    name: str
    tier: int
    tier_name: str
    labels: str                    # `key=value` of a derived HyperNode's node label ("" for objects)
    parent: str | None
    nodes: int
    free: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tier": self.tier, "tierName": self.tier_name, "labels": self.labels,
                "parent": self.parent, "nodes": self.nodes, "free": _quantities(self.free)}


@dataclass(frozen=True)
class GangSpan:
    """A running gang (a PodGroup with pods on nodes) and the lowest-tier HyperNode holding them."""

    podgroup: str
    queue: str
    pods: int
    span: Span

    def to_dict(self) -> dict[str, Any]:
        return {"podGroup": self.podgroup, "queue": self.queue, "pods": self.pods, "tier": self.span.tier,
                "hyperNode": self.span.hypernode, "nodes": self.span.nodes}


@dataclass(frozen=True)
class TopologyFacts:
    """The network topology as the last cycle saw it: HyperNodes by tier with their free room, and
    each running gang's span. `derived_from` names the node labels when the HyperNodes were derived."""

    derived_from: str
    tiers: tuple[int, ...]
    hypernodes: tuple[HyperNodeRoom, ...]       # by tier, then name
    spans: tuple[GangSpan, ...]                 # by tier (spanning the cluster last), then PodGroup
    running_gangs: int                          # spans may list fewer (MAX_SPANS)
    problems: tuple[str, ...]
    topology: Topology = field(repr=False, compare=False, default_factory=Topology)

    def to_dict(self) -> dict[str, Any]:
        per_tier: dict[str, int] = {}
        for g in self.spans:
            key = "cluster" if g.span.tier is None else str(g.span.tier)
            per_tier[key] = per_tier.get(key, 0) + 1
        return {"derivedFrom": self.derived_from or None, "tiers": list(self.tiers),
                "hyperNodes": [hn.to_dict() for hn in self.hypernodes], "runningGangs": self.running_gangs,
                "gangsPerTier": per_tier, "spans": [g.to_dict() for g in self.spans],
                "problems": list(self.problems)}


def topology_facts(state: ClusterState, free: Mapping[str, Mapping[str, int]],
                   extra_placements: Mapping[str, str] = {}) -> TopologyFacts | None:
    """The TopologyFacts of `state` (None when it has no HyperNodes, objects or derived): spans of
    the PodGroups whose pods run (placed in `state`, or bound by `extra_placements`: pod → node),
    free room summed over each HyperNode's nodes from `free` (node → resource → amount)."""
    if not state.has_hypernodes:
        return None
    topology = state.topology()
    where: dict[str, set[str]] = {}
    pods: dict[str, int] = {}

    def count(pod, node: str) -> None:
        if not pod.group:
            return
        key = group_key_of(pod)
        if key not in state.podgroups:
            return
        where.setdefault(key, set()).add(node)
        pods[key] = pods.get(key, 0) + 1

    seen = set()
    for pod in state.placed_pods():
        seen.add(pod.key)
        count(pod, pod.node_name)
    for key, node in extra_placements.items():
        pod = state.pods.get(key)
        if pod is not None and key not in seen and not pod.node_name:
            count(pod, node)
    spans = [GangSpan(key, state.podgroups[key].queue, pods[key], span_of(topology, nodes))
             for key, nodes in where.items()]
    spans.sort(key=lambda g: (g.span.tier is None, g.span.tier or 0, g.podgroup))
    rooms = room_by_hypernode(topology, free)
    order = sorted(topology.hypernodes.values(), key=lambda hn: (hn.tier, hn.name))
    rows = tuple(HyperNodeRoom(hn.name, hn.tier, hn.tier_name, hn.label_text, topology.parent.get(hn.name),
                               len(topology.leaves.get(hn.name, ())), rooms.get(hn.name, {})) for hn in order)
    return TopologyFacts(topology.derived_from, topology.tiers, rows, tuple(spans[:MAX_SPANS]), len(spans),
                         tuple(str(p) for p in topology.problems), topology)


@dataclass(frozen=True)
class HistorySample:
    at: float                      # Unix time
    shares: Mapping[str, float]    # leaf queue -> share (allocated / deserved, or of the cluster)
    pending_jobs: Mapping[str, int]
    waiting_pods: int


@dataclass(frozen=True)
class SessionFacts:
    """What the views need from a session, taken before it closes (CycleRecord)."""

    resources: tuple[str, ...]
    queues: tuple[QueueRow, ...]
    pending: Mapping[str, tuple[_PendingEntry, ...]]
    # Nodes and cards as the session's arrays (copied: a few KB); rows only when somebody asks.
    node_names: tuple[str, ...] = ()
    schedulable: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    allocatable: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))   # (N, resources)
    used: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    card_inventories: tuple[Any, ...] = ()   # runtime.engine.snapshot.DeviceInventory: card use, fragmentation
    vgpu_inventory: Any = None               # runtime.engine.devices_vgpu.VgpuInventory (HAMi vGPU cards)

    @cached_property
    def nodes(self) -> tuple[NodeUse, ...]:
        names = self.resources
        return tuple(NodeUse(name, bool(self.schedulable[i]), dict(zip(names, self.allocatable[i].tolist())),
                             dict(zip(names, self.used[i].tolist())))
                     for i, name in enumerate(self.node_names))

    @cached_property
    def cards(self) -> tuple[CardUse, ...]:
        out = []
        for inv in self.card_inventories:
            if not len(inv.card_node):
                continue
            for i in np.unique(inv.card_node).tolist():
                mine = inv.card_node == i
                whole = inv.whole[mine]
                tasks = inv.tasks[mine]
                out.append(CardUse(self.node_names[i], inv.plan.resource, int(mine.sum()),
                                   int(((tasks == 0) & ~whole).sum()), int(whole.sum()),
                                   int(((tasks > 0) & ~whole).sum()), int(inv.card_memory[mine].sum()),
                                   int(inv.used_memory[mine].sum())))
        return tuple(out)


def session_facts(ssn) -> SessionFacts:
    """Queue rows, the pending jobs per queue in job order, node and card use: from the arrays
    the session already holds."""
    snap = ssn.snap
    resources = snap.resources
    columns = [r for r, name in enumerate(resources) if name != "pods" and snap.total[r] > 0]
    names = tuple(resources[r] for r in columns)
    status = ssn.status
    waiting = np.flatnonzero(status == PENDING)
    waiting_per_job = np.bincount(snap.task_job[waiting], minlength=len(snap.jobs)) if len(snap.jobs) else \
        np.zeros(0, dtype=np.int64)
    jobs_of_waiting, first_at = np.unique(snap.task_job[waiting], return_index=True)
    first_waiting = dict(zip(jobs_of_waiting.tolist(), waiting[first_at].tolist()))
    by_queue: dict[int, list[int]] = {}
    for job in snap.jobs:
        j = job.index
        if job.queue < 0:
            continue
        if waiting_per_job[j] > 0 or ssn.job_phase[j] == PG_PENDING:
            by_queue.setdefault(job.queue, []).append(j)
    tried = set(ssn.attempted) | {j for j, reasons in ssn.job_reasons.items() if reasons}
    pending: dict[str, tuple[_PendingEntry, ...]] = {}
    counts: dict[int, tuple[int, int, int]] = {}
    for q, js in by_queue.items():
        ordered = ssn.job_order(js)
        entries = []
        for position, j in enumerate(ordered[:MAX_PENDING_PER_QUEUE], start=1):
            job = snap.jobs[j]
            mins = {} if job.min_resources is None else \
                {resources[r]: int(job.min_resources[r]) for r in columns if job.min_resources[r] > 0}
            t = first_waiting.get(j)
            entries.append(_PendingEntry(j, job.key, position, int(job.priority), ssn.job_phase[j],
                                         int(job.min_member), mins, int(waiting_per_job[j]),
                                         snap.task_keys[t] if t is not None else None))
        pending[snap.queues[q].name] = tuple(entries)
        counts[q] = (len(js), sum(1 for j in js if j in tried), int(waiting_per_job[js].sum()))
    rows = []

    def depth_of(q: int) -> int:   # queue indices need not list parents first
        n, parent = 0, snap.queues[q].parent
        while parent > 0:
            n, parent = n + 1, snap.queues[parent].parent
        return n

    for q, info in enumerate(snap.queues):
        if q == 0:   # root: the cluster
            continue
        allocated = {resources[r]: int(ssn.queue_allocated[q][r]) for r in columns}
        deserved = borrowed = share = None
        if ssn.queue_deserved is not None:
            row = ssn.queue_deserved[q]
            deserved = {resources[r]: float(row[r]) for r in columns if row[r] < UNLIMITED}
            borrowed = {name: max(0.0, allocated[name] - amount) for name, amount in deserved.items()}
            share = float(queue_share(ssn.queue_allocated[q], row, np.array(columns, dtype=np.int64)))
        pending_jobs, unschedulable_jobs, waiting_pods = counts.get(q, (0, 0, 0))
        real = real_capability(ssn, q)
        rows.append(QueueRow(
            name=info.name, parent=snap.queues[info.parent].name if info.parent > 0 else None, depth=depth_of(q),
            weight=int(info.weight), priority=int(info.priority), open=bool(info.open),
            reclaimable=bool(info.reclaimable), declared_in_policy=bool(info.declared_in_policy),
            allocated=allocated, request={resources[r]: int(ssn.queue_request[q][r]) for r in columns},
            deserved=deserved, real_capability={resources[r]: int(real[r]) for r in columns if real[r] < UNLIMITED},
            overused=bool(ssn.overused(q)),
            guarantee={resources[r]: int(snap.guarantee[q][r]) for r in columns if snap.guarantee[q][r] > 0},
            capability={resources[r]: int(snap.capability[q][r]) for r in columns
                        if snap.capability[q][r] < UNLIMITED},
            borrowed=borrowed, share=share, pending_jobs=pending_jobs, unschedulable_jobs=unschedulable_jobs,
            waiting_pods=waiting_pods, podgroups={}))
    rows = _tree_order(rows)
    cols = np.array(columns, dtype=np.int64)
    return SessionFacts(names, tuple(rows), pending, tuple(snap.node_names), snap.schedulable.copy(),
                        snap.allocatable[:, cols].copy() if len(cols) else np.zeros((len(snap.node_names), 0),
                                                                                    dtype=np.int64),
                        ssn.used[:, cols].copy() if len(cols) else np.zeros((len(snap.node_names), 0), dtype=np.int64),
                        tuple(snap.devices), snap.vgpu)


def with_podgroup_phases(facts: SessionFacts, decisions: d.Decisions, state: ClusterState) -> SessionFacts:
    """Each queue's PodGroups per phase after the cycle: the phases it decided (as the Queue
    status says them), and every other PodGroup's own. A settled gang's PodGroup is among the
    latter (Running): its pods are folded out of the state, its PodGroup is not, so the
    settled count (SettledPods.groups) is not added again."""
    counts: dict[str, dict[str, int]] = {}
    decided = set()
    for status in decisions.podgroups:
        group = state.podgroups.get(status.name)
        if group is None:
            continue
        decided.add(status.name)
        per = counts.setdefault(group.queue, {})
        per[status.phase] = per.get(status.phase, 0) + 1
    for key, group in state.podgroups.items():
        if key not in decided:
            per = counts.setdefault(group.queue, {})
            per[group.phase] = per.get(group.phase, 0) + 1
    rows = tuple(dataclasses.replace(row, podgroups=dict(sorted(counts.get(row.name, {}).items())))
                 for row in facts.queues)
    return dataclasses.replace(facts, queues=rows)


def _tree_order(rows: list[QueueRow]) -> list[QueueRow]:
    """Parents first, each followed by its children (by name): the order a tree is drawn in."""
    children: dict[str | None, list[QueueRow]] = {}
    for row in rows:
        children.setdefault(row.parent, []).append(row)
    out: list[QueueRow] = []

    def walk(parent: str | None) -> None:
        for row in sorted(children.get(parent, []), key=lambda r: r.name):
            out.append(row)
            walk(row.name)

    walk(None)
    seen = {row.name for row in out}
    return out + [row for row in rows if row.name not in seen]   # a parent the snapshot lacks


@dataclass
class CycleView:
    """One cycle, as the views show it. Built by the scheduler's thread, read by the HTTP
    server's: nothing in it changes after `LiveView.record`, except the lazily built caches."""

    number: int
    revision: str
    policy: str
    at: float                      # Unix time the cycle ended
    seconds: float
    scheduler_name: str
    state: ClusterState
    decisions: d.Decisions
    facts: SessionFacts | None
    facts_cycle: int = 0           # the cycle `facts` were taken in (at most FACTS_EVERY_S old)
    _reasons: dict[str, tuple[d.Reason, ...]] | None = field(default=None, repr=False)
    _reasons_left_out: int = 0
    _conditions: dict[str, str] | None = field(default=None, repr=False)
    _names: dict[str, list[str]] | None = field(default=None, repr=False)
    _topology: tuple[TopologyFacts | None] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # --- per pod, on demand ----------------------------------------------------------------
    def reasons(self) -> dict[str, tuple[d.Reason, ...]]:
        """Waiting pod -> its reasons, for at most MAX_EXPLAINED_PODS pods."""
        with self._lock:
            if self._reasons is None:
                kept = self.decisions.unschedulable[:MAX_EXPLAINED_PODS]
                self._reasons = {u.pod: u.reasons for u in kept}
                self._reasons_left_out = max(0, len(self.decisions.unschedulable) - len(kept))
            return self._reasons

    def podgroup_conditions(self) -> dict[str, str]:
        with self._lock:
            if self._conditions is None:
                self._conditions = {s.name: s.conditions[0].message for s in self.decisions.podgroups
                                    if s.conditions and s.conditions[0].status == "True"
                                    and s.conditions[0].type == "Unschedulable"}
            return self._conditions

    def names(self) -> dict[str, list[str]]:
        """Pod and PodGroup names by namespace, built once per cycle on the first miss of
        explain: a miss then costs one namespace's names, never the cluster's."""
        with self._lock:
            if self._names is None:
                self._names = names_by_namespace(self.state)
            return self._names

    def explain(self, target: str):
        """The Explanation `policydsl explain` prints offline, from this cycle's decisions.
        Raises runtime.engine.explanation.UnknownTarget."""
        kind, key = resolve_target(self.state, target, self.names)
        decisions = _IndexedDecisions(self.decisions, self.reasons())
        options = Options(scheduler_name=self.scheduler_name)
        if kind == "pod":
            return explain_pod(self.state, key, decisions, options)
        return explain_group(self.state, key, decisions, options)

    def topology(self) -> TopologyFacts | None:
        """HyperNodes with their free room and running gangs' spans after this cycle (its bindings
        counted), worked out once, when first asked; None without HyperNodes."""
        with self._lock:
            if self._topology is None:
                free: dict[str, dict[str, int]] = {}
                if self.facts is not None:
                    for n in self.facts.nodes:
                        if n.schedulable:
                            free[n.name] = {r: max(0, v - n.used.get(r, 0)) for r, v in n.allocatable.items()}
                bound = {b.pod: b.node for b in self.decisions.bindings}
                self._topology = (topology_facts(self.state, free, bound),)
            return self._topology[0]

    # --- queues ------------------------------------------------------------------------------
    @property
    def queues(self) -> tuple[QueueRow, ...]:
        return self.facts.queues if self.facts is not None else ()

    def queue(self, name: str) -> QueueRow | None:
        return next((q for q in self.queues if q.name == name), None)

    def pending(self, queue: str) -> tuple[PendingJob, ...]:
        entries = self.facts.pending.get(queue, ()) if self.facts is not None else ()
        conditions = self.podgroup_conditions()
        reasons = self.reasons()
        out = []
        for e in entries:
            reason = conditions.get(e.key)
            if reason is None and e.first_pod is not None:
                found = reasons.get(e.first_pod)
                reason = found[0].message if found else None
            if reason is None:
                reason = "not admitted yet (Pending)" if e.phase == PG_PENDING else "not reached this cycle"
            out.append(PendingJob(e.key, queue, e.position, e.priority, e.phase, e.min_member, e.min_resources,
                                  e.waiting_pods, reason))
        return tuple(out)

    def fragmentation(self) -> dict[str, float]:
        """The simulator's fragmentation (runtime/engine/fragmentation.py) of the state this cycle
        saw: of the free capacity on nodes (cards) that could hold a waiting pod, the part where
        none fits now."""
        if self.facts is None:
            return {}
        waiting = [p for key in self.reasons() if (p := self.state.pods.get(key)) is not None]
        if not waiting:
            return {}
        resources = list(self.facts.resources)
        used_by_node = {n.name: dict(n.used) for n in self.facts.nodes}
        out = node_fragmentation(self.state, used_by_node, resources, waiting)
        out.update(card_fragmentation(self.facts.card_inventories, [p.requests for p in waiting]))
        return out


class _IndexedDecisions:
    """Decisions whose reasons_for is a dict lookup (explain asks for every pod of a gang)."""

    def __init__(self, decisions: d.Decisions, reasons: Mapping[str, tuple[d.Reason, ...]]) -> None:
        self._decisions = decisions
        self._reasons = reasons
        self._bindings: dict[str, d.Binding] | None = None
        self.podgroups = decisions.podgroups
        self.pipelined = decisions.pipelined
        self.unschedulable = decisions.unschedulable

    def reasons_for(self, pod: str) -> tuple[d.Reason, ...]:
        return self._reasons.get(pod, ())

    def binding_of(self, pod: str) -> d.Binding | None:
        if self._bindings is None:
            self._bindings = {b.pod: b for b in self._decisions.bindings}
        return self._bindings.get(pod)


@dataclass(frozen=True)
class Reload:
    revision: str
    at: float
    result: str                    # active | rejected
    detail: str = ""


class LiveView:
    """The last cycle, the history of the last hour, the policy revisions: thread-safe."""

    def __init__(self, *, clock=time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last: CycleView | None = None
        self._history: deque[HistorySample] = deque(maxlen=HISTORY_SAMPLES)
        self._reloads: deque[Reload] = deque(maxlen=RELOADS_KEPT)
        self._last_sample = float("-inf")
        self._noted: object = None

    @property
    def last(self) -> CycleView | None:
        return self._last

    def record(self, view: CycleView) -> None:
        with self._lock:
            previous = self._last
            self._last = view
            if previous is None or previous.revision != view.revision:
                if not self._reloads or self._reloads[-1].revision != view.revision:
                    self._reloads.append(Reload(view.revision, view.at, "active",
                                                f"policy {view.policy} from cycle {view.number} on"))
            if view.at - self._last_sample >= HISTORY_EVERY_S and view.facts is not None:
                self._last_sample = view.at
                self._history.append(_sample(view))

    def note_reload(self, last: Mapping[str, Any] | None) -> None:
        """The reloader's last attempt (runtime/service/reload.py describe()["last_reload"]): a rejected
        one goes into the history once (a successful one shows as the revision going active)."""
        if not last or last.get("result") != "error":
            return
        with self._lock:
            if self._noted == last.get("at"):
                return
            self._noted = last.get("at")
            errors = "; ".join(last.get("errors") or [])
            self._reloads.append(Reload(str(last.get("revision") or "-"), self._clock(), "rejected",
                                        f"{last.get('trigger')}: {errors}"[:500]))

    def history(self) -> tuple[HistorySample, ...]:
        with self._lock:
            return tuple(self._history)

    def reloads(self) -> tuple[Reload, ...]:
        with self._lock:
            return tuple(self._reloads)


def _sample(view: CycleView) -> HistorySample:
    shares: dict[str, float] = {}
    pending: dict[str, int] = {}
    parents = {row.parent for row in view.queues}
    for row in view.queues:
        pending[row.name] = row.pending_jobs
        if row.name in parents:   # plotted: the leaves, where jobs run
            continue
        shares[row.name] = row.share if row.share is not None else _cluster_share(row, view)
    waiting = sum(row.waiting_pods for row in view.queues)
    return HistorySample(view.at, shares, pending, waiting)


def _cluster_share(row: QueueRow, view: CycleView) -> float:
    """Without deserved shares: the largest part of the cluster the queue holds."""
    if view.facts is None:
        return 0.0
    totals: dict[str, int] = {}
    for node in view.facts.nodes:
        if node.schedulable:
            for r, v in node.allocatable.items():
                totals[r] = totals.get(r, 0) + v
    return max((row.allocated.get(r, 0) / t for r, t in totals.items() if t > 0), default=0.0)


# --- JSON documents (the HTTP API and `policydsl queues|pending -o json`) -------------------------

def cycle_header(view: CycleView) -> dict[str, Any]:
    return {"cycle": view.number, "policy": view.policy, "revision": view.revision,
            "at": _iso(view.at), "seconds": round(view.seconds, 6), "figuresCycle": view.facts_cycle or view.number}


def queues_document(view: CycleView) -> dict[str, Any]:
    return {**cycle_header(view), "queues": [q.to_dict() for q in view.queues]}


def pending_document(view: CycleView, queue: str) -> dict[str, Any] | None:
    row = view.queue(queue)
    if row is None:
        return None
    jobs = view.pending(queue)
    return {**cycle_header(view), "queue": queue, "pendingJobs": row.pending_jobs,
            "listed": len(jobs), "jobs": [j.to_dict() for j in jobs]}


def topology_document(view: CycleView) -> dict[str, Any]:
    facts = view.topology()
    if facts is None:
        return {**cycle_header(view), "hyperNodes": [], "spans": [], "runningGangs": 0, "tiers": [],
                "derivedFrom": None, "gangsPerTier": {}, "problems": []}
    return {**cycle_header(view), **facts.to_dict()}


def explain_document(view: CycleView, target: str) -> dict[str, Any]:
    """Raises UnknownTarget."""
    explanation = explain_live(view, target)
    return {**cycle_header(view), "explanation": explanation.to_dict(), "text": explanation.lines()}


def explain_live(view: CycleView, target: str):
    return view.explain(target)


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _quantities(values: Mapping[str, float] | None) -> dict[str, str] | None:
    """Base units as Kubernetes quantities a person reads (`1500m`, `8Gi`)."""
    if values is None:
        return None
    return {r: _quantity(r, v) for r, v in sorted(values.items())}


def _quantity(resource: str, amount: float) -> str:
    """Exact where the amount is whole (`1500m`, `8Gi`), else to one decimal (a deserved share)."""
    if float(amount).is_integer():
        return format_base_units(resource, int(amount))
    return readable_base_units(resource, amount)


def group_of(state: ClusterState, pod_key: str) -> str | None:
    pod = state.pods.get(pod_key)
    return group_key_of(pod) if pod is not None and pod.group else None
