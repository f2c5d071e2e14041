"""import-volcano and export-volcano carry the cdp, resource-strategy-fit, sla, resourcequota and
pdb plugins and their arguments both ways; the plugins not implemented stay refused, located."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano
from compiler.volcano.importer import import_volcano_text


def round_trip(config: str, tmp_path: Path) -> tuple[object, list[dict]]:
    result = import_volcano_text(config, "c.conf")
    assert [d.message for d in result.diagnostics] == [] and result.exit_code == 0
    compiled = compile_text(result.text)
    assert compiled.ok, [str(d) for d in compiled.errors]
    policy = tmp_path / "p.policy"
    policy.write_text(result.text)
    exported = export_volcano(str(policy))
    [config_out] = [d for d in yaml.safe_load_all(exported.text) if d and "tiers" in d]
    return compiled.plan, [p for t in config_out["tiers"] for p in t["plugins"]]


CDP = """actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: cdp
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
"""


def test_cdp_imports_and_exports_back(tmp_path: Path):
    plan, plugins = round_trip(CDP, tmp_path)
    assert plan.plugin("cdp") is not None
    assert {"name": "cdp"} in plugins


RSF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
  - name: resource-strategy-fit
    arguments:
      resourceStrategyFitWeight: 10
      resources:
        nvidia.com/gpu:
          type: MostAllocated
          weight: 2
        cpu:
          type: LeastAllocated
          weight: 1
        example.com/*:
          type: MostAllocated
          weight: 3
      sra:
        enable: true
        resources: nvidia.com/gpu
        weight: 10
        resourceWeight:
          nvidia.com/gpu: 1
      proportional:
        enable: false
"""


def test_resource_strategy_fit_imports_and_exports_back(tmp_path: Path):
    plan, plugins = round_trip(RSF, tmp_path)
    rsf = plan.plugin("resource-strategy-fit")
    assert rsf.weight == 10
    assert rsf.arguments["most_allocated"] == {"nvidia.com/gpu": 2, "example.com/*": 3}
    assert rsf.arguments["least_allocated"] == {"cpu": 1}
    assert (rsf.arguments["sra_resources"], rsf.arguments["sra_weight"]) == ({"nvidia.com/gpu": 1}, 10)
    [entry] = [p for p in plugins if p["name"] == "resource-strategy-fit"]
    volcano = yaml.safe_load(RSF)["tiers"][1]["plugins"][1]["arguments"]
    assert entry["arguments"]["resourceStrategyFitWeight"] == 10
    assert entry["arguments"]["resources"] == volcano["resources"]
    assert entry["arguments"]["sra"] == volcano["sra"]


def test_resource_strategy_fit_refusals_are_located():
    result = import_volcano_text(RSF.replace("example.com/*:", "example*.com/*:"), "c.conf")
    [diag] = [d for d in result.diagnostics if d.code == "PD607"]
    assert "a wildcard is one `*` at the end" in diag.message and diag.span.line > 0 and result.exit_code == 1


PROPORTIONAL = """      proportional:
        enable: true
        resources: nvidia.com/gpu, example.com/a
        resourceProportion:
          nvidia.com/gpu.cpu: 4
          nvidia.com/gpu.memory: -2
          example.com/a.memory: 0
          other.cpu: 3
"""


