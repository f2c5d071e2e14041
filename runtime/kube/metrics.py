"""The scheduler's Prometheus metrics: one `Metrics` object per scheduler, which the connector
records binds, evictions, status writes and watch restarts into, and the service loop its
cycles, queues, leadership and policy reloads (runtime/service/server.py serves them).

Every metric is prefixed `policydsl_` and lives in the scheduler's own CollectorRegistry (not
the process-global one), so two schedulers in one process — tests do that — never collide.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from runtime.cluster.connection import QueueUsage
from runtime.kube.volcano_metrics import VolcanoMetrics

PREFIX = "policydsl"
# Cycles are tens of microseconds on an idle cluster and seconds with 10k pending pods.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# A reload reads and compiles a few small files: milliseconds, up to a second on a cold start.
RELOAD_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, *, volcano: bool = False) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # Volcano's own metric names, alongside ours (runtime/kube/volcano_metrics.py).
        if volcano:
            self.volcano: VolcanoMetrics | None = VolcanoMetrics(r)
        else:
            self.volcano = None
        self.e2e_latency = Histogram(f"{PREFIX}_e2e_scheduling_duration_seconds",
                                     "One scheduling cycle: snapshot, actions, and applying the decisions.",
                                     buckets=LATENCY_BUCKETS, registry=r)
        self.action_latency = Histogram(f"{PREFIX}_action_duration_seconds", "One action of a cycle.",
                                        ["action"], buckets=LATENCY_BUCKETS, registry=r)
        self.bind_latency = Histogram(f"{PREFIX}_bind_duration_seconds", "One Binding request, retries included.",
                                      buckets=LATENCY_BUCKETS, registry=r)
        self.pods_scheduled = Counter(f"{PREFIX}_pods_scheduled", "Pods bound to a node.", registry=r)
        self.pods_unschedulable = Counter(f"{PREFIX}_pods_unschedulable",
                                          "Pods a cycle left waiting (counted once per cycle).", registry=r)
        self.pods_waiting = Gauge(f"{PREFIX}_pods_waiting", "Pods the last cycle left waiting.", registry=r)
        self.evictions = Counter(f"{PREFIX}_evictions", "Evictions by result (evicted, blocked, gone, failed).",
                                 ["result"], registry=r)
        # Whether evictions buy anything (runtime/engine/evictions.py; the window is the policy's
        # reservation_seconds).
        self.wasted_evictions = Counter(f"{PREFIX}_wasted_evictions",
                                        "Evictions whose beneficiary did not bind within the reservation time.",
                                        registry=r)
        self.repeated_evictions = Counter(f"{PREFIX}_repeated_evictions",
                                          "Pods evicted again within the reservation time of their last eviction.",
                                          registry=r)
        self.traded_evictions = Counter(f"{PREFIX}_traded_evictions",
                                        "Evictions giving a queue back room taken from it within the reservation "
                                        "time (ping-pong).", registry=r)
        self.reservations = Gauge(f"{PREFIX}_reservations",
                                  "Pods holding room freed for them (nominated to a node), after the last cycle.",
                                  registry=r)
        self.reservations_released = Counter(f"{PREFIX}_reservations_released",
                                             "Reservations that ended without a binding.", registry=r)
        self.bind_errors = Counter(f"{PREFIX}_bind_errors",
                                  "Binds that failed after retries (no answer, 429, 5xx): tried again next cycle.",
                                  registry=r)
        self.bind_refused = Counter(f"{PREFIX}_bind_refused",
                                    "Binds the API server refused for good, by HTTP status (404 deleted, 409 bound "
                                    "elsewhere, 403 forbidden, 422 invalid): the pod is held back until it changes.",
                                    ["code"], registry=r)
        self.watch_restarts = Counter(f"{PREFIX}_watch_restarts",
                                      "Watches started again (reason: error = connection lost, expired = 410 Gone).",
                                      ["resource", "reason"], registry=r)
        self.status_writes = Counter(f"{PREFIX}_status_writes", "PodGroup and Queue status writes.", ["kind"],
                                     registry=r)
        self.events_dropped = Counter(f"{PREFIX}_events_dropped", "Events not sent: the queue was full.", registry=r)
        self.cycle_errors = Counter(f"{PREFIX}_cycle_errors", "Cycles that raised.", registry=r)
        # Queue gauges, one unit each: cpu in cores, memory in bytes, any other resource in the
        # units its quantity counts (GPUs, device memory slices, ...), labelled with it.
        self.queue_allocated = _QueueGauges("allocated", "Allocated", r)
        self.queue_deserved = _QueueGauges("deserved", "Deserved", r)
        self.queue_share = Gauge(f"{PREFIX}_queue_share_ratio", "max over resources of allocated / deserved.",
                                 ["queue"], registry=r)
        self.queue_pending_jobs = Gauge(f"{PREFIX}_queue_pending_jobs",
                                        "Jobs with a pod waiting, or not admitted yet, after the last cycle.",
                                        ["queue"], registry=r)
        self.queue_unschedulable_jobs = Gauge(f"{PREFIX}_queue_unschedulable_jobs",
                                              "Pending jobs the last cycle tried and could not place (or knows why "
                                              "they wait).", ["queue"], registry=r)
        # A queue's guarantee or explicit deserved share that its parent's room (the cluster, for
        # top-level queues) cannot hold: what it misses, in the queue gauges' units.
        self.queue_unmet_promise = Gauge(f"{PREFIX}_queue_unmet_promise",
                                         "What a queue is promised (kind: guarantee or deserved) but the cluster "
                                         "cannot hold once its siblings take theirs (cpu in cores, memory in bytes, "
                                         "other resources in their quantity's units); 0 series are not kept.",
                                         ["queue", "resource", "kind"], registry=r)
        self._unmet_series: set[tuple[str, str, str]] = set()
        self.is_leader = Gauge(f"{PREFIX}_is_leader", "1 while this replica holds the leader lease.", registry=r)
        # The policy and its hot reload (runtime/service/reload.py).
        self.policy_reloads = Counter(f"{PREFIX}_policy_reload", "Policy reloads by result (success, error).",
                                      ["result"], registry=r)
        for result in ("success", "error"):
            self.policy_reloads.labels(result=result)
        self.policy_last_reload_success = Gauge(f"{PREFIX}_policy_last_reload_success_timestamp_seconds",
                                                "When a policy last loaded without errors (Unix time).", registry=r)
        self.policy_reload_latency = Histogram(f"{PREFIX}_policy_reload_duration_seconds",
                                               "A reload: reading, compiling and validating the changed policy.",
                                               buckets=RELOAD_BUCKETS, registry=r)
        self.policy_active = Gauge(f"{PREFIX}_policy_active_info", "1 for the policy scheduling cycles run under.",
                                   ["name", "revision"], registry=r)
        self.policy_cycles = Counter(f"{PREFIX}_policy_cycles", "Cycles run under the active policy revision.",
                                     ["revision"], registry=r)
        # The plugins' outside sources: the extender plugin's HTTP extender, the usage plugin's metrics.
        self.extender_failures = Counter(f"{PREFIX}_extender_failures",
                                         "Cycles in which an extender verb got no answer, by verb and ignorable.",
                                         ["verb", "ignorable"], registry=r)
        self.node_usage_source_up = Gauge(f"{PREFIX}_node_usage_source_up",
                                          "1 while the usage plugin's metrics source answered its last read.",
                                          registry=r)
        self.node_usage_nodes = Gauge(f"{PREFIX}_node_usage_nodes",
                                      "Nodes the usage plugin's metrics source last gave load figures for.",
                                      registry=r)
        self._active_policy: tuple[str, str] | None = None
        self._share_queues: set[str] = set()
        self._job_queues: set[str] = set()
        self._lock = threading.Lock()

    def watch_restarted(self, resource: str, reason: str) -> None:
        self.watch_restarts.labels(resource=resource, reason=reason).inc()

    def set_active_policy(self, name: str, revision: str) -> None:
        """The policy cycles run under from now on; the previous one's series go (one active at a time)."""
        with self._lock:
            if self._active_policy == (name, revision):
                return
            if self._active_policy is not None:
                old_name, old_revision = self._active_policy
                self.policy_active.remove(old_name, old_revision)
                if old_revision != revision:
                    try:
                        self.policy_cycles.remove(old_revision)
                    except KeyError:  # no cycle ran under it
                        pass
            self.policy_active.labels(name=name, revision=revision).set(1)
            self._active_policy = (name, revision)

    def set_queues(self, usage: Mapping[str, QueueUsage]) -> None:
        """Replace the queue gauges (series of queues that disappeared are removed)."""
        with self._lock:
            allocated = {name: u.allocated for name, u in usage.items()}
            deserved = {name: u.deserved for name, u in usage.items() if u.deserved}
            self.queue_allocated.replace(allocated)
            self.queue_deserved.replace(deserved)
            for name, u in usage.items():
                if u.share is not None:
                    self.queue_share.labels(queue=name).set(u.share)
            for name in self._share_queues - {n for n, u in usage.items() if u.share is not None}:
                _remove(self.queue_share, (name,))
            self._share_queues = {n for n, u in usage.items() if u.share is not None}

    def set_queue_jobs(self, queues) -> None:
        """Pending and unschedulable jobs per queue (runtime.service.views.QueueRow)."""
        with self._lock:
            names = set()
            for q in queues:
                self.queue_pending_jobs.labels(queue=q.name).set(q.pending_jobs)
                self.queue_unschedulable_jobs.labels(queue=q.name).set(q.unschedulable_jobs)
                names.add(q.name)
            for gone in self._job_queues - names:
                _remove(self.queue_pending_jobs, (gone,))
                _remove(self.queue_unschedulable_jobs, (gone,))
            self._job_queues = names

    def set_unmet_promises(self, unmet) -> None:
        """Replace the unmet-promise gauge from runtime.engine.queueshare.UnmetPromise records."""
        with self._lock:
            seen: set[tuple[str, str, str]] = set()
            for promise in unmet:
                for queue, amount in promise.queues:
                    missed = promise.shortfall(amount)
                    if missed <= 0:
                        continue
                    labels = (queue, promise.resource, promise.kind)
                    self.queue_unmet_promise.labels(*labels).set(missed / 1000 if promise.resource == "cpu" else missed)
                    seen.add(labels)
            for labels in self._unmet_series - seen:
                _remove(self.queue_unmet_promise, labels)
            self._unmet_series = seen

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _remove(gauge: Gauge, labels: tuple[str, ...]) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass


