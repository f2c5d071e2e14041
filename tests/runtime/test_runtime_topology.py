"""Volcano's HyperNodes read from objects and resolved against the nodes (runtime/cluster/topology.py).

The tables marked with a Go test name are translated from Volcano's own tests
(pkg/scheduler/api/hyper_node_info_test.go, pkg/util/hypernode/member_selector_test.go).
"""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.model import ClusterState, Node
from runtime.cluster.objects import ObjectError, load_text
from runtime.cluster.selectors import LabelSelector, MatchExpression
from runtime.kube.convert import hypernode_from
from runtime.cluster.topology import (
    CYCLE, IGNORED_MEMBER, SECOND_PARENT, TIER_ORDER, UNKNOWN_MEMBER, HyperNode, Member, go_regex, resolve,
)


def exact(name: str, kind: str = "Node") -> Member:
    return Member(kind, exact=name)


def regex(pattern: str) -> Member:
    return Member("Node", pattern=pattern, regex=go_regex(pattern))


def hn(name: str, tier: int, *members: Member | str) -> HyperNode:
    """Members given as strings are child HyperNodes (exactMatch)."""
    return HyperNode(name, tier, members=tuple(exact(m, "HyperNode") if isinstance(m, str) else m for m in members))


def leaves(topology) -> dict[str, set[str]]:
    return {name: set(found) for name, found in topology.leaves.items()}


# --- Volcano's tables -----------------------------------------------------------------------

# TestHyperNodesInfo_UpdateHyperNode_Normal: two tier-1 switches under a tier-2 one (no Node
# objects exist: exactMatch members count all the same, as in Volcano's realNodesSet).
def test_normal_tree_from_volcano():
    t = resolve([hn("s2", 2, "s1", "s0"), hn("s0", 1, exact("node-0"), exact("node-1")),
                 hn("s1", 1, exact("node-2"), exact("node-3"))], {})
    assert leaves(t) == {"s0": {"node-0", "node-1"}, "s1": {"node-2", "node-3"},
                         "s2": {"node-0", "node-1", "node-2", "node-3"}}
    assert dict(t.parent) == {"s0": "s2", "s1": "s2", "s2": None}
    assert dict(t.by_tier) == {1: ("s0", "s1"), 2: ("s2",)}
    assert t.tiers == (1, 2) and t.problems == ()


# TestHyperNodesInfo_UpdateHyperNode_WithCycle: s1 lists s3, s3 lists s2, s2 lists s1 (an error
# in Volcano, not ready); and its corrected spec (s1 lists only s0) resolves to a chain.
def test_cycle_from_volcano_then_corrected():
    s0 = hn("s0", 1, exact("node-0"), exact("node-1"))
    s2, s3 = hn("s2", 3, "s1"), hn("s3", 4, "s2")
    t = resolve([s2, s0, hn("s1", 2, "s0", "s3"), s3], {})
    cycles = [p for p in t.problems if p.kind == CYCLE]
    assert len(cycles) == 1 and set(cycles[0].hypernodes) == {"s1", "s2", "s3"} and cycles[0].blocking
    assert "s1 -> s2 -> s3 -> s1" in cycles[0].message   # each a member of the next
    assert set(t.leaves["s0"]) == {"node-0", "node-1"}          # outside the cycle: resolved
    fixed = resolve([s2, s0, hn("s1", 2, "s0"), s3], {})
    assert fixed.problems == ()
    assert dict(fixed.parent) == {"s0": "s1", "s1": "s2", "s2": "s3", "s3": None}
    assert all(set(found) == {"node-0", "node-1"} for found in fixed.leaves.values())


# TestHyperNodesInfo_UpdateHyperNode_MultipleParents: s0 listed by s1 and s2 (an error in
# Volcano), then s2 corrected to list s1.
def test_second_parent_from_volcano_then_corrected():
    s0, s1 = hn("s0", 1, exact("node-0"), exact("node-1")), hn("s1", 2, "s0")
    t = resolve([s0, s1, hn("s2", 3, "s0")], {})
    (problem,) = t.problems
    assert problem.kind == SECOND_PARENT and problem.hypernodes == ("s0", "s1", "s2") and problem.blocking
    assert t.parent["s0"] == "s1"                               # the lowest tier keeps it
    fixed = resolve([s0, s1, hn("s2", 3, "s1")], {})
    assert fixed.problems == ()
    assert leaves(fixed) == {"s0": {"node-0", "node-1"}, "s1": {"node-0", "node-1"}, "s2": {"node-0", "node-1"}}
    assert dict(fixed.parent) == {"s0": "s1", "s1": "s2", "s2": None}


