"""The catalog (compiler.catalog) and the runtime's plugins check each other: every plugin the
catalog lists exists, and answers exactly the extension points the catalog says it does."""

from __future__ import annotations

import pytest

from compiler import catalog as cat
from runtime.engine.cycle import open_session
from runtime.cluster.model import ClusterState, PodAffinityTerm, PodGroup, PodRules, SpreadConstraint, HostPort
from runtime.cluster.selectors import LabelSelector
from runtime.cluster.topology import HyperNode, Member
from runtime.engine.plugins import catalog_mismatches, registry
from runtime.engine.plugins.base import CatalogMismatch, Plugin
from runtime.engine.extension import POINTS
from runtime_helpers import GiB, gang, node, pod, policy


def test_the_catalog_and_the_runtime_agree():
    assert catalog_mismatches(registry()) == []


class _Stray(Plugin):
    name = "stray"
    answers = frozenset({"job_order"})


class _ShortGang(Plugin):
    name = "gang"
    answers = frozenset({"job_order"})


@pytest.mark.parametrize("change, expect", [
    (lambda p: p.pop("drf"), "the catalog lists plugin drf, which the runtime does not implement"),
    (lambda p: p.update(stray=_Stray), "the runtime implements plugin stray, which the catalog does not list"),
    (lambda p: p.update(gang=_ShortGang), "the catalog says gang answers `job_ready`, which the runtime does not"),
])
def test_a_disagreement_is_named(change, expect):
    plugins = dict(registry())
    change(plugins)
    assert any(problem.startswith(expect) for problem in catalog_mismatches(plugins)), catalog_mismatches(plugins)


def test_a_plugin_registering_an_undeclared_point_is_refused():
    plan = policy("tier { plugin priority }")
    state = ClusterState()
    ssn = open_session(plan, state)
    with pytest.raises(CatalogMismatch, match="does not declare"):
        ssn.plugins["priority"].register(ssn, "allocatable", lambda *a: None)


def _everything_cluster() -> ClusterState:
    """Pods that make every plugin answer: gangs with minResources, a zero-request pod, a device
    request, inter-pod rules, a HyperNode."""
    state = ClusterState()
    node(state, "n1", cpu=8000, memory=32 * GiB, **{"nvidia.com/gpu": 2})
    node(state, "n2", cpu=8000, memory=32 * GiB)
    gang(state, "g", size=2, min_resources={"cpu": 2000}, phase="Pending")
    pod(state, "best-effort", cpu=0, memory=0)
    pod(state, "card", requests={"nvidia.com/gpu": 1})
    term = PodAffinityTerm("kubernetes.io/hostname", LabelSelector((("app", "x"),)), frozenset({"ns"}))
    rules = PodRules(anti_affinity=(term,), spread=(SpreadConstraint(1, "zone", "DoNotSchedule",
                                                                     LabelSelector((("app", "x"),))),),
                     host_ports=(HostPort(80),))
    pod(state, "ruled", labels={"app": "x"}, rules=rules)
    # A HyperNode: network-topology-aware scores plain pods' nodes by it.
    state.add_hypernode(HyperNode("s0", 1, "", (Member("Node", exact="n1"), Member("Node", exact="n2"))))
    # task-topology: a job whose tasks like each other, and one whose annotation names no task of it.
    for name, value in (("tt", "ps,worker"), ("tt-bad", "ps,chief")):
        state.add_podgroup(PodGroup("ns", name, min_member=1, phase="Inqueue", uid=f"pg-{name}",
                                    task_topology=(("volcano.sh/task-topology-affinity", value),)))
        for role in ("ps", "worker"):
            pod(state, f"{name}-{role}", group=name, annotations={"volcano.sh/task-spec": role})
    return state


# Plugins that answer a point only when told whom to ask: the extender registers a verb's point
# when the verb is set (as Volcano's); opening the session asks nothing yet.
SETTINGS = {"extender": ' {\n    url_prefix = "http://127.0.0.1:9"\n' + "".join(
    f'    {verb}_verb = "{verb}"\n' for verb in ("predicate", "prioritize", "preemptable", "reclaimable",
                                            "queue_overused", "job_enqueueable")) + "  }"}


@pytest.mark.parametrize("queues", ["proportion", "capacity"])
def test_every_declared_point_is_answered_in_a_session_that_needs_it(queues):
    names = [n for n in cat.PLUGINS if n not in ("proportion", "capacity", "drf")] + [queues]
    # drf answers reclaim only hierarchical, which may not share proportion's tier.
    tiers = ("tier {\n  plugin drf { enable_hierarchy = true }\n}\ntier {\n"
             + "\n".join(f"  plugin {n}" + SETTINGS.get(n, "") for n in names) + "\n}")
    names.append("drf")
    plan = policy(tiers + '\ndevice "nvidia.com/gpu" { sharing = whole }',
                  actions="enqueue, allocate, preempt, reclaim, backfill")
    ssn = open_session(plan, _everything_cluster())
    for name in names:
        answered = {point for plugin, point in ssn.answered if plugin == name}
        assert answered == cat.PLUGINS[name].points & POINTS, name
