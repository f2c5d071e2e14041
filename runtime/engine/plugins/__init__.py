"""Plugins: one module each, registering callbacks at the session's extension points.

`registry()` maps a plugin name (as the policy and compiler.catalog spell it) to its class. A
plugin is built from its PluginPlan and registers, in `on_session_open`, only the points that
PluginPlan.enabled(point) allows (`Plugin.register` checks it).
"""

from __future__ import annotations

from functools import cache

from compiler import catalog as cat
from runtime.engine.extension import POINTS
from runtime.engine.plugins import (
    binpack, capacity, cdp, conformance, deviceshare, drf, gang, network_topology, nodegroup, nodeorder, overcommit,
    pdb, predicates, priority, proportion, resource_strategy_fit, resourcequota, sla, task_topology,
)
from runtime.engine.plugins import numa_aware
from runtime.engine.plugins import extender, usage
from runtime.engine.plugins import rescheduling, tdm
from runtime.engine.plugins.base import CatalogMismatch, Plugin


def catalog_mismatches(plugins: dict[str, type[Plugin]]) -> list[str]:
    """Where the catalog and these plugin classes disagree (empty when they agree)."""
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
    plugins = {m.PLUGIN.name: m.PLUGIN for m in (priority, gang, conformance, drf, proportion, capacity, overcommit,
                                                 predicates, nodeorder, binpack, deviceshare,
                                                 network_topology, nodegroup, cdp, resource_strategy_fit, sla,
                                                 resourcequota, pdb, task_topology)}
    plugins[numa_aware.PLUGIN.name] = numa_aware.PLUGIN
    plugins.update({m.PLUGIN.name: m.PLUGIN for m in (usage, extender)})
    plugins.update({m.PLUGIN.name: m.PLUGIN for m in (tdm, rescheduling)})
    problems = catalog_mismatches(plugins)
    if problems:
        raise CatalogMismatch("; ".join(problems))
    return plugins
