"""The metrics Volcano's scheduler exposes, under Volcano's names and labels, so that a migrating
user's dashboards and alerts keep working (`policydsl run --volcano-metrics`, on by default).

Names, labels, units and buckets as volcano-sh/volcano pkg/scheduler/metrics (v1.14) defines
them, and the queue PodGroup counts of its controllers' pkg/controllers/metrics. The mapping,
and what is measured differently, is in docs/observability.md. Each is set from what a cycle
computed anyway (runtime/observe.py SessionFacts, the Decisions): no extra pass over the pods.

Series that name a job or a queue are removed when the job stops waiting or the queue goes, so
their number stays that of the jobs and queues there are (Volcano keeps them until restart).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from runtime import decisions as d
from runtime.model import PG_COMPLETED, PG_INQUEUE, PG_PENDING, PG_RUNNING, PG_UNKNOWN, ClusterState

SUBSYSTEM = "volcano"


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """prometheus.ExponentialBuckets."""
    return tuple(start * factor ** i for i in range(count))


LATENCY_MS_BUCKETS = exponential_buckets(5, 2, 15)          # e2e, action, task latency
JOB_LATENCY_MS_BUCKETS = exponential_buckets(32, 2, 10)     # e2e job latency
CPU, MEMORY = "cpu", "memory"
PODGROUP_PHASES = {PG_INQUEUE: "inqueue", PG_PENDING: "pending", PG_RUNNING: "running", PG_UNKNOWN: "unknown",
                   PG_COMPLETED: "completed"}


class _QueueResourceGauges:
    """One of Volcano's queue_<what>_{milli_cpu,memory_bytes,scalar_resources} triples."""

    def __init__(self, what: str, help_: str, registry: CollectorRegistry) -> None:
        self.cpu = Gauge(f"{SUBSYSTEM}_queue_{what}_milli_cpu", f"{help_} CPU count for one queue", ["queue_name"],
                         registry=registry)
        self.memory = Gauge(f"{SUBSYSTEM}_queue_{what}_memory_bytes", f"{help_} memory for one queue",
                            ["queue_name"], registry=registry)
        self.scalar = Gauge(f"{SUBSYSTEM}_queue_{what}_scalar_resources", f"{help_} scalar resources for one queue",
                            ["queue_name", "resource"], registry=registry)
        self._series: set[tuple[Gauge, tuple[str, ...]]] = set()

    def set(self, queue: str, amounts: Mapping[str, float]) -> set[tuple[Gauge, tuple[str, ...]]]:
        """Set the queue's series; a resource it has no figure for (capability unset) has none."""
        seen = set()
        for resource, amount in amounts.items():
            if resource == CPU:
                gauge, labels = self.cpu, (queue,)
            elif resource == MEMORY:
                gauge, labels = self.memory, (queue,)
            else:
                gauge, labels = self.scalar, (queue, resource)
            gauge.labels(*labels).set(amount)
            seen.add((gauge, labels))
        return seen

    def keep(self, series: set[tuple[Gauge, tuple[str, ...]]]) -> None:
        for gauge, labels in self._series - series:
            _remove(gauge, labels)
        self._series = series


class VolcanoMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.e2e_latency = Histogram(f"{SUBSYSTEM}_e2e_scheduling_latency_milliseconds",
                                     "E2e scheduling latency in milliseconds (scheduling algorithm + binding)",
                                     buckets=LATENCY_MS_BUCKETS, registry=r)
        self.job_latency = Histogram(f"{SUBSYSTEM}_e2e_job_scheduling_latency_milliseconds",
                                     "E2e job scheduling latency in milliseconds", buckets=JOB_LATENCY_MS_BUCKETS,
                                     registry=r)
        job_labels = ["job_name", "queue", "job_namespace"]
        self.job_duration = Gauge(f"{SUBSYSTEM}_e2e_job_scheduling_duration", "E2E job scheduling duration",
                                  job_labels, registry=r)
        self.job_start = Gauge(f"{SUBSYSTEM}_e2e_job_scheduling_start_time", "E2E job scheduling start time",
                               job_labels, registry=r)
        self.job_last = Gauge(f"{SUBSYSTEM}_e2e_job_scheduling_last_time", "E2E job scheduling last time",
                              job_labels, registry=r)
        self.action_latency = Histogram(f"{SUBSYSTEM}_action_scheduling_latency_milliseconds",
                                        "Action scheduling latency in milliseconds", ["action"],
                                        buckets=LATENCY_MS_BUCKETS, registry=r)
        self.task_latency = Histogram(f"{SUBSYSTEM}_task_scheduling_latency_milliseconds",
                                      "Task scheduling latency in milliseconds", buckets=LATENCY_MS_BUCKETS,
                                      registry=r)
        self.attempts = Counter(f"{SUBSYSTEM}_schedule_attempts",
                                "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
                                "could not be scheduled, while 'error' means an internal scheduler problem.",
                                ["result"], registry=r)
        for result in ("scheduled", "unschedulable", "error"):
            self.attempts.labels(result=result)
        self.preemption_victims = Gauge(f"{SUBSYSTEM}_pod_preemption_victims", "Number of selected preemption victims",
                                        registry=r)
        # A counter in Volcano, but its name has no `_total` suffix, which prometheus_client
        # adds to every counter: a gauge that only goes up keeps the name (rate() works alike).
        self.preemption_attempts = Gauge(f"{SUBSYSTEM}_total_preemption_attempts",
                                         "Total preemption attempts in the cluster till now", registry=r)
        self.unschedule_tasks = Gauge(f"{SUBSYSTEM}_unschedule_task_count", "Number of tasks could not be scheduled",
                                      ["job_id"], registry=r)
        self.unschedule_jobs = Gauge(f"{SUBSYSTEM}_unschedule_job_count", "Number of jobs could not be scheduled",
                                     registry=r)
        self.allocated = _QueueResourceGauges("allocated", "Allocated", r)
        self.request = _QueueResourceGauges("request", "Request", r)
        self.deserved = _QueueResourceGauges("deserved", "Deserved", r)
        self.capacity = _QueueResourceGauges("capacity", "Capacity", r)
        self.real_capacity = _QueueResourceGauges("real_capacity", "Capacity", r)
        self.queue_share = Gauge(f"{SUBSYSTEM}_queue_share", "Share for one queue", ["queue_name"], registry=r)
        self.queue_weight = Gauge(f"{SUBSYSTEM}_queue_weight", "Weight for one queue", ["queue_name"], registry=r)
        self.queue_overused = Gauge(f"{SUBSYSTEM}_queue_overused", "If one queue is overused", ["queue_name"],
                                    registry=r)
        self.podgroups = {phase: Gauge(f"{SUBSYSTEM}_queue_pod_group_{name}_count",
                                       f"The number of {phase} PodGroup in this queue", ["queue_name"], registry=r)
                          for phase, name in PODGROUP_PHASES.items()}
        self._unschedulable_jobs: set[tuple[str]] = set()
        self._scheduled_jobs: set[tuple[str, str, str]] = set()

    def cycle_failed(self) -> None:
        self.attempts.labels(result="error").inc()

    def cycle(self, seconds: float, actions: Iterable[tuple[str, float]], facts, decisions: d.Decisions,
              state: ClusterState | None = None, now: float | None = None) -> None:
        """One cycle's figures: `facts` is its runtime.observe.SessionFacts."""
        self.e2e_latency.observe(seconds * 1000)
        for action, spent in actions:
            self.action_latency.labels(action=action).observe(spent * 1000)
        self.attempts.labels(result="scheduled").inc(len(decisions.bindings))
        self.attempts.labels(result="unschedulable").inc(len(decisions.unschedulable))
        victims = sum(1 for e in decisions.evictions if e.reason.kind == d.PREEMPTION)
        self.preemption_victims.set(victims)
        if victims:
            self.preemption_attempts.inc()
        if state is not None and now is not None:
            self._bound(decisions, state, now)
        self._queues(facts)

    def _bound(self, decisions: d.Decisions, state: ClusterState, now: float) -> None:
        """Task latency (creation to the bind dispatched) and, for gangs this cycle made whole,
        the job's (its PodGroup's creation to now)."""
        for binding in decisions.bindings:
            pod = state.pods.get(binding.pod)
            if pod is not None and pod.creation:
                self.task_latency.observe(max(0.0, now - pod.creation) * 1000)
        for status in decisions.podgroups:
            group = state.podgroups.get(status.name)
            if group is None or status.phase != PG_RUNNING or group.phase == PG_RUNNING or not group.creation:
                continue
            latency = max(0.0, now - group.creation)
            self.job_latency.observe(latency * 1000)
            labels = (group.name, group.queue, group.namespace)
            self.job_duration.labels(*labels).set(latency)
            self.job_start.labels(*labels).set(group.creation)
            self.job_last.labels(*labels).set(now)
            self._scheduled_jobs.add(labels)
        # Jobs that are gone take their series with them.
        for labels in list(self._scheduled_jobs):
            if f"{labels[2]}/{labels[0]}" not in state.podgroups:
                for gauge in (self.job_duration, self.job_start, self.job_last):
                    _remove(gauge, labels)
                self._scheduled_jobs.discard(labels)

    def _queues(self, facts) -> None:
        names = {q.name for q in facts.queues}
        scalars: dict[str, set] = {k: set() for k in ("allocated", "request", "deserved", "capacity", "real")}
        unschedulable: set[tuple[str]] = set()
        unschedulable_jobs = 0
        for q in facts.queues:
            scalars["allocated"] |= self.allocated.set(q.name, q.allocated)
            scalars["request"] |= self.request.set(q.name, q.request)
            scalars["deserved"] |= self.deserved.set(q.name, q.deserved or {})
            scalars["capacity"] |= self.capacity.set(q.name, q.capability)
            scalars["real"] |= self.real_capacity.set(q.name, q.real_capability)
            self.queue_share.labels(queue_name=q.name).set(q.share or 0.0)
            self.queue_weight.labels(queue_name=q.name).set(q.weight)
            self.queue_overused.labels(queue_name=q.name).set(1 if q.overused else 0)
            for phase, gauge in self.podgroups.items():
                gauge.labels(queue_name=q.name).set(q.podgroups.get(phase, 0))
        for queue, entries in facts.pending.items():
            for e in entries:
                if e.waiting_pods:
                    # Volcano labels it with the job's name alone (job_id = job.Name).
                    label = (e.key.split("/", 1)[-1],)
                    self.unschedule_tasks.labels(*label).set(e.waiting_pods)
                    unschedulable.add(label)
                    unschedulable_jobs += 1
        self.unschedule_jobs.set(unschedulable_jobs)
        for stale in self._unschedulable_jobs - unschedulable:
            _remove(self.unschedule_tasks, stale)
        self._unschedulable_jobs = unschedulable
        self.allocated.keep(scalars["allocated"])
        self.request.keep(scalars["request"])
        self.deserved.keep(scalars["deserved"])
        self.capacity.keep(scalars["capacity"])
        self.real_capacity.keep(scalars["real"])
        for gauge in (self.queue_share, self.queue_weight, self.queue_overused, *self.podgroups.values()):
            _keep(gauge, {(n,) for n in names})


def _keep(gauge: Gauge, labels: set[tuple[str, ...]]) -> None:
    """Remove the gauge's series whose labels are not in `labels`."""
    for sample_labels in list(_label_sets(gauge)):
        if sample_labels not in labels:
            _remove(gauge, sample_labels)


def _label_sets(gauge: Gauge) -> list[tuple[str, ...]]:
    return list(gauge._metrics.keys())  # prometheus_client keeps its children by label values


def _remove(gauge: Gauge, labels: tuple[str, ...]) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
