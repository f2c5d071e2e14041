"""Device blocks read what the nodes' own device software publishes (issue 28): card model and
memory from NVIDIA GPU Feature Discovery's labels (k8s-device-plugin docs/gpu-feature-discovery:
nvidia.com/gpu.product, nvidia.com/gpu.memory in MiB, nvidia.com/gpu.count; nvidia.com/mig-<type>.*
under MIG's mixed strategy), NUMA groups from HAMi's register annotation (hami.io/node-nvidia-register,
HAMi docs/develop/protocol.md); the device block's `card_memory`/`model_label` and our topology
labels override them; a node saying nothing leaves the pod waiting with a reason that says so.
Every case runs on both kernels; expectations are written from the labels, not from the engine."""

from __future__ import annotations

import json

import pytest

from runtime.cluster.model import ClusterState
from runtime.engine.devices import HAMI_REGISTER, MIB, card_model, gfd_card_memory, hami_numa_groups
from tests.runtime.runtime_helpers import GiB, cycle, node, placements, pod, policy

KERNELS = pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
GPU, GPU_MEM = "nvidia.com/gpu", "example.com/gpu-memory"
TIERS = "tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin deviceshare\n}\n"
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.memory": "40960",
        "nvidia.com/gpu.count": "1"}


def shared(extra: str = "", resource: str = GPU) -> str:
    return (f'device "{resource}" {{\n  sharing = memory\n  slice = 10Gi\n  memory_resource = "{GPU_MEM}"\n'
            f"{extra}}}\n")


def run(pure: bool, device: str, labels: dict, cards: int = 1, ask_gib: int = 30, resource: str = GPU,
        annotations: dict | None = None):
    state = ClusterState()
    n = node(state, "g1", cpu=32000, memory=128 * GiB, labels=labels, **{resource: cards})
    n.annotations.update(annotations or {})
    pod(state, "p", requests={resource: 1, GPU_MEM: ask_gib * GiB})
    decisions = cycle(policy(TIERS + device), state, pure)
    why = " | ".join(r.message for r in decisions.reasons_for("ns/p"))
    return placements(decisions), why


@KERNELS
@pytest.mark.parametrize("case, device, labels, cards, ask, placed, reason", [
    ("GFD memory and model alone", shared('  models = ["NVIDIA-A100-SXM4-40GB"]\n'), A100, 1, 30, True, None),
    ("GFD memory bounds the share", shared(), A100, 1, 50, False, "the largest card has 40Gi"),
    ("card_memory overrides GFD", shared("  card_memory = 20Gi\n"), A100, 1, 30, False, "the largest card has 20Gi"),
    ("card_memory overrides GFD (fits)", shared("  card_memory = 80Gi\n"), A100, 1, 50, True, None),
    ("our model label wins", shared('  models = ["H100"]\n  model_label = "example.com/model"\n'),
     {**A100, "example.com/model": "H100"}, 1, 10, True, None),
    ("our model label wins (refuses)", shared('  models = ["NVIDIA-A100-SXM4-40GB"]\n'
                                              '  model_label = "example.com/model"\n'),
     {**A100, "example.com/model": "H100"}, 1, 10, False, "of model"),
    ("GFD product when our label is absent", shared('  models = ["NVIDIA-A100-SXM4-40GB"]\n'
                                                    '  model_label = "example.com/model"\n'), A100, 1, 10, True, None),
    ("no memory said anywhere", shared(), {}, 1, 10, False, "did not say how much memory a nvidia.com/gpu card has"),
    ("no model said anywhere", shared('  card_memory = 40Gi\n  models = ["H100"]\n'), {}, 1, 10, False,
     "did not name their nvidia.com/gpu card model (no label nvidia.com/gpu.product)"),
    # Time-slicing: 4 replicas of one 40 GiB card are advertised; each holds a quarter.
    ("time-slicing replicas split a card", shared(), A100, 4, 20, False, "the largest card has 10Gi"),
])
def test_card_facts_from_labels(pure, case, device, labels, cards, ask, placed, reason) -> None:
    bound, why = run(pure, device, labels, cards, ask)
    assert (bound.get("ns/p") == "g1") is placed, (case, why)
    if reason:
        assert reason in why, (case, why)


