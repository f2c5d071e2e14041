"""import-volcano and export-volcano carry the usage plugin with its `metrics` section, and the
extender plugin; what they cannot carry is refused, located (issue 31)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano
from compiler.volcano.importer import import_volcano_text

USAGE = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: usage
    enablePredicate: false
    arguments:
      usage.weight: 5
      cpu.weight: 2
      memory.weight: 8
      thresholds:
        cpu: 80
        mem: 70
- plugins:
  - name: predicates
  - name: proportion
metrics:
  type: prometheus
  address: http://192.168.0.10:9090
  interval: 30s
  tls.insecureSkipVerify: "true"
"""

EXTENDER = """actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: extender
    arguments:
      extender.urlPrefix: http://127.0.0.1:8713
      extender.httpTimeout: 100ms
      extender.predicateVerb: predicate
      extender.prioritizeVerb: prioritize
      extender.preemptableVerb: preemptable
      extender.jobEnqueueableVerb: jobEnqueueable
      extender.ignorable: true
      extender.managedResources:
      - nvidia.com/gpu
      - nvidia.com/gpumem
  - name: proportion
"""


def round_trip(config: str, tmp_path: Path) -> tuple[object, dict]:
    result = import_volcano_text(config, "c.conf")
    assert result.exit_code == 0, [d.message for d in result.diagnostics]
    compiled = compile_text(result.text, "p.policy")
    assert compiled.ok, [d.message for d in compiled.errors]
    path = tmp_path / "p.policy"
    path.write_text(result.text)
    exported = export_volcano(str(path))
    assert exported.exit_code == 0, [d.message for d in exported.diagnostics]
    return compiled.plan, yaml.safe_load(exported.text)


def plugin_entry(config: dict, name: str) -> dict:
    return next(p for tier in config["tiers"] for p in tier["plugins"] if p["name"] == name)


def test_usage_and_its_metrics_section_import_and_export_back(tmp_path: Path):
    plan, back = round_trip(USAGE, tmp_path)
    args = plan.plugin("usage").arguments
    assert (args["cpu_weight"], args["memory_weight"], args["cpu_threshold"], args["memory_threshold"]) == (2, 8, 80, 70)
    assert (args["metrics_type"], args["metrics_address"], args["metrics_insecure_skip_verify"]) == \
        ("prometheus", "http://192.168.0.10:9090", True)
    assert plan.plugin("usage").weight == 5 and plan.plugin("usage").flags["predicate"] is False
    given = yaml.safe_load(USAGE)
    assert plugin_entry(back, "usage") == plugin_entry(given, "usage")
    assert back["metrics"] == given["metrics"]


def test_a_usage_policy_without_a_source_is_linted():
    compiled = compile_text('policy "t" version 1\nactions [allocate]\ntier {\n  plugin predicates\n'
                            '  plugin usage\n}\n', "t.policy")
    assert compiled.ok and any(d.code == "PD425" for d in compiled.diagnostics)


@pytest.mark.parametrize("change, code, line, text", [
    (("cpu: 80", "cpu: 80.5"), "PD607", 13, "expected a whole percent"),
    (("  tls.insecureSkipVerify: \"true\"", "  tls:\n    insecureSkipVerify: \"true\""), "PD607", 22,
     "write `tls.insecureSkipVerify` instead"),
    (("  interval: 30s", "  interval: soon"), "PD607", 21, "not what `metrics_interval` takes"),
    (("  interval: 30s", "  elasticsearch.password: hunter2"), "PD607", 21, "a policy holds no credentials"),
], ids=["float threshold", "nested tls", "bad interval", "credentials"])
def test_what_usage_cannot_carry_is_located(change, code, line, text):
    result = import_volcano_text(USAGE.replace(*change), "c.conf")
    assert result.exit_code == 1
    [diag] = [d for d in result.diagnostics if d.code == code]
    assert diag.span.line == line and text in diag.message


def test_prometheus_adaptor_imports_without_an_address_and_exports_back():
    # Volcano reads the custom metrics API with the scheduler's own API server config: no address.
    config = USAGE.replace("type: prometheus", "type: prometheus_adaptor").replace(
        "  address: http://192.168.0.10:9090\n", "")
    result = import_volcano_text(config, "c.conf")
    assert result.exit_code == 0, [str(d) for d in result.diagnostics]
    compiled = compile_text(result.text, "p.policy")
    assert compiled.ok and not any(d.code == "PD425" for d in compiled.diagnostics)
    assert compiled.plan.plugin("usage").arguments["metrics_type"] == "prometheus_adaptor"


def test_metrics_without_the_usage_plugin_is_a_warning():
    config = USAGE.replace("""  - name: usage
    enablePredicate: false
    arguments:
      usage.weight: 5
      cpu.weight: 2
      memory.weight: 8
      thresholds:
        cpu: 80
        mem: 70
""", "")
    result = import_volcano_text(config, "c.conf")
    assert result.exit_code == 0
    [diag] = result.diagnostics
    assert diag.code == "PD609" and "feeds only the usage plugin" in diag.message


def test_extender_imports_and_exports_back(tmp_path: Path):
    plan, back = round_trip(EXTENDER, tmp_path)
    args = plan.plugin("extender").arguments
    assert args["url_prefix"] == "http://127.0.0.1:8713" and args["http_timeout"] == "100ms"
    assert args["managed_resources"] == ["nvidia.com/gpu", "nvidia.com/gpumem"] and args["ignorable"] is True
    assert plugin_entry(back, "extender") == plugin_entry(yaml.safe_load(EXTENDER), "extender")


@pytest.mark.parametrize("key", ["extender.jobReadyVerb", "extender.allocateFuncVerb", "extender.deallocateFuncVerb"])
def test_extender_verbs_not_evaluated_are_refused_located(key):
    config = EXTENDER.replace("      extender.ignorable: true\n", f"      extender.ignorable: true\n      {key}: x\n")
    result = import_volcano_text(config, "c.conf")
    [diag] = result.diagnostics
    assert result.exit_code == 1 and diag.code == "PD614" and key in diag.message and diag.span.line == 17


def test_an_extender_without_url_is_a_lint_error():
    compiled = compile_text('policy "t" version 1\nactions [allocate]\ntier {\n  plugin predicates\n'
                            '  plugin extender {\n    predicate_verb = "predicate"\n  }\n}\n', "t.policy")
    assert not compiled.ok and any(d.code == "PD426" for d in compiled.errors)


def test_an_http_timeout_that_is_not_a_duration_is_located():
    result = import_volcano_text(EXTENDER.replace("httpTimeout: 100ms", "httpTimeout: fast"), "c.conf")
    [diag] = result.diagnostics
    assert result.exit_code == 1 and diag.code == "PD607" and "`fast` is not what `http_timeout` takes" in diag.message
    assert diag.span.line == 11
