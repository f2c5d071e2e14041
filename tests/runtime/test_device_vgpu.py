"""HAMi vGPU as Volcano places it (`deviceshare { vgpu = true }`).

Cases translated from Volcano's pkg/scheduler/api/devices/nvidia/vgpu tests (named per case) and
its user guide how_to_use_volcano_vgpu.md, on both kernels. The card checker decodes the Binding's
annotations (what HAMi's device plugin reads) and the node's register on its own.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.decisions import Binding
from runtime.cluster.model import ClusterState, Node, PodGroup
from runtime.cluster.objects import load_text
from runtime.engine import devices_vgpu as vg
from runtime.kube.binder import binding_body
from tests import device_plugin_standin as standin
from tests.runtime.runtime_helpers import GiB, cycle, node, placements, pod, policy

KERNELS = pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
TIERS = "tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin deviceshare%s\n}\n"


def plan(policy_name: str = "binpack", weight: str = ""):
    return policy(TIERS % f"{weight} {{\n    vgpu = true\n    schedule_policy = {policy_name}\n  }}")


BINPACK, SPREAD = plan(), plan("spread")
# Multi-container vGPU pods are placed only with deviceshare's node_lock (VgpuRule.MULTI_NEEDS_LOCK).
LOCKED, SPREAD_LOCKED = (policy(TIERS % f" {{\n    vgpu = true\n    schedule_policy = {p}\n    node_lock = true\n  }}")
                         for p in ("binpack", "spread"))


def register(cards: list[tuple[str, int, int, str, bool]], mode: str = "hami-core") -> str:
    return "".join(f"{u},{split},{mem},{kind},{str(ok).lower()},{mode}:" for u, split, mem, kind, ok in cards)


def vgpu_node(state: ClusterState, name: str, cards: int = 2, mib: int = 16384, split: int = 4,
              kind: str = "NVIDIA-A100", healthy=None, mode: str = "hami-core") -> Node:
    healthy = healthy or [True] * cards
    n = node(state, name, cpu=64000, memory=256 * GiB, **{vg.VGPU_NUMBER: cards * split, vg.VGPU_MEMORY: cards * mib,
                                                          vg.VGPU_CORES: cards * 100})
    n.annotations[vg.REGISTER] = register([(f"GPU-{name}-{i}", split, mib, kind, healthy[i]) for i in range(cards)],
                                          mode)
    return n


def vpod(state: ClusterState, name: str, number: int = 1, memory: int = 0, cores: int = 0, percent: int = 0,
         creation: float = 0.0, annotations=None, **kwargs):
    requests = {vg.VGPU_NUMBER: number, vg.VGPU_MEMORY: memory, vg.VGPU_CORES: cores, vg.VGPU_PERCENT: percent}
    return pod(state, name, cpu=100, memory=GiB // 4, requests={k: v for k, v in requests.items() if v},
               creation=creation, annotations=dict(annotations or {}), **kwargs)


def notes(state: ClusterState, binding: Binding) -> dict[str, str]:
    return binding_body(binding, state.pods[binding.pod], state.nodes[binding.node])["metadata"]["annotations"]


def reason(decisions, key: str) -> str:
    return " | ".join(r.message for r in decisions.reasons_for(key))


# --- the register and the pod's ask ---------------------------------------------------------

def test_the_register_is_read_card_by_card_and_a_short_entry_voids_the_node() -> None:
    cards, mode = vg.parse_register("GPU-a,10,32768,NVIDIA-A100,true,hami-core:GPU-b,10,32768,NVIDIA-A100,false,mps:")
    assert [(c.uuid, c.split, c.memory, c.healthy) for c in cards] == [("GPU-a", 10, 32768, True),
                                                                      ("GPU-b", 10, 32768, False)]
    assert mode == "hami-core"                     # Volcano's getSharingMode: all but mig is hami-core
    assert vg.parse_register("GPU-a,10,32768,NVIDIA-A100,true,mig:")[1] == "mig"
    assert vg.parse_register("GPU-a,10,32768,NVIDIA-A100,true:") is None
    assert vg.parse_register("nothing") is None


@pytest.mark.parametrize("requests, need", [
    ({vg.VGPU_NUMBER: 2}, vg.VgpuNeed(2, 0, 100, 0)),                        # whole memory of each card
    ({vg.VGPU_MEMORY: 3000}, vg.VgpuNeed(1, 3000, vg.NO_PERCENT, 0)),        # memory alone: one card
    ({vg.VGPU_NUMBER: 1, vg.VGPU_PERCENT: 25, vg.VGPU_CORES: 50}, vg.VgpuNeed(1, 0, 25, 50)),
    ({vg.VGPU_CORES: 50}, None),                                             # no vGPU ask (checkVGPUResourcesInPod)
])
def test_a_pods_ask_is_read_as_volcanos_extract_resource_request(requests, need) -> None:
    assert vg.vgpu_need(requests) == need


# --- per-card fit ---------------------------------------------------------------------------

@KERNELS
@pytest.mark.parametrize("policy_plan, want", [
    # TestSortedDeviceIndicesByPolicy_PicksExpectedDevice
    (BINPACK, 0),     # "binpack picks busier device"
    (SPREAD, 1),      # "spread picks idle device over shared one"
])
def test_card_order_follows_the_policy(pure, policy_plan, want) -> None:
    state = ClusterState()
    n = vgpu_node(state, "g0", cards=2)
    vpod(state, "running", memory=4096, node_name="g0",
         annotations={vg.IDS: "GPU-g0-0,NVIDIA,4096,0:"})
    vpod(state, "worker", memory=4096)
    decisions = cycle(policy_plan, state, pure)
    [binding] = decisions.bindings
    assert binding.devices == {vg.VGPU_NUMBER: (want,)}
    written = notes(state, binding)
    assert written[vg.IDS] == written[vg.TO_ALLOCATE] == f"GPU-g0-{want},NVIDIA,4096,0:"
    assert written[vg.ASSIGNED_NODE] == n.name and written[vg.BIND_PHASE] == "allocating"
    assert int(written[vg.ASSIGNED_TIME]) > 1_700_000_000 and "volcano.sh/gpu-index" not in written


@KERNELS
@pytest.mark.parametrize("asks, running, fits", [
    (dict(memory=12000), [(0, 8000, 0)], False),            # 16384 - 8000 < 12000
    (dict(memory=8000), [(0, 8000, 0)], True),
    (dict(memory=1000, cores=60), [(0, 1000, 50)], False),  # cores over 100
    (dict(memory=1000, cores=50), [(0, 1000, 50)], True),
    (dict(memory=1000, cores=100), [(0, 1000, 10)], False),  # 100 cores: the card alone
    (dict(memory=1000, cores=100), [], True),
    (dict(memory=1000), [(0, 1000, 100)], False),           # no zero-core ask on a card at 100
    (dict(percent=50), [(0, 8192, 0)], True),               # half of 16384 free
    (dict(percent=60), [(0, 8192, 0)], False),
    (dict(number=1), [(0, 1, 0)], False),                   # the whole memory of a card in use
    (dict(memory=10), [(0, 10, 0)] * 4, False),             # split count 4 reached
    (dict(memory=10), [(0, 10, 0)] * 3, True),
])
def test_one_card_fits_as_volcano_checks_it(pure, asks, running, fits) -> None:
    state = ClusterState()
    vgpu_node(state, "g0", cards=1, mib=16384, split=4)
    for i, (card, mem, cores) in enumerate(running):
        vpod(state, f"r{i}", node_name="g0", annotations={vg.IDS: f"GPU-g0-{card},NVIDIA,{mem},{cores}:"})
    vpod(state, "p", **asks)
    decisions = cycle(BINPACK, state, pure)
    assert ("ns/p" in placements(decisions)) is fits
    if not fits:      # the split count is also the node's vgpu-number, which the kubelet sums
        why = reason(decisions, "ns/p")
        assert "insufficient vGPU: pod needs a vGPU card" in why or "Insufficient volcano.sh/vgpu-number" in why


@KERNELS
def test_unhealthy_cards_mig_nodes_and_other_vendors_are_never_used(pure) -> None:
    state = ClusterState()
    vgpu_node(state, "a", cards=2, healthy=[False, True])
    vgpu_node(state, "b", cards=2, mode="mig")
    vgpu_node(state, "c", cards=2, kind="MLU-370")
    for i in range(3):
        vpod(state, f"p{i}", memory=12000, creation=float(i))
    decisions = cycle(BINPACK, state, pure)
    assert {b.pod: (b.node, b.devices[vg.VGPU_NUMBER]) for b in decisions.bindings} == {"ns/p0": ("a", (1,))}
    why = reason(decisions, "ns/p1")
    assert "vGPU mode mig" in why and "insufficient vGPU" in why


@KERNELS
def test_a_node_without_register_or_vgpu_allocatable_has_no_vgpu(pure) -> None:
    state = ClusterState()
    n = vgpu_node(state, "g0")
    n.allocatable[vg.VGPU_CORES] = 0          # NewGPUDevices: every vGPU resource above 0
    vpod(state, "p", memory=100)
    decisions = cycle(BINPACK, state, pure)
    assert not decisions.bindings
    assert f"no vGPU cards registered ({vg.REGISTER})" in reason(decisions, "ns/p")


@KERNELS
def test_multi_card_asks_take_distinct_cards_and_write_one_device_list(pure) -> None:
    state = ClusterState()
    vgpu_node(state, "g0", cards=4)
    vpod(state, "p", number=3, memory=2000, cores=30)
    decisions = cycle(SPREAD, state, pure)
    [binding] = decisions.bindings
    assert binding.devices == {vg.VGPU_NUMBER: (0, 1, 2)}
    assert notes(state, binding)[vg.IDS] == "GPU-g0-0,NVIDIA,2000,30:GPU-g0-1,NVIDIA,2000,30:GPU-g0-2,NVIDIA,2000,30:"


@KERNELS
def test_pods_placed_in_one_cycle_never_share_more_than_a_card_has(pure) -> None:
    """TestBinpackStacksSequentialPods's setting: pods of 6000 MiB on 16384 MiB cards stack two
    per card with binpack, never three."""
    state = ClusterState()
    vgpu_node(state, "g0", cards=3)
    for i in range(7):
        vpod(state, f"p{i}", memory=6000, creation=float(i))
    decisions = cycle(BINPACK, state, pure)
    cards = [b.devices[vg.VGPU_NUMBER][0] for b in decisions.bindings]
    assert sorted(cards) == [0, 0, 1, 1, 2, 2]
    assert "ns/p6" in {u.pod for u in decisions.unschedulable}


@pytest.mark.parametrize("annotations, card_type, allowed", [
    # TestCheckGPUtype
    ({"nvidia.com/use-gputype": "A100"}, "NVIDIA-A100", True),                  # single GPUInUse value matches
    ({"nvidia.com/use-gputype": "a100"}, "NVIDIA-A100", True),                  # GPUInUse mixed case matches
    ({"nvidia.com/use-gputype": "V100,A100"}, "NVIDIA-A100", True),             # multiple GPUInUse values, one matches
    ({"nvidia.com/use-gputype": "V100,T4"}, "NVIDIA-A100", False),              # multiple GPUInUse values, none matches
    ({"nvidia.com/nouse-gputype": "A100"}, "NVIDIA-A100", False),               # single GPUNoUse value matches
    ({"nvidia.com/nouse-gputype": "a100"}, "NVIDIA-A100", False),               # GPUNoUse mixed case matches
    ({"nvidia.com/nouse-gputype": "V100,A100"}, "NVIDIA-A100", False),          # multiple GPUNoUse values, one matches
    ({"nvidia.com/nouse-gputype": "V100,T4"}, "NVIDIA-A100", True),             # multiple GPUNoUse values, none matches
    ({}, "NVIDIA-A100", True),                                                  # empty annotations map
])
def test_card_type_filter_as_volcanos_check_gpu_type(annotations, card_type, allowed) -> None:
    assert vg.type_allowed(annotations, card_type) is allowed


@pytest.mark.parametrize("allow, deny, uuid, allowed", [
    # TestCheckGPUUUID
    (None, None, "GPU-a", True),          # no constraint
    ("", None, "GPU-a", True),            # empty allowlist is ignored
    (",", None, "GPU-a", True),           # separator-only allowlist is ignored
    ("GPU-a", None, "GPU-a", True),       # allowlist exact match
    (",GPU-a,", None, "GPU-a", True),     # allowlist ignores empty entries
    ("GPU", None, "GPU-a", False),        # allowlist rejects partial match
    ("GPU-a", None, "", False),           # allowlist rejects empty device UUID
    (None, "GPU-a", "GPU-a", False),      # denylist rejects match
    (None, "GPU-a", "", False),           # denylist constraint rejects empty device UUID
    ("GPU-a", "GPU-a", "GPU-a", False),   # denylist wins over allowlist
])
def test_card_uuid_filter_as_volcanos_gpu_uuid_filter(allow, deny, uuid, allowed) -> None:
    annotations = {k: v for k, v in ((vg.USE_UUID, allow), (vg.NOUSE_UUID, deny)) if v is not None}
    assert vg.uuid_allowed(annotations, uuid) is allowed


@KERNELS
@pytest.mark.parametrize("annotations, want", [
    # TestGPUUUIDConstraints
    ({vg.USE_UUID: "GPU-g0-1"}, (1,)),                            # allowlist selects requested GPU
    ({vg.NOUSE_UUID: "GPU-g0-0"}, (1,)),                          # denylist excludes GPU
    ({vg.USE_UUID: "GPU-other"}, None),                           # unknown allowed UUID is unschedulable
    ({vg.NOUSE_UUID: "GPU-g0-0,GPU-g0-1"}, None),                 # denylist excludes all GPUs
    ({"nvidia.com/use-gputype": "H100"}, None),
    ({"nvidia.com/nouse-gputype": "H100"}, (0,)),
])
def test_pods_narrowing_their_cards_get_only_those_and_others_in_their_job_are_not_bound_by_it(
        pure, annotations, want) -> None:
    state = ClusterState()
    vgpu_node(state, "g0", cards=2)
    # One job whose pods are one class but for the filter: the rule must not answer for both by one.
    state.add_podgroup(PodGroup("ns", "job", min_member=1, queue="default", phase="Inqueue", uid="pg-job"))
    vpod(state, "narrow", memory=1000, annotations=annotations, creation=1.0, group="job")
    vpod(state, "plain", memory=1000, creation=2.0, group="job")
    decisions = cycle(BINPACK, state, pure)
    cards = {b.pod: b.devices[vg.VGPU_NUMBER] for b in decisions.bindings}
    assert cards.get("ns/narrow") == want
    assert "ns/plain" in cards
    if want is None:
        assert "vGPU cards the pod's" in reason(decisions, "ns/narrow")


@KERNELS
@pytest.mark.parametrize("annotation, value", [(vg.MODE, "mig")])
def test_what_of_vgpu_is_not_evaluated_yet_makes_the_pod_wait_naming_it(pure, annotation, value) -> None:
    state = ClusterState()
    vgpu_node(state, "g0")
    vpod(state, "p", memory=100, annotations={annotation: value})
    vpod(state, "q", memory=100, annotations={vg.MODE: "hami-core"})
    decisions = cycle(BINPACK, state, pure)
    assert placements(decisions) == {"ns/q": "g0"}
    [why] = decisions.reasons_for("ns/p")
    assert why.kind == "unsupported" and annotation in why.details["field"]


MULTI = """
apiVersion: v1
kind: Pod
metadata: {{name: two, namespace: ns}}
spec:
  schedulerName: volcano
  containers:
  - {{name: a, image: x, resources: {{limits: {a}}}}}
  - {{name: sidecar, image: x}}
  - {{name: b, image: x, resources: {{limits: {b}}}}}
