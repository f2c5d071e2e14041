"""The benchmark scripts that need no cluster, run as a person runs them, at a tiny scale.

A benchmark nothing runs breaks unseen (bench/core.py crashed for a day on an API change of
the settled ledger). Only completion and the scripts' own cross-checks are asserted (compiled
and pure-Python kernels decide alike; listed, folded and counted settled pods decide alike;
no cycle runs under two policies; bench/policy_size.py's rows all there and sane; hard-topology
gangs within their tier), never a timing:
the figures depend on the machine.
bench/load.py and bench/e2e need the dev cluster: tests/integration/test_connector_load.py and
tests/integration/test_bench_e2e.py run them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_script(script: str, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], Any]:
    """Run bench/<script> with --json; the completed process and the JSON of its last line."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / script), *args, "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done, json.loads(done.stdout.strip().splitlines()[-1])


def test_core_runs_every_section_and_its_paths_decide_alike() -> None:
    # The script exits 1 when the pure-Python kernels or the settled variants decide otherwise.
    _, result = run_script("core.py", "--quick", "--repeat", "1")
    assert result["placements"] == result["pods"] > 0  # the quick cluster has room for every pod
    # Section 12 is the full run's last: its own checker's verdict and every pending pod placed.
    assert result["scale"]["rules_checked"] is True and result["scale"]["placements"] == result["scale"]["pending"]
    assert result["python"]["placements_per_s"] > 0
    assert [row["placements"] for row in result["scaling"]] == [row["pods"] for row in result["scaling"]]
    assert result["snapshot_memory"]["array_bytes"] > 0
    settled = result["settled"]
    assert settled["identical_decisions"] is True
    placed = {settled[name]["placements"] for name in ("listed", "folded", "counted")}
    assert placed == {settled["waiting"]}
    storage = result["storage"]
    assert storage["volumes_checked"] is True and storage["identical_decisions"] is True
    assert storage["claims"] == storage["pods"] // 10 and storage["static_volumes"] > 0 and storage["provisioned"] > 0
    # Section 8 (network topology): the script exits 1 unless every hard gang is placed within one
    # tier-1 HyperNode (its own check, from the HyperNodes' member lists) and both paths decide alike.
    topology = result["topology"]
    assert topology["with"]["placements"] == topology["without"]["placements"] == topology["pods"]
    assert topology["hard_gangs"] == topology["hard_gangs_placed"] == topology["hard_gangs_within_tier1"] > 0
    assert topology["share_within_tier1"] == 1.0 and topology["identical_decisions"] is True
    assert sorted(topology["hypernodes_by_tier"]) == ["1", "2", "3"]
    # Section 9 (DRA): the script exits 1 unless its own check finds every pod placed with a device
    # of its node that no other claim holds, and both paths decide alike.
    dra = result["dra"]
    assert dra["with"]["placements"] == dra["pods"] == dra["claims"] > 0
    assert dra["allocations_checked"] is True and dra["identical_decisions"] is True
    assert dra["cel"]["evaluations"] > 0 and dra["cel"]["per_claim_us"] > 0
    # Section 10 (HAMi vGPU): the script exits 1 unless every vGPU pod is placed within its card's
    # memory, cores and split count (its own count from the pods' requests) and both paths decide alike.
    vgpu = result["vgpu"]
    assert vgpu["with"]["placements"] == vgpu["pods"] > 0 and vgpu["within_cards"] is True
    assert vgpu["identical_decisions"] is True and vgpu["peak_card_memory_mib"] <= 40960
    assert 0 < vgpu["without"]["placements"] <= vgpu["cards"]
    # Section 11 (numa-aware, nodegroup, task-topology): the script exits 1 unless its own check finds
    # every pod placed with its CPUs in one NUMA node, none twice, in its queue's group, paths alike.
    numa = result["numa"]
    assert numa["with"]["placements"] == numa["without"]["placements"] == numa["pods"] > 0
    assert numa["numa_checked"] is True and numa["identical_decisions"] is True and numa["cpus_given_twice"] == 0


def test_core_numa_section_runs_alone() -> None:
    _, result = run_script("core.py", "--sections", "11", "--quick", "--repeat", "1")
    numa = result["numa"]
    assert numa["numa_checked"] is True and numa["with"]["placements"] == numa["pods"] == 1600


