"""Text output of a simulation: per-cycle decision lines and rich tables of the metrics."""

from __future__ import annotations

import sys
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from runtime.simulation.engine import CycleOutcome, SimulationResult
from runtime.simulation.metrics import RunMetrics
from runtime.simulation.workload import format_duration

STOP_REASONS = {
    "drained": "nothing left to happen",
    "until": "reached --until",
    "cycles": "ran the requested cycles",
    "cycle limit": "hit the cycle limit (the policy never settles?)",
    "horizon": "hit the 30-day horizon",
}


def console(stream: TextIO | None = None, wide: int = 120) -> Console:
    """The terminal's width on a terminal (tables then fit it: see fitted, queue_table); `wide`
    columns when piped."""
    stream = stream or sys.stdout
    tty = stream.isatty() if hasattr(stream, "isatty") else False
    return Console(file=stream, width=None if tty else wide, highlight=False, soft_wrap=not tty)


def wait_text(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def cycle_lines(outcome: CycleOutcome) -> list[str]:
    d = outcome.decisions
    lines = [f"cycle {outcome.index + 1} at {format_duration(outcome.time)}: {len(d.bindings)} bound, "
             f"{len(d.evictions)} evicted, {len(d.pipelined)} pipelined, {len(d.unschedulable)} waiting"]
    for b in sorted(d.bindings, key=lambda b: b.pod):
        devices = "".join(f" {res}={','.join(map(str, cards))}" for res, cards in sorted(b.devices.items()))
        lines.append(f"  bind   {b.pod} -> {b.node}{devices}")
        if b.pod in d.volumes:
            claims = ", ".join(f"{c.claim.split('/', 1)[1]} -> {c.volume or 'provisioned'}" for c in d.volumes[b.pod])
            lines.append(f"         claims {claims}")
    for e in sorted(d.evictions, key=lambda e: e.pod):
        lines.append(f"  evict  {e.pod}: {e.reason.message}")
    for pod, node in sorted(d.pipelined.items()):
        lines.append(f"  pipeline {pod} -> {node} (after releasing pods leave)")
    for u in sorted(d.unschedulable, key=lambda u: u.pod):
        lines.append(f"  wait   {u.pod}: {'; '.join(r.message for r in u.reasons)}")
    for g in sorted(d.podgroups, key=lambda g: g.name):
        lines.append(f"  group  {g.name}: {g.phase}")
    return lines


QUEUE_FIELDS = ("jobs", "started", "done", "waiting", "wait p50", "wait p95", "wait p99", "share", "deserved",
                "fairness", "evictions")


def _queue_values(q) -> tuple[str, ...]:
    return (str(q.jobs), str(q.started), str(q.completed), str(q.waiting), wait_text(q.wait_p50),
            wait_text(q.wait_p95), wait_text(q.wait_p99), percent(q.share), percent(q.deserved),
            "-" if q.fairness is None else f"{q.fairness:.2f}", str(q.evictions))


def natural_width(table: Table) -> int:
    """The width `table` takes with no column shrunk: what a terminal must offer to show it whole."""
    from rich.measure import Measurement

    return Measurement.get(Console(width=10_000), Console(width=10_000).options, table).maximum


def queue_table(metrics: RunMetrics, width: int | None = None) -> Table | list[Table]:
    """One row per queue; when that does not fit in `width` columns, the table turned on its side
    (a row per figure, a column per queue, as many queues per table as fit), so no value is cut."""
    table = Table(box=box.SIMPLE, show_edge=False, title="queues", title_justify="left")
    table.add_column("queue", justify="left", overflow="fold")
    for column in ("jobs", "started", "done", "waiting", "wait p50", "p95", "p99", "share", "deserved",
                   "fairness", "evictions"):
        table.add_column(column, justify="right", overflow="fold")
    for q in metrics.queues.values():
        table.add_row(q.name, *_queue_values(q))
    if width is None or natural_width(table) <= width:
        return table
    queues = list(metrics.queues.values())
    label = max(map(len, QUEUE_FIELDS)) + 2
    tables, chunk, used = [], [], label
    for q in queues:
        cell = max(len(q.name), *(len(v) for v in _queue_values(q))) + 3
        if chunk and used + cell > width:
            tables.append(chunk)
            chunk, used = [], label
        chunk.append(q)
        used += cell
    tables.append(chunk)
    out = []
    for i, chunk in enumerate(tables):
        side = Table(box=box.SIMPLE, show_edge=False, title="queues" if i == 0 else None, title_justify="left")
        side.add_column("queue", justify="left", overflow="fold")
        for q in chunk:
            side.add_column(q.name, justify="right", overflow="fold")
        values = [_queue_values(q) for q in chunk]
        for n, field in enumerate(QUEUE_FIELDS):
            side.add_row(field, *(v[n] for v in values))
        out.append(side)
    return out


def fitted(out: Console, table: Table) -> Table | list:
    """`table` itself when it fits `out`'s width; else one small two-column table per row
    (header: value), so no header and no value is cut in a narrow terminal."""
    natural = natural_width(table)
    headers = [str(c.header) for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    widest = max((max([len(str(h)), *(len(str(v)) for v in column)]) for h, column in zip(headers, cells)),
                 default=0)
    # whole, or the widest column (a long reason) folded into at least 40 columns
    if natural <= out.width or natural - widest + 40 <= out.width:
        return table
    records = []
    for r in range(table.row_count):
        record = Table(box=box.SIMPLE, show_edge=False, show_header=False, pad_edge=False)
        record.add_column(justify="left", no_wrap=True)
        record.add_column(justify="left", overflow="fold")
        for h, column in zip(headers, cells):
            record.add_row(h, column[r])
        records.append(record)
        records.append("")
    if table.title:
        from rich.text import Text

        return [Text(str(table.title), overflow="fold"), *records[:-1]]
    return records[:-1]


def cluster_table(metrics: RunMetrics) -> Table:
    table = Table(box=box.SIMPLE, show_edge=False, title="cluster", title_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("utilization", ", ".join(f"{r} {percent(v)}" for r, v in metrics.utilization.items()) or "-")
    table.add_row("fragmentation", ", ".join(f"{r} {percent(v)}" for r, v in metrics.fragmentation.items())
                  or "- (no pod waited)")
    table.add_row("fairness index", "-" if metrics.fairness is None else f"{metrics.fairness:.3f}")
    table.add_row("evictions", eviction_text(metrics))
    violations = len(metrics.gang_violations)
    detail = ""
    if violations:
        first = metrics.gang_violations[0]
        detail = (f" (first: {first.job} at {format_duration(first.time)} ran {first.running} of "
                  f"minMember {first.min_member})")
    table.add_row("gang violations", f"{violations}{detail}")
    if metrics.storage_waiting:
        table.add_row("waiting on storage", f"{metrics.storage_waiting} pods (their claims, or no node their "
                                            "volumes reach)")
    return table


def eviction_text(metrics: RunMetrics) -> str:
    """"4 (3 bought, 1 wasted, 0 repeated, 0 traded back)" — evictions as runtime.engine.evictions counts them."""
    a = metrics.eviction_audit
    if not metrics.evictions or not a:
        return str(metrics.evictions)
    return (f"{metrics.evictions} ({a['bought']} bought, {a['wasted']} wasted, {a['repeats']} repeated, "
            f"{a['exchanges']} traded back)")


def print_summary(out: Console, result: SimulationResult, policy: str, description: str) -> None:
    m = result.metrics
    out.print(f"policy {policy} on {description}")
    out.print(f"simulated {format_duration(result.end_time)} in {result.cycles} cycles "
              f"({STOP_REASONS.get(result.stopped, result.stopped)})")
    out.print()
    if m.queues:
        tables = queue_table(m, out.width)
        for table in tables if isinstance(tables, list) else [tables]:
            out.print(table)
    else:
        out.print("no jobs")
    out.print(cluster_table(m))
    for finding in result.findings:
        out.print(f"[bold]warning[/bold]: {finding}")
