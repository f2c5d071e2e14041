"""What a simulation measures: per-queue waits, utilization, queue shares against deserved
shares, fragmentation, evictions and gang violations.

Definitions (docs/simulator.md repeats them):
- a job *waits* from its arrival (or from the moment an eviction leaves it below minMember)
  until minMember of its pods run; jobs still waiting at the end count with their wait so far;
- percentiles are nearest-rank: p-th = the smallest wait with at least p% of waits ≤ it;
- *utilization* of a resource = requests of pods on nodes ÷ allocatable of schedulable nodes;
- a queue's *share* = its dominant share (max over resources of allocated ÷ cluster total),
  its *deserved* share the same of the deserved vector proportion/capacity computed that cycle
  (proportion clamps it to the queue's demand); *fairness* of a queue = mean share ÷ mean
  deserved; the *fairness index* is Jain's index of allocated ÷ deserved over the queues that
  have pods waiting, time-averaged over the time some do (1 = every waiting queue gets the
  same fraction of what it deserves);
- *fragmentation* of a resource = of its free capacity on nodes that could hold a waiting pod
  asking for it (were the node empty), the part on nodes where no such pod fits now (by
  resources alone, all of them considered; selectors and taints aside), time-averaged over
  the time pods wait; for the memory of a device shared by memory slices the same is measured
  per card (idle card memory no waiting slice fits);
- *card memory split* of a device shared by memory = per node, its free card memory when some
  waiting pod would fit in that much on one card yet none fits on the node now, summed over the
  nodes at each sample (runtime.engine.cards, runtime.simulation.cardsplit);
- *device usage* (Dynamic Resource Allocation) of a DeviceClass = devices claims hold ÷ devices
  the ResourceSlices publish that its selectors match, time-averaged; and both counts per node at
  the end (runtime.simulation.devices);
- all time averages weight each sample (taken after every cycle) by how long it held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

from runtime.cluster.model import ClusterState, Pod
from runtime.engine.cards import SplitNode, split_card_memory
from runtime.engine.fragmentation import card_fragmentation, node_fragmentation
from runtime.simulation.cardsplit import CardSplit, card_splits
from runtime.simulation.devices import ClassUsage, DeviceMeter, usage


def percentile(values: Iterable[float], p: float) -> float | None:
    """Nearest-rank percentile (None for no values): sorted[ceil(p/100·n) − 1]."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def jain_index(values: list[float]) -> float | None:
    """(Σx)² / (n·Σx²): 1 when all equal, 1/n when one gets everything."""
    if not values:
        return None
    squares = sum(v * v for v in values)
    if squares == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * squares)


@dataclass(frozen=True)
class Sample:
    time: float
    utilization: dict[str, float]
    shares: dict[str, float]            # leaf queue -> dominant share of the cluster
    deserved: dict[str, float]          # leaf queue -> dominant deserved share
    waiting: dict[str, int]             # leaf queue -> pods waiting
    fragmentation: dict[str, float]     # resource -> fragmented part of free (only while pods wait)
    fairness: float | None              # Jain's index over queues with waiting pods
    evictions: int = 0                  # evictions so far (cumulative)
    devices: dict[str, float] = field(default_factory=dict)  # DeviceClass -> allocated ÷ published
    # Nodes whose free card memory no waiting pod uses because it is split over cards (runtime.engine.cards).
    card_split: tuple[SplitNode, ...] = ()


@dataclass(frozen=True)
class QueueMetrics:
    name: str
    jobs: int
    started: int
    completed: int
    waiting: int
    wait_p50: float | None
    wait_p95: float | None
    wait_p99: float | None
    wait_max: float | None
    share: float
    deserved: float | None
    fairness: float | None
    evictions: int
    waits: tuple[float, ...] = ()            # every measured wait, sorted (those still waiting: so far)
    # the waits of jobs that started, sorted; `waiting` more are censored (still waiting at the end)
    started_waits: tuple[float, ...] = ()
    censored_waits: tuple[float, ...] = ()   # the waits so far of the jobs still waiting at the end, sorted

    def to_dict(self) -> dict:
        return {"jobs": self.jobs, "started": self.started, "completed": self.completed, "waiting": self.waiting,
                "wait": {"p50": self.wait_p50, "p95": self.wait_p95, "p99": self.wait_p99, "max": self.wait_max},
                "share": _round(self.share), "deserved": _round(self.deserved), "fairness": _round(self.fairness),
                "evictions": self.evictions}


@dataclass(frozen=True)
class GangViolation:
    time: float
    job: str
    running: int
    min_member: int


