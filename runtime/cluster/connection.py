"""What the scheduling loop (runtime.service.loop) asks of a cluster: `ClusterConnection`,
implemented by the Kubernetes connector (runtime.kube.cluster.KubeCluster), the embedded
cluster (runtime.service.embedded), benches and tests; what applying a cycle's decisions did
(`ApplyReport`); and each queue's usage after a cycle (`QueueUsage`), which a connection
writes into Queue status."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from runtime.cluster.decisions import Decisions
from runtime.cluster.model import ClusterState
from runtime.cluster.objects import ObjectProblem

FOREIGN_SCHEDULER = "<left out: unknown queue>"  # no pod's schedulerName: such pods take room, join no job


@dataclass(frozen=True)
class QueueUsage:
    """One queue after a cycle: base units per resource, share = max allocated/deserved."""

    allocated: Mapping[str, int]
    deserved: Mapping[str, float] | None
    share: float | None


@dataclass
class ApplyReport:
    """What applying one cycle's decisions did by the time `apply` returned. A connection
    that binds asynchronously reports `binding` (dispatched) and counts outcomes itself."""

    binding: int = 0
    bound: int = 0
    dropped: int = 0
    bind_failed: int = 0
    evicted: int = 0
    eviction_blocked: int = 0
    eviction_failed: int = 0
    status_writes: int = 0
    events: int = 0


class ClusterConnection(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...

    @property
    def synced(self) -> bool: ...

    def wait_synced(self, timeout: float | None = None) -> bool: ...

    def drain(self, timeout: float | None = None) -> object:
        """Wait until writes still in flight (asynchronous binds) have answered."""

    def snapshot(self, fold_settled: bool = False) -> ClusterState:
        """The cluster now; with `fold_settled` it may count settled pods (ClusterState.settled)
        instead of listing them."""

    def apply(self, decisions: Decisions, state: ClusterState, usage: Mapping[str, QueueUsage]) -> ApplyReport: ...

    def report_invalid(self, problems: list[ObjectProblem], state: ClusterState) -> None: ...

    def on_work(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from any thread, quickly) when something arrives that a cycle may act on."""
