"""The discrete-event simulation: arrivals, scheduling cycles, completions, evictions.

Time advances in scheduling cycles every `period` seconds (Volcano's schedule period). At a
cycle's time the simulator first creates the objects that arrived, completes the pods whose
duration is over (they free their node, still count for their gang; a job whose pods all
finished leaves the cluster), and lets the pods evicted in an earlier cycle leave — a job
controller recreates each one pending, as Volcano's does. Then it runs the Plan's actions
once, applies the decisions (bindings start their pods' clocks), and measures.

Cycles on an unchanged cluster decide nothing new (the engine is deterministic), so after a
cycle that bound, evicted and re-phased nothing, and with no pod leaving, the clock jumps to
the first cycle at or after the next arrival or completion. A run of `--cycles N` skips
nothing: it runs N consecutive cycles.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import heapq
import math
from dataclasses import dataclass, field
from typing import Callable

from compiler.lint.queues import PROMISE_BEYOND_CLUSTER
from compiler.plan import Plan
from runtime.engine.actions import registry as action_registry
from runtime.engine.actions.shuffle import tick_seconds
from runtime.engine.cycle import collect, open_session
from runtime.engine.devices import card_model
from runtime.cluster.decisions import Decisions, Reason
from runtime.cluster.dra import release_pod
from runtime.engine.evictions import EvictionAudit, eviction_jobs, eviction_queues
from runtime.engine.queueshare import UnmetPromise, unmet_promises
from runtime.cluster.model import POD_PENDING, PG_COMPLETED, ClusterState, Pod, group_key_of
from runtime.cluster.topology import Span, room_by_hypernode, span_of
from runtime.engine.rules.volumes import waits_on_storage
from runtime.engine.session import Options
from runtime.engine.snapshot import SnapshotCache, device_plans
from runtime.simulation import findings as fd
from runtime.simulation.findings import Finding, Wait, Watch, longest_waits
from runtime.simulation.metrics import GangViolation, Recorder, RunMetrics, queue_of
from runtime.simulation.workload import Arrival, Scenario, copy_podgroup, copy_pod

DEFAULT_PERIOD = 1.0
# A run without --until or --cycles ends when nothing is left to happen; these bound a run
# whose policy never settles (evicting and re-placing the same pods forever).
HORIZON = 30 * 86400.0
MAX_CYCLES = 200_000

_ARRIVE, _COMPLETE = 0, 1
# From this many pods (initial and arriving) on, a run freezes its state out of the garbage
# collector (Simulation.run); below it a collection is cheaper than the freeze's own gc.collect.
FREEZE_AT_PODS = 1000


@dataclass(frozen=True)
class Limits:
    cycles: int | None = None        # run exactly this many consecutive cycles
    until: float | None = None       # stop at this simulated time (seconds)
    period: float = DEFAULT_PERIOD   # seconds between cycles
    max_cycles: int = MAX_CYCLES
    horizon: float = HORIZON


@dataclass(frozen=True)
class CycleOutcome:
    index: int                       # 0-based count of cycles run
    time: float
    decisions: Decisions


@dataclass
class SimulationResult:
    metrics: RunMetrics
    placements: dict[str, str]                     # pod -> node of its first binding
    bind_times: dict[str, float]                   # pod -> time of its first binding
    job_starts: dict[str, float]                   # job -> first time minMember of its pods ran
    waiting_reasons: dict[str, tuple[Reason, ...]]  # pods waiting at the end -> their last reasons
    podgroup_phases: dict[str, str]                # PodGroup -> phase at the end
    evicted: dict[str, int]                        # pod -> times evicted
    end_time: float
    cycles: int
    stopped: str                                   # drained | until | cycles | cycle limit | horizon
    state: ClusterState = field(repr=False)
    # What a reader should not miss (runtime.simulation.findings): head-of-line blocking in
    # admission, starved queues, jobs naming missing queues, thrashing evictions, jobs that never
    # started, promises the cluster cannot keep, device rules that match no node.
    findings: tuple[Finding, ...] = ()
    # The longest waits, longest first, each with its job's last reasons.
    longest_waits: tuple[Wait, ...] = ()
    # With HyperNodes (objects, or derived from node labels): each gang's span, the widest while
    # it ran (runtime.cluster.topology.Span), and the free room per HyperNode at the end.
    spans: dict[str, Span] = field(default_factory=dict)
    hypernode_room: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class _Job:
    key: str
    min_member: int
    waiting_since: float | None
    pods: set[str] = field(default_factory=set)
    running: int = 0                 # bound, not evicted, not finished
    done: int = 0
    violating: bool = False
    measured: bool = True            # False for a job already running at time 0

    @property
    def ready(self) -> bool:
        return self.running + self.done >= self.min_member


class Simulation:
    def __init__(self, plan: Plan, scenario: Scenario, limits: Limits = Limits(), options: Options | None = None,
                 on_cycle: Callable[[CycleOutcome], None] | None = None,
                 on_progress: Callable[[float], None] | None = None):
        self.plan = plan
        self.scenario = scenario
        self.limits = limits
        self.options = options or Options()
        self.on_cycle = on_cycle
        self.on_progress = on_progress
        self.state = copy.deepcopy(scenario.initial)
        self.recorder = Recorder()
        self.jobs: dict[str, _Job] = {}
        self.events: list[tuple[float, int, int, object]] = []
        self._seq = 0
        self.placements: dict[str, str] = {}
        self.bind_times: dict[str, float] = {}
        self.job_starts: dict[str, float] = {}
        self.waiting_reasons: dict[str, tuple[Reason, ...]] = {}
        self.finished_groups: dict[str, str] = {}
        self.evicted: dict[str, int] = {}
        self.audit = EvictionAudit()
        self._bound_uid: dict[str, str] = {}
        self._actions = action_registry()
        # Nodes never change in a run: the snapshot keeps their arrays between cycles.
        self._cache = SnapshotCache()
        self._unmet: list[UnmetPromise] | None = None   # guarantees the cluster cannot hold (PD215)
        self.spans: dict[str, Span] = {}
        self.watch = Watch()
        # job -> (queue, waiting since, its longest wait, started): the longest single wait of each job
        self._waits: dict[str, tuple[str, float, float, bool]] = {}

    # --- events -------------------------------------------------------------------------
    def _push(self, time: float, kind: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self.events, (time, self._seq, kind, payload))

    def _mine(self, pod: Pod) -> bool:
        return pod.scheduler_name == self.options.scheduler_name

    def _job_of(self, pod: Pod, now: float, counted: bool = True) -> _Job:
        key = group_key_of(pod)
        job = self.jobs.get(key)
        if job is None:
            group = self.state.podgroups.get(key) if pod.group else None
            job = self.jobs[key] = _Job(key, group.min_member if group else 1, now)
            if counted:
                self.recorder.job_arrived(queue_of(self.state, pod))
        return job

    def _start(self) -> None:
        for arrival in self.scenario.arrivals:
            self._push(arrival.time, _ARRIVE, arrival)
        for key, pod in self.state.pods.items():
            if pod.node_name and not pod.terminal and key in self.scenario.durations:
                self._bound_uid[key] = pod.uid
                self._push(self.scenario.durations[key], _COMPLETE, (key, pod.uid))
            if not self._mine(pod):
                continue
            job = self._job_of(pod, 0.0, counted=False)
            job.pods.add(key)
            if pod.phase == "Succeeded":
                job.done += 1
            elif pod.node_name and not pod.releasing:
                job.running += 1
        # Jobs already running at time 0 did not wait in this run: they are not measured.
        for job in self.jobs.values():
            if job.running > 0 and self.state.has_hypernodes and job.key in self.state.podgroups:
                self._note_span(job)
            if job.ready:
                job.waiting_since, job.measured = None, False
                self.job_starts[job.key] = 0.0
            else:
                self.recorder.job_arrived(self._queue_of_job(job))

    def _arrive(self, arrival: Arrival, now: float) -> None:
        if arrival.podgroup is not None:
            group = copy_podgroup(arrival.podgroup)
            group.creation = now
            self.state.add_podgroup(group)
            job = self.jobs.get(group.key)
            if job is not None:       # pods came first: the group sets the gang size
                job.min_member = group.min_member
            return
        pod = copy_pod(arrival.pod)
        pod.creation = now
        self.state.add_pod(pod)
        if self._mine(pod):
            job = self._job_of(pod, now)
            job.pods.add(pod.key)

    def _release_claims(self, pod: Pod) -> None:
        """A pod done or gone leaves its ResourceClaims' consumers, as kube-controller-manager's
        resourceclaim controller takes it out (a template's claim made for it goes, another claim
        left without consumers is deallocated): their devices are free again."""
        if pod.resource_claims:
            release_pod(self.state.dra, pod.uid, self.state.dra.claims)

    def _complete(self, key: str, uid: str, now: float) -> None:
        pod = self.state.pods.get(key)
        # A stale event: the pod was evicted (and recreated) since it was bound.
        if pod is None or pod.uid != uid or pod.releasing or not pod.node_name or pod.terminal:
            return
        self.state.complete_pod(key)
        self._release_claims(pod)
        if not self._mine(pod):
            self.state.remove_pod(key)
            return
        job = self.jobs.get(group_key_of(pod))
        if job is None:
            return
        job.running -= 1
        job.done += 1
        if job.done == len(job.pods):
            if job.measured:
                self.recorder.job_completed(queue_of(self.state, pod))
            for member in job.pods:
                self.state.remove_pod(member)
            if pod.group and job.key in self.state.podgroups:
                self.finished_groups[job.key] = PG_COMPLETED
                self.state.remove_podgroup(job.key)
            del self.jobs[job.key]

    def _leave(self, now: float) -> bool:
        """Evicted pods leave; their job's controller recreates them pending."""
        releasing = [p for p in self.state.pods.values() if p.releasing]
        for pod in releasing:
            self._release_claims(pod)
            self.state.remove_pod(pod.key)
            if not self._mine(pod) or group_key_of(pod) not in self.jobs:
                continue
            count = self.evicted.get(pod.key, 0)
            again = copy_pod(pod, uid_suffix=f"-r{count}")
            again.node_name, again.phase, again.releasing, again.creation = None, POD_PENDING, False, now
            again.annotations.pop("volcano.sh/gpu-index", None)
            self.state.add_pod(again)
        return bool(releasing)

    # --- one cycle ----------------------------------------------------------------------
    def _cycle(self, now: float, index: int) -> tuple[Decisions, object]:
        options = dataclasses.replace(self.options, now=now, lost_to=self.audit.lost_to(index))
        ssn = open_session(self.plan, self.state, options, self._cache)
        if self._unmet is None:   # nodes never change in a run: judged once, on the first cycle's cluster
            self._unmet = unmet_promises(ssn.snap)
        for name in self.plan.actions:
            self._actions[name](ssn)
        return collect(ssn), ssn

    def _apply(self, decisions: Decisions, now: float) -> bool:
        """Make the decisions true and keep the books; True when anything changed."""
        state = self.state
        changed = bool(decisions.bindings or decisions.evictions)
        for status in decisions.podgroups:
            group = state.podgroups.get(status.name)
            if group is not None and group.phase != status.phase:
                changed = True
        state.apply(decisions)
        touched: set[str] = set()
        for binding in decisions.bindings:
            pod = state.pods.get(binding.pod)
            if pod is None:
                continue
            self.placements.setdefault(binding.pod, binding.node)
            self.bind_times.setdefault(binding.pod, now)
            self.waiting_reasons.pop(binding.pod, None)
            duration = self.scenario.durations.get(binding.pod)
            if duration is not None:
                self._push(now + duration, _COMPLETE, (binding.pod, pod.uid))
            job = self.jobs.get(group_key_of(pod))
            if job is not None:
                job.running += 1
                touched.add(job.key)
        for eviction in decisions.evictions:
            pod = state.pods.get(eviction.pod)
            if pod is None:
                continue
            self.evicted[eviction.pod] = self.evicted.get(eviction.pod, 0) + 1
            job = self.jobs.get(group_key_of(pod))
            if job is not None and self._mine(pod):
                job.running -= 1
                touched.add(job.key)
                self.recorder.evicted(queue_of(state, pod))
        for item in decisions.unschedulable:
            self.waiting_reasons[item.pod] = item.reasons
        for key in touched:
            self._account(self.jobs[key], now)
        return changed

    def _account(self, job: _Job, now: float) -> None:
        queue = self._queue_of_job(job)
        if job.waiting_since is not None and job.ready:
            self.recorder.job_started(queue, now - job.waiting_since)
            if job.measured and now - job.waiting_since >= self._waits.get(job.key, ("", 0.0, 0.0, True))[2]:
                self._waits[job.key] = (queue, job.waiting_since, now - job.waiting_since, True)
            self.job_starts.setdefault(job.key, now)
            job.waiting_since = None
        elif job.waiting_since is None and not job.ready:
            job.waiting_since = now
        if job.running > 0 and self.state.has_hypernodes and job.key in self.state.podgroups:
            self._note_span(job)
        violating = job.min_member > 1 and job.running > 0 and not job.ready
        if violating and not job.violating:
            self.recorder.gang_violation(GangViolation(now, job.key, job.running, job.min_member))
        job.violating = violating

    def _note_span(self, job: _Job) -> None:
        """Keep the widest span the job's running pods have had (a tier above any: spanning the cluster)."""
        nodes = {p.node_name for key in job.pods if (p := self.state.pods.get(key)) is not None
                 and p.node_name and not p.terminal and not p.releasing}
        span = span_of(self.state.topology(), nodes)
        before = self.spans.get(job.key)
        if before is None or _width(span) > _width(before) or (_width(span) == _width(before)
                                                                and span.nodes > before.nodes):
            self.spans[job.key] = span

    def _queue_of_job(self, job: _Job) -> str:
        group = self.state.podgroups.get(job.key)
        if group is not None:
            return group.queue
        # A group-less pod is its own job: its queue annotation says where it goes.
        pod = next((p for key in job.pods if (p := self.state.pods.get(key)) is not None), None)
        return queue_of(self.state, pod) if pod is not None else "default"

    # --- the loop -----------------------------------------------------------------------
    def run(self) -> SimulationResult:
        # The cluster state and the workload's templates live for the whole run. Left to the
        # garbage collector, every full collection would walk all their pods again (~30 ms at
        # 20,000 pods, every few cycles) although none of them is ever garbage in a reference
        # cycle: freeze them out of its reach while the run lasts.
        frozen = len(self.state.pods) + len(self.scenario.arrivals) >= FREEZE_AT_PODS
        if frozen:
            gc.collect()
            gc.freeze()
        try:
            return self._run()
        finally:
            if frozen:
                gc.unfreeze()

    def _run(self) -> SimulationResult:
        limits = self.limits
        period = limits.period
        self._start()
        cycles = 0
        index = 0                   # the next cycle's position on the period grid
        dirty = True
        stopped = "drained"
        last_time = 0.0
        shuffle_step = tick_seconds(self.plan, period)
        while True:
            if limits.cycles is not None and cycles >= limits.cycles:
                stopped = "cycles"
                break
            if cycles >= limits.max_cycles:
                stopped = "cycle limit"
                break
            # shuffle evicts on the clock (a revocable zone closing, rescheduling's interval): with
            # it idle stretches are crossed a shuffle step at a time, up to the last event or --until.
            ticking = shuffle_step is not None and (bool(self.events) or limits.until is not None)
            if not dirty and limits.cycles is None:
                if not self.events and not ticking:
                    break
                upcoming = self.events[0][0] if self.events else math.inf
                if ticking:
                    upcoming = min(upcoming, last_time + shuffle_step)
                index = max(index, math.ceil(upcoming / period - 1e-9))
            now = index * period
            if limits.until is not None and now > limits.until:
                stopped = "until"
                break
            if now > limits.horizon:
                stopped = "horizon"
                break
            while self.events and self.events[0][0] <= now + 1e-9:
                _, _, kind, payload = heapq.heappop(self.events)
                if kind == _ARRIVE:
                    self._arrive(payload, now)
                else:
                    self._complete(payload[0], payload[1], now)
            left = self._leave(now)
            # The audit's clock is the period grid, not the count of cycles run: cycles skipped
            # while idle count too, so its window is 10 periods of simulated time.
            decisions, ssn = self._cycle(now, index)
            self.audit.record(index, decisions, eviction_queues(self.state, decisions),
                              eviction_jobs(self.state, decisions))
            changed = self._apply(decisions, now)
            self.recorder.sample(now, self.state, ssn, self.options.scheduler_name)
            self.watch.observe(now, ssn, self._ready)
            ssn.close()
            if self.on_cycle is not None:
                self.on_cycle(CycleOutcome(cycles, now, decisions))
            if self.on_progress is not None:
                self.on_progress(now)
            cycles += 1
            last_time = now
            index += 1
            dirty = changed or left or any(p.releasing for p in self.state.pods.values())
        # With --until the last state holds to the end even when the run drained earlier.
        end = max(limits.until, last_time) if limits.until is not None and limits.cycles is None else last_time
        still = [(self._queue_of_job(job), end - job.waiting_since)
                 for job in self.jobs.values() if job.waiting_since is not None]
        for job in self.jobs.values():
            if job.waiting_since is not None and job.measured and \
                    end - job.waiting_since >= self._waits.get(job.key, ("", 0.0, 0.0, True))[2]:
                self._waits[job.key] = (self._queue_of_job(job), job.waiting_since, end - job.waiting_since, False)
        self.watch.finish(end)
        metrics = dataclasses.replace(self.recorder.finish(end, cycles, still), eviction_audit=self.audit.to_dict())
        phases = dict(self.finished_groups)
        phases.update({key: group.phase for key, group in self.state.podgroups.items()})
        waiting = {k: v for k, v in self.waiting_reasons.items()
                   if k in self.state.pods and not self.state.pods[k].node_name}
        metrics = dataclasses.replace(metrics, storage_waiting=sum(
            1 for reasons in waiting.values() if any(waits_on_storage(r) for r in reasons)),
            devices=self.recorder.device_usage(self.state, end))
        return SimulationResult(metrics, self.placements, self.bind_times, self.job_starts, waiting, phases,
                                self.evicted, end, cycles, stopped, self.state, self._findings(waiting, end, metrics),
                                longest_waits=tuple(longest_waits(self._waits, self.watch.last_reasons)),
                                spans=dict(self.spans), hypernode_room=self._room())

    def _ready(self, key: str) -> bool:
        job = self.jobs.get(key)
        return job is not None and job.ready

    def _room(self) -> dict[str, dict[str, int]]:
        """Free room per HyperNode in the final state: allocatable less what placed pods request,
        over schedulable nodes (the pod count left out)."""
        state = self.state
        if not state.has_hypernodes:
            return {}
        free = {name: {r: v for r, v in n.allocatable.items() if r != "pods"}    # a count, not room a gang fills
                for name, n in state.nodes.items() if not n.unschedulable}
        for pod in state.placed_pods():
            room = free.get(pod.node_name)
            if room is not None:
                for resource, amount in pod.requests.items():
                    if resource in room:
                        room[resource] -= amount
        return room_by_hypernode(state.topology(), free)

    def _findings(self, waiting: dict[str, tuple[Reason, ...]], end: float,
                  metrics: RunMetrics) -> tuple[Finding, ...]:
        totals: dict[str, int] = {}
        for node in self.state.nodes.values():
            if not node.unschedulable:
                for resource, amount in node.allocatable.items():
                    totals[resource] = totals.get(resource, 0) + amount
        out = self.watch.findings(end, totals, metrics.samples)
        a = self.audit
        if a.thrashing:
            example = f" (e.g. for {a.wasted_pods[0]})" if a.wasted_pods else ""
            out.append(Finding(fd.THRASHING, f"thrashing: {a.wasted} evictions bought nothing within {a.window} "
                                             f"cycles{example}, {a.repeats} pods evicted again within {a.window} "
                                             f"cycles, {a.exchanges} evictions traded room back between two queues",
                               tuple(a.wasted_pods[:1]), a.wasted_pods[0] if a.wasted_pods else None))
        # Jobs naming a missing queue have their own finding above.
        never = sorted(job.key for job in self.jobs.values() if job.key not in self.job_starts and job.waiting_since
                       is not None and job.key not in self.watch.missing)
        if never:
            # the example: the one that waited longest, with its own last reason
            first = min(never, key=lambda k: (self.jobs[k].waiting_since, k))
            reasons = self.watch.last_reasons.get(first, ())
            if not reasons:
                pod = next((k for k in sorted(waiting) if group_key_of(self.state.pods[k]) == first), None)
                reasons = tuple(r.message for r in waiting.get(pod, ())) if pod else ()
            why = f": {reasons[0]}" if reasons else ""
            out.append(Finding(fd.NEVER_STARTED, f"{len(never)} jobs never started (the longest waiting: {first}"
                                                 f"{why})", tuple(never), first, None))
        for promise in self._unmet or ():
            out.append(Finding(fd.PROMISE, f"{PROMISE_BEYOND_CLUSTER.code} {PROMISE_BEYOND_CLUSTER.name}: "
                                           f"{promise.describe()}"))
        for plan in device_plans(self.plan):
            hosts = [n for n in self.state.nodes.values() if n.allocatable.get(plan.resource, 0) > 0
                     and (not plan.models or card_model(n.labels, plan.model_label) in plan.models)]
            if not hosts:
                models = f" of model {'/'.join(plan.models)}" if plan.models else ""
                out.append(Finding(fd.DEVICE, f"device {plan.resource}{models} matches no node"))
        return tuple(out)


def _width(span: Span) -> float:
    return float("inf") if span.tier is None else span.tier


def simulate(plan: Plan, scenario: Scenario, limits: Limits = Limits(), options: Options | None = None,
             on_cycle: Callable[[CycleOutcome], None] | None = None,
             on_progress: Callable[[float], None] | None = None) -> SimulationResult:
    return Simulation(plan, scenario, limits, options, on_cycle, on_progress).run()
