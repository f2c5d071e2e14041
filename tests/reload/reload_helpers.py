"""The scheduling loop with a hot-reloading policy, in process: an embedded cluster that records
which policy revision each cycle started and ended with, a reloader watching real files."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from polling import wait_for

from runtime.cluster.decisions import Decisions
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime.cluster.connection import ApplyReport
from runtime.cluster.connection import QueueUsage
from runtime.kube.metrics import Metrics
from runtime.cluster.model import ClusterState, Node, Pod, PodGroup
from runtime.service.reload import PolicyReloader, ReloadOutcome, attempt_compile

GIB = 2**30


def policy_text(name: str = "reload-test", binpack_weight: int = 1, *, gang: str = "gang", queues: str = "",
                includes: tuple[str, ...] = ()) -> str:
    """A small policy; each binpack weight is another revision, `gang="gnag"` an error at 5:10."""
    lines = [f'policy "{name}" version 1', *(f'include "{i}"' for i in includes),
             "actions [enqueue, allocate, backfill]", "tier {", "  plugin priority", f"  plugin {gang}", "}",
             "tier {", "  plugin predicates", "  plugin proportion", f"  plugin binpack weight {binpack_weight}", "}"]
    return "\n".join(lines) + "\n" + queues


def write(path: Path, text: str) -> None:
    """Replace the file the way editors and `kubectl cp` do: a new file renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def revision_of(policy: Path | str) -> str:
    attempt = attempt_compile(policy)
    assert attempt.plan is not None, [str(d.message) for d in attempt.errors]
    return attempt.plan.revision


def small_cluster(pods: int = 0) -> ClusterState:
    state = ClusterState()
    for i in range(2):
        state.add_node(Node(f"n{i}", {"cpu": 8000, "memory": 32 * GIB, "pods": 110}))
    for i in range(pods):
        state.add_pod(Pod("ns", f"p{i}", {"cpu": 100}, uid=f"u{i}", scheduler_name="volcano", creation=float(i)))
    return state


def add_gang(state: ClusterState, name: str, size: int, queue: str, *, cpu: int = 1000, node: str | None = None) -> None:
    state.add_podgroup(PodGroup("ns", name, min_member=size, queue=queue, uid=f"g-{name}",
                                phase="Running" if node else "Inqueue"))
    for i in range(size):
        state.add_pod(Pod("ns", f"{name}-{i}", {"cpu": cpu}, uid=f"{name}-{i}", scheduler_name="volcano", group=name,
                          node_name=node, phase="Running" if node else "Pending", creation=float(i)))


class RecordingCluster(EmbeddedCluster):
    """The revision the scheduler held when each cycle took its snapshot and when it applied."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(state)
        self.scheduler: Scheduler | None = None
        self.cycles: list[tuple[str, str]] = []
        self._began = ""

    def snapshot(self, fold_settled: bool = False) -> ClusterState:
        assert self.scheduler is not None
        self._began = self.scheduler.plan.revision
        return super().snapshot()

    def apply(self, decisions: Decisions, state: ClusterState, usage: Mapping[str, QueueUsage]) -> ApplyReport:
        report = super().apply(decisions, state, usage)
        assert self.scheduler is not None
        self.cycles.append((self._began, self.scheduler.plan.revision))
        return report

    def mixed(self) -> list[tuple[str, str]]:
        return [c for c in self.cycles if c[0] != c[1]]


@dataclass
class Loop:
    scheduler: Scheduler
    reloader: PolicyReloader
    cluster: RecordingCluster
    metrics: Metrics
    outcomes: list[ReloadOutcome] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def revision(self) -> str:
        return self.scheduler.plan.revision

    def wait_active(self, revision: str, timeout: float = 30.0) -> None:
        """Until cycles run under `revision` (one took it at its start and finished)."""
        wait_for(lambda: any(began == revision for began, _ in self.cluster.cycles[-3:]),
                 f"cycles under revision {revision} (active: {self.revision})", timeout)

    def wait_outcomes(self, count: int, timeout: float = 30.0) -> list[ReloadOutcome]:
        wait_for(lambda: len(self.outcomes) >= count, f"{count} reload outcomes (have {len(self.outcomes)})", timeout)
        return self.outcomes

    def sample(self, metric: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(metric, labels)

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(10)
        self.reloader.stop()


@pytest.fixture
def loop() -> Iterator[Callable[..., Loop]]:
    """`loop(policy_path, state, debounce=..., period=..., watch=True)`: the scheduler running
    on its own thread with a reloader watching the policy. At the end: no cycle ran under two
    policies."""
    made: list[Loop] = []

    def make(policy: Path | str, state: ClusterState | None = None, *, debounce: float = 0.05,
             period: float = 0.05, watch: bool = True) -> Loop:
        first = attempt_compile(policy)
        assert first.plan is not None
        metrics = Metrics()
        cluster = RecordingCluster(state if state is not None else small_cluster())
        scheduler = Scheduler(first.plan, cluster, period=period, metrics=metrics)
        cluster.scheduler = scheduler
        running = Loop(scheduler, None, cluster, metrics)  # type: ignore[arg-type]
        running.reloader = PolicyReloader(policy, first, scheduler, metrics=metrics, debounce=debounce,
                                          on_reload=running.outcomes.append)
        running.reloader.start(watch=watch)
        running.thread = threading.Thread(target=scheduler.run, args=(running.stop,), daemon=True)
        running.thread.start()
        made.append(running)
        if watch:
            wait_for(lambda: running.reloader.watching, "the watcher to start")
        return running

    yield make
    for running in made:
        running.close()
    for running in made:
        assert running.cluster.mixed() == [], "a cycle began under one policy and ended under another"
