"""The metrics Volcano's scheduler exposes, under Volcano's names and labels, so that a migrating
user's dashboards and alerts keep working (`policydsl run --volcano-metrics`, on by default).

Names, labels, units and buckets as volcano-sh/volcano pkg/scheduler/metrics (v1.14) defines
them, and the queue PodGroup counts of its controllers' pkg/controllers/metrics. The mapping,
and what is measured differently, is in docs/observability.md.

Cheap while the scheduler runs at full speed: a cycle hands over what it computed anyway (the
SessionFacts of runtime/service/views.py, its Decisions) and adds its latencies to histograms in one
numpy pass; the per-queue and per-job series are built from the last cycle's facts only when
Prometheus scrapes (a custom collector), not once per cycle. A cycle that places 8,000 pods of
800 gangs costs about a millisecond here instead of the 200 ms of prometheus_client's per-call
API (one label lookup and one observation per pod and job).

Series that name a job or a queue are those of the last cycle (and, for the jobs scheduled, of
the PodGroups that still exist), so their number stays that of the jobs and queues there are
(Volcano keeps them until restart).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from runtime.cluster import decisions as d
from runtime.cluster.model import PG_COMPLETED, PG_INQUEUE, PG_PENDING, PG_RUNNING, PG_UNKNOWN, ClusterState

SUBSYSTEM = "volcano"


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """prometheus.ExponentialBuckets."""
    return tuple(start * factor ** i for i in range(count))


LATENCY_MS_BUCKETS = exponential_buckets(5, 2, 15)          # e2e, action, task latency
JOB_LATENCY_MS_BUCKETS = exponential_buckets(32, 2, 10)     # e2e job latency
CPU, MEMORY = "cpu", "memory"
PODGROUP_PHASES = {PG_INQUEUE: "inqueue", PG_PENDING: "pending", PG_RUNNING: "running", PG_UNKNOWN: "unknown",
                   PG_COMPLETED: "completed"}
QUEUE_FIGURES = (("allocated", "Allocated", "allocated"), ("request", "Request", "request"),
                 ("deserved", "Deserved", "deserved"), ("capacity", "Capacity", "capability"),
                 ("real_capacity", "Capacity", "real_capability"))
PRUNE_EVERY_S = 60.0      # how often scheduled-job series of PodGroups that are gone are dropped


class _Histogram:
    """Cumulative bucket counts, fed many observations at once."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.edges = np.array(buckets, dtype=np.float64)
        self.counts = np.zeros(len(buckets) + 1, dtype=np.int64)   # the last: above every edge (+Inf)
        self.sum = 0.0

    def observe(self, values: np.ndarray | Iterable[float]) -> None:
        values = np.asarray(values, dtype=np.float64)
        if not values.size:
            return
        # A value equal to an edge counts in it (Prometheus' `le`).
        self.counts += np.bincount(np.searchsorted(self.edges, values, side="left"), minlength=len(self.counts))
        self.sum += float(values.sum())

    def observe_one(self, value: float) -> None:
        """One observation, without numpy: a cycle's latency and each action's."""
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += float(value)

    def family_sample(self) -> tuple[list[tuple[str, float]], float]:
        cumulative = np.cumsum(self.counts)
        buckets = [(_le(edge), float(c)) for edge, c in zip(self.edges.tolist(), cumulative[:-1].tolist())]
        buckets.append(("+Inf", float(cumulative[-1])))
        return buckets, self.sum


def _le(edge: float) -> str:
    return repr(float(edge))


