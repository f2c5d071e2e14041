"""What a platform engineer looks for first in a run, computed from what each cycle decided.

`Watch.observe` runs after every cycle on that cycle's session and keeps intervals, not
samples: while a job is *held* (admitted — its PodGroup Inqueue, its minResources counted
as admission room — but not placed: fewer than minMember of its pods run) and while a job is
*refused admission* (its reasons of kind `enqueue`, with the resources it was short of). An
interval opens at the first cycle that sees the condition and closes at the first cycle that
does not (cycles the simulator skips change nothing, so the condition held through them).

From these, at the end (`Watch.findings`):
- head-of-line blocking: a held job whose hold lasted at least LONG_SPAN and behind which
  jobs were refused admission on a resource its minResources holds (a refusal by a queue's
  limit counts only behind jobs in that queue's subtree);
- starved siblings: a queue none of whose jobs was admitted for at least LONG_SPAN while
  some were refused, and a sibling queue (same parent) held a job it could not place for at
  least LONG_SPAN of that span;
- jobs naming a queue that does not exist (they never run);
- the longest waits (`Simulation` passes them in), each with its job's last reasons.

Each finding names the pod or PodGroup `explain` should look at and a simulated time inside
the span, so the CLI can print the next command to run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from compiler.quantities import readable_base_units
from runtime.cluster import decisions as d
from runtime.cluster.model import PG_INQUEUE, PG_PENDING
from runtime.simulation.workload import format_duration

# A hold or a starved span shorter than this is ordinary queueing, not a finding.
LONG_SPAN = 300.0
# Blocking findings shown (the rest are counted in the last one's text), jobs named per list.
MAX_BLOCKERS = 3
MAX_NAMED = 6
LONGEST_WAITS = 5

# Finding kinds (the JSON's "kind").
HEAD_OF_LINE = "head-of-line blocking"
STARVED = "starved queue"
MISSING_QUEUE = "missing queue"
NEVER_STARTED = "never started"
THRASHING = "thrashing"
PROMISE = "promise beyond cluster"
DEVICE = "device matches no node"


@dataclass(frozen=True)
class Finding:
    """One thing a reader should not miss: a sentence, the jobs it is about, and where to look
    next (`explain` of `subject` at simulated time `at`; None: the end of the run)."""

    kind: str
    text: str
    jobs: tuple[str, ...] = ()
    subject: str | None = None
    at: float | None = None

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "jobs": list(self.jobs), "explain": self.subject,
                "at": self.at}


@dataclass(frozen=True)
class Wait:
    """A job's longest wait: from `since` for `seconds` (to its start, or to the end when it never
    started), with its last reasons before it started."""

    job: str
    queue: str
    since: float
    seconds: float
    started: bool
    reasons: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"job": self.job, "queue": self.queue, "since": self.since, "wait": self.seconds,
                "started": self.started, "reasons": list(self.reasons)}


@dataclass
class _Span:
    job: str
    queue: str
    start: float
    end: float | None = None
    reason: str = ""
    # held: the admission room it holds (resource -> amount); refused: the resources it was short of
    resources: Mapping[str, int] | frozenset[str] = field(default_factory=dict)
    scope: str | None = None        # refused by a queue's limit: that queue (None: cluster-wide)

    def until(self, end: float) -> float:
        return self.end if self.end is not None else end


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _count(items: list, noun: str) -> str:
    return f"{len(items)} {noun}" + ("" if len(items) == 1 else "s")


def _names(jobs: list[str]) -> str:
    shown = ", ".join(jobs[:MAX_NAMED])
    return shown + (f" and {len(jobs) - MAX_NAMED} more" if len(jobs) > MAX_NAMED else "")


class Watch:
    def __init__(self) -> None:
        self.held: list[_Span] = []
        self.refused: list[_Span] = []
        self._held_open: dict[str, _Span] = {}
        self._refused_open: dict[str, _Span] = {}
        self.admitted: dict[str, list[float]] = {}        # leaf queue -> times a job of it was admitted
        self._phase: dict[str, str] = {}
        self.missing: dict[str, str] = {}                 # job -> the queue it names, which does not exist
        self.parent: dict[str, str | None] = {}           # queue -> its parent (None: under root)
        self.last_reasons: dict[str, tuple[str, ...]] = {}  # job -> its pods' last reasons

    def observe(self, now: float, ssn, ready: Callable[[str], bool]) -> None:
        """After a cycle's decisions were applied: `ready(job key)` tells whether minMember of its
        pods run."""
        snap = ssn.snap
        task_reasons_of: dict[int, list] = {}
        for t, reasons in ssn.task_reasons.items():
            if reasons:
                task_reasons_of.setdefault(int(snap.task_job[t]), []).extend(reasons)
        if not self.parent:
            for q in snap.queues[1:]:
                self.parent[q.name] = snap.queues[q.parent].name if q.parent > 0 else None
        held: set[str] = set()
        refused: set[str] = set()
        for job in snap.jobs:
            j, key = job.index, job.key
            phase = ssn.job_phase[j]
            before = self._phase.get(key)
            self._phase[key] = phase
            job_reasons = ssn.job_reasons.get(j, ())
            task_reasons = task_reasons_of.get(j, ())
            if task_reasons or job_reasons:
                self.last_reasons[key] = tuple(dict.fromkeys(r.message for r in (*task_reasons, *job_reasons)))
            if job.queue < 0:
                if job.podgroup is not None and job.podgroup.problem is None and not any(
                        q.name == job.queue_name for q in snap.queues):
                    self.missing[key] = job.queue_name
                continue
            if before == PG_PENDING and phase != PG_PENDING:
                self.admitted.setdefault(job.queue_name, []).append(now)
            if phase == PG_PENDING:
                # refused admission: by an enqueue plugin (cluster-wide, overcommit) or by its queue's
                # or an ancestor's limit at admission (a QUEUE reason naming resources: proportion, capacity)
                enqueue = next((r for r in job_reasons if r.kind == d.ENQUEUE or
                                (r.kind == d.QUEUE and r.details.get("resources"))), None)
                if enqueue is not None:
                    refused.add(key)
                    if key not in self._refused_open:
                        shorts = enqueue.details.get("resources") or ()
                        self._refused_open[key] = _Span(key, job.queue_name, now, reason=enqueue.message,
                                                        resources=frozenset(shorts),
                                                        scope=enqueue.details.get("queue"))
                continue
            if phase == PG_INQUEUE and not ready(key) and job.podgroup is not None \
                    and job.podgroup.min_resources:
                held.add(key)
                # the most telling reason: a queue's limit or the nodes, before "gang short by N"
                why = next((r for r in task_reasons if r.kind not in (d.GANG, d.MEMBERS)), None) or \
                    next(iter(task_reasons), None) or next(iter(job_reasons), None)
                span = self._held_open.get(key)
                if span is None:
                    span = self._held_open[key] = _Span(key, job.queue_name, now,
                                                        resources={r: v for r, v in job.podgroup.min_resources.items()
                                                                   if v > 0})
                if why is not None:
                    span.reason = why.message
        self._close(self._held_open, held, self.held, now)
        self._close(self._refused_open, refused, self.refused, now)

    @staticmethod
    def _close(open_spans: dict[str, _Span], seen: set[str], done: list[_Span], now: float) -> None:
        for key in [k for k in open_spans if k not in seen]:
            span = open_spans.pop(key)
            span.end = now
            done.append(span)

    def finish(self, end: float) -> None:
        for opened, done in ((self._held_open, self.held), (self._refused_open, self.refused)):
            for span in opened.values():
                span.end = end
                done.append(span)
            opened.clear()

    # --- the findings -----------------------------------------------------------------
    def _under(self, queue: str, ancestor: str) -> bool:
        seen: set[str] = set()
        cur: str | None = queue
        while cur is not None and cur not in seen:
            if cur == ancestor:
                return True
            seen.add(cur)
            cur = self.parent.get(cur)
        return False

    def _behind(self, blocker: _Span, end: float) -> list[_Span]:
        """Jobs refused admission while `blocker` held room, on a resource it holds."""
        b0, b1 = blocker.start, blocker.until(end)
        out = []
        for r in self.refused:
            if r.job == blocker.job or _overlap(b0, b1, r.start, r.until(end)) <= 0:
                continue
            if not any(res in blocker.resources for res in r.resources):
                continue
            if r.scope is not None and not self._under(blocker.queue, r.scope):
                continue
            out.append(r)
        return out

    def findings(self, end: float, totals: Mapping[str, int], samples: Iterable[Any]) -> list[Finding]:
        samples = list(samples)
        out: list[Finding] = []
        out += self._blocking(end, totals, samples)
        out += self._starved(end)
        out += self._missing()
        return out

    def _idle(self, start: float, stop: float, resource: str, totals: Mapping[str, int], samples: list) -> str:
        """The resource's mean idle amount over [start, stop) from the per-cycle samples ("" unknown)."""
        total = totals.get(resource)
        if not total:
            return ""
        weighted, length = 0.0, 0.0
        for a, b in zip(samples, samples[1:] + [None]):
            t1 = b.time if b is not None else stop
            w = _overlap(start, stop, a.time, t1)
            if w > 0:
                weighted += w * (1.0 - a.utilization.get(resource, 0.0))
                length += w
        if not length:
            return ""
        return readable_base_units(resource, round(weighted / length * total))

    def _blocking(self, end: float, totals: Mapping[str, int], samples: list) -> list[Finding]:
        ranked = []
        for span in self.held:
            hold = span.until(end) - span.start
            if hold < LONG_SPAN:
                continue
            behind = self._behind(span, end)
            if behind:
                cost = sum(_overlap(span.start, span.until(end), r.start, r.until(end)) for r in behind)
                ranked.append((-cost, span.start, span, behind))
        ranked.sort(key=lambda item: (item[0], item[1]))
        out = []
        for n, (_, _, span, behind) in enumerate(ranked[:MAX_BLOCKERS]):
            stop = span.until(end)
            room = ", ".join(f"{r} {readable_base_units(r, v)}" for r, v in sorted(span.resources.items()))
            waiters = sorted({r.job for r in behind})
            queues = sorted({r.queue for r in behind})
            short = sorted({res for r in behind for res in r.resources if res in span.resources})
            idle = [f"{res} {amount}" for res in short if (amount := self._idle(span.start, stop, res, totals,
                                                                                   samples))]
            text = (f"{HEAD_OF_LINE}: {span.job} (queue {span.queue}) was admitted at {format_duration(span.start)} "
                    f"and held {room} of admission room for {format_duration(stop - span.start)} without being "
                    f"placed ({span.reason or 'no reason recorded'}); {_count(waiters, 'job')} waited for admission "
                    f"behind it (queue {', '.join(queues)}): {_names(waiters)}")
            if idle:
                text += f"; meanwhile idle on average: {', '.join(idle)}"
            if n == min(len(ranked), MAX_BLOCKERS) - 1 and len(ranked) > MAX_BLOCKERS:
                rest = [s.job for _, _, s, _ in ranked[MAX_BLOCKERS:]]
                text += f" (also blocking, less: {_names(rest)})"
            out.append(Finding(HEAD_OF_LINE, text, (span.job, *waiters), span.job,
                               _inside(span.start, stop)))
        return out

    def _starved(self, end: float) -> list[Finding]:
        out = []
        by_queue: dict[str, list[_Span]] = {}
        for r in self.refused:
            by_queue.setdefault(r.queue, []).append(r)
        for queue, spans in sorted(by_queue.items()):
            best = None
            for start, stop in _starved_spans(spans, self.admitted.get(queue, []), end):
                if stop - start < LONG_SPAN:
                    continue
                siblings = [h for h in self.held if h.queue != queue and self.parent.get(h.queue) ==
                            self.parent.get(queue) and _overlap(start, stop, h.start, h.until(end)) >= LONG_SPAN]
                if siblings and (best is None or stop - start > best[1] - best[0]):
                    best = (start, stop, siblings)
            if best is None:
                continue
            start, stop, siblings = best
            waiting = sorted({r.job for r in spans if _overlap(start, stop, r.start, r.until(end)) > 0})
            holders = sorted(siblings, key=lambda h: h.start)
            held = "; ".join(f"{h.job} (queue {h.queue}, {format_duration(h.start)}-{format_duration(h.until(end))}"
                             f": {h.reason or 'not placed'})" for h in holders[:MAX_NAMED])
            parent = self.parent.get(queue) or "root"
            text = (f"{STARVED}: no job of queue {queue} was admitted for {format_duration(stop - start)} "
                    f"({format_duration(start)}-{format_duration(stop)}) while {len(waiting)} of its jobs waited for "
                    f"admission, and sibling queues under {parent} held admitted jobs they could not place: {held}")
            out.append(Finding(STARVED, text, tuple(waiting), waiting[0] if waiting else None,
                               _inside(start, stop)))
        return out

    def _missing(self) -> list[Finding]:
        by_queue: dict[str, list[str]] = {}
        for job, queue in self.missing.items():
            by_queue.setdefault(queue, []).append(job)
        out = []
        for queue, jobs in sorted(by_queue.items()):
            jobs.sort()
            some = f"{len(jobs)} jobs name" if len(jobs) > 1 else "1 job names"
            out.append(Finding(MISSING_QUEUE, f"{MISSING_QUEUE}: {some} queue `{queue}`, which neither the policy nor "
                                              f"a Queue object declares, so {'they' if len(jobs) > 1 else 'it'} never "
                                              f"run{'' if len(jobs) > 1 else 's'}: {_names(jobs)}",
                               tuple(jobs), jobs[0], None))
        return out


