"""shuffle: evict the running pods the plugins answering `victim` choose, as Volcano's shuffle action.

Every running pod of ours is a candidate; tier by tier, each enabled plugin's answer (tdm: the
preemptable pods of closed revocable zones; rescheduling: pods of overused nodes that the cycle
would place on an underused one) is added up, and the first tier that chooses any decides
(Volcano's VictimTasks). Each victim is evicted with the reason its plugin gave (kind
`shuffle`), in one statement, so the cycle's decisions, the connector's Events and the
simulator's eviction audit see it like any other eviction.
"""

from __future__ import annotations

import numpy as np

from compiler.plan import Plan
from runtime.cluster import decisions as d
from runtime.engine.plugins.cdp import go_duration
from runtime.engine.session import Session
from runtime.engine.snapshot import BOUND


def run(ssn: Session) -> None:
    tiers = ssn.fns("victim")
    if not tiers:
        return
    running = np.flatnonzero((ssn.status == BOUND) & (ssn.task_node >= 0)).tolist()
    if not running:
        return
    for tier in tiers:
        chosen: dict[int, d.Reason] = {}
        for _, fn in tier:
            for t, reason in fn(running).items():
                chosen.setdefault(t, reason)     # the first plugin's reason where two choose a pod
        if chosen:
            stmt = ssn.new_statement()
            for t in sorted(chosen):
                stmt.evict(t, chosen[t])
            stmt.commit()
            return


def tick_seconds(plan: Plan, period: float) -> float | None:
    """How often a simulator must run a cycle while nothing else happens, for shuffle to act on
    time (a revocable zone closing, rescheduling's interval): the shortest period of the victim
    plugins that run on the clock (tdm's evict_period, rescheduling's interval and a period), at least
    `period`;
    None when the plan has no shuffle."""
    if "shuffle" not in plan.actions:
        return None
    steps = []
    for tier in plan.tiers:
        for plugin in tier.plugins:
            if plugin.name == "tdm" and plugin.enabled("victim"):
                steps.append(go_duration(str(plugin.arguments.get("evict_period") or "1m")) or 60.0)
            elif plugin.name == "rescheduling" and plugin.enabled("victim"):
                # it runs once more than its interval has passed (Volcano's Before): a period later
                steps.append((go_duration(str(plugin.arguments.get("interval") or "5m")) or 300.0) + period)
    return max(min(steps), period) if steps else None