"""


@KERNELS
def test_a_multi_container_vgpu_pod_gets_one_device_list_per_container(pure) -> None:
    """volcano#4505: a pod whose two containers each ask a vGPU crashed Volcano's scheduler with
    volcano-vgpu-device-plugin. Each container gets its own list, `;`-separated, in spec order; the
    sidecar asking nothing an empty one (HAMi's protocol: its plugin takes list n for container n)."""
    state = load_text(MULTI.format(a="{volcano.sh/vgpu-number: '1', volcano.sh/vgpu-memory: '3000'}",
                                   b="{volcano.sh/vgpu-number: '2', volcano.sh/vgpu-memory: '1000', "
                                     "volcano.sh/vgpu-cores: '20'}"))
    vgpu_node(state, "g0", cards=2)
    decisions = cycle(LOCKED, state, pure)
    [binding] = decisions.bindings
    ids = notes(state, binding)[vg.IDS]
    first, sidecar, second = ids.split(";")
    assert sidecar == ""
    assert first.count(":") == 1 and ",NVIDIA,3000,0:" in first
    assert sorted(d.split(",")[0] for d in second.rstrip(":").split(":")) == ["GPU-g0-0", "GPU-g0-1"]
    assert second.count(",NVIDIA,1000,20:") == 2
    assert notes(state, binding)[vg.TO_ALLOCATE] == ids


@KERNELS
def test_a_multi_container_vgpu_pod_waits_without_the_node_lock(pure) -> None:
    """HAMi's plugin re-stamps volcano.sh/vgpu-time at each container's Allocate, so the stand-in
    (as the plugin) serves a multi-container pod's second container to another pod pending on the
    node; without node_lock such a pod is not placed, and says why."""
    asks = "{volcano.sh/vgpu-number: '1', volcano.sh/vgpu-memory: '1000'}"
    state = load_text(MULTI.format(a=asks, b=asks))
    vgpu_node(state, "g0")
    decisions = cycle(BINPACK, state, pure)
    assert not decisions.bindings
    assert "without deviceshare's node_lock" in reason(decisions, "ns/two")
    # What the lock prevents: another pod waiting on the node takes the second container's call.
    two = {"metadata": {"name": "two", "namespace": "ns", "annotations": {
        vg.BIND_TIME: "1", vg.BIND_PHASE: "allocating", vg.ASSIGNED_NODE: "g0", vg.ASSIGNED_TIME: "5",
        vg.TO_ALLOCATE: "GPU-g0-0,NVIDIA,1000,0:;;GPU-g0-1,NVIDIA,1000,0:"}}}
    other = {"metadata": {"name": "other", "namespace": "ns", "annotations": {
        vg.BIND_TIME: "1", vg.BIND_PHASE: "allocating", vg.ASSIGNED_NODE: "g0", vg.ASSIGNED_TIME: "6",
        vg.TO_ALLOCATE: "GPU-g0-1,NVIDIA,1000,0:"}}}
    first = standin.hami_allocate([two, other], "g0")
    assert first.pod == "ns/two"
    two["metadata"]["annotations"].update(first.writes)
    assert standin.hami_allocate([two, other], "g0").pod == "ns/other"


@KERNELS
def test_a_vgpu_container_after_a_sidecar_gets_the_second_list(pure) -> None:
    """HAMi's plugin hands list n to spec.containers[n]: with a sidecar first, the sidecar's list is
    empty and the vGPU container's is second (Volcano would write one list, read for the sidecar)."""
    text = """
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  schedulerName: volcano
  containers:
  - {name: sidecar, image: x}
  - {name: a, image: x, resources: {limits: {volcano.sh/vgpu-number: '1', volcano.sh/vgpu-memory: '2000'}}}
"""
    state = load_text(text)
    vgpu_node(state, "g0")
    [binding] = cycle(BINPACK, state, pure).bindings
    assert notes(state, binding)[vg.IDS] == ";GPU-g0-0,NVIDIA,2000,0:"


@KERNELS
def test_a_multi_container_pod_fits_its_containers_one_after_another(pure) -> None:
    """Containers of 2 x 10000 MiB and 1 x 10000 MiB on 16384 MiB cards: the node's totals would
    hold them on two cards, but the second container sees what the first took (Volcano fits them
    one after another), so the pod waits on a two-card node and fits on a three-card one."""
    state = load_text(MULTI.format(a="{volcano.sh/vgpu-number: '2', volcano.sh/vgpu-memory: '10000'}",
                                   b="{volcano.sh/vgpu-number: '1', volcano.sh/vgpu-memory: '10000'}"))
    vgpu_node(state, "small", cards=2)
    decisions = cycle(LOCKED, state, pure)
    assert not decisions.bindings
    assert "insufficient vGPU" in reason(decisions, "ns/two")
    vgpu_node(state, "big", cards=3)
    decisions = cycle(LOCKED, state, pure)
    [binding] = decisions.bindings
    assert binding.node == "big" and len(set(binding.devices[vg.VGPU_NUMBER])) == 3


@KERNELS
def test_a_vgpu_ask_in_an_init_container_waits_naming_it(pure) -> None:
    """Volcano's ExtractResourceRequest reads spec.containers only: an init container gets no list."""
    text = """
apiVersion: v1
kind: Pod
metadata: {name: init, namespace: ns}
spec:
  schedulerName: volcano
  initContainers:
  - {name: i, image: x, resources: {limits: {volcano.sh/vgpu-number: '1'}}}
  containers:
  - {name: a, image: x, resources: {limits: {volcano.sh/vgpu-number: '1'}}}
"""
    state = load_text(text)
    vgpu_node(state, "g0")
    decisions = cycle(BINPACK, state, pure)
    assert not decisions.bindings
    assert "spec.initContainers[0]" in reason(decisions, "ns/init")


# --- invariant: no card over-committed, no unhealthy card used --------------------------------

def check_cards(state: ClusterState, decisions) -> list[str]:
    """From the node registers and the annotations the device plugin would read, on their own."""
    problems = []
    for name, n in state.nodes.items():
        cards = {}
        for entry in n.annotations.get(vg.REGISTER, "").split(":"):
            items = entry.split(",")
            if len(items) >= 6:
                cards[items[0]] = (int(items[1]), int(items[2]), items[4] == "true")
        use = {u: [0, 0, 0] for u in cards}
        for p in state.pods.values():
            if p.node_name != name or vg.IDS not in p.annotations:
                continue
            devices = [d for container in p.annotations[vg.IDS].split(";") for d in container.split(":") if d]
            for device in devices:
                u, _, mem, cores = device.split(",")
                use[u][0] += 1
                use[u][1] += int(mem)
                use[u][2] += int(cores)
                if not cards[u][2] and p.key in {b.pod for b in decisions.bindings}:
                    problems.append(f"{p.key} given unhealthy {u}")
        # volcano.sh/vgpu-podgroup-policy: spread narrows the pod placed: two spreading pods of one
        # group never use one card (a plain one may join a spreading one's card: TestMixedAnnotations)
        holders: dict[str, list] = {}
        for p in state.pods.values():
            if p.node_name == name and vg.IDS in p.annotations:
                for container in p.annotations[vg.IDS].split(";"):
                    for d in [d for d in container.split(":") if d]:
                        u, _, mem, cores = d.split(",")
                        if int(mem) or int(cores):
                            holders.setdefault(u, []).append(p)
        for u, ps in holders.items():
            for p in ps:
                mates = {q.key for q in ps if q.key != p.key and q.group == p.group and p.group
                         and q.annotations.get("volcano.sh/vgpu-podgroup-policy") == "spread"}
                if p.annotations.get("volcano.sh/vgpu-podgroup-policy") == "spread" and mates:
                    problems.append(f"{p.key} spreads but shares {u} with {sorted(mates)}")
        for u, (num, mem, cores) in use.items():
            if num > cards[u][0] or mem > cards[u][1] or cores > 100:
                problems.append(f"{u}: {num} tasks of {cards[u][0]}, {mem} MiB of {cards[u][1]}, {cores}% cores")
    return problems


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(st.tuples(st.integers(1, 4), st.sampled_from([8192, 16384]), st.integers(1, 4),
                                st.lists(st.booleans(), min_size=4, max_size=4)), min_size=1, max_size=3),
       pods=st.lists(st.tuples(st.integers(1, 2), st.integers(0, 9000), st.sampled_from([0, 20, 50, 100]),
                               st.sampled_from([0, 0, 30]), st.integers(1, 2), st.sampled_from([None, "j0", "j1"]),
                               st.booleans()), min_size=1, max_size=20),
       spread=st.booleans(), pure=st.booleans())
def test_no_vgpu_card_is_over_committed_and_no_unhealthy_card_used(nodes, pods, spread, pure) -> None:
    state = ClusterState()
    for i, (cards, mib, split, healthy) in enumerate(nodes):
        vgpu_node(state, f"g{i}", cards=cards, mib=mib, split=split, healthy=healthy[:cards])
    for name in ("j0", "j1"):
        group(state, name)
    for i, (number, memory, cores, percent, containers, job, apart) in enumerate(pods):
        named = {"scheduling.k8s.io/group-name": job, **(SPREAD_POLICY if apart else {})} if job else {}
        p = vpod(state, f"p{i}", number=number * containers, memory=memory * containers, cores=cores * containers,
                 percent=percent * containers, creation=float(i), annotations=named, group=job)
        if containers > 1:     # the same ask in each container (one device list each)
            one = {vg.VGPU_NUMBER: number, vg.VGPU_MEMORY: memory, vg.VGPU_CORES: cores, vg.VGPU_PERCENT: percent}
            p.vgpu_containers = ({k: v for k, v in one.items() if v},) * containers
    for _ in range(2):
        decisions = cycle(SPREAD_LOCKED if spread else LOCKED, state, pure)
        for binding in decisions.bindings:     # what the API server copies from the Binding
            state.pods[binding.pod].annotations.update(notes(state, binding))
        state.apply(decisions)
        assert not check_cards(state, decisions), check_cards(state, decisions)


