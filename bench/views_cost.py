"""What the read-only views cost a scheduling cycle (runtime/service/views.py, volcano_metrics.py,
dashboard.py): one cycle of the Volcano default policy on a backlog, with the views and the
Volcano-named metrics on and off, alternately, process CPU time each; and the dashboard's render.

    python bench/views_cost.py [--nodes 1000] [--gangs 2000] [--size 10] [--repeat 8] [--json]

The cluster: `--nodes` nodes of 8 cpu / 32 GiB, `--gangs` PodGroups (Inqueue) of `--size` pods
of 1 cpu / 1 GiB each: by default 8,000 pods are placed and 12,000 wait. With --json the last
line is one JSON object. No cluster, no network.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.pipeline import compile_text  # noqa: E402
from runtime.service import dashboard  # noqa: E402
from runtime.service.embedded import EmbeddedCluster  # noqa: E402
from runtime.service.loop import Scheduler  # noqa: E402
from runtime.kube.metrics import Metrics  # noqa: E402
from runtime.cluster.model import ClusterState, Node, Pod, PodGroup  # noqa: E402
from runtime.service.views import LiveView  # noqa: E402

POLICY = Path(__file__).resolve().parents[1] / "policies" / "volcano-default.policy"


def backlog(nodes: int, gangs: int, size: int) -> ClusterState:
    state = ClusterState()
    for i in range(nodes):
        state.nodes[f"n{i}"] = Node(f"n{i}", {"cpu": 8000, "memory": 32 * 2**30, "pods": 110})
    for g in range(gangs):
        state.podgroups[f"ns/g{g}"] = PodGroup("ns", f"g{g}", min_member=size, phase="Inqueue", creation=float(g))
        for k in range(size):
            state.pods[f"ns/g{g}-{k}"] = Pod("ns", f"g{g}-{k}", {"cpu": 1000, "memory": 2**30}, uid=f"u{g}-{k}",
                                             group=f"g{g}", creation=float(g))
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gangs", type=int, default=2000)
    parser.add_argument("--size", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    plan = compile_text(POLICY.read_text(), str(POLICY)).plan
    cpu: dict[bool, list[float]] = {False: [], True: []}
    render_ms: list[float] = []
    waiting = placed = 0
    # One cycle first: the kernels' and the plugins' first calls are not what is measured.
    Scheduler(plan, EmbeddedCluster(backlog(args.nodes, args.gangs, args.size)), metrics=Metrics(volcano=True),
              view=LiveView()).run_once()
    for _ in range(args.repeat):
        for views in (False, True):
            view = LiveView() if views else None
            scheduler = Scheduler(plan, EmbeddedCluster(backlog(args.nodes, args.gangs, args.size)),
                                  metrics=Metrics(volcano=views), view=view)
            started = time.process_time()
            report = scheduler.run_once()
            cpu[views].append(time.process_time() - started)
            waiting, placed = len(report.decisions.unschedulable), len(report.decisions.bindings)
            if view is not None:
                started = time.perf_counter()
                dashboard.render(view)
                render_ms.append((time.perf_counter() - started) * 1000)
    result = {"nodes": args.nodes, "pods": args.gangs * args.size, "placed": placed, "waiting": waiting,
              "cycle_cpu_ms": {"views_off": round(statistics.median(cpu[False]) * 1000, 1),
                               "views_on": round(statistics.median(cpu[True]) * 1000, 1)},
              "dashboard_render_ms": round(statistics.median(render_ms), 1)}
    if args.json:
        print(json.dumps(result))
    else:
        c = result["cycle_cpu_ms"]
        print(f"{result['pods']} pods on {result['nodes']} nodes ({placed} placed, {waiting} waiting): cycle CPU "
              f"median {c['views_off']} ms without the views, {c['views_on']} ms with; /ui render "
              f"{result['dashboard_render_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
