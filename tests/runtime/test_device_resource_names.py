"""Every device resource name Volcano's device code and user guides define, under each way the
policy can turn device sharing on (deviceshare's `gpu_sharing`, `gpu_number`, `vgpu`): a pod asking
one is either placed on named cards (the Binding carries the annotations its device plugin reads)
or waits with a reason naming the resource. Nothing is placed by node totals alone when its device
plugin needs the scheduler's choice, and nothing is ignored (issue 28).

The names, and where Volcano v1.14.1 defines them:
- GPU share / number: volcano.sh/gpu-memory, volcano.sh/gpu-number (pkg/scheduler/api/devices/
  nvidia/gpushare/type.go; how_to_use_gpu_sharing.md, how_to_use_gpu_number.md);
- HAMi vGPU: volcano.sh/vgpu-number, -memory, -memory-percentage, -cores (nvidia/vgpu/type.go,
  config/config.go; how_to_use_volcano_vgpu.md), and MIG as Volcano's vGPU uses it: a node whose
  register says `mig` (nvidia/vgpu/mig.go);
- Ascend vNPU: huawei.com/Ascend310P(-memory) and the chips of how_to_use_vnpu.md's table
  (Ascend910A, 910B2, 910B3, 910B4, 910B4-1 and their -memory) for HAMi's vNPU
  (ascend/hami, config/vnpu.go), huawei.com/npu-core for MindCluster's (ascend/mindcluster).
Resources whose device plugin picks the devices itself stay ordinary extended resources, and
are checked to be placed: nvidia.com/gpu, NVIDIA's MIG devices nvidia.com/mig-<g>g.<mem>gb (mixed
strategy), MindCluster's whole chips (huawei.com/Ascend910).
"""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState
from runtime.engine import devices_vgpu as vg
from runtime.engine.devices import VGPU_RESOURCES
from runtime.kube.binder import device_annotations
from tests.runtime.runtime_helpers import GiB, cycle, node, pod, policy

