"""Load test of the scheduler against a real API server (not a test: it prints figures).

Creates N fake nodes and P pods in gangs of G (one PodGroup each, minMember = G) while
`policydsl run` schedules them as a subprocess, and watches the pods: every pod's
create→bind latency is the time between the watch event that showed it (ADDED) and the one
that showed it bound, both seen by the same watch here.

    python bench/load.py                        # 1,000 nodes, 10,000 pods, own dev cluster
    python bench/load.py --nodes 100 --pods 1000 --json
    python bench/load.py --kubeconfig KUBECONFIG --mode backlog

--mode streaming (default): the scheduler runs while the pods are created, as in a live
cluster; throughput is then bounded by how fast this process creates pods, which it also
reports. --mode backlog: all pods are created first, then the scheduler starts: its own
throughput. pods/s = pods bound / (last bind − first pod seen, or − scheduler ready in
backlog mode).

With --json the last line is one JSON object. tests/integration/test_connector_load.py runs a
small instance of the same code and checks that every pod is bound.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runtime.kube.api import ApiError, KubeApi, connect  # noqa: E402

VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
DEFAULT_POLICY = REPO / "policies" / "volcano-default.policy"
CREATE_WORKERS = 16


@dataclass(frozen=True)
class LoadResult:
    mode: str
    nodes: int
    pods: int
    gang: int
    bound: int
    create_seconds: float  # first create request to last create answer
    create_rate: float  # pods created per second
    seconds: float  # the window pods/s is measured over
    pods_per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    cycles: int
    cycle_p99_ms: float | None
    bind_errors: int
    gangs_split: int  # gangs with some but not all pods bound at the end (must be 0)


class BindWatch:
    """Watches a namespace's pods: when each was first seen and when it was first seen bound."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.seen: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.nodes: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bind-watch", daemon=True)

    def start(self) -> None:
        listed = self.api.get(self.path, {"limit": 1})
        self._version = listed["metadata"]["resourceVersion"]
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self.api.watch(self.path, {"resourceVersion": self._version,
                                                        "allowWatchBookmarks": "true"}, 300):
                    now = time.monotonic()
                    meta = event.object.get("metadata") or {}
                    self._version = meta.get("resourceVersion", self._version)
                    if event.type not in ("ADDED", "MODIFIED"):
                        continue
                    name = meta["name"]
                    self.seen.setdefault(name, now)
                    node = (event.object.get("spec") or {}).get("nodeName")
                    if node and name not in self.bound:
                        self.bound[name] = now
                        self.nodes[name] = node
                    if self._stop.is_set():
                        return
            except ApiError:
                self._stop.wait(0.5)


def node_body(name: str, run: str) -> dict:
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "policydsl-load": run}},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def pod_body(name: str, group: str, scheduler: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": scheduler, "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}


def podgroup_body(name: str, size: int) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": size, "queue": "default"}}


