"""Kubernetes Events that say why a pod waits (the engine's reasons), deduplicated and rate-limited.

A waiting pod is reported again each cycle with the same reason; an Event is created only when
the message for that pod changes or the last one is older than `refresh_s`. Sending is
asynchronous (a bounded queue and one sender thread) behind a token bucket, so a thousand
waiting pods never slow a cycle down nor flood the API server; what does not fit the queue
is dropped and counted.

What an Event on a pod says is readable by anyone who may read Events in the pod's namespace,
so it names nothing of another namespace: a victim's `Preempted`/`Reclaimed` Event names its
preemptor by UID, as kube-scheduler's does (`victim_message`); the engine's reason, which names
it by namespace/name, stays in the operator's views (`explain`, the log).
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runtime.cluster import decisions as d
from runtime.cluster.model import Pod
from runtime.kube.api import ApiError, KubeApi
from runtime.kube.ratelimit import TokenBucket

log = logging.getLogger("policydsl.kube.events")

MAX_MESSAGE = 1024  # the API server rejects longer Event messages
QUEUE_SIZE = 2000


@dataclass(frozen=True)
class InvolvedObject:
    kind: str  # Pod | PodGroup | Queue (cluster-scoped: namespace "")
    api_version: str
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}/{self.uid}"


@dataclass(frozen=True)
class EventItem:
    obj: InvolvedObject
    type: str  # Normal | Warning
    reason: str
    message: str


def victim_message(reason: d.Reason, victim: Pod, pods: Mapping[str, Pod]) -> str:
    """The message of the Event on an evicted pod: kube-scheduler's "Preempted by pod <uid> on
    node <node>" (its preemptor by UID, always, in its namespace or another), "Reclaimed by queue
    <queue> for pod <uid> on node <node>" (Queues are cluster-scoped); another kind, its kind."""
    where = f" on node {victim.node_name}" if victim.node_name else ""
    if reason.kind == d.PREEMPTION:
        return f"Preempted by {_pod_by_uid(reason.details.get('preemptor'), pods)}{where}"
    if reason.kind == d.RECLAIM:
        return f"Reclaimed by queue {reason.details.get('queue', '')} for {_pod_by_uid(reason.details.get('for'), pods)}{where}"
    if reason.kind == d.SHUFFLE:
        # the plugin's reason names only the plugin's own inputs (a zone and its window, node names)
        return f"Evicted by shuffle{where}: {reason.message}"
    return f"Evicted ({reason.kind})"


def _pod_by_uid(key: object, pods: Mapping[str, Pod]) -> str:
    pod = pods.get(key) if isinstance(key, str) else None
    return f"pod {pod.uid}" if pod is not None and pod.uid else "a pod"


class EventRecorder:
    def __init__(self, api: KubeApi, component: str, instance: str, *, rate: float = 20.0, burst: int = 200,
                 refresh_s: float = 300.0, may_write: Callable[[], bool] = lambda: True,
                 on_dropped: Callable[[], None] | None = None) -> None:
        self.api = api
        self.component = component
        self.instance = instance
        self.refresh_s = refresh_s
        self.may_write = may_write
        self._bucket = TokenBucket(rate, burst)
        self._queue: queue.Queue[EventItem | None] = queue.Queue(QUEUE_SIZE)
        self._last: dict[tuple[str, str], tuple[str, float]] = {}  # (object, reason) -> (message, sent at)
        self._lock = threading.Lock()
        self._on_dropped = on_dropped or (lambda: None)
        self._thread: threading.Thread | None = None
        self.sent = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._send_loop, name="events", daemon=True)
        self._thread.start()

    def stop(self, flush_s: float = 1.0) -> None:
        if self._thread is None:
            return
        try:
            self._queue.put(None, timeout=flush_s)
        except queue.Full:
            pass
        self._thread.join(timeout=flush_s)

    def record(self, obj: InvolvedObject, type_: str, reason: str, message: str) -> bool:
        """Queue an Event unless an identical one went out within refresh_s; True if queued."""
        message = message[:MAX_MESSAGE]
        now = time.monotonic()
        key = (obj.key, reason)
        with self._lock:
            last = self._last.get(key)
            if last is not None and last[0] == message and now - last[1] < self.refresh_s:
                return False
            self._last[key] = (message, now)
        try:
            self._queue.put_nowait(EventItem(obj, type_, reason, message))
            return True
        except queue.Full:
            self._on_dropped()
            return False

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop dedup entries of objects `keep` rejects (pods that are gone or placed)."""
        with self._lock:
            self._last = {k: v for k, v in self._last.items() if keep(k[0])}

    def _send_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._bucket.wait()
            if self.may_write():
                try:
                    self._send(item)
                except Exception:  # noqa: BLE001 - one bad Event must not end the sender
                    log.exception("sending an Event on %s %s/%s", item.obj.kind, item.obj.namespace, item.obj.name)

    def _send(self, item: EventItem) -> None:
        stamp = dt.datetime.now(dt.timezone.utc)
        text = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        o = item.obj
        namespace = o.namespace or "default"   # a cluster-scoped object's (a Queue's) Events live in default
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{o.name}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": {"kind": o.kind, "apiVersion": o.api_version, "namespace": o.namespace,
                               "name": o.name, "uid": o.uid},
            "reason": item.reason, "message": item.message, "type": item.type,
            "source": {"component": self.component},
            "firstTimestamp": text, "lastTimestamp": text, "count": 1,
            "reportingComponent": self.component, "reportingInstance": self.instance,
        }
        try:
            self.api.post(f"/api/v1/namespaces/{namespace}/events", body)
            self.sent += 1
        except ApiError as err:
            log.debug("event on %s %s/%s not recorded: %s", o.kind, o.namespace, o.name, err)
