"""Issue 32, point 1: every table the simulator and diff print is whole in an 80-column terminal
(no value and no header cut with `…`), checked through a real pseudo-terminal."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from runtime.simulation.workload import format_duration
from sim_helpers import POLICIES, run_cli, run_in_terminal


@pytest.mark.parametrize("columns", [80, 100])
def test_the_main_job_is_whole_at_80_columns(columns, capsys) -> None:
    argv = ("simulate", POLICIES / "volcano-default.policy", "--until", "30m")
    text = run_in_terminal(*argv, columns=columns)
    assert "…" not in text and "queues" in text and "fairness index" in text
    assert max(len(line) for line in text.splitlines()) <= columns
    code, out, _ = run_cli(capsys, *argv, "-o", "json")
    document = json.loads(out)
    for name, q in document["queues"].items():
        assert name in text
        shown = [str(q["jobs"]), str(q["started"]), str(q["completed"]), str(q["evictions"]),
                 f"{q['share'] * 100:.1f}%", f"{q['deserved'] * 100:.1f}%", f"{q['fairness']:.2f}",
                 *(format_duration(q["wait"][p]) for p in ("p50", "p95", "p99"))]
        assert all(figure in text for figure in shown), [f for f in shown if f not in text]
    assert f"{document['fairness']:.3f}" in text
    for resource, value in document["fragmentation"].items():
        assert f"{resource} {value * 100:.1f}%" in text
    assert document["findings"][0]["text"] in " ".join(text.split())


def test_a_wide_terminal_keeps_one_row_per_queue() -> None:
    text = run_in_terminal("simulate", POLICIES / "volcano-default.policy", "--until", "10m", columns=140)
    header = next(line for line in text.splitlines() if line.split()[:1] == ["queue"])
    assert "wait p50" in header and "evictions" in header and "…" not in text


def test_diff_is_whole_at_80_columns() -> None:
    text = run_in_terminal("diff", POLICIES / "volcano-default.policy", POLICIES / "multi-tenant.policy",
                           "--until", "10m")
    assert "…" not in text and "metrics unchanged" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_table_too_wide_is_laid_out_as_records() -> None:
    from rich.table import Table

    from runtime.simulation.summary import fitted

    table = Table(title="queue q: 1 pending jobs")
    for column in ("#", "JOB", "PRIORITY", "PHASE", "MINMEMBER", "MINRESOURCES", "WAITING", "REASON"):
        table.add_column(column, overflow="fold")
    reason = "gang short by 3: " + "not enough nvidia.com/gpu on any node that tolerates the taint " * 2
    table.add_row("1", "ns/a-rather-long-job-name", "100", "Pending", "4", "cpu 64, memory 256Gi", "4", reason)
    out = Console(width=80, record=True, force_terminal=True)
    parts = fitted(out, table)
    for part in parts if isinstance(parts, list) else [parts]:
        out.print(part)
    text = out.export_text()
    assert "…" not in text and "MINRESOURCES" in text and "ns/a-rather-long-job-name" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert reason.split()[-1] in text and "cpu 64, memory 256Gi" in text
