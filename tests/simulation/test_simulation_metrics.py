"""The discrete-event simulation on small deterministic workloads: waits against a hand
computation, utilization, shares by weight, evicted pods requeued, gang violations, and the
idle-skipping clock deciding exactly what a cycle-by-cycle run decides."""

from __future__ import annotations

import pytest

from compiler.pipeline import compile_file, compile_text
from runtime.cluster.decisions import Binding, Decisions
from runtime.simulation.engine import Limits, Simulation, simulate
from runtime.simulation.metrics import jain_index, percentile
from runtime.simulation.scenarios import example_scenario, scenario_from_documents
from sim_helpers import POLICIES, node, pod, podgroup, policy_text, queue

PROPORTION = policy_text("p", "enqueue, allocate, backfill",
                         "  plugin predicates\n  plugin proportion\n  plugin nodeorder")


def run(text: str, snapshot: list[dict], workload: list[dict] = (), **limits):
    compilation = compile_text(text, "test.policy")
    assert compilation.ok, [str(d) for d in compilation.errors]
    plan = compilation.plan
    scenario = scenario_from_documents(plan, [("snapshot", o) for o in snapshot],
                                       [("workload", o) for o in workload] or None)
    return simulate(plan, scenario, Limits(**limits))


@pytest.mark.parametrize("values, p, expected", [
    ([1, 2, 3, 4, 5], 50, 3),                 # rank ceil(2.5) = 3
    (list(range(1, 101)), 95, 95),
    (list(range(1, 101)), 99, 99),
    ([10, 0, 20, 30], 50, 10),                # sorted 0,10,20,30: rank 2
    ([10, 0, 20, 30], 99, 30),
    ([7], 99, 7),
    ([], 50, None),
])
def test_percentile_is_nearest_rank(values, p, expected):
    assert percentile(values, p) == expected


def test_jain_index_bounds():
    assert jain_index([1.0, 1.0, 1.0]) == 1.0
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain_index([]) is None


def test_waits_and_utilization_match_a_hand_computation():
    # One 1-CPU node; three 10-second one-CPU jobs arriving at 0s, 3s and 5s. They run
    # back to back: a at 0 (waits 0), b at 10 (waits 7), c at 20 (waits 15); the node is busy
    # 0-30 of 40 seconds.
    result = run(PROPORTION, [node("n", cpu="1")], [
        pod("a", duration="10s"), pod("b", arrival="3s", duration="10s"), pod("c", arrival="5s", duration="10s")],
        until=40.0)
    assert result.bind_times == {"ns/a": 0.0, "ns/b": 10.0, "ns/c": 20.0}
    q = result.metrics.queues["default"]
    assert q.waits == (0.0, 7.0, 15.0)
    assert (q.wait_p50, q.wait_p95, q.wait_p99, q.wait_max) == (7.0, 15.0, 15.0, 15.0)
    assert (q.jobs, q.started, q.completed, q.waiting) == (3, 3, 3, 0)
    assert result.metrics.utilization["cpu"] == pytest.approx(30 / 40)


def test_a_job_still_waiting_at_the_end_counts_with_its_wait_so_far():
    result = run(PROPORTION, [node("n", cpu="1")], [pod("a", duration="1h"), pod("b", arrival="10s")], until=100.0)
    q = result.metrics.queues["default"]
    assert (q.started, q.waiting) == (1, 1)
    assert q.waits == (0.0, 90.0) and q.wait_p99 == 90.0


def test_two_saturated_queues_share_the_cluster_by_weight():
    # Six CPUs; both queues always have more 1-CPU jobs than they can run.
    jobs = []
    for name in ("a", "b"):
        for i in range(12):
            jobs += [podgroup(f"{name}{i}", queue=name), pod(f"{name}{i}-0", group=f"{name}{i}", memory="64Mi",
                                                              duration="10m")]
    result = run(PROPORTION, [node("n1", cpu="3", memory="64Gi"), node("n2", cpu="3", memory="64Gi"),
                              queue("a", weight=2), queue("b", weight=1)], jobs, until=1800.0)
    queues = result.metrics.queues
    assert queues["a"].share == pytest.approx(4 / 6, abs=1e-3)
    assert queues["b"].share == pytest.approx(2 / 6, abs=1e-3)
    # Proportion's deserved share is the weight's part: each queue gets what it deserves.
    assert queues["a"].deserved == pytest.approx(4 / 6, abs=1e-3)
    assert queues["a"].fairness == pytest.approx(1.0, abs=1e-3)
    assert result.metrics.fairness == pytest.approx(1.0, abs=1e-3)
    assert result.metrics.utilization["cpu"] == pytest.approx(1.0)


