"""Bindings through the pods/binding subresource, pipelined in batches, and what each answer means.

Every Binding carries the pod's UID as a precondition, so a pod deleted and recreated under the
same name is never bound by a decision made for its predecessor, and the API server refuses a
pod that already has a node (409). Device assignments travel as Binding annotations, which the
API server copies onto the pod in the same write that sets its node, so no pod is ever seen
bound without its cards (and there is no extra round trip per pod).

An answer is one of three outcomes:

- *bound*;
- *refused*, for good, for this pod (any 4xx but 408 and 429: 403 forbidden, as in a namespace
  being deleted; 404 deleted; 409 bound elsewhere or a new pod under the name; 422 invalid):
  sending it again cannot help. The pod is held back (`RefusedPods`) until its object changes
  or a capped backoff passes, so it neither takes room again each cycle nor floods the log;
- *failed*: no answer, throttled (429) or a server error (5xx) through every attempt (retried
  in rounds with backoff, FIRST_RETRY_S doubling): the pod is placed again next cycle.

409 "already assigned to the same node" after a lost answer is *bound*: the earlier attempt went
through.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from runtime.cluster.decisions import Binding
from runtime.kube.api import ApiError, KubeApi
from runtime.cluster.model import GPU_INDEX_ANNOTATION, Node, Pod
from runtime.engine import devices_vgpu as vg
from runtime.engine.devices import PREDICATE_TIME as PREDICATE_TIME_ANNOTATION
from runtime.kube import nodelock

BOUND, REFUSED, FAILED = "bound", "refused", "failed"
ATTEMPTS = 4
FIRST_RETRY_S = 0.1
_ASSIGNED = re.compile(r'already assigned to node "([^"]+)"')
# A refused pod is held back this long at first, twice as long after each refusal in a row, at
# most HOLD_MAX_S; any change to the pod object (deleted, bound by somebody, edited) ends the
# hold at once. kube-scheduler backs off failed pods 1 s to 10 s and retries unschedulable ones
# after 5 minutes at the latest; a refusal is closer to the second.
HOLD_FIRST_S = 5.0
HOLD_MAX_S = 300.0


@dataclass(frozen=True)
class BindOutcome:
    pod: str
    node: str
    result: str  # bound | refused | failed
    detail: str = ""
    annotations: Mapping[str, str] | None = None
    status: int = 0  # the HTTP status of the last answer (0: none came, or not sent)

    @property
    def cause(self) -> str:
        """The failure's class, for outage logs: "403 Forbidden", "no answer (ConnectionRefusedError)"."""
        return self.detail.split(":", 1)[0] if self.detail else self.result


def device_annotations(binding: Binding, pod: Pod | None = None, node: Node | None = None) -> dict[str, str]:
    """volcano.sh/gpu-index: the cards of every device resource, as Volcano's device plugin reads
    them; for HAMi vGPU cards (with the pod and its node known), what Volcano's vGPU Allocate
    writes for HAMi's device plugin (runtime.engine.devices_vgpu.binding_annotations)."""
    cards = [str(c) for res, chosen in sorted(binding.devices.items()) if res != vg.VGPU_NUMBER for c in chosen]
    out = {GPU_INDEX_ANNOTATION: ",".join(cards)} if cards else {}
    vgpu = binding.devices.get(vg.VGPU_NUMBER)
    if vgpu and pod is not None and node is not None:
        out.update(vg.binding_annotations(node, tuple(vgpu), pod.requests, containers=pod.vgpu_containers))
    return out


class _PredicateClock:
    """volcano.sh/predicate-time values: nanoseconds since the epoch, strictly increasing, so that
    pods bound one after another on a node are told apart in the order they were bound."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            self._last = max(time.time_ns(), self._last + 1)
            return self._last


_PREDICATE_CLOCK = _PredicateClock()


class _NodeOrder:
    """The device plugins serve a node's pending pods oldest first: volcano-sh/devices by
    volcano.sh/predicate-time, HAMi's volcano-vgpu-device-plugin by volcano.sh/vgpu-time, while
    the kubelet calls Allocate in the order the pods reach the node. So the pods with cards bound
    to one node must be bound in the order of their times: a Binding's times are stamped right
    before it is sent, under its node's lock, which is held until the answer (pipelined requests
    on one connection are served in order), and stamped again on a retry. Locks are taken in
    name order, all at once, so two batches never wait on each other."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def locks(self, nodes: set[str]) -> list[threading.Lock]:
        with self._guard:
            return [self._locks.setdefault(n, threading.Lock()) for n in sorted(nodes)]


