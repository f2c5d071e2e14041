"""Evictions through the policy/v1 Eviction API, so PodDisruptionBudgets are respected.

The API server answers 429 when an eviction would break a budget (or while the budget is
still being computed): the victim stays, and the next cycle decides again with whatever has
changed — no retry loop here. A victim already gone (404, or a different pod under the same
name: the UID precondition fails with 409) needs nothing more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass

from runtime.cluster.decisions import Eviction
from runtime.kube.api import ApiError, KubeApi
from runtime.cluster.model import Pod

EVICTED, GONE, BLOCKED, FAILED = "evicted", "gone", "blocked", "failed"
ATTEMPTS = 3
FIRST_RETRY_S = 0.1


@dataclass(frozen=True)
class EvictOutcome:
    pod: str
    result: str  # evicted | gone | blocked | failed
    detail: str = ""
    status: int = 0  # the HTTP status of the last answer (0: none came, or not sent)


def eviction_body(pod: Pod) -> dict:
    body: dict = {"apiVersion": "policy/v1", "kind": "Eviction",
                  "metadata": {"name": pod.name, "namespace": pod.namespace}}
    if pod.uid:
        body["deleteOptions"] = {"preconditions": {"uid": pod.uid}}
    return body


class Evictor:
    def __init__(self, api: KubeApi, executor: Executor, *, may_write: Callable[[], bool] = lambda: True,
                 attempts: int = ATTEMPTS) -> None:
        self.api = api
        self.executor = executor
        self.may_write = may_write
        self.attempts = attempts

    def evict_all(self, evictions: list[Eviction], pods: Mapping[str, Pod]) -> list[EvictOutcome]:
        return list(self.executor.map(lambda e: self.evict(e, pods.get(e.pod)), evictions))

    def evict(self, eviction: Eviction, pod: Pod | None) -> EvictOutcome:
        if pod is None:
            return EvictOutcome(eviction.pod, GONE, "pod is gone")
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"
        body = eviction_body(pod)
        delay = FIRST_RETRY_S
        for attempt in range(self.attempts):
            if not self.may_write():
                return EvictOutcome(eviction.pod, FAILED, "no longer the leader")
            try:
                self.api.post(path, body)
                return EvictOutcome(eviction.pod, EVICTED)
            except ApiError as err:
                if err.status in (404, 409):
                    return EvictOutcome(eviction.pod, GONE, err.message)
                if err.status == 429:
                    return EvictOutcome(eviction.pod, BLOCKED, err.message or "too many requests")
                if not err.transient or attempt + 1 == self.attempts:
                    return EvictOutcome(eviction.pod, FAILED, str(err), err.status)
                time.sleep(delay)
                delay *= 2
        return EvictOutcome(eviction.pod, FAILED, "retries exhausted")
