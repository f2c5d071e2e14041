"""tdm: time division multiplexing of revocable nodes, as Volcano's tdm plugin.

A node labelled volcano.sh/revocable-zone=<zone> is revocable: lent to batch work during the
zone's daily window (the plugin's `revocable_zones`, Volcano's `tdm.revocable-zone.<zone>:
"HH:MM-HH:MM"`), read on the cycle's clock (Session.now: the simulator's virtual time, the
service's wall time), in UTC. Then, as Volcano:
- predicate: a revocable node takes only pods whose revocable zone is "*" (annotation
  volcano.sh/revocable-zone: "*", or, without it, volcano.sh/preemptable: true), and only while
  its zone is configured and its window open (Volcano's fit-error words);
- node_order: such a pod scores 100 on an open revocable node (others 0), so it goes there first;
- preemptable: a preemptor that is preemptable (volcano.sh/preemptable unset or true, as Volcano's
  task default) or revocable takes no victims; others take running preemptable pods off
  non-revocable nodes, at most each job's disruption budget (below);
- victim (the shuffle action): once a zone's window has closed, the running preemptable pods on
  its nodes, each job's budget at a time, at most once every `evict_period`;
- job_order: jobs that are not preemptable (PodGroup volcano.sh/preemptable) first;
  job_pipelined: PERMIT when ready + pipelined (+ pending best-effort) tasks reach minMember,
  else REJECT; job_starving: a job that is not preemptable with a pending task.
A job's budget: with volcano.sh/jdb-min-available (an integer, or a percent of its tasks rounded
up) its running pods above it; else with volcano.sh/jdb-max-unavailable the budget less its pods
not running (pending); else 1.

Differences (runtime/README.md): a window that runs past midnight (22:00-06:00) is open after
midnight too (Volcano dates both ends from today, so it is closed from 00:00 to 06:00); a job at or
below its jdb-min-available loses no pod (Volcano falls back to one); `evict_period` counts on the
cycle's clock from this scheduler's first eviction look (Volcano's is a process global), and a
malformed window or period is an error at lint and import (Volcano keeps the zone closed, or the
period at 1m)."""

from __future__ import annotations

import math
import re
import time

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.extension import PERMIT, REJECT, Check
from runtime.engine.plugins.base import Plugin
from runtime.engine.plugins.cdp import go_duration
from runtime.engine.plugins.rescheduling import PeriodGate
from runtime.engine.session import Verdict
from runtime.engine.snapshot import BOUND, PENDING, SUCCEEDED

REVOCABLE_ZONE = "volcano.sh/revocable-zone"
MAX_NODE_SCORE = 100.0
DAY = 86400
DEFAULT_EVICT_PERIOD = 60.0
_CLOCK = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


def parse_window(text: str) -> tuple[int, int] | None:
    """(start, length) in seconds of day of a window "HH:MM-HH:MM", as Volcano's parseRevocableZone:
    a start at or after the end runs to the end on the next day (so 0:00-0:00 is the whole day);
    None when it does not parse."""
    parts = text.strip().split("-")
    if len(parts) != 2:
        return None
    clocks = [_CLOCK.fullmatch(p) for p in parts]
    if not all(clocks):
        return None
    start, end = ((int(m.group(1)) * 60 + int(m.group(2))) * 60 for m in clocks)
    return start, end - start if end > start else end + DAY - start


def window_open(window: tuple[int, int], now: float) -> bool:
    """Whether `now` (seconds since the epoch, UTC) is within the window begun most recently
    (its end second included, as Volcano compares Unix seconds)."""
    start, length = window
    since = (int(now) % DAY - start) % DAY
    return since <= length


def budget_count(value: str, tasks: int) -> int:
    """An IntOrString budget as Volcano reads it: an integer, or a percent of `tasks` rounded up;
    anything else is 0 (Volcano logs a warning)."""
    text = value.strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if re.fullmatch(r"\d+%", text):
        return math.ceil(int(text[:-1]) * tasks / 100)
    return 0


def evictable_count(ssn, j: int) -> int:
    """How many running pods job j may lose now (Volcano's getMaxPodEvictNum)."""
    job = ssn.snap.jobs[j]
    status = ssn.status[job.tasks]
    running = int(np.count_nonzero(status == BOUND))
    total = len(job.tasks)
    group = job.podgroup
    min_available, max_unavailable = group.budget if group is not None else ("", "")
    if min_available:
        least = budget_count(min_available, total)
        return max(running - least, 0)
    if max_unavailable:
        most = budget_count(max_unavailable, total)
        unavailable = total - int(np.count_nonzero(status == SUCCEEDED)) - running
        return max(most - unavailable, 0)
    return 1


def by_job_budget(ssn, tasks: list[int]) -> list[int]:
    """`tasks` (running preemptable pods) cut to each job's budget, lowest priority and newest first
    within a job (Volcano takes them in map order)."""
    snap = ssn.snap
    per_job: dict[int, list[int]] = {}
    for t in tasks:
        per_job.setdefault(int(snap.task_job[t]), []).append(t)
    out: list[int] = []
    for j, mine in per_job.items():
        mine.sort(key=lambda t: (int(snap.task_priority[t]), -snap.pods[t].creation, t))
        out.extend(mine[:evictable_count(ssn, j)])
    return out