@KERNELS
def test_the_device_plugin_stand_in_serves_each_container_its_own_list(pure) -> None:
    """HAMi's plugin is called once per container (volcano-vgpu-device-plugin#77): the stand-in,
    reading only the Binding's annotations, serves the first container's list, then the second's,
    and flips bind-phase to success once every list is served."""
    state = load_text(MULTI.format(a="{volcano.sh/vgpu-number: '1', volcano.sh/vgpu-memory: '3000'}",
                                   b="{volcano.sh/vgpu-number: '2', volcano.sh/vgpu-memory: '1000'}"))
    vgpu_node(state, "g0", cards=3)
    [binding] = cycle(SPREAD_LOCKED, state, pure).bindings
    written = notes(state, binding)
    listed = [{"metadata": {"name": "two", "namespace": "ns", "annotations": dict(written)},
               "status": {"phase": "Pending"}}]
    want = [tuple(d.split(",")[0] for d in container.split(":") if d) for container in written[vg.IDS].split(";")
            if container]
    assert [len(cards) for cards in want] == [1, 2]
    for cards in want:
        answer = standin.hami_allocate(listed, "g0")
        assert answer.pod == "ns/two" and answer.cards == cards
        listed[0]["metadata"]["annotations"].update(answer.writes)
    assert listed[0]["metadata"]["annotations"][vg.BIND_PHASE] == "success"
    with pytest.raises(standin.NoCandidate):
        standin.hami_allocate(listed, "g0")


