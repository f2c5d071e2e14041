"""rescheduling: evict running pods off overused nodes for the shuffle action, as Volcano's
rescheduling plugin, with evictions the next cycle would not undo.

Every `interval` (the cycle's clock; Volcano's first run is an interval after the scheduler
starts, so is ours after the first cycle this plan runs), the strategies answer shuffle's
`victim` question:
- lowNodeUtilization: a node's utilization is what its pods request (less what is leaving, plus
  the room held for preemptors) over its allocatable, in percent of cpu, memory and pods. A
  schedulable node below `thresholds` in every resource is underused; one above
  `target_thresholds` in some resource is overused. With some nodes underused (not all) and some
  overused, pods are taken off the overused nodes, the most used first (cpu + memory), lowest
  priority first (best-effort pods first among equals, then the newest), while the node is still
  at or above a target, and only a pod that, with it gone, the cycle's own placement (its filters,
  scores and room) would put on an underused node that stays below its targets with it: so the
  next allocate does not put it back, and underused nodes are not filled past their targets.
  Volcano instead evicts against one sum of the underused nodes' room (which it lets go below
  zero) and never asks where the pod would go (its design doc's TODO).
- offlineOnly: only preemptable pods (volcano.sh/preemptable: true on the pod, or unset there and
  true on its PodGroup) are victims.
- lowPriorityFirst: victims lowest priority first — lowNodeUtilization's own order.
`queues` and `labels` narrow the victims (Volcano's queueSelector and labelSelector, which
v1.14.1 documents and does not read). Never victims: a gang pod that would take its job below
minMember, a pod of kube-system or of a system-*-critical priority class.
"""

from __future__ import annotations

import time
import weakref

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.extension import MASK_PASS
from runtime.engine.plugins.base import Plugin
from runtime.engine.plugins.cdp import go_duration
from runtime.engine.snapshot import BOUND, TaskClass

LNU, OFFLINE_ONLY = "lowNodeUtilization", "offlineOnly"
UTILIZATION = ("cpu", "memory", "pods")
DEFAULT_THRESHOLD = 100.0
DEFAULT_INTERVAL = 300.0
CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


class PeriodGate:
    """When a periodic step last ran, kept across cycles for one plan object (Volcano keeps it in
    a process global). A clock that goes back (a new simulation over the same plan) starts afresh.
    The scheduler's memory: a new process or leader starts without it, as Volcano's does."""

    _gates: dict[tuple[int, str], "PeriodGate"] = {}

    def __init__(self, period: float, first_open: bool):
        self.period = period
        self.first_open = first_open
        self.last: float | None = None

    @classmethod
    def of(cls, plan: object, name: str, period: float, first_open: bool) -> "PeriodGate":
        key = (id(plan), name)
        gate = cls._gates.get(key)
        if gate is None or gate.period != period or gate.first_open != first_open:
            if gate is None:
                weakref.finalize(plan, cls._gates.pop, key, None)
            gate = cls._gates[key] = cls(period, first_open)
        return gate

    def due(self, now: float) -> bool:
        """Whether the step runs at `now`; if so it counts as run. First (or after the clock went
        back): `first_open`. Then once `period` has passed (tdm: at least; rescheduling: more than,
        as Volcano compares each)."""
        if self.last is None or now < self.last:
            self.last = now
            return self.first_open
        passed = now - self.last
        if passed > self.period or (self.first_open and passed >= self.period):
            self.last = now
            return True
        return False


def _thresholds(given: dict | None) -> np.ndarray:
    given = given or {}
    return np.array([float(given.get(r, DEFAULT_THRESHOLD)) for r in UTILIZATION], dtype=np.float64)


class ReschedulingPlugin(Plugin):
    name = "rescheduling"
    answers = frozenset({"victim"})

    def on_session_open(self, ssn) -> None:
        interval = go_duration(str(self.args.get("interval") or "5m"))
        interval = DEFAULT_INTERVAL if interval is None or interval < 0 else interval
        strategies = list(self.args.get("strategies") or [LNU])
        low_at = _thresholds(self.args.get("thresholds"))
        target_at = _thresholds(self.args.get("target_thresholds"))
        queues = set(self.args.get("queues") or ())
        labels = dict(self.args.get("labels") or {})
        gate = PeriodGate.of(ssn.plan, "rescheduling", interval, first_open=False)

        def victims(candidates: list[int]) -> dict[int, d.Reason]:
            now = ssn.now if ssn.now is not None else time.time()
            if not gate.due(now) or LNU not in strategies:
                return {}
            allowed = [t for t in candidates if self._may_go(ssn, t, OFFLINE_ONLY in strategies, queues, labels)]
            return low_node_utilization(ssn, allowed, low_at, target_at)

        self.register(ssn, "victim", victims)

    @staticmethod
    def _may_go(ssn, t: int, offline_only: bool, queues: set[str], labels: dict[str, str]) -> bool:
        snap = ssn.snap
        pod = snap.pods[t]
        job = snap.jobs[int(snap.task_job[t])]
        if pod.namespace == "kube-system" or pod.priority_class in CRITICAL_CLASSES:
            return False
        if offline_only:
            own = pod.preemptable_setting
            if not (own is True or (own is None and job.podgroup is not None and job.podgroup.job_preemptable)):
                return False
        if queues and (job.queue < 0 or snap.queues[job.queue].name not in queues):
            return False
        return all(pod.labels.get(k) == v for k, v in labels.items())


