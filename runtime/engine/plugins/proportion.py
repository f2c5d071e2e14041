"""proportion: queues share the cluster by weight.

Deserved shares by hierarchical weighted water-filling (runtime.engine.queueshare), capped by real
capability (min(capability, parent − Σ sibling guarantees)) and request, raised to guarantee;
borrowing of idle siblings' shares unless `borrow = false` (bounded by `borrow_limit`).
share = max over resources of allocated / deserved; queue order: higher priority, then lower
share. Overused: deserved ≤ allocated on every resource. Allocatable: allocated + request ≤
deserved on the requested resources, for the queue and its ancestors. Reclaimable victims:
tasks of queues above their deserved share, while they stay above it. Enqueue: queue open
and minResources + allocated + inqueue − elastic ≤ real capability.
"""

from __future__ import annotations

import numpy as np

from runtime.engine import queueshare as qs
from runtime.engine.plugins.base import Plugin
from runtime.engine.snapshot import UNLIMITED


class ProportionPlugin(Plugin):
    name = "proportion"
    answers = frozenset({"queue_order", "reclaimable", "overused", "allocatable", "job_enqueued", "preemptive"})

    def deserved(self, ssn) -> np.ndarray:
        self.caps = qs.real_capabilities(ssn)
        return qs.hierarchical_deserved(ssn, self.caps)

    def on_session_open(self, ssn) -> None:
        self.ssn = ssn
        # Shared: resources the cluster has (a device-managed resource without node capacity,
        # like a card-memory request, is the device plugin's business), the pod count aside.
        self.columns = qs.shared_columns(ssn)
        des = self.deserved(ssn)
        self.limit = np.minimum(np.floor(des), UNLIMITED).astype(np.int64)
        ssn.queue_deserved = self.limit

        # A reservation whose victims were evicted is held and bound up to the queue's real
        # capability, not its deserved share: the share moves with other queues' demand, and
        # ending the reservation for that would waste the evictions. A queue that may not
        # borrow (or only so much) keeps its deserved share as the bound, as its owner asked.
        snap = ssn.snap
        restricted = np.array([not self._may_borrow(snap, q) for q in range(len(snap.queues))], dtype=bool)
        reserve = np.where(restricted[:, None], self.limit, self.caps)
        qs.register_queue_answers(
            self, ssn, deserved=self.limit, limit=self.limit, caps=self.caps, columns=self.columns, reserve=reserve)

    @staticmethod
    def _may_borrow(snap, q: int) -> bool:
        """Whether the queue and every ancestor may borrow without limit."""
        while q >= 0:
            info = snap.queues[q]
            if not info.borrow or (snap.borrow_limit[q] < UNLIMITED).any():
                return False
            q = info.parent
        return True


PLUGIN = ProportionPlugin
