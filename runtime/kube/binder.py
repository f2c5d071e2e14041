"""Bindings through the pods/binding subresource, pipelined in batches, retrying transient errors.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    """Binds pods in pipelined rounds (KubeCluster runs a few batches at once): every pod of a
    batch in one round, then those that failed transiently again, all in one round, after a
    backoff, up to `attempts` rounds."""

    def __init__(self, api: KubeApi, *, may_write: Callable[[], bool] = lambda: True, attempts: int = ATTEMPTS) -> None:
        self.api = api
        self.may_write = may_write
        self.attempts = attempts

    def bind_all(self, items: Sequence[tuple[Binding, Pod | None]]) -> Iterator[tuple[int, BindOutcome]]:
        """(position in `items`, outcome) for every item, each as soon as it is known: pods
        already gone first, then each round's settled ones in order."""
        pending: list[tuple[int, Binding, Pod, dict]] = []
        for i, (binding, pod) in enumerate(items):
            if pod is None:
                yield i, BindOutcome(binding.pod, binding.node, DROPPED, "pod is gone")
            else:
                pending.append((i, binding, pod, binding_body(binding, pod)))
        delay = FIRST_RETRY_S
        for attempt in range(self.attempts):
            if not pending:
                return
            # Leadership is checked after the rate limiter's wait, right before anything is sent.
            answers = self.api.post_many([(_binding_path(pod), body) for _, _, pod, body in pending],
                                         allowed=self.may_write)
            if answers is None:
                for i, binding, _, _ in pending:
                    yield i, BindOutcome(binding.pod, binding.node, FAILED, "no longer the leader")
                return
            retry, pause = [], 0.0
            for item, answer in zip(pending, answers):
                i, binding, _, body = item
                error = answer if isinstance(answer, ApiError) else None
                outcome = self._outcome(binding, body, error, attempt)
                if outcome is not None:
                    yield i, outcome
                else:
                    retry.append(item)
                    pause = max(pause, _pause(error, delay))  # type: ignore[arg-type]
            pending = retry
            if pending:
                time.sleep(pause)
                delay *= 2

    def _outcome(self, binding: Binding, body: dict, error: ApiError | None, attempt: int) -> BindOutcome | None:
        """What attempt number `attempt` came to; None: worth another attempt."""
        annotations = body["metadata"].get("annotations")
        if error is None:
            return BindOutcome(binding.pod, binding.node, BOUND, annotations=annotations)
        if error.status == 404:
            return BindOutcome(binding.pod, binding.node, DROPPED, "pod was deleted")
        if error.status == 409:
            assigned = _ASSIGNED.search(error.message)
            if assigned and assigned.group(1) == binding.node and attempt > 0:
                # An earlier attempt went through but its answer was lost.
                return BindOutcome(binding.pod, binding.node, BOUND, annotations=annotations)
            return BindOutcome(binding.pod, binding.node, DROPPED, error.message or "conflict")
        if not error.transient or attempt + 1 >= self.attempts:  # the last round's failure is final
            return BindOutcome(binding.pod, binding.node, FAILED, str(error))
        return None


def _binding_path(pod: Pod) -> str:
    return f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"


def _pause(error: ApiError, backoff: float) -> float:
    """The server's Retry-After (at most 2 s) when it gave one, else the backoff."""
    return min(error.retry_after, 2.0) if error.retry_after is not None else backoff
