"""Plugins: one module each, registering callbacks at the session's extension points.

`REGISTRY` maps a plugin name (as the policy and compiler.catalog spell it) to its class. A
plugin is built from its PluginPlan and registers, in `on_session_open`, only the points that
PluginPlan.enabled(point) allows (`Plugin.register` checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from compiler.plan import PluginPlan

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from runtime.session import Session


class Plugin:
    name = ""

    def __init__(self, spec: PluginPlan):
        self.spec = spec
        self.args = dict(spec.arguments)

    def register(self, ssn: "Session", point: str, fn: Callable,
                 column: Callable[[], "np.ndarray"] | None = None) -> None:
        """`column` (order points only): the same answer for every row at once (Session.job_order)."""
        if self.spec.enabled(point):
            ssn.register(point, self.name, fn, column)

    def on_session_open(self, ssn: "Session") -> None:  # pragma: no cover - overridden
        raise NotImplementedError


def registry() -> dict[str, type[Plugin]]:
    from runtime.plugins import (
        binpack, capacity, conformance, deviceshare, drf, gang, nodeorder, overcommit, predicates, priority,
        proportion,
    )
    return {m.PLUGIN.name: m.PLUGIN for m in (priority, gang, conformance, drf, proportion, capacity, overcommit,
                                              predicates, nodeorder, binpack, deviceshare)}
