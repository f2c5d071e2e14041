"""The kernels: fit, score, placement and share computations over the snapshot's arrays.

`load()` returns the compiled Cython kernels (runtime/engine/kernels/*.pyx, built by `pip install -e .`
or `python setup.py build_ext --inplace`), or the pure-Python reference when asked for
(`load(pure=True)` or the environment variable POLICYDSL_PURE_PYTHON=1). Both expose the same
functions: fit_states, score_nodes, place_batch, dominant_shares, water_fill, the per-row share
classes (RowShare, QueueShare, AtLimit, CountWithin: bound to the session's arrays once, called
per row), the PlacementTree class (place_batch's tree kept per task class between jobs), the
Ledger class (the session's accounting), the
snapshot's passes over the pods (scan_pods, group_tasks, task_columns, node_usage, build_jobs) and the
cycle's decisions (placements, podgroup_statuses).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

BUILD_HINT = "the Cython kernels are not built: run `pip install -e .` (or `python setup.py build_ext --inplace`)"


class KernelsNotBuilt(ImportError):
    pass


@dataclass(frozen=True)
class Kernels:
    name: str                      # "compiled" or "python"
    fit_states: Callable
    score_nodes: Callable
    place_batch: Callable
    dominant_shares: Callable
    water_fill: Callable
    RowShare: type
    QueueShare: type
    AtLimit: type
    CountWithin: type
    PlacementTree: type
    Ledger: type
    scan_pods: Callable
    group_tasks: Callable
    task_columns: Callable
    node_usage: Callable
    build_jobs: Callable
    placements: Callable
    podgroup_statuses: Callable


class ScoreParams:
    """The score kernel's terms (`c_score` in _core.pxi, `score_node` in reference.py) as one
    float64 vector the kernels read, set by name so no plugin writes an index:

        [0] binpack weight   [1] least-requested   [2] most-requested   [3] balanced allocation
        [4 : 4+R]     binpack weight of each resource
        [4+R : 4+2R]  the resources least/most-requested and balanced allocation average over

    Several plugins may add to the same term (their weights sum, as Volcano sums scores)."""

    def __init__(self, n_resources: int):
        self.n_resources = n_resources
        self.vector = np.zeros(4 + 2 * n_resources, dtype=np.float64)

    def binpack(self, weight: float, resource_weights: dict[int, float]) -> None:
        self.vector[0] += weight
        for r, w in resource_weights.items():
            self.vector[4 + r] = float(w)

    def requested(self, least: float, most: float, balanced: float, resources: list[int]) -> None:
        self.vector[1] += least
        self.vector[2] += most
        self.vector[3] += balanced
        for r in resources:
            self.vector[4 + self.n_resources + r] = 1.0


def pure_python_requested() -> bool:
    return os.environ.get("POLICYDSL_PURE_PYTHON", "") not in ("", "0")


def load(pure: bool | None = None) -> Kernels:
    if pure is None:
        pure = pure_python_requested()
    if pure:
        from runtime.engine.kernels import reference as ref
        return Kernels("python", ref.fit_states, ref.score_nodes, ref.place_batch, ref.dominant_shares,
                       ref.water_fill, ref.RowShare, ref.QueueShare, ref.AtLimit, ref.CountWithin,
                       ref.PlacementTree, ref.Ledger, ref.scan_pods, ref.group_tasks, ref.task_columns,
                       ref.node_usage, ref.build_jobs, ref.placements, ref.podgroup_statuses)
    try:
        from runtime.engine.kernels import collect, fit, ledger, place, scan, share
    except ImportError as err:
        raise KernelsNotBuilt(f"{BUILD_HINT} ({err})") from None
    return Kernels("compiled", fit.fit_states, place.score_nodes, place.place_batch, share.dominant_shares,
                   share.water_fill, share.RowShare, share.QueueShare, share.AtLimit, share.CountWithin,
                   place.PlacementTree, ledger.Ledger, scan.scan_pods, scan.group_tasks, scan.task_columns,
                   scan.node_usage, scan.build_jobs, collect.placements, collect.podgroup_statuses)
