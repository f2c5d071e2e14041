"""`--report DIR`: one self-contained HTML page (index.html): first the run's findings (each with
the command to run next) and its longest waits with their last reasons, then the metrics, the
policy revision and the command that made it, and plots drawn as inline SVG by this module, each
the page's full width: utilization over time, queue shares over time (deserved dashed), pods
waiting per queue over time, evictions over time (the words "no evictions" when there were
none), and per-queue wait distributions (empirical CDFs over every job that arrived: jobs that
never started are censored — the curve stops below 100% and a dashed line marks what is
unknown). No script, no stylesheet or font from elsewhere."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Sequence

from runtime.simulation.engine import SimulationResult
from runtime.simulation.summary import (STOP_REASONS, eviction_text, findings_document, percent, topology_document,
                                        wait_text)
from runtime.simulation.workload import format_duration

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
WIDTH, HEIGHT = 1100, 320           # a full-width plot (the viewBox scales it to the page)
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 60, 320, 30, 45   # room on the right for legends
MAX_POINTS = 2000

Series = tuple[str, Sequence[tuple[float, float]], bool, int]     # (label, points, dashed, colour)


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _time_ticks(high: float) -> list[float]:
    """Ticks at round durations (seconds, minutes, hours)."""
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400):
        if high / step <= 8:
            return [i * step for i in range(int(high // step) + 1)]
    step = 86400 * math.ceil(high / 86400 / 8)
    return [i * step for i in range(int(high // step) + 1)]


def _thin(points: Sequence[tuple[float, float]]) -> Sequence[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return points
    every = math.ceil(len(points) / MAX_POINTS)
    return list(points[::every]) + [points[-1]]


def line_chart(title: str, series: list[Series], x_max: float, y_max: float, x_is_time: bool = True,
               y_is_percent: bool = True, step: bool = True, x_label: str = "time") -> str:
    """An SVG line chart; `step` draws each value held until the next point."""
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    x_max = x_max if x_max > 0 else 1.0
    y_max = y_max if y_max > 0 else 1.0

    def sx(x: float) -> float:
        return MARGIN_LEFT + plot_w * min(max(x / x_max, 0.0), 1.0)

    def sy(y: float) -> float:
        return MARGIN_TOP + plot_h * (1.0 - min(max(y / y_max, 0.0), 1.0))

    esc = html.escape
    # The viewBox scales the chart to its figure's width (the page's layout), the text with it.
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(title)}">',
             f'<text x="{MARGIN_LEFT}" y="18" font-size="14" font-weight="bold">{esc(title)}</text>',
             f'<rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    for y in _nice_ticks(0.0, y_max):
        label = f"{y * 100:.0f}%" if y_is_percent else f"{y:g}"
        parts.append(f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT + plot_w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" '
                     f'stroke="#eee"/>')
        parts.append(f'<text x="{MARGIN_LEFT - 6}" y="{sy(y) + 4:.1f}" font-size="11" text-anchor="end">'
                     f'{esc(label)}</text>')
    for x in (_time_ticks(x_max) if x_is_time else _nice_ticks(0.0, x_max)):
        label = format_duration(x) if x_is_time else f"{x:g}"
        parts.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{MARGIN_TOP + plot_h}" '
                     f'y2="{MARGIN_TOP + plot_h + 4}" stroke="#999"/>')
        parts.append(f'<text x="{sx(x):.1f}" y="{MARGIN_TOP + plot_h + 17}" font-size="11" text-anchor="middle">'
                     f'{esc(label)}</text>')
    parts.append(f'<text x="{MARGIN_LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" font-size="11" '
                 f'text-anchor="middle">{esc(x_label)}</text>')
    for i, (label, points, dashed, colour) in enumerate(series):
        color = PALETTE[colour % len(PALETTE)]
        points = _thin(points)
        if not points:
            continue
        coords: list[str] = []
        for k, (x, y) in enumerate(points):
            if step and k > 0:
                coords.append(f"{sx(x):.1f},{sy(points[k - 1][1]):.1f}")
            coords.append(f"{sx(x):.1f},{sy(y):.1f}")
        if step:
            coords.append(f"{sx(x_max):.1f},{sy(points[-1][1]):.1f}")
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.8"{dash} '
                     f'points="{" ".join(coords)}"><title>{esc(label)}</title></polyline>')
        ly = MARGIN_TOP + 8 + 18 * i
        lx = MARGIN_LEFT + plot_w + 12
        parts.append(f'<line x1="{lx}" x2="{lx + 22}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{lx + 28}" y="{ly + 4}" font-size="11">{esc(label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def utilization_chart(result: SimulationResult) -> str:
    samples = result.metrics.samples
    resources = sorted({r for s in samples for r in s.utilization})
    series = [(r, [(s.time, s.utilization.get(r, 0.0)) for s in samples], False, i) for i, r in enumerate(resources)]
    return line_chart("Utilization over time", series, result.end_time, 1.0)


def shares_chart(result: SimulationResult) -> str:
    samples = result.metrics.samples
    series: list[Series] = []
    for i, name in enumerate(result.metrics.queues):
        series.append((f"{name} share", [(s.time, s.shares.get(name, 0.0)) for s in samples], False, i))
        if any(name in s.deserved for s in samples):
            series.append((f"{name} deserved", [(s.time, s.deserved.get(name, 0.0)) for s in samples], True, i))
    return line_chart("Queue shares over time (dominant resource; deserved dashed)", series, result.end_time, 1.0)


def waiting_chart(result: SimulationResult) -> str:
    """Pods waiting per queue over time (the pending work), with every queue's total."""
    samples = result.metrics.samples
    names = sorted({name for s in samples for name in s.waiting})
    series: list[Series] = [(name, [(s.time, float(s.waiting.get(name, 0))) for s in samples], False, i)
                            for i, name in enumerate(names)]
    peak = max((float(sum(s.waiting.values())) for s in samples), default=0.0)
    if len(names) > 1:
        series.append(("all queues", [(s.time, float(sum(s.waiting.values()))) for s in samples], True, len(names)))
    return line_chart("Pods waiting over time", series, result.end_time, peak * 1.1 or 1.0, y_is_percent=False)


