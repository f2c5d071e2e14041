"""The policy's queues as Queue objects (`kubectl get queues`, vcctl, Volcano's webhook and job
controller all read them).

For each queue the policy declares: created if absent (labelled managed-by policydsl, its spec
from the policy, `status.state` Open or Closed as the policy says); a Queue we created whose
spec no longer matches the policy (an edit, a reload) is patched back to it. A Queue somebody
else made under the name of a policy queue is left as it is, and gets a Warning Event
`ShadowedByPolicy`: the policy's settings are the ones the scheduler uses. Its status
(allocated, PodGroups per phase) is kept current by the status writer like any Queue's.

Queues dropped from the policy are not deleted: PodGroups may still name them. But a Queue we
created no longer says what the policy says once the policy drops it (a reload that removes a
`state = closed` from `default` must not leave it Closed, which the scheduler would then read
from the object): it is set back to what Volcano gives a Queue nobody configured (weight 1,
reclaimable, no limits, Open). Runs on the connection's write pool: once per policy revision
and every SYNC_EVERY_S (a deleted object comes back), a GET per queue once per revision, and
writes only for what differs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from compiler.plan import Plan, QueuePlan
from compiler.quantities import format_base_units
from runtime.kube.api import ApiError, KubeApi
from runtime.kube.cache import QUEUES
from runtime.kube.events import EventRecorder, InvolvedObject

log = logging.getLogger("policydsl.kube.queues")

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "policydsl"
POLICY_ANNOTATION = "policydsl.io/policy"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
SHADOWED = "ShadowedByPolicy"
SYNC_EVERY_S = 30.0
# What Volcano gives a Queue nobody configured (its `default`): a Queue we made, once the policy
# no longer declares it, goes back to this.
PLAIN_SPEC: dict[str, Any] = {"weight": 1, "reclaimable": True}
ROOT = "root"
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")   # DNS-1123 subdomain


def _quantities(resources: Mapping[str, int] | None) -> dict[str, Any] | None:
    if resources is None:
        return None
    out: dict[str, Any] = {}
    for resource, units in sorted(resources.items()):
        text = format_base_units(resource, units)
        out[resource] = int(text) if text.isdigit() else text
    return out


def queue_spec(queue: QueuePlan) -> dict[str, Any]:
    """The Volcano Queue spec that says what the policy says (fields Volcano has: no borrow
    switch nor borrow limit, which stay the policy's own)."""
    spec: dict[str, Any] = {"weight": queue.weight, "reclaimable": queue.reclaimable}
    if queue.capability:
        spec["capability"] = _quantities(queue.capability)
    if queue.deserved:
        spec["deserved"] = _quantities(queue.deserved)
    if queue.guarantee:
        spec["guarantee"] = {"resource": _quantities(queue.guarantee)}
    if queue.priority:
        spec["priority"] = queue.priority
    if queue.parent not in (None, ROOT):
        spec["parent"] = queue.parent
    return spec


def desired_queues(plan: Plan) -> dict[str, QueuePlan]:
    """The queues the policy declares (not the implicit default, not the root)."""
    return {q.name: q for q in plan.queues if q.declared and q.name != ROOT}


def _state(queue: QueuePlan) -> str:
    return "Closed" if queue.state == "closed" else "Open"


def _same_spec(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Equal on the fields we write (the API server may default others)."""
    def norm(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: norm(v) for k, v in value.items()}
        return str(value)
    return all(norm(current.get(k)) == norm(v) for k, v in wanted.items()) and \
        all(current.get(k) in (None, {}, "") for k in ("capability", "deserved", "guarantee", "parent")
            if k not in wanted)


class QueuePublisher:
    def __init__(self, api: KubeApi, events: EventRecorder, existing: Callable[[], list[str]], *,
                 may_write: Callable[[], bool] = lambda: True) -> None:
        self.api = api
        self.events = events
        self.existing = existing            # names of the Queue objects the cache holds
        self.may_write = may_write
        self._checked: dict[str, str] = {}  # queue -> policy revision it was last checked against
        self.created: list[str] = []
        self.shadowed: list[str] = []

    def sync(self, plan: Plan, *, force: bool = False) -> None:
        if not self.may_write():
            return
        if force:
            self._checked.clear()
        present = set(self.existing())
        for name, queue in desired_queues(plan).items():
            if not _OBJECT_NAME.match(name) or len(name) > 253:
                if self._checked.get(name) != plan.revision:
                    log.warning("queue %s of policy %s is not published as a Queue object: Kubernetes names "
                                "are lowercase letters, digits, '-' and '.' (the scheduler still runs it, and "
                                "PodGroups may name it)", name, plan.name)
                    self._checked[name] = plan.revision
                continue
            try:
                if name not in present:
                    self._create(plan, queue)
                elif self._checked.get(name) != plan.revision:
                    self._reconcile(plan, queue)
            except ApiError as err:
                log.warning("publishing queue %s: %s", name, err)
                continue
            self._checked[name] = plan.revision
        for name in sorted(present - set(desired_queues(plan)) - {ROOT}):
            if self._checked.get(name) == plan.revision:
                continue
            try:
                self._release(plan, name)
            except ApiError as err:
                log.warning("setting back queue %s: %s", name, err)
                continue
            self._checked[name] = plan.revision

    def _release(self, plan: Plan, name: str) -> None:
        """A Queue we created that the policy no longer declares: Volcano's plain settings."""
        try:
            current = self.api.get(f"{QUEUES.path}/{name}")
        except ApiError as err:
            if err.status == 404:   # deleted since the cache saw it
                return
            raise
        if ((current.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) != MANAGER:
            return
        spec = current.get("spec") or {}
        if not _same_spec(spec, PLAIN_SPEC):
            patch = {**PLAIN_SPEC, **{k: None for k in ("capability", "deserved", "guarantee", "parent", "priority")
                                      if spec.get(k) is not None}}
            self.api.merge_patch(f"{QUEUES.path}/{name}", {"spec": patch})
            log.info("Queue %s is no longer in policy %s: its spec set back to Volcano's defaults", name, plan.name)
        if ((current.get("status") or {}).get("state")) != "Open":
            self._set_state(name, "Open")

    def _create(self, plan: Plan, queue: QueuePlan) -> None:
        body = {"apiVersion": QUEUE_API, "kind": "Queue",
                "metadata": {"name": queue.name, "labels": {MANAGED_BY: MANAGER},
                             "annotations": {POLICY_ANNOTATION: plan.name}},
                "spec": queue_spec(queue)}
        try:
            self.api.post(QUEUES.path, body)
        except ApiError as err:
            if err.status == 409:   # made meanwhile (the cache had not shown it yet)
                self._reconcile(plan, queue)
                return
            raise
        self.created.append(queue.name)
        log.info("created Queue %s from policy %s", queue.name, plan.name)
        self._set_state(queue.name, _state(queue))

    def _reconcile(self, plan: Plan, queue: QueuePlan) -> None:
        current = self.api.get(f"{QUEUES.path}/{queue.name}")
        meta = current.get("metadata") or {}
        if (meta.get("labels") or {}).get(MANAGED_BY) != MANAGER:
            self.shadowed.append(queue.name)
            ref = InvolvedObject("Queue", QUEUE_API, "", queue.name, str(meta.get("uid") or ""))
            self.events.record(ref, "Warning", SHADOWED,
                               f"policy {plan.name} declares queue {queue.name}: the scheduler uses the policy's "
                               f"settings ({_summary(queue)}), not this object's spec")
            return
        wanted = queue_spec(queue)
        spec = current.get("spec") or {}
        if not _same_spec(spec, wanted):
            patch = {**wanted, **{k: None for k in ("capability", "deserved", "guarantee", "parent", "priority")
                                  if k not in wanted and spec.get(k) is not None}}
            self.api.merge_patch(f"{QUEUES.path}/{queue.name}", {"spec": patch})
            log.info("Queue %s: spec set back to policy %s's", queue.name, plan.name)
        if ((current.get("status") or {}).get("state")) != _state(queue):
            self._set_state(queue.name, _state(queue))

    def _set_state(self, name: str, state: str) -> None:
        try:
            self.api.merge_patch(f"{QUEUES.path}/{name}/status", {"status": {"state": state}})
        except ApiError as err:
            if err.status != 404:
                log.warning("setting the state of Queue %s: %s", name, err)


def _summary(queue: QueuePlan) -> str:
    parts = [f"weight {queue.weight}"]
    for label, values in (("capability", queue.capability), ("guarantee", queue.guarantee),
                          ("deserved", queue.deserved)):
        if values:
            parts.append(f"{label} " + ", ".join(f"{r} {format_base_units(r, v)}" for r, v in sorted(values.items())))
    if queue.state == "closed":
        parts.append("closed")
    return "; ".join(parts)