def utilization(ssn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(held, allocatable, percent) per node of cpu, memory, pods: what its pods hold, less what is
    leaving, plus the room held for preemptors."""
    snap = ssn.snap
    cols = [snap.resource_index[r] for r in UTILIZATION]
    alloc = snap.allocatable[:, cols].astype(np.float64)
    held = (ssn.used - ssn.releasing + ssn.pipelined)[:, cols].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        percent = np.where(alloc > 0, held * 100.0 / np.where(alloc > 0, alloc, 1), 0.0)
    return held, alloc, percent


def _qos_rank(ssn, t: int) -> int:
    """Best-effort pods (nothing requested) go before the others (Volcano's QoS order; limits are
    not modelled, so Burstable and Guaranteed rank alike)."""
    return 0 if ssn.zero_request(t) else 1


def _placement_of(ssn, t: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Running task t's node mask and static scores as a pending pod like it would get (running
    tasks have no class). None for a pod whose place the static answers do not settle (inter-pod
    rules, volumes, ResourceClaims, devices, exclusive NUMA CPUs, task or network topology): such a
    pod is not moved."""
    snap = ssn.snap
    pod = snap.pods[t]
    if pod.rules is not None or pod.volumes or pod.resource_claims or snap.request[t][snap.device_managed].any():
        return None
    group = snap.jobs[int(snap.task_job[t])].podgroup
    # Stateful rules answer by task class, which a running pod has not: exclusive NUMA CPUs,
    # task-topology buckets and network topology are not judged here, so such pods stay.
    if pod.numa_cpus is not None or (group is not None and (group.task_topology or group.asks_topology)):
        return None
    cls = TaskClass(-1 - t, tuple(int(v) for v in snap.request[t]), tuple(sorted(pod.node_selector.items())),
                    pod.required_terms, pod.preferred_terms, pod.tolerations, (), t)
    mask, _ = ssn.class_mask(cls)
    return mask, ssn.class_static_score(cls)


def low_node_utilization(ssn, candidates: list[int], low_at: np.ndarray, target_at: np.ndarray) -> dict[int, d.Reason]:
    """The lowNodeUtilization victims among `candidates`, each with its reason (module doc)."""
    snap = ssn.snap
    held, alloc, percent = utilization(ssn)
    measured = alloc > 0
    low = snap.schedulable.astype(bool) & np.all((percent < low_at) | ~measured, axis=1)
    high = ~low & np.any((percent > target_at) & measured, axis=1)
    if not low.any() or low.all() or not high.any():
        return {}
    on_node: dict[int, list[int]] = {}
    for t in candidates:
        if ssn.status[t] == BOUND and ssn.task_node[t] >= 0:
            on_node.setdefault(int(ssn.task_node[t]), []).append(t)
    cols = [snap.resource_index[r] for r in UTILIZATION]
    # The next cycle's nodes: leaving pods gone, victims' replacements placed where they go.
    used_next = np.ascontiguousarray(ssn.used - ssn.releasing)
    left: dict[int, int] = {}
    out: dict[int, d.Reason] = {}
    scores = np.empty(snap.n_nodes, dtype=np.float64)
    sources = sorted(np.flatnonzero(high).tolist(), key=lambda n: (-(percent[n, 0] + percent[n, 1]), n))
    for src in sources:
        pods = sorted(on_node.get(src, ()), key=lambda t: (int(snap.task_priority[t]), _qos_rank(ssn, t),
                                                             -snap.pods[t].creation, t))
        for t in pods:
            if not np.any((percent[src] >= target_at) & measured[src]):
                break
            j = int(snap.task_job[t])
            if j not in left:    # a gang (minMember > 1) never goes below its minimum
                job = snap.jobs[j]
                left[j] = int(ssn.job_ready[j]) - job.min_member if job.min_member > 1 else int(ssn.job_ready[j])
            if left[j] <= 0:
                continue
            placement = _placement_of(ssn, t)
            if placement is None:
                continue
            mask, static = placement
            req = np.ascontiguousarray(ssn.fit_request(t))
            used_next[src] -= req
            # Where the next cycle would place it, its own node open to it too: the best node that
            # passes its filters and has room (ties to the lowest node, as allocate's).
            fits = np.all(snap.allocatable - used_next - ssn.pipelined >= req, axis=1) & (mask & MASK_PASS).astype(bool)
            ssn.k.score_nodes(snap.allocatable, used_next, req, ssn.score_params, static, scores)
            keyed = np.where(fits, scores, -np.inf)
            best = int(np.argmax(keyed))
            dst = -1
            if keyed[best] > -np.inf and best != src and low[best]:
                after = (used_next[best, cols] + ssn.pipelined[best, cols] + req[cols]) * 100.0 / \
                    np.where(alloc[best] > 0, alloc[best], 1)
                if np.all((after <= target_at) | ~measured[best]):
                    dst = best
            if dst < 0:
                used_next[src] += req
                continue
            used_next[dst] += req
            left[j] -= 1
            percent[src] = (used_next[src, cols] + ssn.pipelined[src, cols]) * 100.0 / np.where(
                alloc[src] > 0, alloc[src], 1)
            out[t] = d.Reason(
                d.SHUFFLE, f"node {snap.node_names[src]} is above its target utilization; the pod can run on "
                f"{snap.node_names[dst]}, below its thresholds (rescheduling, lowNodeUtilization)",
                {"plugin": "rescheduling", "strategy": LNU, "from": snap.node_names[src], "to": snap.node_names[dst]})
    return out


PLUGIN = ReschedulingPlugin
