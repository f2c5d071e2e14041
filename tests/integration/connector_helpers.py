"""Helpers for the connector tests: objects as dicts, a namespace per test, the scheduler as a
subprocess, a kubelet stand-in, and a recorder of every node a pod was ever given."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for
from prometheus_client.parser import text_string_to_metric_families

from runtime.kube.api import ApiError, KubeApi

from .kube_helpers import KubeCluster
from .poller import Poller

REPO = Path(__file__).resolve().parents[2]
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"

GANG_POLICY = """policy "connector-test" version 1
actions [enqueue, allocate, backfill]
tier {
  plugin priority
  plugin gang
}
tier {
  plugin drf
  plugin predicates
  plugin proportion
  plugin nodeorder
  plugin binpack
}
"""


# --- objects ----------------------------------------------------------------------------------

def node_body(name: str, cpu: str = "8", memory: str = "32Gi", pods: str = "110", *,
              labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None, **extra: str) -> dict:
    resources = {"cpu": cpu, "memory": memory, "pods": pods, **extra}
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "fake node (no kubelet)"}]},
    }
    if taints:
        body["spec"] = {"taints": taints}
    return body


def pod_body(name: str, scheduler: str, *, cpu: str = "1", memory: str = "1Gi", group: str | None = None,
             priority_class: str | None = None, labels: dict[str, str] | None = None,
             extra: dict[str, str] | None = None) -> dict:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 30,
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": memory, **(extra or {})},
                                      "limits": {k: v for k, v in (extra or {}).items()}}}],
    }
    if not extra:
        del spec["containers"][0]["resources"]["limits"]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations, "labels": labels or {}}, "spec": spec}


def podgroup_body(name: str, min_member: int, queue: str = "default",
                  min_resources: dict[str, str] | None = None, priority_class: str | None = None) -> dict:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if min_resources:
        spec["minResources"] = min_resources
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": spec}


class Objects:
    """Creates objects in one namespace and cleans everything up afterwards."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.nodes: list[str] = []
        self.cluster_objects: list[str] = []

    def node(self, name: str, **kwargs: Any) -> None:
        body = node_body(name, **kwargs)
        created = self.api.post("/api/v1/nodes", body)
        self.nodes.append(name)
        if not (created.get("status") or {}).get("allocatable"):
            created["status"] = body["status"]
            self.api.put(f"/api/v1/nodes/{name}/status", created)

    def pod(self, name: str, scheduler: str, **kwargs: Any) -> dict:
        return self.api.post(f"/api/v1/namespaces/{self.namespace}/pods", pod_body(name, scheduler, **kwargs))

    def gang(self, name: str, size: int, scheduler: str, *, min_member: int | None = None, queue: str = "default",
             min_resources: dict[str, str] | None = None, **pod_kwargs: Any) -> list[str]:
        self.podgroup(name, size if min_member is None else min_member, queue, min_resources)
        names = [f"{name}-{i}" for i in range(size)]
        for pod in names:
            self.pod(pod, scheduler, group=name, **pod_kwargs)
        return names

    def podgroup(self, name: str, min_member: int, queue: str = "default",
                 min_resources: dict[str, str] | None = None, priority_class: str | None = None) -> dict:
        return self.api.post(f"{VOLCANO}/namespaces/{self.namespace}/podgroups",
                             podgroup_body(name, min_member, queue, min_resources, priority_class))

    def queue(self, name: str, spec: dict[str, Any]) -> dict:
        created = self.api.post(f"{VOLCANO}/queues", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                                      "metadata": {"name": name}, "spec": spec})
        self.cluster_objects.append(f"{VOLCANO}/queues/{name}")
        return created

    def priority_class(self, name: str, value: int) -> None:
        self.api.post("/apis/scheduling.k8s.io/v1/priorityclasses",
                      {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                       "value": value})
        self.cluster_objects.append(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")

    # --- reads --------------------------------------------------------------------------------
    def pods(self) -> dict[str, dict]:
        items = self.api.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        return {p["metadata"]["name"]: p for p in items}

    def bound(self) -> dict[str, str]:
        return {name: p["spec"]["nodeName"] for name, p in self.pods().items() if p["spec"].get("nodeName")}

    def read_podgroup(self, name: str) -> dict:
        return self.api.get(f"{VOLCANO}/namespaces/{self.namespace}/podgroups/{name}")

    def events_for(self, name: str, kind: str = "Pod") -> list[dict]:
        items = self.api.get(f"/api/v1/namespaces/{self.namespace}/events")["items"]
        return [e for e in items if e["involvedObject"]["name"] == name and e["involvedObject"]["kind"] == kind]

    def cleanup(self) -> None:
        ns = self.namespace
        for path in (f"/api/v1/namespaces/{ns}/pods", f"{VOLCANO}/namespaces/{ns}/podgroups"):
            try:
                self.api.request("DELETE", path, query={"gracePeriodSeconds": "0"})
            except ApiError:
                pass
        for path in self.cluster_objects + [f"/api/v1/nodes/{n}" for n in self.nodes]:
            try:
                self.api.delete(path)
            except ApiError:
                pass


@pytest.fixture
def kube_api(kube_cluster: KubeCluster) -> KubeApi:
    return KubeApi(kube_cluster.api_client)  # shares the session's client: never close it


@pytest.fixture
def objects(kube_api: KubeApi) -> Iterator[Objects]:
    """A fresh namespace (no namespace controller runs, so it is never really deleted: its
    objects are) and the objects a test makes in it."""
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    kube_api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    made = Objects(kube_api, namespace)
    try:
        yield made
    finally:
        made.cleanup()


def unique_scheduler_name() -> str:
    """Each test schedules only its own pods: leftovers of other tests have other names."""
    return f"policydsl-{uuid.uuid4().hex[:6]}"


# --- the scheduler as a process -------------------------------------------------------------------

class SchedulerProcess:
    """`python -m policydsl run ...` in the background, its log in a file."""

    def __init__(self, tmp: Path, policy_text: str, kubeconfig: Path, scheduler_name: str, *extra: str,
                 period: str = "0.3s", label: str = "scheduler") -> None:
        self.policy = tmp / f"{label}.policy"
        self.policy.write_text(policy_text)
        self.log_path = tmp / f"{label}.log"
        self.argv = [sys.executable, "-m", "policydsl", "run", "--policy", str(self.policy),
                     "--kubeconfig", str(kubeconfig), "--scheduler-name", scheduler_name,
                     "--schedule-period", period, "--metrics-addr", "127.0.0.1:0", *extra]
        self.proc: subprocess.Popen[bytes] | None = None
        self._metrics_url: str | None = None

    def start(self) -> SchedulerProcess:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        self._metrics_url = None
        return self

    def __enter__(self) -> SchedulerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics_url(self, timeout: float = 30.0) -> str:
        if self._metrics_url is None:
            def find() -> str | None:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise AssertionError(f"scheduler exited with {self.proc.returncode}:\n{self.log()}")
                found = re.findall(r"metrics on (http://\S+)/metrics", self.log())
                return found[-1] if found else None
            self._metrics_url = wait_for(find, "the scheduler's metrics address", timeout)
        return self._metrics_url

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.metrics_url() + path, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def wait_ready(self, timeout: float = 30.0) -> None:
        wait_for(lambda: self.get("/readyz")[0] == 200, "the scheduler's /readyz", timeout)

    def metric(self, name: str, **labels: str) -> float:
        _, text = self.get("/metrics")
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)


