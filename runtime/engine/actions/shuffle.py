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

from runtime.cluster import decisions as d
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
