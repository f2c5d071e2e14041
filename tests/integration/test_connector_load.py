"""A small instance of bench/load.py (the full one is 1,000 nodes and 10,000 pods, run by
hand): every pod bound, every gang whole, no bind errors. No timings are asserted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .connector_helpers import REPO
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration


def test_thousand_pods_in_gangs_on_a_hundred_nodes_are_all_bound(kube_cluster: KubeCluster) -> None:
    sys.path.insert(0, str(REPO))
    from bench.load import run_load

    result = run_load(kube_cluster.kubeconfig, nodes=100, pods=1000, gang=10, period="500ms", timeout=300,
                      log=lambda text: None)

    assert result.bound == result.pods == 1000
    assert result.gangs_split == 0
    assert result.bind_errors == 0
    assert result.cycles >= 1
    print(f"{result.pods_per_second} pods/s, create→bind P99 {result.p99_ms} ms (not asserted)")


def test_the_script_runs_a_backlog_to_the_end_and_reports_it(kube_cluster: KubeCluster) -> None:
    # The script as a person runs it (its flags, its report, its exit code), against this
    # session's cluster; streaming mode is the test above.
    done = subprocess.run([sys.executable, str(REPO / "bench" / "load.py"), "--kubeconfig", str(kube_cluster.kubeconfig),
                           "--nodes", "5", "--pods", "40", "--gang", "4", "--period", "200ms", "--mode", "backlog",
                           "--json"], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["mode"] == "backlog"
    assert result["bound"] == result["pods"] == 40
    assert result["gangs_split"] == 0 and result["bind_errors"] == 0
    assert "40/40 pods bound on 5 nodes in gangs of 4 (backlog)" in done.stderr
