"""A small instance of bench/load.py (the full one is 1,000 nodes and 10,000 pods, run by
hand): every pod bound, every gang whole, no bind errors. No timings are asserted."""

from __future__ import annotations

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
