"""The network-topology-aware plugin (runtime/engine/plugins/network_topology.py): its arguments,
its HyperNode score and its node score for pods without topology, on both kernels.

Each table is translated from Volcano's
pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go (the Go test named on
each); the expected scores are Volcano's, to its eps of 1e-1 (its scores print with one decimal).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano_text
from compiler.volcano.importer import import_volcano, import_volcano_text
from runtime.cluster.model import ClusterState, NetworkTopology, PodGroup
from runtime.cluster.topology import HyperNode, Member
from runtime.engine.cycle import open_session
from runtime.engine.session import Options
from runtime_helpers import STANDARD_TIERS, cycle, node, placements, pod, policy

EPS = 1e-1          # Volcano's eps in these tests
G = 10**9           # Volcano's "4G"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def with_plugin(settings: str = "") -> str:
    return STANDARD_TIERS.rstrip().rstrip("}") + f"  plugin network-topology-aware {settings}\n}}\n"


def hypernode(name: str, tier: int, *members: str, kind: str = "Node") -> HyperNode:
    return HyperNode(name, tier, "", tuple(Member(kind, exact=m) for m in members))


def three_tiers(state: ClusterState, foo: bool = False) -> None:
    """TestHyperNodeOrderFn's tree: s0 (tier 3) over s1, s2 (tier 2) over s3..s6 (tier 1), two nodes each."""
    sizes = {"s3": (2000, 4 * G), "s4": (4000, 4 * G), "s5": (2000, 8 * G), "s6": (4000, 8 * G)}
    foos = {"s3": 8, "s4": 8, "s5": 16, "s6": 16}
    for leaf, (cpu, memory) in sizes.items():
        for i in (1, 2):
            extra = {"example.com/foo": foos[leaf] if i == 1 else 0} if foo else {}
            node(state, f"{leaf}-n{i}", cpu=cpu, memory=memory, **extra)
        state.add_hypernode(hypernode(leaf, 1, f"{leaf}-n1", f"{leaf}-n2"))
    state.add_hypernode(hypernode("s1", 2, "s3", "s4", kind="HyperNode"))
    state.add_hypernode(hypernode("s2", 2, "s5", "s6", kind="HyperNode"))
    state.add_hypernode(hypernode("s0", 3, "s1", "s2", kind="HyperNode"))


def hypernode_scores(plan, state: ClusterState, pure: bool, job: str = "pg1") -> dict[str, float]:
    ssn = open_session(plan, state, Options(pure_python=pure))
    tree = ssn.snap.hypernodes
    j = next(i for i, jb in enumerate(ssn.snap.jobs) if jb.podgroup is not None and jb.podgroup.name == job)
    candidates = {name: ssn.hypernode_rule.rows(name, tree.leaves[name]) for name in tree.hypernodes}
    candidates["<cluster>"] = ssn.hypernode_rule.rows("<cluster>", frozenset(ssn.snap.node_names))
    assert ssn.hypernode_order is not None
    return ssn.hypernode_order(j, candidates)


# --- TestHyperNodeOrderFn -----------------------------------------------------------------------

HYPERNODE_ORDER = [
    # "score hypernodes for a subjob with default plugin arguments"
    ("", False, {}, {"s0": 25.0, "s1": 58.3, "s2": 45.8, "s3": 0.0, "s4": 100.0, "s5": 0.0, "s6": 75.0,
                     "<cluster>": 25.0}),
    # "score hypernodes for a subjob with customized plugin arguments"
    ('weight 10 { cpu = 3\n memory = 4\n resources = { "nvidia.com/gpu": 2, "example.com/foo": 3 }\n'
     " normal_pod_binpack = true\n normal_pod_fading = 0 }", True, {"example.com/foo": 8},
     {"s0": 266.7, "s1": 700.0, "s2": 450.0, "s3": 0.0, "s4": 0.0, "s5": 0.0, "s6": 800.0, "<cluster>": 266.7}),
]


