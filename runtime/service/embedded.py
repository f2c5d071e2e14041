"""The embedded cluster: a ClusterState in memory as the scheduler's ClusterConnection.

`policydsl run --cluster embedded:SNAPSHOT` loads a snapshot (files or a folder of Kubernetes
objects, see runtime.cluster.objects) and runs the same loop as against a real cluster: decisions
are applied to the state as the API server and kubelets would make them true (bindings run,
evicted pods leave before the next cycle).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from runtime.cluster.decisions import Decisions
from runtime.cluster.connection import ApplyReport
from runtime.cluster.connection import QueueUsage
from runtime.cluster.model import ClusterState
from runtime.cluster.objects import ObjectProblem

log = logging.getLogger("policydsl.embedded")


class EmbeddedCluster:
    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    @property
    def synced(self) -> bool:
        return True

    def wait_synced(self, timeout: float | None = None) -> bool:
        return True

    def drain(self, timeout: float | None = None) -> None:
        pass  # apply() is synchronous

    def snapshot(self, fold_settled: bool = False) -> ClusterState:
        """A shallow copy: the scheduler may leave objects out of a cycle without losing them.
        Every pod is listed (the snapshot folds settled ones itself when the plan lets it)."""
        return self.state.shallow_copy()

    def report_invalid(self, problems: list[ObjectProblem], state: ClusterState) -> None:
        pass  # the scheduler already logged them

    def on_work(self, callback: Callable[[], None]) -> None:
        pass  # nothing arrives from outside: the state changes only through apply()

    def apply(self, decisions: Decisions, state: ClusterState, usage: Mapping[str, QueueUsage]) -> ApplyReport:
        bound = sum(1 for b in decisions.bindings
                    if (pod := self.state.pods.get(b.pod)) is not None and pod.node_name is None)
        self.state.apply(decisions)
        gone = self.state.advance()
        return ApplyReport(bound=bound, evicted=len(gone))
