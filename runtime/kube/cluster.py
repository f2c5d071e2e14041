"""A real cluster as the scheduler's ClusterConnection: the watch cache to read, and the writers
(Binding, Eviction, status, Events) to make a cycle's decisions true.

Order of `apply`: evictions, then binds (both concurrent on one thread pool; each success is
laid over the cache at once, see ClusterCache.assume_*), then PodGroup and Queue status —
which can then tell about failed binds — then Events (asynchronous).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from runtime import decisions as d
from runtime.kube import status as st
from runtime.kube.api import KubeApi
from runtime.kube.binder import BOUND, DROPPED, FAILED, Binder, BindOutcome
from runtime.kube.cache import ClusterCache
from runtime.kube.events import EventRecorder, InvolvedObject
from runtime.kube.evictor import BLOCKED, EVICTED, Evictor
from runtime.kube.scheduler import ApplyReport
from runtime.metrics import Metrics, QueueUsage
from runtime.model import PG_INQUEUE, PG_RUNNING, ClusterState, Pod, group_key_of
from runtime.objects import ObjectProblem

log = logging.getLogger("policydsl.kube")

WRITE_WORKERS = 32
EVICTION_REASONS = {d.PREEMPTION: "Preempted", d.RECLAIM: "Reclaimed"}


def pod_ref(pod: Pod) -> InvolvedObject:
    return InvolvedObject("Pod", "v1", pod.namespace, pod.name, pod.uid)


class KubeCluster:
    def __init__(self, api: KubeApi, scheduler_name: str, *, identity: str, metrics: Metrics | None = None,
                 may_write: Callable[[], bool] = lambda: True, workers: int = WRITE_WORKERS,
                 event_rate: float = 20.0, event_burst: int = 200) -> None:
        self.api = api
        self.metrics = metrics or Metrics()
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="kube-write")
        self.cache = ClusterCache(api, scheduler_name, on_watch_restart=self.metrics.watch_restarted)
        self.binder = Binder(api, self.executor, may_write=may_write)
        self.evictor = Evictor(api, self.executor, may_write=may_write)
        self.status = st.StatusWriter(api, self.cache, self.executor, may_write=may_write)
        self.events = EventRecorder(api, scheduler_name, identity, rate=event_rate, burst=event_burst,
                                    may_write=may_write, on_dropped=self.metrics.events_dropped.inc)

    # --- ClusterConnection -------------------------------------------------------------------
    def start(self) -> None:
        self.cache.start()
        self.events.start()

    def stop(self) -> None:
        self.events.stop()
        self.executor.shutdown(wait=True)
        self.cache.stop()

    @property
    def synced(self) -> bool:
        return self.cache.synced

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.cache.wait_synced(timeout)

    def snapshot(self) -> ClusterState:
        return self.cache.snapshot()

    def report_invalid(self, problems: list[ObjectProblem], state: ClusterState) -> None:
        for problem in problems:
            group = self.cache.podgroup(problem.name)
            if group is not None:
                namespace, name = problem.name.split("/", 1)
                ref = InvolvedObject("PodGroup", "scheduling.volcano.sh/v1beta1", namespace, name, group.uid)
                self.events.record(ref, "Warning", "InvalidPodGroup", problem.message)

    def apply(self, decisions: d.Decisions, state: ClusterState, usage: Mapping[str, QueueUsage]) -> ApplyReport:
        report = ApplyReport()
        pods = state.pods
        self._evict(decisions.evictions, pods, report)
        failures = self._bind(decisions.bindings, pods, report)
        report.status_writes = self._write_status(decisions, state, usage, failures)
        report.events = self._record_waiting(decisions, pods)
        return report

    # --- steps -----------------------------------------------------------------------------------
    def _evict(self, evictions: list[d.Eviction], pods: Mapping[str, Pod], report: ApplyReport) -> None:
        if not evictions:
            return
        for eviction, outcome in zip(evictions, self.evictor.evict_all(evictions, pods)):
            self.metrics.evictions.labels(result=outcome.result).inc()
            pod = pods.get(eviction.pod)
            if outcome.result == EVICTED and pod is not None:
                report.evicted += 1
                self.cache.assume_releasing(eviction.pod)
                reason = EVICTION_REASONS.get(eviction.reason.kind, "Evicted")
                self.events.record(pod_ref(pod), "Normal", reason, eviction.reason.message)
            elif outcome.result == BLOCKED:
                report.eviction_blocked += 1
                log.info("eviction of %s refused, will retry: %s", eviction.pod, outcome.detail)
            elif outcome.result != EVICTED and outcome.detail and outcome.result != "gone":
                report.eviction_failed += 1
                log.warning("eviction of %s failed: %s", eviction.pod, outcome.detail)

    def _bind(self, bindings: list[d.Binding], pods: Mapping[str, Pod],
              report: ApplyReport) -> dict[str, list[BindOutcome]]:
        """Bind; returns the failed outcomes per PodGroup key."""
        if not bindings:
            return {}

        def assume(outcome: BindOutcome) -> None:
            self.cache.assume_bound(outcome.pod, outcome.node, dict(outcome.annotations or {}))

        failures: dict[str, list[BindOutcome]] = defaultdict(list)
        for outcome in self.binder.bind_all(bindings, pods, on_bound=assume):
            if outcome.result == BOUND:
                report.bound += 1
            elif outcome.result == DROPPED:
                report.dropped += 1
                self.metrics.bind_dropped.inc()
                log.info("bind of %s dropped: %s", outcome.pod, outcome.detail)
            elif outcome.result == FAILED:
                report.bind_failed += 1
                self.metrics.bind_errors.inc()
                pod = pods.get(outcome.pod)
                log.warning("bind of %s to %s failed: %s", outcome.pod, outcome.node, outcome.detail)
                if pod is not None:
                    self.events.record(pod_ref(pod), "Warning", "FailedBinding",
                                       f"binding to {outcome.node} failed: {outcome.detail}")
                    failures[group_key_of(pod)].append(outcome)
        return failures

    def _write_status(self, decisions: d.Decisions, state: ClusterState, usage: Mapping[str, QueueUsage],
                      failures: Mapping[str, list[BindOutcome]]) -> int:
        now, transition = st.now_text(), st.new_transition_id()
        counts = st.pod_counts(state)
        bound_in_cycle: dict[str, int] = defaultdict(int)
        for binding in decisions.bindings:
            pod = state.pods.get(binding.pod)
            if pod is not None:
                bound_in_cycle[group_key_of(pod)] += 1
        updates = []
        phases: dict[str, list[str]] = defaultdict(list)
        for pg in decisions.podgroups:
            phase, conditions = pg.phase, pg.conditions
            failed = failures.get(pg.name)
            if failed:
                # The gang is short of what the cycle decided; the next cycle places the rest.
                phase = PG_INQUEUE if phase == PG_RUNNING else phase
                conditions = (st.bind_failure_condition(len(failed), bound_in_cycle[pg.name], failed[0].detail),)
                group = self.cache.podgroup(pg.name)
                if group is not None:
                    namespace, name = pg.name.split("/", 1)
                    ref = InvolvedObject("PodGroup", "scheduling.volcano.sh/v1beta1", namespace, name, group.uid)
                    self.events.record(ref, "Warning", st.BIND_FAILED, conditions[0].message)
            group = state.podgroups.get(pg.name)
            if group is not None:
                phases[group.queue].append(phase)
            update = st.podgroup_update(pg.name, self.cache.podgroup_status(pg.name), phase, conditions,
                                        counts.get(pg.name, {"running": 0, "succeeded": 0}), now=now,
                                        transition_id=transition)
            if update is not None:
                updates.append(update)
        written = self.status.write_podgroups(updates)
        self.metrics.status_writes.labels(kind="PodGroup").inc(written)
        queue_updates = []
        for name in self.cache.queue_objects():
            use = usage.get(name)
            update = st.queue_update(name, self.cache.queue_status(name), use.allocated if use else {},
                                     phases.get(name, []))
            if update is not None:
                queue_updates.append(update)
        queues_written = self.status.write_queues(queue_updates)
        self.metrics.status_writes.labels(kind="Queue").inc(queues_written)
        return written + queues_written

    def _record_waiting(self, decisions: d.Decisions, pods: Mapping[str, Pod]) -> int:
        queued = 0
        waiting: set[str] = set()
        for item in decisions.unschedulable:
            pod = pods.get(item.pod)
            if pod is None or not item.reasons:
                continue
            ref = pod_ref(pod)
            waiting.add(ref.key)
            message = "; ".join(r.message for r in item.reasons)
            queued += self.events.record(ref, "Warning", "FailedScheduling", message)
        self.events.forget(lambda key: key in waiting or not key.startswith("Pod/"))
        return queued