def test_core_dra_section_runs_alone() -> None:
    _, result = run_script("core.py", "--sections", "9", "--quick", "--repeat", "1")
    assert result["dra"]["allocations_checked"] is True and result["dra"]["with"]["placements"] == 800


def test_core_scale_section_runs_alone_and_keeps_every_rule(tmp_path: Path) -> None:
    # Section 12 at a tenth (1,000 nodes, 10,000 pods): the script exits 1 unless its own checker finds
    # every rule kept, every pending pod placed and both paths deciding alike.
    chart = tmp_path / "growth.md"
    _, result = run_script("core.py", "--sections", "12", "--quick", "--repeat", "1", "--markdown", str(chart))
    scale = result["scale"]
    # --markdown: the growth rows and the chart's line are this run's figures, not other ones.
    text = chart.read_text(encoding="utf-8")
    cycles = [round(row["cycle_s"] * 1000, 1) for row in scale["growth"]]
    assert f"    line [{', '.join(str(c) for c in cycles)}]" in text.splitlines()
    assert "x-axis \"nodes (10 pods a node)\" [100, 250, 500, 1000]" in text
    assert [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| ") and "ms" in line] == \
        ["| 100", "| 250", "| 500", "| 1,000"]
    assert scale["rules_checked"] is True and not any(scale["errors"].values())
    assert scale["placements"] == scale["pending"] == 1000 and scale["pods"] == 10000
    assert scale["identical_decisions"] is True and scale["claims"] > 0 and scale["gangs_pending"] > 0
    assert [row["nodes"] for row in scale["growth"]] == [100, 250, 500, 1000]
    assert scale["memory"]["snapshot_bytes"] > 0 and scale["memory"]["session_open_bytes"] > 0
    assert scale["without_rules"]["cycle_s"] > 0 and scale["rules_cost"] > 0
    quality = scale["quality"]
    assert quality["kube_percentage"] == 42 and quality["kube_nodes_to_find"] == 420
    for name in ("ours", "stand_in_all_nodes", "stand_in_42pct"):
        assert quality[name]["rules_checked"] is True and quality[name]["placed"] == 1000
    # Scoring every feasible node, the stand-in never scores below the best; sampling may.
    assert quality["stand_in_all_nodes"]["regret"]["share_below_best"] == 0.0
    assert quality["stand_in_42pct"]["regret"]["mean_points"] >= 0.0


@pytest.mark.parametrize("only", [["--sections", "6,7"], ["--vgpu-only"]])
def test_core_refuses_markdown_without_section_12(only: list[str]) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "core.py"), *only, "--markdown", "x.md"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--markdown writes section 12's growth" in done.stderr
    assert "Traceback" not in done.stderr and not (REPO / "x.md").exists()


def test_core_refuses_sections_that_are_no_numbers() -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "core.py"), "--sections", "6,x"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--sections takes section numbers" in done.stderr
    assert "Traceback" not in done.stderr


def test_alternate_times_two_checkouts_and_compares_their_decisions() -> None:
    # This checkout against itself, section 12 at a tenth: one round of two processes, both
    # deciding alike (the script exits 1 otherwise).
    _, result = run_script("alternate.py", "--base", str(REPO), "--section", "12", "--quick", "--rounds", "1",
                           "--cycles", "1", timeout=300)
    assert result["identical_decisions"] is True
    assert [row["tree"] for row in result["rounds"]] == ["base", "this"]
    assert all(len(row["cpu_ms"]) == 1 and row["min_ms"] > 0 for row in result["rounds"])
    assert result["ratio_of_medians"] > 0


def test_alternate_counts_instructions_the_same_for_the_same_tree() -> None:
    # Under callgrind (bash .ci/install-valgrind.sh), this checkout against itself at a tenth of
    # section 12: the count is of the cycle alone, under one string hash seed, so the two runs
    # agree to within a few hundred instructions of some hundred million (a change's effect shows
    # in the count, not in noise of a few in a thousand as with a random seed).
    _, result = run_script("alternate.py", "--base", str(REPO), "--section", "12", "--quick", "--instructions",
                           timeout=600)
    counts = [row["instructions"] for row in result["instructions"].values()]
    assert result["identical_decisions"] is True and min(counts) > 10_000_000
    assert max(counts) - min(counts) < 1_000


