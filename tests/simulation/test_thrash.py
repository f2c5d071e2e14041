"""Evictions that buy something (issue 17): the livelock where reclaim (or preempt) evicted pods
for a gang and the victims' replacements took the room back, cycle after cycle, as tests.

The scenarios live in tests/simulation/thrash/ as `policydsl test` files; here they also run
through the simulator directly, on both kernels, with the eviction count checked against the
beneficiaries that bound, and once with reservations switched off, to show that the scenarios
need them and that the thrash check catches the livelock."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.pipeline import compile_text
from runtime.engine.cycle import Options
from runtime.engine import cycle
from runtime.simulation.engine import Limits, simulate
from runtime.simulation.scenarios import scenario_from_documents
from sim_helpers import run_cli

THRASH = Path(__file__).parent / "thrash"
CASES = {"reclaim": "reclaim-retake.policy", "preempt": "preempt-retake.policy"}


def _run(case: str, pure: bool):
    spec = yaml.safe_load((THRASH / f"{case}.policytest.yaml").read_text())
    text = (THRASH / CASES[case]).read_text()
    result = compile_text(text, CASES[case])
    assert result.plan is not None, result.diagnostics
    plan = result.plan
    snapshot = yaml.safe_load((THRASH / spec["snapshot"]).read_text())
    scenario = scenario_from_documents(plan, [(spec["snapshot"], snapshot)],
                                       [(f"{case}.policytest.yaml", doc) for doc in spec["workload"]])
    return simulate(plan, scenario, Limits(until=30 * 60.0), Options(pure_python=pure))


def test_policytest_files_pass(capsys):
    code, out, _ = run_cli(capsys, "test", THRASH)
    assert code == 0, out
    assert "2 passed, 0 failed" in out


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure-python"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_evictions_match_the_beneficiaries_that_bound(case, pure):
    result = _run(case, pure)
    audit = result.metrics.eviction_audit
    beneficiaries = [key for key in result.placements if key.startswith("data/")]
    # The gang of two binds; exactly its two members' worth of room was evicted, once each.
    assert len(beneficiaries) == 2
    assert sum(result.evicted.values()) == 2
    assert all(times == 1 for times in result.evicted.values())
    assert audit["bought"] == 2 and audit["wasted"] == 0
    assert audit["repeats"] == 0 and audit["exchanges"] == 0
    assert not any(f.kind == "thrashing" for f in result.findings)


def test_without_reservations_the_reclaim_livelock_returns_and_is_flagged(monkeypatch):
    # Reservations off: what the scheduler did before them. The victims' replacements, first in
    # queue order, retake the room; the gang never binds, and the audit says so. (Within one
    # queue the preemptor comes before its lower-priority victims in job order: no retake.)
    monkeypatch.setattr(cycle, "hold_reservations", lambda ssn, now: None)
    result = _run("reclaim", pure=False)
    audit = result.metrics.eviction_audit
    assert not any(key.startswith("data/") for key in result.placements)
    assert sum(result.evicted.values()) > 10
    assert audit["wasted"] > 0 and audit["repeats"] > 0
    assert any(f.kind == "thrashing" for f in result.findings)


def test_policy_test_fails_a_thrashing_run_unless_it_asserts_the_thrash(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cycle, "hold_reservations", lambda ssn, now: None)
    code, out, _ = run_cli(capsys, "test", THRASH / "reclaim.policytest.yaml")
    assert code == 1
    assert "thrashing:" in out and "assert wasted_evictions, repeated_evictions or traded_evictions" in out
    # A test that states the thrash is judged by its own assertions.
    spec = yaml.safe_load((THRASH / "reclaim.policytest.yaml").read_text())
    spec["policy"] = str(THRASH / spec["policy"])
    spec["snapshot"] = str(THRASH / spec["snapshot"])
    spec["tests"] = [{"name": "the livelock, stated", "expect": [{"wasted_evictions": "> 100"}]}]
    stated = tmp_path / "stated.policytest.yaml"
    stated.write_text(yaml.safe_dump(spec))
    code, out, _ = run_cli(capsys, "test", stated)
    assert code == 0, out
