"""Volcano's GPU share and GPU number contract (deviceshare `gpu_sharing` / `gpu_number`), and the
rule that a pod asking a device resource no plan places on cards waits, naming it.

Table cases are translated from Volcano's tests (pkg/scheduler/api/devices/nvidia/gpushare/*_test.go,
named per case) and its user guides how_to_use_gpu_sharing.md / how_to_use_gpu_number.md; each runs on
both kernels. The card checker here reads only the pods' requests, their volcano.sh/gpu-index and the
nodes' allocatable and volcano.sh/gpu-unhealthy-ids, never the engine's inventory.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.model import ClusterState, Node
from runtime.cluster.objects import load_text
from runtime.engine.devices import GPU_INDEX, PREDICATE_TIME, UNHEALTHY_GPU_IDS
from runtime.kube.binder import binding_body
from runtime.cluster.decisions import Binding
from tests import device_plugin_standin as standin
from tests.device_plugin_standin import volcano_allocate
from tests.runtime.runtime_helpers import GiB, cycle, node, placements, pod, policy

NUMBER, MEMORY = "volcano.sh/gpu-number", "volcano.sh/gpu-memory"
VGPU_MEMORY, VGPU_NUMBER = "volcano.sh/vgpu-memory", "volcano.sh/vgpu-number"
KERNELS = pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])


# No queue plugin: the cards alone decide (a queue's share of volcano.sh/gpu-memory would speak first).
TIERS = "tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin nodeorder\n  plugin binpack\n}\n"


def plan_with(arguments: str = ""):
    block = f" {{\n    {arguments}\n  }}" if arguments else ""
    return policy(TIERS.replace("plugin binpack", f"plugin binpack\n  plugin deviceshare{block}"))


SHARING = plan_with("gpu_sharing = true")
NUMBERED = plan_with("gpu_number = true")
NO_SWITCH = plan_with()


def gpu_node(state: ClusterState, name: str, cards: int, mib_per_card: int, unhealthy: str | None = None) -> Node:
    n = node(state, name, cpu=32000, memory=128 * GiB, **{NUMBER: cards, MEMORY: cards * mib_per_card})
    if unhealthy is not None:
        n.annotations[UNHEALTHY_GPU_IDS] = unhealthy
    return n


def cards_of(decisions) -> dict[str, tuple[int, ...]]:
    return {b.pod: tuple(c for cards in b.devices.values() for c in cards) for b in decisions.bindings}


def reason(decisions, key: str) -> str:
    return " | ".join(r.message for r in decisions.reasons_for(key))


# --- nothing accepted and ignored -----------------------------------------------------------

@KERNELS
@pytest.mark.parametrize("plan, requests, named", [
    # HAMi vGPU is not evaluated yet: a node offering vgpu-* would otherwise take the pod by totals.
    (SHARING, {VGPU_NUMBER: 1, VGPU_MEMORY: 4096}, "volcano.sh/vgpu-number"),
    (NUMBERED, {VGPU_MEMORY: 4096}, "volcano.sh/vgpu-memory"),
    # gpu-memory with GPU share off (gpu_number on, or no switch): no card would be written.
    (NUMBERED, {MEMORY: 1024}, "volcano.sh/gpu-memory"),
    (NO_SWITCH, {MEMORY: 1024}, "volcano.sh/gpu-memory"),
    (NO_SWITCH, {NUMBER: 1}, "volcano.sh/gpu-number"),
    # GPU share places card memory: a card count alone has no share of a card (Volcano's
    # HasDeviceRequest is false for it, and volcano-sh/devices serves it nothing).
    (SHARING, {NUMBER: 1}, "without volcano.sh/gpu-memory"),
    # Both: Volcano's gpushare Allocate (v1.14.1) writes the memory's card to volcano.sh/gpu-index,
    # then overwrites it with gpu-number idle cards its filter never checked (and keeps the first
    # card charged): no placement volcano-sh/devices would serve as both ask, so the pod waits.
    (SHARING, {NUMBER: 1, MEMORY: 4096}, "volcano.sh/gpu-number beside volcano.sh/gpu-memory"),
    (SHARING, {NUMBER: 2, MEMORY: 4096}, "volcano.sh/gpu-number beside volcano.sh/gpu-memory"),
])
def test_a_device_request_no_plan_places_waits_naming_it(pure, plan, requests, named) -> None:
    state = ClusterState()
    node(state, "g0", cpu=16000, memory=64 * GiB,
         **{NUMBER: 4, MEMORY: 4 * 16384, VGPU_NUMBER: 40, VGPU_MEMORY: 4 * 16384})
    pod(state, "p", requests=requests)
    pod(state, "plain")
    decisions = cycle(plan, state, pure)
    assert placements(decisions) == {"ns/plain": "g0"}
    assert named in reason(decisions, "ns/p")
    [why] = decisions.reasons_for("ns/p")
    assert why.kind == "unsupported" and why.details["field"].startswith("resources ")


@KERNELS
def test_other_device_plugins_resources_stay_ordinary_resources(pure) -> None:
    state = ClusterState()
    node(state, "g0", **{"nvidia.com/gpu": 2})
    pod(state, "p", requests={"nvidia.com/gpu": 2})
    assert placements(cycle(NO_SWITCH, state, pure)) == {"ns/p": "g0"}


# --- GPU number: whole cards ----------------------------------------------------------------

@KERNELS
def test_gpu_number_takes_idle_cards_and_writes_their_index(pure) -> None:
    """how_to_use_gpu_number.md: a pod asking volcano.sh/gpu-number: N gets N idle cards."""
    state = ClusterState()
    gpu_node(state, "g0", cards=4, mib_per_card=16384)
    pod(state, "a", requests={NUMBER: 3}, creation=1.0)
    pod(state, "b", requests={NUMBER: 2}, creation=2.0)
    decisions = cycle(NUMBERED, state, pure)
    assert cards_of(decisions) == {"ns/a": (0, 1, 2)}
    assert reason(decisions, "ns/b") == "0/1 nodes are available: 1 Insufficient volcano.sh/gpu-number."
    state.apply(decisions)
    assert state.pods["ns/a"].annotations[GPU_INDEX] == "0,1,2"


@KERNELS
@pytest.mark.parametrize("unhealthy, asks, cards", [
    ("0,1", 2, (2, 3)),
    ("0,1", 3, None),           # 2 cards in service
    ("x,3", 3, (0, 1, 2)),      # an index that is no number is skipped, as Volcano does
    ("", 4, (0, 1, 2, 3)),
])
def test_unhealthy_cards_are_never_handed_out(pure, unhealthy, asks, cards) -> None:
    """NewGPUDevices deletes the cards of volcano.sh/gpu-unhealthy-ids (getUnhealthyGPUs)."""
    state = ClusterState()
    gpu_node(state, "g0", cards=4, mib_per_card=16384, unhealthy=unhealthy)
    pod(state, "p", requests={NUMBER: asks})
    decisions = cycle(NUMBERED, state, pure)
    if cards is None:
        assert not decisions.bindings
        assert "too few volcano.sh/gpu-number cards in service" in reason(decisions, "ns/p")
    else:
        assert cards_of(decisions) == {"ns/p": cards}


@KERNELS
def test_unhealthy_cards_are_skipped_by_gpu_sharing_too(pure) -> None:
    state = ClusterState()
    gpu_node(state, "g0", cards=2, mib_per_card=16384, unhealthy="0")
    for i in range(3):
        pod(state, f"p{i}", requests={MEMORY: 8192}, creation=float(i))
    decisions = cycle(SHARING, state, pure)
    assert cards_of(decisions) == {"ns/p0": (1,), "ns/p1": (1,)}
    assert "ns/p2" in {u.pod for u in decisions.unschedulable}


# --- GPU share: memory on one card ----------------------------------------------------------

@pytest.mark.parametrize("name, containers, init, want", [
    # TestGetGPUMemoryOfPod / TestGetGPUNumberOfPod: containers sum, init containers take the max.
    ("GPUs required only in Containers", [1, 3], [], 4),
    ("GPUs required both in initContainers and Containers", [2], [1, 3], 3),
])
@pytest.mark.parametrize("resource", [MEMORY, NUMBER])
def test_a_pods_device_request_sums_containers_and_takes_the_largest_init_container(
        name, containers, init, want, resource) -> None:
    def container(i: int, amount: int) -> str:
        return f"    - name: c{i}\n      image: x\n      resources: {{limits: {{{resource}: '{amount}'}}}}\n"
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec:\n  schedulerName: volcano\n"
            "  containers:\n" + "".join(container(i, a) for i, a in enumerate(containers)) +
            ("  initContainers:\n" + "".join(container(9 + i, a) for i, a in enumerate(init)) if init else ""))
    assert load_text(text).pods["ns/p"].requests[resource] == want, name


@KERNELS
def test_an_over_subscribed_card_is_not_offered(pure) -> None:
    """TestGetDevicesIdleGPUMemory_OverSubscribedCardReportsZero and
    TestPredicateGPUbyMemory_OverSubscribedCardNotOffered: a card whose pods already ask more
    than it has (a pod that set volcano.sh/gpu-index itself) has nothing idle."""
    state = ClusterState()
    gpu_node(state, "g0", cards=1, mib_per_card=1000)
    pod(state, "p1", requests={MEMORY: 3000}, node_name="g0", annotations={GPU_INDEX: "0"})
    pod(state, "p2", requests={MEMORY: 500})
    decisions = cycle(SHARING, state, pure)
    assert not decisions.bindings
    assert "node g0's cards have 0 free" in reason(decisions, "ns/p2")


@KERNELS
def test_a_fragmented_node_is_said_with_its_cards_figures(pure) -> None:
    state = ClusterState()
    gpu_node(state, "g3", cards=4, mib_per_card=10240)
    for i, used in enumerate((2048, 4096, 6144, 10240)):
        pod(state, f"run{i}", requests={MEMORY: used}, node_name="g3", annotations={GPU_INDEX: str(i)})
    pod(state, "big", requests={MEMORY: 10240})
    decisions = cycle(SHARING, state, pure)
    assert reason(decisions, "ns/big") == (
        "0/1 nodes are available: 1 device memory fragmented: pod needs 10Gi of volcano.sh/gpu-number memory on "
        "a card; node g3's cards have 8Gi, 6Gi, 4Gi and 0 free.")


@KERNELS
def test_a_reserved_pod_holds_its_card_memory(pure) -> None:
    """A pod pipelined onto a node in an earlier cycle (nominated there) takes its card memory
    before anything else is placed, so no other pod is given the same room on the card."""
    state = ClusterState()
    gpu_node(state, "g0", cards=1, mib_per_card=16384)
    reserved = pod(state, "reserved", requests={MEMORY: 10240}, creation=2.0)
    reserved.nominated_node, reserved.nominated_at = "g0", 0.0
    pod(state, "early", requests={MEMORY: 10240}, creation=1.0)
    decisions = cycle(SHARING, state, pure)
    assert "ns/early" not in placements(decisions)
    assert "6Gi free" in reason(decisions, "ns/early")


# --- the Binding: gpu-index and predicate-time ----------------------------------------------

def test_the_binding_carries_the_cards_and_an_increasing_predicate_time() -> None:
    """Volcano's gpushare Allocate returns gpuIndexAnnotations (volcano.sh/gpu-index and
    volcano.sh/predicate-time, nanoseconds) carried on the Binding; volcano-sh/devices serves the
    pending pod with the earliest predicate-time first, so pods bound one after another on a node
    must be told apart."""
    times = []
    for i in range(50):
        p = pod(ClusterState(), f"p{i}")
        body = binding_body(Binding(p.key, "g0", {NUMBER: (i % 4,)}), p)
        notes = body["metadata"]["annotations"]
        assert notes[GPU_INDEX] == str(i % 4)
        times.append(int(notes[PREDICATE_TIME]))
    assert times == sorted(set(times)) and times[0] > 1_700_000_000 * 10**9
    plain = pod(ClusterState(), "plain")
    assert "annotations" not in binding_body(Binding(plain.key, "g0", {}), plain)["metadata"]


# --- invariant: no card over-committed, no unhealthy card used --------------------------------

def check_cards(state: ClusterState) -> list[str]:
    """Independent of the engine: per node, the cards by allocatable (gpu-number cards sharing
    gpu-memory evenly), the unhealthy ones by annotation; per card the memory of the pods whose
    gpu-index names it, and whole-card pods alone on theirs."""
    problems = []
    for name, n in state.nodes.items():
        count = n.allocatable.get(NUMBER, 0)
        if not count:
            continue
        per_card = n.allocatable.get(MEMORY, 0) // count
        broken = {int(p) for p in n.annotations.get(UNHEALTHY_GPU_IDS, "").split(",") if p.strip().isdigit()}
        memory = [0] * count
        holders: list[list[str]] = [[] for _ in range(count)]
        for p in state.pods.values():
            if p.node_name != name or p.phase in ("Succeeded", "Failed") or GPU_INDEX not in p.annotations:
                continue
            for c in (int(x) for x in p.annotations[GPU_INDEX].split(",")):
                if c >= count:
                    problems.append(f"{p.key} on {name} card {c} of {count}")
                    continue
                memory[c] += p.requests.get(MEMORY, 0)
                holders[c].append(p.key)
                if c in broken and p.annotations.get("test/new") == "1":
                    problems.append(f"{p.key} given unhealthy card {c} of {name}")
        for c in range(count):
            if memory[c] > per_card:
                problems.append(f"{name} card {c}: {memory[c]} MiB of {per_card} ({holders[c]})")
            whole = [k for k in holders[c] if state.pods[k].requests.get(NUMBER) and not state.pods[k].requests.get(MEMORY)]
            if whole and len(holders[c]) > 1:
                problems.append(f"{name} card {c} taken whole by {whole} and shared with {holders[c]}")
    return problems


node_specs = st.lists(st.tuples(st.integers(1, 8), st.sampled_from([4096, 16384, 40960]),
                                st.sets(st.integers(0, 7), max_size=3)), min_size=1, max_size=4)
pod_specs = st.lists(st.tuples(st.integers(1, 41000), st.integers(0, 3)), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=node_specs, pods=pod_specs, numbered=st.booleans(), pure=st.booleans())
def test_no_card_is_over_committed_and_no_unhealthy_card_used(nodes, pods, numbered, pure) -> None:
    state = ClusterState()
    for i, (cards, mib, broken) in enumerate(nodes):
        gpu_node(state, f"g{i}", cards=cards, mib_per_card=mib,
                 unhealthy=",".join(str(c) for c in sorted(broken)) or None)
    for i, (mib, cycle_no) in enumerate(pods):
        requests = {NUMBER: 1 + mib % 3} if numbered else {MEMORY: mib}
        pod(state, f"p{i}", cpu=100, memory=GiB // 4, requests=requests, creation=float(cycle_no * 100 + i),
            annotations={"test/new": "1"})
    plan = NUMBERED if numbered else SHARING
    for _ in range(3):
        decisions = cycle(plan, state, pure)
        state.apply(decisions)
        assert not check_cards(state), check_cards(state)


# --- the device plugin's side: which pending pod an Allocate call serves ----------------------

@pytest.mark.parametrize("with_time", [True, False])
def test_each_pod_gets_the_cards_chosen_for_it_when_the_plugin_serves_by_predicate_time(with_time) -> None:
    """Shared-GPU pods bound to one node in successive cycles, before the kubelet admits any: it
    admits them in bind order and calls Allocate once per pod; the device plugin (the stand-in of
    tests/device_plugin_standin.py, also run on the dev cluster by
    tests/integration/test_device_plugin_standin.py), seeing only the annotations, must hand each
    the cards the scheduler chose for it. The API lists pods by name, not by bind order, so
    without predicate-time the plugin serves the wrong pod."""
    state = ClusterState()
    gpu_node(state, "g0", cards=4, mib_per_card=16384)
    listed, bind_order = [], []
    for name in ["d", "c", "b", "a"]:                        # one new pod a cycle
        pod(state, name, requests={MEMORY: 12288})
        decisions = cycle(SHARING, state, False)
        [binding] = decisions.bindings
        notes = dict(binding_body(binding, state.pods[binding.pod])["metadata"]["annotations"])
        if not with_time:
            notes.pop(PREDICATE_TIME)
        listed.append({"metadata": {"name": binding.pod.split("/")[1], "namespace": "ns", "annotations": notes},
                       "spec": {"containers": [{"resources": {"limits": {MEMORY: "12288"}}}]},
                       "status": {"phase": "Pending"}})
        bind_order.append(binding.pod)
        state.apply(decisions)
    listed.sort(key=lambda p: p["metadata"]["name"])
    served = {}
    for admitted in bind_order:
        answer = volcano_allocate(listed, MEMORY, 12288)
        next(p for p in listed if standin.key(p) == answer.pod)["metadata"]["annotations"].update(answer.writes)
        served[admitted] = answer.cards
    chosen = {standin.key(p): tuple(int(c) for c in p["metadata"]["annotations"][GPU_INDEX].split(","))
              for p in listed}
    assert len(set(chosen.values())) == 4
    assert (served == chosen) is with_time



@KERNELS
def test_an_ask_no_card_holds_is_not_called_fragmentation(pure) -> None:
    """A pod asking more card memory than any card has waits saying no card holds it (with the
    largest card's size), not that memory is fragmented: freeing cards would not help it."""
    state = ClusterState()
    gpu_node(state, "g1", 2, 8192)
    pod(state, "big", requests={MEMORY: 10240})
    pod(state, "fits", requests={MEMORY: 4096})
    decisions = cycle(SHARING, state, pure)
    assert placements(decisions) == {"ns/fits": "g1"}
    why = reason(decisions, "ns/big")
    assert "card holds 10Gi" in why and "largest card has 8Gi" in why, why
    assert "fragmented" not in why, why