# --- a kubelet stand-in ------------------------------------------------------------------------------

class FakeKubelet(Poller):
    """Plays kubelet for one namespace: bound pods become Running (status subresource), pods
    being deleted (evicted) go away `termination_seconds` after it first sees them so (at once
    by default: a container that stops on SIGTERM). Polls; good enough for tests."""

    def __init__(self, api: KubeApi, namespace: str, interval: float = 0.2, termination_seconds: float = 0.0) -> None:
        super().__init__(interval)
        self.api = api
        self.namespace = namespace
        self.termination_seconds = termination_seconds
        self.deleted: list[str] = []
        self._terminating: dict[str, float] = {}   # pod -> when it was first seen being deleted

    def poll(self) -> None:
        base = f"/api/v1/namespaces/{self.namespace}/pods"
        for pod in self.api.get(base)["items"]:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                since = self._terminating.setdefault(name, time.monotonic())
                if time.monotonic() - since >= self.termination_seconds:
                    self.api.request("DELETE", f"{base}/{name}", query={"gracePeriodSeconds": "0"})
                    self.deleted.append(name)
            elif pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") == "Pending":
                # Only the pod as listed: a test may have reported it Succeeded since, and a
                # kubelet never takes a finished pod back to Running (409 Conflict: it changed).
                version = pod["metadata"]["resourceVersion"]
                try:
                    self.api.merge_patch(f"{base}/{name}/status", {"metadata": {"resourceVersion": version},
                                                                   "status": {"phase": "Running"}})
                except ApiError as exc:
                    if exc.status not in (404, 409):
                        raise