# TestHyperNodesInfo_GetAncestors (and GetLeafNodes' tree): s0 and s1 hold the same nodes, a
# node may sit in two HyperNodes of one tier.
@pytest.mark.parametrize("name, expected", [
    ("s0", ("s0", "s2", "s3", "s4")), ("s2", ("s2", "s3", "s4")), ("s4", ("s4",)),
])
def test_ancestors_from_volcano(name, expected):
    t = resolve([hn("s0", 1, exact("node-0"), exact("node-1")), hn("s4", 4, "s3"),
                 hn("s1", 1, exact("node-0"), exact("node-1")), hn("s2", 2, "s0", "s1"), hn("s3", 3, "s2")], {})
    assert t.ancestors(name) == expected
    assert t.chains["node-0"] == ("s0", "s1", "s2", "s3", "s4")


# pkg/util/hypernode TestGetMembers (and api TestGetMembers): one selector against three nodes.
MEMBER_NODES = {"worker-1": {"role": "worker"}, "worker-2": {"role": "worker"},
                "control-plane-1": {"role": "control-plane"}}


@pytest.mark.parametrize("member, want", [
    (exact("worker-1"), {"worker-1"}),
    (regex("^worker-"), {"worker-1", "worker-2"}),
    (Member("Node", labels=LabelSelector((("role", "worker"),))), {"worker-1", "worker-2"}),
    (Member("Node", labels=LabelSelector()), set()),                  # empty labelMatch: nothing
    (Member("Node", labels=LabelSelector((), (MatchExpression("role", "NotIn", ("worker",)),))),
     {"control-plane-1"}),
], ids=["exact", "regex", "label", "empty label", "label expression"])
def test_member_selectors_from_volcano(member, want):
    assert set(resolve([HyperNode("s", 1, members=(member,))], MEMBER_NODES).leaves["s"]) == want


def test_invalid_regex_from_volcano_is_refused_when_read():
    # Volcano's GetMembers selects nothing for `[`; its admission webhook refuses it: so do we, located.
    with pytest.raises(ObjectError) as err:
        load_text(hypernode_yaml("s", 1, "- {type: Node, selector: {regexMatch: {pattern: '['}}}"))
    (problem,) = err.value.problems
    assert problem.kind == "HyperNode" and problem.name == "s"
    assert "spec.members[0].selector.regexMatch.pattern" in problem.message


# --- regex, labels, nesting -----------------------------------------------------------------

def test_regex_is_unanchored_like_go():
    t = resolve([HyperNode("s", 1, members=(regex("node-1"),))], {"node-1": {}, "xnode-10": {}, "node-2": {}})
    assert set(t.leaves["s"]) == {"node-1", "xnode-10"}


@pytest.mark.parametrize("pattern, names", [
    (r"^node-\d+\z", {"node-1", "node-22"}),          # Go's \z, Python's \Z
    (r"^(?<rack>r\d)-", {"r1-a"}),                     # Go's named group
    (r"(?i)^NODE-1$", {"node-1"}),
])
def test_go_syntax_translated(pattern, names):
    assert {n for n in ("node-1", "node-22", "r1-a", "node-1x") if go_regex(pattern).search(n)} == names