def test_evicted_pods_are_recreated_pending_and_run_again():
    text = policy_text("preempt", "enqueue, allocate, preempt",
                       "  plugin predicates\n  plugin proportion\n  plugin nodeorder")
    result = run(text, [node("a", cpu="4")],
                 [pod("low", cpu="4", priority=1, duration="10m"),
                  pod("urgent", cpu="3", priority=100, arrival="1m", duration="5m")])
    assert result.evicted == {"ns/low": 1}
    assert result.metrics.queues["default"].evictions == 1
    assert result.bind_times["ns/urgent"] == 61.0          # evicted at 60s, the victim left at 61s
    # The recreated pod waits for the preemptor to finish, then runs its full ten minutes.
    assert result.job_starts["ns/low"] == 0.0
    assert result.metrics.queues["default"].completed == 2
    assert result.end_time == 61.0 + 300 + 600
    assert result.metrics.gang_violations == ()


@pytest.mark.parametrize("policy", sorted(p.name for p in POLICIES.glob("*.policy")))
def test_the_example_runs_to_the_end_without_gang_violations(policy):
    plan = compile_file(POLICIES / policy).plan
    result = simulate(plan, example_scenario(plan))
    assert result.stopped == "drained"
    assert result.metrics.gang_violations == ()
    assert sum(q.started for q in result.metrics.queues.values()) > 0


def test_a_gang_running_below_its_minimum_is_counted():
    plan = compile_text(PROPORTION, "p.policy").plan
    scenario = scenario_from_documents(plan, [("s", o) for o in (
        node("n"), podgroup("g", min_member=2), pod("g-0", group="g"), pod("g-1", group="g"))], None)
    sim = Simulation(plan, scenario, Limits(cycles=1))

    def half_a_gang(now, index):
        decisions, ssn = Simulation._cycle(sim, now, index)
        return Decisions(bindings=[Binding("ns/g-0", "n")], podgroups=decisions.podgroups), ssn

    sim._cycle = half_a_gang             # a scheduler that breaks the gang rule
    result = sim.run()
    [violation] = result.metrics.gang_violations
    assert (violation.job, violation.running, violation.min_member) == ("ns/g", 1, 2)


def test_skipping_idle_time_decides_what_every_cycle_would():
    snapshot = [node("n1", cpu="2"), node("n2", cpu="2")]
    workload = [pod(f"p{i}", arrival=f"{3 * i}s", duration=f"{5 + i}s") for i in range(8)]
    skipping = run(PROPORTION, snapshot, workload, until=60.0)
    every = run(PROPORTION, snapshot, workload, cycles=61)
    assert every.cycles == 61 and skipping.cycles < 61
    assert skipping.placements == every.placements
    assert skipping.bind_times == every.bind_times
    assert skipping.metrics.queues["default"].waits == every.metrics.queues["default"].waits
    assert skipping.metrics.utilization == pytest.approx(every.metrics.utilization)


def test_fragmentation_counts_free_room_no_waiting_pod_fits():
    # Two 4-CPU nodes, each with 3 CPUs taken: 2 CPUs free in all, but the waiting 2-CPU pod
    # fits neither node, so all free CPU is stranded.
    result = run(PROPORTION, [node("n1"), node("n2"), pod("x", cpu="3", node_name="n1"),
                              pod("y", cpu="3", node_name="n2")], [pod("z", cpu="2")], until=10.0)
    assert result.metrics.fragmentation["cpu"] == pytest.approx(1.0)
    assert "ns/z" in result.waiting_reasons


def test_jobs_running_at_time_zero_are_not_measured():
    result = run(PROPORTION, [node("n", cpu="2"), pod("old", node_name="n", duration="30s")],
                 [pod("new", cpu="2", arrival="10s", duration="10s")])
    q = result.metrics.queues["default"]
    # Only the new pod's job counts: it waited from 10s until the old pod finished at 30s.
    assert (q.jobs, q.started, q.completed, q.waits) == (1, 1, 1, (20.0,))