# --- what happened to each pod ------------------------------------------------------------------------

class AssignmentRecorder:
    """Watches the pods of a namespace and records every node each pod was ever given, so a
    test can tell that no pod was bound twice (or moved)."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.nodes: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> AssignmentRecorder:
        listed = self.api.get(self.path)
        self._version = listed["metadata"]["resourceVersion"]
        for pod in listed["items"]:
            self._see(pod)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _see(self, pod: dict) -> None:
        node = pod["spec"].get("nodeName")
        if node:
            with self._lock:
                seen = self.nodes.setdefault(pod["metadata"]["name"], [])
                if not seen or seen[-1] != node:
                    seen.append(node)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self.api.watch(self.path, {"resourceVersion": self._version}, 60):
                    self._version = event.object.get("metadata", {}).get("resourceVersion", self._version)
                    if event.type in ("ADDED", "MODIFIED"):
                        self._see(event.object)
                    if self._stop.is_set():
                        return
            except ApiError:
                self._stop.wait(0.5)  # the API server restarts in some tests: resume from the version

    def twice(self) -> dict[str, list[str]]:
        with self._lock:
            return {pod: nodes for pod, nodes in self.nodes.items() if len(nodes) > 1}


def node_usage_within_capacity(objects: Objects, capacity_cpu_milli: dict[str, int]) -> dict[str, int]:
    """cpu millicores requested per node by the namespace's bound pods, checked against capacity."""
    used: dict[str, int] = {}
    for pod in objects.pods().values():
        node = pod["spec"].get("nodeName")
        if node:
            cpu = pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
            used[node] = used.get(node, 0) + (int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000)
    over = {n: u for n, u in used.items() if u > capacity_cpu_milli.get(n, 0)}
    assert not over, f"nodes over capacity: {over} (capacity {capacity_cpu_milli})"
    return used


# --- the scheduler in this process ---------------------------------------------------------------

@dataclass(frozen=True)
class Cycle:
    decisions: Any  # runtime.cluster.decisions.Decisions
    applied: Any  # runtime.service.loop.ApplyReport
    binds: Any  # runtime.kube.cluster.BindTotals


class InProcess:
    """A Scheduler over a KubeCluster in this process, cycles run by the test (`cycle()`)."""

    def __init__(self, kubeconfig: Path, scheduler_name: str, policy_text: str, **cluster_options: Any) -> None:
        from compiler.pipeline import compile_text
        from runtime.kube.api import connect
        from runtime.kube.cluster import KubeCluster
        from runtime.service.loop import Scheduler

        compilation = compile_text(policy_text, "test.policy")
        assert compilation.plan is not None, [str(d) for d in compilation.diagnostics]
        self.api = connect(str(kubeconfig))
        self.cluster = KubeCluster(self.api, scheduler_name, identity="test", **cluster_options)
        self.scheduler = Scheduler(compilation.plan, self.cluster, scheduler_name=scheduler_name, period=0.2)
        self.cluster.start()
        assert self.cluster.wait_synced(30), "cache did not sync"

    def sees(self, namespace: str, count: int, nodes: int = 0) -> bool:
        """The cache holds `count` pods of the namespace (and `nodes` of its nodes, named
        `<namespace>-...` by Objects.node): a cycle before the nodes arrive would admit nothing."""
        state = self.cluster.snapshot()
        return sum(1 for key in state.pods if key.startswith(namespace + "/")) >= count and \
            sum(1 for name in state.nodes if name.startswith(namespace + "-")) >= nodes

    def cycle(self) -> Cycle:
        """One cycle, and (binds are asynchronous) the outcome of its binds once they answered."""
        report = self.scheduler.run_once()
        return Cycle(report.decisions, report.applied, self.cluster.drain(timeout=30))

    def cycle_until(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        """Cycle (as the running loop would, a few times a second) until `condition` holds."""
        def cycled() -> Any:
            self.cycle()
            return condition()
        return wait_for(cycled, what, timeout, interval=0.2)

    def close(self) -> None:
        self.cluster.stop()


@pytest.fixture
def in_process(kube_cluster: KubeCluster) -> Iterator[Callable[..., InProcess]]:
    made: list[InProcess] = []

    def make(scheduler_name: str, policy_text: str = GANG_POLICY, **cluster_options: Any) -> InProcess:
        made.append(InProcess(kube_cluster.kubeconfig, scheduler_name, policy_text, **cluster_options))
        return made[-1]

    yield make
    for scheduler in made:
        scheduler.close()
