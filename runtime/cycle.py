"""One scheduling cycle: snapshot → session (plugins open) → the Plan's actions → Decisions.

    decisions = run_cycle(plan, state)             # state: runtime.model.ClusterState
    state.apply(decisions); state.advance()        # what a simulator does between cycles
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from compiler.plan import Plan
from runtime import decisions as d
from runtime.actions import registry as action_registry
from runtime.kernels import load as load_kernels
from runtime.model import PG_COMPLETED, PG_INQUEUE, PG_PENDING, PG_RUNNING, ClusterState, Condition
from runtime.objects import ObjectError, check_queues
from runtime.plugins import registry as plugin_registry
from runtime.session import Options, Session
from runtime.snapshot import ALLOCATED, PENDING, PIPELINED, SUCCEEDED, SnapshotCache, build_snapshot

__all__ = ["Options", "CycleObserver", "run_cycle", "open_session", "collect"]


class CycleObserver(Protocol):
    """Told how long each action took and shown the session before it closes (metrics)."""

    def action_finished(self, action: str, seconds: float) -> None: ...

    def session_finished(self, ssn: Session) -> None: ...


def open_session(plan: Plan, state: ClusterState, options: Options | None = None,
                 cache: SnapshotCache | None = None) -> Session:
    """Snapshot the state and open the plugins, ready for actions (tests and tools use it)."""
    options = options or Options()
    problems = check_queues(state, [q.name for q in plan.queues])
    if problems:
        raise ObjectError(problems)
    snap = build_snapshot(state, plan, options.scheduler_name, cache)
    ssn = Session(plan, snap, load_kernels(options.pure_python))
    ssn.open_plugins(plugin_registry())
    return ssn


def run_cycle(plan: Plan, state: ClusterState, options: Options | None = None,
              cache: SnapshotCache | None = None, observer: CycleObserver | None = None) -> d.Decisions:
    """Run the Plan's actions once over the state. The state is not changed (see
    ClusterState.apply). Raises ObjectError when a PodGroup names an unknown queue."""
    ssn = open_session(plan, state, options, cache)
    actions = action_registry()
    for name in plan.actions:
        started = time.perf_counter()
        actions[name](ssn)
        if observer is not None:
            observer.action_finished(name, time.perf_counter() - started)
    decisions = collect(ssn)
    if observer is not None:
        observer.session_finished(ssn)
    return decisions


def collect(ssn: Session) -> d.Decisions:
    snap = ssn.snap
    out = d.Decisions(evictions=list(ssn.evictions))
    status = ssn.status
    placed = np.flatnonzero((snap.status == PENDING) & ((status == ALLOCATED) | (status == PIPELINED)))
    names = snap.node_names
    keys = snap.task_keys
    devices = ssn.task_devices
    nodes = ssn.task_node[placed].tolist()
    bind = status[placed] == ALLOCATED
    tasks = placed.tolist()
    out.bindings = [d.Binding(keys[t], names[node], devices.get(t, {}))
                    for t, node, b in zip(tasks, nodes, bind.tolist()) if b]
    if not bind.all():
        out.pipelined = {keys[t]: names[node] for t, node, b in zip(tasks, nodes, bind.tolist()) if not b}
    waiting = np.flatnonzero(status == PENDING)
    for t, j in zip(waiting.tolist(), snap.task_job[waiting].tolist()):
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
                reasons.append(d.Reason(d.JOB, "not reached this cycle"))
        out.unschedulable.append(d.Unschedulable(keys[t], tuple(reasons)))
    j_n = len(snap.jobs)
    counts = _JobCounts(
        ready=ssn.job_ready.tolist(),
        pending=np.bincount(snap.task_job[waiting], minlength=j_n).tolist(),
        succeeded=np.bincount(snap.task_job[status == SUCCEEDED], minlength=j_n).tolist())
    out.podgroups = [_podgroup_status(ssn, job, counts) for job in snap.jobs if not job.implicit]
    return out


@dataclass(frozen=True)
class _JobCounts:
    """Per-job task counts after the actions, as lists indexed by job."""

    ready: list[int]
    pending: list[int]
    succeeded: list[int]


def _podgroup_status(ssn: Session, job, counts: _JobCounts) -> d.PodGroupStatus:
    j = job.index
    phase = ssn.job_phase[j]
    size = len(job.tasks)
    ready = counts.ready[j]
    if size and counts.succeeded[j] == size:
        phase = PG_COMPLETED
    elif phase != PG_PENDING and ready >= job.min_member and ready > 0:
        phase = PG_RUNNING
    elif phase == PG_RUNNING and ready < job.min_member:
        phase = PG_INQUEUE
    conditions: tuple[Condition, ...] = ()
    if phase in (PG_INQUEUE, PG_PENDING) and (j in ssn.attempted or ssn.job_reasons.get(j)):
        detail = ""
        first = next((r for t in job.tasks.tolist() for r in ssn.task_reasons.get(t, ()) if r.kind != d.GANG), None)
        if first is None and ssn.job_reasons.get(j):
            first = ssn.job_reasons[j][0]
        if first is not None:
            detail = f": {first.message}"
        conditions = (Condition("Unschedulable", "True", "NotEnoughResources",
                                f"{counts.pending[j]}/{size} tasks in gang unschedulable{detail}"),)
    elif phase == PG_RUNNING:
        conditions = (Condition("Scheduled", "True", "Scheduled", f"{ready}/{size} tasks ready"),)
    return d.PodGroupStatus(job.key, phase, conditions)
