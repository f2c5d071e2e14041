"""Binding a pod's claims before the pod, as kube-scheduler's VolumeBinding PreBind does.

A cycle that places a pod whose claims are not all bound says what each one gets
(runtime.cluster.decisions.VolumeChoice): a static PV, or provisioning for the pod's node. `VolumeBinds`
writes that, then waits, and binds the pod only once every claim is bound:

- a static PV: its `spec.claimRef` is set to the claim (annotation
  `pv.kubernetes.io/bound-by-controller`), with the PV's resourceVersion as a precondition so a
  PV that changed since the cycle read it is not taken; the PV controller then binds the claim;
- provisioning: the claim's `volume.kubernetes.io/selected-node` annotation names the node; the
  external provisioner makes a PV there and the PV controller binds the claim.

Meanwhile the pod is assumed on its node (runtime.kube.cache: its room is taken, the PVs it
pre-bound are not offered to others) and the scheduler goes on with other pods: the waiting is
a thread that looks at the watch cache, not a cycle held up. The claim is bound when the PVC has
`spec.volumeName` and the PV controller's `pv.kubernetes.io/bind-completed` (or phase Bound).
Given back (the pod placed afresh by a later cycle) when the wait outlasts `timeout` (600 s,
kube-scheduler's bindTimeoutSeconds), when the provisioner removed the selected node (it failed),
when the PV's claimRef was taken away, when a write was refused, or when the pod is gone. Unlike
kube-scheduler, what was written and is not bound yet is undone then (the annotation removed, the
claimRef cleared, each only if unchanged since), so a claim that could not be provisioned on one
node may be on another, and a PV is not left pre-bound to a claim that went elsewhere.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from runtime.cluster.decisions import Binding, VolumeChoice
from runtime.kube.api import ApiError, KubeApi
from runtime.kube.cache import ClusterCache
from runtime.cluster.model import Pod
from runtime.cluster.storage import BOUND_BY_CONTROLLER, SELECTED_NODE, ClaimRef

log = logging.getLogger("policydsl.kube.volumes")

BIND_TIMEOUT_S = 600.0
POLL_S = 0.2
WRITE_ATTEMPTS = 3


@dataclass
class _Wait:
    binding: Binding
    pod: Pod
    ticket: Any                                    # the caller's (its gang's bind bookkeeping)
    choices: tuple[VolumeChoice, ...]
    deadline: float
    written: bool = False
    refs: dict[str, ClaimRef] = field(default_factory=dict)       # PV -> claim we pre-bound it to
    selected: list[str] = field(default_factory=list)             # claims we selected the node of


class VolumeBinds:
    def __init__(self, api: KubeApi, cache: ClusterCache, writes: Executor, *,
                 bind: Callable[[Binding, Pod, Any], None], give_back: Callable[[Binding, Pod, Any, str], None],
                 may_write: Callable[[], bool] = lambda: True, timeout: float = BIND_TIMEOUT_S) -> None:
        self.api = api
        self.cache = cache
        self.writes = writes
        self._bind = bind
        self._give_back = give_back
        self.may_write = may_write
        self.timeout = timeout
        self._lock = threading.Lock()
        self._waits: dict[str, _Wait] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="volume-binds", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Give every wait back (a later leader places those pods afresh)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        with self._lock:
            waits, self._waits = list(self._waits.values()), {}
        for wait in waits:
            self._end(wait, "the scheduler stopped before its volumes were bound", undo=True)

    def waiting(self) -> int:
        with self._lock:
            return len(self._waits)

    def add(self, binding: Binding, pod: Pod, ticket: Any, choices: tuple[VolumeChoice, ...]) -> None:
        """Write the choices (on the write pool), then wait for the claims; the pod must already
        be assumed on its node."""
        wait = _Wait(binding, pod, ticket, choices, time.monotonic() + self.timeout)
        for choice in choices:        # laid over the cache at once: the next cycle offers none of them
            if choice.volume is not None:
                claim = self.cache.claim(choice.claim)
                namespace, name = choice.claim.split("/", 1)
                ref = ClaimRef(namespace, name, claim.uid if claim is not None else "")
                wait.refs[choice.volume] = ref
                self.cache.assume_claim_ref(choice.volume, ref)
            else:
                wait.selected.append(choice.claim)
                self.cache.assume_selected_node(choice.claim, binding.node)
        with self._lock:
            self._waits[binding.pod] = wait
        self.writes.submit(self._write, wait)

    # --- writes --------------------------------------------------------------------------------
    def _write(self, wait: _Wait) -> None:
        try:
            problem = self._write_all(wait)
        except Exception as err:  # noqa: BLE001 - a worker must always settle its wait
            log.exception("writing the volume choices of %s", wait.binding.pod)
            problem = f"writing its volume choices failed: {err}"
        if problem is not None:
            self._finish(wait, problem)
            return
        wait.written = True

    def _write_all(self, wait: _Wait) -> str | None:
        node = wait.binding.node
        for volume, ref in wait.refs.items():
            pv = self.cache.volume(volume)
            if pv is None:
                return f"PersistentVolume {volume} is gone"
            if pv.claim_ref is not None and (pv.claim_ref.namespace, pv.claim_ref.name) == (ref.namespace, ref.name):
                continue
            if pv.claim_ref is not None:
                return f"PersistentVolume {volume} was taken by {pv.claim_ref.key}"
            body = {"metadata": {"resourceVersion": pv.resource_version, "annotations": {BOUND_BY_CONTROLLER: "yes"}},
                    "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                          "namespace": ref.namespace, "name": ref.name, "uid": ref.uid}}}
            problem = self._patch("PersistentVolume", f"/api/v1/persistentvolumes/{volume}", body)
            if problem is not None:
                return problem
        for key in wait.selected:
            claim = self.cache.claim(key)
            if claim is None:
                return f"PersistentVolumeClaim {key} is gone"
            if claim.annotations.get(SELECTED_NODE) == node or claim.fully_bound:
                continue
            namespace, name = key.split("/", 1)
            body = {"metadata": {"resourceVersion": claim.resource_version, "annotations": {SELECTED_NODE: node}}}
            problem = self._patch("PersistentVolumeClaim",
                                  f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}", body)
            if problem is not None:
                return problem
        return None

    def _patch(self, kind: str, path: str, body: dict) -> str | None:
        """None when written (the answer laid over the cache), else why not."""
        delay = 0.1
        for attempt in range(WRITE_ATTEMPTS):
            if not self.may_write():
                return "no longer the leader"
            try:
                answer = self.api.merge_patch(path, body)
            except ApiError as err:
                if err.transient and attempt + 1 < WRITE_ATTEMPTS:
                    time.sleep(delay)
                    delay *= 2
                    continue
                return f"writing {kind} {path.rsplit('/', 1)[1]} failed: {err}"
            if isinstance(answer, dict):
                self.cache.observe(kind, answer)
            return None
        return f"writing {kind} failed"

    # --- waiting -------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            with self._lock:
                waits = [w for w in self._waits.values() if w.written]
            for wait in waits:
                try:
                    verdict = self._verdict(wait)
                except Exception:  # noqa: BLE001 - one pod's check must not stop the others'
                    log.exception("checking the volumes of %s", wait.binding.pod)
                    verdict = None
                if verdict == "bound":
                    self._finish(wait, None)
                elif verdict is not None:
                    self._finish(wait, verdict)

    def _verdict(self, wait: _Wait) -> str | None:
        """"bound", a reason to give back, or None: keep waiting."""
        if self.cache.pod(wait.binding.pod) is None:
            return "the pod does not exist any more"
        if time.monotonic() > wait.deadline:
            return f"its volumes were not bound within {self.timeout:g}s"
        done = True
        for volume, ref in wait.refs.items():
            pv = self.cache.volume(volume)
            if pv is None or pv.claim_ref is None or (pv.claim_ref.namespace, pv.claim_ref.name) != (ref.namespace,
                                                                                                      ref.name):
                return f"the claimRef of PersistentVolume {volume} was reset"
            claim = self.cache.claim(ref.key)
            if claim is None:
                return f"PersistentVolumeClaim {ref.key} is gone"
            done &= claim.fully_bound and claim.volume_name == volume
        for key in wait.selected:
            claim = self.cache.claim(key)
            if claim is None:
                return f"PersistentVolumeClaim {key} is gone"
            if claim.fully_bound:
                continue
            if claim.annotations.get(SELECTED_NODE) != wait.binding.node:
                return f"provisioning failed for PersistentVolumeClaim {key}"
            done = False
        return "bound" if done else None

    def _finish(self, wait: _Wait, problem: str | None) -> None:
        with self._lock:
            if self._waits.get(wait.binding.pod) is not wait:
                return
            del self._waits[wait.binding.pod]
        self._end(wait, problem, undo=problem is not None)

    def _end(self, wait: _Wait, problem: str | None, undo: bool) -> None:
        for volume in wait.refs:
            self.cache.assume_claim_ref(volume, None)
        for key in wait.selected:
            self.cache.assume_selected_node(key, None)
        if problem is None:
            self._bind(wait.binding, wait.pod, wait.ticket)
            return
        log.info("volumes of %s given back: %s", wait.binding.pod, problem)
        if undo:
            self._undo(wait)
        self._give_back(wait.binding, wait.pod, wait.ticket, f"volume binding: {problem}")

    def _undo(self, wait: _Wait) -> None:
        """Take back what was written and is not bound, each only if unchanged since."""
        try:
            for volume, ref in wait.refs.items():
                pv = self.cache.volume(volume)
                claim = self.cache.claim(ref.key)
                if (pv is None or pv.claim_ref is None or pv.claim_ref.key != ref.key
                        or (claim is not None and claim.volume_name == volume)):
                    continue
                self._patch("PersistentVolume", f"/api/v1/persistentvolumes/{volume}",
                            {"metadata": {"resourceVersion": pv.resource_version,
                                          "annotations": {BOUND_BY_CONTROLLER: None}}, "spec": {"claimRef": None}})
            for key in wait.selected:
                claim = self.cache.claim(key)
                if claim is None or claim.volume_name or claim.annotations.get(SELECTED_NODE) != wait.binding.node:
                    continue
                namespace, name = key.split("/", 1)
                self._patch("PersistentVolumeClaim", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
                            {"metadata": {"resourceVersion": claim.resource_version,
                                          "annotations": {SELECTED_NODE: None}}})
        except Exception:  # noqa: BLE001 - best effort: the next cycle sees what is left
            log.exception("undoing the volume choices of %s", wait.binding.pod)
