"""priority: jobs and tasks by PriorityClass value (higher first); victims of lower priority."""

from __future__ import annotations

from runtime.engine.plugins.base import Plugin
from runtime.engine.snapshot import HELD, SUCCEEDED


class PriorityPlugin(Plugin):
    name = "priority"
    answers = frozenset({"job_order", "task_order", "preemptable", "job_starving"})

    def on_session_open(self, ssn) -> None:
        jobs = ssn.snap.jobs
        task_priority = ssn.snap.task_priority
        task_job = ssn.snap.task_job
        negated = -ssn.job_cols.priority
        self.register(ssn, "job_order", lambda j: -jobs[j].priority, column=lambda: negated)
        self.register(ssn, "task_order", lambda t: -int(task_priority[t]))

        def preemptable(preemptor: int, candidates: list[int]) -> list[int]:
            pj = task_job[preemptor]
            out = []
            for c in candidates:
                cj = task_job[c]
                if cj == pj:
                    if task_priority[c] < task_priority[preemptor]:
                        out.append(c)
                elif jobs[cj].priority < jobs[pj].priority:
                    out.append(c)
            return out

        self.register(ssn, "preemptable", preemptable)

        def starving(j: int) -> bool:
            # Starving while some of its tasks neither run nor wait on releasing room.
            live = sum(1 for t in jobs[j].tasks if ssn.status[t] != SUCCEEDED and ssn.status[t] != HELD)
            return bool(ssn.job_ready[j] + ssn.job_pipelined[j] < live)

        self.register(ssn, "job_starving", starving)


PLUGIN = PriorityPlugin
