"""The scheduling loop: every period, snapshot the cluster, run one cycle, apply the decisions.

    scheduler = Scheduler(plan, cluster, scheduler_name="volcano", period=1.0, min_interval=0.1,
                          metrics=Metrics())
    scheduler.run(stop_event)           # until stop_event is set; finishes the cycle in progress
    scheduler.set_plan(new_plan)        # takes effect at the start of the next cycle, which starts at once

A cycle starts every `period` (start to start), and sooner when the connection reports new work
(a pod to place, a PodGroup): then as soon as `min_interval` has passed since the last cycle
started and the pause after it has lasted twice as long as the cycle did (PAUSE_PER_CYCLE). So
a pod created into a quiet cluster waits at most `min_interval` instead of up to a whole period,
while under a steady stream of arrivals the loop never takes more than a third of a core,
whatever the cluster's size. `min_interval >= period` gives Volcano's fixed period.

`cluster` is a `ClusterConnection`: `runtime.kube.cluster.KubeCluster` (a real API server) or
`runtime.service.embedded.EmbeddedCluster` (a ClusterState in memory). With an `elector`, only
the leader runs cycles, and every write checks again that it still leads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from compiler.plan import Plan
from runtime.engine import queueshare
from runtime.engine.cycle import Options, VictimsNeeded, run_cycle
from runtime.cluster.decisions import JOB, Decisions, Reason
from runtime.engine.evictions import EvictionAudit, eviction_jobs, eviction_queues, reservation_seconds
from runtime.cluster.connection import FOREIGN_SCHEDULER, ApplyReport, ClusterConnection, QueueUsage
from runtime.kube.api import ApiError
from runtime.kube.metrics import Metrics
from runtime.cluster.model import ClusterState, group_key_of
from runtime.cluster.nodeusage import ApiGet, NodeUsageFeed, SourceUnreachable
from runtime.engine.plugins.extender import failed_verbs
from runtime.cluster.objects import check_queues
from runtime.service.views import CycleView, LiveView, SessionFacts, session_facts, with_podgroup_phases
from runtime.engine.session import Session
from runtime.engine.snapshot import UNLIMITED, VICTIM_ACTIONS, SnapshotCache, folds_settled

log = logging.getLogger("policydsl.scheduler")

ERROR_LOG_EVERY_S = 30.0
UNHEALTHY_AFTER_FAILED_CYCLES = 3   # /healthz answers 500 once this many cycles in a row failed
PAUSE_SLICE_S = 0.05  # how often the pause between cycles looks at `stop`
# An early cycle waits this many times the last cycle's duration after it: under a stream of
# arrivals the loop takes at most a third of a core, leaving the rest to binds, watches and the
# API server it shares the machine with (2 measured ~10% less processor time per pod than 1 on
# the side-by-side benchmark's gang workload, at the same latency).
PAUSE_PER_CYCLE = 2.0
# After a cycle that had to list the settled pods as victims, so many more list them at once
# (a cluster preempting now is likely to preempt next cycle too) before folding is tried again.
LIST_VICTIMS_CYCLES = 10
# The views' queue rows and pending order, and the Volcano-named queue metrics, are taken from
# a cycle at most this often (and at every new policy revision): under a stream of arrivals
# cycles run ten times a second, and the figures cost O(jobs + PodGroups) each time, for
# readers that refresh every few seconds. The reasons (explain, conditions, Events) are each
# cycle's own.
FACTS_EVERY_S = 1.0


class Elector(Protocol):
    def is_leader(self) -> bool: ...


@dataclass(frozen=True)
class CycleReport:
    number: int
    decisions: Decisions
    applied: ApplyReport
    seconds: float
    revision: str = ""  # the Plan the whole cycle ran under


@dataclass
class CycleRecord:
    """The cycle observer: action durations and each queue's usage when the session closes."""

    actions: list[tuple[str, float]] = field(default_factory=list)
    usage: dict[str, QueueUsage] = field(default_factory=dict)
    want_facts: bool = False        # the live view's queue rows and pending order (runtime/service/views.py)
    facts: SessionFacts | None = None
    # Queues that cannot run their jobs (queue -> why), promises the cluster cannot keep, and
    # queues of weight 0 where a plugin shares by weight (queue -> what that means).
    queue_problems: dict[str, str] = field(default_factory=dict)
    unmet: list[queueshare.UnmetPromise] = field(default_factory=list)
    weightless: dict[str, str] = field(default_factory=dict)

    def action_finished(self, action: str, seconds: float) -> None:
        self.actions.append((action, seconds))

    def session_finished(self, ssn: Session) -> None:
        self.usage = queue_usage(ssn)
        self.queue_problems = {q.name: q.problem for q in ssn.snap.queues if q.problem}
        self.unmet = queueshare.unmet_promises(ssn.snap)
        if ssn.queue_deserved is not None:
            self.weightless = {q.name: f"queue {q.name} has weight 0: it is shared nothing beyond its guarantee "
                                       f"(Volcano's Queue CRD requires a weight of at least 1)"
                               for q in ssn.snap.queues[1:] if q.weight == 0 and not q.problem}
        if self.want_facts:
            self.facts = session_facts(ssn)


