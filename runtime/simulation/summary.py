"""Text output of a simulation: per-cycle decision lines and rich tables of the metrics."""

from __future__ import annotations

import sys
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from compiler.quantities import readable_base_units
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
    for split in metrics.card_fragmentation.values():
        # Card memory waiting pods could not use because it was split over cards (runtime.simulation.cardsplit).
        table.add_row("card memory split", split.text())
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


TOPOLOGY_ROWS = 30          # HyperNodes and gangs listed in the text summary (the JSON and the report list all)
DEVICE_NODE_ROWS = 30       # nodes listed per DeviceClass in the text summary (the JSON lists all)


def device_tables(metrics: RunMetrics) -> list:
    """The text summary's device usage (Dynamic Resource Allocation): per DeviceClass, devices
    allocated of those published at the end and the mean over the run, then per node at the end
    (the fullest first)."""
    if not metrics.devices:
        return []
    classes = Table(box=box.SIMPLE, show_edge=False, title="devices (DRA)", title_justify="left")
    for column in ("DeviceClass", "allocated at the end", "published", "mean use"):
        classes.add_column(column, overflow="fold", justify="left" if column == "DeviceClass" else "right")
    nodes = Table(box=box.SIMPLE, show_edge=False, title="devices per node at the end", title_justify="left")
    for column in ("DeviceClass", "node", "allocated", "published"):
        nodes.add_column(column, overflow="fold", justify="left" if column in ("DeviceClass", "node") else "right")
    for cls, use in metrics.devices.items():
        classes.add_row(cls, str(use.allocated), str(use.published),
                        "-" if use.utilization is None else percent(use.utilization))
        ranked = sorted(use.nodes.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))
        for node, (published, allocated) in ranked[:DEVICE_NODE_ROWS]:
            nodes.add_row(cls, node, str(allocated), str(published))
        if len(ranked) > DEVICE_NODE_ROWS:
            nodes.add_row(cls, f"... {len(ranked) - DEVICE_NODE_ROWS} more (-o json)", "", "")
    return [classes, nodes]


def topology_document(result: SimulationResult) -> dict | None:
    """Spans and free room per HyperNode, for -o json and the report; None without HyperNodes."""
    state = result.state
    if not state.has_hypernodes:
        return None
    topology = state.topology()
    per_tier: dict[str, int] = {}
    for span in result.spans.values():
        key = "cluster" if span.tier is None else str(span.tier)
        per_tier[key] = per_tier.get(key, 0) + 1
    order = sorted(topology.hypernodes.values(), key=lambda hn: (hn.tier, hn.name))
    return {
        "derivedFrom": topology.derived_from or None,
        "gangsPerTier": dict(sorted(per_tier.items())),
        "spans": {key: {"tier": s.tier, "hyperNode": s.hypernode, "nodes": s.nodes}
                  for key, s in sorted(result.spans.items())},
        "hyperNodes": [{"name": hn.name, "tier": hn.tier, "labels": hn.label_text,
                        "nodes": len(topology.leaves.get(hn.name, ())),
                        "free": {r: readable_base_units(r, v) for r, v in
                                 sorted(result.hypernode_room.get(hn.name, {}).items())}} for hn in order],
        "problems": [str(p) for p in topology.problems],
    }


def _resources_of(rooms) -> list[str]:
    found = {r for room in rooms for r in room}
    return sorted(found, key=lambda r: (r not in ("cpu", "memory"), r != "cpu", r))


