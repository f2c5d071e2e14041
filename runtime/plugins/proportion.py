"""proportion: queues share the cluster by weight.

Deserved shares by hierarchical weighted water-filling (runtime.queueshare), capped by real
capability (min(capability, parent − Σ sibling guarantees)) and request, raised to guarantee;
borrowing of idle siblings' shares unless `borrow = false` (bounded by `borrow_limit`).
share = max over resources of allocated / deserved; queue order: higher priority, then lower
share. Overused: deserved ≤ allocated on every resource. Allocatable: allocated + request ≤
deserved on the requested resources, for the queue and its ancestors. Reclaimable victims:
tasks of queues above their deserved share, while they stay above it. Enqueue: queue open
and minResources + allocated + inqueue ≤ real capability.
"""

from __future__ import annotations

import numpy as np

from runtime import decisions as d
from runtime import queueshare as qs
from runtime.plugins import Plugin
from runtime.session import PERMIT, REJECT, Verdict
from runtime.snapshot import UNLIMITED


class ProportionPlugin(Plugin):
    name = "proportion"

    def deserved(self, ssn) -> np.ndarray:
        self.caps = np.array([qs.real_capability(ssn, q) for q in range(len(ssn.snap.queues))], dtype=np.int64)
        return qs.hierarchical_deserved(ssn, self.caps)

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        self.ssn = ssn
        # Shared: resources the cluster has (a device-managed resource without node capacity,
        # like a card-memory request, is the device plugin's business), the pod count aside.
        self.columns = qs.shared_columns(ssn)
        des = self.deserved(ssn)
        self.limit = np.minimum(np.floor(des), UNLIMITED).astype(np.int64)
        ssn.queue_deserved = self.limit

        share = ssn.k.QueueShare(ssn.queue_allocated, self.limit, self.columns).of
        within = ssn.k.CountWithin(self.limit, ssn.queue_allocated, self.columns).count

        def queue_order(q: int) -> tuple:
            return (-snap.queues[q].priority, share(q))

        def allocatable(q: int, request: np.ndarray, count: int):
            allowed, reason = count, None
            for c in ssn.queue_chain[q]:
                n, binding = within(c, request, allowed)
                if n < allowed:
                    allowed = n
                    name = snap.queues[c].name
                    reason = d.Reason(d.QUEUE, f"queue {name} would exceed its deserved "
                                      f"{snap.resources[binding]}", {"queue": name, "resource": snap.resources[binding]})
            return allowed, reason

        def preemptive(q: int, t: int) -> bool:
            after = ssn.queue_allocated[q] + snap.request[t]
            req = snap.request[t]
            cols = [r for r in self.columns if req[r] > 0]
            return all(after[r] <= self.limit[q][r] for r in cols)

        def reclaimable(reclaimer: int, candidates: list[int]) -> list[int]:
            return qs.victims_over_limit(ssn, candidates, self.limit, self.columns)

        def enqueueable(j: int) -> Verdict:
            reason = qs.enqueue_check(ssn, j, self.caps, self.columns)
            return Verdict(PERMIT) if reason is None else Verdict(REJECT, reason)

        self.register(ssn, "queue_order", queue_order)
        # Overused: the queue or an ancestor at its deserved share on every resource.
        self.register(ssn, "overused", ssn.k.AtLimit(ssn.queue_allocated, self.limit, self.columns, ssn.chain_ptr,
                                                     ssn.chains).chain)
        self.register(ssn, "allocatable", allocatable)
        self.register(ssn, "preemptive", preemptive)
        self.register(ssn, "reclaimable", reclaimable)
        self.register(ssn, "job_enqueued", enqueueable)


PLUGIN = ProportionPlugin
