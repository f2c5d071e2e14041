"""Leader election on a coordination.k8s.io/v1 Lease: only the leader writes.

The kubernetes client ships `kubernetes.leaderelection`, but it cannot serve here: its
LeaseLock talks through the process-global default client (no way to hand it our
configured ApiClient), its loop never returns (no clean shutdown, no release of the lease, so
a standby waits a whole lease duration after every rolling update), its Config calls
sys.exit on bad durations, and it exposes no "am I still the leader right now" check to guard
each write with. This is the same protocol as client-go's, in a few lines:

- a candidate reads the Lease; if another holder's record has not changed for
  `leaseDurationSeconds` (timed on *our* monotonic clock from when we first saw that record,
  so clock skew between machines does not matter), it takes the Lease with an update that
  carries the resourceVersion it read — of several candidates exactly one wins;
- the leader renews every `retry_period`; when it has not renewed for `renew_deadline`
  (< lease duration) it stops writing before anybody else may take over;
- on shutdown the leader releases the Lease (empty holder), so a standby takes over at its
  next retry instead of after a lease duration.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime.kube.api import ApiError, KubeApi

log = logging.getLogger("policydsl.kube.leader")


def _micro_time() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str, *, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_change: Callable[[bool], None] | None = None) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs retry period < renew deadline < lease duration "
                             f"(got {retry_period}s, {renew_deadline}s, {lease_duration}s)")
        self.api = api
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._on_change = on_change or (lambda leading: None)
        self._renewed_at: float | None = None  # monotonic time of our last successful write
        self._observed: tuple | None = None
        self._observed_at = 0.0
        self._leading = False
        self._became_leader = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error_log = 0.0

    # --- public --------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="leader-election", daemon=True)
        self._thread.start()

    def is_leader(self) -> bool:
        """True while we hold the Lease and renewed it within the renew deadline."""
        renewed = self._renewed_at
        return self._leading and renewed is not None and time.monotonic() - renewed < self.renew_deadline

    def wait_leader(self, timeout: float | None = None) -> bool:
        return self._became_leader.wait(timeout) and self.is_leader()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.retry_period + 5.0)
        if release and self._leading:
            self._release()
        self._set_leading(False)

    # --- the loop ----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                renewed = self._try_acquire_or_renew()
            except Exception:  # noqa: BLE001 - the election must outlive a malformed answer
                log.exception("%s: leader election round failed", self.identity)
                renewed = False
            if renewed:
                self._renewed_at = time.monotonic()
                self._set_leading(True)
            elif self._leading and not self.is_leader():
                log.warning("%s: could not renew lease %s/%s within %.1fs; stopping to lead",
                            self.identity, self.namespace, self.name, self.renew_deadline)
                self._set_leading(False)
            # Candidates jitter so that they do not all hit the API server at the same instant.
            wait = self.retry_period if self._leading else self.retry_period * random.uniform(1.0, 1.2)
            self._stop.wait(wait)

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if leading:
            log.info("%s: became the leader (lease %s/%s)", self.identity, self.namespace, self.name)
            self._became_leader.set()
        else:
            self._became_leader.clear()
        self._on_change(leading)

    def _try_acquire_or_renew(self) -> bool:
        now = time.monotonic()
        try:
            lease = self.api.get(self.path, timeout=self.renew_deadline / 2)
        except ApiError as err:
            if err.status == 404:
                return self._create()
            self._log_error("reading", err)
            return False
        spec: dict[str, Any] = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("acquireTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        if holder and holder != self.identity:
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if now - self._observed_at < duration:
                if self._leading:  # somebody else holds it: we lost it
                    self._set_leading(False)
                return False
        stamp = _micro_time()
        transitions = int(spec.get("leaseTransitions") or 0)
        renewing = holder == self.identity
        lease["spec"] = {
            **spec,
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(round(self.lease_duration)),
            "acquireTime": spec.get("acquireTime") if renewing and spec.get("acquireTime") else stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions if renewing else transitions + 1,
        }
        try:
            self.api.put(self.path, lease)  # carries metadata.resourceVersion: one winner
        except ApiError as err:
            if err.status != 409:
                self._log_error("updating", err)
            return False
        return True

    def _create(self) -> bool:
        stamp = _micro_time()
        body = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(round(self.lease_duration)),
                     "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0},
        }
        try:
            self.api.post(self.path.rsplit("/", 1)[0], body)
            return True
        except ApiError as err:
            if err.status != 409:  # 409: another candidate created it first
                self._log_error("creating", err)
            return False

    def _release(self) -> None:
        try:
            lease = self.api.get(self.path, timeout=5.0)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            stamp = _micro_time()
            lease["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": stamp,
                             "renewTime": stamp}
            self.api.put(self.path, lease)
            log.info("%s: released lease %s/%s", self.identity, self.namespace, self.name)
        except ApiError as err:
            log.warning("%s: could not release lease %s/%s: %s", self.identity, self.namespace, self.name, err)

    def _log_error(self, doing: str, err: ApiError) -> None:
        now = time.monotonic()
        if now - self._last_error_log > 30.0:
            self._last_error_log = now
            log.warning("%s: %s lease %s/%s failed: %s", self.identity, doing, self.namespace, self.name, err)