def _stamp(body: dict) -> None:
    """Stamp a Binding's device times afresh (nanoseconds, strictly increasing: vgpu-time too,
    which Volcano writes in seconds, so that pods bound in one second are told apart)."""
    annotations = body["metadata"].get("annotations") or {}
    for key in (PREDICATE_TIME_ANNOTATION, vg.ASSIGNED_TIME):
        if key in annotations:
            annotations[key] = str(_PREDICATE_CLOCK.next())


def binding_body(binding: Binding, pod: Pod, node: Node | None = None) -> dict:
    """The Binding: the pod's UID as a precondition and, with cards, the annotations Volcano's
    deviceshare puts on the Binding (the API server copies them onto the pod as it binds it):
    volcano.sh/gpu-index and volcano.sh/predicate-time, by which volcano-sh/devices tells which
    pending pod on the node a kubelet Allocate call is for (the one chosen first)."""
    meta: dict = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        meta["uid"] = pod.uid
    annotations = device_annotations(binding, pod, node)
    if GPU_INDEX_ANNOTATION in annotations:
        annotations[PREDICATE_TIME_ANNOTATION] = str(_PREDICATE_CLOCK.next())
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": binding.node}}


class Binder:
    """Binds pods in pipelined rounds (KubeCluster runs a few batches at once): every pod of a
    batch in one round, then those that failed transiently again, all in one round, after a
    backoff, up to `attempts` rounds."""

    def __init__(self, api: KubeApi, *, may_write: Callable[[], bool] = lambda: True, attempts: int = ATTEMPTS,
                 node_of: Callable[[str], Node | None] = lambda name: None) -> None:
        self.api = api
        self.may_write = may_write
        self.attempts = attempts
        self.node_of = node_of          # the cache's Node by name: HAMi vGPU's annotations need its cards
        self._order = _NodeOrder()
        self.node_lock = False          # deviceshare's node_lock (KubeCluster.watch_for sets it from the plan)

    def bind_all(self, items: Sequence[tuple[Binding, Pod | None]]) -> Iterator[tuple[int, BindOutcome]]:
        """(position in `items`, outcome) for every item, each as soon as it is known: pods
        already gone first, then each round's settled ones in order."""
        pending: list[tuple[int, Binding, Pod, dict]] = []
        for i, (binding, pod) in enumerate(items):
            if pod is None:
                yield i, BindOutcome(binding.pod, binding.node, REFUSED, "pod is gone", status=404)
            else:
                pending.append((i, binding, pod, binding_body(binding, pod, self.node_of(binding.node))))
        held: dict[int, nodelock.Held] = {}
        if self.node_lock:
            pending, refused = self._take_node_locks(pending, held)
            yield from refused
        delay = FIRST_RETRY_S
        for attempt in range(self.attempts):
            if not pending:
                return
            ordered = {binding.node for _, binding, _, body in pending if _stamped(body)}
            locks = self._order.locks(ordered)
            for lock in locks:
                lock.acquire()
            try:
                for _, _, _, body in pending:
                    _stamp(body)
                # Leadership is checked after the rate limiter's wait, right before anything is sent.
                answers = self.api.post_many([(_binding_path(pod), body) for _, _, pod, body in pending],
                                             allowed=self.may_write)
            finally:
                for lock in locks:
                    lock.release()
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
                    if outcome.result != BOUND and i in held:
                        nodelock.release(self.api, held.pop(i))     # no device plugin will serve it
                    yield i, outcome
                else:
                    retry.append(item)
                    pause = max(pause, _pause(error, delay))  # type: ignore[arg-type]
            pending = retry
            if pending:
                time.sleep(pause)
                delay *= 2

    def _take_node_locks(self, pending: list, held: dict) -> tuple[list, list[tuple[int, BindOutcome]]]:
        """Volcano's device node lock (runtime.kube.nodelock) for each pod that takes one: (the items
        to send, the outcomes of those not sent: their node is locked, they are bound in a later cycle)."""
        kept, refused = [], []
        for item in pending:
            i, binding, pod, _ = item
            name = nodelock.lock_name(binding, pod)
            if name is None:
                kept.append(item)
                continue
            got = nodelock.lock(self.api, binding.node, name) if self.may_write() else \
                nodelock.NotTaken("no longer the leader", 0)
            if isinstance(got, nodelock.NotTaken):
                refused.append((i, BindOutcome(binding.pod, binding.node, FAILED, got.detail, status=got.status)))
            else:
                held[i] = got
                kept.append(item)
        return kept, refused

    def _outcome(self, binding: Binding, body: dict, error: ApiError | None, attempt: int) -> BindOutcome | None:
        """What attempt number `attempt` came to; None: worth another attempt."""
        annotations = body["metadata"].get("annotations")
        if error is None:
            return BindOutcome(binding.pod, binding.node, BOUND, annotations=annotations)
        if error.status == 409:
            assigned = _ASSIGNED.search(error.message)
            if assigned and assigned.group(1) == binding.node and attempt > 0:
                # An earlier attempt went through but its answer was lost.
                return BindOutcome(binding.pod, binding.node, BOUND, annotations=annotations, status=409)
        if permanent(error):
            return BindOutcome(binding.pod, binding.node, REFUSED, str(error), status=error.status)
        if attempt + 1 >= self.attempts:  # the last round's failure is final
            return BindOutcome(binding.pod, binding.node, FAILED, str(error), status=error.status)
        return None


