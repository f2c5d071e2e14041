"""import-volcano and export-volcano carry tdm, rescheduling and the shuffle action both ways;
what Volcano would mis-read (a malformed window, a strategy it does not implement, a threshold it
does not compare) is refused at its position, naming the alternative."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano
from compiler.volcano.importer import import_volcano_text


def round_trip(config: str, tmp_path: Path, warned: tuple[str, ...] = ()) -> tuple[object, dict]:
    result = import_volcano_text(config, "c.conf")
    assert [d.code for d in result.diagnostics] == list(warned) and result.exit_code == 0
    compiled = compile_text(result.text)
    assert compiled.ok, [str(d) for d in compiled.errors]
    policy = tmp_path / "p.policy"
    policy.write_text(result.text)
    [config_out] = [d for d in yaml.safe_load_all(export_volcano(str(policy)).text) if d and "tiers" in d]
    return compiled.plan, config_out


TDM = """actions: "enqueue, allocate, preempt, backfill, shuffle"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: tdm
    arguments:
      tdm.revocable-zone.rz1: "10:00-21:00"
      tdm.revocable-zone.rz2: 22:00-06:00
      tdm.evict.period: 1m
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
"""


def test_tdm_imports_and_exports_back(tmp_path: Path):
    plan, config = round_trip(TDM, tmp_path)
    assert plan.actions[-1] == "shuffle"
    tdm = plan.plugin("tdm")
    assert tdm.arguments["revocable_zones"] == {"rz1": "10:00-21:00", "rz2": "22:00-06:00"}
    assert tdm.arguments["evict_period"] == "1m"
    assert config["actions"] == "enqueue, allocate, preempt, backfill, shuffle"
    assert {"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": "10:00-21:00", "tdm.revocable-zone.rz2": "22:00-06:00",
                                         "tdm.evict.period": "1m"}} in config["tiers"][0]["plugins"]


@pytest.mark.parametrize("old, new, where, text", [
    ('"10:00-21:00"', '"10:00 to 21:00"', (8, 31), "is not a window HH:MM-HH:MM"),
    ("tdm.evict.period: 1m", "tdm.evict.period: soon", (10, 25), "`soon` is not what `evict_period` takes"),
], ids=["window", "period"])
def test_tdm_refusals_are_located(old, new, where, text):
    result = import_volcano_text(TDM.replace(old, new), "c.conf")
    [diag] = result.diagnostics
    assert result.exit_code == 1 and diag.code == "PD607" and text in diag.message
    assert (diag.span.line, diag.span.column) == where


RESCHEDULING = """actions: "enqueue, allocate, backfill, shuffle"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: rescheduling
    arguments:
      interval: 10m
      strategies:
      - name: offlineOnly
      - name: lowNodeUtilization
        params:
          thresholds:
            cpu: 20
            memory: 30
          targetThresholds:
            cpu: 60
            pods: 50
      queueSelector: [batch]
      labelSelector:
        business: offline
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_rescheduling_imports_and_exports_back(tmp_path: Path):
    plan, config = round_trip(RESCHEDULING, tmp_path, warned=("PD615",))
    args = plan.plugin("rescheduling").arguments
    assert args["strategies"] == ["offlineOnly", "lowNodeUtilization"]
    assert args["thresholds"] == {"cpu": 20, "memory": 30} and args["target_thresholds"] == {"cpu": 60, "pods": 50}
    assert args["queues"] == ["batch"] and args["labels"] == {"business": "offline"}
    [exported] = [p for p in config["tiers"][0]["plugins"] if p["name"] == "rescheduling"]
    assert exported["arguments"] == {
        "interval": "10m",
        "strategies": [{"name": "offlineOnly"},
                       {"name": "lowNodeUtilization", "params": {"thresholds": {"cpu": 20, "memory": 30},
                                                                 "targetThresholds": {"cpu": 60, "pods": 50}}}],
        "queueSelector": ["batch"], "labelSelector": {"business": "offline"}}


@pytest.mark.parametrize("old, new, where, text", [
    ("- name: offlineOnly", "- name: moreReplicasFirst", (10, 15), "in Volcano's design doc only"),
    ("- name: offlineOnly", "- name: lowNodeUtilisation", (10, 15), "has no strategy `lowNodeUtilisation`"),
    ("            memory: 30", "            pod: 30", (15, 13), "no utilization of `pod` is measured"),
    ("            cpu: 60", "            cpu: 160", (17, 18), "is not a percent between 0 and 100"),
], ids=["design-doc strategy", "misspelled strategy", "pod threshold", "above 100"])
def test_rescheduling_refusals_are_located(old, new, where, text):
    result = import_volcano_text(RESCHEDULING.replace(old, new), "c.conf")
    [diag] = result.errors
    assert result.exit_code == 1 and diag.code == "PD607" and text in diag.message, diag
    assert (diag.span.line, diag.span.column) == where
    assert diag.hint


def test_shuffle_without_a_victim_plugin_is_refused():
    config = RESCHEDULING.replace("  - name: rescheduling\n", "  - name: conformance\n").split("    arguments:")[0] + \
        "- plugins:\n  - name: predicates\n"
    result = import_volcano_text(config, "c.conf")
    assert result.exit_code == 1 and any(d.code == "PD612" and "PD304" in d.message for d in result.diagnostics)


def test_a_max_num_key_gets_the_budget_hint_not_a_look_alike():
    config = TDM.replace("      tdm.evict.period: 1m\n", "      tdm.evict.period: 1m\n      tdm.evict.max-num: 5\n")
    result = import_volcano_text(config, "c.conf")
    [diag] = result.diagnostics
    assert diag.code == "PD605" and result.exit_code == 0 and (diag.span.line, diag.span.column) == (11, 7)
    assert "jdb-max-unavailable" in diag.hint and "evict.period" not in diag.hint


def test_lownodeutilization_says_it_compares_requests_where_volcano_reads_load():
    result = import_volcano_text(RESCHEDULING, "c.conf")
    [diag] = result.diagnostics
    assert diag.code == "PD615" and (diag.span.line, diag.span.column) == (11, 15) and result.exit_code == 0
    assert "0% everywhere" in diag.message and "runtime/README.md" in diag.hint
    # Default thresholds (100%): nothing moves either way, nothing to say.
    plain = RESCHEDULING.split("        params:")[0] + "      queueSelector: [batch]\n- plugins:\n  - name: predicates\n"
    assert import_volcano_text(plain, "c.conf").diagnostics == []
