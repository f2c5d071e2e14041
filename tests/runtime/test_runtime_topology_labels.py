"""HyperNodes derived from node labels (runtime/cluster/topology_labels.py), as Volcano's label
discovery makes them (pkg/controllers/hypernode/discovery/label/label.go), and what uses them: the
cluster state's topology, the connector's cache, placement of hard-topology gangs (both kernels).

The tables marked with a Go test name are translated from Volcano's label_test.go. Placements are
checked against the nodes' label values directly, not through the derived HyperNodes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runtime.cluster import topology_labels as tl
from runtime.cluster.model import ClusterState, NetworkTopology, PodGroup
from runtime.cluster.topology import SECOND_PARENT, HyperNode, Member, resolve, span_of
from runtime.cluster.topology_labels import (HOSTNAME_LABEL, LabelTopology, LabelTopologyError, TopologyType,
                                             clean_type_name, derive_hypernodes, load_discovery_config,
                                             parse_label_list, read_topology_labels)
from runtime.kube.cache import NODES, ClusterCache
from runtime_helpers import STANDARD_TIERS, cycle, node, placements, pod, policy

PLAN = policy(STANDARD_TIERS)
TOR1, TOR2 = "volcano.sh_torA2-1", "volcano.sh/torA2-2"      # Volcano's getCfg() labels of topologyA2
SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"


def volcano_cfg() -> LabelTopology:
    """Volcano's getCfg(): three types, each two tiers over the hostname."""
    return LabelTopology(types=tuple(
        TopologyType(name, (f"volcano.sh/tor{suffix}-2", f"volcano.sh{'_' if suffix == 'A2' else '/'}tor{suffix}-1",
                            HOSTNAME_LABEL))
        for name, suffix in (("topologyA2", "A2"), ("topologyA3", "A3"), ("topologyA5", "A5"))))


def shape(hypernodes: dict[str, HyperNode]) -> set[tuple]:
    """The HyperNodes by what they are (tier, label, members by their label value or node name),
    whatever the generated names."""
    value_of = {hn.name: dict(hn.labels) for hn in hypernodes.values()}

    def member(m: Member) -> str:
        if m.type == "Node":
            return m.exact
        labels = value_of[m.exact]
        return next(f"{k}={v}" for k, v in labels.items() if k != tl.SOURCE_LABEL)

    out = set()
    for hn in hypernodes.values():
        labels = dict(hn.labels)
        assert labels.pop(tl.SOURCE_LABEL) == "label"
        [(key, value)] = labels.items()
        assert hn.tier_name == key          # Volcano >= 1.14: the tier's name is its label key
        out.add((hn.tier, f"{key}={value}", frozenset(member(m) for m in hn.members)))
    return out


# --- TestNewLabelDiscoverer_start (label_test.go) ----------------------------------------------

def test_volcano_label_discoverer_test1_two_tiers_of_topologyA2() -> None:
    """test1: eight nodes, four tier-1 tors (s0..s3) under two tier-2 tors (s4, s5): six HyperNodes."""
    nodes = {f"node{i}": {TOR1: f"s{i // 2}", TOR2: f"s{4 + i // 4}"} for i in range(8)}
    derived = derive_hypernodes(volcano_cfg(), nodes)
    assert len(derived) == 6
    assert shape(derived) == {
        (1, f"{TOR1}=s0", frozenset({"node0", "node1"})), (1, f"{TOR1}=s1", frozenset({"node2", "node3"})),
        (1, f"{TOR1}=s2", frozenset({"node4", "node5"})), (1, f"{TOR1}=s3", frozenset({"node6", "node7"})),
        (2, f"{TOR2}=s4", frozenset({f"{TOR1}=s0", f"{TOR1}=s1"})),
        (2, f"{TOR2}=s5", frozenset({f"{TOR1}=s2", f"{TOR1}=s3"})),
    }
    for name, hn in derived.items():
        assert re.fullmatch(f"hypernode-topologya2-tier{hn.tier}-{SUFFIX}", name)
    tree = resolve(derived, nodes)
    assert not tree.problems and tree.tiers == (1, 2)


