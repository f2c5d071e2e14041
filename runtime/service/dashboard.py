"""The scheduler's dashboard (`/ui`): one server-rendered HTML page, no JavaScript. Plots are
inline SVG drawn here; the page refreshes itself (`<meta http-equiv="refresh">`).

Cheap while the scheduler runs: rendered from the last cycle's LiveView only (no request to
the API server, no pass over the pods but the waiting ones' fragmentation figures), and at
most once per cycle: a page asked for again before the next cycle is the same bytes.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.quantities import readable_base_units
from runtime.service.auth import HYPERNODES, QUEUES, NonResource, Resource, namespaces_visible_to
from runtime.service.devices import RESOURCE_API, device_facts
from runtime.service.views import CycleView, HistorySample, LiveView, QueueRow, TopologyFacts

REFRESH_S = 5
PENDING_SHOWN = 20                 # per queue
NODES_SHOWN = 50                   # the busiest
HYPERNODES_SHOWN = 200             # by tier, then name
SPANS_SHOWN = 200                  # running gangs, tightest tier first
CARDS_SHOWN = 200                  # shared cards, by node then device then card
CLASS_ROWS_SHOWN = 200             # DRA DeviceClass x node rows
HOLDERS_SHOWN = 8                  # pods named per card (the rest counted)
PLOT_W, PLOT_H = 560, 180
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")

_cache_lock = threading.Lock()   # the HTTP server answers on several threads


# Bidi controls in a name could make a row read as another's (U+202E "Trojan Source"): shown as
# their code points instead. Other control characters (a newline in a reason) as a visible mark.
_UNSHOWN = {c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}
_UNSHOWN.update({c: "\ufffd" for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)})


def h(value: Any) -> str:
    return html.escape(str(value).translate(_UNSHOWN), quote=True)


@dataclass(frozen=True)
class Shown:
    """What one caller may see (secure serving, issue 30): sections by RBAC, pending jobs by namespace."""

    queues: bool = True
    nodes: bool = True
    topology: bool = True
    policy: bool = True
    device_classes: bool = True    # DRA rows: `list resourceslices.resource.k8s.io`
    namespace: Callable[[str], bool] = lambda namespace: True


def shown_to(viewer: Any) -> Shown | None:
    """The sections an auth.Viewer may see; None when it may see everything (the shared page)."""
    everything = viewer.sees_all_namespaces()
    shown = Shown(queues=viewer.may(Resource("list", "queues", group=QUEUES)),
                  nodes=viewer.may(Resource("list", "nodes")),
                  topology=everything and viewer.may(Resource("list", "hypernodes", group=HYPERNODES)),
                  policy=viewer.may(NonResource("/policy")),
                  device_classes=viewer.may(Resource("list", "resourceslices", group=RESOURCE_API)),
                  namespace=namespaces_visible_to(viewer))
    return None if everything and shown.queues and shown.nodes and shown.topology and shown.policy \
        and shown.device_classes else shown


def render(view: LiveView, policy: Mapping[str, Any] | None = None, viewer: Any = None) -> bytes:
    view.note_reload((policy or {}).get("last_reload"))
    shown = shown_to(viewer) if viewer is not None else None
    if shown is not None:   # a page of its own, never cached: it is one caller's
        return _page(view, view.last, policy if shown.policy else None, shown).encode()
    last = view.last
    key = (last.number if last is not None else -1, len(view.history()), len(view.reloads()),
           (policy or {}).get("revision"), ((policy or {}).get("last_reload") or {}).get("at"))
    with _cache_lock:
        cached = getattr(view, "_page_cache", None)
        if cached is not None and cached[0] == key:
            return cached[1]
    page = _page(view, last, policy).encode()
    with _cache_lock:
        view._page_cache = (key, page)   # one page per view: the last cycle's
    return page


def _page(view: LiveView, last: CycleView | None, policy: Mapping[str, Any] | None,
          shown: Shown = Shown()) -> str:
    parts = [f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_S}">
<title>policydsl scheduler</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; }}
h1 {{ font-size: 1.4em; margin-bottom: 0.2em; }} h2 {{ font-size: 1.15em; margin-top: 1.6em; }}
table {{ border-collapse: collapse; margin: 0.4em 0; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 3px 10px 3px 4px; text-align: left; vertical-align: top; }}
th {{ background: #f4f4f4; }} td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.muted {{ color: #777; }} .reason {{ max-width: 60em; }}
.grid {{ display: flex; flex-wrap: wrap; gap: 2em; }}
svg text {{ font: 11px system-ui, sans-serif; }}
</style></head><body>
<h1>policydsl scheduler</h1>"""]
    if last is None:
        parts.append('<p id="no-cycle">No scheduling cycle yet: the cache is still syncing, or this replica is a '
                     'standby (the leader serves the live figures).</p>')
    else:
        ago = max(0.0, time.time() - last.at)
        parts.append(f'<p id="cycle">policy <b>{h(last.policy)}</b>, revision <code id="revision">'
                     f'{h(last.revision)}</code>; cycle {last.number}, {ago:.1f} s ago, took '
                     f'{last.seconds * 1000:.1f} ms</p>')
        if shown.queues:
            parts.append(_queue_tree(last))
            parts.append(_pending(last, shown.namespace))
        if shown.nodes:
            parts.append(_nodes(last))
            parts.append(_devices(last, shown))
        if shown.topology:
            parts.append(_topology(last.topology()))
    if shown.queues:
        parts.append(_plots(view.history()))
    if shown.policy:
        parts.append(_reloads(view, policy))
    if shown != Shown():
        parts.append('<p class="muted" id="filtered">Shown: what your Kubernetes RBAC lets you see.</p>')
    parts.append(f'<p class="muted">Refreshes every {REFRESH_S} s. JSON: <a href="/api/v1/queues">/api/v1/queues</a>, '
                 '/api/v1/queues/NAME/pending, /api/v1/explain/NS/NAME, <a href="/api/v1/topology">/api/v1/topology'
                 '</a>, <a href="/api/v1/devices">/api/v1/devices</a>; <a href="/metrics">/metrics</a>.</p>')
    parts.append("</body></html>\n")
    return "\n".join(parts)