@pytest.mark.parametrize("settings, foo, extra, expected", HYPERNODE_ORDER, ids=["default", "customized"])
def test_hypernode_order_fn(pure, settings, foo, extra, expected):
    state = ClusterState()
    three_tiers(state, foo=foo)
    state.add_podgroup(PodGroup("ns1", "pg1", min_member=2, phase="Inqueue", uid="pg1",
                                network_topology=NetworkTopology("hard", 2, None)))
    for name in ("p1", "p2"):
        pod(state, name, cpu=4000, memory=4 * G, group="pg1", ns="ns1", requests=extra)
    scores = hypernode_scores(policy(with_plugin(settings)), state, pure)
    assert set(scores) == set(expected)
    for name, want in expected.items():
        assert abs(scores[name] - want) <= EPS, (name, scores[name], want)


def test_equal_hypernode_scores_are_told_apart_by_the_tasks_already_there(pure):
    """HyperNodeOrderFn's scoreWithTaskNum: at the top score, each HyperNode adds the share of the
    job's tasks on its nodes (one of two: +0.5, × 100)."""
    state = ClusterState()
    for leaf in ("a", "b"):
        for i in (1, 2):
            node(state, f"{leaf}-n{i}", cpu=4000, memory=8 * G)
        state.add_hypernode(hypernode(leaf, 1, f"{leaf}-n1", f"{leaf}-n2"))
    state.add_podgroup(PodGroup("ns1", "pg1", min_member=2, phase="Inqueue", uid="pg1",
                                network_topology=NetworkTopology("hard", 1, None)))
    pod(state, "p1", cpu=1000, memory=G, group="pg1", ns="ns1", node_name="a-n1")
    pod(state, "p2", cpu=1000, memory=G, group="pg1", ns="ns1", node_name="b-n1")
    pod(state, "p3", cpu=1000, memory=G, group="pg1", ns="ns1")
    pod(state, "p4", cpu=1000, memory=G, group="pg1", ns="ns1")
    scores = hypernode_scores(policy(with_plugin()), state, pure)
    # Each: (used 1 + request 4 cpu) / 8 = .625, (1 + 4 G) / 16 G = .3125: .46875; plus 1/4 of the tasks.
    assert scores["a"] == pytest.approx(100 * (0.46875 + 0.25))
    assert scores["b"] == pytest.approx(scores["a"])


# --- allocate picks the best HyperNode by the plugin's score --------------------------------------

def test_allocate_places_the_gang_in_the_hypernode_the_plugin_scores_best(pure):
    """Both tier-1 HyperNodes hold the gang (2 pods of 4 cpu, 4G). With cpu weighing 10 and memory 1,
    the plugin scores `packed` (cpu full) above `roomy`: (10 × 1 + 1 × 8/32) / 11 against
    (10 × 8/16 + 1 × 8/8.5) / 11. The stand-in rule without the plugin (least room left, each
    resource alike) takes `roomy`."""
    def cluster() -> ClusterState:
        state = ClusterState()
        for i in (1, 2):
            node(state, f"packed-n{i}", cpu=4000, memory=16 * G)
            node(state, f"roomy-n{i}", cpu=8000, memory=4_250_000_000)
        state.add_hypernode(hypernode("packed", 1, "packed-n1", "packed-n2"))
        state.add_hypernode(hypernode("roomy", 1, "roomy-n1", "roomy-n2"))
        state.add_podgroup(PodGroup("ns1", "pg1", min_member=2, phase="Inqueue", uid="pg1",
                                    network_topology=NetworkTopology("hard", 1, None)))
        for name in ("p1", "p2"):
            pod(state, name, cpu=4000, memory=4 * G, group="pg1", ns="ns1")
        return state

    bound = placements(cycle(policy(with_plugin("{ cpu = 10 }")), cluster(), pure))
    assert set(bound.values()) == {"packed-n1", "packed-n2"}
    bound = placements(cycle(policy(STANDARD_TIERS), cluster(), pure))
    assert set(bound.values()) == {"roomy-n1", "roomy-n2"}


# --- Test_batchNodeOrderFnForNormalPods -------------------------------------------------------------