def queue_usage(ssn: Session) -> dict[str, QueueUsage]:
    snap = ssn.snap
    resources = snap.resources
    columns = np.array([r for r, name in enumerate(resources) if name != "pods" and snap.total[r] > 0],
                       dtype=np.int64)
    out: dict[str, QueueUsage] = {}
    for q, info in enumerate(snap.queues):
        if q == 0:  # root
            continue
        allocated = ssn.queue_allocated[q]
        alloc = {resources[r]: int(allocated[r]) for r in columns}
        deserved = share = None
        if ssn.queue_deserved is not None:
            row = ssn.queue_deserved[q]
            deserved = {resources[r]: float(row[r]) for r in columns if row[r] < UNLIMITED}
            share = float(queueshare.share(allocated, row, columns))
        out[info.name] = QueueUsage(alloc, deserved, share)
    return out


def _metrics_api_get(cluster: ClusterConnection) -> ApiGet | None:
    """The usage plugin's `prometheus_adaptor` source reads the custom metrics API through the
    Kubernetes connector's API server connection (KubeCluster.api); other connections have none."""
    api = getattr(cluster, "api", None)
    if api is None:
        return None

    def get(path: str) -> object:
        try:
            return api.get(path)
        except ApiError as err:
            if err.status == 0:
                raise SourceUnreachable(f"the API server unreachable: {err.message}") from None
            raise ValueError(f"GET {path}: {err}") from None
    return get


