"""Workload input: durations, the `kind: Workload` generator, arrival and duration annotations,
and the built-in example's mapping onto a policy's queues."""

from __future__ import annotations

import filecmp

import pytest

from compiler.pipeline import compile_file, compile_text
from runtime.simulation.scenarios import DEFAULT_POLICY, example_scenario, queue_mapping, scenario_from_documents
from runtime.simulation.workload import expand_workload, format_duration, parse_duration
from sim_helpers import POLICIES, node, pod, podgroup, workload


@pytest.mark.parametrize("text, seconds", [
    ("30s", 30.0), ("10m", 600.0), ("2h", 7200.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("500ms", 0.5),
    ("1d", 86400.0), (45, 45.0), ("12.5", 12.5), ("0", 0.0),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten", "10x", "m10", "-5s", "1h 30m", True, -1])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("seconds, text", [(45, "45s"), (750, "12m30s"), (7500, "2h5m"), (1.5, "1.5s"), (0, "0s")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def expand(*jobs, seed=1):
    problems = []
    docs = [d for _, d in expand_workload("w.yaml", workload(*jobs, seed=seed), problems)]
    return docs, problems


def test_generator_makes_gangs_at_fixed_intervals():
    docs, problems = expand({"name": "etl", "namespace": "data", "queue": "batch", "count": 3, "start": "1m",
                             "interval": "30s", "replicas": 2, "resources": {"cpu": "500m", "memory": "1Gi"},
                             "duration": "10m"})
    assert problems == []
    groups = [d for d in docs if d["kind"] == "PodGroup"]
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert [g["metadata"]["name"] for g in groups] == ["etl-0", "etl-1", "etl-2"]
    assert [g["metadata"]["annotations"]["simulation.policydsl.io/arrival"] for g in groups] == ["60.0s", "90.0s", "120.0s"]
    assert groups[0]["spec"] == {"minMember": 2, "queue": "batch", "minResources": {"cpu": "1", "memory": "2Gi"}}
    assert [p["metadata"]["name"] for p in pods[:2]] == ["etl-0-0", "etl-0-1"]
    annotations = pods[0]["metadata"]["annotations"]
    assert annotations["scheduling.k8s.io/group-name"] == "etl-0"
    assert annotations["simulation.policydsl.io/duration"] == "600.0s"
    assert pods[0]["spec"]["schedulerName"] == "volcano"


def test_generator_is_reproducible_from_its_seed():
    job = {"name": "burst", "count": 20, "arrivals": "poisson", "interval": "1m", "resources": {"cpu": "1"},
           "duration": {"min": "1m", "max": "5m"}}
    arrivals = lambda docs: [d["metadata"]["annotations"]["simulation.policydsl.io/arrival"]  # noqa: E731
                             for d in docs if d["kind"] == "PodGroup"]
    first, _ = expand(job, seed=3)
    again, _ = expand(job, seed=3)
    other, _ = expand(job, seed=4)
    assert arrivals(first) == arrivals(again) != arrivals(other)
    times = [float(t[:-1]) for t in arrivals(first)]
    assert times == sorted(times) and len(set(times)) == 20
    durations = [float(d["metadata"]["annotations"]["simulation.policydsl.io/duration"][:-1])
                 for d in first if d["kind"] == "Pod"]
    assert all(60 <= x <= 300 for x in durations)


@pytest.mark.parametrize("job, message", [
    ({"name": "x", "resources": {"cpu": "1"}, "interval": "1m", "arrivals": "burst"}, "`arrivals` must be fixed or poisson"),
    ({"name": "x", "resources": {"cpu": "1"}, "arrivals": "poisson"}, "poisson arrivals need a positive `interval`"),
    ({"name": "X_1", "resources": {"cpu": "1"}}, "`name` must be a lowercase DNS label"),
    ({"name": "x"}, "`resources` must be a mapping of requests"),
    ({"name": "x", "resources": {"cpu": "1"}, "count": 0}, "`count` must be a positive integer"),
    ({"name": "x", "resources": {"cpu": "1"}, "duration": {"min": "5m", "max": "1m"}}, "less than `duration.min`"),
    ({"name": "x", "resources": {"cpu": "1"}, "duration": {"median": "5m"}}, "`duration` must be a duration"),
    ({"name": "x", "resources": {"cpu": "1"}, "start": "soon"}, "`start`: `soon` is not a duration"),
])
def test_generator_problems_name_the_template(job, message):
    _, problems = expand(job)
    [problem] = problems
    assert (problem.kind, problem.name) == ("Workload", "w")
    assert message in problem.message


def test_a_workload_document_needs_its_api_version_and_jobs():
    problems = []
    expand_workload("w.yaml", {"apiVersion": "v1", "kind": "Workload", "metadata": {"name": "w"}}, problems)
    assert "apiVersion must be simulation.policydsl.io/v1alpha1" in problems[0].message
    problems = []
    expand_workload("w.yaml", {**workload(), "spec": {"jobs": []}}, problems)
    assert "`spec.jobs` must be a non-empty list" in problems[0].message


def plan_of(text: str):
    return compile_text(f'policy "t" version 1\nactions [enqueue, allocate]\ntier {{\n  plugin gang\n}}\n{text}',
                        "t.policy").plan


def test_pods_inherit_arrival_and_duration_from_their_podgroup():
    plan = plan_of("")
    group = podgroup("g", min_member=2)
    group["metadata"]["annotations"] = {"simulation.policydsl.io/arrival": "2m", "simulation.policydsl.io/duration": "5m"}
    scenario = scenario_from_documents(plan, [("s", node("n"))], [
        ("w", group), ("w", pod("g-0", group="g")), ("w", pod("g-1", group="g", duration="1m")), ("w", pod("now"))])
    assert {(a.time, (a.pod or a.podgroup).key) for a in scenario.arrivals} == {
        (120.0, "ns/g"), (120.0, "ns/g-0"), (120.0, "ns/g-1")}
    assert scenario.arrivals[0].podgroup is not None           # the group comes before its pods
    assert scenario.durations == {"ns/g-0": 300.0, "ns/g-1": 60.0}
    assert set(scenario.initial.pods) == {"ns/now"}             # arrival 0: present from the start


def test_a_podgroup_without_arrival_comes_with_its_first_pod():
    plan = plan_of("")
    scenario = scenario_from_documents(plan, [("s", node("n"))], [
        ("w", podgroup("g")), ("w", pod("g-0", group="g", arrival="30s")), ("w", pod("g-1", group="g", arrival="1m"))])
    [group] = [a for a in scenario.arrivals if a.podgroup is not None]
    assert group.time == 30.0


def test_a_podgroup_may_name_a_queue_from_the_other_input():
    plan = plan_of("")
    queue_object = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "team"},
                    "spec": {"weight": 1}}
    scenario = scenario_from_documents(plan, [("s", node("n")), ("s", queue_object)],
                                       [("w", podgroup("g", queue="team")), ("w", pod("g-0", group="g"))])
    assert scenario.initial.podgroups["ns/g"].queue == "team"
    # Named by neither input: no error of the input; the job waits, saying so (as Volcano skips it).
    scenario = scenario_from_documents(plan, [("s", node("n"))], [("w", podgroup("g", queue="team")),
                                                                  ("w", pod("g-0", group="g"))])
    assert scenario.initial.podgroups["ns/g"].queue == "team"


@pytest.mark.parametrize("policy, mapping", [
    ("volcano-default", {}),
    ("colocation", {"online": "online", "batch": "offline"}),
    ("multi-tenant", {"online": "search", "batch": "nlp"}),
    ("gpu-sharing", {"online": "inference", "batch": "notebooks"}),
])
def test_the_example_queues_go_to_the_policys_leaf_queues(policy, mapping):
    plan = compile_file(POLICIES / f"{policy}.policy").plan
    assert queue_mapping(plan) == mapping
    scenario = example_scenario(plan)
    queues = {a.podgroup.queue for a in scenario.arrivals if a.podgroup is not None}
    queues |= {g.queue for g in scenario.initial.podgroups.values()}
    assert queues == (set(mapping.values()) or {"online", "batch"})


def test_explains_default_policy_is_volcano_default():
    assert filecmp.cmp(DEFAULT_POLICY, POLICIES / "volcano-default.policy", shallow=False)
