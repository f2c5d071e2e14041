"""docs/simulator.md's examples of `simulate` output are what the command prints: the JSON
example's keys (every level shown) and the `--explain --at` example's text."""

from __future__ import annotations

import json
import re

from tests.simulation.sim_helpers import ROOT, run_cli

DOC = ROOT / "docs" / "simulator.md"


def _block_after(marker: str, fence: str) -> str:
    text = DOC.read_text()
    start = text.index(marker)
    body = text.index(f"```{fence}\n", start) + len(fence) + 4
    return text[body:text.index("```", body)]


def _keys(value, path: str = "") -> set[str]:
    """Every key path of a JSON value (lists: their first item's)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if path.endswith("queues") or path.endswith("utilization") or path.endswith("fragmentation"):
                key = "*"       # names of queues and resources vary with the run
            out.add(f"{path}.{key}")
            out |= _keys(item, f"{path}.{key}")
    elif isinstance(value, list) and value:
        out |= _keys(value[0], f"{path}[]")
    return out


def test_the_documented_summary_json_has_the_keys_simulate_prints(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)          # the documented paths are relative to the checkout
    marker = "<!-- simulate-json: "
    text = DOC.read_text()
    command = text[text.index(marker) + len(marker):text.index(" -->", text.index(marker))]
    documented = json.loads(_block_after(marker, "json"))
    argv = command.split()
    assert argv[:2] == ["policydsl", "simulate"]
    code, out, err = run_cli(capsys, *argv[1:])
    assert code == 0, err
    printed = json.loads(out)
    assert _keys(documented) == _keys(printed)
    # the finding the docs show is one the run makes, with the same next command
    shown = documented["findings"][0]
    assert any(f["next"] == shown["next"] and f["explain"] == shown["explain"] for f in printed["findings"])


def test_the_documented_explain_at_example_is_what_it_prints(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    block = _block_after("### Looking inside", "")
    command, _, expected = block.partition("\n")
    argv = re.sub(r"^\$ ", "", command).split()
    code, out, err = run_cli(capsys, *argv[1:])
    assert code == 0, err
    assert out == expected


def test_the_showcase_runs_on_a_cluster_it_fits(capsys, monkeypatch) -> None:
    """The report showcase pairs multi-tenant.policy with its cluster: no PD215 warnings."""
    block = _block_after("A showcase, the multi-tenant policy", "bash").strip()
    argv = block.split()
    assert argv[:3] == ["policydsl", "simulate", "policies/multi-tenant.policy"] and "--report" in argv
    at = argv.index("--report")
    monkeypatch.chdir(ROOT)
    code, out, err = run_cli(capsys, *argv[1:at], "-o", "json")
    assert code == 0, err
    kinds = [f["kind"] for f in json.loads(out)["findings"]]
    assert "promise beyond cluster" not in kinds and len(kinds) <= 2, kinds