class Scheduler:
    def __init__(self, plan: Plan, cluster: ClusterConnection, *, scheduler_name: str = "volcano",
                 period: float = 1.0, min_interval: float = 0.1, metrics: Metrics | None = None,
                 elector: Elector | None = None, pure_python: bool | None = None,
                 view: LiveView | None = None, facts_every: float = FACTS_EVERY_S) -> None:
        self.cluster = cluster
        self.view = view  # the last cycle for the read-only HTTP views (explain, queues, /ui)
        self.facts_every = facts_every
        self._facts: SessionFacts | None = None   # the last figures taken, with their cycle, clock and revision
        self._facts_cycle = 0
        self._facts_at = float("-inf")
        self._facts_revision = ""
        self.scheduler_name = scheduler_name
        self.period = period
        self.min_interval = min_interval
        self.metrics = metrics or Metrics()
        self.elector = elector
        self.options = Options(scheduler_name=scheduler_name, pure_python=pure_python)
        self._plan = plan
        self._next_plan: Plan | None = None
        self._plan_lock = threading.Lock()
        self._plan_arrived = threading.Event()  # a new Plan: the next cycle starts at once
        self._work_arrived = threading.Event()  # new work since the last snapshot: start early
        self._wake = threading.Event()  # either of the two: ends a wait of the pause
        self._snapshot_cache = SnapshotCache()
        self._reported: set[str] = set()
        self._queue_news: set[str] = set()   # the queue problems and unmet promises last logged
        self.cycles = 0
        self.last_tick = time.monotonic()
        self._started = self.last_tick
        self.audit = EvictionAudit()   # clocked in seconds since start, windowed by reservation_seconds
        self._list_victims = 0         # cycles left that list settled pods for a plan that may evict
        self._last_error: str | None = None
        self._last_error_logged = 0.0
        self._failing_since: float | None = None  # cycles have raised since then (monotonic)
        self.failed_cycles = 0                      # in a row, up to the last cycle
        # Node load for the usage plugin, read off the scheduling path (runtime.cluster.nodeusage).
        self.node_usage = NodeUsageFeed(api_get=_metrics_api_get(cluster))
        self.metrics.set_active_policy(plan.name, plan.revision)
        cluster.on_work(self._on_work)
        self._watch_for(plan)

    def _on_work(self) -> None:
        # Called for every pod that arrives: setting an Event takes its lock and wakes waiters,
        # so only the first arrival since the last snapshot does.
        if not self._work_arrived.is_set():
            self._work_arrived.set()
            self._wake.set()

    # --- the Plan ------------------------------------------------------------------------------
    @property
    def plan(self) -> Plan:
        return self._plan

    def set_plan(self, plan: Plan) -> None:
        """Use `plan` from the next cycle on; a cycle in progress finishes with the one it began with."""
        with self._plan_lock:
            self._next_plan = plan
        # A policy edit goes live at the next cycle, and that cycle starts without waiting out the period.
        self._plan_arrived.set()
        self._wake.set()

    def _take_plan(self) -> Plan:
        with self._plan_lock:
            if self._next_plan is not None:
                previous = self._plan
                self._plan, self._next_plan = self._next_plan, None
                self._snapshot_cache = SnapshotCache()
                self._watch_for(self._plan)
                if self._plan.revision != previous.revision:
                    log.info("policy %s revision %s active from cycle %d on (was revision %s)",
                             self._plan.name, self._plan.revision, self.cycles + 1, previous.revision)
                    self.metrics.set_active_policy(self._plan.name, self._plan.revision)
            return self._plan

    def _watch_for(self, plan: Plan) -> None:
        # The Kubernetes connector watches some kinds only for the plugins that read them
        # (KubeCluster.watch_for); other connections (embedded, benches) read every kind they hold.
        watch_for = getattr(self.cluster, "watch_for", None)
        if watch_for is not None:
            watch_for(plan)

    def _record_outside_sources(self, plan: Plan) -> None:
        """The extender's failed verbs of the cycle and the metrics source's state, as metrics."""
        ext = plan.plugin("extender")
        if ext is not None:
            ignorable = str(bool(ext.arguments.get("ignorable", False))).lower()
            for verb in failed_verbs(ext.arguments):
                self.metrics.extender_failures.labels(verb=verb, ignorable=ignorable).inc()
        watcher = self.node_usage.watcher
        if watcher is not None:
            status = watcher.status()
            self.metrics.node_usage_source_up.set(0 if status.error else 1)
            self.metrics.node_usage_nodes.set(status.nodes_read)

    def _read_load(self, plan: Plan, state: ClusterState) -> None:
        """The usage plugin's node load: the figures its metrics source last gave (never waited for)."""
        usage = plan.plugin("usage")
        if state.node_usage is None:     # a connection that brings its own figures keeps them
            state.node_usage = self.node_usage.figures(usage.arguments if usage is not None else None, state.nodes)

    # --- health -------------------------------------------------------------------------------
    def health(self) -> tuple[bool, str]:
        quiet = time.monotonic() - self.last_tick
        limit = max(30.0, 10 * self.period)
        if quiet > limit:
            return False, f"scheduling loop silent for {quiet:.0f}s"
        failed, error = self.failed_cycles, self._last_error
        if failed >= UNHEALTHY_AFTER_FAILED_CYCLES:
            return False, f"the last {failed} scheduling cycles failed: {error}"
        return True, "ok"

    def readiness(self) -> tuple[bool, str]:
        if not self.cluster.synced:
            return False, "cache not synced yet"
        return True, "ok"

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    # --- cycles -------------------------------------------------------------------------------
    def run(self, stop: threading.Event, max_cycles: int = 0) -> None:
        """Cycle every `period` (start to start), sooner on new work (see the module's doc), until
        `stop` is set or `max_cycles` ran."""
        while not stop.is_set():
            started = time.monotonic()
            self.last_tick = started
            ran = False
            if self.cluster.synced and self.leading():
                ran = True
                try:
                    self.run_once()
                    if self._failing_since is not None:
                        log.info("scheduling cycles succeed again after %.0f s of failures (last: %s)",
                                 time.monotonic() - self._failing_since, self._last_error)
                    self._last_error = self._failing_since = None
                    self.failed_cycles = 0
                except Exception as err:  # a bad cycle must not end the scheduler: log, count, go on
                    self.failed_cycles += 1
                    self.metrics.cycle_errors.inc()
                    if self.metrics.volcano is not None:
                        self.metrics.volcano.cycle_failed()
                    self._log_failure(err)
                if max_cycles and self.cycles >= max_cycles:
                    return
            else:
                self._take_plan()  # a standby holds the newest policy too: the one it will run when it leads
            ended = time.monotonic()
            # Work seen by a standby, or while the cache syncs, is in the next snapshot anyway; but
            # a standby or a syncing replica looks again every min_interval (a cheap check), so it
            # runs its first cycle that soon after taking the lease or finishing the list, not up
            # to a period later.
            early = max(started + self.min_interval, ended + PAUSE_PER_CYCLE * (ended - started)) if ran \
                else started + self.min_interval
            self._pause(stop, started + self.period if ran else early, early)

    def _pause(self, stop: threading.Event, deadline: float, early: float) -> None:
        """Wait until `deadline` (monotonic), or until `early` if work arrived (before or during
        the wait), or until a new Plan arrived (also during the cycle), or `stop`."""
        while not stop.is_set():
            self._wake.clear()  # before the flags are read: a wake-up after this ends the wait below
            now = time.monotonic()
            if now >= deadline or self._plan_arrived.is_set() or (self._work_arrived.is_set() and now >= early):
                break
            until = min(deadline, early) if self._work_arrived.is_set() else deadline
            self._wake.wait(min(max(0.0, until - now), PAUSE_SLICE_S))
        self._plan_arrived.clear()

    def _log_failure(self, err: Exception) -> None:
        """The traceback once; the same failure again only every ERROR_LOG_EVERY_S."""
        text = f"{type(err).__name__}: {err}"
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
        if text != self._last_error:
            log.exception("scheduling cycle %d failed (policy revision %s)", self.cycles + 1, self._plan.revision)
        elif now - self._last_error_logged >= ERROR_LOG_EVERY_S:
            log.error("scheduling cycles still failing: %s", text)
        else:
            return
        self._last_error, self._last_error_logged = text, now

    def run_once(self) -> CycleReport:
        plan = self._take_plan()  # the swap point: one Plan for the whole cycle
        started = time.perf_counter()
        self._work_arrived.clear()  # before the snapshot: what arrives after it starts the next cycle
        fold = folds_settled(plan, self.options.fold_settled)
        # A plan that may evict folds settled pods too, while no job could evict (the cycle
        # raises VictimsNeeded otherwise, and runs again over the listed pods); after a cycle
        # that needed them, the next few list them at once.
        optimistic = (not fold and self.options.fold_settled is None and not self._list_victims
                      and bool(set(plan.actions) & VICTIM_ACTIONS))
        state = self.cluster.snapshot(fold_settled=fold or optimistic)
        self._drop_invalid(state, plan)
        self._read_load(plan, state)
        want_facts = self._facts_due(plan, started)
        record = CycleRecord(want_facts=want_facts)
        snapshotted = time.perf_counter()
        options = dataclasses.replace(self.options, now=time.time(),   # reservations' clock
                                      fold_settled=True if optimistic else self.options.fold_settled,
                                      lost_to=self.audit.lost_to(self._audit_clock()))
        try:
            decisions = run_cycle(plan, state, options, self._snapshot_cache, observer=record)
            self._list_victims = max(0, self._list_victims - 1)
        except VictimsNeeded:
            self._list_victims = LIST_VICTIMS_CYCLES
            state = self.cluster.snapshot(fold_settled=False)
            self._drop_invalid(state, plan)
            self._read_load(plan, state)
            record = CycleRecord(want_facts=want_facts)
            decisions = run_cycle(plan, state, dataclasses.replace(options, fold_settled=False),
                                  self._snapshot_cache, observer=record)
        decided = time.perf_counter()
        applied = self.cluster.apply(decisions, state, record.usage) if self.leading() else ApplyReport()
        publish = getattr(self.cluster, "publish_policy", None)   # a connection that keeps Queue objects
        if publish is not None and self.leading():
            publish(plan)
        seconds = time.perf_counter() - started
        self.cycles += 1
        m = self.metrics
        m.e2e_latency.observe(seconds)
        m.policy_cycles.labels(revision=plan.revision).inc()
        for action, spent in record.actions:
            m.action_latency.labels(action=action).observe(spent)
        m.pods_scheduled.inc(applied.bound)
        self._audit(plan, state, decisions)
        m.pods_unschedulable.inc(len(decisions.unschedulable))
        m.pods_waiting.set(len(decisions.unschedulable))
        self._record_outside_sources(plan)
        m.set_queues(record.usage)
        self._report_queues(record)
        fresh = None   # the figures, when this cycle took them (FACTS_EVERY_S)
        if record.facts is not None:
            fresh = self._facts = with_podgroup_phases(record.facts, decisions, state)
            self._facts_cycle, self._facts_at, self._facts_revision = self.cycles, started, plan.revision
            m.set_queue_jobs(fresh.queues)
        if m.volcano is not None:
            m.volcano.cycle(seconds, record.actions, fresh, decisions, state, time.time())
        if self.view is not None:
            self.view.record(CycleView(self.cycles, plan.revision, plan.name, time.time(), seconds,
                                       self.scheduler_name, state, decisions, self._facts, self._facts_cycle))
        if decisions.bindings or decisions.evictions:
            done = f"{applied.bound} bound" if applied.bound or not applied.binding else f"{applied.binding} binding"
            log.info("cycle %d: %s, %d evicted, %d waiting (%.0f ms: snapshot %.0f, actions %.0f, apply %.0f) "
                     "policy revision %s",
                     self.cycles, done, applied.evicted, len(decisions.unschedulable), seconds * 1000,
                     (snapshotted - started) * 1000, (decided - snapshotted) * 1000, (time.perf_counter() - decided) * 1000,
                     plan.revision)
        return CycleReport(self.cycles, decisions, applied, seconds, plan.revision)

    def _facts_due(self, plan: Plan, now: float) -> bool:
        """Whether this cycle takes the views' figures (FACTS_EVERY_S)."""
        if self.view is None and self.metrics.volcano is None:
            return False
        return self._facts is None or plan.revision != self._facts_revision or now - self._facts_at >= self.facts_every

    def _report_queues(self, record: CycleRecord) -> None:
        """Queues that cannot run their jobs, promises the cluster cannot keep and queues of
        weight 0: a log line when one starts, changes or ends (not every cycle), the
        unmet-promise gauge, and the connection's Events on the Queue objects."""
        news = set(record.queue_problems.values()) | {p.describe() for p in record.unmet} | \
            set(record.weightless.values())
        for line in sorted(news - self._queue_news):
            log.warning("%s", line)
        for line in sorted(self._queue_news - news):
            log.info("resolved: %s", line)
        self._queue_news = news
        self.metrics.set_unmet_promises(record.unmet)
        report = getattr(self.cluster, "report_queues", None)   # a connection that records Events
        if report is not None and self.leading() and (record.queue_problems or record.unmet or record.weightless):
            report(record.queue_problems, record.unmet, record.weightless)

    def _audit_clock(self) -> int:
        return int(time.monotonic() - self._started)

    def _audit(self, plan: Plan, state: ClusterState, decisions: Decisions) -> None:
        """Whether the cycle's evictions buy anything, into the metrics (runtime/engine/evictions.py)."""
        m = self.metrics
        m.reservations.set(len(decisions.pipelined))
        m.reservations_released.inc(len(decisions.released))
        audit = self.audit
        audit.window = max(1, int(reservation_seconds(plan)))
        before = (audit.wasted, audit.repeats, audit.exchanges)
        audit.record(self._audit_clock(), decisions, eviction_queues(state, decisions), eviction_jobs(state, decisions))
        m.wasted_evictions.inc(audit.wasted - before[0])
        m.repeated_evictions.inc(audit.repeats - before[1])
        m.traded_evictions.inc(audit.exchanges - before[2])

    def _drop_invalid(self, state: ClusterState, plan: Plan) -> None:
        """PodGroups naming a queue nobody defines (never did, or a reloaded policy removed it) stay
        out of the cycle instead of failing it for everybody, their waiting pods held back saying
        so; each is reported once each time its queue goes missing."""
        problems = check_queues(state, [q.name for q in plan.queues])
        current = {str(p) for p in problems}
        for resolved in sorted(self._reported - current):
            log.info("no longer skipped (its queue exists again, or it is gone): %s", resolved)
        if not problems:
            self._reported = set()
            return
        bad = {p.name: p for p in problems}
        for key in bad:
            state.podgroups.pop(key, None)
        # Their waiting pods wait, held back saying why (counted as waiting, with an Event each);
        # placed ones keep their room but, like another scheduler's pods, count in no queue: left
        # as group-less pods they would be charged to `default` (and be its victims).
        for key, pod in list(state.pods.items()):
            if pod.group and group_key_of(pod) in bad:
                if pod.node_name is None:
                    problem = bad[group_key_of(pod)]
                    state.pods[key] = dataclasses.replace(pod, held_back=pod.held_back or Reason(
                        JOB, f"PodGroup {problem.name} {problem.message}", {"podgroup": problem.name}))
                else:
                    state.pods[key] = dataclasses.replace(pod, scheduler_name=FOREIGN_SCHEDULER)
        fresh = [p for p in problems if str(p) not in self._reported]
        self._reported = current
        if fresh:
            for problem in fresh:
                log.warning("skipping %s %s: %s", problem.kind, problem.name, problem.message)
            self.cluster.report_invalid(fresh, state)
