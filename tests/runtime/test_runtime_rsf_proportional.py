"""resource-strategy-fit's proportional policy, on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/resource-strategy-fit/proportional_test.go
(Test_checkNodeResourceIsProportional: one task on one node's idle resources), then cycles: CPU
pods stop taking a GPU node's CPU and memory at the reserve its idle GPUs keep, the reserve
follows this cycle's placements and the GPUs running pods hold, GPU pods are not checked. The
cycles are checked by `violations`, which recomputes each node's idle from the input objects and
the bindings, without the engine."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.pipeline import compile_text
from runtime.cluster.model import ClusterState, PodGroup
from runtime.engine.cycle import open_session
from runtime.engine.extension import MASK_FAIL, MASK_PASS
from runtime.engine.plugins.resource_strategy_fit import (
    ProportionalRule, proportional_message, proportional_passing, proportional_ratios,
)
from runtime.engine.session import Options
from runtime_helpers import GiB, cycle, node, placements, pod, policy

GPU = "nvidia.com/gpu"
G = 10 ** 9     # Volcano's "G" quantities, and its memory reserve per unit of ratio


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def rsf_policy(ratios: str) -> object:
    return policy("tier {\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n"
                  f"  plugin resource-strategy-fit {{\n    proportional = true\n{ratios}\n  }}\n}}\n")


# Test_checkNodeResourceIsProportional: (Go case name, task (cpu, memory, gpu), node idle (cpu,
# memory, gpu), passes); gpu ratios cpu 4, memory 4.
CHECK_CASES = [
    ("cpu_task_less_than_reserved_resource", (4, 4 * G, 0), (30, 30 * G, 6), True),
    ("cpu_task_greater_than_reserved_resource", (10, 10 * G, 0), (30, 30 * G, 6), False),
    ("gpu_task_no_proportional_check", (10, 10 * G, 1), (30, 30 * G, 6), True),
    ("cpu_task_less_than_idle_resource", (10, 10 * G, 0), (26, 26 * G, 2), True),
]


@pytest.mark.parametrize("name, task, idle, passes", CHECK_CASES, ids=[c[0] for c in CHECK_CASES])
def test_check_node_resource_is_proportional(name, task, idle, passes, pure):
    # Through a session: the node's allocatable is the Go case's idle; the rule's code on it.
    plan = rsf_policy(f'    proportional_cpu = {{ "{GPU}": 4 }}\n    proportional_memory = {{ "{GPU}": 4 }}')
    state = ClusterState()
    node(state, "n1", cpu=idle[0] * 1000, memory=idle[1], **{GPU: idle[2]})
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "t1", cpu=task[0] * 1000, memory=task[1], group="job", requests={GPU: task[2]})
    ssn = open_session(plan, state, Options(pure_python=pure))
    [rule] = [r for r in ssn.stateful_filters if isinstance(r, ProportionalRule)]
    cid = int(ssn.snap.task_class[0])
    if task[2]:
        assert not rule.filters(cid)        # a task asking the GPU is not checked
    else:
        assert rule.filters(cid)
        assert rule.codes(cid, None).tolist() == [MASK_PASS if passes else MASK_FAIL]
        # And the pure function on Volcano's figures (cpu in millicores, memory in bytes).
        ok = proportional_passing(np.array([[idle[0] * 1000, idle[1], idle[2]]]),
                                  np.array([task[0] * 1000, task[1], task[2]], dtype=np.float64),
                                  np.array([[True]]), 0, 1, [(2, 4.0, 4.0)])
        assert bool(ok[0][0]) == passes


def test_ratios_default_to_one_and_a_negative_one_is_one():
    assert proportional_ratios({"a": 8, "b": -2}, {"a": 4, "c": 0}) == {
        "a": (8.0, 4.0), "b": (1.0, 1.0), "c": (1.0, 0.0)}


# --- cycles, checked independently ------------------------------------------------------

def violations(state: ClusterState, bound: dict[str, str], ratios: dict[str, tuple[float, float]],
               names: list[str]) -> list[str]:
    """Nodes whose idle CPU or memory, after the bindings of CPU-only pods `names` (no GPU pod
    is bound in these cycles, so the last placement's check is the final state's), is below the
    reserve of their idle scarce resources."""
    out = []
    for n in state.nodes.values():
        idle = dict(n.allocatable)
        for p in state.pods.values():
            key = f"{p.namespace}/{p.name}"
            where = p.node_name or bound.get(key)
            if where == n.name:
                for r, v in p.requests.items():
                    idle[r] = idle.get(r, 0) - v
        if not any(bound.get(f"ns/{name}") == n.name for name in names):
            continue
        for r, (cpu, mem) in ratios.items():
            if n.allocatable.get(r, 0) <= 0:
                continue
            if idle["cpu"] < idle.get(r, 0) * cpu * 1000 or idle["memory"] < idle.get(r, 0) * mem * G:
                out.append(f"{n.name}: {r}")
    return out


def test_cpu_pods_stop_at_the_reserve_of_the_idle_gpus(pure):
    # n1: 40 cores, 4 GPUs at 8 cores each: 32 cores kept, so two 3-core pods; n2 has no GPU.
    plan = rsf_policy(f'    proportional_cpu = {{ "{GPU}": 8 }}\n    proportional_memory = {{ "{GPU}": 1 }}')
    state = ClusterState()
    node(state, "n1", cpu=40000, memory=400 * GiB, **{GPU: 4})
    node(state, "n2", cpu=8000, memory=400 * GiB)
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    names = [f"p{i}" for i in range(6)]
    for name in names:
        pod(state, name, cpu=3000, memory=GiB, group="job")
    decisions = cycle(plan, state, pure)
    bound = placements(decisions)
    on = {n: sorted(p for p, where in bound.items() if where == n) for n in ("n1", "n2")}
    assert len(on["n1"]) == 2 and len(on["n2"]) == 2, bound
    assert violations(state, bound, {GPU: (8, 1)}, names) == []
    waiting = [p for p in names if f"ns/{p}" not in bound]
    assert len(waiting) == 2
    for p in waiting:
        assert any(proportional_message(GPU) in r.message for r in decisions.reasons_for(f"ns/{p}"))


def test_memory_reserve_counts_gigabytes_per_unit(pure):
    # 40 GB and 2 GPUs at 16 GB each: 32 GB kept, so two 3 GB pods (a third would leave 31 GB).
    plan = rsf_policy(f'    proportional_cpu = {{ "{GPU}": 0 }}\n    proportional_memory = {{ "{GPU}": 16 }}')
    state = ClusterState()
    node(state, "n1", cpu=100000, memory=40 * G, **{GPU: 2})
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    names = [f"p{i}" for i in range(4)]
    for name in names:
        pod(state, name, cpu=100, memory=3 * G, group="job")
    bound = placements(cycle(plan, state, pure))
    assert len(bound) == 2
    assert violations(state, bound, {GPU: (0, 16)}, names) == []


def test_gpus_running_pods_hold_are_not_idle_and_gpu_pods_are_not_checked(pure):
    # 4 GPUs, 2 held by a running pod: 2 idle at 8 cores = 16 kept of 38 idle, so seven 3-core
    # pods fit; a pod asking a GPU takes 20 cores below the reserve all the same.
    plan = rsf_policy(f'    proportional_cpu = {{ "{GPU}": 8 }}')
    state = ClusterState()
    node(state, "n1", cpu=40000, memory=400 * GiB, **{GPU: 4})
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "running", cpu=2000, memory=GiB, node_name="n1", requests={GPU: 2})
    names = [f"p{i}" for i in range(9)]
    for name in names:
        pod(state, name, cpu=3000, memory=GiB, group="job")
    bound = placements(cycle(plan, state, pure))
    assert len(bound) == 7
    assert violations(state, bound, {GPU: (8, 1)}, names) == []

    state = ClusterState()
    node(state, "n1", cpu=40000, memory=400 * GiB, **{GPU: 4})
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "g", cpu=30000, memory=GiB, group="job", requests={GPU: 1})
    assert placements(cycle(plan, state, pure)) == {"ns/g": "n1"}


def test_off_by_default():
    plan = policy("tier {\n  plugin predicates\n  plugin resource-strategy-fit\n}\n")
    state = ClusterState()
    node(state, "n1", cpu=4000, memory=8 * GiB, **{GPU: 4})
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "p", cpu=3000, memory=GiB, group="job")
    assert placements(cycle(plan, state)) == {"ns/p": "n1"}


@pytest.mark.parametrize("settings, codes", [
    ("    proportional = true\n", {"PD428"}),                               # the switch, no resource
    ('    proportional_cpu = { "nvidia.com/gpu": 8 }\n', {"PD428"}),       # ratios, no switch
    ('    proportional = true\n    proportional_cpu = { "nvidia.com/gpu": 0 }\n', set()),
    ("    sra_weight = 0\n", set()),     # its own weight (10) still scores: no PD406
], ids=["switch only", "ratios only", "both", "sra off"])
def test_lint_of_the_proportional_settings(settings, codes):
    compiled = compile_text('policy "t" version 1\nactions [allocate]\ntier {\n  plugin predicates\n'
                            f"  plugin resource-strategy-fit {{\n{settings}  }}\n}}\n", "t.policy")
    assert compiled.ok
    assert {d.code for d in compiled.diagnostics} & {"PD428", "PD406"} == codes


def test_room_releasing_pods_free_is_a_future_fit_pipelined(pure):
    # 40 cores and 4 GPUs at 8 cores each (32 kept); a leaving pod holds 20. A 5-core pod leaves
    # 15 now (fails) but 35 once it is gone: pipelined there, not bound. A 15-core pod fits neither.
    plan = rsf_policy(f'    proportional_cpu = {{ "{GPU}": 8 }}')
    state = ClusterState()
    node(state, "n1", cpu=40000, memory=400 * GiB, **{GPU: 4})
    leaving = pod(state, "leaving", cpu=20000, memory=GiB, node_name="n1")
    leaving.releasing = True
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "small", cpu=5000, memory=GiB, group="job")
    decisions = cycle(plan, state, pure)
    assert placements(decisions) == {} and decisions.pipelined == {"ns/small": "n1"}

    state = ClusterState()
    node(state, "n1", cpu=40000, memory=400 * GiB, **{GPU: 4})
    pod(state, "leaving", cpu=20000, memory=GiB, node_name="n1").releasing = True
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "big", cpu=15000, memory=GiB, group="job")
    decisions = cycle(plan, state, pure)
    assert placements(decisions) == {} and decisions.pipelined == {}
    assert any(proportional_message(GPU) in r.message for r in decisions.reasons_for("ns/big"))
