"""What a bind costs the scheduler's own process, by how many binds go pipelined on one connection.

    python -m bench.e2e.bind_costs [--count 2000] [--batches 1,3,20] [--json FILE]

On a fresh dev cluster (the side-by-side harness's: bench/e2e/run.py, API-server rate limits
off), `--count` pods are created for each batch size, then bound through the connector's own
Binder (runtime/kube/binder.py: pipelined on one kept-alive connection, runtime/kube/pipelining.py)
`size` at a time, from one thread. For each size: the binding thread's processor time per bind
(time.thread_time, so the API server's and the creating threads' are not counted) and the wall
time. The answers to a batch arrive one by one as the API server serves them in order, so part
of a batch's cost is per batch (the write, the thread's turn, a wake-up per answer that arrives
alone). `runtime/kube/cluster.py` still spreads a cycle's binds over every connection: on the
side-by-side (b) fewer, deeper batches saved the scheduler no processor time and added to the
bind latency (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.e2e.run import APISERVER_ARGS
from policydsl.cli import devcluster
from runtime.cluster.decisions import Binding
from runtime.cluster.model import Pod
from runtime.kube.api import KubeApi
from runtime.kube.binder import BOUND, Binder

NAMESPACE = "bind-costs"
NODE = "n1"


def _pods(api: KubeApi, first: int, count: int) -> list[Pod]:
    """`count` new pods (names from `first`), as the cache would know them: name and UID."""
    def create(i: int) -> Pod:
        made = api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "registry.example/app"}]}})
        return Pod(namespace=NAMESPACE, name=f"p{i}", uid=made["metadata"]["uid"])
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(create, range(first, first + count)))


def measure(cluster: devcluster.DevCluster, count: int, sizes: list[int]) -> list[dict[str, Any]]:
    api = KubeApi(cluster.api_client())
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    api.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    binder = Binder(api)
    rows = []
    for k, size in enumerate(sizes):
        pods = _pods(api, k * count, count)
        items = [(Binding(pod.key, NODE), pod) for pod in pods]
        cpu, wall = time.thread_time(), time.monotonic()
        bound = 0
        for lo in range(0, count, size):
            bound += sum(outcome.result == BOUND for _, outcome in binder.bind_all(items[lo:lo + size]))
        cpu, wall = time.thread_time() - cpu, time.monotonic() - wall
        rows.append({"batch": size, "count": count, "bound": bound, "wall_s": round(wall, 3),
                     "client_cpu_us_per_bind": round(cpu * 1e6 / count, 1)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.bind_costs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000, help="binds per batch size (default 2,000)")
    parser.add_argument("--batches", default="1,3,20", help="batch sizes, comma-separated (default 1,3,20)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.batches.split(",")]
    except ValueError:
        parser.error(f"--batches: not a comma-separated list of whole numbers: {args.batches!r}")
    if args.count < 1 or not sizes or min(sizes) < 1:
        parser.error("--count and every batch size must be at least 1")
    with tempfile.TemporaryDirectory(prefix="bind-costs-") as work:
        directory = Path(work) / "cluster"
        cluster = devcluster.up(directory, apiserver_args=APISERVER_ARGS)
        try:
            rows = measure(cluster, args.count, sizes)
        finally:
            devcluster.down(directory)
    for row in rows:
        print(f"batches of {row['batch']:>4}: {row['client_cpu_us_per_bind']:.0f} us of the binding thread's processor "
              f"time per bind ({row['bound']:,} of {row['count']:,} bound in {row['wall_s']:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps({"binds": rows}, indent=2) + "\n")
    return 0 if all(row["bound"] == row["count"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
