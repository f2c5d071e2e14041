"""preempt between the tasks of one job (Volcano v1.14.1 pkg/scheduler/actions/preempt/preempt.go,
Execute's "Preemption between Task within Job" phase): a job starving at the action's start then
lets each pending task, in task order, evict running tasks of the same job that the preemptable
plugins allow — priority: a lower task priority (plugins/priority preemptableFn, the same-job
branch); gang: the job stays above its minimum (plugins/gang preemptableFn counts the victim's own
job); conformance — and pipelines it in their room. Which jobs are starving is Session.JobStarving's
answer: with gang's jobStarvingFn on (occupied < minAvailable) a job at or above its minimum is not,
so under Volcano's default tiers a job replaces its own tasks only where gang's job_starving is off
(or gang is not in the policy). v1.14.1's preempt_test.go has no same-job case; these follow the
action's code and those plugins' functions, on both kernels. Then the simulator: the eviction buys
its beneficiary, once (the eviction audit)."""

from __future__ import annotations

import pytest

from compiler.pipeline import compile_text
from runtime.cluster.model import PREEMPT_NEVER, ClusterState, PodGroup
from runtime.engine.cycle import run_cycle
from runtime.engine.session import Options
from runtime.simulation.engine import Limits, simulate
from runtime.simulation.scenarios import scenario_from_documents
from runtime_helpers import node, pod, policy

# Volcano's default tiers, gang's job_starving off (else a job at its minimum is not starving).
TIERS = ("tier {\n  plugin priority\n  plugin gang {\n    enable_job_starving = false\n  }\n  plugin conformance\n}\n"
         "tier {\n  plugin drf\n  plugin predicates\n  plugin proportion\n  plugin nodeorder\n}\n")
DEFAULT_TIERS = TIERS.replace(" {\n    enable_job_starving = false\n  }", "")
ACTIONS = "enqueue, allocate, preempt, backfill"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def job(min_member: int = 1, low: int = 10, high: int = 100, *, victim_annotations=None, never: bool = False,
        running: int = 2) -> ClusterState:
    """One job on a 2-CPU node: `running` 1-CPU tasks of priority `low`, one pending 1-CPU task of `high`."""
    state = ClusterState()
    node(state, "n1", cpu=2000)
    state.add_podgroup(PodGroup("ns", "job", min_member=min_member, phase="Running", uid="pg"))
    for i in range(running):
        pod(state, f"worker-{i}", cpu=1000, priority=low, group="job", node_name="n1", creation=float(i),
            annotations=dict(victim_annotations or {}))
    pod(state, "master", cpu=1000, priority=high, group="job", creation=10.0)
    if never:
        state.pods["ns/master"].preemption_policy = PREEMPT_NEVER
    return state


def run(state: ClusterState, pure: bool, actions: str = ACTIONS, tiers: str = TIERS):
    return run_cycle(policy(tiers, actions=actions), state, Options(pure_python=pure))


def test_a_high_priority_task_evicts_a_lower_one_of_its_own_job(pure):
    decisions = run(job(), pure)
    [eviction] = decisions.evictions
    assert eviction.pod == "ns/worker-1"        # the victim order: the latest created of the lowest priority
    assert eviction.reason.message == "preempted by ns/master of its own job (priority 100)"
    assert eviction.reason.details == {"preemptor": "ns/master"}
    assert decisions.pipelined == {"ns/master": "n1"} and decisions.bindings == []


def test_without_the_preempt_action_nothing_is_evicted(pure):
    assert run(job(), pure, actions="enqueue, allocate, backfill").evictions == []


def test_under_gangs_job_starving_a_job_at_its_minimum_is_not_starving(pure):
    # Volcano's default tiers: gang's jobStarvingFn (occupied 2 >= minAvailable 1) says no.
    assert run(job(), pure, tiers=DEFAULT_TIERS).evictions == []


@pytest.mark.parametrize("case, state", [
    ("equal task priority (priority preemptableFn: preemptee.Priority >= preemptor.Priority)", job(low=100)),
    ("a higher-priority sibling running", job(low=1000)),
    ("gang at its minimum (ReadyTaskNum 2 <= MinAvailable 2)", job(min_member=2)),
    ("victim volcano.sh/preemptable=false", job(victim_annotations={"volcano.sh/preemptable": "false"})),
    ("preemptor preemptionPolicy Never (taskEligibleToPreempt)", job(never=True)),
])
def test_no_sibling_is_evicted_when(case, state, pure):
    assert run(state, pure).evictions == [], case


def test_a_gang_above_its_minimum_gives_one_task(pure):
    state = job(min_member=2, running=3)
    node(state, "n1", cpu=3000)     # the three workers fill the node
    decisions = run(state, pure)
    assert len(decisions.evictions) == 1 and decisions.pipelined == {"ns/master": "n1"}


def test_preemption_between_jobs_comes_first(pure):
    # Another job of the queue, lower priority, holds the second CPU: the master takes its room
    # in the first phase and its own workers keep running.
    state = ClusterState()
    node(state, "n1", cpu=2000)
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Running", uid="pg", priority_class="mid"))
    state.add_podgroup(PodGroup("ns", "other", min_member=1, phase="Running", uid="pg2", priority_class="low"))
    state.priority_classes.update({"mid": 50, "low": 1})
    pod(state, "worker-0", cpu=1000, priority=10, group="job", node_name="n1")
    pod(state, "other-0", cpu=1000, priority=1, group="other", node_name="n1")
    pod(state, "master", cpu=1000, priority=100, group="job", creation=10.0)
    decisions = run(state, pure)
    assert [e.pod for e in decisions.evictions] == ["ns/other-0"]


# --- the simulator and the eviction audit ------------------------------------------------------

def documents(minutes: int) -> tuple[list, list]:
    cluster = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}},
               *({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
                 for n, v in (("low", 10), ("high", 1000)))]

    def member(name: str, priority_class: str, arrival: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "ns",
                             "annotations": {"scheduling.k8s.io/group-name": "job",
                                             "simulation.policydsl.io/arrival": arrival,
                                             "simulation.policydsl.io/duration": f"{minutes}m"}},
                "spec": {"schedulerName": "volcano", "priorityClassName": priority_class,
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}

    workload = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "job", "namespace": "ns", "annotations": {"simulation.policydsl.io/arrival": "0s"}},
                 "spec": {"minMember": 1}},
                member("worker-0", "low", "0s"), member("worker-1", "low", "0s"), member("master", "high", "60s")]
    return cluster, workload


def test_the_eviction_buys_its_beneficiary_once_in_the_simulator(pure):
    text = f'policy "p" version 1\nactions [{ACTIONS}]\n{TIERS}'
    plan = compile_text(text, "p.policy").plan
    cluster, workload = documents(minutes=30)
    scenario = scenario_from_documents(plan, [("c.yaml", d) for d in cluster], [("w.yaml", d) for d in workload])
    result = simulate(plan, scenario, Limits(until=20 * 60.0), Options(pure_python=pure))
    audit = result.metrics.eviction_audit
    assert sum(result.evicted.values()) == 1
    # Bought (the master bound in the victim's room), never repeated (the recreated worker, lower
    # in priority, preempts nobody), no room traded between queues.
    assert (audit["bought"], audit["wasted"], audit["repeats"], audit["exchanges"]) == (1, 0, 0, 0), audit
