"""resource-strategy-fit: per-resource MostAllocated / LeastAllocated node scores, as Volcano's
resource-strategy-fit plugin (v1.14), with its scarce-resource avoidance (sra) term.

For each resource r the task requests (cpu, memory, extended; not `pods`) that the policy weighs
(`most_allocated` / `least_allocated`, a key ending in `*` weighing every resource it prefixes, the
longest prefix winning; neither set: cpu and memory least-allocated at weight 1):
  MostAllocated  s_r = (used_r + request_r) × w_r / allocatable_r
  LeastAllocated s_r = (allocatable_r − used_r − request_r) × w_r / allocatable_r
(0 where the node has none of r, its weight still counted); score = Σ s_r / Σ w_r × 100 × the
plugin's weight (Volcano's resourceStrategyFitWeight, default 10), and 0 on a node where some
weighed resource would exceed allocatable. `used` counts this cycle's placements (a stateful
scorer). A pod may choose for itself with the annotations volcano.sh/resource-strategy-scoring-type
(MostAllocated / LeastAllocated) and volcano.sh/resource-strategy-weight (JSON {resource: weight});
then only the resources it weighs count, and a malformed weight map scores every node 0, as Volcano.

sra (`sra_weight` > 0): on a node with none of some resource the task requests, 0; else
(1 − Σ w_s over the sra resources the node has / Σ w_s) × 100 × sra_weight: nodes without the
scarce resources are kept for the tasks that need none.

proportional (`proportional = true`, Volcano's proportional policy): for each resource r in
`proportional_cpu` / `proportional_memory` (CPUs and GB of memory kept per unit of r, 1 where only
the other map names r), a task that asks none of those resources passes a node that has r only if,
after it, the node's idle CPU >= idle(r) × cpu ratio and idle memory >= idle(r) × memory ratio × 10^9
bytes (Volcano's milli-unit scalars: 1 GPU = 1000, × ratio milli-CPU; memory × 1000 × 1000). Else
"proportional of resource R check failed" (UnschedulableAndUnresolvable). Idle counts this cycle's
placements and pipelined pods (a stateful filter); a node where only releasing pods' room makes it
pass is a future fit (pipelined), with their GPUs counted idle too.

Tasks of one class share an answer; where pending pods of a class ask different pod-level
strategies, the class waits, saying so (they are told apart by nothing else)."""

from __future__ import annotations

import json

import numpy as np

from runtime.engine.extension import MASK_FAIL, MASK_LATER, MASK_PASS, Check, StatefulRule
from runtime.engine.plugins.base import Plugin
from runtime.engine.snapshot import PENDING

MOST, LEAST = "MostAllocated", "LeastAllocated"
SCORING_TYPE = "volcano.sh/resource-strategy-scoring-type"
SCORING_WEIGHT = "volcano.sh/resource-strategy-weight"
MAX_NODE_SCORE = 100.0
DEFAULT_WEIGHT = 10.0
MILLI_CPU_PER_CPU = 1000               # our cpu column counts millicores
BYTES_PER_GB = 1000 * 1000 * 1000      # Volcano's memoryReserved: milli-units × ratio × 1000 × 1000
MIXED = (f"pods alike in all else ask different {SCORING_TYPE} / {SCORING_WEIGHT}; "
         "one scoring per pod class is evaluated")


def strategy_for(resource: str, strategies: dict[str, tuple[str, float]]) -> tuple[str, float] | None:
    """The (type, weight) weighing `resource`: its own key, else the longest `prefix*` key."""
    if resource in strategies:
        return strategies[resource]
    best, found = -1, None
    for key, value in strategies.items():
        if key.endswith("*") and resource.startswith(key[:-1]) and len(key) - 1 > best:
            best, found = len(key) - 1, value
    return found


def configured(most: dict[str, float], least: dict[str, float]) -> dict[str, tuple[str, float]]:
    """The policy's strategies; a weight of 0 or less counts 1, as Volcano reads it."""
    if not most and not least:
        return {"cpu": (LEAST, 1.0), "memory": (LEAST, 1.0)}
    out = {r: (LEAST, float(w) if w > 0 else 1.0) for r, w in least.items()}
    out.update({r: (MOST, float(w) if w > 0 else 1.0) for r, w in most.items()})
    return out


def pod_strategies(annotations: dict[str, str]) -> dict[str, tuple[str, float]] | None | str:
    """A pod's own strategies: None when it asks none, "invalid" when Volcano would score it 0."""
    kind = annotations.get(SCORING_TYPE, "")
    if not kind:
        return None
    try:
        weights = json.loads(annotations.get(SCORING_WEIGHT, ""))
    except ValueError:
        return "invalid"
    if not isinstance(weights, dict) or not all(isinstance(w, int) and not isinstance(w, bool)
                                                for w in weights.values()):
        return "invalid"
    return {str(r): (kind, float(w)) for r, w in weights.items()}