def normal_pods_cluster(nodes: int, per_tier: list[int]) -> ClusterState:
    """Test_batchNodeOrderFnForNormalPods' cluster, smaller: node i in HyperNode i mod per_tier[t-1]
    of each tier t; every node 100 cpu, 8000 memory, 10 example.com/foo, half used."""
    state = ClusterState()
    for i in range(nodes):
        node(state, f"node-{i}", cpu=100_000, memory=8000, **{"example.com/foo": 10})
        pod(state, f"used-{i}", cpu=50_000, memory=4000, node_name=f"node-{i}", requests={"example.com/foo": 5})
    for tier, count in enumerate(per_tier, start=1):
        for h in range(count):
            members = [f"node-{i}" for i in range(nodes) if i % count == h]
            state.add_hypernode(hypernode(f"hypernode-tier-{tier}-index-{h}", tier, *members))
    return state


NORMAL_POD_ARGS = ('weight 10 { cpu = 5\n memory = 5\n resources = { "example.com/foo": 5 }\n'
                   " normal_pod_binpack = true\n normal_pod_fading = 1 }")


def normal_pod_scores(plan, state: ClusterState, pure: bool, task: str) -> dict[str, float]:
    ssn = open_session(plan, state, Options(pure_python=pure))
    rule = next(r for r in ssn.stateful_scorers if r.name == "network-topology-aware")
    t = ssn.snap.task_keys.index(task) if isinstance(ssn.snap.task_keys, list) else \
        list(ssn.snap.task_keys).index(task)
    cid = int(ssn.snap.task_class[t])
    assert rule.scores(cid)
    return dict(zip(ssn.snap.node_names, rule.score(cid, None).tolist()))


