"""The shuffle action and the rescheduling plugin, on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/actions/shuffle/shuffle_test.go TestShuffle ("select
pods with low priority and evict them": a plugin answering victim with the low-priority pods, and
shuffle evicts exactly those three). Volcano has no test of its rescheduling plugin; the cases
below follow its lowNodeUtilization (pkg/scheduler/plugins/rescheduling) with our differences
(runtime/README.md): utilization is requests over allocatable, and a pod is moved only where the
cycle itself would place it on an underused node, so the next cycle does not move it back. The
simulator runs show it: one move, then nothing, and no eviction repeated."""

from __future__ import annotations

import pytest

from compiler.pipeline import compile_text
from runtime.cluster import decisions as d
from runtime.cluster.model import ClusterState, Node, PodGroup
from runtime.engine.actions import shuffle
from runtime.engine.cycle import collect, open_session, run_cycle
from runtime.engine.session import Options
from runtime.simulation.engine import Limits, simulate
from runtime.simulation.scenarios import scenario_from_documents
from runtime_helpers import GiB, node, pod, policy

T0 = 1_000_000.0


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def test_shuffle_evicts_what_the_victim_plugins_choose(pure):
    """TestShuffle: pods of three groups on two nodes; the fake plugin picks the low-priority ones."""
    state = ClusterState()
    for name in ("node1", "node2"):
        node(state, name, cpu=4000, memory=8 * GiB)
    for group in ("pg1", "pg2", "pg3"):
        state.add_podgroup(PodGroup("test", group, min_member=0, phase="Running", uid=group))
    for name, host, priority, group in (("pod1-1", "node1", 10, "pg1"), ("pod1-2", "node1", 100, "pg1"),
                                        ("pod1-3", "node1", 100, "pg1"), ("pod2-1", "node1", 10, "pg2"),
                                        ("pod2-2", "node2", 100, "pg2"), ("pod3-1", "node2", 10, "pg3"),
                                        ("pod3-2", "node2", 100, "pg3")):
        pod(state, name, ns="test", cpu=1000, memory=2 * 10**9, group=group, node_name=host, priority=priority)
    plan = policy("tier {\n  plugin priority\n  plugin rescheduling\n}\n", actions="allocate, shuffle")
    ssn = open_session(plan, state, Options(pure_python=pure, now=T0))

    def low(candidates: list[int]) -> dict[int, d.Reason]:
        return {t: d.Reason(d.SHUFFLE, "low priority") for t in candidates if ssn.snap.task_priority[t] == 10}

    ssn.register("victim", "fake", low)
    shuffle.run(ssn)
    assert sorted(e.pod for e in collect(ssn).evictions) == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]


def resched_policy(scorer: str = "plugin nodeorder", args: str = "", actions: str = "enqueue, allocate, backfill, "
                   "shuffle") -> object:
    return policy("tier {\n  plugin priority\n  plugin gang\n  plugin conformance\n"
                  "  plugin rescheduling {\n    interval = \"1m\"\n    thresholds = { cpu: 20 }\n"
                  f"    target_thresholds = {{ cpu: 50 }}\n{args}  }}\n}}\n"
                  f"tier {{\n  plugin drf\n  plugin predicates\n  plugin proportion\n  {scorer}\n}}\n", actions=actions)


def crowded(state: ClusterState, pods: int = 3, **kwargs) -> None:
    """Node a holds `pods` one-CPU pods (75% of its CPU with three), node b none."""
    node(state, "a")
    node(state, "b")
    for i in range(pods):
        pod(state, f"p{i}", node_name="a", priority=i, creation=float(i), **kwargs)


def two_cycles(plan, state: ClusterState, pure: bool, later: float = 61.0):
    """The first cycle a plan runs starts its interval (Volcano: the scheduler's start); the second, an
    interval later, runs the strategies."""
    first = run_cycle(plan, state, Options(pure_python=pure, now=T0))
    assert first.evictions == []
    return run_cycle(plan, state, Options(pure_python=pure, now=T0 + later))


