"""What a real cluster would do around the scheduler, played by one polling thread: the kubelet
(bound pods become Running after a short delay and Succeeded after their runtime; pods being
deleted go away), the pod garbage collector (pods of deleted nodes), the taint manager (pods that
do not tolerate a NoExecute taint are evicted), the namespace controller (a deleted namespace's
objects are removed, then the namespace is finalized) and a job controller that removes a job
once all its pods finished, or once it lost a pod (Volcano's default for an evicted member is to
restart the job; the soak makes a new job instead).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.soak.workload import JOB_LABEL, VOLCANO_API
from runtime.kube.api import ApiError, KubeApi

POLL_S = 0.5
START_DELAY_S = (0.3, 1.5)  # bound -> Running
RUNTIME_S = (5.0, 40.0)  # Running -> Succeeded
ORPHAN_GRACE_S = 3.0  # a pod on a deleted node is removed after this (kube's pod GC waits longer)
FINISHED_KEEP_S = 10.0  # a finished job stays this long before its objects are removed
NAMESPACE_CLEANUP_DELAY_S = 2.0


@dataclass(frozen=True)
class KubeletTimes:
    start_delay_s: tuple[float, float] = START_DELAY_S
    runtime_s: tuple[float, float] = RUNTIME_S


class KubeletStandIn:
    def __init__(self, api: KubeApi, scheduler: str, rng: random.Random, times: KubeletTimes = KubeletTimes()) -> None:
        self.api = api
        self.scheduler = scheduler
        self.rng = rng
        self.times = times
        self.actions: Counter[str] = Counter()  # what it did, for the report
        self.jobs: dict[tuple[str, str], int] = {}  # (namespace, job) -> pods created, told by the harness
        self._seen_bound: dict[str, float] = {}  # uid -> when first seen bound
        self._runtime: dict[str, float] = {}  # uid -> when it finishes
        self._orphaned: dict[str, float] = {}
        self._finished_at: dict[tuple[str, str], float] = {}
        self._doomed_namespaces: dict[str, float] = {}  # namespace -> when deleted
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-kubelet", daemon=True)

    def start(self) -> KubeletStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def job_created(self, namespace: str, job: str, pods: int) -> None:
        with self._lock:
            self.jobs[(namespace, job)] = pods

    def namespace_deleted(self, namespace: str) -> None:
        with self._lock:
            self._doomed_namespaces[namespace] = time.monotonic()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except ApiError:
                pass  # the API server is restarting: next round
            self._stop.wait(POLL_S)

    def _round(self) -> None:
        now = time.monotonic()
        nodes = {n["metadata"]["name"]: n for n in self.api.get("/api/v1/nodes")["items"]}
        pods = [p for p in self.api.get("/api/v1/pods")["items"]
                if (p.get("spec") or {}).get("schedulerName") == self.scheduler]
        for pod in pods:
            try:
                self._pod(pod, nodes, now)
            except ApiError as exc:
                if exc.status == 0:
                    raise
                # 404/409: it changed or went meanwhile; the next round sees it as it is
        self._jobs(pods, now)
        self._namespaces(pods, now)

    def _path(self, pod: Mapping[str, Any]) -> str:
        return f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"

    def _remove(self, pod: Mapping[str, Any], why: str) -> None:
        # The grace period goes in the body: with a body, the API server reads the options from it
        # alone, and a graceful deletion would wait for a kubelet that never comes.
        self.api.request("DELETE", self._path(pod), body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                          "gracePeriodSeconds": 0,
                                                          "preconditions": {"uid": pod["metadata"]["uid"]}})
        self.actions[why] += 1

    def _pod(self, pod: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]], now: float) -> None:
        uid = pod["metadata"]["uid"]
        node_name = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp"):
            self._remove(pod, "terminated")  # the container stops on SIGTERM at once
            return
        if not node_name or phase in ("Succeeded", "Failed"):
            return
        node = nodes.get(node_name)
        if node is None:
            since = self._orphaned.setdefault(uid, now)
            if now - since >= ORPHAN_GRACE_S:
                self._remove(pod, "garbage-collected (node gone)")
            return
        self._orphaned.pop(uid, None)
        if _evicted_by_taints(pod, node):
            self._remove(pod, "evicted (NoExecute taint)")
            return
        seen = self._seen_bound.setdefault(uid, now)
        if phase == "Pending" and now - seen >= self.rng.uniform(*self.times.start_delay_s):
            self.api.merge_patch(self._path(pod) + "/status", {"status": {"phase": "Running"}})
            self._runtime[uid] = now + self.rng.uniform(*self.times.runtime_s)
            self.actions["started"] += 1
        elif phase == "Running" and now >= self._runtime.setdefault(uid, now + self.rng.uniform(*self.times.runtime_s)):
            self.api.merge_patch(self._path(pod) + "/status", {"status": {"phase": "Succeeded"}})
            self.actions["completed"] += 1

    def _jobs(self, pods: list[Mapping[str, Any]], now: float) -> None:
        by_job: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for pod in pods:
            job = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)
            if job:
                by_job.setdefault((pod["metadata"]["namespace"], job), []).append(pod)
        with self._lock:
            jobs = dict(self.jobs)
        for key, created in jobs.items():
            members = by_job.get(key, [])
            done = bool(members) and all((p.get("status") or {}).get("phase") == "Succeeded" for p in members)
            lost = len(members) < created
            if not (done or lost):
                self._finished_at.pop(key, None)
                continue
            since = self._finished_at.setdefault(key, now)
            if done and now - since < FINISHED_KEEP_S:
                continue
            namespace, job = key
            try:
                self.api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods",
                                 query={"labelSelector": f"{JOB_LABEL}={job}", "gracePeriodSeconds": "0"})
                self.api.request("DELETE", f"/apis/{VOLCANO_API}/namespaces/{namespace}/podgroups/{job}")
            except ApiError as exc:
                if exc.status == 0:
                    raise
            self.actions["job removed (finished)" if done else "job removed (lost a pod)"] += 1
            with self._lock:
                self.jobs.pop(key, None)
            self._finished_at.pop(key, None)
        live = {p["metadata"]["uid"] for p in pods}
        for table in (self._seen_bound, self._runtime, self._orphaned):
            for uid in [u for u in table if u not in live]:
                del table[uid]

    def _namespaces(self, pods: list[Mapping[str, Any]], now: float) -> None:
        with self._lock:
            doomed = dict(self._doomed_namespaces)
        for namespace, since in doomed.items():
            if now - since < NAMESPACE_CLEANUP_DELAY_S:
                continue
            try:
                self.api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", query={"gracePeriodSeconds": "0"})
                self.api.request("DELETE", f"/apis/{VOLCANO_API}/namespaces/{namespace}/podgroups")
                left = self.api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
                if left:
                    continue
                current = self.api.get(f"/api/v1/namespaces/{namespace}")
                current["spec"] = {"finalizers": []}
                self.api.put(f"/api/v1/namespaces/{namespace}/finalize", current)
            except ApiError as exc:
                if exc.status == 0:
                    raise
                if exc.status != 404:
                    continue
            with self._lock:
                self._doomed_namespaces.pop(namespace, None)
                for key in [k for k in self.jobs if k[0] == namespace]:
                    del self.jobs[key]
            self.actions["namespace finalized"] += 1


def _evicted_by_taints(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") != "NoExecute":
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return True
    return False


def _tolerates(tol: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    if (tol.get("operator") or "Equal") == "Exists":
        return not tol.get("key") or tol.get("key") == taint.get("key")
    return tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or "")
