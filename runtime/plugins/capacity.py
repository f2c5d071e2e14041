"""capacity: queues with explicit per-resource deserved, guarantee and capability, hierarchical.

A queue may grow to its real capability (min(capability, parent's real capability − Σ
sibling guarantees)), deserved is what others may reclaim back down to. Unset deserved means
the guarantee. Queue order: higher priority, then lower allocated / deserved. Overused: at
capability on every requested resource. Allocatable: allocated + request ≤ real capability
for the queue and its ancestors. Reclaimable: tasks of queues above deserved while above.
"""

from __future__ import annotations

import numpy as np

from runtime import decisions as d
from runtime import queueshare as qs
from runtime.plugins import Plugin
from runtime.session import PERMIT, REJECT, Verdict
from runtime.snapshot import UNLIMITED


class CapacityPlugin(Plugin):
    name = "capacity"

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        # Shared: resources the cluster has (a device-managed resource without node capacity,
        # like a card-memory request, is the device plugin's business), the pod count aside.
        self.columns = qs.shared_columns(ssn)
        self.caps = np.array([qs.real_capability(ssn, q) for q in range(len(snap.queues))], dtype=np.int64)
        deserved = np.where(snap.deserved >= UNLIMITED, snap.guarantee, snap.deserved)
        deserved = np.minimum(deserved, self.caps)
        deserved[:, snap.resource_index["pods"]] = UNLIMITED
        ssn.queue_deserved = deserved

        share = ssn.k.QueueShare(ssn.queue_allocated, deserved, self.columns).of
        within = ssn.k.CountWithin(self.caps, ssn.queue_allocated, self.columns).count

        def queue_order(q: int) -> tuple:
            return (-snap.queues[q].priority, share(q))

        def allocatable(q: int, request: np.ndarray, count: int):
            allowed, reason = count, None
            for c in ssn.queue_chain[q]:
                n, binding = within(c, request, allowed)
                if n < allowed:
                    allowed = n
                    name = snap.queues[c].name
                    reason = d.Reason(d.QUEUE, f"queue {name} over capability ({snap.resources[binding]})",
                                      {"queue": name, "resource": snap.resources[binding]})
            return allowed, reason

        def preemptive(q: int, t: int) -> bool:
            after = ssn.queue_allocated[q] + snap.request[t]
            return all(after[r] <= deserved[q][r] for r in self.columns if snap.request[t][r] > 0)

        def reclaimable(reclaimer: int, candidates: list[int]) -> list[int]:
            return qs.victims_over_limit(ssn, candidates, deserved, self.columns)

        def enqueueable(j: int) -> Verdict:
            reason = qs.enqueue_check(ssn, j, self.caps, self.columns)
            return Verdict(PERMIT) if reason is None else Verdict(REJECT, reason)

        self.register(ssn, "queue_order", queue_order)
        # Overused: the queue or an ancestor at its capability on every resource.
        self.register(ssn, "overused", ssn.k.AtLimit(ssn.queue_allocated, self.caps, self.columns, ssn.chain_ptr,
                                                     ssn.chains).chain)
        self.register(ssn, "allocatable", allocatable)
        self.register(ssn, "preemptive", preemptive)
        self.register(ssn, "reclaimable", reclaimable)
        self.register(ssn, "job_enqueued", enqueueable)


PLUGIN = CapacityPlugin
