"""One scheduling cycle: snapshot → session (plugins open) → the Plan's actions → Decisions.

    decisions = run_cycle(plan, state)             # state: runtime.cluster.model.ClusterState
    state.apply(decisions); state.advance()        # what a simulator does between cycles
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Protocol

import numpy as np

from compiler.plan import Plan
from runtime.cluster import decisions as d
from runtime.engine.actions import registry as action_registry
from runtime.engine.actions.reservations import hold_reservations
from runtime.engine.kernels import load as load_kernels
from runtime.cluster.model import PG_PENDING, ClusterState, Condition, Pod
from runtime.engine.plugins import registry as plugin_registry
from runtime.engine.rules.hypernodes import job_hypernodes
from runtime.engine.session import Options, Session
from runtime.engine.actions.eviction import wants_victims
from runtime.engine.snapshot import ALLOCATED, HELD, PENDING, VICTIM_ACTIONS, SnapshotCache, build_snapshot

__all__ = ["Options", "CycleObserver", "VictimsNeeded", "run_cycle", "open_session", "collect", "collector_paused"]


class _CollectorPause:
    """The cyclic garbage collector held off while a cycle runs. A cycle allocates some
    200,000 containers at 10,000 nodes / 100,000 pods (the snapshot's jobs and classes, the
    rules' counts, statements), none of them cyclic garbage once the session is closed
    (Session.close breaks its one cycle); each allocation burst set off generation-0 and -1
    collections and, the state being frozen (gc.freeze) so that the oldest generation looks
    small, about three full collections a cycle walking every object the cycle holds: a tenth
    of the cycle's processor time, collecting nothing. Re-entrant and thread-safe: the one
    instance, `collector_paused`, is shared with the connector's reflectors, which pause it
    while they list (runtime.kube.cache), so a cycle ending during a list does not enable it
    again; it is enabled again only if it was enabled when the outermost pause began."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._was_enabled:
                gc.enable()


collector_paused = _CollectorPause()     # `with collector_paused:` around a whole cycle


class VictimsNeeded(Exception):
    """A cycle over a snapshot that folded settled pods, under a plan that may evict, reached
    preempt or reclaim with a job that could evict: the settled pods may be its victims, so the
    cycle must run again over a snapshot that lists them (Options.fold_settled=False)."""


class CycleObserver(Protocol):
    """Told how long each action took and shown the session before it closes (metrics)."""

    def action_finished(self, action: str, seconds: float) -> None: ...

    def session_finished(self, ssn: Session) -> None: ...


def open_session(plan: Plan, state: ClusterState, options: Options | None = None,
                 cache: SnapshotCache | None = None) -> Session:
    """Snapshot the state and open the plugins, ready for actions (tests and tools use it)."""
    options = options or Options()
    kernels = load_kernels(options.pure_python)
    snap = build_snapshot(state, plan, options.scheduler_name, cache, kernels, options.fold_settled)
    ssn = Session(plan, snap, kernels)
    ssn.open_plugins(plugin_registry())
    hold_reservations(ssn, options.now)
    ssn.lost_to = options.lost_to or {}
    return ssn


def run_cycle(plan: Plan, state: ClusterState, options: Options | None = None,
              cache: SnapshotCache | None = None, observer: CycleObserver | None = None) -> d.Decisions:
    """Run the Plan's actions once over the state. The state is not changed (see
    ClusterState.apply). A PodGroup naming a queue nobody defines waits, saying so, as Volcano
    skips such a job; the others are scheduled. Over a snapshot that folds settled pods, a plan
    that may evict raises VictimsNeeded when preempt or reclaim could evict (see there)."""
    with collector_paused:
        return _run_cycle(plan, state, options, cache, observer)


def _run_cycle(plan: Plan, state: ClusterState, options: Options | None, cache: SnapshotCache | None,
               observer: CycleObserver | None) -> d.Decisions:
    ssn = open_session(plan, state, options, cache)
    actions = action_registry()
    folded = ssn.snap.settled is not None
    for name in plan.actions:
        started = time.perf_counter()
        if folded and name in VICTIM_ACTIONS:
            # Settled pods are not listed: exact only while no job could evict (then the
            # action does nothing whoever the victims would be).
            if name == "shuffle" or wants_victims(ssn):
                ssn.close()
                raise VictimsNeeded(name)
            continue
        actions[name](ssn)
        if observer is not None:
            observer.action_finished(name, time.perf_counter() - started)
    decisions = collect(ssn)
    if observer is not None:
        observer.session_finished(ssn)
    ssn.close()
    return decisions


def held_reason(pod: Pod, snap=None, t: int = -1) -> d.Reason:
    """Why a pod is never placed as it is (Snapshot status HELD): held back by the connector
    (a Binding refused for good, an invalid PodGroup or Queue), gates, a field not evaluated,
    or its claims (kube-scheduler's PreFilter words: `0/3 nodes are available:
    persistentvolumeclaim "data" not found.`)."""
    if pod.held_back is not None:
        return pod.held_back
    device = snap.device_held.get(t) if snap is not None else None
    if device is not None and not (pod.scheduling_gates or pod.unsupported):
        return d.Reason(d.UNSUPPORTED, device.message, {"field": device.field})
    unusable = snap.volumes.held.get(t) if snap is not None and snap.volumes is not None else None
    claims = snap.dra.held.get(t) if snap is not None and snap.dra is not None else None
    if unusable is None and claims is not None and not (pod.scheduling_gates or pod.unsupported):
        # its ResourceClaims (runtime.cluster.dra.ClaimProblem), kube's DynamicResources PreFilter
        return d.Reason(d.CLAIM, f"0/{snap.n_nodes} nodes are available: {claims.message}.", {"claim": claims.claim})
    if unusable is not None and not (pod.scheduling_gates or pod.unsupported):
        return d.Reason(d.VOLUME, f"0/{snap.n_nodes} nodes are available: {unusable.message}.",
                        {"claim": unusable.claim})
    if pod.scheduling_gates:
        gates = " ".join(pod.scheduling_gates)
        return d.Reason(d.GATED, f"waiting for scheduling gates: [{gates}]", {"gates": list(pod.scheduling_gates)})
    return d.Reason(d.UNSUPPORTED, f"pod sets {pod.unsupported}, which this scheduler does not evaluate: it is "
                                   f"not placed without it", {"field": pod.unsupported})


def collect(ssn: Session) -> d.Decisions:
    snap = ssn.snap
    out = d.Decisions(evictions=list(ssn.evictions), now=ssn.now,
                      released={snap.task_keys[t]: why for t, why in ssn.released.items()})
    status = ssn.status
    out.bindings, out.pipelined = ssn.k.placements(snap.status, status, ssn.task_node, snap.task_keys,
                                                   snap.node_names, ssn.task_devices)
    if ssn.storage is not None or ssn.dra_rule is not None:
        # The tasks bound this cycle as placements() finds them (pending in the snapshot,
        # allocated now), read per task with choices rather than by a set of every binding's key.
        bound = (snap.status == PENDING) & (status == ALLOCATED)
        if ssn.storage is not None:
            out.volumes = {snap.task_keys[t]: tuple(choices) for t, choices in ssn.storage.choices.items()
                           if choices and bound[t]}
        if ssn.dra_rule is not None:
            out.claims = {snap.task_keys[t]: tuple(chosen) for t, chosen in ssn.dra_rule.choices.items()
                          if chosen and bound[t]}
    numa = ssn.plugins.get("numa-aware")
    if numa is not None:      # the exclusive CPUs of bound pods (the scheduler's view holds them)
        out.numa = numa.bound_cpus({b.pod for b in out.bindings})
    # Where each job asking for topology now runs (the PodGroup annotation), when that changed.
    out.hypernodes = job_hypernodes(ssn)
    keys = snap.task_keys
    waiting = np.flatnonzero((status == PENDING) | (status == HELD))
    for t, j in zip(waiting.tolist(), snap.task_job[waiting].tolist()):
        if status[t] == HELD:
            out.unschedulable.append(d.Unschedulable(keys[t], (held_reason(snap.pods[t], snap, t),)))
            continue
        reasons = list(ssn.task_reasons.get(t, ()))
        for reason in ssn.job_reasons.get(j, ()):
            if reason not in reasons:
                reasons.append(reason)
        if not reasons:
            if ssn.job_phase[j] == PG_PENDING and "enqueue" in ssn.plan.actions:
                reasons.append(d.Reason(d.ENQUEUE, f"job {snap.jobs[j].key} is not admitted yet (Pending)"))
            elif ssn.zero_request(t) and "backfill" not in ssn.plan.actions:
                reasons.append(d.Reason(d.JOB, "zero-request pod waits for backfill, which the policy does not run"))
            else:
                reasons.append(d.Reason(d.JOB, "not reached this cycle", {"unreached": True}))
        out.unschedulable.append(d.Unschedulable(keys[t], tuple(reasons)))

    def waiting_conditions(j: int, pending: int, size: int) -> tuple[Condition, ...]:
        """A waiting PodGroup's condition: why, if the cycle tried it or knows a reason."""
        if not (j in ssn.attempted or ssn.job_reasons.get(j)):
            return ()
        detail = ""
        first = next((r for t in snap.jobs[j].tasks.tolist() for r in ssn.task_reasons.get(t, ()) if r.kind != d.GANG),
                     None)
        if first is None and ssn.job_reasons.get(j):
            first = ssn.job_reasons[j][0]
        if first is not None:
            detail = f": {first.message}"
        if not size:   # a PodGroup whose pods do not exist yet
            return (Condition("Unschedulable", "True", "NotEnoughResources", f"PodGroup not admitted{detail}"),)
        return (Condition("Unschedulable", "True", "NotEnoughResources",
                          f"{pending}/{size} tasks in gang unschedulable{detail}"),)

    out.podgroups = ssn.k.podgroup_statuses(snap.jobs, ssn.job_phase, ssn.job_ready, status, snap.task_job,
                                            waiting_conditions)
    return out