def evictions_chart(result: SimulationResult) -> str:
    samples = result.metrics.samples
    points = [(s.time, float(s.evictions)) for s in samples]
    peak = max((p for _, p in points), default=0.0)
    return line_chart("Evictions so far", [("evictions", points, False, 1)], result.end_time, peak * 1.1 or 1.0,
                      y_is_percent=False)


def evictions_figure(result: SimulationResult) -> str:
    """The evictions plot, or the words "no evictions" when there were none (a flat line says less)."""
    if not result.metrics.evictions:
        return '<figure id="evictions"><p class="none">Evictions over time: no evictions.</p></figure>'
    return f'<figure id="evictions">{evictions_chart(result)}</figure>'


def waits_chart(result: SimulationResult) -> str:
    """Per queue, the fraction of its jobs (all that arrived and were measured) that started
    within each wait. Jobs that never started are censored: the curve stops at the fraction that
    started, and a dashed line carries it to the right edge (their waits are only known to be
    longer than the time they had waited at the end)."""
    series: list[Series] = []
    longest = 0.0
    for i, q in enumerate(result.metrics.queues.values()):
        started = q.started_waits
        censored = q.censored_waits
        total = len(started) + len(censored)
        if not total:
            continue
        points = [(0.0, 0.0)] + [(w, (k + 1) / total) for k, w in enumerate(started)]
        label = f"{q.name} ({total} jobs" + (f", {len(censored)} never started: censored)" if censored else ")")
        series.append((label, points, False, i))
        longest = max(longest, max(started, default=0.0), max(censored, default=0.0))
        if censored:
            level = len(started) / total
            series.append((f"{q.name}: {len(censored)} still waiting after {format_duration(censored[0])}+",
                           [(points[-1][0], level), (max(longest, censored[-1]), level)], True, i))
    return line_chart("Wait distribution per queue (fraction of jobs started within; censored dashed)", series,
                      longest * 1.05 or 1.0, 1.0, x_label="wait")


def findings_html(result: SimulationResult, base: str = "") -> str:
    """The findings, each with its next command (after `base`, the run's command without --report),
    and the longest waits with their last reasons."""
    esc = html.escape
    findings, waits = findings_document(result, base)
    out = ['<section id="findings">\n<h2>Findings</h2>']
    if findings:
        out.append("<ul>")
        for f in findings:
            nxt = f'<br><span class="next">next: <code>{esc(f["next"])}</code></span>' if f["next"] else ""
            out.append(f'<li class="finding" data-kind="{esc(f["kind"])}">{esc(f["text"])}{nxt}</li>')
        out.append("</ul>")
    else:
        out.append("<p>No findings: no head-of-line blocking, starved queue, missing queue, thrashing, or job "
                   "that never started.</p>")
    if waits:
        out.append('<h3>Longest waits</h3>\n<table id="longest-waits">\n<tr><th>job</th><th>queue</th><th>waited</th>'
                   '<th>from</th><th>until</th><th>last reason</th><th>next</th></tr>')
        for w in waits:
            until = format_duration(w["since"] + w["wait"]) if w["started"] else "never started"
            reason = "; ".join(w["reasons"]) or "-"
            out.append(f'<tr class="wait"><td>{esc(w["job"])}</td><td>{esc(w["queue"])}</td>'
                       f'<td>{esc(format_duration(w["wait"]))}</td><td>{esc(format_duration(w["since"]))}</td>'
                       f'<td>{esc(until)}</td><td class="reason">{esc(reason)}</td>'
                       f'<td><code>{esc(w["next"] or "")}</code></td></tr>')
        out.append("</table>")
    out.append("</section>")
    return "\n".join(out) + "\n"


