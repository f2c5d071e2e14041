"""import-volcano and export-volcano carry the cdp, resource-strategy-fit, sla and resourcequota
plugins and their arguments both ways; pdb (not implemented) stays refused, located, naming what
to use instead."""

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
