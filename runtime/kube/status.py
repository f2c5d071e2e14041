"""PodGroup and Queue status, written only when it changes.

PodGroup (like Volcano's CRD) has no status subresource: its status is a merge patch of the
object itself. Queue has one: its status goes to /status. Each cycle computes the status the
scheduler would write and compares it with the one the cache last saw (or the scheduler last
wrote); equal means no request at all, which is the common case for a settled cluster.

PodGroup status: `phase`, `conditions` (Unschedulable/NotEnoughResources with the engine's
reason, Scheduled, or Unschedulable/BindFailed when binds of the gang failed this cycle),
`running` and `succeeded` pod counts; in the same patch, the job's HyperNode annotation
(volcano.sh/job-allocated-hypernode) when it changed. Queue status: `allocated` and the number of PodGroups
per phase. A Queue's `state` belongs to whoever opens and closes queues and is left alone.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.quantities import format_base_units
from runtime.cluster.decisions import PodGroupStatus
from runtime.kube.api import ApiError, KubeApi
from runtime.kube.binder import REFUSED, BindOutcome, Refusal
from runtime.kube.cache import PODGROUPS, QUEUES, ClusterCache
from runtime.kube.statusfacts import podgroup_says
from runtime.cluster.model import (
    JOB_ALLOCATED_HYPERNODE, PG_COMPLETED, PG_INQUEUE, PG_PENDING, PG_RUNNING, POD_RUNNING, POD_SUCCEEDED, ClusterState,
    Condition, Pod,
)

log = logging.getLogger("policydsl.kube.status")

BIND_FAILED = "BindFailed"
QUEUE_COUNTS = {PG_PENDING: "pending", PG_INQUEUE: "inqueue", PG_RUNNING: "running", PG_COMPLETED: "completed"}


@dataclass(frozen=True)
class Update:
    key: str  # namespace/name of a PodGroup, or a Queue name
    status: dict[str, Any]  # the fields of status the scheduler owns, as they will read
    patch: dict[str, Any]  # the merge patch of `status` that gets there
    # PodGroup only: annotations to set (None: remove) in the same patch, e.g. the job's
    # HyperNode (volcano.sh/job-allocated-hypernode, as Volcano's UpdatePodGroup writes it).
    annotations: Mapping[str, str | None] | None = None


def hypernode_annotation(hypernode: str) -> dict[str, str | None]:
    """The PodGroup annotation naming the job's HyperNode ("": removed)."""
    return {JOB_ALLOCATED_HYPERNODE: hypernode or None}


