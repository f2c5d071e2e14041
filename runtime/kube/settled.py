"""The cache's running count of settled pods (runtime.model.SettledPods), kept per watch event
so that a snapshot for a plan that folds them copies the pods still in play and a few counts,
not every pod of the cluster.

    ledger = SettledLedger("volcano")
    ledger.add(pod)            # a pod that settles (runtime.model.settles) arrived
    ledger.remove(pod)         # ... changed or left: the same object that was added
    ledger.view()              # SettledPods: copies of the counts
"""

from __future__ import annotations

from runtime.model import QUEUE_ANNOTATION, SUCCEEDED, Pod, SettledPods


class SettledLedger:
    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self._by_queue: dict[tuple[str | None, tuple], int] = {}
        self._by_node: dict[tuple[str, tuple, bool], int] = {}

    def add(self, pod: Pod) -> None:
        self._count(pod, 1)

    def remove(self, pod: Pod) -> None:
        self._count(pod, -1)

    def view(self) -> SettledPods:
        return SettledPods(self.scheduler_name, dict(self._by_queue), dict(self._by_node))

    def clear(self) -> None:
        self._by_queue.clear()
        self._by_node.clear()

    def _count(self, pod: Pod, step: int) -> None:
        ours = pod.scheduler_name == self.scheduler_name
        if ours and pod.phase == SUCCEEDED:
            return  # holds nothing, counts nowhere
        items = tuple(pod.requests.items())
        _bump(self._by_node, (pod.node_name, items, ours), step)
        if ours:
            _bump(self._by_queue, (pod.annotations.get(QUEUE_ANNOTATION), items), step)


def _bump(counts: dict, key: tuple, step: int) -> None:
    left = counts.get(key, 0) + step
    if left:
        counts[key] = left
    else:
        del counts[key]