def test_batch_node_order_fn_for_normal_pods(pure):
    """Test_batchNodeOrderFnForNormalPods: every node scores 0.515375 there (2,000 nodes under
    200/40/5/1 HyperNodes; the Go test checks the plugin's raw 0..1 score). Here 200 nodes under
    20/4/2/1: per tier (used + request) / allocatable is .5 + .5 / nodes-per-HyperNode, fading 1
    averages the tiers, × 100 × weight 10."""
    state = normal_pods_cluster(200, [20, 4, 2, 1])
    pod(state, "task-without-network-topology", cpu=50_000, memory=4000, requests={"example.com/foo": 5})
    scores = normal_pod_scores(policy(with_plugin(NORMAL_POD_ARGS)), state, pure, "ns/task-without-network-topology")
    want = sum(0.5 + 0.5 / (200 // c) for c in (20, 4, 2, 1)) / 4
    assert len(scores) == 200
    for name, score in scores.items():
        assert score == pytest.approx(1000 * want), name


def test_batch_node_order_fn_for_normal_pods_at_volcano_scale():
    """The Go table itself: 2,000 nodes under 200/40/5/1 HyperNodes, 0.515375 on every node."""
    state = normal_pods_cluster(2000, [200, 40, 5, 1])
    pod(state, "task-without-network-topology", cpu=50_000, memory=4000, requests={"example.com/foo": 5})
    scores = normal_pod_scores(policy(with_plugin(NORMAL_POD_ARGS)), state, False, "ns/task-without-network-topology")
    assert all(abs(s / 1000 - 0.515375) < 1e-9 for s in scores.values())


def test_fading_weighs_tiers_and_nodes_outside_a_tier_score_full():
    """fading 0.5 over two tiers: tier 1 weighs 1, tier 2 0.5; a node no tier-1 HyperNode holds
    scores FullScore (1) there, as Volcano prefers nodes outside HyperNodes."""
    state = ClusterState()
    for name in ("a", "b", "c"):
        node(state, name, cpu=4000, memory=8 * G)
    pod(state, "on-a", cpu=2000, memory=G, node_name="a")
    state.add_hypernode(hypernode("leaf", 1, "a", "b"))
    state.add_hypernode(hypernode("spine", 2, "a", "b", "c"))
    pod(state, "p", cpu=1000, memory=0)
    scores = normal_pod_scores(policy(with_plugin("{ normal_pod_fading = 0.5 }")), state, False, "ns/p")
    leaf = (2000 + 1000) / 8000
    spine = (2000 + 1000) / 12000
    assert scores["a"] == pytest.approx(100 * (leaf + 0.5 * spine) / 1.5)
    assert scores["b"] == pytest.approx(scores["a"])
    assert scores["c"] == pytest.approx(100 * (1.0 + 0.5 * spine) / 1.5)


def test_normal_pods_fill_the_used_switch_and_leave_the_free_one_to_gangs(pure):
    """With the plugin's weight well above the other scorers', a plain pod goes to the switch
    already in use; `normal_pod_binpack = false` turns the score off."""
    state = ClusterState()
    for leaf in ("s0", "s1"):
        for i in (1, 2):
            node(state, f"{leaf}-n{i}", cpu=4000, memory=8 * G)
        state.add_hypernode(hypernode(leaf, 1, f"{leaf}-n1", f"{leaf}-n2"))
    pod(state, "running", cpu=3000, memory=G, node_name="s0-n1")
    pod(state, "plain", cpu=1000, memory=G)
    bound = placements(cycle(policy(with_plugin("weight 100")), state, pure))
    assert bound["ns/plain"] == "s0-n2"
    ssn = open_session(policy(with_plugin("{ normal_pod_binpack = false }")), state, Options(pure_python=pure))
    assert not [r for r in ssn.stateful_scorers if r.name == "network-topology-aware"]


def test_without_the_plugin_the_stand_in_rule_picks_and_no_score_is_offered(pure):
    state = ClusterState()
    three_tiers(state)
    state.add_podgroup(PodGroup("ns1", "pg1", min_member=2, phase="Inqueue", uid="pg1",
                                network_topology=NetworkTopology("hard", 1, None)))
    for name in ("p1", "p2"):
        pod(state, name, cpu=4000, memory=4 * G, group="pg1", ns="ns1")
    plan = policy(STANDARD_TIERS)
    assert open_session(plan, state, Options(pure_python=pure)).hypernode_order is None
    bound = placements(cycle(plan, state, pure))
    assert len({n.rpartition("-")[0] for n in bound.values()}) == 1


def test_enable_hypernode_order_false_leaves_the_stand_in_rule(pure):
    """Volcano's `enabledHyperNodeOrder: false` (here `enable_hypernode_order = false`): no HyperNode score."""
    state = ClusterState()
    three_tiers(state)
    state.add_podgroup(PodGroup("ns1", "pg1", min_member=2, phase="Inqueue", uid="pg1",
                                network_topology=NetworkTopology("hard", 1, None)))
    plan = policy(with_plugin("{ enable_hypernode_order = false }"))
    assert open_session(plan, state, Options(pure_python=pure)).hypernode_order is None


def test_the_user_guide_config_imports_with_volcano_names_mapped():
    """Volcano's network topology guide's scheduler config (tests/fixtures/volcano/network-topology-aware.yaml)."""
    fixture = Path(__file__).parent.parent / "fixtures" / "volcano" / "network-topology-aware.yaml"
    result = import_volcano(str(fixture))
    assert result.exit_code == 0 and not [d for d in result.diagnostics if d.code == "PD604"]
    plan = compile_text(result.text, "imported.policy").plan
    spec = next(p for t in plan.tiers for p in t.plugins if p.name == "network-topology-aware")
    assert spec.weight == 10
    assert dict(spec.arguments) == {"cpu": 5, "memory": 1, "resources": {"nvidia.com/gpu": 2, "example.com/foo": 3},
                                    "normal_pod_binpack": True, "normal_pod_fading": 0.8}
    text = result.text.replace("plugin network-topology-aware weight 10 {",
                               "plugin network-topology-aware weight 10 {\n    enable_hypernode_order = false")
    exported = export_volcano_text(text, "t.policy").text
    assert "enabledHyperNodeOrder: false" in exported and "hypernode.binpack.normal-pod.fading: 0.8" in exported


@pytest.mark.parametrize("setting", ["normal_pod_fading = -0.5", "cpu = -1", 'resources = { "nvidia.com/gpu": -2 }'])
def test_an_argument_out_of_range_is_a_located_error(setting):
    text = ('policy "t" version 1\nactions [enqueue, allocate]\ntier {\n  plugin gang\n'
            f"  plugin network-topology-aware {{\n    {setting}\n  }}\n}}\n")
    compiled = compile_text(text, "t.policy")
    assert not compiled.ok
    [error] = compiled.errors
    assert error.span.line == 6 and "minimum 0" in error.message, (error.code, error.message)


def test_plain_pods_of_one_cycle_follow_each_other_into_one_switch(pure):
    """The HyperNode sums are kept as pods are placed within the cycle: after the first plain pod
    lands, its switch is the fuller one, and the next ones follow it; the other switch stays free."""
    state = ClusterState()
    for leaf in ("s0", "s1"):
        for i in (1, 2):
            node(state, f"{leaf}-n{i}", cpu=4000, memory=8 * G)
        state.add_hypernode(hypernode(leaf, 1, f"{leaf}-n1", f"{leaf}-n2"))
    for i in range(6):
        pod(state, f"plain-{i}", cpu=1000, memory=G)
    plan = policy(with_plugin("weight 100"))
    bound = placements(cycle(plan, state, pure))
    assert len(bound) == 6 and len({n.partition("-")[0] for n in bound.values()}) == 1
    ssn = open_session(plan, state, Options(pure_python=pure))
    rule = next(r for r in ssn.stateful_scorers if r.name == "network-topology-aware")
    alloc, used = rule.sums()
    assert used.sum() == 0 and alloc[:, ssn.snap.resource_index["cpu"]].tolist() == [8000, 8000]


# --- TestNew: the arguments as Volcano reads them ---------------------------------------------------

def imported_plugin(arguments: str):
    text = ('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: network-topology-aware\n'
            "    arguments:\n" + "".join(f"      {line}\n" for line in arguments.strip().splitlines()))
    return import_volcano_text(text, "volcano-scheduler.conf")


def test_new_with_no_arguments_has_volcanos_defaults():
    """TestNew, "build plugin with no arguments": weights 1, normal-pod binpack on, fading 0.8."""
    plan = policy(with_plugin())
    spec = next(p for t in plan.tiers for p in t.plugins if p.name == "network-topology-aware")
    assert spec.weight in (None, 1)
    assert dict(spec.arguments) == {"cpu": 1, "memory": 1, "resources": {}, "normal_pod_binpack": True,
                                    "normal_pod_fading": 0.8}


def test_new_with_customized_valid_arguments():
    """TestNew, "build plugin with customized valid arguments": a listed resource without its own
    weight weighs 1; a weight for a resource not listed is ignored (said here, PD6xx warning)."""
    result = imported_plugin("""
weight: 2
hypernode.binpack.cpu: 3
hypernode.binpack.memory: 4
hypernode.binpack.resources: nvidia.com/gpu, example.com/foo
hypernode.binpack.resources.nvidia.com/gpugpuxxx: 5
hypernode.binpack.resources.example.com/foo: 6
hypernode.binpack.normal-pod.enable: false
hypernode.binpack.normal-pod.fading: 0
""")
    assert result.exit_code == 0, [d.message for d in result.errors]
    assert any("gpugpuxxx" in d.message for d in result.diagnostics)
    spec = next(p for t in compile_text(result.text, "i.policy").plan.tiers for p in t.plugins
                if p.name == "network-topology-aware")
    assert spec.weight == 2
    assert dict(spec.arguments) == {"cpu": 3, "memory": 4, "resources": {"nvidia.com/gpu": 1, "example.com/foo": 6},
                                    "normal_pod_binpack": False, "normal_pod_fading": 0}


def test_new_with_customized_invalid_arguments_is_refused_where_volcano_falls_back():
    """TestNew, "build plugin with customized invalid arguments": Volcano silently uses its defaults
    for negative weights and fading and a non-boolean enable; the import refuses each, located."""
    result = imported_plugin("""
weight: -1
hypernode.binpack.cpu: -1
hypernode.binpack.memory: -1
hypernode.binpack.resources: nvidia.com/gpuxxx, example.com/foo
hypernode.binpack.resources.example.com/foo: -1
hypernode.binpack.normal-pod.enable: "a"
hypernode.binpack.normal-pod.fading: -1
""")
    assert result.exit_code != 0
    lines = sorted({d.span.line for d in result.errors if d.code == "PD607"})      # bad value, at the value
    assert lines == [7, 8, 9, 11, 12, 13], [(d.code, d.span.line, d.message) for d in result.errors]
