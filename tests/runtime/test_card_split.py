"""Split card memory (runtime/engine/cards.py split_card_memory): a node's free card memory that no
waiting pod uses because it is split over cards. Table-driven, each case's figures worked out by
hand in its comment: Volcano's GPU share (volcano.sh/gpu-memory in MiB over gpu-number cards) and
HAMi vGPU (cards from volcano.sh/node-vgpu-register)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from runtime.cluster.model import ClusterState, Toleration
from runtime.engine.cards import card_arrays, split_card_memory
from runtime.engine.devices import UNHEALTHY_GPU_IDS
from runtime.engine.snapshot import build_snapshot
from tests.runtime.runtime_helpers import GiB, node, pod, policy

NUMBER, MEMORY = "volcano.sh/gpu-number", "volcano.sh/gpu-memory"
VGPU, VMEM, VPCT = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-memory-percentage"
TIERS = "tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin deviceshare {\n    %s\n  }\n}\n"
SHARE, VGPU_PLAN = policy(TIERS % "gpu_sharing = true"), policy(TIERS % "vgpu = true")
MiB = 1024


@dataclass(frozen=True)
class Case:
    name: str
    held: tuple[int, ...]                       # GiB held on each card of g3 (16Gi cards)
    asks: tuple[int, ...]                       # GiB of each waiting pod
    expected: tuple[int, int] | None            # (GiB free split, GiB of the ask named) or None
    unhealthy: str | None = None
    taint: bool = False                         # g3 tainted NoSchedule; the waiting pods do not tolerate it
    tolerate: bool = False
    selector: dict = field(default_factory=dict)
    cordoned: bool = False


CASES = [
    # 8+6+4+0 = 18Gi free, 10Gi fits no card but 18 >= 10: all 18Gi split, the 10Gi ask named.
    Case("split", (8, 10, 12, 16), (10,), (18, 10)),
    # The largest split ask is named: 10 and 12 both fit 18Gi and no card.
    Case("largest ask named", (8, 10, 12, 16), (10, 12), (18, 12)),
    # A 4Gi pod fits card 0 or 1 now: the node's free memory is of use, nothing split.
    Case("another pod fits now", (8, 10, 12, 16), (10, 4), None),
    # 20Gi: no 16Gi card holds it even empty; not split memory, only too small cards.
    Case("no card big enough", (8, 10, 12, 16), (20,), None),
    # 14+0+0+0 free... 2+16+16+16 held: 14Gi free on one card, the 10Gi ask fits it: nothing split.
    Case("fits one card", (2, 16, 16, 16), (10,), None),
    # 4+4+0+0 = 8Gi free < 10Gi: the memory would not hold the pod even on one card.
    Case("too little in all", (12, 12, 16, 16), (10,), None),
    # Card 3 idle but unhealthy (volcano-sh/devices' list): 8+6+4 = 18Gi, its 16Gi never free.
    Case("unhealthy card left out", (8, 10, 12, 0), (10,), (18, 10), unhealthy="3"),
    # The pods do not tolerate g3's taint: no ask for g3.
    Case("taint keeps the pod off", (8, 10, 12, 16), (10,), None, taint=True),
    Case("a tolerated taint", (8, 10, 12, 16), (10,), (18, 10), taint=True, tolerate=True),
    # The pods select a zone g3 is not in.
    Case("selector keeps the pod off", (8, 10, 12, 16), (10,), None, selector={"zone": "b"}),
    Case("cordoned node", (8, 10, 12, 16), (10,), None, cordoned=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_volcano_gpu_share(case: Case) -> None:
    state = ClusterState()
    g3 = node(state, "g3", cpu=64000, memory=256 * GiB, labels={"zone": "a"},
              taints=[("gpu", "yes", "NoSchedule")] if case.taint else (),
              **{NUMBER: 4, MEMORY: 4 * 16 * MiB})
    g3.unschedulable = case.cordoned
    if case.unhealthy is not None:
        g3.annotations[UNHEALTHY_GPU_IDS] = case.unhealthy
    for card, gib in enumerate(case.held):
        if gib:
            p = pod(state, f"h{card}", node_name="g3", requests={MEMORY: gib * MiB})
            p.annotations["volcano.sh/gpu-index"] = str(card)
    waiting = []
    for i, gib in enumerate(case.asks):
        p = pod(state, f"w{i}", requests={MEMORY: gib * MiB},
                tolerations=(Toleration("gpu", "Equal", "yes", "NoSchedule"),) if case.tolerate else (),
                node_selector=dict(case.selector))
        waiting.append(p)
    snap = build_snapshot(state, SHARE)
    found = split_card_memory(snap.node_names, state.nodes, snap.devices, snap.vgpu, waiting)
    if case.expected is None:
        assert found == []
        return
    (g,) = found
    assert (g.node, g.device, g.free, g.ask) == ("g3", NUMBER, case.expected[0] * GiB, case.expected[1] * GiB)
    free = [0 if (case.unhealthy == str(c)) else 16 - h for c, h in enumerate(case.held)]
    assert list(g.cards_free) == [f * GiB for f in free]


REGISTER = "".join(f"GPU-{c},4,16384,NVIDIA-A100,true,hami-core:" for c in range(2))


@pytest.mark.parametrize("asks, expected", [
    # Cards hold 10Gi and 10Gi: 6+6 = 12Gi free; an 8Gi vGPU fits neither, 12 >= 8: all 12Gi split.
    (({VGPU: 1, VMEM: 8 * MiB},), (12, 8)),
    # Two cards of 6Gi each fit now: nothing split.
    (({VGPU: 2, VMEM: 6 * MiB},), None),
    # A percentage ask's size depends on the card: left out.
    (({VGPU: 1, VPCT: 50},), None),
])
def test_hami_vgpu(asks, expected) -> None:
    state = ClusterState()
    v1 = node(state, "v1", cpu=64000, memory=256 * GiB, **{VGPU: 8, VMEM: 32 * MiB, "volcano.sh/vgpu-cores": 200})
    v1.annotations["volcano.sh/node-vgpu-register"] = REGISTER
    for c in range(2):
        p = pod(state, f"h{c}", node_name="v1", requests={VGPU: 1, VMEM: 10 * MiB})
        p.annotations["volcano.sh/vgpu-ids-new"] = f"GPU-{c},NVIDIA,{10 * MiB},0:"
    waiting = [pod(state, f"w{i}", requests=requests) for i, requests in enumerate(asks)]
    snap = build_snapshot(state, VGPU_PLAN)
    (arrays,) = card_arrays(snap.devices, snap.vgpu)
    assert arrays.free.tolist() == [6 * GiB, 6 * GiB]
    found = split_card_memory(snap.node_names, state.nodes, snap.devices, snap.vgpu, waiting)
    if expected is None:
        assert found == []
    else:
        (v,) = found
        assert (v.node, v.device, v.free, v.ask) == ("v1", VGPU, expected[0] * GiB, expected[1] * GiB)