# --- queues --------------------------------------------------------------------------------------

def _shown_resources(rows: Sequence[QueueRow], resources: Iterable[str]) -> list[str]:
    """cpu and memory, then what any queue uses or is given (GPUs and such)."""
    out = [r for r in ("cpu", "memory") if r in resources]
    for r in resources:
        if r not in out and any(q.allocated.get(r) or (q.deserved or {}).get(r) or q.capability.get(r)
                                for q in rows):
            out.append(r)
    return out


def _bar(resource: str, allocated: float, deserved: float | None, capability: float | None, scale: float) -> str:
    """allocated as a filled bar, deserved as a line, capability as the frame's end."""
    w = 160
    if scale <= 0:
        scale = 1.0
    def x(v: float) -> float:
        return round(min(v / scale, 1.0) * w, 1)
    title = f"allocated {readable_base_units(resource, allocated)}"
    marks = [f'<rect x="0" y="3" width="{w}" height="10" fill="#eee"/>',
             f'<rect class="allocated" x="0" y="3" width="{x(allocated)}" height="10" fill="#4a90d9"/>']
    if deserved is not None:
        marks.append(f'<line class="deserved" x1="{x(deserved)}" x2="{x(deserved)}" y1="0" y2="16" '
                     f'stroke="#2ca02c" stroke-width="2"/>')
        title += f", deserved {readable_base_units(resource, deserved)}"
    if capability is not None:
        marks.append(f'<line class="capability" x1="{x(capability)}" x2="{x(capability)}" y1="0" y2="16" '
                     f'stroke="#d62728" stroke-width="2"/>')
        title += f", capability {readable_base_units(resource, capability)}"
    return (f'<svg width="{w + 2}" height="16" role="img"><title>{h(title)}</title>{"".join(marks)}</svg> '
            f'<span class="muted">{h(readable_base_units(resource, allocated))}</span>')


def _queue_tree(view: CycleView) -> str:
    rows = view.queues
    facts = view.facts
    resources = _shown_resources(rows, facts.resources if facts is not None else ())
    totals: dict[str, int] = {}
    for node in facts.nodes if facts is not None else ():
        if node.schedulable:
            for r, v in node.allocatable.items():
                totals[r] = totals.get(r, 0) + v
    head = "".join(f"<th>{h(r)}</th>" for r in resources)
    out = ['<h2>Queues</h2><p class="muted">Bars: allocated (blue), deserved (green line), capability (red line), '
           'scaled to the cluster.</p>',
           f'<table id="queue-tree"><tr><th>queue</th><th>weight</th><th>share</th><th>pending jobs</th>{head}</tr>']
    for q in rows:
        indent = "&nbsp;" * 4 * q.depth + ("└ " if q.depth else "")
        state = "" if q.open else ' <span class="muted">(closed)</span>'
        cells = []
        for r in resources:
            cap = q.capability.get(r)
            cells.append("<td>" + _bar(r, q.allocated.get(r, 0), (q.deserved or {}).get(r), cap,
                                       float(totals.get(r, 0) or max(q.allocated.get(r, 0), cap or 0))) + "</td>")
        share = "-" if q.share is None else f"{q.share:.2f}"
        out.append(f'<tr class="queue" data-queue="{h(q.name)}"><td>{indent}<b>{h(q.name)}</b>{state}</td>'
                   f'<td class="num">{q.weight}</td><td class="num">{share}</td>'
                   f'<td class="num">{q.pending_jobs}</td>{"".join(cells)}</tr>')
    out.append("</table>")
    return "\n".join(out)