SPREAD_POLICY = {"volcano.sh/vgpu-podgroup-policy": "spread"}


def group(state: ClusterState, name: str, members: int = 1) -> str:
    state.add_podgroup(PodGroup("ns", name, min_member=members, queue="default", phase="Inqueue", uid=f"pg-{name}"))
    return name


@KERNELS
@pytest.mark.parametrize("first, second, cards, both", [
    # Volcano #5049's tests (pkg/scheduler/api/devices/nvidia/vgpu), binpack stacking otherwise
    (SPREAD_POLICY, SPREAD_POLICY, 2, "different"),      # TestSpreadPreventsCoLocation
    ({}, {}, 2, "same"),                                 # TestBinpackAllowsCoLocation
    (SPREAD_POLICY, SPREAD_POLICY, 1, None),             # TestSpreadWithNoRoomFails: the second waits
    ({}, SPREAD_POLICY, 2, "different"),                 # the spreading pod avoids its unannotated sibling's card
    (SPREAD_POLICY, {}, 1, "same"),                      # TestMixedAnnotations: the plain pod is not narrowed
])
def test_podgroup_spread_keeps_a_groups_pods_on_different_cards(pure, first, second, cards, both) -> None:
    state = ClusterState()
    vgpu_node(state, "g0", cards=cards)
    group(state, "job")
    named = {"scheduling.k8s.io/group-name": "job"}     # as Volcano's getPodGroupKey reads the group
    vpod(state, "a", memory=3000, cores=20, annotations={**first, **named}, group="job", creation=1.0)
    vpod(state, "b", memory=3000, cores=20, annotations={**second, **named}, group="job", creation=2.0)
    for _ in range(2):      # one cycle may place them together; a second one must see the first
        decisions = cycle(BINPACK, state, pure)
        for binding in decisions.bindings:
            state.pods[binding.pod].annotations.update(notes(state, binding))
        state.apply(decisions)
    held = {k: state.pods[k].annotations.get(vg.IDS, "").split(",")[0] for k in ("ns/a", "ns/b")}
    if both is None:
        assert held["ns/a"] and not held["ns/b"]
        assert "vgpu-podgroup-policy=spread" in reason(decisions, "ns/b")
    else:
        assert all(held.values())
        assert (held["ns/a"] == held["ns/b"]) is (both == "same")


@KERNELS
def test_podgroup_spread_lets_other_groups_share_a_card(pure) -> None:
    """TestSpreadDifferentGroupsCanShare."""
    state = ClusterState()
    vgpu_node(state, "g0", cards=1)
    for name in ("x", "y"):
        group(state, name)
        vpod(state, name, memory=3000, annotations={**SPREAD_POLICY, "scheduling.volcano.sh/group-name": name},
             group=name)
    decisions = cycle(BINPACK, state, pure)
    assert placements(decisions) == {"ns/x": "g0", "ns/y": "g0"}


@KERNELS
def test_a_podgroup_policy_volcano_does_not_know_waits_naming_it(pure) -> None:
    state = ClusterState()
    vgpu_node(state, "g0")
    vpod(state, "p", memory=100, annotations={"volcano.sh/vgpu-podgroup-policy": "pack"})
    decisions = cycle(BINPACK, state, pure)
    assert not decisions.bindings
    [why] = decisions.reasons_for("ns/p")
    assert why.kind == "unsupported" and "vgpu-podgroup-policy" in why.details["field"]