def test_low_node_utilization_moves_the_lowest_priority_pod_to_the_underused_node(pure):
    state = ClusterState()
    crowded(state)
    decisions = two_cycles(resched_policy(), state, pure)
    # Node a at 75% CPU (target 50%), node b at 0% (threshold 20%): p0 (lowest priority) goes. A
    # second would leave a and b at 25% each, where a is the cycle's choice again (ties to the lowest
    # name): it would come back, so it stays.
    assert [e.pod for e in decisions.evictions] == ["ns/p0"]
    [eviction] = decisions.evictions
    assert eviction.reason.kind == "shuffle" and eviction.reason.details["to"] == "b"
    assert "node a is above its target utilization" in eviction.reason.message


def test_within_the_interval_nothing_is_evicted(pure):
    state = ClusterState()
    crowded(state)
    assert two_cycles(resched_policy(), state, pure, later=30.0).evictions == []


def test_no_move_the_cycle_would_undo(pure):
    # binpack places on the fullest node that fits: the evicted pod would go back to a.
    state = ClusterState()
    crowded(state)
    assert two_cycles(resched_policy("plugin binpack"), state, pure).evictions == []


@pytest.mark.parametrize("pods", [1, 2], ids=["all nodes underused", "no node overused"])
def test_balanced_enough_clusters_are_left_alone(pods, pure):
    state = ClusterState()
    crowded(state, pods=pods)
    assert two_cycles(resched_policy(), state, pure).evictions == []


def test_offline_only_takes_preemptable_pods(pure):
    state = ClusterState()
    crowded(state)
    state.pods["ns/p2"].annotations["volcano.sh/preemptable"] = "true"
    decisions = two_cycles(resched_policy(args='    strategies = ["offlineOnly", "lowNodeUtilization"]\n'), state, pure)
    assert [e.pod for e in decisions.evictions] == ["ns/p2"]


def test_queues_and_labels_narrow_the_victims(pure):
    state = ClusterState()
    crowded(state)
    state.pods["ns/p1"].labels["tier"] = "batch"
    decisions = two_cycles(resched_policy(args='    labels = { tier: "batch" }\n'), state, pure)
    assert [e.pod for e in decisions.evictions] == ["ns/p1"]
    state = ClusterState()
    crowded(state)
    assert two_cycles(resched_policy(args='    queues = ["other"]\n'), state, pure).evictions == []


def test_a_gang_is_not_taken_below_its_minimum(pure):
    state = ClusterState()
    node(state, "a")
    node(state, "b")
    state.add_podgroup(PodGroup("ns", "gang", min_member=3, phase="Running", uid="pg-g"))
    for i in range(3):
        pod(state, f"g{i}", node_name="a", group="gang")
    assert two_cycles(resched_policy(), state, pure).evictions == []


def test_lint_and_strategies():
    text = ('policy "t" version 1\nactions [enqueue, allocate, shuffle]\ntier {\n  plugin rescheduling {\n'
            '    strategies = ["moreReplicasFirst"]\n  }\n  plugin predicates\n}\n')
    assert not compile_text(text).ok
    no_victims = 'policy "t" version 1\nactions [enqueue, allocate, shuffle]\ntier {\n  plugin predicates\n}\n'
    assert any(d.code == "PD304" for d in compile_text(no_victims).errors)


@pytest.mark.parametrize("scorer, moves", [("plugin nodeorder", 1), ("plugin binpack", 0)],
                         ids=["spread: one move", "binpack: none"])
def test_simulated_rescheduling_moves_once_and_never_back(scorer, moves, pure):
    plan = resched_policy(scorer)
    objects = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}} for name in ("a", "b")]
    objects += [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns"},
                 "spec": {"schedulerName": "volcano", "nodeName": "a", "priority": i,
                          "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
                 "status": {"phase": "Running"}} for i in range(3)]
    scenario = scenario_from_documents(plan, [("snapshot.yaml", {"apiVersion": "v1", "kind": "List", "items": objects})],
                                       [])
    result = simulate(plan, scenario, Limits(until=15 * 60.0), Options(pure_python=pure))
    assert sum(result.evicted.values()) == moves
    assert result.metrics.eviction_audit["repeats"] == 0
    if moves:
        assert result.placements.get("ns/p0") == "b"


