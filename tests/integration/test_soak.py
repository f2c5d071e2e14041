"""The chaos soak (bench/soak) in short: two minutes of jobs and every kind of fault on a dev
cluster of its own, and not one violation of the checker's invariants."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench.soak import report
from bench.soak.faults import KINDS
from bench.soak.run import Options, run

pytestmark = pytest.mark.integration


def test_a_short_soak_injects_every_fault_and_breaks_no_invariant(tmp_path: Path) -> None:
    outcome = run(Options(minutes=2.0, seed=20, fault_interval_s=8.0, rss_warmup_s=30.0, workdir=tmp_path),
                  progress=print)
    print(report.markdown(outcome, "tests/integration/test_soak.py"))
    assert outcome.checker_errors == (), outcome.checker_errors[0]
    violations = report.all_violations(outcome)
    assert violations == [], "\n".join(f"{v}\n  {v.example}" for v in violations[:5])
    injected = Counter(i.kind for i in outcome.injected)
    assert set(injected) == set(KINDS), f"not injected: {set(KINDS) - set(injected)} (errors {outcome.fault_errors})"
    # The checker looked at something: binds, nodes, gangs, queues, and pods that fitted.
    assert len(outcome.latencies) >= 50
    for invariant in ("node-capacity", "gang-min-member", "queue-capability", "node-match", "fit-bound-in-time",
                      "gpu-card-memory"):
        assert outcome.checks.get(invariant, 0) > 0, invariant
    assert outcome.reloads["reloaded"] >= 1 and outcome.reloads["rejected"] >= 1, outcome.reloads
