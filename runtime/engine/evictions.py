"""Evictions that buy something, counted cycle after cycle (the simulator, `policydsl test`
and the connector's metrics read it).

An eviction is for a beneficiary (the preemptor, or the pod its queue reclaims for: the
reason's details name it). It is *bought* when the beneficiary binds within `window` cycles of
the eviction, *wasted* when it has not by then (or is gone); it stays *open* meanwhile. A pod
evicted again within `window` cycles of its last eviction is a *repeat*; an eviction of a pod
of queue A for a pod of queue B is an *exchange* (ping-pong) when that beneficiary was itself
evicted within `window` cycles for a pod of A: B takes back the room A took from it. A policy
whose preempt and reclaim thrash shows in all three. The shuffle action's evictions have no
beneficiary: they count only as repeats (the same pod moved again within the window).

The audit also tells the next cycle which queues each job lost pods to within the window
(`lost_to`): reclaim takes nothing from those for that job (Options.lost_to), so no exchange is
decided, whatever shares, arrivals and preemptions in between would allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from compiler import catalog as cat
from compiler.plan import Plan
from runtime.cluster import decisions as d
from runtime.cluster.model import ClusterState, group_key_of

DEFAULT_WINDOW = 10        # cycles (the simulator's clock; the connector's counts seconds)
MAX_EXAMPLES = 20          # wasted beneficiaries kept for reports (the latest)


def reservation_seconds(plan: Plan) -> float:
    """How long a reservation may hold under `plan`: the longest `reservation_seconds` of its
    preempt and reclaim actions, gang-aware ones too (the catalog's default where one does not
    set it)."""
    held = [float(plan.action_arguments.get(a, {}).get("reservation_seconds") or cat.RESERVATION_SECONDS.default)
            for a in ("preempt", "reclaim", "gang_preempt", "gang_reclaim") if a in plan.actions]
    return max(held, default=float(cat.RESERVATION_SECONDS.default))


def eviction_queues(state: ClusterState, decisions: d.Decisions) -> dict[str, str]:
    """The queue of each pod an eviction names (victim or beneficiary), before it applies."""
    out = {}
    for e in decisions.evictions:
        for key in (e.pod, beneficiary(e)):
            pod = state.pods.get(key) if key else None
            if pod is not None:
                out[key] = state.queue_name_of(pod)
    return out


def eviction_jobs(state: ClusterState, decisions: d.Decisions) -> dict[str, str]:
    """The job (PodGroup, or the pod's implicit one) of each pod the cycle evicts, before it applies."""
    out = {}
    for e in decisions.evictions:
        pod = state.pods.get(e.pod)
        if pod is not None:
            out[e.pod] = group_key_of(pod)
    return out


def beneficiary(eviction: d.Eviction) -> str | None:
    details = eviction.reason.details
    return details.get("preemptor") or details.get("for")


@dataclass
class EvictionAudit:
    window: int = DEFAULT_WINDOW
    bought: int = 0
    wasted: int = 0
    repeats: int = 0
    exchanges: int = 0
    wasted_pods: list[str] = field(default_factory=list)     # beneficiaries that did not bind (the latest)
    _open: dict[str, list[int]] = field(default_factory=dict)           # beneficiary -> cycles of evictions
    _last_evicted: dict[str, int] = field(default_factory=dict)         # victim -> cycle
    _evicted_for: dict[str, tuple[int, str]] = field(default_factory=dict)  # victim -> (cycle, beneficiary's queue)
    _job_lost_to: dict[str, dict[str, int]] = field(default_factory=dict)   # victim's job -> queue -> last cycle
    _pruned: int = 0

    def record(self, cycle: int, decisions: d.Decisions, queue_of: Mapping[str, str],
               job_of: Mapping[str, str] | None = None) -> int:
        """One cycle's decisions (`queue_of`: pod -> queue, for victims and beneficiaries;
        `job_of`: victim -> its job, for `lost_to`). Returns how many evictions this cycle
        settled as wasted."""
        for e in decisions.evictions:
            ben = beneficiary(e)
            if ben is None:
                if e.reason.kind == d.SHUFFLE:
                    # shuffle evicts for nobody (an overused node, a closed revocable zone): a pod it
                    # evicts again within the window was moved back and forth, a repeat too.
                    last = self._last_evicted.get(e.pod)
                    if last is not None and cycle - last <= self.window:
                        self.repeats += 1
                    self._last_evicted[e.pod] = cycle
                continue
            self._open.setdefault(ben, []).append(cycle)
            last = self._last_evicted.get(e.pod)
            if last is not None and cycle - last <= self.window:
                self.repeats += 1
            self._last_evicted[e.pod] = cycle
            src, dst = queue_of.get(e.pod), queue_of.get(ben)
            if src is not None and dst is not None and src != dst:
                took = self._evicted_for.get(ben)
                if took is not None and took[1] == src and cycle - took[0] <= self.window:
                    self.exchanges += 1
                self._evicted_for[e.pod] = (cycle, dst)
                job = job_of.get(e.pod) if job_of is not None else None
                if job is not None:
                    self._job_lost_to.setdefault(job, {})[dst] = cycle
        for b in decisions.bindings:
            done = self._open.pop(b.pod, None)
            if done:
                self.bought += len(done)
        before = self.wasted
        for ben in [b for b, cycles in self._open.items() if cycle - cycles[0] >= self.window]:
            self.wasted += len(self._open.pop(ben))
            self.wasted_pods.append(ben)
        del self.wasted_pods[:-MAX_EXAMPLES]
        if cycle - self._pruned >= self.window:    # what is older than the window can count no more
            self._pruned = cycle
            self._last_evicted = {k: c for k, c in self._last_evicted.items() if cycle - c <= self.window}
            self._evicted_for = {k: v for k, v in self._evicted_for.items() if cycle - v[0] <= self.window}
            self._job_lost_to = {k: kept for k, v in self._job_lost_to.items()
                                 if (kept := {q: c for q, c in v.items() if cycle - c <= self.window})}
        return self.wasted - before

    def lost_to(self, cycle: int) -> dict[str, frozenset[str]]:
        """Job -> the queues its pods were evicted for within the window, as of `cycle` (the
        next one): were it to reclaim from one of them, that would be an exchange."""
        out = {}
        for job, queues in self._job_lost_to.items():
            recent = frozenset(q for q, c in queues.items() if cycle - c <= self.window)
            if recent:
                out[job] = recent
        return out

    @property
    def open(self) -> int:
        return sum(len(c) for c in self._open.values())

    @property
    def thrashing(self) -> bool:
        return bool(self.wasted or self.repeats or self.exchanges)

    def to_dict(self) -> dict:
        return {"bought": self.bought, "wasted": self.wasted, "open": self.open, "repeats": self.repeats,
                "exchanges": self.exchanges, "window_cycles": self.window}
