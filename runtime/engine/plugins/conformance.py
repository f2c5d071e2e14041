"""conformance: never evict critical system pods."""

from __future__ import annotations

from runtime.engine.plugins.base import Plugin

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


class ConformancePlugin(Plugin):
    name = "conformance"
    answers = frozenset({"preemptable", "reclaimable"})

    def on_session_open(self, ssn) -> None:
        pods = ssn.snap.pods

        def evictable(preemptor: int, candidates: list[int]) -> list[int]:
            return [c for c in candidates
                    if pods[c].priority_class not in CRITICAL_CLASSES and pods[c].namespace != SYSTEM_NAMESPACE]

        self.register(ssn, "preemptable", evictable)
        self.register(ssn, "reclaimable", evictable)


PLUGIN = ConformancePlugin