def topology_tables(result: SimulationResult) -> list:
    """The text summary's network-topology part: gangs per tier, the spans, free room per HyperNode."""
    document = topology_document(result)
    if document is None:
        return []
    out: list = []
    tiers = document["gangsPerTier"]
    said = ", ".join(f"{'spanning the cluster' if k == 'cluster' else f'tier {k}'}: {v}" for k, v in tiers.items())
    source = f"HyperNodes derived from node labels ({document['derivedFrom']})" if document["derivedFrom"] \
        else "HyperNodes from objects"
    out.append(f"network topology: {source}; gangs by the tier they spanned: {said or 'none ran'}")
    for problem in document["problems"]:
        out.append(f"[bold]warning[/bold]: {problem}")
    if result.spans:
        spans = Table(box=box.SIMPLE, show_edge=False, title="gang spans (the widest while running)",
                      title_justify="left")
        for column in ("gang", "tier", "HyperNode", "nodes"):
            spans.add_column(column, overflow="fold", justify="right" if column in ("tier", "nodes") else "left")
        ranked = sorted(result.spans.items(), key=lambda kv: (kv[1].tier is None, -(kv[1].tier or 0), kv[0]))
        for key, span in ranked[:TOPOLOGY_ROWS]:
            spans.add_row(key, "-" if span.tier is None else str(span.tier),
                          span.hypernode or "no one HyperNode", str(span.nodes))
        if len(ranked) > TOPOLOGY_ROWS:
            spans.add_row(f"... {len(ranked) - TOPOLOGY_ROWS} more (-o json)", "", "", "")
        out.append(spans)
    rooms = result.hypernode_room
    resources = _resources_of(rooms.values())
    table = Table(box=box.SIMPLE, show_edge=False, title="free room per HyperNode at the end", title_justify="left")
    for column in ("tier", "HyperNode", "labels", "nodes", *resources):
        table.add_column(column, overflow="fold", justify="left" if column in ("HyperNode", "labels") else "right")
    for hn in document["hyperNodes"][:TOPOLOGY_ROWS]:
        free = rooms.get(hn["name"], {})
        table.add_row(str(hn["tier"]), hn["name"], hn["labels"] or "-", str(hn["nodes"]),
                      *(readable_base_units(r, free.get(r, 0)) for r in resources))
    if len(document["hyperNodes"]) > TOPOLOGY_ROWS:
        table.add_row("", f"... {len(document['hyperNodes']) - TOPOLOGY_ROWS} more (-o json)", "", "",
                      *("" for _ in resources))
    out.append(table)
    return out


def at_text(seconds: float) -> str:
    """A simulated time as --at reads it back exactly (format_duration drops seconds after an hour)."""
    whole = int(seconds)
    if whole != seconds or whole < 3600:
        return format_duration(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h" + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")


def next_command(base: str, subject: str | None, at: float | None) -> str | None:
    """The command that explains `subject` at simulated time `at` (None: the end) in the run `base`
    reproduces; None without a subject or a command."""
    if not subject or not base:
        return None
    return f"{base} --explain {subject}" + (f" --at {at_text(at)}" if at is not None else "")


def findings_document(result: SimulationResult, base: str = "") -> tuple[list[dict], list[dict]]:
    """The findings and the longest waits as -o json (and the report) show them, each with its next command."""
    findings = [{**f.to_dict(), "next": next_command(base, f.subject, f.at)} for f in result.findings]
    waits = [{**w.to_dict(), "next": next_command(base, w.job, _wait_at(w))} for w in result.longest_waits]
    return findings, waits


def _wait_at(wait) -> float | None:
    """When to explain a wait: just before it ended (None: it never ended, so the end of the run)."""
    if not wait.started:
        return None
    return max(wait.since, wait.since + wait.seconds - 1.0)


def print_findings(out: Console, result: SimulationResult, base: str = "") -> None:
    """Under the tables: each finding and each of the longest waits with the command to run next."""
    from rich.text import Text   # lazy as in fitted(): only the text summary needs it

    findings, waits = findings_document(result, base)
    if findings:
        out.print()
        out.print(Text("findings", style="italic"))
        for f in findings:
            out.print(Text.assemble(("warning", "bold"), ": " + f["text"], overflow="fold"))
            if f["next"]:
                out.print(Text(f"  next: {f['next']}", overflow="fold"))
    if waits:
        out.print()
        out.print(Text("longest waits", style="italic"))
        for w in waits:
            end = f"started at {format_duration(w['since'] + w['wait'])}" if w["started"] else "never started"
            reason = f": {w['reasons'][0]}" if w["reasons"] else ""
            out.print(Text(f"{w['job']} (queue {w['queue']}) waited {format_duration(w['wait'])} from "
                           f"{format_duration(w['since'])}, {end}{reason}", overflow="fold"))
            if w["next"]:
                out.print(Text(f"  next: {w['next']}", overflow="fold"))
    if base and (findings or waits):
        out.print(Text(f"(the same as an HTML page with plots: {base} --report DIR; docs/simulator.md explains "
                       "each figure)", overflow="fold"))


def print_summary(out: Console, result: SimulationResult, policy: str, description: str, command: str = "") -> None:
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
    for part in topology_tables(result):
        out.print(fitted(out, part) if isinstance(part, Table) else part)
    for table in device_tables(m):
        out.print(fitted(out, table))
    print_findings(out, result, command)
