"""network-topology-aware: Volcano's plugin of that name (pkg/scheduler/plugins/network-topology-aware).

Two scores, both HyperNode-level binpack (`hypernode_binpack`): for resource r with a weight
(`cpu`, `memory`, `resources`), s_r = (used_r + request_r) / allocatable_r over the HyperNode's
nodes; a HyperNode where some used + request > allocatable scores 0; else Σ w_r s_r / Σ w_r (0 when
no weighted resource is requested). Final scores are × 100 × the plugin's weight (Volcano's
`weight`, scaleFinalScore).

- The HyperNode score (Volcano's HyperNodeOrderFn): allocate (actions/topology.py) asks
  `Session.hypernode_order` to pick the best HyperNode of a tier among those the job's dry runs
  placed it in. The request is what the job's tasks ask together; when several HyperNodes share
  the top score, each of those adds the share of the job's tasks already on its nodes
  (scoreWithTaskNum).
- The node score for pods of jobs without network topology (`normal_pod_binpack`, Volcano's
  batchNodeOrderFnForNormalPods): a node's score is Σ over tiers t of fading^(t-1) × the binpack
  score of its tier-t HyperNode (1 where no HyperNode of tier t holds it), over Σ fading^(t-1):
  pods fill switches already in use, so whole switches stay free for gangs.

Not built: the node score for pods of a topology job (Volcano's LCA tier score, which only
matters once a job has a HyperNode: here such a job is placed within one HyperNode anyway), and
the eviction gradients (`hypernode.gradient.evict.max-hypernodes`)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from runtime.engine.extension import StatefulRule
from runtime.engine.plugins.base import Plugin
from runtime.engine.rules.hypernodes import asks_topology, row_memo

MAX_NODE_SCORE = 100.0
SCALAR_BELOW = 8        # fewer HyperNodes than this to rescore: plain floats beat numpy's call cost


def hypernode_binpack(weights: Mapping[int, float], allocatable: np.ndarray, used: np.ndarray,
                      request: np.ndarray) -> float:
    """Volcano's HyperNode-level binpack score (0..1) of `request` on a HyperNode whose nodes
    together offer `allocatable` and use `used` (vectors by resource column); `weights`: column →
    weight, the resources that count."""
    total = 0.0
    total_weight = 0.0
    for c, w in weights.items():
        req = float(request[c])
        if req <= 0:
            continue            # Volcano iterates the resources the request names
        alloc, use = float(allocatable[c]), float(used[c])
        if use + req > alloc:
            return 0.0
        total += w * (use + req) / alloc
        total_weight += w
    return total / total_weight if total_weight > 0 else 0.0


def hypernode_binpack_many(weights: Mapping[int, float], allocatable: np.ndarray, used: np.ndarray,
                           request: np.ndarray) -> np.ndarray:
    """`hypernode_binpack` of one request on many HyperNodes at once (rows of `allocatable` and
    `used`), with the same operations in the same order, so the scores are equal bit for bit
    (ties between HyperNodes are decided on equal scores)."""
    n = allocatable.shape[0]
    total = np.zeros(n, dtype=np.float64)
    over = np.zeros(n, dtype=bool)
    total_weight = 0.0
    for c, w in weights.items():
        req = float(request[c])
        if req <= 0:
            continue
        alloc, use = allocatable[:, c].astype(np.float64), used[:, c].astype(np.float64)
        over |= use + req > alloc           # so alloc > 0 wherever the term below is kept
        total += np.where(over, 0.0, w * (use + req) / np.where(over, 1.0, alloc))
        total_weight += w
    if total_weight <= 0:
        return np.zeros(n, dtype=np.float64)
    return np.where(over, 0.0, total / total_weight)


class NormalPodScore(StatefulRule):
    """The node score of pods without network topology: the fading-weighted HyperNode binpack."""

    name = "network-topology-aware"

    def __init__(self, plugin: "NetworkTopologyPlugin", ssn, plain: set[int]):
        self.plugin = plugin
        self.ssn = ssn
        snap = ssn.snap
        tree = snap.hypernodes
        self.tiers = tree.tiers
        fading = float(plugin.args.get("normal_pod_fading", 0.8))
        lo, hi = self.tiers[0], self.tiers[-1]
        self.tier_weights = {t: fading ** (t - 1) for t in range(lo, hi + 1)}   # 0 ** 0 == 1, as Go's
        self.total_weight = sum(self.tier_weights.values())
        # A class shared by both kinds of job is scored as a plain pod's (its tasks look alike).
        self.concerned = plain
        # node row → (tier, HyperNode index) for each tier; HyperNode index → its rows.
        pos = {name: i for i, name in enumerate(snap.node_names)}
        self.names = [h for t in self.tiers for h in tree.by_tier[t]]
        self.rows = [np.array(sorted(pos[n] for n in tree.leaves.get(h, ()) if n in pos), dtype=np.int64)
                     for h in self.names]
        self.member = np.full((len(range(lo, hi + 1)), snap.n_nodes), -1, dtype=np.int64)
        tier_of = {h: snap.hypernodes.hypernodes[h].tier for h in self.names}
        for i, h in enumerate(self.names):
            self.member[tier_of[h] - lo, self.rows[i]] = i
        self.lo = lo
        self.weight = MAX_NODE_SCORE * plugin.weight
        self.hn_alloc: np.ndarray | None = None
        self.hn_used: np.ndarray | None = None
        self.filled = np.array([len(r) > 0 for r in self.rows], dtype=bool)
        # A HyperNode's version moves with its used; a class's per-HyperNode scores are recomputed
        # only for the HyperNodes whose version moved since (one placement touches one per tier).
        self.version = np.zeros(len(self.rows), dtype=np.int64)
        self.per_hn: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # node row -> the HyperNodes holding it and their nodes (kept: marking them twice is free)
        self.touched: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        self.held_nodes: dict[tuple[int, ...], np.ndarray] = {}   # one array per set of HyperNodes

    def scores(self, cid: int) -> bool:
        return cid in self.concerned and self.total_weight > 0

    def sums(self) -> tuple[np.ndarray, np.ndarray]:
        """Each HyperNode's allocatable and used (what pods hold and pipelined tasks are promised),
        by resource: summed once, then kept by `placed` and `unplaced`."""
        if self.hn_used is None:
            snap, used = self.ssn.snap, self.ssn.used + self.ssn.pipelined
            shape = (len(self.rows), snap.allocatable.shape[1])
            self.hn_alloc = np.zeros(shape, dtype=np.float64)
            self.hn_used = np.zeros(shape, dtype=np.float64)
            for i, r in enumerate(self.rows):
                if len(r):
                    self.hn_alloc[i] = snap.allocatable[r].sum(axis=0)
                    self.hn_used[i] = used[r].sum(axis=0)
        return self.hn_alloc, self.hn_used

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        snap = self.ssn.snap
        per_hn = self.hypernode_scores(cid)
        rows = np.arange(snap.n_nodes) if nodes is None else nodes
        total = np.zeros(len(rows), dtype=np.float64)
        for t, w in self.tier_weights.items():
            idx = self.member[t - self.lo, rows]
            tier_score = np.where(idx >= 0, per_hn[np.maximum(idx, 0)], 1.0) if len(per_hn) else np.ones(len(rows))
            total += w * tier_score
        return total / self.total_weight * self.weight

    def hypernode_scores(self, cid: int) -> np.ndarray:
        """Class cid's binpack score on each HyperNode (0 for one without nodes), kept per class
        and recomputed only where a HyperNode's used moved since."""
        alloc, used = self.sums()
        kept = self.per_hn.get(cid)
        if kept is None:
            request = np.asarray(self.ssn.snap.classes[cid].request, dtype=np.float64)
            per_hn = np.where(self.filled, hypernode_binpack_many(self.plugin.columns, alloc, used, request), 0.0)
            self.per_hn[cid] = (per_hn, self.version.copy())
            return per_hn
        per_hn, seen = kept
        stale = np.flatnonzero(seen != self.version)
        if len(stale):
            request = np.asarray(self.ssn.snap.classes[cid].request, dtype=np.float64)
            if len(stale) < SCALAR_BELOW:        # a placement moves one HyperNode per tier
                for i in stale.tolist():
                    per_hn[i] = hypernode_binpack(self.plugin.columns, alloc[i], used[i], request) \
                        if self.filled[i] else 0.0
            else:
                per_hn[stale] = np.where(self.filled[stale], hypernode_binpack_many(
                    self.plugin.columns, alloc[stale], used[stale], request), 0.0)
            seen[stale] = self.version[stale]
        return per_hn

    def moved(self, t: int, node: int, sign: int) -> None:
        if self.hn_used is None or not self.concerned:
            return                  # summed from the session's arrays when first asked; or no class scored
        found = self.touched.get(node)
        if found is None:
            held = self.member[:, node]
            held = held[held >= 0]
            key = tuple(held.tolist())
            nodes = self.held_nodes.get(key)
            if nodes is None and key:
                nodes = self.held_nodes[key] = np.unique(np.concatenate([self.rows[i] for i in key]))
            found = self.touched[node] = (held, nodes)
        held, nodes = found
        if nodes is None:
            return
        self.hn_used[held] += sign * self.ssn.snap.request[t]
        self.version[held] += 1
        # Every node of those HyperNodes scores anew (their top tier usually holds every node).
        self.ssn.mark_all_dirty(nodes, self)

    def placed(self, t: int, node: int) -> None:
        self.moved(t, node, 1)

    def unplaced(self, t: int, node: int) -> None:
        self.moved(t, node, -1)

    # An eviction leaves a node's used as it is (the victim is releasing), as Volcano's.


