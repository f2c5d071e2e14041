"""pdb: PodDisruptionBudgets bound the victims of preempt and reclaim, as Volcano's pdb plugin.

Each call gets each PodDisruptionBudget's status.disruptionsAllowed; the candidates are taken in
the order given, and a candidate matched by a budget of its namespace (a non-empty selector; a pod
the budget already lists in status.disruptedPods does not count) uses one disruption of it; a
candidate that takes some budget below zero is no victim.

Differences from Volcano (runtime/README.md): a pod without labels is a victim like any other
(Volcano leaves it out, though no budget can match it); the pods this cycle already evicted use
their budgets' disruptions (Volcano starts each call from the status, so several preemptors in
one cycle could together take more than a budget allows); and while budgets are not read (the
connector, which watches them while this plugin is on, has not listed them yet, or its role may
not list them) no pod is a victim, rather than any."""

from __future__ import annotations

import logging

import numpy as np

from runtime.engine.kernels.codes import RELEASING
from runtime.engine.plugins.base import Plugin

log = logging.getLogger(__name__)


class PdbPlugin(Plugin):
    name = "pdb"
    answers = frozenset({"preemptable", "reclaimable"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        budgets = [b for _, b in sorted((snap.disruption_budgets or {}).items())
                   if b.selector is not None and (b.selector.match_labels or b.selector.match_expressions)]
        pods = snap.pods

        def uses(budget, pod) -> bool:
            return (budget.namespace == pod.namespace and pod.name not in budget.disrupted
                    and budget.selector.matches(pod.labels))

        # Each budget's tasks (those it counts), to charge it this cycle's evictions.
        members = [np.array([t for t, p in enumerate(pods) if uses(b, p)], dtype=np.int64) for b in budgets]

        def evictable(preemptor: int, candidates: list[int]) -> list[int]:
            if snap.disruption_budgets is None:
                log.warning("pdb: PodDisruptionBudgets are not read yet (the connector lists them while the pdb "
                            "plugin is on); no pod is a victim")
                return []
            # Evicted this cycle (releasing now, not at the snapshot), statements not yet committed included.
            allowed = [b.allowed - int(((ssn.status[m] == RELEASING) & (snap.status[m] != RELEASING)).sum())
                       for b, m in zip(budgets, members)]
            out = []
            for c in candidates:
                pod = pods[c]
                violated = False
                for i, budget in enumerate(budgets):
                    if uses(budget, pod):
                        allowed[i] -= 1
                        violated = violated or allowed[i] < 0
                if not violated:
                    out.append(c)
            return out

        self.register(ssn, "preemptable", evictable)
        self.register(ssn, "reclaimable", evictable)


PLUGIN = PdbPlugin