@KERNELS
def test_mig_mixed_device_type_reads_its_own_labels(pure) -> None:
    mig = "nvidia.com/mig-3g.20gb"
    labels = {"nvidia.com/mig.strategy": "mixed", f"{mig}.count": "2", f"{mig}.memory": "20096",
              **A100}
    bound, why = run(pure, shared(resource=mig), labels, cards=2, ask_gib=10, resource=mig)
    assert bound == {"ns/p": "g1"}, why
    bound, why = run(pure, shared(resource=mig), labels, cards=2, ask_gib=30, resource=mig)
    assert not bound and "the largest card has 20096Mi" in why, why


def _hami(numa: list[int]) -> str:
    return "".join(f"GPU-{i},10,40960,100,NVIDIA-A100,{n},true:" for i, n in enumerate(numa))


@KERNELS
@pytest.mark.parametrize("case, labels, annotations, cards", [
    ("no topology known: lowest cards", {}, {}, (0, 1)),
    ("HAMi register's NUMA groups", {}, {HAMI_REGISTER: _hami([0, 1, 1, 0])}, (0, 3)),
    ("HAMi register as JSON", {}, {HAMI_REGISTER: json.dumps([{"id": f"GPU-{i}", "numa": n}
                                                              for i, n in enumerate([1, 0, 0, 1])])}, (0, 3)),
    ("our label overrides HAMi", {"policydsl.io/gpu-numa": "0.2_1.3"}, {HAMI_REGISTER: _hami([0, 1, 1, 0])}, (0, 2)),
])
def test_numa_groups_from_hami_register(pure, case, labels, annotations, cards) -> None:
    state = ClusterState()
    n = node(state, "g1", cpu=32000, memory=128 * GiB, labels=labels, **{GPU: 4})
    n.annotations.update(annotations)
    pod(state, "p", requests={GPU: 2})
    decisions = cycle(policy(TIERS + f'device "{GPU}" {{\n  topology = numa\n}}\n'), state, pure)
    got = {b.pod: b.devices.get(GPU) for b in decisions.bindings}
    assert got == {"ns/p": cards}, case


@pytest.mark.parametrize("labels, resource, advertised, expected", [
    (A100, GPU, 1, 40960 * MIB),
    (A100, GPU, 4, 10240 * MIB),                     # time-slicing replicas
    (A100, "amd.com/gpu", 1, None),                  # GFD describes NVIDIA's cards only
    ({"nvidia.com/gpu.memory": "n/a"}, GPU, 1, None),
    ({"nvidia.com/gpu.memory": "0"}, GPU, 1, None),
    ({"nvidia.com/mig-1g.5gb.memory": "4864"}, "nvidia.com/mig-1g.5gb", 7, 4864 * MIB),
])
def test_gfd_card_memory(labels, resource, advertised, expected) -> None:
    assert gfd_card_memory(labels, resource, advertised) == expected


def test_card_model_and_numa_parsing() -> None:
    assert card_model({"x/model": "H100", "nvidia.com/gpu.product": "A100"}, "x/model") == "H100"
    assert card_model({"nvidia.com/gpu.product": "A100"}, "x/model") == "A100"
    assert card_model({}, "nvidia.com/gpu.product") is None
    assert hami_numa_groups({HAMI_REGISTER: "GPU-a,10,1,100,T,0,true:GPU-b,10,1,100,T,x,true:"}) == {0: 0}
    assert hami_numa_groups({HAMI_REGISTER: "[not json"}) == {}
    assert hami_numa_groups({HAMI_REGISTER: "short,1,2:"}) == {}
