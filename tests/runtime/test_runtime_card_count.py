"""A sharing plan's card count is a node resource too (found by the chaos soak, docs/reliability.md).

Shared-GPU pods may ask for `volcano.sh/gpu-number` beside their card memory. The kubelet admits a
pod by the sum of every pod's request for an extended resource against the node's allocatable,
whatever cards the pods share, so the scheduler must not bind more of it to a node than the node
has, even where every card's memory still fits. The checker here sums requests per node on its
own, from the pods' requests and bindings.

Since issue 28, a GPU-sharing pod asking gpu-number beside gpu-memory is not placed at all (no
placement of both is served by volcano-sh/devices; runtime/README.md): it waits naming both.
"""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState
from tests.runtime.runtime_helpers import STANDARD_TIERS, cycle, node, placements, pod, policy

PLAN = policy(STANDARD_TIERS.replace("plugin binpack", "plugin binpack\n  plugin deviceshare {\n    gpu_sharing = true\n  }"))
NUMBER, MEMORY = "volcano.sh/gpu-number", "volcano.sh/gpu-memory"
GPU_NODE = {NUMBER: 4, MEMORY: 65536}


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("count, pods, fit", [
    (2, 3, 0),      # 3 pods of 2 cards: 6 of 4 if all went to one node
    (1, 6, 0),      # 6 pods of 1 card sharing cards: 6 of 4
    (1, 4, 0),
])
def test_a_node_never_gets_more_of_its_card_count_than_it_has(pure, count, pods, fit) -> None:
    state = ClusterState()
    node(state, "g0", cpu=16000, memory=64 << 30, **GPU_NODE)
    # A second GPU node no pod tolerates: in the cluster's totals, never a place.
    node(state, "g1", cpu=16000, memory=64 << 30, taints=[("dedicated", "x", "NoSchedule")], **GPU_NODE)
    for i in range(pods):
        pod(state, f"p{i}", requests={NUMBER: count, MEMORY: 4096})
    decisions = cycle(PLAN, state, pure)
    bound = placements(decisions)
    per_node: dict[str, int] = {}
    for name, where in bound.items():
        per_node[where] = per_node.get(where, 0) + state.pods[name].requests[NUMBER]
    assert all(used <= GPU_NODE[NUMBER] for used in per_node.values()), per_node
    assert len(bound) == fit, bound
    for i in range(pods):
        assert f"{NUMBER} beside {MEMORY}" in " ".join(r.message for r in decisions.reasons_for(f"ns/p{i}"))
