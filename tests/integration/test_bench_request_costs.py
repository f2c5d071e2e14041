"""The request-cost benchmark (python -m bench.e2e.request_costs) at a tiny scale: every kind of
request goes through on a fresh dev cluster and gets a processor-time figure. No figure is
asserted: they depend on the machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_tiny_request_costs_measure_every_kind(tmp_path: Path) -> None:
    results = tmp_path / "costs.json"
    done = subprocess.run([sys.executable, "-m", "bench.e2e.request_costs", "--count", "20", "--concurrency", "4",
                           "--json", str(results)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(results.read_text())["requests"]
    assert [r["request"].split(" (")[0] for r in rows] == [
        "POST podgroups", "POST pods", "POST pods/binding", "PUT podgroups", "PATCH podgroups", "PATCH podgroups"]
    assert all(r["count"] == 20 and r["control_plane_cpu_ms_each"] is not None for r in rows), rows


def test_bad_counts_are_refused_with_a_message() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.e2e.request_costs", "--count", "0"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--count and --concurrency must be at least 1" in done.stderr
