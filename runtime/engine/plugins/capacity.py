"""capacity: queues with explicit per-resource deserved, guarantee and capability, hierarchical.

A queue may grow to its real capability (min(capability, parent's real capability − Σ
sibling guarantees)); deserved, per resource it names, is what others may reclaim back down
to. As Volcano's capacity plugin:
- queue order: higher priority, then lower share; share = max over the resources deserved
  names of allocated / deserved, and 1 for a queue whose deserved names none (best effort:
  served after every queue below its share); equal shares put a queue with a deserved first;
- overused: at capability on every requested resource; allocatable: allocated + request ≤ real
  capability for the queue and its ancestors; enqueue: minResources within it;
- preemptive (may reclaim): open, and some resource the task requests stays within deserved
  with it (a resource deserved does not name counts as deserved 0);
- reclaimable: a victim must share a requested resource with the reclaimer and leave its queue
  at or above its guarantee; it goes at once if it requests nothing deserved names, else while
  its queue is above deserved on a resource it requests and deserved names (the queue's
  allocation falling with each victim taken).
"""

from __future__ import annotations

import numpy as np

from runtime.engine import queueshare as qs
from runtime.engine.plugins.base import Plugin
from runtime.engine.snapshot import UNLIMITED


class CapacityPlugin(Plugin):
    name = "capacity"
    answers = frozenset({"queue_order", "reclaimable", "overused", "allocatable", "job_enqueued", "preemptive"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        # Shared: resources the cluster has (a device-managed resource without node capacity,
        # like a card-memory request, is the device plugin's business), the pod count aside.
        self.columns = qs.shared_columns(ssn)
        self.caps = qs.real_capabilities(ssn)
        deserved = np.where(snap.deserved >= UNLIMITED, snap.guarantee, snap.deserved)
        deserved = np.minimum(deserved, self.caps)
        deserved[:, snap.resource_index["pods"]] = UNLIMITED
        ssn.queue_deserved = deserved

        # The resources each queue's deserved names (cpu and memory only when not 0), and their
        # amounts, 0 where it names none.
        pods = snap.resource_index["pods"]
        named = snap.deserved < UNLIMITED
        base = [snap.resource_index[r] for r in ("cpu", "memory") if r in snap.resource_index]
        named[:, base] &= snap.deserved[:, base] > 0
        named[:, pods] = False
        amount = np.where(named, snap.deserved, 0)
        queues = snap.queues

        # Asked at every queue turn: each queue's share over the columns it names, in a
        # kernel bound to the arrays once.
        named_columns = [np.flatnonzero(row).tolist() for row in named]
        col_ptr = np.zeros(len(named_columns) + 1, dtype=np.int64)
        col_ptr[1:] = np.cumsum([len(cols) for cols in named_columns])
        cols = np.array([c for row in named_columns for c in row], dtype=np.int64)
        share = ssn.k.NamedShare(ssn.queue_allocated, amount, col_ptr, cols).of

        # Per queue, the key's parts that do not change within a cycle (asked every turn).
        negated = [-queue.priority for queue in queues]
        naming = [0 if len(cols) else 1 for cols in named_columns]

        def queue_order(q: int) -> tuple:
            return (negated[q], share(q), naming[q])
        queue_order.fixed_width = True       # Session.queue_key: its tuples are of one length

        def preemptive(q: int, t: int) -> bool:
            if not queues[q].open:
                return False
            req = snap.request[t]
            asked = (req > 0) & (np.arange(len(req)) != pods)
            after = ssn.queue_allocated[q] + req
            return bool((asked & (after <= amount[q])).any())

        def reclaimable(reclaimer: int, candidates: list[int]) -> list[int]:
            asked = snap.request[reclaimer] > 0
            asked[pods] = False
            left: dict[int, np.ndarray] = {}
            out = []
            for c in candidates:
                req = snap.request[c]
                holds = req > 0
                holds[pods] = False
                if not (holds & asked).any():
                    continue
                q = snap.jobs[snap.task_job[c]].queue
                alloc = left.setdefault(q, ssn.queue_allocated[q].copy())
                if ((alloc - req) < snap.guarantee[q])[self.columns].any():
                    continue
                relevant = holds & named[q]
                if not relevant.any() or (relevant & (alloc > amount[q])).any():
                    alloc -= req
                    out.append(c)
            return out

        qs.register_queue_answers(
            self, ssn, deserved=deserved, limit=self.caps, caps=self.caps, columns=self.columns,
            queue_order=queue_order, preemptive=preemptive, reclaimable=reclaimable)


PLUGIN = CapacityPlugin