class _QueueGauges:
    """policydsl_queue_<what>_cpu_cores, _memory_bytes and _resource{resource} (other resources,
    in their quantity's own units), per queue, from base units."""

    def __init__(self, what: str, help_: str, registry: CollectorRegistry) -> None:
        self.cpu = Gauge(f"{PREFIX}_queue_{what}_cpu_cores", f"{help_} cpu per queue (cores).", ["queue"],
                         registry=registry)
        self.memory = Gauge(f"{PREFIX}_queue_{what}_memory_bytes", f"{help_} memory per queue (bytes).", ["queue"],
                            registry=registry)
        self.other = Gauge(f"{PREFIX}_queue_{what}_resource", f"{help_} of other resources per queue (in the "
                           "units of the resource's quantity).", ["queue", "resource"], registry=registry)
        self._series: set[tuple[Gauge, tuple[str, ...]]] = set()

    def replace(self, amounts: Mapping[str, Mapping[str, float]]) -> None:
        seen: set[tuple[Gauge, tuple[str, ...]]] = set()
        for queue, per_resource in amounts.items():
            for resource, amount in per_resource.items():
                if resource == "cpu":
                    gauge, labels, value = self.cpu, (queue,), amount / 1000
                elif resource == "memory":
                    gauge, labels, value = self.memory, (queue,), amount
                else:
                    gauge, labels, value = self.other, (queue, resource), amount
                gauge.labels(*labels).set(value)
                seen.add((gauge, labels))
        for gauge, labels in self._series - seen:
            _remove(gauge, labels)
        self._series = seen