def _pending(view: CycleView, visible: Callable[[str], bool] = lambda namespace: True) -> str:
    out = ['<h2>Pending jobs</h2><p class="muted">In the order the next cycle considers them, per queue.</p>',
           '<table id="pending"><tr><th>queue</th><th>#</th><th>job</th><th>priority</th><th>phase</th>'
           '<th>minMember</th><th>waiting pods</th><th>why it waits</th></tr>']
    shown = 0
    for q in view.queues:
        jobs = view.pending(q.name)
        for job in jobs[:PENDING_SHOWN]:
            if not visible(job.key.partition("/")[0] if "/" in job.key else "default"):
                continue
            shown += 1
            out.append(f'<tr class="pending-job" data-job="{h(job.key)}"><td>{h(q.name)}</td>'
                       f'<td class="num">{job.position}</td><td>{h(job.key)}</td><td class="num">{job.priority}</td>'
                       f'<td>{h(job.phase)}</td><td class="num">{job.min_member}</td>'
                       f'<td class="num">{job.waiting_pods}</td><td class="reason">{h(job.reason)}</td></tr>')
        if len(jobs) > PENDING_SHOWN or q.pending_jobs > len(jobs):
            out.append(f'<tr><td>{h(q.name)}</td><td colspan="7" class="muted">… {q.pending_jobs - PENDING_SHOWN} '
                       f'more (/api/v1/queues/{h(q.name)}/pending)</td></tr>')
    if not shown:
        out.append('<tr><td colspan="8" class="muted">nothing waits</td></tr>')
    out.append("</table>")
    return "\n".join(out)


# --- nodes ---------------------------------------------------------------------------------------

def _nodes(view: CycleView) -> str:
    facts = view.facts
    if facts is None:
        return ""
    resources = [r for r in facts.resources]
    total = {r: sum(n.allocatable.get(r, 0) for n in facts.nodes if n.schedulable) for r in resources}
    used = {r: sum(n.used.get(r, 0) for n in facts.nodes if n.schedulable) for r in resources}
    fragmentation = view.fragmentation()
    out = ['<h2>Nodes</h2>', '<table id="utilization"><tr><th>resource</th><th>used</th><th>allocatable</th>'
           '<th>utilization</th><th>fragmented free</th></tr>']
    for r in resources:
        part = used[r] / total[r] if total[r] else 0.0
        frag = fragmentation.get(r)
        out.append(f'<tr><td>{h(r)}</td><td class="num">{h(readable_base_units(r, used[r]))}</td>'
                   f'<td class="num">{h(readable_base_units(r, total[r]))}</td><td class="num">{part:.0%}</td>'
                   f'<td class="num">{"-" if frag is None else f"{frag:.0%}"}</td></tr>')
    for r, frag in sorted(fragmentation.items()):
        if r not in resources:
            out.append(f'<tr><td>{h(r)} (per card)</td><td colspan="3"></td><td class="num">{frag:.0%}</td></tr>')
    out.append('</table><p class="muted">Fragmented free: of the free capacity on nodes (cards) that could hold a '
               'waiting pod were they empty, the part where none fits now.</p>')
    if facts.cards:
        out.append('<table id="cards"><tr><th>node</th><th>device</th><th>cards</th><th>idle</th><th>whole</th>'
                   '<th>shared</th><th>card memory used</th></tr>')
        for c in facts.cards[:NODES_SHOWN]:
            memory = f"{readable_base_units('memory', c.used_memory)} / {readable_base_units('memory', c.memory)}" \
                if c.memory else "-"
            out.append(f'<tr><td>{h(c.node)}</td><td>{h(c.resource)}</td><td class="num">{c.cards}</td>'
                       f'<td class="num">{c.idle}</td><td class="num">{c.whole}</td><td class="num">{c.shared}</td>'
                       f'<td class="num">{h(memory)}</td></tr>')
        out.append("</table>")

    def busiest(n) -> float:
        return max((n.used.get(r, 0) / v for r, v in n.allocatable.items() if v), default=0.0)

    nodes = sorted(facts.nodes, key=busiest, reverse=True)[:NODES_SHOWN]
    head = "".join(f"<th>{h(r)}</th>" for r in resources)
    out.append(f'<details><summary>{len(facts.nodes)} nodes (the {len(nodes)} busiest)</summary>'
               f'<table id="nodes"><tr><th>node</th>{head}</tr>')
    for n in nodes:
        cells = "".join(f'<td class="num">{_fraction(n.used.get(r, 0), n.allocatable.get(r, 0))}</td>'
                        for r in resources)
        flag = "" if n.schedulable else ' <span class="muted">(cordoned)</span>'
        out.append(f"<tr><td>{h(n.name)}{flag}</td>{cells}</tr>")
    out.append("</table></details>")
    return "\n".join(out)