def test_alternate_refuses_a_base_that_is_no_checkout(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "alternate.py"), "--base", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not a checkout" in done.stderr and "Traceback" not in done.stderr


def test_core_scale_checker_finds_broken_rules() -> None:
    # The section's own checker must see a placement that breaks a rule, or its "rules checked" says nothing.
    spec = importlib.util.spec_from_file_location("bench_core", REPO / "bench" / "core.py")
    core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core)
    state = core.make_scale_cluster(100)
    pending = [p for p in state.pods.values() if not p.node_name]
    anti = next(p for p in pending if p.rules and p.rules.anti_affinity)
    mate = next(p for p in state.pods.values() if p.node_name and p.labels.get("app") == anti.labels["app"])
    plain = next(p for p in pending if not (p.rules or p.tolerations or p.node_selector or p.volumes or p.group))
    gang = next(p for p in pending if p.group)
    gpu_node = next(n for n, node in state.nodes.items() if node.labels["pool"] == "gpu")
    general = next(n for n, node in state.nodes.items() if node.labels["pool"] == "general")
    broken = core.Decisions(bindings=[core.Binding(anti.key, mate.node_name), core.Binding(plain.key, gpu_node),
                                      core.Binding(gang.key, general)])
    errors = core.scale_checked(state, broken, 100)["errors"]
    assert errors["anti_affinity"] >= 1 and errors["taints"] == 1 and errors["gangs"] == 1
    assert errors["selector"] == 1     # the gang's pod asks for pool=gpu


def test_core_vgpu_section_runs_alone() -> None:
    _, result = run_script("core.py", "--vgpu-only", "--quick", "--repeat", "1")
    assert set(result) == {"load_average_1m", "cpus", "vgpu"} and result["vgpu"]["within_cards"] is True


@pytest.mark.parametrize("write", ["configmap", "replace", "inplace"])
def test_reload_sees_every_edit_go_live_and_no_cycle_under_two_policies(write: str) -> None:
    _, result = run_script("reload.py", "--reloads", "3", "--write", write, "--warmup", "300ms", "--gap", "100ms",
                           "--nodes", "10", "--gangs", "2")
    assert result["reloads"] == result["observed"] == 3
    assert result["failed_reloads"] == 0
    assert result["cycles"]["mixed"] == 0 and result["cycles"]["errors"] == 0
    assert result["load"]["pods_bound"] > 0
    assert set(result["latency_ms"]["event_to_active"]) == {"p50", "p99", "max", "mean"}


def test_reload_without_json_prints_its_report() -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "reload.py"), "--reloads", "1", "--warmup", "300ms",
                           "--gap", "100ms", "--nodes", "4", "--gangs", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})  # rich wraps at 80 columns without a terminal
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1/1 reloads observed" in done.stdout and "mixed 0" in done.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--pods", "10", "--gang", "3"], "--pods (10) must be a multiple of --gang (3)"),
    (["--nodes", "0"], "--nodes must be at least 1, got 0"),
    (["--gang", "-2"], "--gang must be at least 1, got -2"),
])
def test_load_refuses_sizes_it_cannot_run_before_starting_a_cluster(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "load.py"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr and "starting a dev cluster" not in done.stdout


def test_the_dashboard_load_keeps_fetching_the_dashboard_and_reports() -> None:
    """bench/dashboard_load.py (python -m bench.e2e --dashboard-load N): against a scheduler's
    metrics server on loopback, every fetch answered; never aimed elsewhere."""
    from bench.dashboard_load import DashboardLoad, main
    from runtime.service.server import MetricsServer
    from runtime.kube.metrics import Metrics
    from runtime.service.views import LiveView
    from runtime.service.webapi import routes

    server = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (True, "ok"), healthy=lambda: (True, "ok"),
                           routes=routes(LiveView()))
    server.start()
    try:
        load = DashboardLoad(f"http://{server.address}", rate=20, seconds=5).start()
        import time

        time.sleep(0.5)
        report = load.stop().to_dict()
    finally:
        server.stop()
    # /ui answers 200 before any cycle; /api/v1/queues 503 (no cycle yet), counted as an error.
    assert report["fetches"] >= 5 and 0 < report["errors"] < report["fetches"]
    assert report["p50_ms"] is not None
    with pytest.raises(ValueError, match="loopback"):
        DashboardLoad("http://10.0.0.1:8080", rate=1)
    assert main(["http://example.com:80", "--seconds", "1"]) == 2


