"""gang: a job runs only when minMember tasks (and each role's minTaskMember) can run together.

ready = allocated + bound + running + succeeded (+ pending zero-request tasks, which backfill
places); pipelined also counts pipelined tasks; starving while pipelined + ready < minMember.
With spec.subGroupPolicy, also each policy's minSubGroups sub-groups of subGroupSize ready.
A pod is a victim only while its job keeps more than minMember ready (counted across the
victims already chosen in the same statement).
"""

from __future__ import annotations

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.plugins.base import Plugin
from runtime.engine.rules.hypernodes import sub_groups_missing, sub_groups_short
from runtime.engine.session import Verdict
from runtime.engine.extension import PERMIT, REJECT
from runtime.engine.snapshot import ALLOCATED, BOUND, PENDING, PIPELINED, SUCCEEDED


class GangPlugin(Plugin):
    name = "gang"
    answers = frozenset({"job_order", "job_ready", "job_pipelined", "job_starving", "job_valid", "preemptable",
                         "reclaimable"})

    def on_session_open(self, ssn) -> None:
        self.ssn = ssn
        jobs = ssn.snap.jobs
        pending_zero = (ssn.status == PENDING) & ssn.zero
        zero_pending = np.bincount(ssn.snap.task_job[pending_zero], minlength=len(jobs)) > 0
        self.zero_pending = zero_pending.tolist()
        job_ready = ssn.job_ready
        # Jobs with spec.subGroupPolicy: ready only with each policy's minSubGroups sub-groups
        # ready too (Volcano's CheckSubJobReady / CheckSubJobPipelined / CheckSubJobValid).
        sub_grouped = ssn.snap.sub_groups

        def ready(j: int) -> bool:
            job = jobs[j]
            # item: a Python int (asked every allocate turn; a NumPy scalar costs more to make and compare)
            count = job_ready.item(j) + self._zero_pending(j) if self.zero_pending[j] else job_ready.item(j)
            if count < job.min_member:
                return False
            if j in sub_grouped and sub_groups_short(ssn, j) is not None:
                return False
            return not job.min_task_member or self._roles_ok(j, (ALLOCATED, BOUND, SUCCEEDED))

        def pipelined(j: int) -> Verdict:
            job = jobs[j]
            count = ssn.job_ready[j] + ssn.job_pipelined[j] + self._zero_pending(j)
            if count >= job.min_member and self._roles_ok(j, (ALLOCATED, BOUND, SUCCEEDED, PIPELINED)) and \
                    (j not in sub_grouped or sub_groups_short(ssn, j, pipelined=True) is None):
                return Verdict(PERMIT)
            return Verdict(REJECT)

        def starving(j: int) -> bool:
            return bool(ssn.job_ready[j] + ssn.job_pipelined[j] < jobs[j].min_member)

        def valid(j: int):
            job = jobs[j]
            if len(job.tasks) < job.min_member:
                return d.Reason(d.MEMBERS, f"gang has {len(job.tasks)} of {job.min_member} pods (minMember)",
                                {"pods": len(job.tasks), "min_member": job.min_member})
            # A job without a PodGroup has no sub-groups (most jobs at scale: no call).
            missing = sub_groups_missing(ssn, j) if job.podgroup is not None else None
            if missing is not None:
                policy, count, least = missing
                return d.Reason(d.MEMBERS, f"gang has {count} of {least} sub-groups (minSubGroups) of "
                                           f"subGroupPolicy {policy}",
                                {"sub_groups": count, "min_sub_groups": least, "policy": policy})
            return None

        def order(j: int) -> int:
            # Jobs that are not ready yet go first.
            return 1 if ready(j) else 0

        self.register(ssn, "job_ready", ready)
        self.register(ssn, "job_pipelined", pipelined)
        self.register(ssn, "job_starving", starving)
        # The jobs valid() may find invalid: a PodGroup's (a lone pod's implicit job has its one
        # pod of minMember 1, and no sub-groups); the others are not asked.
        self.register(ssn, "job_valid", valid, column=lambda: ssn.job_cols.grouped)
        min_member = ssn.job_cols.min_member
        # Jobs whose readiness is more than a count: answered one by one.
        special = np.flatnonzero(zero_pending | ssn.job_cols.roles).tolist()
        special = sorted({*special, *sub_grouped}) if sub_grouped else special

        def order_column() -> np.ndarray:
            out = (job_ready >= min_member).astype(np.int64)
            for j in special:
                out[j] = order(j)
            return out

        self.register(ssn, "job_order", order, column=order_column)

        def victims(preemptor: int, candidates: list[int]) -> list[int]:
            spare: dict[int, int] = {}
            out = []
            for c in candidates:
                j = int(ssn.snap.task_job[c])
                if j not in spare:
                    # A one-pod job is not a gang: its pod may go (runtime/README.md).
                    ready = int(ssn.job_ready[j])
                    spare[j] = ready - jobs[j].min_member if jobs[j].min_member > 1 else ready
                if spare[j] > 0:
                    spare[j] -= 1
                    out.append(c)
            return out

        self.register(ssn, "preemptable", victims)
        self.register(ssn, "reclaimable", victims)

    def _zero_pending(self, j: int) -> int:
        if not self.zero_pending[j]:
            return 0
        ssn = self.ssn
        tasks = ssn.snap.jobs[j].tasks
        return int(((ssn.status[tasks] == PENDING) & ssn.zero[tasks]).sum())

    def _roles_ok(self, j: int, statuses: tuple[int, ...]) -> bool:
        job = self.ssn.snap.jobs[j]
        # Volcano applies the roles' minimums only when minMember covers their sum: below it,
        # readiness is the total count alone (JobInfo.CheckTaskReady/Pipelined/Valid).
        if not job.min_task_member or job.min_member < sum(job.min_task_member.values()):
            return True
        counts = self.ssn.role_counts(job, statuses)
        return all(counts.get(role, 0) >= need for role, need in job.min_task_member.items())


PLUGIN = GangPlugin