@pytest.mark.parametrize("pattern, says", [
    (r"(a)\1", "back-reference"), (r"node(?=-1)", "lookaround"), (r"\pL+", "Go syntax"),
    (r"[[:alpha:]]", "POSIX"), (r"(?U)a+", "`U` flag"), (r"node-(", "invalid pattern"),
])
def test_patterns_python_or_go_cannot_read_are_refused(pattern, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        go_regex(pattern)


def test_label_selectors_follow_node_labels():
    members = (Member("Node", labels=LabelSelector((("rack", "r1"),))),)
    state = ClusterState()
    state.add_hypernode(HyperNode("r1", 1, "rack", members))
    for name, rack in (("a", "r1"), ("b", "r2")):
        state.add_node(Node(name, {"cpu": 1000}, labels={"rack": rack}))
    assert set(state.topology().leaves["r1"]) == {"a"}
    first = state.topology()
    assert state.topology() is first                                  # cached while nothing changes
    state.add_node(Node("b", {"cpu": 1000}, labels={"rack": "r1"}))   # relabelled
    assert set(state.topology().leaves["r1"]) == {"a", "b"}


def test_three_tiers_nested():
    t = resolve([
        hn("leaf-a", 1, regex("^a-")), hn("leaf-b", 1, regex("^b-")), hn("leaf-c", 1, regex("^c-")),
        hn("spine-1", 2, "leaf-a", "leaf-b"), hn("spine-2", 2, "leaf-c"), hn("core", 3, "spine-1", "spine-2"),
    ], {f"{r}-{i}": {} for r in "abc" for i in range(2)})
    assert set(t.leaves["spine-1"]) == {"a-0", "a-1", "b-0", "b-1"}
    assert set(t.leaves["core"]) == {f"{r}-{i}" for r in "abc" for i in range(2)}
    assert t.chains["c-1"] == ("leaf-c", "spine-2", "core")
    assert dict(t.children)["core"] == ("spine-1", "spine-2")
    assert t.tiers == (1, 2, 3)


def test_problems_name_the_hypernodes_at_fault_and_the_rest_resolves():
    t = resolve([
        hn("ok", 1, exact("n1")), hn("top", 2, "ok"),
        hn("x", 2, "y"), hn("y", 3, "x"),                           # a cycle
        hn("self", 1, "self"),                                       # a cycle of one
        hn("low", 1, exact("n2")), hn("p1", 2, "low"), hn("p2", 2, "low"),   # a second parent
        hn("flat", 2, "peer"), hn("peer", 2, exact("n3")),           # tier order
        hn("lost", 2, "nobody"),                                     # unknown child
        hn("sel", 2, Member("HyperNode", pattern="ok", regex=go_regex("ok"))),   # ignored, as in Volcano
    ], {"n1": {}, "n2": {}, "n3": {}})
    by_kind = {p.kind: p for p in t.problems}
    assert sorted(p.hypernodes for p in t.problems if p.kind == CYCLE) == [("self",), ("x", "y")]
    assert by_kind[SECOND_PARENT].hypernodes == ("low", "p1", "p2")
    assert by_kind[TIER_ORDER].hypernodes == ("flat", "peer") and not by_kind[TIER_ORDER].blocking
    assert by_kind[UNKNOWN_MEMBER].hypernodes == ("lost",) and "nobody" in by_kind[UNKNOWN_MEMBER].message
    assert by_kind[IGNORED_MEMBER].hypernodes == ("sel",) and not by_kind[IGNORED_MEMBER].blocking
    assert {p.kind for p in t.blocking} == {CYCLE, SECOND_PARENT}
    assert set(t.leaves["top"]) == {"n1"} and set(t.leaves["p1"]) == {"n2"} and set(t.leaves["p2"]) == set()
    assert t.parent["peer"] is None and set(t.leaves["flat"]) == set()


def test_hostile_depth_does_not_recurse():
    depth = 5000
    chain = [hn("h0", 1, exact("n"))] + [hn(f"h{i}", i + 1, f"h{i - 1}") for i in range(1, depth)]
    t = resolve(chain, {"n": {}})
    assert len(t.chains["n"]) == depth and t.problems == ()
    ring = [hn(f"r{i}", 1, f"r{(i + 1) % depth}") for i in range(depth)]
    (problem,) = resolve(ring, {}).problems
    assert problem.kind == CYCLE and len(problem.hypernodes) == depth


# --- reading ----------------------------------------------------------------------------------

def hypernode_yaml(name: str, tier, members: str, api: str = "topology.volcano.sh/v1alpha1") -> str:
    tier_line = "" if tier is None else f"  tier: {tier}\n"
    listed = f" {members}\n" if members.startswith("[") else "\n" + textwrap.indent(members, "  ") + "\n"
    return f"apiVersion: {api}\nkind: HyperNode\nmetadata: {{name: {name}}}\nspec:\n{tier_line}  members:{listed}"


def test_reads_hypernodes_from_files():
    state = load_text(textwrap.dedent("""
    apiVersion: v1
    kind: List
    items:
    - apiVersion: topology.volcano.sh/v1alpha1
      kind: HyperNode
      metadata: {name: s0}
      spec:
        tier: 1
        tierName: leaf
        members:
        - {type: Node, selector: {exactMatch: {name: n1}}}
        - {type: Node, selector: {labelMatch: {matchLabels: {rack: r1}, matchExpressions: [{key: gpu, operator: Exists}]}}}
    - apiVersion: topology.volcano.sh/v1alpha1
      kind: HyperNode
      metadata: {name: s1}
      spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: s0}}}]}
    - {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {rack: r1, gpu: "8"}}, status: {allocatable: {cpu: 1}}}
    - {apiVersion: v1, kind: Node, metadata: {name: n3, labels: {rack: r1}}, status: {allocatable: {cpu: 1}}}
    """))
    assert state.hypernodes["s0"].tier_name == "leaf"
    t = state.topology()
    assert set(t.leaves["s1"]) == {"n1", "n2"} and t.parent["s0"] == "s1"
    assert state.merged_with(ClusterState()).hypernodes == state.hypernodes


@pytest.mark.parametrize("tier, members, says", [
    (None, "- {type: Node, selector: {exactMatch: {name: n}}}", "missing `spec.tier`"),
    (-1, "- {type: Node, selector: {exactMatch: {name: n}}}", "`spec.tier` must not be negative"),
    ("one", "- {type: Node, selector: {exactMatch: {name: n}}}", "`spec.tier` must be an integer"),
    (1, "[]", "`spec.members` must list at least one member"),
    (1, "- {type: Node, selector: {}}", "`spec.members[0].selector` must have exactly one of"),
    (1, "- {type: Node, selector: {exactMatch: {name: n}, regexMatch: {pattern: n}}}",
     "found exactMatch, regexMatch"),
    (1, "- {type: Rack, selector: {exactMatch: {name: n}}}", "`spec.members[0].type` must be Node or HyperNode"),
    (1, "- {type: Node, selector: {exactMatch: {name: n}}}\n- {type: Node, selector: {regexMatch: {pattern: '(?=x)'}}}",
     "`spec.members[1].selector.regexMatch.pattern`: lookaround"),
    (1, "- {type: Node, selector: {exactMatch: {}}}", "`spec.members[0].selector.exactMatch.name`"),
    (1, "- {type: Node, selector: {labelMatch: {matchExpressions: [{key: a, operator: Near}]}}}",
     "spec.members[0].selector.labelMatch.matchExpressions[0].operator"),
], ids=["no tier", "negative tier", "tier not integer", "no members", "no selector", "two selectors",
        "unknown type", "bad regex", "empty exact", "bad label operator"])
def test_reading_errors_are_located(tier, members, says):
    with pytest.raises(ObjectError) as err:
        load_text(hypernode_yaml("s9", tier, members), "topo.yaml")
    (problem,) = err.value.problems
    assert (problem.source, problem.kind, problem.name) == ("topo.yaml", "HyperNode", "s9")
    assert says in problem.message


def test_tier_zero_is_read_as_volcano_crd_allows():
    # The CRD's minimum is 0 (tier 1 is the closest in Volcano's docs, but 0 is admitted).
    state = load_text(hypernode_yaml("s", 0, "- {type: Node, selector: {exactMatch: {name: n}}}"))
    assert state.hypernodes["s"].tier == 0


def test_wrong_api_group_is_refused():
    with pytest.raises(ObjectError, match="apiVersion must be topology.volcano.sh/v1alpha1"):
        load_text(hypernode_yaml("s", 1, "- {type: Node, selector: {exactMatch: {name: n}}}",
                                 api="scheduling.volcano.sh/v1beta1"))


def test_connector_converts_hypernodes():
    got = hypernode_from({"metadata": {"name": "s"},
                          "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n"}}}]}})
    assert got == HyperNode("s", 1, members=(exact("n"),))