class TdmPlugin(Plugin):
    name = "tdm"
    answers = frozenset({"predicate", "node_order", "preemptable", "victim", "job_order", "job_pipelined",
                         "job_starving"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        windows = {zone: parse_window(w) for zone, w in (self.args.get("revocable_zones") or {}).items()}
        raw = {zone: w.strip() for zone, w in (self.args.get("revocable_zones") or {}).items()}
        period = go_duration(str(self.args.get("evict_period") or "1m"))
        period = DEFAULT_EVICT_PERIOD if period is None or period < 0 else period
        zone_of = [n.labels.get(REVOCABLE_ZONE, "") for n in snap.node_objects]
        revocable = np.array([bool(z) for z in zone_of], dtype=bool)
        jobs = snap.jobs
        weight = float(self.spec.weight if self.spec.weight is not None else 1.0)

        def now() -> float:
            # The cycle's clock (set when the cycle starts, after plugins open); wall time without one.
            return ssn.now if ssn.now is not None else time.time()

        def open_zones() -> dict[str, bool]:
            at = now()
            return {z: w is not None and window_open(w, at) for z, w in windows.items()}

        def zone_nodes(zones: dict[str, bool], state: bool) -> np.ndarray:
            return np.array([bool(z) and z in zones and zones[z] is state for z in zone_of], dtype=bool)

        def predicate(cls) -> list[Check]:
            if not revocable.any():
                return []
            zones = open_zones()
            unknown = np.array([bool(z) and z not in windows for z in zone_of], dtype=bool)
            checks = []
            if unknown.any():
                names = sorted({z for z, u in zip(zone_of, unknown) if u})
                checks.append(Check(f"revocable zone {', '.join(names)} not support", ~unknown))
            closed = zone_nodes(zones, False)
            if closed.any():
                names = sorted({z for z, c in zip(zone_of, closed) if c})
                checks.append(Check("current time beyond revocable zone " +
                                    ", ".join(f"{z}:{raw[z]}" for z in names), ~closed))
            if snap.pods[cls.head].revocable_zone != "*":
                checks.append(Check("not allow to dispatch to revocable node", ~revocable))
            return checks

        def score(cls) -> np.ndarray | None:
            if not revocable.any() or snap.pods[cls.head].revocable_zone != "*":
                return None
            return zone_nodes(open_zones(), True).astype(np.float64) * MAX_NODE_SCORE * weight

        def preemptable(preemptor: int, candidates: list[int]) -> list[int]:
            pod = snap.pods[preemptor]
            if pod.preemptable or pod.revocable_zone:
                return []     # preemptable and revocable work preempts nobody
            return by_job_budget(ssn, [c for c in candidates if snap.pods[c].preemptable and ssn.status[c] == BOUND
                                       and ssn.task_node[c] >= 0 and not revocable[int(ssn.task_node[c])]])

        gate = PeriodGate.of(ssn.plan, "tdm", period, first_open=True)

        def victims(candidates: list[int]) -> dict[int, d.Reason]:
            if not gate.due(now()):
                return {}
            zones = open_zones()
            out: dict[int, d.Reason] = {}
            for zone in sorted(z for z, is_open in zones.items() if not is_open):
                on_zone = [t for t in candidates if ssn.task_node[t] >= 0 and zone_of[int(ssn.task_node[t])] == zone
                           and ssn.status[t] == BOUND and snap.pods[t].preemptable]
                reason = d.Reason(d.SHUFFLE, f"revocable zone {zone} ({raw[zone]}) is closed: its preemptable pods "
                                             "leave its nodes (tdm)", {"plugin": "tdm", "zone": zone})
                for t in by_job_budget(ssn, on_zone):
                    out[t] = reason
            return out

        preemptable_job = np.array([j.podgroup is not None and j.podgroup.job_preemptable for j in jobs], dtype=bool)
        order = preemptable_job.astype(np.float64)

        def pipelined(j: int) -> Verdict:
            count = ssn.job_ready[j] + ssn.job_pipelined[j] + int(np.count_nonzero(
                (ssn.status[jobs[j].tasks] == PENDING) & ssn.zero[jobs[j].tasks]))
            return Verdict(PERMIT) if count >= jobs[j].min_member else Verdict(REJECT)

        def starving(j: int) -> bool:
            return not preemptable_job[j] and bool(ssn.job_pending[j])

        self.register(ssn, "predicate", predicate)
        self.register(ssn, "node_order", score)
        self.register(ssn, "preemptable", preemptable)
        self.register(ssn, "victim", victims)
        self.register(ssn, "job_order", lambda j: float(order[j]), column=lambda: order)
        self.register(ssn, "job_pipelined", pipelined)
        self.register(ssn, "job_starving", starving)


PLUGIN = TdmPlugin