def test_volcano_label_discoverer_test2_some_nodes_lack_the_tier2_label() -> None:
    """test2: "Some nodes only have tier1 labels and do not have tier2 labels": three HyperNodes (Volcano
    asserts the count). The walk upwards stops at the missing label: s0 gets its parent s2 from node1,
    s1 (whose nodes have no tier-2 label) none."""
    nodes = {"node0": {TOR1: "s0"}, "node1": {TOR1: "s0", TOR2: "s2"}, "node2": {TOR1: "s1"}, "node3": {TOR1: "s1"}}
    derived = derive_hypernodes(volcano_cfg(), nodes)
    assert len(derived) == 3
    assert shape(derived) == {(1, f"{TOR1}=s0", frozenset({"node0", "node1"})),
                              (1, f"{TOR1}=s1", frozenset({"node2", "node3"})),
                              (2, f"{TOR2}=s2", frozenset({f"{TOR1}=s0"}))}


def test_volcano_label_discoverer_test3_nodes_without_the_tier1_label_are_in_none() -> None:
    """test3: "Some nodes only have tier2 labels and do not have tier1 labels": one HyperNode."""
    nodes = {"node0": {TOR2: "s2"}, "node1": {TOR1: "s0"}, "node2": {TOR2: "s2"}, "node3": {TOR2: "s2"}}
    derived = derive_hypernodes(volcano_cfg(), nodes)
    assert shape(derived) == {(1, f"{TOR1}=s0", frozenset({"node1"}))}
    tree = resolve(derived, nodes)
    assert "node0" not in tree.chains and span_of(tree, {"node0", "node1"}).hypernode is None


@pytest.mark.parametrize("case", ["test4", "test5"])
def test_volcano_label_discoverer_test4_test5_one_tier1_hypernode_of_topologyA3(case) -> None:
    """test4/test5: one node labelled volcano.sh/torA3-1=s0: one tier-1 HyperNode of topologyA3 (Volcano
    reuses an existing derived HyperNode's name; here names come from the label's hash and stay the
    same from one derivation to the next, the property that reuse gives)."""
    nodes = {"node0": {"volcano.sh/torA3-1": "s0"}}
    first = derive_hypernodes(volcano_cfg(), nodes)
    assert shape(first) == {(1, "volcano.sh/torA3-1=s0", frozenset({"node0"}))}
    [name] = first
    assert re.fullmatch(f"hypernode-topologya3-tier1-{SUFFIX}", name)
    assert list(derive_hypernodes(volcano_cfg(), {**nodes, "node9": {TOR1: "x"}})).count(name) == 1


# --- parseCfg, cleanString, buildHyperNodeName ----------------------------------------------------

def test_the_label_above_the_hostname_is_tier_1() -> None:
    """parseCfg: labels listed top to bottom; the last (the hostname) dropped, the rest reversed."""
    kind = TopologyType("t", ("zone", "block", "rack", HOSTNAME_LABEL))
    assert kind.tier_labels == ("rack", "block", "zone")


@pytest.mark.parametrize("name, cleaned", [("topologyA2", "topologya2"), ("GPU_pool.1-x", "gpu-pool.1-x"),
                                           ("a b/c", "a-b-c")])
def test_type_names_are_cleaned_as_volcano_cleanString_does(name, cleaned) -> None:
    assert clean_type_name(name) == cleaned


def test_names_are_stable_and_a_hash_collision_is_told_apart(monkeypatch) -> None:
    nodes = {f"n{i}": {"rack": f"r{i}"} for i in range(4)}
    cfg = parse_label_list(f"rack,{HOSTNAME_LABEL}")
    assert derive_hypernodes(cfg, nodes).keys() == derive_hypernodes(cfg, dict(reversed(nodes.items()))).keys()
    monkeypatch.setattr(tl, "_suffix", lambda key, value, attempt: f"bbbb{'bcdfg'[attempt]}")
    names = sorted(derive_hypernodes(cfg, nodes))
    assert names == [f"hypernode-labels-tier1-bbbb{c}" for c in "bcdf"]


