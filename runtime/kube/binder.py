"""Bindings through the pods/binding subresource, concurrently, retrying transient errors.

Every Binding carries the pod's UID as a precondition, so a pod deleted and recreated under the
same name is never bound by a decision made for its predecessor, and the API server refuses a
pod that already has a node (409). Those two cases, and a pod deleted meanwhile (404), are
*dropped*: the next cycle sees the truth. Device assignments travel as Binding annotations,
which the API server copies onto the pod in the same write that sets its node, so no pod is
ever seen bound without its cards (and there is no extra round trip per pod).

A bind that keeps failing is *failed*: its pod stays pending, the scheduler forgets the
assumption and reports it on the pod's PodGroup; the next cycle places it again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runtime.decisions import Binding
from runtime.kube.api import ApiError, KubeApi
from runtime.model import GPU_INDEX_ANNOTATION, Pod

BOUND, DROPPED, FAILED = "bound", "dropped", "failed"
ATTEMPTS = 4
FIRST_RETRY_S = 0.1
_ASSIGNED = re.compile(r'already assigned to node "([^"]+)"')


@dataclass(frozen=True)
class BindOutcome:
    pod: str
    node: str
    result: str  # bound | dropped | failed
    detail: str = ""
    annotations: Mapping[str, str] | None = None


def device_annotations(binding: Binding) -> dict[str, str]:
    """volcano.sh/gpu-index: the cards of every device resource, as Volcano's device plugin reads them."""
    cards = [str(c) for _, chosen in sorted(binding.devices.items()) for c in chosen]
    return {GPU_INDEX_ANNOTATION: ",".join(cards)} if cards else {}


def binding_body(binding: Binding, pod: Pod) -> dict:
    meta: dict = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        meta["uid"] = pod.uid
    annotations = device_annotations(binding)
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": binding.node}}


class Binder:
    """Binds one pod per call; the caller runs calls concurrently (KubeCluster's thread pool)."""

    def __init__(self, api: KubeApi, *, may_write: Callable[[], bool] = lambda: True, attempts: int = ATTEMPTS) -> None:
        self.api = api
        self.may_write = may_write
        self.attempts = attempts

    def bind(self, binding: Binding, pod: Pod | None) -> BindOutcome:
        if pod is None:
            return BindOutcome(binding.pod, binding.node, DROPPED, "pod is gone")
        body = binding_body(binding, pod)
        annotations = body["metadata"].get("annotations")
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        delay = FIRST_RETRY_S
        for attempt in range(self.attempts):
            if not self.may_write():
                return BindOutcome(binding.pod, binding.node, FAILED, "no longer the leader")
            try:
                self.api.post(path, body)
                return BindOutcome(binding.pod, binding.node, BOUND, annotations=annotations)
            except ApiError as err:
                if err.status == 404:
                    return BindOutcome(binding.pod, binding.node, DROPPED, "pod was deleted")
                if err.status == 409:
                    assigned = _ASSIGNED.search(err.message)
                    if assigned and assigned.group(1) == binding.node and attempt > 0:
                        # An earlier attempt went through but its answer was lost.
                        return BindOutcome(binding.pod, binding.node, BOUND, annotations=annotations)
                    return BindOutcome(binding.pod, binding.node, DROPPED, err.message or "conflict")
                if not err.transient or attempt + 1 == self.attempts:
                    return BindOutcome(binding.pod, binding.node, FAILED, str(err))
                time.sleep(min(err.retry_after, 2.0) if err.retry_after is not None else delay)
                delay *= 2
        return BindOutcome(binding.pod, binding.node, FAILED, "retries exhausted")