class VolcanoMetrics(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self._lock = threading.Lock()
        self._e2e = _Histogram(LATENCY_MS_BUCKETS)
        self._job = _Histogram(JOB_LATENCY_MS_BUCKETS)
        self._task = _Histogram(LATENCY_MS_BUCKETS)
        self._actions: dict[str, _Histogram] = {}
        self._attempts = {"scheduled": 0.0, "unschedulable": 0.0, "error": 0.0}
        self._victims = 0.0
        self._preemption_attempts = 0.0
        self._facts = None                      # the last cycle's runtime.service.views.SessionFacts
        # (job_name, queue, job_namespace) -> (duration s, start Unix time, last Unix time)
        self._scheduled: dict[tuple[str, str, str], tuple[float, float, float]] = {}
        self._pruned = time.monotonic()
        registry.register(self)

    # --- fed by the scheduler ---------------------------------------------------------------
    def cycle_failed(self) -> None:
        with self._lock:
            self._attempts["error"] += 1

    def cycle(self, seconds: float, actions: Iterable[tuple[str, float]], facts, decisions: d.Decisions,
              state: ClusterState | None = None, now: float | None = None) -> None:
        """One cycle's figures: `facts` is the runtime.service.views.SessionFacts it took, or None."""
        victims = sum(1 for e in decisions.evictions if e.reason.kind == d.PREEMPTION)
        task_latencies = job_latencies = None
        newly_running: list[tuple[tuple[str, str, str], float, float]] = []
        if state is not None and now is not None:
            pods = state.pods
            created = [p.creation for b in decisions.bindings if (p := pods.get(b.pod)) is not None and p.creation]
            task_latencies = np.maximum(0.0, now - np.array(created, dtype=np.float64)) * 1000
            for status in decisions.podgroups:
                if status.phase != PG_RUNNING:
                    continue
                group = state.podgroups.get(status.name)
                if group is None or group.phase == PG_RUNNING or not group.creation:
                    continue
                newly_running.append(((group.name, group.queue, group.namespace), group.creation,
                                      max(0.0, now - group.creation)))
            job_latencies = [latency * 1000 for _, _, latency in newly_running]
        with self._lock:
            self._e2e.observe_one(seconds * 1000)
            for action, spent in actions:
                self._actions.setdefault(action, _Histogram(LATENCY_MS_BUCKETS)).observe_one(spent * 1000)
            self._attempts["scheduled"] += len(decisions.bindings)
            self._attempts["unschedulable"] += len(decisions.unschedulable)
            self._victims = float(victims)
            if victims:
                self._preemption_attempts += 1
            if task_latencies is not None:
                if len(task_latencies):
                    self._task.observe(task_latencies)
                if job_latencies:
                    self._job.observe(job_latencies)
                for labels, start, latency in newly_running:
                    self._scheduled[labels] = (latency, start, now)
                if state is not None and time.monotonic() - self._pruned >= PRUNE_EVERY_S:
                    self._pruned = time.monotonic()
                    self._scheduled = {k: v for k, v in self._scheduled.items()
                                       if f"{k[2]}/{k[0]}" in state.podgroups}
            if facts is not None:   # a cycle that took no figures (FACTS_EVERY_S) keeps the last ones
                self._facts = facts

    # --- read by Prometheus ------------------------------------------------------------------
    def describe(self) -> list[Metric]:
        return []   # families are built on collect; no name clashes with ours (prefix volcano_)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            facts = self._facts
            yield self._histogram("e2e_scheduling_latency_milliseconds",
                                  "E2e scheduling latency in milliseconds (scheduling algorithm + binding)", self._e2e)
            yield self._histogram("e2e_job_scheduling_latency_milliseconds",
                                  "E2e job scheduling latency in milliseconds", self._job)
            yield self._histogram("task_scheduling_latency_milliseconds",
                                  "Task scheduling latency in milliseconds", self._task)
            actions = HistogramMetricFamily(f"{SUBSYSTEM}_action_scheduling_latency_milliseconds",
                                            "Action scheduling latency in milliseconds", labels=["action"])
            for action, hist in sorted(self._actions.items()):
                buckets, total = hist.family_sample()
                actions.add_metric([action], buckets, total)
            yield actions
            job_labels = ["job_name", "queue", "job_namespace"]
            for name, help_, index in (("duration", "E2E job scheduling duration", 0),
                                       ("start_time", "E2E job scheduling start time", 1),
                                       ("last_time", "E2E job scheduling last time", 2)):
                family = GaugeMetricFamily(f"{SUBSYSTEM}_e2e_job_scheduling_{name}", help_, labels=job_labels)
                for labels, values in self._scheduled.items():
                    family.add_metric(list(labels), values[index])
                yield family
            attempts = CounterMetricFamily(
                f"{SUBSYSTEM}_schedule_attempts", "Number of attempts to schedule pods, by the result. "
                "'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler "
                "problem.", labels=["result"])
            for result, value in self._attempts.items():
                attempts.add_metric([result], value)
            yield attempts
            yield GaugeMetricFamily(f"{SUBSYSTEM}_pod_preemption_victims", "Number of selected preemption victims",
                                    value=self._victims)
            # A counter in Volcano whose name has no `_total`, which prometheus_client appends to
            # every counter: a gauge that only goes up keeps the name (rate() works alike).
            yield GaugeMetricFamily(f"{SUBSYSTEM}_total_preemption_attempts",
                                    "Total preemption attempts in the cluster till now",
                                    value=self._preemption_attempts)
        yield from self._per_job(facts)
        yield from self._per_queue(facts)

    @staticmethod
    def _histogram(name: str, help_: str, hist: _Histogram) -> Metric:
        family = HistogramMetricFamily(f"{SUBSYSTEM}_{name}", help_)
        buckets, total = hist.family_sample()
        family.add_metric([], buckets, total)
        return family

    @staticmethod
    def _per_job(facts) -> Iterator[Metric]:
        tasks = GaugeMetricFamily(f"{SUBSYSTEM}_unschedule_task_count", "Number of tasks could not be scheduled",
                                  labels=["job_id"])
        jobs = 0
        for entries in (facts.pending.values() if facts is not None else ()):
            for e in entries:
                if e.waiting_pods:
                    # Volcano labels it with the job's name alone (job_id = job.Name).
                    tasks.add_metric([e.key.split("/", 1)[-1]], e.waiting_pods)
                    jobs += 1
        yield tasks
        yield GaugeMetricFamily(f"{SUBSYSTEM}_unschedule_job_count", "Number of jobs could not be scheduled",
                                value=jobs)

    @staticmethod
    def _per_queue(facts) -> Iterator[Metric]:
        queues = facts.queues if facts is not None else ()
        for what, help_, attribute in QUEUE_FIGURES:
            cpu = GaugeMetricFamily(f"{SUBSYSTEM}_queue_{what}_milli_cpu", f"{help_} CPU count for one queue",
                                    labels=["queue_name"])
            memory = GaugeMetricFamily(f"{SUBSYSTEM}_queue_{what}_memory_bytes", f"{help_} memory for one queue",
                                       labels=["queue_name"])
            scalar = GaugeMetricFamily(f"{SUBSYSTEM}_queue_{what}_scalar_resources",
                                       f"{help_} scalar resources for one queue", labels=["queue_name", "resource"])
            for q in queues:
                amounts: Mapping[str, float] = getattr(q, attribute) or {}
                # A resource the queue has no figure for (capability unset) has no series.
                for resource, amount in amounts.items():
                    if resource == CPU:
                        cpu.add_metric([q.name], amount)
                    elif resource == MEMORY:
                        memory.add_metric([q.name], amount)
                    else:
                        scalar.add_metric([q.name, resource], amount)
            yield from (cpu, memory, scalar)
        share = GaugeMetricFamily(f"{SUBSYSTEM}_queue_share", "Share for one queue", labels=["queue_name"])
        weight = GaugeMetricFamily(f"{SUBSYSTEM}_queue_weight", "Weight for one queue", labels=["queue_name"])
        overused = GaugeMetricFamily(f"{SUBSYSTEM}_queue_overused", "If one queue is overused", labels=["queue_name"])
        groups = {phase: GaugeMetricFamily(f"{SUBSYSTEM}_queue_pod_group_{name}_count",
                                           f"The number of {phase} PodGroup in this queue", labels=["queue_name"])
                  for phase, name in PODGROUP_PHASES.items()}
        for q in queues:
            share.add_metric([q.name], q.share or 0.0)
            weight.add_metric([q.name], q.weight)
            overused.add_metric([q.name], 1 if q.overused else 0)
            for phase, family in groups.items():
                family.add_metric([q.name], q.podgroups.get(phase, 0))
        yield from (share, weight, overused, *groups.values())