def test_one_label_value_under_two_parents_is_a_second_parent_volcano_calls_not_ready() -> None:
    """A tier-1 value seen under two tier-2 values: one HyperNode with two parents (Volcano keys a
    derived HyperNode by label and value), which resolve reports as blocking, naming them."""
    nodes = {"n1": {"rack": "r1", "block": "b1"}, "n2": {"rack": "r1", "block": "b2"}}
    tree = resolve(derive_hypernodes(parse_label_list(f"block,rack,{HOSTNAME_LABEL}"), nodes), nodes)
    [problem] = tree.blocking
    assert problem.kind == SECOND_PARENT and len(problem.hypernodes) == 3


# --- configuration: located errors ----------------------------------------------------------------

CONF = """networkTopologyDiscovery:
  - source: ufm
    enabled: true
    config:
      endpoint: https://ufm:8080
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA2:
          - nodeLabel: "volcano.sh/tor"
          - nodeLabel: "kubernetes.io/hostname"
        topologyA3:
          - nodeLabel: "volcano.sh/hypercluster"
          - nodeLabel: "volcano.sh/hypernode"
          - nodeLabel: "kubernetes.io/hostname"
"""


def configmap(conf: str) -> str:
    body = "".join(f"    {line}\n" if line else "\n" for line in conf.splitlines())
    return ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: volcano-controller-configmap\n"
            f"  namespace: volcano-system\ndata:\n  volcano-controller.conf: |\n{body}")


@pytest.mark.parametrize("wrap", [lambda c: c, configmap], ids=["conf", "configmap"])
def test_volcano_user_guide_config_reads_as_volcano_reads_it(tmp_path: Path, wrap) -> None:
    """docs/user-guide/how_to_use_hypernode_auto_discovery.md's example, bare or in its ConfigMap."""
    path = tmp_path / "volcano-controller.yaml"
    path.write_text(wrap(CONF))
    cfg = load_discovery_config(path)
    assert [(t.name, t.tier_labels) for t in cfg.types] == [
        ("topologyA2", ("volcano.sh/tor",)), ("topologyA3", ("volcano.sh/hypernode", "volcano.sh/hypercluster"))]
    assert read_topology_labels(str(path)) == cfg


@pytest.mark.parametrize("replace, line, column, words", [
    ('"volcano.sh/tor"', 11, 24, "not a valid label key"),
    ('"kubernetes.io/hostname"\n        topologyA3:', 12, 24, "listed twice"),
    ("topologyA3:", 13, 9, "longer than 20"),
    ("enabled: true\n    config:\n      networkTopologyTypes:", 7, 5, "source: label"),
])
def test_bad_configs_are_refused_at_their_line_and_column(tmp_path: Path, replace, line, column, words) -> None:
    bad = {
        '"volcano.sh/tor"': '"Not A Label"',
        '"kubernetes.io/hostname"\n        topologyA3:': '"volcano.sh/tor"\n        topologyA3:',
        "topologyA3:": "a-very-long-topology-type-name:",
        "enabled: true\n    config:\n      networkTopologyTypes:": "enabled: false\n    config:\n      networkTopologyTypes:",
    }[replace]
    text = CONF.replace(replace, bad, 1)
    for wrap, shift in ((lambda c: c, (0, 0)), (configmap, (7, 4))):   # the ConfigMap: 7 lines above, 4 in
        path = tmp_path / "conf.yaml"
        path.write_text(wrap(text))
        with pytest.raises(LabelTopologyError) as err:
            load_discovery_config(path)
        if words == "source: label":
            assert f"{path}:" in str(err.value) and words in str(err.value) and "ufm" in str(err.value)
            continue
        assert str(err.value).startswith(f"{path}:{line + shift[0]}:{column + shift[1]}: "), str(err.value)
        assert words in str(err.value)


@pytest.mark.parametrize("text, words", [
    ("rack", "needs at least one label above"), ("rack,zone", f"end the list with {HOSTNAME_LABEL}"),
    (f"rack,,{HOSTNAME_LABEL}", "empty label"), (f"{HOSTNAME_LABEL},rack,{HOSTNAME_LABEL}", "listed twice"),
    (f"Bad Key,{HOSTNAME_LABEL}", "not a valid label key"),
])
def test_bad_label_lists_are_refused(text, words) -> None:
    with pytest.raises(LabelTopologyError, match=re.escape(words)):
        read_topology_labels(text)


