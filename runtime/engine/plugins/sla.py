"""sla: jobs waiting past their service level go first and are let through, as Volcano's sla plugin.

A job's waiting time is its PodGroup's annotation volcano.sh/sla-waiting-time (else
sla-waiting-time; a Go duration such as "1h30m"), else the plugin's `waiting_time`
(sla-waiting-time). Then, as Volcano:
- job_order: jobs with a waiting time before those without, earlier deadline (creation + waiting
  time) first; two jobs without are equal here;
- job_enqueued and job_pipelined: PERMIT once the job has waited that long since its creation,
  else abstain. A PERMIT in a tier before the queue plugins admits the job past them; beside
  gang, gang's REJECT still wins (the tiers' votes).
A PodGroup annotation that is not a positive duration makes the job wait, naming it (Volcano logs a
warning and ignores it)."""

from __future__ import annotations

import time

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.extension import ABSTAIN, PERMIT
from runtime.engine.plugins.base import Plugin
from runtime.engine.plugins.cdp import go_duration
from runtime.engine.session import Verdict

ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")


def job_waiting_time(values: tuple[str, ...]) -> tuple[float | None, str | None]:
    """(seconds, problem): the first annotation value that is a positive duration; else a problem
    naming the value when any is written."""
    for value in values:
        seconds = go_duration(value)
        if seconds is not None and seconds > 0:
            return seconds, None
    if values:
        return None, (f"PodGroup annotation sla-waiting-time `{values[0]}` is not a positive duration "
                      "(such as 30m or 1h30m); the sla plugin cannot order or admit the job by it")
    return None, None


class SlaPlugin(Plugin):
    name = "sla"
    answers = frozenset({"job_order", "job_enqueued", "job_pipelined", "job_valid"})

    def on_session_open(self, ssn) -> None:
        jobs = ssn.snap.jobs
        default = go_duration(str(self.args.get("waiting_time") or ""))
        default = default if default is not None and default > 0 else None
        waiting: list[float | None] = []
        problems: list[str | None] = []
        for job in jobs:
            seconds, problem = job_waiting_time(job.podgroup.sla_waiting_times if job.podgroup is not None else ())
            waiting.append(seconds if seconds is not None else default)
            problems.append(problem)
        deadline = np.array([job.creation + w if w is not None else np.inf for job, w in zip(jobs, waiting)],
                            dtype=np.float64)

        def waited(j: int) -> Verdict:
            if waiting[j] is None:
                return Verdict(ABSTAIN)
            # The cycle's clock (set when the cycle starts, after plugins open); wall time without one.
            now = ssn.now if ssn.now is not None else time.time()
            return Verdict(PERMIT) if now - jobs[j].creation >= waiting[j] else Verdict(ABSTAIN)

        def valid(j: int) -> d.Reason | None:
            return d.Reason(d.JOB, problems[j]) if problems[j] is not None else None

        self.register(ssn, "job_order", lambda j: float(deadline[j]), column=lambda: deadline)
        self.register(ssn, "job_enqueued", waited)
        self.register(ssn, "job_pipelined", waited)
        self.register(ssn, "job_valid", valid)


PLUGIN = SlaPlugin
