"""The kernels: fit, score, placement and share computations over the snapshot's arrays, the
session's ledger, and the passes over Python objects (the snapshot's over the pods, collect's
decisions).

One source per kernel module, in Cython's pure-Python mode: `place.py` (fit, score, placement
tree), `share.py`, `ledger.py` and `passes.py` (with `passes.pxd`, the C declarations of its slot
accessors); the codes they share are declared once in `codes.py`. `python setup.py build_ext
--inplace` (or `pip install -e .`) compiles each module to an extension beside its source, which
Python then imports in its place. Unbuilt, the same sources run interpreted (the `cython`
package's shadow module makes the decorators and C types plain Python), an order of magnitude
slower (a cycle at 5,000 nodes about 14 times: bench/core.py section 2).

`load()` returns the compiled modules, or, when they are not built, the interpreted ones with a
RuntimeWarning (once per process) saying how to build them. `load(pure=True)` (or the
environment variable POLICYDSL_PURE_PYTHON=1, or `Options(pure_python=True)`) returns the
interpreted ones even when the compiled ones are built: `interpreted(name)` executes the module's
source again under the name `runtime.engine.kernels.interpreted.<name>`, so both paths of the one
source run side by side in a process (the parity tests and bench/core.py compare them; they can
disagree where C semantics differ: integer overflow, C division, typed truncation, unchecked
bounds). `load(pure=False)` insists on the compiled ones (KernelsNotBuilt otherwise). Both expose
the same functions: fit_states, score_nodes, place_batch, dominant_shares, water_fill, the
per-row share classes (RowShare, QueueShare, NamedShare, AtLimit, CountWithin: bound to the session's arrays
once, called per row), the PlacementTree class (place_batch's tree kept per task class between
jobs) and the NodeFits it may read its keys from, the Ledger class (the session's accounting), the snapshot's passes over the pods
(scan_pods, group_tasks, task_columns, node_usage, build_jobs, same_objects, job_columns) and the
cycle's decisions
(placements, podgroup_statuses).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np

MODULES = ("place", "share", "ledger", "passes")     # the kernel modules setup.py compiles
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
    NamedShare: type
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
    NodeFits: type                 # a request's fit and kernel score per node, shared by its classes' trees
    TreeRoom: type                 # room for a few trees' keys at a time, shared by a session's trees
    MaskView: type                 # a class's mask codes as PlacementTree.place_masked reads them
    DomainTree: type               # a shared tree's keys per topology domain (classes scored per domain)
    same_objects: Callable         # per position, whether two lists hold the same object (the pod scan memo)
    job_columns: Callable          # the jobs' fields as arrays (JobColumns), one pass


class ScoreParams:
    """The score kernel's terms (`score_node` in place.py) as one
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


def compiled(module: ModuleType) -> bool:
    """Whether a kernel module was imported from its compiled extension."""
    return isinstance(getattr(module.__spec__, "loader", None), importlib.machinery.ExtensionFileLoader)


_loading = threading.Lock()


def interpreted(name: str) -> ModuleType:
    """Kernel module `name` (one of MODULES) running interpreted: the package's own module when
    it is not built, else its source executed once more under the name
    runtime.engine.kernels.interpreted.<name> (once per process)."""
    module = importlib.import_module(f"{__name__}.{name}")
    if not compiled(module):
        return module
    alias = f"{__name__}.interpreted.{name}"
    with _loading:
        loaded = sys.modules.get(alias)
        if loaded is None:
            spec = importlib.util.spec_from_file_location(alias, Path(__file__).with_name(f"{name}.py"))
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[alias] = loaded
            try:
                spec.loader.exec_module(loaded)
            except BaseException:
                del sys.modules[alias]
                raise
    return loaded


def _kernels(name: str, place: ModuleType, share: ModuleType, ledger: ModuleType, passes: ModuleType) -> Kernels:
    return Kernels(name, place.fit_states, place.score_nodes, place.place_batch, share.dominant_shares,
                   share.water_fill, share.RowShare, share.QueueShare, share.NamedShare, share.AtLimit, share.CountWithin,
                   place.PlacementTree, ledger.Ledger, passes.scan_pods, passes.group_tasks, passes.task_columns,
                   passes.node_usage, passes.build_jobs, passes.placements, passes.podgroup_statuses,
                   place.NodeFits, place.TreeRoom, place.MaskView, place.DomainTree, passes.same_objects,
                   passes.job_columns)


_warned = False


def _warn_not_built() -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"{BUILD_HINT}: the engine runs them interpreted, an order of magnitude slower",
                      RuntimeWarning, stacklevel=3)


def load(pure: bool | None = None) -> Kernels:
    """The kernels: interpreted when `pure` (None: POLICYDSL_PURE_PYTHON decides), else the
    compiled ones, falling back to the interpreted ones with a warning when they are not built
    (unless `pure` is False: then KernelsNotBuilt)."""
    insist = pure is False
    if pure is None:
        pure = pure_python_requested()
    if pure:
        return _kernels("python", *(interpreted(name) for name in MODULES))
    try:
        # lazy: imported when asked for, so that load() sees whether they are built (and a module that
        # cannot be imported at all is reported as KernelsNotBuilt, with the fix)
        from runtime.engine.kernels import ledger, passes, place, share
    except ImportError as err:
        raise KernelsNotBuilt(f"{BUILD_HINT} ({err})") from None
    modules = (place, share, ledger, passes)
    if all(compiled(module) for module in modules):
        return _kernels("compiled", *modules)
    if insist:
        missing = ", ".join(m.__name__ for m in modules if not compiled(m))
        raise KernelsNotBuilt(f"{BUILD_HINT} (not compiled: {missing})")
    _warn_not_built()
    return _kernels("python", *(interpreted(name) for name in MODULES))
