"""Plugins: one module each, registering callbacks at the session's extension points.

`REGISTRY` maps a plugin name (as the policy and compiler.catalog spell it) to its class. A
plugin is built from its PluginPlan and registers, in `on_session_open`, only the points that
PluginPlan.enabled(point) allows (`Plugin.register` checks it).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Callable

from compiler.plan import PluginPlan

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from runtime.engine.session import Session


class CatalogMismatch(RuntimeError):
    """The catalog (compiler.catalog) and the runtime's plugins disagree: a plugin one has and
    the other has not, or an extension point one says a plugin answers and the other does not.
    The scheduler refuses to start on it rather than run a policy it would half ignore."""


class Plugin:
    name = ""
    # The extension points this implementation registers answers at (the catalog's points that
    # are extension points, runtime.engine.extension.POINTS; the rest of them are Volcano switches).
    answers: frozenset[str] = frozenset()

    def __init__(self, spec: PluginPlan):
        self.spec = spec
        self.args = dict(spec.arguments)

    def register(self, ssn: "Session", point: str, fn: Callable,
                 column: Callable[[], "np.ndarray"] | None = None) -> None:
        """`column` (order points only): the same answer for every row at once (Session.job_order)."""
        if point not in self.answers:
            raise CatalogMismatch(f"plugin {self.name} registers `{point}`, which it does not declare")
        if self.spec.enabled(point):
            ssn.register(point, self.name, fn, column)

    def on_session_open(self, ssn: "Session") -> None:  # pragma: no cover - overridden
        raise NotImplementedError


def catalog_mismatches(plugins: dict[str, type[Plugin]]) -> list[str]:
    """Where the catalog and these plugin classes disagree (empty when they agree)."""
    from compiler import catalog as cat
    from runtime.engine.extension import POINTS
    problems = [f"the catalog lists plugin {name}, which the runtime does not implement"
                for name in sorted(set(cat.PLUGINS) - set(plugins))]
    problems += [f"the runtime implements plugin {name}, which the catalog does not list"
                 for name in sorted(set(plugins) - set(cat.PLUGINS))]
    for name in sorted(set(plugins) & set(cat.PLUGINS)):
        listed = cat.PLUGINS[name].points & POINTS
        answers = plugins[name].answers
        problems += [f"the catalog says {name} answers `{p}`, which the runtime does not implement"
                     for p in sorted(listed - answers)]
        problems += [f"the runtime's {name} answers `{p}`, which the catalog does not list"
                     for p in sorted(answers - listed)]
    return problems


@cache
def registry() -> dict[str, type[Plugin]]:
    """Plugin name -> class; raises CatalogMismatch when the catalog says otherwise."""
    from runtime.engine.plugins import (
        binpack, capacity, conformance, deviceshare, drf, gang, nodeorder, overcommit, predicates, priority,
        proportion,
    )
    plugins = {m.PLUGIN.name: m.PLUGIN for m in (priority, gang, conformance, drf, proportion, capacity, overcommit,
                                                 predicates, nodeorder, binpack, deviceshare)}
    problems = catalog_mismatches(plugins)
    if problems:
        raise CatalogMismatch("; ".join(problems))
    return plugins