# --- the cluster state, the cache, placement ------------------------------------------------------

def racked(state: ClusterState, racks: int = 4, per_rack: int = 2, racks_per_block: int = 2) -> None:
    for i in range(racks * per_rack):
        rack = i // per_rack
        node(state, f"n{i}", cpu=4000, labels={"example.com/rack": f"r{rack}",
                                                "example.com/block": f"b{rack // racks_per_block}",
                                                HOSTNAME_LABEL: f"n{i}"})
    state.label_topology = parse_label_list(f"example.com/block,example.com/rack,{HOSTNAME_LABEL}")


def test_objects_win_over_derived_hypernodes_and_labels_are_derived_again_when_they_change() -> None:
    state = ClusterState()
    racked(state)
    tree = state.topology()
    assert tree.derived_from and tree.tiers == (1, 2) and len(tree.by_tier[1]) == 4
    moved = state.nodes["n0"]
    state.add_node(type(moved)(moved.name, moved.allocatable, labels={**moved.labels, "example.com/rack": "r9"}))
    again = state.topology()
    assert len(again.by_tier[1]) == 5 and again is not tree
    state.add_hypernode(HyperNode("switch", 1, "", (Member("Node", exact="n1"),)))
    assert set(state.topology().hypernodes) == {"switch"} and not state.topology().derived_from


def test_the_cache_derives_from_its_nodes_when_asked() -> None:
    cache = ClusterCache(api=None, scheduler_name="volcano")  # type: ignore[arg-type]  # never started
    with cache._lock:
        for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2")):
            cache._upsert(NODES, {"metadata": {"name": name, "labels": {"rack": rack}},
                                  "status": {"allocatable": {"cpu": "1"}}})
    assert not cache.snapshot().has_hypernodes
    cache.use_label_topology(parse_label_list(f"rack,{HOSTNAME_LABEL}"))
    first = cache.snapshot()
    tree = first.topology()
    assert sorted(map(sorted, tree.leaves.values())) == [["n1", "n2"], ["n3"]]
    assert cache.snapshot().topology() is tree          # nothing changed: the next cycle derives nothing
    with cache._lock:   # a label changes: the next snapshot derives again
        cache._upsert(NODES, {"metadata": {"name": "n3", "labels": {"rack": "r1"}}, "status": {"allocatable": {"cpu": "1"}}})
    again = cache.snapshot().topology()
    assert again is not tree and sorted(map(sorted, again.leaves.values())) == [["n1", "n2", "n3"]]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_a_hard_tier1_gang_lands_within_one_rack_of_the_labels(pure) -> None:
    """Racks r0..r5 of two 4-cpu nodes, two racks a block; fillers leave r0, r1 (block b0) with one
    free node each. A hard tier-1 gang of two 4-cpu pods must share a rack (read from the nodes'
    labels here), a tier-2 one of four a block, and a tier-1 one of three (racks hold two) waits."""
    state = ClusterState()
    racked(state, racks=6)
    pod(state, "fill-0", cpu=4000, node_name="n0")
    pod(state, "fill-2", cpu=4000, node_name="n2")
    for name, size, tier in (("pair", 2, 1), ("quad", 4, 2), ("trio", 3, 1)):
        state.add_podgroup(PodGroup("ns", name, min_member=size, phase="Inqueue", uid=f"pg-{name}",
                                    network_topology=NetworkTopology("hard", tier)))
        for i in range(size):
            pod(state, f"{name}-{i}", cpu=4000, group=name)
    bound = placements(cycle(PLAN, state, pure))

    def where(group: str, label: str) -> set[str]:
        return {state.nodes[n].labels[label] for k, n in bound.items() if k.startswith(f"ns/{group}-")}

    assert len([k for k in bound if "pair" in k]) == 2 and len(where("pair", "example.com/rack")) == 1
    assert len([k for k in bound if "quad" in k]) == 4 and len(where("quad", "example.com/block")) == 1
    assert not [k for k in bound if "trio" in k]