class SchedulerUnderTest:
    def __init__(self, kubeconfig: Path, policy: Path, scheduler: str, period: str, log_path: Path) -> None:
        self.argv = [sys.executable, "-m", "policydsl", "run", "--policy", str(policy), "--kubeconfig",
                     str(kubeconfig), "--scheduler-name", scheduler, "--schedule-period", period,
                     "--metrics-addr", "127.0.0.1:0"]
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 60.0) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                         env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"scheduler exited with {self.proc.returncode}; see {self.log_path}")
            found = re.findall(r"metrics on (http://\S+)/metrics", self.log_path.read_text(errors="replace"))
            if found:
                self.url = found[-1]
                try:
                    with urllib.request.urlopen(self.url + "/readyz", timeout=2) as answer:
                        if answer.status == 200:
                            return
                except OSError:
                    pass
            time.sleep(0.1)
        raise RuntimeError(f"scheduler not ready after {timeout:.0f}s; see {self.log_path}")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as answer:
            return answer.read().decode()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _sample(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _histogram_p99(text: str, name: str) -> float | None:
    buckets = [(float("inf") if le == "+Inf" else float(le), float(v))
               for le, v in re.findall(rf'^{re.escape(name)}_bucket{{le="([^"]+)"}} (\S+)$', text, re.MULTILINE)]
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    return next(le for le, count in buckets if count >= 0.99 * total)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run_load(kubeconfig: Path, *, nodes: int, pods: int, gang: int, policy: Path = DEFAULT_POLICY,
             period: str = "1s", mode: str = "streaming", timeout: float = 1800.0, workers: int = CREATE_WORKERS,
             keep: bool = False, log=print) -> LoadResult:
    if pods % gang:
        raise ValueError("--pods must be a multiple of --gang")
    api = connect(str(kubeconfig))
    run = uuid.uuid4().hex[:8]
    namespace, scheduler_name = f"load-{run}", f"load-{run}"
    workdir = Path(tempfile.mkdtemp(prefix="policydsl-load-"))
    scheduler = SchedulerUnderTest(kubeconfig, policy, scheduler_name, period, workdir / "scheduler.log")
    watch = BindWatch(api, namespace)
    pool = ThreadPoolExecutor(workers)
    try:
        api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        started = time.monotonic()
        list(pool.map(lambda i: api.post("/api/v1/nodes", node_body(f"{namespace}-n{i:05d}", run)), range(nodes)))
        log(f"{nodes} nodes created in {time.monotonic() - started:.1f}s")
        watch.start()
        if mode == "streaming":
            scheduler.start()
        groups = [f"job{g:05d}" for g in range(pods // gang)]

        def create_gang(group: str) -> None:
            api.post(f"{VOLCANO}/namespaces/{namespace}/podgroups", podgroup_body(group, gang))
            for i in range(gang):
                api.post(f"/api/v1/namespaces/{namespace}/pods", pod_body(f"{group}-{i}", group, scheduler_name))

        create_start = time.monotonic()
        list(pool.map(create_gang, groups))
        create_seconds = time.monotonic() - create_start
        log(f"{pods} pods in {len(groups)} gangs created in {create_seconds:.1f}s ({pods / create_seconds:.0f}/s)")
        ready_at = None
        if mode == "backlog":
            while len(watch.seen) < pods:
                time.sleep(0.05)
            scheduler.start()
            ready_at = time.monotonic()
        deadline = time.monotonic() + timeout
        last_report = time.monotonic()
        while len(watch.bound) < pods:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(watch.bound)}/{pods} bound after {timeout:.0f}s; see {scheduler.log_path}")
            if scheduler.proc is not None and scheduler.proc.poll() is not None:
                raise RuntimeError(f"scheduler exited with {scheduler.proc.returncode}; see {scheduler.log_path}")
            if time.monotonic() - last_report > 10:
                log(f"  {len(watch.bound)}/{pods} bound")
                last_report = time.monotonic()
            time.sleep(0.05)
        metrics = scheduler.metrics()
        latencies = [(watch.bound[p] - watch.seen[p]) * 1000 for p in watch.bound]
        first = ready_at if ready_at is not None else min(watch.seen.values())
        window = max(watch.bound.values()) - first
        split = sum(1 for g in groups if 0 < sum(f"{g}-{i}" in watch.bound for i in range(gang)) < gang)
        cycle_p99 = _histogram_p99(metrics, "policydsl_e2e_scheduling_duration_seconds")
        return LoadResult(
            mode=mode, nodes=nodes, pods=pods, gang=gang, bound=len(watch.bound),
            create_seconds=round(create_seconds, 2), create_rate=round(pods / create_seconds, 1),
            seconds=round(window, 2), pods_per_second=round(pods / window, 1),
            p50_ms=round(_percentile(latencies, 0.50), 1), p99_ms=round(_percentile(latencies, 0.99), 1),
            max_ms=round(max(latencies), 1),
            cycles=int(_sample(metrics, "policydsl_e2e_scheduling_duration_seconds_count")),
            cycle_p99_ms=None if cycle_p99 is None else round(cycle_p99 * 1000, 1),
            bind_errors=int(_sample(metrics, "policydsl_bind_errors_total")), gangs_split=split,
        )
    finally:
        watch.stop()
        scheduler.stop()
        if not keep:
            _clean(api, namespace, run)
        pool.shutdown()
        api.close()


def _clean(api: KubeApi, namespace: str, run: str) -> None:
    for path, query in ((f"/api/v1/namespaces/{namespace}/pods", {"gracePeriodSeconds": "0"}),
                        (f"{VOLCANO}/namespaces/{namespace}/podgroups", {}),
                        ("/api/v1/nodes", {"labelSelector": f"policydsl-load={run}"})):
        try:
            api.request("DELETE", path, query=query, timeout=120)
        except ApiError as err:
            print(f"cleanup of {path} failed: {err}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--gang", type=int, default=10, help="pods per gang (minMember)")
    parser.add_argument("--kubeconfig", type=Path, help="an existing cluster (default: start a dev cluster)")
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY)
    parser.add_argument("--period", default="1s", help="the scheduler's --schedule-period")
    parser.add_argument("--mode", choices=["streaming", "backlog"], default="streaming")
    parser.add_argument("--workers", type=int, default=CREATE_WORKERS, help="concurrent create requests")
    parser.add_argument("--keep", action="store_true", help="leave the objects in the cluster")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args(argv)
    sizes = (("--nodes", args.nodes), ("--pods", args.pods), ("--gang", args.gang), ("--workers", args.workers))
    for flag, value in sizes:
        if value < 1:
            parser.error(f"{flag} must be at least 1, got {value}")
    if args.pods % args.gang:
        parser.error(f"--pods ({args.pods}) must be a multiple of --gang ({args.gang})")

    say = (lambda text: print(text, file=sys.stderr)) if args.json else print
    cluster_dir = None
    kubeconfig = args.kubeconfig
    if kubeconfig is None:
        from policydsl.cli import devcluster

        cluster_dir = Path(tempfile.mkdtemp(prefix="policydsl-load-cluster-"))
        say(f"starting a dev cluster in {cluster_dir}")
        kubeconfig = devcluster.up(cluster_dir).kubeconfig
    try:
        result = run_load(kubeconfig, nodes=args.nodes, pods=args.pods, gang=args.gang, policy=args.policy,
                          period=args.period, mode=args.mode, workers=args.workers, keep=args.keep, log=say)
    finally:
        if cluster_dir is not None:
            devcluster.down(cluster_dir)
    say(f"{result.bound}/{result.pods} pods bound on {result.nodes} nodes in gangs of {result.gang} "
        f"({result.mode}): {result.pods_per_second:.0f} pods/s over {result.seconds:.1f}s; create→bind "
        f"P50 {result.p50_ms:.0f} ms, P99 {result.p99_ms:.0f} ms, max {result.max_ms:.0f} ms; "
        f"{result.cycles} cycles, cycle P99 ≤ {result.cycle_p99_ms} ms; bind errors {result.bind_errors}; "
        f"pods created at {result.create_rate:.0f}/s")
    if args.json:
        print(json.dumps(asdict(result)))
    return 0 if result.bound == result.pods and result.gangs_split == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