def test_views_cost_runs_both_ways() -> None:
    _, result = run_script("views_cost.py", "--nodes", "4", "--gangs", "10", "--size", "4", "--repeat", "1")
    assert result["placed"] == 32 and result["waiting"] == 8     # 4 nodes of 8 cpu: 8 of the 10 gangs of 4 x 1 cpu
    assert set(result["cycle_cpu_ms"]) == {"views_off", "views_on"} and result["dashboard_render_ms"] >= 0


def test_policy_size_measures_every_shape_and_stage_and_memory_follows_the_size() -> None:
    # Completion and sane figures only: how much memory per byte is tests/test_policy_limits.py's to check.
    done, result = run_script("policy_size.py", "--sizes", "30k")
    rows = result["rows"]
    assert {(r["shape"], r["stage"]) for r in rows} == {(s, t) for s in ("queues", "devices", "consts")
                                                         for t in ("compile", "fmt")}
    assert all(r["ok"] and not r["errors"] for r in rows), [r for r in rows if not r["ok"]]
    for row in rows:
        assert row["bytes"] >= 30_000 and row["seconds"] > 0
        assert 0 < row["base_bytes"] <= row["peak_bytes"] < 2**30
    # The printed table has a row per measurement.
    assert sum(line.split()[:1] in (["queues"], ["devices"], ["consts"]) for line in done.stdout.splitlines()) == 6


def test_the_topology_checker_reads_members_as_volcano_documents_them() -> None:
    """bench/e2e/topology_check.py, the independent check of workload (e) and of
    tests/integration/test_vcjob_topology.py: exact, regex (unanchored, as Go's MatchString) and
    label members, child HyperNodes, the tightest HyperNode holding a gang, and a spread gang."""
    from bench.e2e import topology_check as tc

    def hn(name: str, tier: int, *members: tuple[str, dict]) -> dict:
        return {"metadata": {"name": name}, "spec": {"tier": tier, "members": [
            {"type": kind, "selector": selector} for kind, selector in members]}}

    nodes = [{"metadata": {"name": f"n{i}", "labels": {"rack": "r1" if i >= 4 else "r0"}}} for i in range(6)]
    tree = tc.tree_of([
        hn("s0", 1, ("Node", {"exactMatch": {"name": "n0"}}), ("Node", {"exactMatch": {"name": "n1"}})),
        hn("s1", 1, ("Node", {"regexMatch": {"pattern": "[23]"}})),                 # n2, n3: unanchored
        hn("s2", 1, ("Node", {"labelMatch": {"matchLabels": {"rack": "r1"}}})),     # n4, n5
        hn("s3", 1, ("Node", {"labelMatch": {}})),                                  # selects nothing
        hn("spine", 2, *(("HyperNode", {"exactMatch": {"name": s}}) for s in ("s0", "s1", "s2", "s3"))),
    ], nodes)
    assert tree.leaves["s1"] == {"n2", "n3"} and tree.leaves["s2"] == {"n4", "n5"} and not tree.leaves["s3"]
    assert tree.leaves["spine"] == {f"n{i}" for i in range(6)}
    assert tree.tightest({"n0", "n1"}) == ("s0", 1) and tree.tightest({"n1", "n2"}) == ("spine", 2)

    def pod(name: str, group: str, node: str | None) -> dict:
        return {"metadata": {"name": name, "annotations": {tc.GROUP_ANNOTATION: group}}, "spec": {"nodeName": node}}

    spans = tc.gang_spans([pod("a0", "a", "n2"), pod("a1", "a", "n3"), pod("b0", "b", "n0"), pod("b1", "b", "n5"),
                           pod("c0", "c", None)], tree)
    assert [(s.group, s.bound, s.hypernode, s.tier) for s in spans] == [
        ("a", 2, "s1", 1), ("b", 2, "spine", 2), ("c", 0, None, None)]
    share = tc.tier_share(spans, 1)
    assert (share.gangs, share.within, share.complete) == (2, 1, 2)      # c has no pod bound: not counted
    assert share.examples == ("b: 2 bound pods, tightest HyperNode spine (tier 2)",)
