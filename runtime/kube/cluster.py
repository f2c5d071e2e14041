"""A real cluster as the scheduler's ClusterConnection: the watch cache to read, and the writers
(Binding, Eviction, status, Events) to make a cycle's decisions true.

`apply` evicts (waiting for the answers: evictions are few, and 429 must be known), then
hands the binds, in pipelined batches, to a few connections' threads and returns: binds run
while the next cycle is computed, as in kube-scheduler and Volcano. Each bind is laid over the
cache the moment it is dispatched (ClusterCache.assume_bound), so the next cycle never places
onto room a bind in flight will take; a bind that fails takes its assumption back and the pod
is placed again.

Status writes are asynchronous too (on their own small pool, never queued behind binds). The
status of a PodGroup with binds in flight is written when its last bind has answered — the
engine's status if all went through, else Unschedulable/BindFailed — so it never says Running
for a gang that is short; until then, and while a status write is in flight, later cycles
leave that object alone instead of writing the same thing twice. A change of a waiting
PodGroup's condition alone is written once it has been due for CONDITION_DELAY_S, a PodGroup
admitted (Pending to Inqueue) once it has been for ADMISSION_DELAY_S (ADMISSION_WITH_PODS_DELAY_S
when its pods exist already: nothing waits for Inqueue to create them), and a Queue's status at
most every QUEUE_STATUS_EVERY_S: cycles start as often as pods arrive, and states that last a
fraction of a second are not worth a write each. (A PodGroup created just before its pods is
admitted before they arrive; written at once, Inqueue would cost each gang a second write when
it runs a moment later. Volcano's scheduler, which runs once a second, admits no sooner.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial

from runtime.cluster import decisions as d
from runtime.kube import status as st
from runtime.kube.api import ApiError, KubeApi
from runtime.kube.binder import BOUND, FAILED, REFUSED, Binder, BindOutcome, Refusal, RefusedPods, device_annotations
from runtime.kube.cache import ClusterCache
from runtime.kube.nodelock import LOCKED, node_lock_on
from runtime.kube.events import EventRecorder, InvolvedObject, victim_message
from runtime.kube.evictor import BLOCKED, EVICTED, GONE, Evictor
from runtime.kube.outages import LineBudget, OutageLog, cause_of
from runtime.cluster.connection import FOREIGN_SCHEDULER, ApplyReport
from runtime.kube.draclaims import ClaimWriter, assumed_claim
from runtime.kube.volumes import BIND_TIMEOUT_S, VolumeBinds
from runtime.kube.podconditions import PodCondition, PodConditionWriter
from runtime.kube.queuesync import SYNC_EVERY_S, QueuePublisher
from runtime.kube.ratelimit import TokenBucket
from runtime.kube.statusfacts import same_phase_and_counts
from runtime.cluster.connection import QueueUsage
from runtime.kube.metrics import Metrics
from runtime.cluster.model import PG_INQUEUE, PG_PENDING, PG_RUNNING, ClusterState, Pod, PodGroup, group_key_of
from runtime.cluster.objects import ObjectProblem
from runtime.engine.queueshare import UnmetPromise
from compiler.plan import Plan

UNSCHEDULABLE = "Unschedulable"    # the PodGroup condition, and the reason of its Warning Event
ZERO_WEIGHT = "ZeroWeight"         # a Queue of weight 0 where a plugin shares by weight
UNMET_PROMISE = "GuaranteeUnmet"    # a Queue's guarantee (or deserved share) the cluster cannot hold

log = logging.getLogger("policydsl.kube")

# Binds go out pipelined (runtime.kube.pipelining), a batch per connection at a time: a few
# connections keep the API server busy, and the client spends a sixth of the processor time
# per bind that 32 threads each waiting for one answer cost. A cycle's binds are spread over
# every connection: fewer, deeper batches cost the client less per bind in isolation
# (python -m bench.e2e.bind_costs), but on the side-by-side benchmark's (b) they saved no
# processor time and added 35 ms to the median bind latency (docs/benchmarks.md).
BIND_CONNECTIONS = 16
BIND_PIPELINE_DEPTH = 20  # binds written at once on one connection
WRITE_WORKERS = 8  # evictions and status: few per cycle, and never queued behind a backlog of binds
EVICTION_REASONS = {d.PREEMPTION: "Preempted", d.RECLAIM: "Reclaimed"}
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
# A PodGroup whose only change is its waiting condition (same phase and pod counts) is written
# once that change has been due this long: a gang seen while its pods are still being created
# costs no request, and a reason that changes every cycle is written at most this often.
CONDITION_DELAY_S = 1.0
ADMISSION_DELAY_S = 0.5
# A PodGroup whose pods exist already (made with it, not by a controller that waits for Inqueue,
# as Volcano's vcjob controller does) is left Pending on the API server for longer: it is
# usually Running first, one write instead of two.
ADMISSION_WITH_PODS_DELAY_S = 2.0
# A PodGroup whose phase and counts stand and whose condition alone changes is written at most
# this often (the rest stay due): never a storm of thousands at once, as after a restart.
CONDITION_WRITES_PER_S = 50.0
CONDITION_WRITE_BURST = 200
QUEUE_STATUS_EVERY_S = 1.0  # a Queue's status (allocated, groups per phase) at most this often


def _not_yet(since: Mapping[str, float], still: dict[str, float], key: str, clock: float, delay: float) -> bool:
    """Whether a write due since `since[key]` (now, if new) waits longer; if so, `still` keeps
    when it became due (the next cycle's `since`)."""
    first = since.get(key, clock)
    if clock - first < delay:
        still[key] = first
        return True
    return False


def pod_ref(pod: Pod) -> InvolvedObject:
    return InvolvedObject("Pod", "v1", pod.namespace, pod.name, pod.uid)


def podgroup_ref(group: PodGroup) -> InvolvedObject:
    return InvolvedObject("PodGroup", PODGROUP_API, group.namespace, group.name, group.uid)


@dataclass
class BindTotals:
    """Outcomes of binds that answered (see KubeCluster.drain and runtime.kube.binder)."""

    bound: int = 0
    refused: int = 0
    failed: int = 0


@dataclass
class _GangBinds:
    """The binds one cycle dispatched for one PodGroup, and what to write when all answered."""

    status: d.PodGroupStatus
    counts: dict[str, int]
    dispatched: int = 0
    remaining: int = 0
    failures: list[BindOutcome] = field(default_factory=list)
    # The job's HyperNode when this cycle moved it (Decisions.hypernodes): written with the
    # status, since the gang is busy until then and settles as soon as it is Running.
    hypernode: str | None = None


class KubeCluster:
    def __init__(self, api: KubeApi, scheduler_name: str, *, identity: str, metrics: Metrics | None = None,
                 may_write: Callable[[], bool] = lambda: True, bind_connections: int = BIND_CONNECTIONS,
                 event_rate: float = 20.0, event_burst: int = 200, volume_bind_timeout: float = BIND_TIMEOUT_S,
                 pod_conditions: bool = True, publish_queues: bool = True) -> None:
        self.api = api
        self.metrics = metrics or Metrics()
        self.bind_connections = bind_connections
        self.binds = ThreadPoolExecutor(bind_connections, thread_name_prefix="kube-bind")
        self.writes = ThreadPoolExecutor(WRITE_WORKERS, thread_name_prefix="kube-write")
        self.cache = ClusterCache(api, scheduler_name, on_watch_restart=self.metrics.watch_restarted)
        self.binder = Binder(api, may_write=may_write, node_of=self.cache.node)
        self.evictor = Evictor(api, self.writes, may_write=may_write)
        self.status = st.StatusWriter(api, self.cache, may_write=may_write)
        self.status.on_answer = self._status_answered
        self.events = EventRecorder(api, scheduler_name, identity, rate=event_rate, burst=event_burst,
                                    may_write=may_write, on_dropped=self.metrics.events_dropped.inc)
        self._lock = threading.Condition()
        self._in_flight = 0  # binds and status writes not answered yet
        self._busy: set[str] = set()  # "PodGroup/ns/name", "Queue/name": a write (or gang binds) in flight
        self._totals = BindTotals()
        self._condition_writes = TokenBucket(CONDITION_WRITES_PER_S, CONDITION_WRITE_BURST)
        self._condition_due: dict[str, float] = {}  # PodGroup key -> when its condition change was first due
        self._admission_due: dict[str, float] = {}  # PodGroup key -> when it was first admitted, unwritten
        self._queue_written: dict[str, float] = {}  # Queue name -> when its status was last written
        self.refused = RefusedPods()
        self._held: dict[str, Refusal] = {}  # the pods the last snapshot held back, and why
        self._skipped_namespaces: set[str] = set()  # being deleted, already said so
        self._invalid_reported: dict[str, str] = {}  # invalid PodGroup -> resourceVersion its Event named
        self._refusal_lines = LineBudget()
        self.outages = {what: OutageLog(what, log, noun=noun, key_field=field) for what, noun, field in (
            ("binds", "pods", "pod"), ("evictions", "pods", "pod"), ("PodGroup status writes", "PodGroups", "podgroup"),
            ("Queue status writes", "Queues", "queue"), ("nominations", "pods", "pod"),
            ("PodScheduled writes", "pods", "pod"))}
        # Pods whose claims are bound first (runtime/kube/volumes.py): bound, or given back as a
        # failed bind, once their claims are.
        self.volumes = VolumeBinds(
            api, self.cache, self.writes, may_write=may_write, timeout=volume_bind_timeout,
            bind=lambda binding, pod, gang: self.binds.submit(self._bind_batch, [(binding, pod, gang)]),
            give_back=lambda binding, pod, gang, why: self._bind_settled(
                BindOutcome(binding.pod, binding.node, FAILED, why), pod, gang))
        # ResourceClaims written before their pods' Bindings, undone if a bind fails (draclaims.py):
        # pod -> (claim, allocation) each, from apply until a bind worker takes them.
        self.claim_writer = ClaimWriter(api, self.cache.device_classes, may_write=may_write)
        self._claims_due: dict[str, tuple] = {}
        # The autoscaler contract (podconditions.py) and the policy's queues as objects (queuesync.py).
        self.pod_conditions = PodConditionWriter(api, may_write=may_write, outage=self.outages["PodScheduled writes"]) \
            if pod_conditions else None
        self.queue_publisher = QueuePublisher(api, self.events, self.cache.queue_objects, may_write=may_write) \
            if publish_queues else None
        self._published: tuple[str, float] | None = None  # (revision, when) of the last queue sync

    # --- ClusterConnection -------------------------------------------------------------------
    def start(self) -> None:
        self.cache.start()
        self.events.start()
        self.volumes.start()

    def stop(self) -> None:
        """Let binds in flight answer, then stop writing and watching."""
        self.volumes.stop()
        self.drain(timeout=60.0)
        self.events.stop()
        # Past the drain's bound, writes still queued are dropped, not waited for (thousands of
        # status writes must not hold a stopping process for minutes): the next leader writes
        # what is still due. Those already sent still answer.
        self.binds.shutdown(wait=True, cancel_futures=True)
        self.writes.shutdown(wait=True, cancel_futures=True)
        self.cache.stop()

    @property
    def synced(self) -> bool:
        return self.cache.synced

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.cache.wait_synced(timeout)

    def watch_for(self, plan: Plan) -> None:
        """Watch, from now on, the kinds only some plugins read (ResourceQuotas for resourcequota,
        PodDisruptionBudgets for pdb: runtime.kube.cache.WATCHED_FOR_PLUGINS) if the plan has them."""
        self.cache.watch_for_plugins(plugin.name for tier in plan.tiers for plugin in tier.plugins)
        self.binder.node_lock = node_lock_on(plan)     # deviceshare's node_lock: runtime.kube.nodelock

    def snapshot(self, fold_settled: bool = False) -> ClusterState:
        """The cache's picture, less what cannot be bound: pods of namespaces being deleted are
        left out (the API server refuses their Bindings and Events), pods whose Binding was
        refused are held back (runtime.kube.binder.RefusedPods), saying why."""
        state = self.cache.snapshot(fold_settled)
        self._skip_terminating(state, self.cache.terminating_namespaces())
        self._held = self.refused.holding(self.cache.pod)
        for key, refusal in self._held.items():
            pod = state.pods.get(key)
            if pod is not None and pod.node_name is None:
                state.pods[key] = replace(pod, held_back=d.Reason(d.BIND, refusal.message))
        self._hold_invalid_groups(state)
        return state

    def _hold_invalid_groups(self, state: ClusterState) -> None:
        """Pods of a PodGroup the cache could not read wait saying what is wrong with it (not
        that it does not exist), and the PodGroup gets a Warning Event, once per resourceVersion."""
        invalid = {i.key: i for i in self.cache.invalid_objects() if i.kind == "PodGroup"}
        for key in list(self._invalid_reported):
            if key not in invalid:
                del self._invalid_reported[key]
        if not invalid:
            return
        for key, pod in list(state.pods.items()):
            bad = invalid.get(group_key_of(pod)) if pod.group and pod.scheduler_name == self.cache.scheduler_name \
                else None
            if bad is None:
                continue
            if pod.node_name is None:
                if pod.held_back is None:
                    state.pods[key] = replace(pod, held_back=d.Reason(
                        d.JOB, f"PodGroup {bad.key} is invalid: {bad.message}", {"podgroup": bad.key}))
            else:
                # Placed members keep their room but, as the pods of a PodGroup naming a missing
                # queue (Scheduler._drop_invalid), count in no queue: left as group-less pods
                # they would be charged to `default` (and be its victims).
                state.pods[key] = replace(pod, scheduler_name=FOREIGN_SCHEDULER)
        for key, bad in invalid.items():
            if self._invalid_reported.get(key) != bad.version:
                self._invalid_reported[key] = bad.version
                namespace, name = key.split("/", 1)
                self.events.record(InvolvedObject("PodGroup", PODGROUP_API, namespace, name, bad.uid), "Warning",
                                   "InvalidPodGroup", f"PodGroup {key} is invalid, its pods wait: {bad.message}")

    def report_queues(self, problems: Mapping[str, str], unmet: list[UnmetPromise],
                      weightless: Mapping[str, str] | None = None) -> None:
        """Warning Events on the Queue objects that cannot run their jobs (`problems`: queue ->
        why), on those of weight 0 (queue -> what it means), and on those whose guarantee or
        deserved share the cluster cannot meet. The recorder sends each again only when it
        changes or every refresh_s while it lasts."""
        queues = self.cache.queue_objects_by_name()
        for reason, told in (("InvalidQueue", problems), (ZERO_WEIGHT, weightless or {})):
            for name, message in told.items():
                obj = queues.get(name)
                if obj is not None:
                    self.events.record(InvolvedObject("Queue", PODGROUP_API, "", name, obj.uid), "Warning",
                                       reason, message)
        for promise in unmet:
            for name, _ in promise.queues:
                obj = queues.get(name)
                if obj is not None:
                    self.events.record(InvolvedObject("Queue", PODGROUP_API, "", name, obj.uid), "Warning",
                                       UNMET_PROMISE, promise.describe())

    def _skip_terminating(self, state: ClusterState, terminating: frozenset[str]) -> None:
        """Waiting pods of namespaces being deleted are left out, and their PodGroups unless
        something of them runs (whose room and queue share still count); said once each."""
        for namespace in sorted(self._skipped_namespaces - terminating):
            log.info("namespace %s is no longer being deleted (or is gone): its pods are scheduled again", namespace)
        self._skipped_namespaces &= terminating
        if not terminating:
            return
        waiting: dict[str, int] = {}
        placed_groups = set()
        for key, pod in list(state.pods.items()):
            if pod.namespace not in terminating:
                continue
            if pod.node_name is None:
                del state.pods[key]
                waiting[pod.namespace] = waiting.get(pod.namespace, 0) + 1
            elif pod.group:
                placed_groups.add(group_key_of(pod))
        for key, group in list(state.podgroups.items()):
            if group.namespace in terminating and group.phase != PG_RUNNING and key not in placed_groups:
                del state.podgroups[key]
        for namespace in sorted(terminating - self._skipped_namespaces):
            self._skipped_namespaces.add(namespace)
            log.info("namespace %s is being deleted: its %d waiting pods are not scheduled (the API server "
                     "refuses Bindings there)", namespace, waiting.get(namespace, 0), extra={"namespace": namespace})

    def on_work(self, callback: Callable[[], None]) -> None:
        self.cache.on_work(callback)

    def report_invalid(self, problems: list[ObjectProblem], state: ClusterState) -> None:
        for problem in problems:
            group = self.cache.podgroup(problem.name)
            if group is not None:
                namespace, name = problem.name.split("/", 1)
                ref = InvolvedObject("PodGroup", PODGROUP_API, namespace, name, group.uid)
                self.events.record(ref, "Warning", "InvalidPodGroup", problem.message)

    def apply(self, decisions: d.Decisions, state: ClusterState, usage: Mapping[str, QueueUsage]) -> ApplyReport:
        report = ApplyReport()
        # A pass over every pod: only PodGroup statuses need it.
        counts = st.pod_counts(state, self.cache.scheduler_name) if decisions.podgroups else {}
        for outage in self.outages.values():
            outage.tick()
        self._evict(decisions.evictions, state.pods, report)
        self._nominate(decisions, state.pods)
        dispatched = self._dispatch_binds(decisions, state, counts)
        report.binding = len(decisions.bindings)
        report.status_writes = self._write_status(decisions, state, usage, counts, self._held_groups(state),
                                                  dispatched)
        report.events = self._record_waiting(decisions, state)
        report.status_writes += self._write_pod_conditions(decisions, state)
        return report

    def publish_policy(self, plan) -> None:
        """Create or correct the policy's Queue objects: at a new revision and every SYNC_EVERY_S."""
        if self.queue_publisher is None:
            return
        now = time.monotonic()
        if self._published is not None and self._published[0] == plan.revision and \
                now - self._published[1] < SYNC_EVERY_S:
            return
        with self._lock:
            if "QueueSync/" in self._busy:
                return
            self._in_flight += 1
            self._busy.add("QueueSync/")
        force = self._published is not None and self._published[0] != plan.revision
        self._published = (plan.revision, now)
        self.writes.submit(self._write_one, "QueueSync/", partial(self.queue_publisher.sync, plan, force=force))

    def drain(self, timeout: float | None = None) -> BindTotals:
        """Wait until every dispatched bind and status write answered; the bind outcomes since
        the last drain."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._in_flight:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._lock.wait(left)
            totals, self._totals = self._totals, BindTotals()
        return totals

    # --- evictions -------------------------------------------------------------------------------
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
                self.events.record(pod_ref(pod), "Normal", reason, victim_message(eviction.reason, pod, pods))
            elif outcome.result == BLOCKED:
                report.eviction_blocked += 1
                log.info("eviction of %s refused, will retry: %s", eviction.pod, outcome.detail,
                         extra={"pod": eviction.pod})
            elif outcome.result != GONE:
                report.eviction_failed += 1
                self.outages["evictions"].failed(cause_of(outcome.detail, outcome.status), eviction.pod)
            if outcome.result in (EVICTED, BLOCKED, GONE):
                self.outages["evictions"].succeeded(eviction.pod)

    # --- binds -------------------------------------------------------------------------------------
    def _dispatch_binds(self, decisions: d.Decisions, state: ClusterState,
                        counts: Mapping[str, dict[str, int]]) -> set[str]:
        """Start the binds; the status of their PodGroups waits for them: the PodGroups whose
        status the answers write (their last bind's settling writes it)."""
        if not decisions.bindings:
            return set()
        statuses = {pg.name: pg for pg in decisions.podgroups}
        gangs: dict[str, _GangBinds] = {}
        for binding in decisions.bindings:
            pod = state.pods.get(binding.pod)
            key = group_key_of(pod) if pod is not None else ""
            if key in statuses:
                gang = gangs.get(key)
                if gang is None:
                    gang = gangs[key] = _GangBinds(statuses[key], counts.get(key, {"running": 0, "succeeded": 0}),
                                                   hypernode=decisions.hypernodes.get(key))
                gang.dispatched += 1
                gang.remaining += 1
        with self._lock:
            self._in_flight += len(decisions.bindings)
            self._busy.update(f"PodGroup/{key}" for key in gangs)
        items = []
        for binding in decisions.bindings:
            pod = state.pods.get(binding.pod)
            # Assumed before the request goes out: the next cycle may start before it answers.
            self.cache.assume_bound(binding.pod, binding.node,
                                    device_annotations(binding, pod, self.cache.node(binding.node)))
            if binding.pod in decisions.numa:
                self.cache.assume_numa(binding.pod, binding.node, decisions.numa[binding.pod])
            gang = gangs.get(group_key_of(pod)) if pod is not None else None
            if pod is not None and binding.pod in decisions.claims:    # its ResourceClaims are written first
                chosen = decisions.claims[binding.pod]
                self.cache.assume_claims([assumed_claim(c, a, pod) for c, a in chosen])
                with self._lock:
                    self._claims_due[binding.pod] = chosen
            if pod is not None and binding.pod in decisions.volumes:   # its claims are bound first
                self.volumes.add(binding, pod, gang, decisions.volumes[binding.pod])
                continue
            items.append((binding, pod, gang))
        # Spread over every connection, none deeper than BIND_PIPELINE_DEPTH.
        size = max(1, min(BIND_PIPELINE_DEPTH, -(-len(items) // self.bind_connections)))
        for lo in range(0, len(items), size):
            self.binds.submit(self._bind_batch, items[lo:lo + size])
        return set(gangs)

    def _write_claims(self, items: list[tuple[d.Binding, Pod | None, _GangBinds | None]]):
        """Write the ResourceClaims of the pods about to be bound: (the items to bind, what was
        written for each pod); a pod whose claims could not be written is settled as a failed bind."""
        keep, written = [], {}
        for binding, pod, gang in items:
            with self._lock:
                chosen = self._claims_due.pop(binding.pod, None)
            if chosen and pod is not None:
                done, error = self.claim_writer.write(pod, chosen)
                if error is not None:
                    self.claim_writer.undo(pod, done)
                    self.cache.forget_claims([c.key for c, _ in chosen])
                    self._bind_settled(BindOutcome(binding.pod, binding.node, FAILED, error), pod, gang)
                    continue
                written[binding.pod] = done
            keep.append((binding, pod, gang))
        return keep, written

    def _undo_claims(self, key: str, pod: Pod | None, written: dict) -> None:
        done = written.pop(key, None)
        if done and pod is not None:
            self.claim_writer.undo(pod, done)
            self.cache.forget_claims([w.claim.key for w in done])

    def _bind_batch(self, items: list[tuple[d.Binding, Pod | None, _GangBinds | None]]) -> None:
        started = time.perf_counter()
        items, claims_written = self._write_claims(items)
        unsettled = set(range(len(items)))
        try:
            for i, outcome in self.binder.bind_all([(binding, pod) for binding, pod, _ in items]):
                self.metrics.bind_latency.observe(time.perf_counter() - started)
                unsettled.discard(i)
                if outcome.result != BOUND:
                    self._undo_claims(items[i][0].pod, items[i][1], claims_written)
                self._bind_settled(outcome, items[i][1], items[i][2])
        except Exception:  # noqa: BLE001 - logged; the binds it did not settle fail below
            log.exception("binding a batch of %d pods", len(items))
        for i in sorted(unsettled):  # a worker must always settle its binds
            binding, pod, gang = items[i]
            self._undo_claims(binding.pod, pod, claims_written)
            self._bind_settled(BindOutcome(binding.pod, binding.node, FAILED, "the bind worker failed"), pod, gang)

    def _bind_settled(self, outcome: BindOutcome, pod: Pod | None, gang: _GangBinds | None) -> None:
        """Count the outcome, report it, and write its gang's status if it was the gang's last;
        never raises (the bind leaves the in-flight count whatever happens)."""
        finished_gang = None
        with self._lock:
            if outcome.result == BOUND:
                self._totals.bound += 1
            elif outcome.result == REFUSED:
                self._totals.refused += 1
            else:
                self._totals.failed += 1
            if gang is not None:
                gang.remaining -= 1
                if outcome.result != BOUND:
                    gang.failures.append(outcome)
                finished_gang = gang if gang.remaining == 0 else None
        try:
            if outcome.result == REFUSED:
                # Held before its room is released: a snapshot in between must not place it again.
                seen = self.cache.pod(outcome.pod)
                refusal = self.refused.refuse(outcome, seen) if seen is not None else None
                self.cache.forget_assumed(outcome.pod)
                self._refused(outcome, pod, refusal)
            elif outcome.result == FAILED:
                self.cache.forget_assumed(outcome.pod)
                self._failed(outcome, pod)
            else:
                self.refused.bound(outcome.pod)
                self.metrics.pods_scheduled.inc()
                self.outages["binds"].succeeded(outcome.pod)
            if finished_gang is not None:
                self._write_gang_status(finished_gang)
        except Exception:  # noqa: BLE001 - one pod's report must not cost the others theirs
            log.exception("settling the bind of %s", outcome.pod)
        finally:
            self._done(f"PodGroup/{finished_gang.status.name}" if finished_gang is not None else None)

    def _done(self, busy_key: str | None) -> None:
        with self._lock:
            self._in_flight -= 1
            if busy_key is not None:
                self._busy.discard(busy_key)
            if not self._in_flight:
                self._lock.notify_all()

    def _refused(self, outcome: BindOutcome, pod: Pod | None, refusal: Refusal | None) -> None:
        """One log line and one Event per refusal (a pod refused again after its hold: a debug
        line, the Event deduplicated); a pod already gone (404) gets neither."""
        self.metrics.bind_refused.labels(code=str(outcome.status)).inc()
        self.outages["binds"].forget(outcome.pod)
        if refusal is None or pod is None or outcome.status == 404:
            log.debug("bind of %s dropped: %s", outcome.pod, outcome.detail, extra={"pod": outcome.pod})
            return
        again = refusal.refusals > 1
        message = f"binding to {outcome.node} was refused: {outcome.detail}"
        if again:
            log.debug("bind of %s refused again: %s", outcome.pod, outcome.detail, extra={"pod": outcome.pod})
        else:
            allowed, held_back = self._refusal_lines.take()
            if allowed:
                more = f" ({held_back} more refusals not logged)" if held_back else ""
                log.warning("bind of %s to %s refused, not tried again until the pod changes: %s%s", outcome.pod,
                            outcome.node, outcome.detail, more, extra={"pod": outcome.pod, "node": outcome.node})
        self.events.record(pod_ref(pod), "Warning", "FailedBinding", message)

    def _failed(self, outcome: BindOutcome, pod: Pod | None) -> None:
        if outcome.status == LOCKED:
            # Its node's device lock is held (runtime.kube.nodelock): placed again next cycle, no outage.
            if pod is not None:
                self.events.record(pod_ref(pod), "Normal", "NodeLocked", f"not bound to {outcome.node} yet: "
                                   f"{outcome.detail}")
            return
        self.metrics.bind_errors.inc()
        self.outages["binds"].failed(cause_of(outcome.detail, outcome.status), outcome.pod)
        if pod is not None:
            self.events.record(pod_ref(pod), "Warning", "FailedBinding",
                               f"binding to {outcome.node} failed: {outcome.detail}")

    def _write_gang_status(self, gang: _GangBinds) -> None:
        status = gang.status
        phase, conditions = status.phase, status.conditions
        if gang.failures:
            # Short of what the cycle decided: never Running for a gang missing members (Volcano
            # writes no Running either while the gang is not ready); the next cycle places the rest.
            phase = PG_INQUEUE if phase == PG_RUNNING else phase
            conditions = (st.bind_failure_condition(gang.failures, gang.dispatched),)
            group = self.cache.podgroup(status.name)
            if group is not None:
                self.events.record(podgroup_ref(group), "Warning", st.BIND_FAILED, conditions[0].message)
        update = st.podgroup_update(status.name, self.cache.podgroup_status(status.name), phase, conditions,
                                    gang.counts, now=st.now_text(), transition_id=st.new_transition_id())
        if gang.hypernode is not None and not gang.failures:
            # One patch for both; a gang short of members gets its HyperNode from the next cycle.
            update = replace(update or st.Update(status.name, {}, {}),
                             annotations=st.hypernode_annotation(gang.hypernode))
        if update is not None:
            self._write_podgroup(update)

    # --- nominations ----------------------------------------------------------------------------------
    def _nominate(self, decisions: d.Decisions, pods: Mapping[str, Pod]) -> None:
        """Write status.nominatedNodeName of the pods the cycle reserved room for (as
        kube-scheduler nominates a preemptor), clear it of those whose reservation ended (with
        an Event saying why): Cluster Autoscaler and `kubectl` read it."""
        changes = [(key, node) for key, node in decisions.pipelined.items()
                   if (pod := pods.get(key)) is not None and pod.nominated_node != node]
        changes += [(key, None) for key in decisions.released if key in pods]
        for key, node in changes:
            self.cache.assume_nominated(key, node)
            with self._lock:
                self._in_flight += 1
                self._busy.add(f"Pod/{key}")
            self.writes.submit(self._write_one, f"Pod/{key}", partial(self.status.write_nomination, pods[key], node))
        for key, why in decisions.released.items():
            pod = pods.get(key)
            if pod is not None:
                self.events.record(pod_ref(pod), "Normal", "ReservationReleased", why.message)

    # --- status and events ----------------------------------------------------------------------------
    def _held_groups(self, state: ClusterState) -> dict[str, list[Refusal]]:
        """PodGroup key -> its members the snapshot held back after a refused bind."""
        out: dict[str, list[Refusal]] = {}
        for key, refusal in self._held.items():
            pod = state.pods.get(key)
            if pod is not None and pod.group and pod.held_back is not None and pod.held_back.kind == d.BIND:
                out.setdefault(group_key_of(pod), []).append(refusal)
        return out

    def _write_status(self, decisions: d.Decisions, state: ClusterState, usage: Mapping[str, QueueUsage],
                      counts: Mapping[str, dict[str, int]], held: Mapping[str, list[Refusal]],
                      dispatched: Collection[str] = ()) -> int:
        """Dispatch the status writes that change something; how many. A gang not running with
        members held back after a refused bind says so (BindFailed), whatever else it waits for.
        `dispatched`: PodGroups whose binds this cycle started; their answers write the status
        (even when they all came back already, which would otherwise write it twice)."""
        now, transition = st.now_text(), st.new_transition_id()
        with self._lock:
            busy = set(self._busy)
        writes: list[tuple[str, Callable[[], bool]]] = []
        phases = st.queue_phases(decisions.podgroups, state)
        current = self.cache.podgroup_statuses() if decisions.podgroups else {}
        no_pods = {"running": 0, "succeeded": 0}
        clock = time.monotonic()
        due: dict[str, float] = {}
        admitted: dict[str, float] = {}
        hypernodes = decisions.hypernodes
        annotated: set[str] = set()
        with_pods = {group_key_of(pod) for u in decisions.unschedulable
                     if (pod := state.pods.get(u.pod)) is not None and pod.group}
        for pg in decisions.podgroups:
            if pg.name in dispatched or (busy and f"PodGroup/{pg.name}" in busy):
                continue
            pg_counts = counts.get(pg.name, no_pods)
            conditions = pg.conditions
            group = state.podgroups.get(pg.name)
            if pg.name in held and pg.phase != PG_RUNNING and group is not None:
                conditions = (st.held_members_condition(held[pg.name], group.min_member),)
            update = st.podgroup_update(pg.name, current.get(pg.name), pg.phase, conditions, pg_counts,
                                        now=now, transition_id=transition)
            if update is None:
                continue
            if same_phase_and_counts(current.get(pg.name), pg.phase, pg_counts):
                if _not_yet(self._condition_due, due, pg.name, clock, CONDITION_DELAY_S):
                    continue
                if not self._condition_writes.try_take():
                    # Budgeted (a restart finds thousands of running PodGroups without the
                    # condition it writes): it stays due, for a later cycle.
                    due[pg.name] = self._condition_due.get(pg.name, clock)
                    continue
            elif pg.phase == PG_INQUEUE and pg.name not in held and \
                    same_phase_and_counts(current.get(pg.name), PG_PENDING, pg_counts):
                delay = ADMISSION_WITH_PODS_DELAY_S if pg.name in with_pods else ADMISSION_DELAY_S
                if _not_yet(self._admission_due, admitted, pg.name, clock, delay):
                    continue
            if pg.name in hypernodes and self._annotation_differs(pg.name, hypernodes[pg.name]):
                update = replace(update, annotations=st.hypernode_annotation(hypernodes[pg.name]))
                annotated.add(pg.name)
            writes.append((f"PodGroup/{pg.name}", partial(self._write_podgroup, update)))
        # The job's HyperNode changed and its status did not (or waits): the annotation alone.
        for name, hypernode in sorted(hypernodes.items()):
            if name not in annotated and name not in dispatched and f"PodGroup/{name}" not in busy \
                    and self._annotation_differs(name, hypernode):
                update = st.Update(name, {}, {}, st.hypernode_annotation(hypernode))
                writes.append((f"PodGroup/{name}", partial(self._write_podgroup, update)))
        self._condition_due = due  # a change no longer computed is no longer due
        self._admission_due = admitted
        for name in self.cache.queue_objects():
            if f"Queue/{name}" in busy or clock - self._queue_written.get(name, -QUEUE_STATUS_EVERY_S) \
                    < QUEUE_STATUS_EVERY_S:
                continue
            use = usage.get(name)
            update = st.queue_update(name, self.cache.queue_status(name), use.allocated if use else {},
                                     phases.get(name, []))
            if update is not None:
                self._queue_written[name] = clock
                writes.append((f"Queue/{name}", partial(self._write_queue, update)))
        with self._lock:
            self._in_flight += len(writes)
            self._busy.update(key for key, _ in writes)
        for key, write in writes:
            self.writes.submit(self._write_one, key, write)
        return len(writes)

    def _annotation_differs(self, key: str, hypernode: str) -> bool:
        """Whether the PodGroup does not yet name this HyperNode. The cycle compared with its
        snapshot; a write answered since (a gang's status after its binds) is only in the cache."""
        group = self.cache.podgroup(key)
        return group is not None and group.allocated_hypernode != hypernode

    def _status_answered(self, kind: str, key: str, error: ApiError | None) -> None:
        outage = self.outages[{"PodGroup": "PodGroup status writes", "Queue": "Queue status writes"}.get(kind,
                                                                                                     "nominations")]
        if error is None:
            outage.succeeded(key)
        else:
            outage.failed(cause_of(str(error), error.status), key)

    def _write_pod_conditions(self, decisions: d.Decisions, state: ClusterState) -> int:
        """PodScheduled=False on the pods that wait (podconditions.py); how many writes went out."""
        if self.pod_conditions is None or not (decisions.unschedulable or decisions.pipelined):
            return 0
        with self._lock:
            busy = {key for key in self._busy if key.startswith("PodCondition/")}
        due = self.pod_conditions.due(decisions, state, lambda key: f"PodCondition/{key}" in busy)
        if not due:
            return 0
        with self._lock:
            self._in_flight += len(due)
            self._busy.update(f"PodCondition/{c.pod}" for c in due)
        for condition in due:
            self.writes.submit(self._write_one, f"PodCondition/{condition.pod}",
                               partial(self._write_pod_condition, condition))
        return len(due)

    def _write_pod_condition(self, condition: PodCondition) -> bool:
        assert self.pod_conditions is not None
        written = self.pod_conditions.write(condition)
        if written:
            self.metrics.status_writes.labels(kind="Pod").inc()
        return written

    def _write_one(self, key: str, write: Callable[[], bool]) -> None:
        try:
            write()
        except Exception:  # noqa: BLE001 - a worker must always settle its write
            log.exception("writing the status of %s", key)
        finally:
            self._done(key)

    def _write_podgroup(self, update: st.Update) -> bool:
        written = self.status.write_podgroup(update)
        if written:
            self.metrics.status_writes.labels(kind="PodGroup").inc()
        return written

    def _write_queue(self, update: st.Update) -> bool:
        written = self.status.write_queue(update)
        if written:
            self.metrics.status_writes.labels(kind="Queue").inc()
        return written

    def _record_waiting(self, decisions: d.Decisions, state: ClusterState) -> int:
        """Warnings for what waits: FailedScheduling on each pod, as kube-scheduler records,
        and Unschedulable on each PodGroup whose condition says so, as vc-scheduler does (a
        gang's figures — what it needs, what its queue may take — are the PodGroup's)."""
        pods = state.pods
        queued = 0
        waiting: set[str] = set()
        # A gang whose pods are still being created only waits for them (see below).
        members_only = {group_key_of(pods[item.pod]) for item in decisions.unschedulable if item.pod in pods
                        and item.reasons and all(r.kind == d.MEMBERS for r in item.reasons)}
        for status in decisions.podgroups:
            group = state.podgroups.get(status.name)
            failed = next((c for c in status.conditions if c.type == UNSCHEDULABLE and c.status == "True"), None)
            if group is None or failed is None or status.name in members_only:
                continue
            ref = InvolvedObject("PodGroup", PODGROUP_API, group.namespace, group.name, group.uid)
            waiting.add(ref.key)
            queued += self.events.record(ref, "Warning", UNSCHEDULABLE, failed.message)
        for item in decisions.unschedulable:
            pod = pods.get(item.pod)
            # A gang whose other pods are still being created is not failing: its PodGroup's
            # condition says what it waits for, without a Warning per pod each time one appears.
            # A pod held back after a refused bind had its FailedBinding Event.
            if pod is None or not item.reasons or all(r.kind in (d.MEMBERS, d.BIND) for r in item.reasons):
                continue
            ref = pod_ref(pod)
            waiting.add(ref.key)
            message = "; ".join(r.message for r in item.reasons)
            queued += self.events.record(ref, "Warning", "FailedScheduling", message)
        # Pods placed or gone, PodGroups gone: their next Warning is news again. (Each key is
        # looked up, not every PodGroup listed: there are far fewer keys than PodGroups.)
        def keep(key: str) -> bool:
            if key in waiting or not key.startswith(("Pod/", "PodGroup/")):
                return True
            kind, namespace, name, uid = key.split("/", 3)
            group = state.podgroups.get(f"{namespace}/{name}") if kind == "PodGroup" else None
            return group is not None and group.uid == uid

        self.events.forget(keep)
        return queued
