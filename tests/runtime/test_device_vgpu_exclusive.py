"""GPU exclusive rules (`deviceshare { gpu_exclusive_rules = [...] }`, Volcano's
deviceshare.GPUExclusiveRules, v1.15 #5213): a vGPU pod carrying all labels of one rule shares no
card with another pod carrying all labels of any rule; other pods share as ever.

Cases translated from Volcano's pkg/scheduler/plugins/deviceshare gpu_exclusive_test.go (named per
case), on both kernels. The checker reads the node register and the vgpu-ids-new annotations the
device plugin reads, and the pods' labels, on its own.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano_text
from compiler.volcano.importer import import_volcano_text
from policydsl.diagnostics import Severity
from runtime.cluster.model import ClusterState
from runtime.engine import devices_vgpu as vg
from tests.runtime.runtime_helpers import cycle, policy
from tests.runtime.test_device_vgpu import check_cards, notes, reason, vgpu_node, vpod

KERNELS = pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
RULES = '[{ app: "training", team: "ml" }, { workload: "inference" }]'    # testExclusiveRules
TRAINING, INFERENCE, SERVING = {"app": "training", "team": "ml"}, {"workload": "inference"}, {"app": "serving"}


def plan(policy_name: str = "binpack", rules: str = RULES):
    return policy("tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin deviceshare {\n"
                  f"    vgpu = true\n    schedule_policy = {policy_name}\n    gpu_exclusive_rules = {rules}\n  }}\n}}\n")


BINPACK, SPREAD = plan(), plan("spread")


@pytest.mark.parametrize("labels, exclusive", [
    # TestPodMatchesRule / TestMatchingRules
    (TRAINING, True),                                        # "pod matches rule 0 (app=training, team=ml)"
    ({**TRAINING, "env": "prod"}, True),                     # "pod matches rule 0 with extra labels"
    ({"app": "training"}, False),                            # "pod missing one label from rule 0"
    ({"app": "training", "team": "data"}, False),            # "pod has wrong value for rule 0"
    (INFERENCE, True),                                       # "pod matches rule 1 (workload=inference)"
    ({**TRAINING, **INFERENCE}, True),                       # "matches both rules"
    (SERVING, False),                                        # "matches no rules"
    ({}, False),                                             # "pod with nil labels matches nothing"
])
def test_a_pod_is_exclusive_when_it_carries_every_label_of_a_rule(labels, exclusive) -> None:
    rules = vg.exclusive_rules(BINPACK)
    assert vg.is_exclusive(labels, rules) is exclusive


def test_empty_rules_match_nothing() -> None:
    # TestParseExclusiveRulesHandlesEdgeCases "empty map skipped"
    assert vg.exclusive_rules(plan(rules="[{}]")) == ()
    assert not vg.is_exclusive({"app": "x"}, vg.exclusive_rules(plan(rules="[{}]")))


def cards_of(state: ClusterState, key: str) -> set[str]:
    value = state.pods[key].annotations.get(vg.IDS, "")
    return {d.split(",")[0] for d in value.rstrip(":").split(":") if d}


def run(state: ClusterState, plan_, pure: bool):
    decisions = cycle(plan_, state, pure)
    for binding in decisions.bindings:       # what the API server copies from the Binding
        state.pods[binding.pod].annotations.update(notes(state, binding))
    state.apply(decisions)
    return decisions


@KERNELS
@pytest.mark.parametrize("labels, cards_seen", [
    # TestEndToEndExclusive / TestReservedGPUsForPod: cards 0 and 1 held by a training and an
    # inference pod; a new pod of either rule sees only 2 and 3 (the union of every rule's cards),
    # an unrelated pod all four (binpack takes the busiest, card 0).
    (TRAINING, {"GPU-g0-2", "GPU-g0-3"}),
    (INFERENCE, {"GPU-g0-2", "GPU-g0-3"}),                   # TestPodMatchingMultipleRulesSeesUnionOfReservedGPUs
    (SERVING, {"GPU-g0-0"}),                                 # TestNonMatchingPodDoesNotReserve
])
def test_an_exclusive_pod_avoids_every_card_an_exclusive_pod_holds(pure, labels, cards_seen) -> None:
    state = ClusterState()
    vgpu_node(state, "g0", cards=4, split=10)
    vpod(state, "pod-a", memory=2000, node_name="g0", labels=dict(TRAINING),
         annotations={vg.IDS: "GPU-g0-0,NVIDIA,2000,0:"})
    vpod(state, "pod-b", memory=3000, node_name="g0", labels=dict(INFERENCE),
         annotations={vg.IDS: "GPU-g0-1,NVIDIA,1000,0:"})
    vpod(state, "pod-c", memory=1000, labels=dict(labels))
    run(state, BINPACK, pure)
    assert cards_of(state, "ns/pod-c") <= cards_seen and cards_of(state, "ns/pod-c")


@KERNELS
def test_exclusive_pods_placed_in_one_cycle_take_a_card_each_and_the_rest_wait_saying_why(pure) -> None:
    state = ClusterState()
    vgpu_node(state, "g0", cards=2, split=10)
    for i in range(3):
        vpod(state, f"t{i}", memory=1000, labels=dict(TRAINING), creation=float(i))
    vpod(state, "s0", memory=1000, labels=dict(SERVING), creation=5.0)
    decisions = run(state, BINPACK, pure)
    placed = {b.pod for b in decisions.bindings}
    assert placed == {"ns/t0", "ns/t1", "ns/s0"}
    assert cards_of(state, "ns/t0") != cards_of(state, "ns/t1")
    assert "gpu_exclusive_rules" in reason(decisions, "ns/t2")
    assert not exclusive_overlap(state, vg.exclusive_rules(BINPACK))


@KERNELS
def test_without_rules_the_same_pods_share_a_card(pure) -> None:
    state = ClusterState()
    vgpu_node(state, "g0", cards=1, split=10)
    for i in range(2):
        vpod(state, f"t{i}", memory=1000, labels=dict(TRAINING), creation=float(i))
    decisions = run(state, plan(rules="[]"), pure)
    assert len(decisions.bindings) == 2


# --- invariant: no card over-committed, no card shared by two exclusive pods ------------------

def exclusive_overlap(state: ClusterState, rules) -> list[str]:
    """Cards held by two pods that each carry every label of some rule, from labels and the
    vgpu-ids-new annotations alone."""
    holders: dict[str, list[str]] = {}
    for p in state.pods.values():
        if not p.node_name or not any(all(p.labels.get(k) == v for k, v in rule) for rule in rules):
            continue
        for u in cards_of(state, p.key):
            holders.setdefault(u, []).append(p.key)
    return [f"{u} shared by exclusive pods {keys}" for u, keys in holders.items() if len(keys) > 1]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=3),
       pods=st.lists(st.tuples(st.integers(1, 2), st.integers(0, 6000), st.sampled_from([0, 30, 100]),
                               st.sampled_from([TRAINING, INFERENCE, SERVING, {}])), min_size=1, max_size=16),
       spread=st.booleans(), pure=st.booleans())
def test_no_card_is_over_committed_or_shared_by_exclusive_pods(nodes, pods, spread, pure) -> None:
    state = ClusterState()
    for i, (cards, split) in enumerate(nodes):
        vgpu_node(state, f"g{i}", cards=cards, split=split)
    for i, (number, memory, cores, labels) in enumerate(pods):
        vpod(state, f"p{i}", number=number, memory=memory, cores=cores, creation=float(i), labels=dict(labels))
    policy_plan = SPREAD if spread else BINPACK
    for _ in range(2):
        decisions = run(state, policy_plan, pure)
        assert not check_cards(state, decisions), check_cards(state, decisions)
        assert not exclusive_overlap(state, vg.exclusive_rules(policy_plan))


# --- Volcano's argument: import, export, lint ---------------------------------------------------

CONFIG = ("actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: predicates\n  - name: deviceshare\n"
          "    arguments:\n      deviceshare.VGPUEnable: true\n      deviceshare.GPUExclusiveRules:%s\n")


def test_volcanos_rules_import_and_export_as_the_same_label_maps() -> None:
    # TestLoadGPUExclusiveConfig "rules from map[string]interface{}"
    result = import_volcano_text(CONFIG % "\n      - app: training\n        team: ml\n      - workload: inference",
                                 "ds.conf")
    assert result.exit_code == 0 and not result.diagnostics
    compiled = compile_text(result.text, "p.policy")
    assert compiled.ok
    assert compiled.plan.plugin("deviceshare").arguments["gpu_exclusive_rules"] == [TRAINING, INFERENCE]
    exported = yaml.safe_load(export_volcano_text(result.text, "p.policy").text)
    [share] = [p for p in exported["tiers"][0]["plugins"] if p["name"] == "deviceshare"]
    assert share["arguments"]["deviceshare.GPUExclusiveRules"] == [TRAINING, INFERENCE]


@pytest.mark.parametrize("value, words", [
    (" '[]'", "expected a list of label maps"),               # Volcano: "wrong type" -> no rule, silently
    ("\n      - app: 3", "expected a string value"),          # Volcano drops the label: a wider rule
    ("\n      - training", "expected a map of labels"),
])
def test_rules_volcano_would_read_otherwise_are_refused_at_their_key(value, words) -> None:
    result = import_volcano_text(CONFIG % value, "ds.conf")
    assert result.exit_code == 1
    [error] = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert words in error.message and error.span.line >= 8


def test_lint_warns_of_rules_without_vgpu() -> None:
    text = ('policy "p" version 1\nactions [allocate]\ntier {\n  plugin predicates\n  plugin deviceshare {\n'
            '    gpu_exclusive_rules = [{ app: "a" }]\n  }\n}\n')
    compiled = compile_text(text, "p.policy")
    assert [(d.code, d.span.line) for d in compiled.diagnostics if d.code == "PD429"] == [("PD429", 6)]
    assert compile_text(text.replace("    gpu", "    vgpu = true\n    gpu"), "p.policy").ok