def topology_html(result: SimulationResult) -> str:
    """Gangs by the tier they spanned, each gang's span, free room per HyperNode at the end ("" without HyperNodes)."""
    document = topology_document(result)
    if document is None:
        return ""
    esc = html.escape
    tiers = ", ".join(f"{'spanning the cluster' if k == 'cluster' else f'tier {k}'}: {v}"
                      for k, v in document["gangsPerTier"].items()) or "no gang ran"
    source = (f"derived from node labels ({esc(document['derivedFrom'])})" if document["derivedFrom"]
              else "from HyperNode objects")
    out = [f'<h2>Network topology</h2>\n<p>HyperNodes {source}. Gangs by the tier they spanned (the widest while '
           f'running): <span id="gangs-per-tier">{esc(tiers)}</span>.</p>']
    out += [f'<p class="warning">{esc(p)}</p>' for p in document["problems"]]
    out.append('<table id="spans">\n<tr><th>gang</th><th>tier</th><th>HyperNode</th><th>nodes</th></tr>')
    for key, span in document["spans"].items():
        tier = "-" if span["tier"] is None else str(span["tier"])
        out.append(f'<tr class="span" data-podgroup="{esc(key)}" data-tier="{esc(tier)}"><td>{esc(key)}</td>'
                   f'<td>{tier}</td><td>{esc(span["hyperNode"] or "no one HyperNode")}</td><td>{span["nodes"]}</td></tr>')
    out.append("</table>")
    resources = sorted({r for hn in document["hyperNodes"] for r in hn["free"]},
                       key=lambda r: (r not in ("cpu", "memory"), r != "cpu", r))
    head = "".join(f"<th>free {esc(r)}</th>" for r in resources)
    out.append(f'<table id="hypernodes">\n<tr><th>HyperNode</th><th>tier</th><th>labels</th><th>nodes</th>{head}</tr>')
    for hn in document["hyperNodes"]:
        cells = "".join(f"<td>{esc(hn['free'].get(r, '0'))}</td>" for r in resources)
        out.append(f'<tr class="hypernode" data-hypernode="{esc(hn["name"])}"><td>{esc(hn["name"])}</td>'
                   f'<td>{hn["tier"]}</td><td>{esc(hn["labels"] or "-")}</td><td>{hn["nodes"]}</td>{cells}</tr>')
    out.append("</table>")
    return "\n".join(out) + "\n"


def devices_html(result: SimulationResult) -> str:
    """Device usage per DeviceClass and per node at the end ("" without DRA objects)."""
    devices = result.metrics.devices
    if not devices:
        return ""
    esc = html.escape
    out = ['<h2>Devices (Dynamic Resource Allocation)</h2>\n<p>Per DeviceClass, the published devices its '
           'selectors match and how many claims hold at the end; mean use is allocated ÷ published over the '
           'run.</p>\n<table id="device-classes">\n<tr><th>DeviceClass</th><th>allocated at the end</th>'
           '<th>published</th><th>mean use</th></tr>']
    for cls, use in devices.items():
        mean = "-" if use.utilization is None else percent(use.utilization)
        out.append(f'<tr class="device-class" data-class="{esc(cls)}"><td>{esc(cls)}</td><td>{use.allocated}</td>'
                   f'<td>{use.published}</td><td>{mean}</td></tr>')
    out.append('</table>\n<table id="device-nodes">\n<tr><th>DeviceClass</th><th>node</th><th>allocated</th>'
               '<th>published</th></tr>')
    for cls, use in devices.items():
        for node, (published, allocated) in sorted(use.nodes.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0])):
            out.append(f'<tr class="device-node" data-class="{esc(cls)}" data-node="{esc(node)}"><td>{esc(cls)}</td>'
                       f'<td>{esc(node)}</td><td>{allocated}</td><td>{published}</td></tr>')
    out.append("</table>")
    return "\n".join(out) + "\n"


