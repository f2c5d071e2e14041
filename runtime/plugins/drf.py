"""drf: dominant resource fairness. share(job) = max over resources of allocated / cluster
total; lower share first. A victim is allowed when the preemptor's share with its task stays
below the victim job's share without the victim. As a queue order, the queue's dominant share."""

from __future__ import annotations

import numpy as np

from runtime.plugins import Plugin


def dominant_share(allocated: np.ndarray, total: np.ndarray) -> float:
    mask = total > 0
    if not mask.any():
        return 0.0
    return float((allocated[mask] / total[mask]).max())


class DrfPlugin(Plugin):
    name = "drf"
    answers = frozenset({"job_order", "queue_order", "preemptable", "reclaimable"})

    def on_session_open(self, ssn) -> None:
        total = ssn.total.astype(np.float64)
        # The pods column is a count, not a resource to share.
        total_for_share = total.copy()
        total_for_share[ssn.snap.resource_index["pods"]] = 0
        self.total = total_for_share
        def job_shares() -> np.ndarray:
            out = np.empty(len(ssn.job_allocated), dtype=np.float64)
            ssn.k.dominant_shares(ssn.job_allocated, total_for_share, out)
            return out

        self.register(ssn, "job_order", ssn.k.RowShare(ssn.job_allocated, total_for_share).of, column=job_shares)
        self.register(ssn, "queue_order", ssn.k.RowShare(ssn.queue_allocated, total_for_share).of)

        def victims(preemptor: int, candidates: list[int]) -> list[int]:
            pj = ssn.snap.task_job[preemptor]
            mine = dominant_share(ssn.job_allocated[pj] + ssn.snap.request[preemptor], total_for_share)
            out = []
            for c in candidates:
                cj = ssn.snap.task_job[c]
                theirs = dominant_share(ssn.job_allocated[cj] - ssn.snap.request[c], total_for_share)
                if mine < theirs or cj == pj:
                    out.append(c)
            return out

        self.register(ssn, "preemptable", victims)
        self.register(ssn, "reclaimable", victims)


PLUGIN = DrfPlugin
