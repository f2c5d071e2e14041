"""Invariants over generated clusters, every action on: capacity, cards, capability, gangs,
victims, guarantees."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.model import ClusterState, PodGroup
from runtime.engine.snapshot import device_plans
from runtime_helpers import GiB, STANDARD_TIERS, cycle, node, pod, policy

ALL_ACTIONS = "enqueue, allocate, preempt, reclaim, backfill"
PLAN = policy(STANDARD_TIERS.replace("plugin binpack", "plugin binpack\n  plugin deviceshare") + """
queue q1 { weight = 2 capability = { cpu: 6 } }
queue q2 { weight = 1 guarantee = { cpu: 2 } reclaimable = true }
device "nvidia.com/gpu" { sharing = memory card_memory = 16Gi slice = 4Gi memory_resource = "example.com/gpu-mem" }
""", actions=ALL_ACTIONS)
MEM = "example.com/gpu-mem"
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clusters(draw):
    """Small clusters, mostly full of running jobs (some partly placed), with pending gangs of
    the same or higher priority: preempt and reclaim have work to do."""
    state = ClusterState()
    n_nodes = draw(st.integers(1, 5))
    for i in range(n_nodes):
        node(state, f"n{i}", cpu=draw(st.sampled_from([1000, 2000, 4000, 8000])), memory=16 * GiB,
             **({"nvidia.com/gpu": draw(st.integers(0, 2))}))
    free = {n: dict(state.nodes[n].allocatable) for n in state.nodes}
    for j in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 5))
        min_member = draw(st.integers(1, size))
        queue = draw(st.sampled_from(["q1", "q2", "default"]))
        running = draw(st.integers(0, 2)) > 0
        priority = draw(st.integers(0, 2)) if running else draw(st.integers(0, 4))
        cpu = draw(st.sampled_from([0, 500, 1000, 2000, 3000]))
        gpu_mem = draw(st.sampled_from([0, 0, 0, 4 * GiB, 8 * GiB]))
        phase = "Running" if running else draw(st.sampled_from(["Pending", "Inqueue"]))
        state.add_podgroup(PodGroup("ns", f"j{j}", min_member=min_member, queue=queue, phase=phase,
                                    uid=f"pg{j}", creation=float(j)))
        order = draw(st.permutations(sorted(free)))
        for t in range(size):
            where = None
            if running and not gpu_mem and draw(st.integers(0, 4)) > 0:
                where = next((n for n in order if free[n]["cpu"] >= cpu and free[n]["pods"] >= 1), None)
                if where:
                    free[where]["cpu"] -= cpu
                    free[where]["pods"] -= 1
            pod(state, f"j{j}-{t}", cpu=cpu, memory=GiB if cpu else 0, group=f"j{j}", priority=priority,
                node_name=where, creation=float(j), requests={MEM: gpu_mem} if gpu_mem else {})
    return state


def ready_count(state: ClusterState, group: str) -> int:
    return sum(1 for p in state.pods.values() if p.group == group and p.node_name and not p.releasing)


def check_cycle(state: ClusterState, decisions) -> None:
    before_ready = {g.name: ready_count(state, g.name) for g in state.podgroups.values()}
    before_queue = queue_cpu(state)
    by_pod = {p.key: p for p in state.pods.values()}
    state.apply(decisions)
    # No node beyond allocatable (releasing pods still hold their room).
    for name, n in state.nodes.items():
        pods = [p for p in state.pods.values() if p.node_name == name and not p.terminal]
        for res, cap in n.allocatable.items():
            if res in ("nvidia.com/gpu",):
                continue
            used = len(pods) if res == "pods" else sum(p.requests.get(res, 0) for p in pods)
            assert used <= cap, (name, res, used, cap)
        # No card beyond its memory.
        per_card: dict[int, int] = {}
        for p in pods:
            for card in p.devices.get("nvidia.com/gpu", ()):
                per_card[card] = per_card.get(card, 0) + -(-p.requests.get(MEM, 0) // (4 * GiB)) * 4 * GiB
        assert all(v <= 16 * GiB for v in per_card.values()), per_card
    # Gangs all-or-nothing: a job that got bindings is at its minimum.
    bound_groups = {by_pod[b.pod].group for b in decisions.bindings}
    for g in bound_groups:
        group = state.podgroups[f"ns/{g}"]
        assert ready_count(state, g) >= group.min_member, g
    # Victims: lower priority than their preemptor; no gang below its minimum.
    for e in decisions.evictions:
        victim = by_pod[e.pod]
        if e.reason.kind == "preemption":
            preemptor = by_pod[e.reason.details["preemptor"]]
            assert state.pod_priority(victim) < state.pod_priority(preemptor)
    for g, was in before_ready.items():
        group = state.podgroups[f"ns/{g}"]
        if group.min_member > 1 and was >= group.min_member:
            assert ready_count(state, g) >= group.min_member, g
    # No queue beyond capability (unless it already was).
    after = queue_cpu(state)
    assert after.get("q1", 0) <= max(6000, before_queue.get("q1", 0))


def queue_cpu(state: ClusterState) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in state.pods.values():
        if p.node_name and not p.releasing and not p.terminal and p.group:
            q = state.podgroups[f"ns/{p.group}"].queue
            out[q] = out.get(q, 0) + p.requests.get("cpu", 0)
    return out


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@SETTINGS
@given(clusters(), st.booleans(), st.data())
def test_invariants_hold_over_cycles(state, pure, data):
    assert device_plans(PLAN)
    for _ in range(4):
        decisions = cycle(PLAN, state, pure)
        check_cycle(state, decisions)
        state.advance()
        running = sorted(k for k, p in state.pods.items() if p.node_name and not p.terminal)
        if running and data.draw(st.booleans()):
            state.complete_pod(data.draw(st.sampled_from(running)))     # frees room, still counts


@SETTINGS
@given(clusters(), st.data())
def test_compiled_and_python_paths_decide_alike(state, data):
    """The compiled kernels and their pure-Python twins, through whole cycles of every action."""
    for _ in range(3):
        compiled, python = cycle(PLAN, state, False), cycle(PLAN, state, True)
        assert compiled.to_dict() == python.to_dict()
        assert compiled.pipelined == python.pipelined
        state.apply(compiled)
        state.advance()
        running = sorted(k for k, p in state.pods.items() if p.node_name and not p.terminal)
        if running and data.draw(st.booleans()):
            state.complete_pod(data.draw(st.sampled_from(running)))


def q2_holds(state: ClusterState, node_name: str, cpus: int) -> None:
    """q2 runs `cpus` one-cpu pods on the node: its guaranteed share, so q1 may have the rest."""
    state.add_podgroup(PodGroup("ns", "q2-job", min_member=1, queue="q2", phase="Running", uid="pg-q2"))
    for t in range(cpus):
        pod(state, f"q2-job-{t}", cpu=1000, memory=GiB, group="q2-job", priority=0, node_name=node_name)


def test_preemptor_gang_is_never_bound_below_its_minimum(pure):
    """Regression (found by the property above): allocate may give q1 only one more cpu (its
    deserved share is 4 of 6: q2's guarantee takes 2), too few for the gang j1; preempt then
    found idle room for j1-0 and bound it while j1-1 only got a reservation behind an eviction:
    1 of minMember 2 ready. Preempt now only reserves (pipelines) and never binds a gang that
    is not whole; it binds whole once the victim has left."""
    state = ClusterState()
    node(state, "n0", cpu=4000, memory=16 * GiB)
    node(state, "n1", cpu=2000, memory=16 * GiB)
    q2_holds(state, "n1", 2)
    state.add_podgroup(PodGroup("ns", "j0", min_member=1, queue="q1", phase="Running", uid="pg0"))
    for t in range(3):
        pod(state, f"j0-{t}", cpu=1000, memory=GiB, group="j0", priority=0, node_name="n0")
    state.add_podgroup(PodGroup("ns", "j1", min_member=2, queue="q1", phase="Pending", uid="pg1", creation=1.0))
    for t in range(2):
        pod(state, f"j1-{t}", cpu=1000, memory=GiB, group="j1", priority=1, creation=1.0)
    first = cycle(PLAN, state, pure)
    assert first.bindings == []
    assert first.pipelined == {"ns/j1-0": "n0", "ns/j1-1": "n0"}
    assert [e.pod for e in first.evictions] == ["ns/j0-0"]
    check_cycle(state, first)
    state.advance()
    second = cycle(PLAN, state, pure)
    assert sorted(b.pod for b in second.bindings) == ["ns/j1-0", "ns/j1-1"]
    assert second.evictions == []
    check_cycle(state, second)


def test_preempt_never_takes_a_victim_of_equal_priority(pure):
    """Regression (found by the property above): priority refuses the equal-priority victim,
    and drf in the next tier used to let it through (Volcano's tier rule)."""
    state = ClusterState()
    node(state, "n0", cpu=2000, memory=16 * GiB)
    node(state, "n1", cpu=2000, memory=16 * GiB)
    q2_holds(state, "n1", 2)
    state.add_podgroup(PodGroup("ns", "j0", min_member=1, queue="q1", phase="Running", uid="pg0"))
    for t in range(2):
        pod(state, f"j0-{t}", cpu=1000, memory=GiB, group="j0", priority=0, node_name="n0")
    state.add_podgroup(PodGroup("ns", "j1", min_member=1, queue="q1", phase="Pending", uid="pg1", creation=1.0))
    pod(state, "j1-0", cpu=500, memory=GiB, group="j1", priority=0, creation=1.0)
    assert cycle(PLAN, state, pure).evictions == []
    for t in range(2):
        state.pods[f"ns/j0-{t}"].priority = -1       # now lower: preempt takes one of them
    evicted = [e.pod for e in cycle(PLAN, state, pure).evictions]
    assert len(evicted) == 1 and evicted[0].startswith("ns/j0-")


GUARANTEE_PLAN = policy(STANDARD_TIERS + """
queue big { weight = 8 }
queue small { weight = 1 guarantee = { cpu: 3 } }
""", actions=ALL_ACTIONS)


@SETTINGS
@given(st.integers(4, 10), st.integers(0, 12), st.integers(1, 6), st.booleans())
def test_guarantee_is_honored_while_demand_exists(cpus, big_running, small_pending, pure):
    """One-cpu pods, one-pod jobs: after a few cycles the guaranteed queue holds
    min(guarantee, demand) even when the other queue filled the cluster first."""
    state = ClusterState()
    node(state, "n", cpu=cpus * 1000, memory=64 * GiB)
    for i in range(min(big_running, cpus)):
        state.add_podgroup(PodGroup("ns", f"b{i}", queue="big", phase="Running", uid=f"b{i}"))
        pod(state, f"b{i}", cpu=1000, memory=0, group=f"b{i}", node_name="n")
    for i in range(small_pending):
        state.add_podgroup(PodGroup("ns", f"s{i}", queue="small", phase="Pending", uid=f"s{i}", creation=1.0))
        pod(state, f"s{i}", cpu=1000, memory=0, group=f"s{i}")
    for _ in range(3):
        decisions = cycle(GUARANTEE_PLAN, state, pure)
        state.apply(decisions)
        state.advance()
    assert queue_cpu(state).get("small", 0) >= min(3, small_pending) * 1000