def card_fragmentation_figure(result: SimulationResult) -> str:
    """Card memory split over cards over time, per device ("" when none ever was): the free card
    memory waiting pods could not use (runtime.simulation.cardsplit), with the peak's nodes."""
    splits = result.metrics.card_fragmentation
    if not splits:
        return ""
    esc = html.escape
    gib = 1024 ** 3
    series: list[Series] = [(f"{device} (GiB)", [(t, v / gib) for t, v in split.series], False, i)
                            for i, (device, split) in enumerate(splits.items())]
    peak = max(split.peak for split in splits.values()) / gib
    chart = line_chart("Card memory split over cards (GiB no waiting pod can use)", series, result.end_time,
                       peak * 1.1 or 1.0, y_is_percent=False)
    rows = "\n".join(f'<tr class="split-node" data-node="{esc(n.node)}"><td>{esc(device)}</td><td>{esc(n.node)}</td>'
                     f'<td>{esc(n.sentence())}</td></tr>'
                     for device, split in splits.items() for n in split.peak_nodes)
    return (f'<figure id="card-fragmentation">{chart}\n<table>\n<tr><th>device</th><th>node (at the peak)</th>'
            f'<th>why no waiting pod uses it</th></tr>\n{rows}\n</table></figure>')


def render_html(result: SimulationResult, policy: str, description: str, *, revision: str = "",
                command: str = "", base: str = "") -> str:
    m = result.metrics
    esc = html.escape
    header = ""
    if revision:
        header += f"<p>Policy revision <code>{esc(revision)}</code>.</p>\n"
    if command:
        header += f"<p>Command: <code>{esc(command)}</code></p>\n"
    rows = "\n".join(
        f"<tr><td>{esc(q.name)}</td><td>{q.jobs}</td><td>{q.started}</td><td>{q.completed}</td><td>{q.waiting}</td>"
        f"<td>{wait_text(q.wait_p50)}</td><td>{wait_text(q.wait_p95)}</td><td>{wait_text(q.wait_p99)}</td>"
        f"<td>{percent(q.share)}</td><td>{percent(q.deserved)}</td>"
        f"<td>{'-' if q.fairness is None else f'{q.fairness:.2f}'}</td><td>{q.evictions}</td></tr>"
        for q in m.queues.values())
    cluster = [
        ("utilization", ", ".join(f"{r} {percent(v)}" for r, v in m.utilization.items()) or "-"),
        ("fragmentation", ", ".join(f"{r} {percent(v)}" for r, v in m.fragmentation.items()) or "-"),
        *(("card memory split", split.text()) for split in m.card_fragmentation.values()),
        ("fairness index", "-" if m.fairness is None else f"{m.fairness:.3f}"),
        ("evictions", eviction_text(m)),
        ("gang violations", str(len(m.gang_violations))),
    ]
    cluster_rows = "\n".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in cluster)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>policydsl simulation: {esc(policy)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
figure {{ margin: 1.5em 0; }}
.plots figure {{ margin: 0 0 1.5em 0; width: 100%; }}
#findings {{ border-left: 4px solid #d62728; padding: 0 1em; margin: 1em 0 2em 0; }}
#findings li {{ margin: 0.6em 0; }}
.next {{ color: #555; }}
td.reason {{ text-align: left; max-width: 40em; }}
.none {{ color: #555; font-style: italic; padding: 2em; border: 1px solid #ddd; }}
</style>
</head>
<body>
<h1>Simulation of policy {esc(policy)}</h1>
<p>{esc(description)}</p>
{header}<p>Simulated {esc(format_duration(result.end_time))} in {result.cycles} cycles
({esc(STOP_REASONS.get(result.stopped, result.stopped))}).</p>
{findings_html(result, base)}<h2>Queues</h2>
<table>
<tr><th>queue</th><th>jobs</th><th>started</th><th>done</th><th>waiting</th><th>wait p50</th><th>p95</th>
<th>p99</th><th>share</th><th>deserved</th><th>fairness</th><th>evictions</th></tr>
{rows}
</table>
<h2>Cluster</h2>
<table>
{cluster_rows}
</table>
{topology_html(result)}{devices_html(result)}<h2>Plots</h2>
<div class="plots">
<figure>{utilization_chart(result)}</figure>
<figure>{shares_chart(result)}</figure>
<figure>{waiting_chart(result)}</figure>
{evictions_figure(result)}
{card_fragmentation_figure(result)}
<figure>{waits_chart(result)}</figure>
</div>
</body>
</html>
"""


def write_report(directory: str | Path, result: SimulationResult, policy: str, description: str, *,
                 revision: str = "", command: str = "", base: str = "") -> Path:
    """Write DIR/index.html (the folder is created); returns its path. Raises OSError."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    page = folder / "index.html"
    page.write_text(render_html(result, policy, description, revision=revision, command=command, base=base), encoding="utf-8")
    return page