def strategy_score(request: dict[str, float], used: np.ndarray, allocatable: np.ndarray, names: list[str],
                   strategies: dict[str, tuple[str, float]], weight: float) -> np.ndarray:
    """Volcano's Score over nodes: `used` and `allocatable` (N, len(names)) in `names`' order."""
    n = used.shape[0]
    total = np.zeros(n, dtype=np.float64)
    weight_sum = 0.0
    broken = np.zeros(n, dtype=bool)
    for col, name in enumerate(names):
        amount = request.get(name, 0)
        if amount <= 0 or name == "pods":
            continue
        found = strategy_for(name, strategies)
        if found is None:
            continue
        kind, w = found
        cap = allocatable[:, col].astype(np.float64)
        after = used[:, col].astype(np.float64) + amount
        if w != 0 and kind in (MOST, LEAST):
            live = cap > 0
            broken |= live & (after > cap)
            safe = np.where(live, cap, 1.0)
            part = after if kind == MOST else cap - after
            total += np.where(live, part * w / safe, 0.0)
        weight_sum += w
    if weight_sum > 0:
        total /= weight_sum
    total *= MAX_NODE_SCORE * weight
    total[broken] = 0.0
    return total


def sra_score(request: dict[str, float], allocatable: np.ndarray, names: list[str], sra: dict[str, float],
              weight: float) -> np.ndarray:
    """Volcano's sraScore over nodes."""
    index = {name: i for i, name in enumerate(names)}
    n = allocatable.shape[0]
    lacking = np.zeros(n, dtype=bool)
    for name, amount in request.items():
        if amount > 0 and name != "pods":
            lacking |= allocatable[:, index[name]] <= 0 if name in index else True
    have = np.zeros(n, dtype=np.float64)
    weights = {r: (float(w) if w >= 0 else 1.0) for r, w in sra.items()}
    for name, w in weights.items():
        if name in index:
            have += np.where(allocatable[:, index[name]] > 0, w, 0.0)
    total_weight = sum(weights.values())
    score = 1.0 - have / total_weight if total_weight > 0 else have
    score = score * MAX_NODE_SCORE * weight
    score[lacking] = 0.0
    return score


class StrategyScore(StatefulRule):
    """The score of every class on the nodes' usage, kept by placements."""

    name = "resource-strategy-fit"

    def __init__(self, ssn, strategies: dict[str, tuple[str, float]], weight: float, sra: dict[str, float],
                 sra_weight: float, own: dict[int, dict | str | None]):
        self.ssn = ssn
        self.names = list(ssn.snap.resources)
        self.strategies, self.weight, self.sra, self.sra_weight = strategies, weight, sra, sra_weight
        self.own = own
        self._sra: dict[int, np.ndarray] = {}

    def scores(self, cid: int) -> bool:
        return True

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        snap = self.ssn.snap
        rows = np.arange(snap.n_nodes) if nodes is None else nodes
        request = dict(zip(self.names, (float(v) for v in snap.classes[cid].request)))
        out = np.zeros(len(rows), dtype=np.float64)
        own = self.own.get(cid)
        if self.weight > 0 and own != "invalid" and own != MIXED:
            used = (self.ssn.used + self.ssn.pipelined)[rows]
            out += strategy_score(request, used, snap.allocatable[rows], self.names,
                                  own if isinstance(own, dict) else self.strategies, self.weight)
        if self.sra_weight > 0:
            cached = self._sra.get(cid)
            if cached is None:
                cached = self._sra[cid] = sra_score(request, snap.allocatable, self.names, self.sra, self.sra_weight)
            out += cached[rows]
        return out

    def placed(self, t: int, node: int) -> None:
        self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)

    unplaced = placed


def proportional_ratios(cpu: dict[str, float], memory: dict[str, float]) -> dict[str, tuple[float, float]]:
    """resource -> (CPUs, GB of memory) kept per idle unit; an unnamed or negative ratio is 1, as Volcano."""
    out = {}
    for resource in sorted(set(cpu) | set(memory)):
        c, m = float(cpu.get(resource, 1.0)), float(memory.get(resource, 1.0))
        out[resource] = (c if c >= 0 else 1.0, m if m >= 0 else 1.0)
    return out


def proportional_message(resource: str) -> str:
    return f"proportional of resource {resource} check failed"