# --- devices -------------------------------------------------------------------------------------

def _devices(view: CycleView, shown: Shown) -> str:
    """Each shared card (memory, cores, tasks of its split: used and free; the pods holding it), the
    nodes whose free card memory is split so that no waiting pod uses it, DRA devices per
    DeviceClass and node (runtime/service/devices.py). Nothing without cards or DRA devices."""
    facts = device_facts(view)
    classes = facts.classes if shown.device_classes else ()
    if not facts.cards and not classes:
        return ""
    out = ['<h2>Devices</h2>']
    if facts.cards:
        out.append('<p class="muted">Per card: memory and cores used of the card, tasks of its split count; '
                   'free only where the card takes one more task (healthy, not taken whole, under its split).</p>')
        out.append('<table id="device-cards"><tr><th>node</th><th>device</th><th>card</th><th>memory used</th>'
                   '<th>memory free</th><th>cores used</th><th>cores free</th><th>tasks / split</th>'
                   '<th>pods</th></tr>')
        for c in facts.cards[:CARDS_SHOWN]:
            names = [p for p in c.holders if shown.namespace(p.partition("/")[0] if "/" in p else "default")]
            extra, hidden = max(0, len(names) - HOLDERS_SHOWN), len(c.holders) - len(names)
            pods = ", ".join(h(p) for p in names[:HOLDERS_SHOWN])
            pods += f' <span class="muted">+{extra} more</span>' if extra else ""
            pods += f' <span class="muted hidden-pods">+{hidden} hidden</span>' if hidden else ""
            state = "" if c.healthy else ' <span class="muted">(unhealthy)</span>'
            state += ' <span class="muted">(whole)</span>' if c.whole else ""
            label = f"{c.index}" + (f" {c.uuid}" if c.uuid else "")
            memory = f"{_mem(c.used_memory)} / {_mem(c.memory)}" if c.memory else "-"
            split = f"{c.tasks} / {c.split}" if c.split is not None else f"{c.tasks}"
            out.append(f'<tr class="device-card" data-node="{h(c.node)}" data-device="{h(c.device)}" '
                       f'data-card="{c.index}"><td>{h(c.node)}</td><td>{h(c.device)}</td><td>{h(label)}{state}</td>'
                       f'<td class="num">{h(memory)}</td><td class="num">{h(_mem(c.free_memory))}</td>'
                       f'<td class="num">{_percent(c.used_cores)}</td><td class="num">{_percent(c.free_cores)}</td>'
                       f'<td class="num">{h(split)}</td><td>{pods or "-"}</td></tr>')
        if len(facts.cards) > CARDS_SHOWN:
            out.append(f'<tr><td colspan="9" class="muted">… {len(facts.cards) - CARDS_SHOWN} more cards '
                       '(/api/v1/devices)</td></tr>')
        out.append("</table>")
    if facts.split:
        out.append('<table id="split-cards"><tr><th>node</th><th>device</th><th>card memory free, split</th>'
                   '<th>why no waiting pod uses it</th></tr>')
        for s in facts.split:
            out.append(f'<tr class="split-node" data-node="{h(s.node)}"><td>{h(s.node)}</td><td>{h(s.device)}</td>'
                       f'<td class="num">{h(_mem(s.free))}</td><td class="reason">{h(s.sentence())}</td></tr>')
        out.append("</table>")
    if classes:
        out.append('<p class="muted">Dynamic Resource Allocation: per DeviceClass, the devices ResourceSlices '
                   'publish that its selectors match, and how many claims hold (this cycle\'s included).</p>')
        out.append('<table id="device-classes"><tr><th>DeviceClass</th><th>node</th><th>allocated</th>'
                   '<th>published</th><th>free</th></tr>')
        for row in classes[:CLASS_ROWS_SHOWN]:
            out.append(f'<tr class="device-class" data-class="{h(row.device_class)}" data-node="{h(row.node)}">'
                       f'<td>{h(row.device_class)}</td><td>{h(row.node)}</td><td class="num">{row.allocated}</td>'
                       f'<td class="num">{row.published}</td><td class="num">{row.published - row.allocated}</td></tr>')
        if len(classes) > CLASS_ROWS_SHOWN:
            out.append(f'<tr><td colspan="5" class="muted">… {len(classes) - CLASS_ROWS_SHOWN} more '
                       '(/api/v1/devices)</td></tr>')
        out.append("</table>")
    return "\n".join(out)