def _starved_spans(spans: list[_Span], admissions: list[float], end: float) -> list[tuple[float, float]]:
    """The spans during which some job of the queue was refused admission and none was admitted."""
    merged: list[list[float]] = []
    for s in sorted(spans, key=lambda s: s.start):
        a, b = s.start, s.until(end)
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out = []
    cuts = sorted(admissions)
    for a, b in merged:
        inner = [t for t in cuts if a < t < b]
        points = [a, *inner, b]
        out.extend(zip(points, points[1:]))
    return out


def _inside(start: float, stop: float) -> float:
    """A round simulated time inside [start, stop) to explain at: the middle, to the minute when the
    span is long enough."""
    middle = (start + stop) / 2
    rounded = round(middle / 60) * 60
    return float(rounded) if start < rounded < stop else middle


def longest_waits(waits: Mapping[str, tuple[str, float, float, bool]], reasons: Mapping[str, tuple[str, ...]],
                  count: int = LONGEST_WAITS) -> list[Wait]:
    """The `count` longest waits (job -> (queue, since, seconds, started)), longest first."""
    ranked = sorted(waits.items(), key=lambda kv: (-kv[1][2], kv[0]))
    return [Wait(job, queue, since, seconds, started, reasons.get(job, ()))
            for job, (queue, since, seconds, started) in ranked[:count] if seconds > 0]
