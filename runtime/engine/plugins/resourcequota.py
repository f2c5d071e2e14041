"""resourcequota: enqueue admits a job only within its namespace's ResourceQuotas, as Volcano's
resourcequota plugin.

For each ResourceQuota of the job's namespace (its status.hard and status.used, as the quota
controller wrote them): the PodGroup's minResources on the resources the quota limits by the same
name (`cpu`, `memory`, `pods`, `nvidia.com/gpu`; `requests.cpu` is another name and is not
compared, as in Volcano), added to what the quota says is used and to the minResources of the
namespace's jobs admitted earlier in this cycle, must stay within hard; else REJECT with Volcano's
text. A job without minResources is admitted without asking, as Volcano's enqueue does. On a live
cluster the connector watches ResourceQuotas while this plugin is on (runtime.kube.cache).

Differences (runtime/README.md): only jobs enqueue admits count as admitted earlier in the cycle
(Volcano counts every job this plugin permitted, even one a later plugin rejected); and while
ResourceQuotas are not read (the connector has not listed them yet, or its role may not list them)
a job with minResources waits, saying so, instead of being admitted without its quota."""

from __future__ import annotations

from collections import defaultdict

from compiler.quantities import readable_base_units
from runtime.cluster import decisions as d
from runtime.engine.extension import PERMIT, REJECT
from runtime.engine.plugins.base import Plugin
from runtime.engine.session import Verdict

NOT_READ = ("ResourceQuotas are not read yet (the connector lists them while the resourcequota plugin is on; "
            "its log says if the scheduler's role may not list them), so the resourcequota plugin cannot admit "
            "a job with minResources")


def _figures(values: dict[str, int]) -> str:
    return ", ".join(f"{r} {readable_base_units(r, v)}" for r, v in sorted(values.items()))


class ResourceQuotaPlugin(Plugin):
    name = "resourcequota"
    answers = frozenset({"job_enqueued"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        quotas = snap.resource_quotas
        by_namespace: dict[str, list] = defaultdict(list)
        for key in sorted(quotas or {}):
            by_namespace[quotas[key].namespace].append(quotas[key])
        pending: dict[str, dict[str, int]] = defaultdict(dict)   # namespace -> minResources admitted

        def enqueueable(j: int) -> Verdict:
            job = snap.jobs[j]
            wanted = job.podgroup.min_resources if job.podgroup is not None else None
            if not wanted:
                return Verdict(PERMIT)
            namespace = job.key.partition("/")[0]
            if quotas is None:
                return Verdict(REJECT, d.Reason(d.ENQUEUE, NOT_READ, {"plugin": "resourcequota"}))
            earlier = pending.get(namespace, {})
            for quota in by_namespace.get(namespace, ()):
                requested = {r: v for r, v in wanted.items() if r in quota.hard}
                over = sorted(r for r, v in requested.items()
                              if quota.used.get(r, 0) + earlier.get(r, 0) + v > quota.hard[r])
                if over:
                    text = (f"resource quota {quota.name} insufficient, requested: "
                            f"{_figures({r: requested[r] for r in over})}, used: "
                            f"{_figures({r: quota.used.get(r, 0) for r in over})}"
                            + (f", admitted this cycle: {_figures({r: earlier.get(r, 0) for r in over})}"
                               if any(earlier.get(r, 0) for r in over) else "")
                            + f", limited: {_figures({r: quota.hard[r] for r in over})}")
                    return Verdict(REJECT, d.Reason(d.ENQUEUE, text, {"quota": quota.name, "resources": over}))
            return Verdict(PERMIT)

        def admitted(j: int) -> None:
            job = snap.jobs[j]
            if job.podgroup is not None and job.podgroup.min_resources:
                mine = pending[job.key.partition("/")[0]]
                for r, v in job.podgroup.min_resources.items():
                    mine[r] = mine.get(r, 0) + v

        self.register(ssn, "job_enqueued", enqueueable)
        if self.spec.enabled("job_enqueued"):
            ssn.enqueue_listeners.append(admitted)


PLUGIN = ResourceQuotaPlugin