def test_podgroup_with_network_topology_is_read_and_evaluated():
    state = load_text(textwrap.dedent("""
    apiVersion: scheduling.volcano.sh/v1beta1
    kind: PodGroup
    metadata: {name: g, namespace: ns}
    spec: {minMember: 1, networkTopology: {mode: hard, highestTierAllowed: 1}}
    """))
    group = state.podgroups["ns/g"]
    assert group.problem is None          # placed by allocate now (test_runtime_network_topology.py)
    assert (group.network_topology.mode, group.network_topology.highest_tier) == ("hard", 1)


# --- invariants ---------------------------------------------------------------------------------

@st.composite
def trees(draw):
    """A forest of HyperNodes over nodes: each HyperNode on a tier above its children's."""
    nodes = [f"n{i}" for i in range(draw(st.integers(0, 12)))]
    hypernodes: list[HyperNode] = []
    tiers: dict[str, int] = {}
    used: set[str] = set()
    for i in range(draw(st.integers(1, 10))):
        name = f"h{i}"
        unparented = [h.name for h in hypernodes if all(
            not (m.type == "HyperNode" and m.exact == h.name) for other in hypernodes for m in other.members)]
        kids = draw(st.lists(st.sampled_from(unparented), unique=True, max_size=3)) if unparented else []
        free = [n for n in nodes if n not in used]
        own = draw(st.lists(st.sampled_from(free), unique=True, max_size=3)) if free else []
        if not kids and not own:
            own = [f"stray-{name}"]
        used.update(own)
        tier = max((tiers[k] for k in kids), default=0) + draw(st.integers(1, 2))
        tiers[name] = tier
        hypernodes.append(hn(name, tier, *kids, *(exact(n) for n in own)))
    return hypernodes, {n: {} for n in nodes}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_chains_increase_and_leaves_are_unions(tree):
    hypernodes, nodes = tree
    t = resolve(hypernodes, nodes)
    assert t.problems == ()
    by_name = {h.name: h for h in hypernodes}
    for node, chain in t.chains.items():
        tiers = [by_name[h].tier for h in chain]
        assert tiers == sorted(set(tiers)), (node, chain)
        assert all(node in t.leaves[h] for h in chain)
    for h in hypernodes:
        own = {m.exact for m in h.members if m.type == "Node"}
        assert set(t.leaves[h.name]) == own.union(*(t.leaves[c] for c in t.children[h.name]))