def test_proportional_imports_its_ratios_and_exports_them_back(tmp_path: Path):
    # A negative or unnamed ratio is 1, as Volcano's calculateProportionalResources reads it; a
    # ratio of a resource not in `resources` is ignored by Volcano: a warning naming it.
    config = RSF.replace("      proportional:\n        enable: false\n", PROPORTIONAL)
    result = import_volcano_text(config, "c.conf")
    assert result.exit_code == 0, [str(d) for d in result.diagnostics]
    [warning] = [d for d in result.diagnostics if d.code == "PD605"]
    assert "other.cpu" in warning.message and warning.span.line > 0
    compiled = compile_text(result.text, "p.policy")
    assert compiled.ok, [str(d) for d in compiled.errors]
    rsf = compiled.plan.plugin("resource-strategy-fit")
    assert rsf.arguments["proportional"] is True
    assert rsf.arguments["proportional_cpu"] == {"nvidia.com/gpu": 4, "example.com/a": 1}
    assert rsf.arguments["proportional_memory"] == {"nvidia.com/gpu": 1, "example.com/a": 0}
    plan, plugins = round_trip(config.replace("          other.cpu: 3\n", ""), tmp_path)
    [entry] = [p for p in plugins if p["name"] == "resource-strategy-fit"]
    assert entry["arguments"]["proportional"] == {
        "enable": True, "resources": "nvidia.com/gpu,example.com/a",
        "resourceProportion": {"nvidia.com/gpu.cpu": 4, "nvidia.com/gpu.memory": 1,
                               "example.com/a.cpu": 1, "example.com/a.memory": 0}}


def test_proportional_passes_lint():
    compiled = compile_text('policy "t" version 1\nactions [allocate]\ntier {\n  plugin predicates\n'
                            '  plugin resource-strategy-fit {\n    proportional = true\n'
                            '    proportional_cpu = { "nvidia.com/gpu": 8 }\n  }\n}\n')
    assert compiled.ok, [str(d) for d in compiled.errors]


SLA = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: sla
    arguments:
      sla-waiting-time: 1h2m3s
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
"""


def test_sla_imports_and_exports_back(tmp_path: Path):
    plan, plugins = round_trip(SLA, tmp_path)
    assert plan.plugin("sla").arguments["waiting_time"] == "1h2m3s"
    assert {"name": "sla", "arguments": {"sla-waiting-time": "1h2m3s"}} in plugins


def test_an_sla_waiting_time_that_is_not_a_duration_is_located():
    config = SLA.replace("1h2m3s", "an hour")
    result = import_volcano_text(config, "c.conf")
    [diag] = result.diagnostics
    assert result.exit_code == 1 and diag.code == "PD607" and "`an hour` is not what `waiting_time` takes" in diag.message
    assert (diag.span.line, diag.span.column) == (8, 25)


RESOURCEQUOTA = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: resourcequota
"""


def test_resourcequota_imports_and_exports_back(tmp_path: Path):
    plan, plugins = round_trip(RESOURCEQUOTA, tmp_path)
    assert plan.plugin("resourcequota") is not None and {"name": "resourcequota"} in plugins


TASK_TOPOLOGY = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: task-topology
    arguments:
      task-topology.weight: 10
  - name: proportion
"""


def test_task_topology_imports_and_exports_back(tmp_path: Path):
    plan, plugins = round_trip(TASK_TOPOLOGY, tmp_path)
    assert plan.plugin("task-topology").weight == 10
    assert {"name": "task-topology", "arguments": {"task-topology.weight": 10}} in plugins


def test_a_task_topology_weight_that_is_not_a_number_is_located():
    result = import_volcano_text(TASK_TOPOLOGY.replace("task-topology.weight: 10", "task-topology.weight: ten"),
                                 "c.conf")
    [diag] = result.diagnostics
    assert result.exit_code == 1 and diag.code == "PD607" and (diag.span.line, diag.span.column) == (10, 29)


def test_pdb_imports_and_exports_back(tmp_path: Path):
    plan, plugins = round_trip(RESOURCEQUOTA.replace("  - name: resourcequota", "  - name: pdb"), tmp_path)
    assert plan.plugin("pdb") is not None and {"name": "pdb"} in plugins


@pytest.mark.parametrize("plugin", ["magic"])
def test_plugins_not_implemented_stay_refused_located(plugin):
    config = RESOURCEQUOTA.replace("  - name: resourcequota", f"  - name: {plugin}")
    result = import_volcano_text(config, "c.conf")
    [diag] = result.diagnostics
    assert (diag.code, diag.span.line, result.exit_code) == ("PD604", 10, 1)
    assert f"unknown plugin `{plugin}`" in diag.message and diag.hint
