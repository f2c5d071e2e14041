"""overcommit: enqueue admits while inqueue minResources + the job's fit in total × factor − used
(on the resources nodes offer, like the queue shares).

The factor is the enqueue action's `overcommit_factor` when set, else the plugin's `factor`
(default 1.2); below 1.0 it is reset to 1.2, as Volcano does."""

from __future__ import annotations

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine import queueshare as qs
from runtime.engine.plugins.base import Plugin
from runtime.engine.session import Verdict
from runtime.engine.extension import PERMIT, REJECT

DEFAULT_FACTOR = 1.2


class OvercommitPlugin(Plugin):
    name = "overcommit"
    answers = frozenset({"job_enqueued"})

    def on_session_open(self, ssn) -> None:
        factor = ssn.plan.action_arguments.get("enqueue", {}).get("overcommit_factor")
        if factor is None:
            factor = self.args.get("factor", DEFAULT_FACTOR)
        if factor < 1.0:
            factor = DEFAULT_FACTOR
        used = ssn.used.sum(axis=0) if ssn.snap.n_nodes else np.zeros(ssn.snap.n_resources, np.int64)
        self.idle = np.full(ssn.snap.n_resources, np.inf)
        # Only resources some node offers: a card-memory request no node advertises (the device
        # plugin checks it per card) has no cluster total to overcommit, as in the queue shares.
        shared = qs.shared_columns(ssn)
        self.idle[shared] = ssn.total[shared].astype(np.float64) * factor - used[shared]
        self.inqueue = np.zeros(ssn.snap.n_resources, dtype=np.float64)
        for child in ssn.snap.queues[0].children:
            self.inqueue += ssn.queue_inqueue[child]

        def enqueueable(j: int) -> Verdict:
            job = ssn.snap.jobs[j]
            if job.min_resources is None:
                return Verdict(PERMIT)
            need = self.inqueue + job.min_resources
            if np.all(need <= self.idle):
                return Verdict(PERMIT)
            over = np.nonzero(need > self.idle)[0]
            short = [ssn.snap.resources[r] for r in over]
            r = int(over[0])
            fig = lambda amount: qs.figure(ssn, r, amount)   # noqa: E731
            text = (f"job needs {short[0]} {fig(job.min_resources[r])} (minResources); the cluster may admit "
                    f"{fig(max(self.idle[r] - self.inqueue[r], 0))} more (cluster {fig(ssn.total[r])} × {factor:g} "
                    f"overcommit, used {fig(used[r])}, inqueue {fig(self.inqueue[r])})")
            return Verdict(REJECT, d.Reason(d.ENQUEUE, text, {"resources": short, "factor": factor}))

        self.register(ssn, "job_enqueued", enqueueable)

        def admitted(j: int) -> None:
            if ssn.snap.jobs[j].min_resources is not None:
                self.inqueue += ssn.snap.jobs[j].min_resources

        if self.spec.enabled("job_enqueued"):
            ssn.enqueue_listeners.append(admitted)


PLUGIN = OvercommitPlugin
