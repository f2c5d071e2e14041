"""Queue shares of vGPU memory and cores (issue 28): HAMi's device plugin charges a vGPU pod per
card (volcano-vgpu-device-plugin#80, volcano#4168: Volcano's queues counted less than that), so a
pod whose per-card charge differs from its request waits in a queue that bounds the resource,
naming it, never passes a share it would break; pods whose charge is their request, and queues
that do not bound vGPU, are placed as before. Both kernels."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup
from runtime.engine import devices_vgpu as vg
from tests.runtime.runtime_helpers import GiB, cycle, node, placements, pod, policy

KERNELS = pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
TIERS = ("tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin capacity\n"
         "  plugin deviceshare {\n    vgpu = true\n  }\n}\n")


def run(pure: bool, queue_body: str, requests: dict[str, int]):
    state = ClusterState()
    n = node(state, "g1", cpu=64000, memory=256 * GiB,
             **{vg.VGPU_NUMBER: 8, vg.VGPU_MEMORY: 2 * 16384, vg.VGPU_CORES: 200})
    n.annotations[vg.REGISTER] = "".join(f"GPU-{i},4,16384,NVIDIA-A100,true,hami-core:" for i in range(2))
    state.add_podgroup(PodGroup("ns", "j", min_member=1, queue="team", phase="Inqueue", uid="pg-j"))
    pod(state, "p", cpu=100, memory=GiB, group="j", requests=requests)
    decisions = cycle(policy(TIERS + f"queue team {{\n{queue_body}\n}}\n"), state, pure)
    return placements(decisions), " | ".join(r.message for r in decisions.reasons_for("ns/p"))


MEM_CAP = '  capability = { cpu: 64, "volcano.sh/vgpu-memory": 100000, "volcano.sh/vgpu-number": 16 }'
CORE_CAP = '  capability = { cpu: 64, "volcano.sh/vgpu-cores": 400, "volcano.sh/vgpu-number": 16 }'
NO_VGPU = "  capability = { cpu: 64 }"


@KERNELS
@pytest.mark.parametrize("case, queue_body, requests, placed, named", [
    ("one card: charge is the ask", MEM_CAP, {vg.VGPU_NUMBER: 1, vg.VGPU_MEMORY: 1000}, True, None),
    ("two cards of memory in a memory-bounded queue", MEM_CAP, {vg.VGPU_NUMBER: 2, vg.VGPU_MEMORY: 1000}, False,
     "charges 2 x 1000 MiB of volcano.sh/vgpu-memory, but queue team's capability"),
    ("whole card in a memory-bounded queue", MEM_CAP, {vg.VGPU_NUMBER: 1}, False, "(whole cards)"),
    ("percentage in a memory-bounded queue", MEM_CAP, {vg.VGPU_NUMBER: 1, vg.VGPU_PERCENT: 50}, False, "(50% of each)"),
    ("two cards of cores in a cores-bounded queue", CORE_CAP, {vg.VGPU_NUMBER: 2, vg.VGPU_MEMORY: 1000,
                                                              vg.VGPU_CORES: 30}, False, "2 x 30% of a card's cores"),
    ("two cards of memory, only cores bounded", CORE_CAP, {vg.VGPU_NUMBER: 2, vg.VGPU_MEMORY: 1000}, True, None),
    ("guarantee names the memory", '  guarantee = { "volcano.sh/vgpu-memory": 1000 }',
     {vg.VGPU_NUMBER: 2, vg.VGPU_MEMORY: 1000}, False, "queue team's guarantee names volcano.sh/vgpu-memory"),
    ("queue bounds no vGPU", NO_VGPU, {vg.VGPU_NUMBER: 2, vg.VGPU_MEMORY: 1000, vg.VGPU_CORES: 30}, True, None),
])
def test_a_per_card_charge_a_queue_would_count_short_waits_naming_it(pure, case, queue_body, requests, placed,
                                                                     named) -> None:
    bound, why = run(pure, queue_body, requests)
    assert (bound.get("ns/p") == "g1") is placed, (case, why)
    if named:
        assert named in why and "not evaluated yet" in why, (case, why)


@KERNELS
@pytest.mark.parametrize("containers, placed", [
    # one card each: the plugin charges each container its ask, which sums to the pod's requests
    (({vg.VGPU_NUMBER: 1, vg.VGPU_MEMORY: 3000}, {vg.VGPU_NUMBER: 1, vg.VGPU_MEMORY: 1000}), True),
    # the second container's two cards are charged 2 x 1000 MiB: the queue would count it short
    (({vg.VGPU_NUMBER: 1, vg.VGPU_MEMORY: 3000}, {vg.VGPU_NUMBER: 2, vg.VGPU_MEMORY: 1000}), False),
])
def test_a_multi_container_pod_is_charged_container_by_container(pure, containers, placed) -> None:
    state = ClusterState()
    n = node(state, "g1", cpu=64000, memory=256 * GiB,
             **{vg.VGPU_NUMBER: 8, vg.VGPU_MEMORY: 2 * 16384, vg.VGPU_CORES: 200})
    n.annotations[vg.REGISTER] = "".join(f"GPU-{i},4,16384,NVIDIA-A100,true,hami-core:" for i in range(2))
    state.add_podgroup(PodGroup("ns", "j", min_member=1, queue="team", phase="Inqueue", uid="pg-j"))
    summed = {r: sum(c.get(r, 0) for c in containers) for r in (vg.VGPU_NUMBER, vg.VGPU_MEMORY)}
    pod(state, "p", cpu=100, memory=GiB, group="j", requests=summed).vgpu_containers = containers
    locked = TIERS.replace("vgpu = true", "vgpu = true\n    node_lock = true")   # multi-container vGPU needs it
    decisions = cycle(policy(locked + f"queue team {{\n{MEM_CAP}\n}}\n"), state, pure)
    assert (placements(decisions).get("ns/p") == "g1") is placed
    if not placed:
        assert "2 x 1000 MiB" in " | ".join(r.message for r in decisions.reasons_for("ns/p"))
