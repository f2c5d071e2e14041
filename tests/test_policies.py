"""The example policies in policies/: each compiles with no warning, is in fmt layout, and
declares what its comments say it does."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.pipeline import compile_file, compile_text
from compiler.volcano.exporter import export_volcano
from compiler.volcano.importer import import_volcano, import_volcano_text
from policydsl.cli import main
from policydsl.diagnostics import Severity

ROOT = Path(__file__).parent.parent
POLICIES = sorted((ROOT / "policies").glob("*.policy"))
VOLCANO_CHART_CONFIG = ROOT / "tests" / "fixtures" / "volcano" / "default.conf"
GI = 2**30


def compiled(name: str):
    result = compile_file(ROOT / "policies" / name)
    assert result.ok, [d.message for d in result.errors]
    return result.plan


def test_the_four_examples_exist():
    assert {p.name for p in POLICIES} >= {"volcano-default.policy", "multi-tenant.policy", "gpu-sharing.policy",
                                          "colocation.policy"}


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_compiles_without_warnings(path):
    result = compile_file(path)
    findings = [f"{d.span}: {d.code} {d.message}" for d in result.diagnostics if d.severity >= Severity.WARNING]
    assert findings == []
    assert result.plan is not None


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_is_in_fmt_layout(path):
    formatter = pytest.importorskip("policydsl.formatter")
    text = path.read_text()
    assert formatter.format_text(text, str(path)).text == text


def _meaning(plan) -> dict:
    """The plan without its name and tier labels (labels are documentation)."""
    data = plan.to_dict()
    data.pop("name")
    for tier in data["tiers"]:
        tier.pop("label")
    return data


def test_volcano_default_means_what_volcanos_chart_config_means():
    imported = import_volcano(str(VOLCANO_CHART_CONFIG))
    assert imported.exit_code == 0
    assert _meaning(compiled("volcano-default.policy")) == _meaning(compile_text(imported.text).plan)


def test_volcano_default_exports_to_volcanos_chart_config():
    exported = export_volcano(str(ROOT / "policies" / "volcano-default.policy"))
    assert exported.exit_code == 0
    assert yaml.safe_load(exported.text) == yaml.safe_load(VOLCANO_CHART_CONFIG.read_text())


def test_multi_tenant_nests_teams_under_two_tenants():
    plan = compiled("multi-tenant.policy")
    assert plan.plugin("capacity").flags["hierarchy"] is True
    assert "reclaim" in plan.actions
    children = {q.name: q.parent for q in plan.queues}
    assert {n for n, p in children.items() if p == "online"} == {"search", "recommendation"}
    assert {n for n, p in children.items() if p == "offline"} == {"nlp", "vision", "research"}
    online, offline = plan.queue("online"), plan.queue("offline")
    assert online.reclaimable is False and online.priority > offline.priority
    # The tenants' guarantees and deserved shares fit the cluster they describe.
    assert online.guarantee["nvidia.com/gpu"] == sum(plan.queue(n).guarantee["nvidia.com/gpu"]
                                                     for n in ("search", "recommendation"))
    assert online.deserved["nvidia.com/gpu"] + offline.deserved["nvidia.com/gpu"] == 64
    assert plan.queue("nlp").borrow_limit == {"nvidia.com/gpu": 16}
    assert plan.queue("research").borrow is False
    assert plan.queue("default").capability["nvidia.com/gpu"] == 0


def test_gpu_sharing_slices_divide_both_card_sizes():
    plan = compiled("gpu-sharing.policy")
    cards = {d.resource: d for d in plan.devices}
    assert {d.card_memory for d in cards.values()} == {40 * GI, 80 * GI}
    for device in cards.values():
        slices = device.card_memory // device.slice
        assert device.sharing == "memory" and device.card_memory % device.slice == 0
        assert device.compute_percent * slices <= 100
        assert device.max_tasks_per_card <= slices
        assert device.topology != "none" and device.models
    assert plan.plugin("deviceshare").weight > plan.plugin("binpack").weight


def test_colocation_evicts_by_priority_within_and_across_queues():
    plan = compiled("colocation.policy")
    assert plan.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")
    first_tier_victims = [p.name for p in plan.tiers_at("preemptable")[0]]
    assert first_tier_victims == ["priority", "gang", "conformance"]
    online, offline = plan.queue("online"), plan.queue("offline")
    assert online.reclaimable is False and offline.reclaimable is True
    assert online.priority > offline.priority and online.weight > offline.weight
    assert plan.plugin("overcommit").arguments["factor"] == 1.0


@pytest.mark.parametrize("name", ["volcano-default.policy", "colocation.policy"])
def test_policies_volcano_can_express_survive_export_then_import(name):
    """Policy -> Volcano config and Queues -> policy gives the same plan."""
    exported = export_volcano(str(ROOT / "policies" / name), queues=True)
    assert exported.exit_code == 0 and not [d for d in exported.diagnostics if d.code == "PD610"]
    config, *queues = exported.text.split("---\n")
    again = import_volcano_text(config, "volcano-scheduler.conf", "---\n".join(queues) if queues else None)
    assert again.exit_code == 0
    assert _meaning(compile_text(again.text).plan) == _meaning(compiled(name))


@pytest.mark.parametrize("name, words", [("multi-tenant.policy", ["`nlp`: Volcano has no borrow limit",
                                                                  "`research`: Volcano has no switch to stop"]),
                                         ("gpu-sharing.policy", ["`nvidia.com/gpu-40gb` have no Volcano",
                                                                 "`nvidia.com/gpu-80gb` have no Volcano"])])
def test_export_names_what_volcano_cannot_run(name, words):
    exported = export_volcano(str(ROOT / "policies" / name), queues=True)
    assert exported.exit_code == 0
    messages = " ".join(d.message for d in exported.diagnostics if d.code == "PD610")
    assert all(word in messages for word in words)


POLICY_TESTS = sorted((ROOT / "policies" / "tests").glob("*.policytest.yaml"))


@pytest.mark.parametrize("path", POLICY_TESTS, ids=[p.name for p in POLICY_TESTS])
def test_policy_tests_pass(path, capsys):
    """Each example's policy test (what its comments claim, checked on its cluster) passes."""
    code = main(["test", str(path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert " FAILED" not in out and "PASSED" in out


def test_every_example_policy_has_a_policy_test():
    tested = {yaml.safe_load(p.read_text())["policy"].rsplit("/", 1)[-1] for p in POLICY_TESTS}
    assert {p.name for p in POLICIES} <= tested
