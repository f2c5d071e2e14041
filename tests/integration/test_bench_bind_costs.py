"""The bind-cost benchmark (python -m bench.e2e.bind_costs) at a tiny scale: every pod of every
batch size is bound through the connector's Binder on a fresh dev cluster and gets a figure. No
figure is asserted: they depend on the machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_tiny_bind_costs_bind_every_pod(tmp_path: Path) -> None:
    results = tmp_path / "binds.json"
    done = subprocess.run([sys.executable, "-m", "bench.e2e.bind_costs", "--count", "12", "--batches", "1,5",
                           "--json", str(results)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(results.read_text())["binds"]
    assert [(r["batch"], r["bound"]) for r in rows] == [(1, 12), (5, 12)]
    assert all(r["client_cpu_us_per_bind"] > 0 for r in rows), rows


@pytest.mark.parametrize("args, message", [
    (["--count", "0"], "must be at least 1"),
    (["--batches", "1,x"], "not a comma-separated list"),
])
def test_bad_arguments_are_refused_with_a_message(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "bench.e2e.bind_costs", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr
