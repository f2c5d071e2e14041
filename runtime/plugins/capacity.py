"""capacity: queues with explicit per-resource deserved, guarantee and capability, hierarchical.

A queue may grow to its real capability (min(capability, parent's real capability − Σ
sibling guarantees)), deserved is what others may reclaim back down to. Unset deserved means
the guarantee. Queue order: higher priority, then lower allocated / deserved. Overused: at
capability on every requested resource. Allocatable: allocated + request ≤ real capability
for the queue and its ancestors. Reclaimable: tasks of queues above deserved while above.
"""

from __future__ import annotations

import numpy as np

from runtime import queueshare as qs
from runtime.plugins import Plugin
from runtime.snapshot import UNLIMITED


class CapacityPlugin(Plugin):
    name = "capacity"
    answers = frozenset({"queue_order", "reclaimable", "overused", "allocatable", "job_enqueued", "preemptive"})

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

        qs.register_queue_answers(
            self, ssn, deserved=deserved, limit=self.caps, caps=self.caps, columns=self.columns,
            over_limit=lambda queue, resource: f"queue {queue} over capability ({resource})")


PLUGIN = CapacityPlugin