def _stamped(body: dict) -> bool:
    annotations = body["metadata"].get("annotations") or {}
    return PREDICATE_TIME_ANNOTATION in annotations or vg.ASSIGNED_TIME in annotations


def permanent(error: ApiError) -> bool:
    """An answer that sending the same request again cannot change: 4xx but 408 (timeout) and
    429 (throttled). 401 counts as transient too: credentials are refreshed (exec plugins,
    rotated tokens), and nothing about the pod is wrong."""
    return 400 <= error.status < 500 and error.status not in (401, 408, 429)


@dataclass(frozen=True)
class Refusal:
    """A pod held back after the API server refused its Binding."""

    pod: str
    node: str
    status: int
    detail: str
    refusals: int          # refused this many times in a row
    hold_s: float          # how long this refusal holds the pod back
    until: float           # held until then (monotonic), unless the pod changes first
    seen: object           # the cache's Pod object when refused: a different one means it changed

    @property
    def message(self) -> str:
        """The pod's waiting reason while held (the same all along: no status write each cycle)."""
        return (f"binding to {self.node} was refused ({self.detail}); not tried again until the pod changes, "
                f"or for {self.hold_s:.0f} s")


class RefusedPods:
    """Pods whose Binding was refused, held back from placement (their room released at once)
    until their object changes or the hold passes (HOLD_FIRST_S doubling to HOLD_MAX_S), as
    kube-scheduler parks a pod it cannot place until an event may change the answer. Thread-safe:
    binds settle on their workers, snapshots are taken on the loop's thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._held: dict[str, Refusal] = {}
        self._lock = threading.Lock()

    def refuse(self, outcome: BindOutcome, seen: object) -> Refusal:
        """Hold the pod (`seen`: the cache's Pod object now, not None); its Refusal (refusals >
        1: refused again after an earlier hold of the same object)."""
        now = self.clock()
        with self._lock:
            before = self._held.get(outcome.pod)
            again = before.refusals if before is not None and before.seen is seen else 0
            hold = min(HOLD_FIRST_S * 2 ** again, HOLD_MAX_S)
            refusal = Refusal(outcome.pod, outcome.node, outcome.status, outcome.detail, again + 1, hold, now + hold,
                              seen)
            self._held[outcome.pod] = refusal
        return refusal

    def bound(self, key: str) -> None:
        with self._lock:
            self._held.pop(key, None)

    def holding(self, lookup: Callable[[str], object | None]) -> dict[str, Refusal]:
        """The refusals that hold now; `lookup(key)` is the cache's Pod object. Holds of pods
        that changed or went away end; a hold whose time passed is kept (without holding) so
        that a refusal right after it holds longer."""
        now = self.clock()
        with self._lock:
            held = list(self._held.items())
        out = {}
        for key, refusal in held:
            if lookup(key) is not refusal.seen:
                with self._lock:
                    if self._held.get(key) is refusal:
                        del self._held[key]
            elif now < refusal.until:
                out[key] = refusal
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


def _binding_path(pod: Pod) -> str:
    return f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"


def _pause(error: ApiError, backoff: float) -> float:
    """The server's Retry-After (at most 2 s) when it gave one, else the backoff."""
    return min(error.retry_after, 2.0) if error.retry_after is not None else backoff