KERNELS = pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
NUMBER, MEMORY = "volcano.sh/gpu-number", "volcano.sh/gpu-memory"
ASCEND_CHIPS = ("Ascend310P", "Ascend910A", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910B4-1")
ASCEND = {f"huawei.com/{chip}{suffix}": amount for chip in ASCEND_CHIPS
          for suffix, amount in (("", 1), ("-memory", 4096))} | {"huawei.com/npu-core": 8}
ORDINARY = {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.5gb": 1, "nvidia.com/mig-3g.20gb": 1, "huawei.com/Ascend910": 1}
TIERS = "tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin deviceshare {\n    %s = true\n  }\n}\n"
MODES = ("gpu_sharing", "gpu_number", "vgpu")

# What each mode places on cards: the ask, and the resource whose cards the Binding names.
PLACED = {
    "gpu_sharing": [({MEMORY: 4096}, "volcano.sh/gpu-index")],
    "gpu_number": [({NUMBER: 2}, "volcano.sh/gpu-index")],
    "vgpu": [({vg.VGPU_NUMBER: 1, vg.VGPU_MEMORY: 3000}, vg.IDS), ({vg.VGPU_MEMORY: 3000}, vg.IDS),
             ({vg.VGPU_NUMBER: 2}, vg.IDS), ({vg.VGPU_NUMBER: 1, vg.VGPU_PERCENT: 50, vg.VGPU_CORES: 30}, vg.IDS)],
}
# What waits in each mode: the ask, and what its reason must name.
WAITS = {
    "gpu_sharing": [({NUMBER: 1}, NUMBER), ({NUMBER: 2, MEMORY: 4096}, f"{NUMBER} beside {MEMORY}")],
    "gpu_number": [({MEMORY: 4096}, MEMORY), ({NUMBER: 1, MEMORY: 4096}, MEMORY)],
    "vgpu": [({vg.VGPU_CORES: 30}, vg.VGPU_CORES), ({vg.VGPU_PERCENT: 50}, vg.VGPU_PERCENT),
             ({NUMBER: 1}, NUMBER), ({MEMORY: 1024}, MEMORY)],
}
for _mode in ("gpu_sharing", "gpu_number"):
    WAITS[_mode] += [({r: 1}, r) for r in VGPU_RESOURCES if r != vg.VGPU_PERCENT] + [({vg.VGPU_PERCENT: 50}, vg.VGPU_PERCENT)]
for _mode in MODES:
    WAITS[_mode] += [({r: amount}, r) for r, amount in ASCEND.items()]

CASES = [(mode, asks, "placed", what) for mode in MODES for asks, what in PLACED[mode]] + \
        [(mode, asks, "waits", what) for mode in MODES for asks, what in WAITS[mode]] + \
        [(mode, {r: amount}, "ordinary", r) for mode in MODES for r, amount in ORDINARY.items()]


def everything_node(state: ClusterState, mode: str = vg.HAMI_CORE):
    """A node offering every name (so no pod waits for want of room), with a HAMi register."""
    n = node(state, "g0", cpu=64000, memory=256 * GiB,
             **{NUMBER: 4, MEMORY: 4 * 16384, vg.VGPU_NUMBER: 16, vg.VGPU_MEMORY: 4 * 16384, vg.VGPU_CORES: 400,
                vg.VGPU_PERCENT: 400, **{r: 64 * a for r, a in ASCEND.items()},
                **{r: 8 for r in ORDINARY}})
    n.annotations[vg.REGISTER] = "".join(f"GPU-{i},4,16384,NVIDIA-A100,true,{mode}:" for i in range(4))
    return n


@KERNELS
@pytest.mark.parametrize("mode, asks, outcome, what", CASES,
                         ids=[f"{m}-{'+'.join(a)}-{o}" for m, a, o, _ in CASES])
def test_every_device_resource_is_placed_on_named_cards_or_waits_naming_it(pure, mode, asks, outcome, what) -> None:
    state = ClusterState()
    n = everything_node(state)
    pod(state, "p", cpu=100, memory=GiB // 4, requests=asks)
    decisions = cycle(policy(TIERS % mode), state, pure)
    why = " | ".join(r.message for r in decisions.reasons_for("ns/p"))
    if outcome == "waits":
        assert not decisions.bindings, decisions.bindings
        assert what in why, why
        return
    [binding] = decisions.bindings
    if outcome == "ordinary":
        # Its device plugin picks the devices: no card is named, none needed.
        assert not binding.devices
        return
    notes = device_annotations(binding, state.pods["ns/p"], n)
    assert notes.get(what), (binding, notes)
    if what == vg.IDS:
        cards = [d for d in notes[vg.IDS].split(":") if d]
        assert len(cards) == asks.get(vg.VGPU_NUMBER, 1) and notes[vg.ASSIGNED_NODE] == "g0"
    else:
        assert len(notes[what].split(",")) == asks.get(NUMBER, 1)


@KERNELS
def test_vgpu_on_a_mig_node_waits_naming_mig(pure) -> None:
    """Volcano's vGPU in MIG mode (the node's register says `mig`): its geometries are not
    evaluated, so the pod waits, the reason naming the mode."""
    state = ClusterState()
    everything_node(state, vg.MIG)
    pod(state, "p", cpu=100, memory=GiB // 4, requests={vg.VGPU_NUMBER: 1, vg.VGPU_MEMORY: 3000})
    decisions = cycle(policy(TIERS % "vgpu"), state, pure)
    assert not decisions.bindings
    assert "vGPU mode mig" in " | ".join(r.message for r in decisions.reasons_for("ns/p"))


@KERNELS
def test_ascend_names_stay_ordinary_without_device_sharing(pure) -> None:
    """With no device sharing in the policy, an Ascend resource is an ordinary extended resource
    (MindCluster's device plugin in its own mode picks the chips), as in Volcano without vNPU."""
    state = ClusterState()
    everything_node(state)
    pod(state, "p", cpu=100, memory=GiB // 4, requests={"huawei.com/Ascend310P": 1})
    decisions = cycle(policy(TIERS.replace("  plugin deviceshare {\n    %s = true\n  }\n", "")), state, pure)
    assert [b.pod for b in decisions.bindings] == ["ns/p"]


@KERNELS
def test_an_ascend_name_a_device_block_manages_is_placed_on_its_cards(pure) -> None:
    """A policy's own `device` block for an Ascend chip places it card by card (our accounting,
    not HAMi's vNPU): not held."""
    state = ClusterState()
    everything_node(state)
    pod(state, "p", cpu=100, memory=GiB // 4, requests={"huawei.com/Ascend910B3": 2})
    decisions = cycle(policy(TIERS % "gpu_sharing" + 'device "huawei.com/Ascend910B3" { }\n'), state, pure)
    [binding] = decisions.bindings
    assert len(binding.devices["huawei.com/Ascend910B3"]) == 2