class NetworkTopologyPlugin(Plugin):
    name = "network-topology-aware"
    answers = frozenset({"node_order"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        self.weight = float(self.spec.weight if self.spec.weight is not None else 1.0)
        weights = {"cpu": self.args.get("cpu", 1), "memory": self.args.get("memory", 1)}
        weights.update(self.args.get("resources") or {})
        self.columns = {snap.resource_index[name]: float(w) for name, w in weights.items()
                        if name in snap.resource_index}
        self.ssn = ssn
        if self.spec.enabled("hypernode_order"):     # a Volcano switch, not an extension point here
            ssn.hypernode_order = self.hypernode_order
        # A HyperNode's rows (kept, so `is` is a safe test) and their allocatable, kept while the
        # node list and HyperNodes are the same (rules.hypernodes.row_memo).
        self._alloc_sums: dict[str, tuple[np.ndarray, np.ndarray]] = \
            row_memo(snap)["allocatable"] if snap.hypernodes is not None else {}
        if (self.args.get("normal_pod_binpack", True) and self.spec.enabled("node_order")
                and snap.hypernodes is not None and snap.hypernodes.tiers):
            plain = {int(c) for job in snap.jobs if not asks_topology(job)
                     for c in snap.task_class[job.tasks].tolist()}
            if plain:       # no pod without topology: nothing to score, nothing to keep per cycle
                self.register(ssn, "node_order", NormalPodScore(self, ssn, plain))

    def allocatable_of(self, name: str, rows: np.ndarray) -> np.ndarray:
        """The allocatable of a HyperNode's rows, summed once per session for the same rows
        (a sub-group's candidates come as new arrays each time: summed each time)."""
        kept = self._alloc_sums.get(name)
        if kept is None or kept[0] is not rows:
            kept = self._alloc_sums[name] = (rows, self.ssn.snap.allocatable[rows].sum(axis=0))
        return kept[1]

    def hypernode_order(self, j: int, candidates: dict[str, np.ndarray],
                        tasks: list[int] | None = None) -> dict[str, float]:
        """Volcano's HyperNodeOrderFn: each candidate HyperNode (name → its node rows) scored for job j
        (`tasks`: for one of its sub-groups, those tasks)."""
        ssn = self.ssn
        snap = ssn.snap
        job = snap.jobs[j]
        if tasks is None:
            tasks = job.tasks.tolist()   # as Volcano's subJob.Tasks: every task of the job
        request = snap.request[tasks].sum(axis=0).astype(np.float64) if tasks else \
            np.zeros(snap.request.shape[1], dtype=np.float64)
        used = ssn.used + ssn.pipelined
        names = list(candidates)
        width = snap.allocatable.shape[1]
        allocs = np.array([self.allocatable_of(name, candidates[name]) for name in names]).reshape(len(names), width)
        # Every candidate's used in one gather (integer sums: the same as one candidate at a time).
        rows = [candidates[name] for name in names]
        filled = [i for i, r in enumerate(rows) if len(r)]
        useds = np.zeros((len(names), width), dtype=used.dtype)
        if filled:
            lengths = np.array([len(rows[i]) for i in filled], dtype=np.int64)
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            useds[filled] = np.add.reduceat(used[np.concatenate([rows[i] for i in filled])], starts, axis=0)
        many = hypernode_binpack_many(self.columns, allocs, useds, request)
        scores = {name: float(many[i]) if len(candidates[name]) else 0.0 for i, name in enumerate(names)}
        if scores:
            top = max(scores.values())
            best = [name for name, s in scores.items() if s == top]
            nodes = ssn.task_node[tasks] if len(best) > 1 and tasks else None
            placed = nodes[nodes >= 0] if nodes is not None else ()
            if len(placed):     # ties broken by the share of the job's tasks already there
                for name in best:
                    scores[name] += float(np.isin(placed, candidates[name]).sum()) / len(tasks)
        return {name: MAX_NODE_SCORE * self.weight * s for name, s in scores.items()}


PLUGIN = NetworkTopologyPlugin