def test_an_unschedulable_node_is_never_underused(pure):
    # Volcano's lowThresholdFilter: a cordoned node takes nobody, however empty.
    state = ClusterState()
    crowded(state)
    state.nodes["b"].unschedulable = True
    assert two_cycles(resched_policy(), state, pure).evictions == []


def test_the_most_used_node_goes_first(pure):
    # Node c (4 CPUs) is the only underused one and has room within its 50% target for two one-CPU
    # pods; a (75% CPU) and b (100% CPU) are both overused: b goes first (its newest pods, all of one
    # priority) and takes c's room, so a keeps its pods.
    state = ClusterState()
    for name in ("a", "b", "c"):
        node(state, name)
    for i in range(3):
        pod(state, f"a{i}", node_name="a", priority=5)
    for i in range(4):
        pod(state, f"b{i}", node_name="b", priority=5, creation=float(i))
    decisions = two_cycles(resched_policy(), state, pure)
    assert sorted(e.pod for e in decisions.evictions) == ["ns/b2", "ns/b3"]
    assert all(e.reason.details["to"] == "c" for e in decisions.evictions)


def test_a_pods_threshold_is_compared(pure):
    # Volcano reads the key `pod` and never compares it; here `pods` counts: node a holds 3 of its
    # 4 pod slots (75% > 50%), its CPU well below its target.
    state = ClusterState()
    for name in ("a", "b"):
        state.add_node(Node(name, {"cpu": 64000, "memory": 64 * GiB, "pods": 4}))
    for i in range(3):
        pod(state, f"p{i}", cpu=100, memory=GiB // 8, node_name="a", priority=i)
    plan = policy("tier {\n  plugin priority\n  plugin gang\n  plugin rescheduling {\n    interval = \"1m\"\n"
                  "    thresholds = { pods: 30 }\n    target_thresholds = { pods: 50 }\n  }\n}\n"
                  "tier {\n  plugin predicates\n  plugin proportion\n  plugin nodeorder\n}\n",
                  actions="enqueue, allocate, backfill, shuffle")
    assert [e.pod for e in two_cycles(plan, state, pure).evictions] == ["ns/p0"]


def test_pods_whose_place_rules_decide_by_class_stay(pure):
    # A job with task-topology annotations: where it may go is the stateful rule's answer by task
    # class, which a running pod has not, so it is not moved.
    state = ClusterState()
    node(state, "a")
    node(state, "b")
    state.add_podgroup(PodGroup("ns", "tt", min_member=1, phase="Running", uid="pg-tt",
                                task_topology=(("volcano.sh/task-topology-affinity", "ps,worker"),)))
    for i in range(3):
        pod(state, f"tt-{i}", node_name="a", group="tt")
    assert two_cycles(resched_policy(), state, pure).evictions == []
    # The same pods without the annotation move.
    state.podgroups["ns/tt"].task_topology = ()
    assert len(two_cycles(resched_policy(), state, pure).evictions) == 1


def test_the_simulator_crosses_idle_time_a_shuffle_step_at_a_time():
    from runtime.engine.actions.shuffle import tick_seconds
    assert tick_seconds(resched_policy(), 1.0) == 61.0          # interval 1m, then the next cycle
    assert tick_seconds(resched_policy(actions="enqueue, allocate, preempt, backfill"), 1.0) is None
    both = policy('tier {\n  plugin tdm {\n    revocable_zones = { rz1: "1:00-2:00" }\n    evict_period = "30s"\n'
                  '  }\n  plugin rescheduling\n}\n', actions="enqueue, allocate, shuffle")
    assert tick_seconds(both, 1.0) == 30.0