def proportional_passing(idle: np.ndarray, request: np.ndarray, has: np.ndarray, cpu_col: int, memory_col: int,
                         ratios: list[tuple[int, float, float]]) -> list[np.ndarray]:
    """Per proportional resource (in `ratios`' order: column, cpu ratio, memory ratio), whether each
    row of `idle` (rows × resources, base units) keeps its CPU and memory after `request`; a row
    without the resource (`has` False) passes it."""
    cpu_after = idle[:, cpu_col].astype(np.float64) - request[cpu_col] if cpu_col >= 0 else None
    mem_after = idle[:, memory_col].astype(np.float64) - request[memory_col] if memory_col >= 0 else None
    out = []
    for i, (col, cpu_ratio, memory_ratio) in enumerate(ratios):
        scarce = idle[:, col].astype(np.float64)
        ok = np.ones(idle.shape[0], dtype=bool)
        if cpu_after is not None:
            ok &= cpu_after >= scarce * cpu_ratio * MILLI_CPU_PER_CPU
        else:
            ok &= scarce * cpu_ratio <= 0
        if mem_after is not None:
            ok &= mem_after >= scarce * memory_ratio * BYTES_PER_GB
        else:
            ok &= scarce * memory_ratio <= 0
        out.append(ok | ~has[:, i])
    return out


class ProportionalRule(StatefulRule):
    """Volcano's proportional predicate over the nodes' idle resources, kept by placements."""

    name = "resource-strategy-fit"

    def __init__(self, ssn, ratios: dict[str, tuple[float, float]]):
        self.ssn = ssn
        snap = ssn.snap
        index = {name: i for i, name in enumerate(snap.resources)}
        self.cpu_col, self.memory_col = index.get("cpu", -1), index.get("memory", -1)
        # A resource no node or pod has is no column: no node has it, so it never fails.
        self.ratios = [(name, index[name], c, m) for name, (c, m) in ratios.items() if name in index]
        self.columns = [(col, c, m) for _, col, c, m in self.ratios]
        self.has = (snap.allocatable[:, [col for col, _, _ in self.columns]] > 0) if self.columns else None

    def filters(self, cid: int) -> bool:
        request = self.ssn.snap.classes[cid].request
        return bool(self.columns) and not any(request[col] > 0 for col, _, _ in self.columns)

    def _passing(self, cid: int, rows: np.ndarray, future: bool) -> list[np.ndarray]:
        ssn = self.ssn
        idle = ssn.snap.allocatable[rows] - ssn.used[rows] - ssn.pipelined[rows]
        if future:
            idle = idle + ssn.releasing[rows]
        request = np.asarray(ssn.snap.classes[cid].request, dtype=np.float64)
        return proportional_passing(idle, request, self.has[rows], self.cpu_col, self.memory_col, self.columns)

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        rows = np.arange(self.ssn.snap.n_nodes) if nodes is None else nodes
        now = np.logical_and.reduce(self._passing(cid, rows, False))
        later = np.logical_and.reduce(self._passing(cid, rows, True))
        out = np.where(now, MASK_PASS, np.where(later, MASK_LATER, MASK_FAIL)).astype(np.uint8)
        return out

    def checks(self, cid: int) -> list[Check]:
        rows = np.arange(self.ssn.snap.n_nodes)
        now = self._passing(cid, rows, False)
        later = self._passing(cid, rows, True)
        return [Check(proportional_message(name), p | f)
                for (name, _, _, _), p, f in zip(self.ratios, now, later) if not (p | f).all()]

    def _changed(self, t: int, node: int) -> None:
        self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)

    placed = unplaced = evicted = unevicted = _changed


class ResourceStrategyFitPlugin(Plugin):
    name = "resource-strategy-fit"
    answers = frozenset({"node_order", "predicate"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        weight = float(self.spec.weight if self.spec.weight is not None else DEFAULT_WEIGHT)
        sra_weight = float(self.args.get("sra_weight", 0) or 0)
        strategies = configured(self.args.get("most_allocated") or {}, self.args.get("least_allocated") or {})
        # Each class's pod-level strategies, from its pending tasks (MIXED when they differ).
        own: dict[int, dict | str | None] = {}
        for t in np.flatnonzero(snap.status == PENDING).tolist():
            cid = int(snap.task_class[t])
            mine = pod_strategies(snap.pods[t].annotations)
            if cid in own and own[cid] != mine:
                own[cid] = MIXED
            elif cid not in own:
                own[cid] = mine
        mixed = {cid for cid, v in own.items() if v == MIXED}

        def predicate(cls) -> list[Check]:
            if cls.index in mixed:
                return [Check(MIXED, np.zeros(snap.n_nodes, dtype=bool))]
            return []

        self.register(ssn, "predicate", predicate)
        if self.args.get("proportional"):
            ratios = proportional_ratios(self.args.get("proportional_cpu") or {},
                                         self.args.get("proportional_memory") or {})
            if ratios:
                self.register(ssn, "predicate", ProportionalRule(ssn, ratios))
        if weight > 0 or sra_weight > 0:
            self.register(ssn, "node_order", StrategyScore(ssn, strategies, weight,
                                                           self.args.get("sra_resources") or {}, sra_weight, own))


PLUGIN = ResourceStrategyFitPlugin
