"""usage: node load keeps new pods off busy nodes and scores idle ones higher, as Volcano's usage plugin.

A node's load is its CPU and memory use in percent, averaged over 10 minutes, read from the
metrics source (the policy's metrics_* arguments, Volcano's `metrics` section) off the
scheduling path (runtime.cluster.nodeusage) and handed to the cycle as ClusterState.node_usage.

Filter (Volcano's predicateFn): a node with fresh figures (read within the last 5 minutes) whose
CPU load is above `cpu_threshold` fails with "the CPU load of the node exceeds the upper limit.",
else one whose memory load is above `memory_threshold` fails with the memory text. Score
(nodeOrderFn), on a node with fresh figures:
    ((100 - cpu) / 100 × cpu_weight + (100 - memory) / 100 × memory_weight) / (cpu_weight + memory_weight)
    × 100 × the plugin's weight (Volcano's usage.weight, default 5)
A node without fresh figures passes the filter and scores 0, as in Volcano; with no figures at
all this cycle (no source, or it has not answered yet) the plugin says so in the log once, so a
policy that asks for load and gets none is not silently the same as one that does not ask.
The figures are the same for every pod, so the answer is one node mask and one score column."""

from __future__ import annotations

import logging
import time

import numpy as np

from runtime.cluster.nodeusage import METRICS_ACTIVE_S, WITH_THE_SNAPSHOT
from runtime.engine.extension import Check
from runtime.engine.plugins.base import Plugin

log = logging.getLogger(__name__)

DEFAULT_WEIGHT = 5.0
MAX_NODE_SCORE = 100.0
# Volcano's fit error texts (plugins/usage/usage.go), without their final period: the reason's
# sentence ("0/3 nodes are available: 1 ..., 2 ....") ends itself.
CPU_OVER = "the CPU load of the node exceeds the upper limit"
MEMORY_OVER = "the memory load of the node exceeds the upper limit"

# Whether the last session had fresh figures for no node: said once per change, not every cycle.
blind_said: list[bool] = [False]


def fresh_load(names: list[str], figures: dict | None, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fresh, cpu, memory) per node: figures read within METRICS_ACTIVE_S of `now` (a reading
    time of 0, never read, is never fresh, as Volcano's zero MetricsTime)."""
    n = len(names)
    fresh = np.zeros(n, dtype=bool)
    cpu = np.zeros(n, dtype=np.float64)
    memory = np.zeros(n, dtype=np.float64)
    for i, name in enumerate(names):
        usage = (figures or {}).get(name)
        if usage is not None and usage.time > 0 and (usage.time == WITH_THE_SNAPSHOT
                                                     or now - usage.time <= METRICS_ACTIVE_S):
            fresh[i], cpu[i], memory[i] = True, usage.cpu, usage.memory
    return fresh, cpu, memory


def usage_checks(fresh: np.ndarray, cpu: np.ndarray, memory: np.ndarray, cpu_threshold: float,
                 memory_threshold: float) -> list[Check]:
    """Volcano's predicateFn over nodes: CPU first, memory only where CPU passed."""
    cpu_over = fresh & (cpu > cpu_threshold)
    memory_over = fresh & ~cpu_over & (memory > memory_threshold)
    return [Check(CPU_OVER, ~cpu_over), Check(MEMORY_OVER, ~memory_over)]


def usage_scores(fresh: np.ndarray, cpu: np.ndarray, memory: np.ndarray, cpu_weight: float, memory_weight: float,
                 weight: float) -> np.ndarray:
    """Volcano's nodeOrderFn over nodes (0 where figures are not fresh; 0 when both weights are 0,
    where Volcano would divide by zero)."""
    total = cpu_weight + memory_weight
    if total <= 0:
        return np.zeros(len(fresh), dtype=np.float64)
    score = ((100 - cpu) / 100 * cpu_weight + (100 - memory) / 100 * memory_weight) / total
    return np.where(fresh, score * MAX_NODE_SCORE * weight, 0.0)


class UsagePlugin(Plugin):
    name = "usage"
    answers = frozenset({"predicate", "node_order"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        weight = float(self.spec.weight if self.spec.weight is not None else DEFAULT_WEIGHT)
        answer: list = []      # (checks, scores), made at the first question: the cycle's clock is set by then

        def made() -> tuple[list[Check], np.ndarray | None]:
            if not answer:
                now = ssn.now if ssn.now is not None else time.time()
                fresh, cpu, memory = fresh_load(snap.node_names, snap.node_usage, now)
                say_when_blind(bool(fresh.any()) or not snap.n_nodes, snap.node_usage is None)
                checks = usage_checks(fresh, cpu, memory, float(self.args.get("cpu_threshold", 80)),
                                      float(self.args.get("memory_threshold", 80)))
                scores = usage_scores(fresh, cpu, memory, float(self.args.get("cpu_weight", 1)),
                                      float(self.args.get("memory_weight", 1)), weight)
                answer.extend((checks, scores if scores.any() else None))
            return answer[0], answer[1]

        self.register(ssn, "predicate", lambda cls: made()[0])
        self.register(ssn, "node_order", lambda cls: made()[1])


def say_when_blind(sees: bool, no_source: bool) -> None:
    """Log once (until figures come) that the plugin sees no node's load, and why."""
    if sees:
        blind_said[0] = False
        return
    if not blind_said[0]:
        why = ("no metrics source is read for this run" if no_source
               else "the metrics source has no figures of the last 5 minutes for any node")
        log.warning("usage: %s; every node passes the usage filter and scores 0 (as Volcano with no figures)", why)
    blind_said[0] = True


PLUGIN = UsagePlugin