@dataclass(frozen=True)
class RunMetrics:
    duration: float
    cycles: int
    queues: dict[str, QueueMetrics]
    utilization: dict[str, float]
    fragmentation: dict[str, float]
    fairness: float | None
    evictions: int
    gang_violations: tuple[GangViolation, ...]
    samples: tuple[Sample, ...] = field(default=(), repr=False)
    # Evictions that bought nothing, pods evicted again, queues trading room (runtime.engine.evictions).
    eviction_audit: dict = field(default_factory=dict)
    # Pods still waiting at the end whose reasons name their storage (runtime.engine.rules.volumes).
    storage_waiting: int = 0
    # DeviceClass -> its devices published and allocated (runtime.simulation.devices); empty without DRA.
    devices: dict[str, ClassUsage] = field(default_factory=dict)
    # Device -> its card memory split over cards over the run (runtime.simulation.cardsplit); empty when never.
    card_fragmentation: dict[str, CardSplit] = field(default_factory=dict)

    @property
    def thrashing(self) -> bool:
        a = self.eviction_audit
        return bool(a.get("wasted") or a.get("repeats") or a.get("exchanges"))

    def to_dict(self) -> dict:
        return {
            "duration": self.duration, "cycles": self.cycles,
            "queues": {name: q.to_dict() for name, q in sorted(self.queues.items())},
            "utilization": {r: _round(v) for r, v in self.utilization.items()},
            "fragmentation": {r: _round(v) for r, v in self.fragmentation.items()},
            "fairness": _round(self.fairness), "evictions": self.evictions,
            "gang_violations": len(self.gang_violations),
            "gang_violation_details": [{"time": v.time, "job": v.job, "running": v.running, "min_member": v.min_member}
                                       for v in self.gang_violations[:20]],
            "eviction_audit": dict(self.eviction_audit), "thrashing": self.thrashing,
            "storage_waiting": self.storage_waiting,
            **({"devices": {cls: u.to_dict() for cls, u in self.devices.items()}} if self.devices else {}),
            **({"card_fragmentation": {d: c.to_dict() for d, c in self.card_fragmentation.items()}}
               if self.card_fragmentation else {}),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


@dataclass
class _QueueTally:
    jobs: int = 0
    started: int = 0
    completed: int = 0
    evictions: int = 0
    waits: list[float] = field(default_factory=list)


class Recorder:
    """Collects events and per-cycle samples during a run; `finish` makes the RunMetrics."""

    def __init__(self) -> None:
        self.tallies: dict[str, _QueueTally] = {}
        self.samples: list[Sample] = []
        self.violations: list[GangViolation] = []
        self.evictions = 0
        self.device_meter = DeviceMeter()

    def tally(self, queue: str) -> _QueueTally:
        return self.tallies.setdefault(queue, _QueueTally())

    def job_arrived(self, queue: str) -> None:
        self.tally(queue).jobs += 1

    def job_started(self, queue: str, wait: float) -> None:
        tally = self.tally(queue)
        tally.started += 1
        tally.waits.append(wait)

    def job_completed(self, queue: str) -> None:
        self.tally(queue).completed += 1

    def evicted(self, queue: str) -> None:
        self.evictions += 1
        self.tally(queue).evictions += 1

    def gang_violation(self, violation: GangViolation) -> None:
        self.violations.append(violation)

    def sample(self, time: float, state: ClusterState, ssn, scheduler_name: str) -> None:
        """Measure the state after a cycle's decisions were applied (`ssn` is that cycle's
        session: its snapshot's resources and totals, and the deserved shares it computed)."""
        snap = ssn.snap
        resources = [r for r, total in zip(snap.resources, snap.total) if r != "pods" and total > 0]
        totals = {r: int(snap.total[snap.resource_index[r]]) for r in resources}
        used_by_node: dict[str, dict[str, int]] = {}
        allocated: dict[str, dict[str, int]] = {}
        waiting: dict[str, int] = {}
        waiting_pods: list = []
        for pod in state.pods.values():
            if pod.terminal:
                continue
            if pod.node_name:
                used = used_by_node.setdefault(pod.node_name, {})
                for r, v in pod.requests.items():
                    used[r] = used.get(r, 0) + v
                if pod.scheduler_name == scheduler_name and not pod.releasing:
                    queue = allocated.setdefault(queue_of(state, pod), {})
                    for r, v in pod.requests.items():
                        queue[r] = queue.get(r, 0) + v
            elif pod.scheduler_name == scheduler_name:
                name = queue_of(state, pod)
                waiting[name] = waiting.get(name, 0) + 1
                waiting_pods.append(pod)
        used_total = {r: 0 for r in resources}
        for name, used in used_by_node.items():
            if name in state.nodes and not state.nodes[name].unschedulable:
                for r in resources:
                    used_total[r] += used.get(r, 0)
        utilization = {r: min(used_total[r] / totals[r], 1.0) for r in resources}

        leaves = [q for q in snap.queues[1:] if q.leaf]
        shares: dict[str, float] = {}
        deserved: dict[str, float] = {}
        for q in leaves:
            alloc = allocated.get(q.name, {})
            shares[q.name] = max((alloc.get(r, 0) / totals[r] for r in resources), default=0.0)
            if ssn.queue_deserved is not None:
                row = ssn.queue_deserved[q.index]
                deserved[q.name] = max((min(int(row[snap.resource_index[r]]), totals[r]) / totals[r]
                                        for r in resources), default=0.0)
        ratios = [shares[name] / deserved[name] for name in waiting if deserved.get(name)]
        fairness = jain_index(ratios) if ratios else None
        fragmentation = node_fragmentation(state, used_by_node, resources, waiting_pods) if waiting_pods else {}
        if waiting_pods:
            fragmentation.update(card_fragmentation(snap.devices, [p.requests for p in waiting_pods]))
        devices = self.device_meter.fractions(state.dra) if state.dra.slices else {}
        split = ()
        if waiting_pods and (snap.devices or snap.vgpu is not None):
            split = tuple(split_card_memory(snap.node_names, state.nodes, snap.devices, snap.vgpu, waiting_pods))
        self.samples.append(Sample(time, utilization, shares, deserved, waiting, fragmentation, fairness,
                                   self.evictions, devices, split))

    def device_usage(self, state: ClusterState, end: float) -> dict[str, ClassUsage]:
        """Each DeviceClass's devices at the end (`state`) and their mean use over the samples."""
        if not state.dra.slices:
            return {}
        return usage(self.device_meter.counts(state.dra), [s.devices for s in self.samples],
                     _holding_times(self.samples, end))

    def finish(self, end: float, cycles: int, still_waiting: Iterable[tuple[str, float]]) -> RunMetrics:
        waiting_now: dict[str, list[float]] = {}
        for queue, wait in still_waiting:
            waiting_now.setdefault(queue, []).append(wait)
            self.tally(queue)
        weights = _holding_times(self.samples, end)
        queues: dict[str, QueueMetrics] = {}
        for name, tally in sorted(self.tallies.items()):
            waits = tally.waits + waiting_now.get(name, [])
            share = _weighted((s.shares.get(name, 0.0) for s in self.samples), weights)
            deserved_values = [s.deserved.get(name) for s in self.samples]
            deserved = None
            if any(v is not None for v in deserved_values):
                deserved = _weighted((v or 0.0 for v in deserved_values), weights)
            queues[name] = QueueMetrics(
                name=name, jobs=tally.jobs, started=tally.started, completed=tally.completed,
                waiting=len(waiting_now.get(name, [])), wait_p50=percentile(waits, 50),
                wait_p95=percentile(waits, 95), wait_p99=percentile(waits, 99), wait_max=max(waits, default=None),
                share=share, deserved=deserved,
                fairness=(share / deserved) if deserved else None, evictions=tally.evictions,
                waits=tuple(sorted(waits)), started_waits=tuple(sorted(tally.waits)),
                censored_waits=tuple(sorted(waiting_now.get(name, []))))
        resources = sorted({r for s in self.samples for r in s.utilization})
        utilization = {r: _weighted((s.utilization.get(r, 0.0) for s in self.samples), weights) for r in resources}
        contended = [(s, w) for s, w in zip(self.samples, weights) if s.fragmentation]
        fragmentation = {}
        for r in sorted({r for s, _ in contended for r in s.fragmentation}):
            fragmentation[r] = _weighted((s.fragmentation.get(r, 0.0) for s, _ in contended), [w for _, w in contended])
        fair = [(s.fairness, w) for s, w in zip(self.samples, weights) if s.fairness is not None]
        fairness = _weighted((f for f, _ in fair), [w for _, w in fair]) if fair else None
        split = card_splits([s.time for s in self.samples], [s.card_split for s in self.samples], weights) \
            if any(s.card_split for s in self.samples) else {}
        return RunMetrics(end, cycles, queues, utilization, fragmentation, fairness, self.evictions,
                          tuple(self.violations), tuple(self.samples), card_fragmentation=split)


def queue_of(state: ClusterState, pod: Pod) -> str:
    """The pod's job's queue: its PodGroup's, else its queue annotation's, else default."""
    return state.queue_name_of(pod)


def _holding_times(samples: list[Sample], end: float) -> list[float]:
    """How long each sample held (until the next one, the last until `end`). A run of one
    instant weighs its samples equally."""
    if not samples:
        return []
    times = [s.time for s in samples] + [max(end, samples[-1].time)]
    weights = [max(b - a, 0.0) for a, b in zip(times, times[1:])]
    if sum(weights) == 0:
        return [1.0] * len(samples)
    return weights


def _weighted(values: Iterable[float], weights: list[float]) -> float:
    values = list(values)
    total = sum(weights[: len(values)])
    if not values or total == 0:
        return 0.0
    return sum(v * w for v, w in zip(values, weights)) / total