def now_text() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def podgroup_update(key: str, current: Mapping[str, Any] | None, phase: str, conditions: tuple[Condition, ...],
                    counts: Mapping[str, int], *, now: str, transition_id: str) -> Update | None:
    """The merge patch of `status` that makes the PodGroup say this, or None if it already does.
    Without conditions from the engine the current ones are kept."""
    if podgroup_says(current, phase, conditions, counts):
        return None
    current = current or {}
    old_conditions = [c for c in current.get("conditions") or [] if isinstance(c, dict)]
    status: dict[str, Any] = {"phase": phase, **counts}
    if conditions:
        previous = {(c.get("type"), c.get("status")): c for c in old_conditions}
        written = []
        for c in conditions:
            before = previous.get((c.type, c.status))
            # The transition time moves only when the condition's status does.
            since = before.get("lastTransitionTime") if before else None
            written.append({"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                            "transitionID": transition_id, "lastTransitionTime": since or now})
        status["conditions"] = written
    return Update(key, status, status)


def bind_failure_condition(failures: Sequence[BindOutcome], total: int) -> Condition:
    """The condition of a gang some of whose binds did not go through: how many, the first one's
    pod and answer, and what happens next (a refused pod waits until it changes)."""
    first = failures[0]
    refused = sum(1 for f in failures if f.result == REFUSED)
    if refused == len(failures):
        what, then = "were refused", "the refused pods are held back until they change"
    elif refused:
        what, then = f"did not go through ({refused} refused)", "retrying the others next cycle"
    else:
        what, then = "failed", "retrying next cycle"
    return Condition("Unschedulable", "True", BIND_FAILED,
                     f"{len(failures)}/{total} binds of the gang {what} ({first.pod}: {first.detail}); {then}")


def held_members_condition(refusals: Sequence[Refusal], min_member: int) -> Condition:
    """A gang with members held back after a refused bind: short, whatever else it waits for."""
    first = min(refusals, key=lambda r: r.pod)
    return Condition("Unschedulable", "True", BIND_FAILED,
                     f"{len(refusals)} task(s) of the gang (minMember {min_member}) cannot be bound: "
                     f"{first.pod}: {first.message}")


def pod_counts(state: ClusterState, scheduler_name: str) -> dict[str, dict[str, int]]:
    """running / succeeded pods of `scheduler_name` per PodGroup key; groups with neither are left
    out (read them as 0). Another scheduler's pod naming the group is not one of its tasks."""
    counts: dict[str, dict[str, int]] = {}
    for pod in state.pods.values():
        # Phase first: this runs over every pod each cycle, most of them neither (or group-less).
        phase = pod.phase
        if (phase != POD_RUNNING and phase != POD_SUCCEEDED) or pod.group is None or pod.scheduler_name != scheduler_name:
            continue
        c = counts.setdefault(f"{pod.namespace}/{pod.group}", {"running": 0, "succeeded": 0})
        c["running" if phase == POD_RUNNING else "succeeded"] += 1
    return counts


def queue_phases(statuses: Iterable[PodGroupStatus], state: ClusterState) -> dict[str, list[str]]:
    """Each queue's PodGroups by phase after a cycle: the cycle's statuses, and the settled gangs
    the state only counts (runtime.cluster.model.SettledPods.groups), which are Running."""
    phases: dict[str, list[str]] = defaultdict(list)
    for pg in statuses:
        group = state.podgroups.get(pg.name)
        if group is not None:
            phases[group.queue].append(pg.phase)
    for queue, settled in (state.settled.groups if state.settled is not None else {}).items():
        phases[queue].extend([PG_RUNNING] * settled)
    return phases


def queue_update(name: str, current: Mapping[str, Any] | None, allocated: Mapping[str, int],
                 phases: Iterable[str]) -> Update | None:
    current = current or {}
    counts = {field: 0 for field in QUEUE_COUNTS.values()}
    for phase in phases:
        if phase in QUEUE_COUNTS:
            counts[QUEUE_COUNTS[phase]] += 1
    quantities = {res: format_base_units(res, amount) for res, amount in sorted(allocated.items())
                  if amount > 0 and res != "pods"}
    same = (dict(current.get("allocated") or {}) == quantities
            and all(int(current.get(field) or 0) == value for field, value in counts.items()))
    if same:
        return None
    # A merge patch merges maps: resources no longer allocated must be removed explicitly.
    removed = {res: None for res in current.get("allocated") or {} if res not in quantities}
    return Update(name, {**counts, "allocated": quantities}, {**counts, "allocated": {**quantities, **removed}})


def new_transition_id() -> str:
    return str(uuid.uuid4())


class StatusWriter:
    """One status write per call; KubeCluster runs them on its pool."""

    def __init__(self, api: KubeApi, cache: ClusterCache, *, may_write: Callable[[], bool] = lambda: True) -> None:
        self.api = api
        self.cache = cache
        self.may_write = may_write
        # Told of every write's answer (kind "PodGroup" | "Queue" | "Pod", key, the error or None);
        # KubeCluster sums failures up per kind (runtime.kube.outages) instead of a line each.
        self.on_answer: Callable[[str, str, ApiError | None], None] = _log_failure

    def write_podgroup(self, update: Update) -> bool:
        namespace, name = update.key.split("/", 1)
        path = f"{PODGROUPS.path.rsplit('/', 1)[0]}/namespaces/{namespace}/podgroups/{name}"
        if self._patch(path, update, "PodGroup"):
            written = update.annotations or {}
            hypernode = (written[JOB_ALLOCATED_HYPERNODE] or "") if JOB_ALLOCATED_HYPERNODE in written else None
            if update.patch or hypernode is not None:
                self.cache.record_podgroup_status(update.key, update.status, hypernode=hypernode)
            return True
        return False

    def write_queue(self, update: Update) -> bool:
        if self._patch(f"{QUEUES.path}/{update.key}/status", update, "Queue"):
            self.cache.record_queue_status(update.key, update.status)
            return True
        return False

    def write_nomination(self, pod: Pod, node: str | None) -> bool:
        """Set (or, with None, clear) the pod's status.nominatedNodeName."""
        if not self.may_write():
            return False
        try:
            self.api.merge_patch(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                                 {"status": {"nominatedNodeName": node}})
            self.on_answer("Pod", pod.key, None)
            return True
        except ApiError as err:
            if err.status != 404:
                self.on_answer("Pod", pod.key, err)
            return False

    def _patch(self, path: str, update: Update, kind: str) -> bool:
        if not self.may_write():
            return False
        try:
            body: dict[str, Any] = {"status": update.patch} if update.patch else {}
            if update.annotations:
                body["metadata"] = {"annotations": dict(update.annotations)}
            self.api.merge_patch(path, body)
            self.on_answer(kind, update.key, None)
            return True
        except ApiError as err:
            if err.status != 404:  # deleted meanwhile: nothing to say
                self.on_answer(kind, update.key, err)
            return False


def _log_failure(kind: str, key: str, error: ApiError | None) -> None:
    if error is not None:
        log.warning("writing status of %s %s: %s", kind, key, error)
