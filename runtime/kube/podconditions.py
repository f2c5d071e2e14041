"""The autoscaler contract: a pod of ours that waits says so in its `PodScheduled` condition, as
kube-scheduler writes it, so that Cluster Autoscaler (and Karpenter) add a node for it when a node
would help, and only then.

kube-scheduler, when a pod cannot be placed, patches the pod's status with the condition
`PodScheduled` `False`, reason `Unschedulable` and the fit error as message ("0/3 nodes are
available: 3 Insufficient cpu."); a bind makes the API server set it `True`. Cluster
Autoscaler lists pods whose PodScheduled is False with reason Unschedulable, simulates them on
the node groups' templates and scales up the one they would fit (pods that fit on an existing
node in its own simulation are dropped first). So we write exactly that condition, through
`pods/status` (a strategic merge patch: the list of conditions is merged by type, the
kubelet's other conditions stay), with the engine's reason as message:

- a pod whose gang cannot be placed whole carries the gang's figures (its PodGroup's condition,
  "3/4 tasks in gang unschedulable: ..."), then its own reasons: every waiting pod of such a
  gang says so, including those the cycle never tried;
- a pod whose gang still lacks pods (minMember not created yet) says that it waits for them;
- a preemptor whose room is being freed (nominated) says where, and that it waits for victims;
- a pod held by scheduling gates is left alone: the API server already marks it
  `SchedulingGated`, which the autoscaler ignores, as it should.

The reason (`scheduled_reason`) is `Unschedulable` only when a new node could let the pod run:
no node fits (NODES, DEVICE, VOLUME), a gang no current node set holds (GANG), a queue limit that
grows with the cluster (a QUEUE reason whose details say `fixed` False: proportion's deserved
share, a real capability bounded by the cluster) — and nothing else holds it. A pod that the
queue or admission would not let run anyway (a QUEUE limit that is the queue's capability, a
closed queue, ENQUEUE, JOB; a pod the cycle did not reach, alone) gets `WaitingForQueue`, which Cluster Autoscaler and Karpenter do
not act on (they list `PodScheduled` False with reason `Unschedulable` only; CA's
`--bypassed-schedulers` takes a pod with an empty reason, never this one): nodes bought for it
would stay empty (volcano#4710). A pod a node cannot help either way (BIND: its Binding refused
for good; UNSUPPORTED: a field not evaluated) gets kube-scheduler's `SchedulerError`. A gang's
waiting pods share one reason, from the kinds of all of them: a gang one of whose pods the queue
refuses does not start on new nodes.

Cheap: written only when the message changes (never the same text twice; a pod bound or gone
is forgotten), only once the pod has waited POD_CONDITION_DELAY_S (a pod placed within a second
or a gang whose pods are still being created costs no write), and at most WRITES_PER_S writes
a second (burst WRITE_BURST); a write the budget refuses stays due and goes with a later cycle.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass

from runtime.cluster import decisions as d
from runtime.kube.api import ApiError, KubeApi
from runtime.kube.outages import OutageLog, cause_of
from runtime.kube.ratelimit import TokenBucket
from runtime.cluster.model import ClusterState, Pod, group_key_of

log = logging.getLogger("policydsl.kube.podconditions")

POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE = "Unschedulable"          # kube-scheduler's v1.PodReasonUnschedulable: autoscalers add nodes
WAITING_FOR_QUEUE = "WaitingForQueue"    # ours: the queue or admission holds it; autoscalers leave it alone
SCHEDULER_ERROR = "SchedulerError"       # kube-scheduler's v1.PodReasonSchedulerError: no node would help
# Reason kinds that ask for room a new node would give, and those that say the queue or admission
# holds the pod whatever the nodes (a QUEUE reason is one unless its details say `fixed` False).
NODE_KINDS = frozenset({d.NODES, d.DEVICE, d.VOLUME, d.CLAIM, d.GANG, d.MEMBERS})
QUEUE_KINDS = frozenset({d.QUEUE, d.ENQUEUE, d.JOB})
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
POD_CONDITION_DELAY_S = 1.0
WRITES_PER_S = 50.0
WRITE_BURST = 200
MAX_MESSAGE = 2048


@dataclass(frozen=True)
class PodCondition:
    pod: str
    uid: str
    message: str
    reason: str = UNSCHEDULABLE


def _queue_holds(reason: d.Reason) -> bool:
    if reason.details.get("unreached"):
        return False    # "not reached this cycle": its turn in the queue, no verdict either way
    if reason.kind == d.QUEUE:
        return bool(reason.details.get("fixed", True))
    return reason.kind in QUEUE_KINDS


def _node_helps(reason: d.Reason) -> bool:
    return reason.kind in NODE_KINDS or (reason.kind == d.QUEUE and not reason.details.get("fixed", True))


def scheduled_reason(reasons) -> str:
    """The PodScheduled reason for a pod that waits for `reasons` (d.Reason objects; a gang's
    pods pass those of all its waiting pods): `Unschedulable` when some reason is room a new
    node would give and none is the queue's or admission's refusal, `WaitingForQueue` when the
    queue or admission holds it, `SchedulerError` when a node would not help either way."""
    reasons = list(reasons)
    if any(_queue_holds(r) for r in reasons):
        return WAITING_FOR_QUEUE
    if any(_node_helps(r) for r in reasons):
        return UNSCHEDULABLE
    if reasons and all(r.details.get("unreached") for r in reasons):
        return WAITING_FOR_QUEUE
    return SCHEDULER_ERROR


def waiting_reasons(decisions: d.Decisions, state: ClusterState, only: Container[str] | None = None) -> dict[str, str]:
    """pod key -> the PodScheduled reason of each pod `waiting_messages` gives a message (of
    those in `only`, when given)."""
    gangs: dict[str, list[d.Reason]] = {}
    for item in decisions.unschedulable:
        pod = state.pods.get(item.pod)
        if pod is not None and pod.group:
            gangs.setdefault(group_key_of(pod), []).extend(item.reasons)
    of_gang: dict[str, str] = {}    # a gang's pods share its reasons: one verdict per gang
    out: dict[str, str] = {}
    for item in decisions.unschedulable:
        pod = state.pods.get(item.pod)
        if pod is None or not item.reasons or (only is not None and item.pod not in only):
            continue
        if pod.group:
            key = group_key_of(pod)
            group = state.podgroups.get(key)
            if group is not None and group.min_member > 1:
                if key not in of_gang:
                    of_gang[key] = scheduled_reason(gangs[key])
                out[item.pod] = of_gang[key]
                continue
        out[item.pod] = scheduled_reason(item.reasons)
    for key in decisions.pipelined:
        if key in state.pods and key not in out:
            out[key] = UNSCHEDULABLE    # nominated: Cluster Autoscaler counts it on its node
    return out


def waiting_pods(decisions: d.Decisions, state: ClusterState) -> list[str]:
    """The pods `waiting_messages` gives a message, found without making one."""
    out = [item.pod for item in decisions.unschedulable if item.reasons and item.pod in state.pods
           and not any(r.kind == d.GATED for r in item.reasons)]
    out += [key for key in decisions.pipelined if key in state.pods]
    return out


def waiting_messages(decisions: d.Decisions, state: ClusterState,
                     only: Container[str] | None = None) -> dict[str, str]:
    """pod key -> the PodScheduled message each waiting pod of ours should carry (of those in
    `only`, when given)."""
    groups = {s.name: c.message for s in decisions.podgroups for c in s.conditions[:1]
              if c.type == UNSCHEDULABLE and c.status == "True"}
    out: dict[str, str] = {}
    for item in decisions.unschedulable:
        pod = state.pods.get(item.pod)
        if pod is None or not item.reasons or (only is not None and item.pod not in only):
            continue
        if any(r.kind == d.GATED for r in item.reasons):
            continue   # SchedulingGated, set by the API server
        if all(r.kind == d.MEMBERS for r in item.reasons):
            out[item.pod] = "waiting for the other pods of its gang to be created: " + \
                "; ".join(r.message for r in item.reasons)
            continue
        parts: list[str] = []
        group = groups.get(group_key_of(pod)) if pod.group else None
        podgroup = state.podgroups.get(group_key_of(pod)) if pod.group else None
        if podgroup is None or podgroup.min_member <= 1:
            group = None    # a PodGroup of one: its own reasons (its group's figures are the same)
        if group is not None:
            parts.append(group)
        for reason in item.reasons:
            if reason.message not in parts and not (group is not None and reason.message in group):
                parts.append(reason.message)
        out[item.pod] = "; ".join(parts)[:MAX_MESSAGE]
    for key, node in decisions.pipelined.items():
        if key in state.pods and key not in out and (only is None or key in only):
            out[key] = f"waiting for the pods evicted from node {node} to leave: its room there is held for it " \
                       f"(status.nominatedNodeName)"
    return out


class PodConditionWriter:
    """Decides which pods' PodScheduled to write after a cycle (`due`), and writes one (`write`)."""

    def __init__(self, api: KubeApi, *, may_write: Callable[[], bool] = lambda: True,
                 delay_s: float = POD_CONDITION_DELAY_S, rate: float = WRITES_PER_S, burst: int = WRITE_BURST,
                 clock: Callable[[], float] = time.monotonic, outage: OutageLog | None = None) -> None:
        self.api = api
        self.may_write = may_write
        # Failures go to the connection's outage log (a line when they start, a summary while
        # they last), not a line per pod: an outage would otherwise write one per waiting pod.
        self.outage = outage
        self.delay_s = delay_s
        self.clock = clock
        self._budget = TokenBucket(rate, burst, clock)
        self._lock = threading.Lock()
        self._written: dict[str, tuple[str, str, str]] = {}   # pod -> (uid, reason, message) the API server holds
        self._waiting_since: dict[str, float] = {}         # pod -> first cycle it was seen waiting
        self._transition: dict[str, str] = {}              # pod -> lastTransitionTime written
        self.writes = 0

    def due(self, decisions: d.Decisions, state: ClusterState, busy: Callable[[str], bool]) -> list[PodCondition]:
        """The conditions to write now; forgets pods that no longer wait (bounded memory)."""
        now = self.clock()
        out = []
        with self._lock:
            # Messages are made only for the pods that waited long enough: most of a busy
            # cycle's waiting pods have waited less than delay_s and get none yet.
            waiting = waiting_pods(decisions, state)
            self._waiting_since = {key: self._waiting_since.get(key, now) for key in waiting}
            self._written = {k: v for k, v in self._written.items() if k in self._waiting_since}
            self._transition = {k: v for k, v in self._transition.items() if k in self._waiting_since}
            ripe = {key for key in waiting if now - self._waiting_since[key] >= self.delay_s}
            if not ripe:
                return out
            messages = waiting_messages(decisions, state, ripe)
            reasons = waiting_reasons(decisions, state, ripe)
            for key, message in messages.items():
                pod: Pod = state.pods[key]
                reason = reasons.get(key, UNSCHEDULABLE)
                if self._written.get(key) == (pod.uid, reason, message) or busy(key):
                    continue
                if now - self._waiting_since[key] < self.delay_s:
                    continue
                if not self._budget.try_take():
                    break   # the rest stay due
                out.append(PodCondition(key, pod.uid, message, reason))
        return out

    def write(self, condition: PodCondition) -> bool:
        if not self.may_write():
            return False
        namespace, name = condition.pod.split("/", 1)
        with self._lock:
            since = self._transition.get(condition.pod) or _now_text()
        body = {"metadata": {"uid": condition.uid},   # a new pod of the same name: refused (uid is immutable)
                "status": {"conditions": [{"type": POD_SCHEDULED, "status": "False", "reason": condition.reason,
                                           "message": condition.message, "lastProbeTime": None,
                                           "lastTransitionTime": since}]}}
        try:
            self.api.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", body=body,
                             content_type=STRATEGIC_MERGE_PATCH)
        except ApiError as err:
            if err.status in (404, 409, 422):   # gone, or replaced by a pod of the same name
                return False
            if self.outage is not None:
                self.outage.failed(cause_of(str(err), err.status), condition.pod)
            else:
                log.warning("writing the PodScheduled condition of %s: %s", condition.pod, err)
            return False
        if self.outage is not None:
            self.outage.succeeded(condition.pod)
        with self._lock:
            self._written[condition.pod] = (condition.uid, condition.reason, condition.message)
            self._transition[condition.pod] = since
            self.writes += 1
        return True

    def written(self) -> Mapping[str, tuple[str, str, str]]:
        with self._lock:
            return dict(self._written)


def _now_text() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