def _percent(value: int | None) -> str:
    return "-" if value is None else f"{value}%"


def _mem(value: int) -> str:
    return readable_base_units("memory", value) if value else "0"


# --- network topology ----------------------------------------------------------------------------

def _topology(facts: TopologyFacts | None) -> str:
    """HyperNodes by tier with their free room, and each running gang's span (the lowest tier of one
    HyperNode holding all its pods). Nothing without HyperNodes."""
    if facts is None:
        return ""
    resources: list[str] = []
    for hn in facts.hypernodes:
        for r in hn.free:
            if r not in resources:
                resources.append(r)
    resources.sort(key=lambda r: (r not in ("cpu", "memory"), r != "cpu", r))
    source = (f'derived from node labels ({h(facts.derived_from)})' if facts.derived_from
              else "from HyperNode objects")
    out = [f'<h2>Network topology</h2><p class="muted">HyperNodes {source}; tiers {h(", ".join(map(str, facts.tiers)) or "-")}.'
           ' Free: allocatable less what pods hold, summed over the schedulable nodes of each HyperNode.</p>']
    for problem in facts.problems:
        out.append(f'<p class="topology-problem">{h(problem)}</p>')
    head = "".join(f"<th>free {h(r)}</th>" for r in resources)
    out.append(f'<table id="hypernodes"><tr><th>tier</th><th>HyperNode</th><th>labels</th><th>parent</th>'
               f'<th>nodes</th>{head}</tr>')
    for hn in facts.hypernodes[:HYPERNODES_SHOWN]:
        cells = "".join(f'<td class="num">{h(readable_base_units(r, hn.free.get(r, 0)))}</td>' for r in resources)
        out.append(f'<tr class="hypernode" data-hypernode="{h(hn.name)}" data-tier="{hn.tier}"><td class="num">'
                   f'{hn.tier}</td><td>{h(hn.name)}</td><td>{h(hn.labels or "-")}</td><td>{h(hn.parent or "-")}</td>'
                   f'<td class="num">{hn.nodes}</td>{cells}</tr>')
    if len(facts.hypernodes) > HYPERNODES_SHOWN:
        out.append(f'<tr><td colspan="{5 + len(resources)}" class="muted">… {len(facts.hypernodes) - HYPERNODES_SHOWN}'
                   ' more (/api/v1/topology)</td></tr>')
    out.append("</table>")
    out.append('<table id="spans"><tr><th>running gang</th><th>queue</th><th>pods</th><th>nodes</th><th>tier</th>'
               '<th>HyperNode</th></tr>')
    for g in facts.spans[:SPANS_SHOWN]:
        tier = "-" if g.span.tier is None else str(g.span.tier)
        where = g.span.hypernode or "no one HyperNode (spans the cluster)"
        out.append(f'<tr class="span" data-podgroup="{h(g.podgroup)}" data-tier="{h(tier)}" '
                   f'data-hypernode="{h(g.span.hypernode or "")}"><td>{h(g.podgroup)}</td><td>{h(g.queue)}</td>'
                   f'<td class="num">{g.pods}</td><td class="num">{g.span.nodes}</td><td class="num">{tier}</td>'
                   f'<td>{h(where)}</td></tr>')
    if not facts.spans:
        out.append('<tr><td colspan="6" class="muted">no gang runs</td></tr>')
    elif facts.running_gangs > SPANS_SHOWN:
        out.append(f'<tr><td colspan="6" class="muted">… {facts.running_gangs - SPANS_SHOWN} more '
                   '(/api/v1/topology)</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def _fraction(used: int, allocatable: int) -> str:
    return f"{used / allocatable:.0%}" if allocatable else "-"


# --- plots ---------------------------------------------------------------------------------------

def _plots(history: Sequence[HistorySample]) -> str:
    out = ['<h2>The last hour</h2><div class="grid">']
    out.append(_plot("plot-shares", "Queue share (allocated / deserved)", history,
                     lambda s: s.shares))
    out.append(_plot("plot-pending", "Pending jobs per queue", history, lambda s: s.pending_jobs))
    out.append("</div>")
    return "\n".join(out)


def _plot(ident: str, title: str, history: Sequence[HistorySample], series_of) -> str:
    names = sorted({name for s in history for name in series_of(s)})
    left, bottom, top = 40, 20, 10
    w, hgt = PLOT_W - left - 10, PLOT_H - bottom - top
    if len(history) < 1 or not names:
        return (f'<figure><figcaption>{h(title)}</figcaption><svg id="{ident}" width="{PLOT_W}" height="{PLOT_H}">'
                f'<text x="{left}" y="{PLOT_H // 2}" class="muted">no samples yet (one every 10 s)</text>'
                f'</svg></figure>')
    t0, t1 = history[0].at, max(history[-1].at, history[0].at + 1)
    peak = max((series_of(s).get(n, 0) for s in history for n in names), default=0) or 1
    peak = float(peak)

    def xy(s: HistorySample, n: str) -> str:
        x = left + (s.at - t0) / (t1 - t0) * w
        y = top + hgt - (series_of(s).get(n, 0) / peak) * hgt
        return f"{x:.1f},{y:.1f}"

    marks = [f'<line x1="{left}" y1="{top + hgt}" x2="{left + w}" y2="{top + hgt}" stroke="#999"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + hgt}" stroke="#999"/>',
             f'<text x="2" y="{top + 8}">{peak:g}</text><text x="2" y="{top + hgt}">0</text>',
             f'<text x="{left}" y="{PLOT_H - 4}">{h(time.strftime("%H:%M", time.localtime(t0)))}</text>',
             f'<text x="{left + w - 30}" y="{PLOT_H - 4}">{h(time.strftime("%H:%M", time.localtime(t1)))}</text>']
    legend = []
    for i, n in enumerate(names):
        color = COLORS[i % len(COLORS)]
        points = " ".join(xy(s, n) for s in history)
        if len(history) == 1:
            x, y = xy(history[0], n).split(",")
            marks.append(f'<circle class="series" data-series="{h(n)}" cx="{x}" cy="{y}" r="3" fill="{color}"/>')
        else:
            marks.append(f'<polyline class="series" data-series="{h(n)}" fill="none" stroke="{color}" '
                         f'stroke-width="1.5" points="{points}"/>')
        legend.append(f'<span style="color:{color}">■</span> {h(n)}')
    return (f'<figure><figcaption>{h(title)}</figcaption><svg id="{ident}" width="{PLOT_W}" height="{PLOT_H}" '
            f'role="img">{"".join(marks)}</svg><div>{" ".join(legend)}</div></figure>')


# --- the policy ----------------------------------------------------------------------------------

def _reloads(view: LiveView, policy: Mapping[str, Any] | None) -> str:
    out = ['<h2>Policy</h2>']
    if policy:
        sources = ", ".join(policy.get("sources") or []) or "-"
        out.append(f'<p>active: <b>{h(policy.get("name"))}</b> version {h(policy.get("version"))}, revision '
                   f'<code>{h(policy.get("revision"))}</code>, loaded {h(policy.get("loaded_at") or "-")} from '
                   f'{h(sources)}</p>')
        last = policy.get("last_reload")
        if last:
            errors = "; ".join(last.get("errors") or [])
            out.append(f'<p>last reload: {h(last.get("result"))} ({h(last.get("trigger"))}, {h(last.get("at"))})'
                       f'{": " + h(errors) if errors else ""}</p>')
    out.append('<table id="reloads"><tr><th>when</th><th>revision</th><th>result</th><th>detail</th></tr>')
    for r in reversed(view.reloads()):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.at))
        out.append(f'<tr><td>{h(when)}</td><td><code>{h(r.revision)}</code></td><td>{h(r.result)}</td>'
                   f'<td>{h(r.detail)}</td></tr>')
    out.append("</table>")
    return "\n".join(out)
