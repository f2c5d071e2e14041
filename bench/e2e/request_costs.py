"""What one request of each kind a gang scheduler makes costs the API server and etcd.

    python -m bench.e2e.request_costs [--count 1000] [--concurrency 8] [--json FILE]

On a fresh dev cluster (the side-by-side harness's: bench/e2e/run.py, API-server rate limits
off), `--count` requests of each kind, `--concurrency` at a time, in this order: PodGroup
create, pod create, Binding, the PodGroup update a scheduler writes when a gang runs (phase
Running, counts, a Scheduled condition and the job's HyperNode annotation) as a PUT of the whole
object (Volcano's UpdatePodGroup) and as ours, a merge patch, and a phase-only PodGroup patch. For each kind: the API server's and
etcd's processor time (user + system, /proc) divided by the count, and the wall time. The
side-by-side benchmark's raw binder makes only the first three; a gang scheduler adds one
PodGroup status write per gang, which is how much of its distance to the raw binder on (b) and
(e) is the API server's (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.e2e.measure import cpu_seconds
from bench.e2e.run import APISERVER_ARGS, EXTRA_CRDS
from policydsl.cli import devcluster
from runtime.kube.api import KubeApi

NAMESPACE = "request-costs"
PODGROUPS = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NAMESPACE}/podgroups"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
SETTLE_S = 1.0   # before and after each kind: what the previous one set off (watch fan-out) is counted with it


def running_status_patch(hypernode: str) -> dict[str, Any]:
    """The merge patch a gang scheduler writes on a PodGroup whose gang it bound."""
    return {"status": {"phase": "Running", "running": 0, "succeeded": 0, "conditions": [
        {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
         "message": "8/8 tasks ready", "transitionID": "3f5b8e1c-0000-4000-8000-000000000000",
         "lastTransitionTime": "2026-12-02T09:00:00Z"}]},
        "metadata": {"annotations": {"volcano.sh/job-allocated-hypernode": hypernode}}}


def updated(obj: dict[str, Any], hypernode: str) -> dict[str, Any]:
    patch = running_status_patch(hypernode)
    meta = dict(obj["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), **patch["metadata"]["annotations"]}
    return {**obj, "metadata": meta, "status": {**(obj.get("status") or {}), **patch["status"]}}


def requests(api: KubeApi) -> list[tuple[str, Callable[[int], object]]]:
    created: dict[int, Any] = {}
    return [
        ("POST podgroups", lambda i: created.__setitem__(i, api.post(PODGROUPS, {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": f"pg{i}"},
            "spec": {"minMember": 8, "queue": "default"}}))),
        ("POST pods", lambda i: api.post(PODS, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "annotations": {"scheduling.k8s.io/group-name": f"pg{i}"}},
            "spec": {"schedulerName": "nobody", "containers": [{
                "name": "c", "image": "registry.example/app",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})),
        ("POST pods/binding", lambda i: api.post(f"{PODS}/p{i}/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"p{i}"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})),
        ("PUT podgroups (Running status and HyperNode)", lambda i: api.put(f"{PODGROUPS}/pg{i}", updated(created[i], f"s{i % 100}"))),
        ("PATCH podgroups (Running status and HyperNode)",
         lambda i: api.merge_patch(f"{PODGROUPS}/pg{i}", running_status_patch(f"s{i % 100}"))),
        ("PATCH podgroups (phase only)",
         lambda i: api.merge_patch(f"{PODGROUPS}/pg{i}", {"status": {"phase": "Inqueue"}})),
    ]


def measure(cluster: devcluster.DevCluster, count: int, concurrency: int) -> list[dict[str, Any]]:
    api = KubeApi(cluster.api_client())
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    api.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    pids = (cluster.apiserver_pid, cluster.etcd_pid)
    out = []
    with ThreadPoolExecutor(concurrency) as pool:
        for kind, send in requests(api):
            time.sleep(SETTLE_S)
            before, started = cpu_seconds(*pids), time.monotonic()
            list(pool.map(send, range(count)))   # raises the first failed request's ApiError
            wall = time.monotonic() - started
            time.sleep(SETTLE_S)
            after = cpu_seconds(*pids)
            spent = None if before is None or after is None else after - before
            out.append({"request": kind, "count": count, "wall_s": round(wall, 3),
                        "control_plane_cpu_ms_each": None if spent is None else round(spent * 1000 / count, 3)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.request_costs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="requests of each kind (default 1,000)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    if args.count < 1 or args.concurrency < 1:
        parser.error("--count and --concurrency must be at least 1")
    with tempfile.TemporaryDirectory(prefix="request-costs-") as work:
        directory = Path(work) / "cluster"
        cluster = devcluster.up(directory, apiserver_args=APISERVER_ARGS)
        try:
            devcluster.install_crds(cluster, EXTRA_CRDS)
            rows = measure(cluster, args.count, args.concurrency)
        finally:
            devcluster.down(directory)
    for row in rows:
        cpu = row["control_plane_cpu_ms_each"]
        print(f"{row['request']:<48} {'n/a' if cpu is None else f'{cpu:.2f} ms'} of API server + etcd processor "
              f"time each ({row['count']:,} in {row['wall_s']:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps({"concurrency": args.concurrency, "requests": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
