"""The tdm plugin (revocable nodes in time windows) and the shuffle action, on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/tdm/tdm_test.go: Test_parseRevocableZone
(window lengths and malformed windows), Test_TDM (predicate and node scores: a revocable pod may use
the open zone rz1 and normal nodes, scoring 100 on rz1; a pod that is not revocable only normal
nodes; the closed zone rz2 takes nobody) and Test_TDM_victimsFn (victims of a closed zone within
each job's disruption budget). Volcano's tests read the wall clock and assume they do not run in
the minute after midnight; here the cycle's clock is set to noon (UTC). Then cycles: placements
follow the window, shuffle evicts from a closed zone every evict_period, with a reason, preemption
takes only preemptable pods off normal nodes for a preemptor that is not preemptable."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup
from runtime.engine.cycle import open_session, run_cycle
from runtime.engine.session import Options
from runtime.engine.plugins.tdm import parse_window, window_open
from runtime_helpers import GiB, node, placements, pod, policy

NOON = 12 * 3600.0
ZONE = "volcano.sh/revocable-zone"
PREEMPTABLE = "volcano.sh/preemptable"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("window, length", [
    ("00:00_01:00", None), ("00:00-01:00", 3600), ("0:00-23:59", 23 * 3600 + 59 * 60), ("0:00", None),
    ("1:00-0:00", 23 * 3600), ("1:0-0:0", None), ("   1:00-0:00    ", 23 * 3600), ("23:59-23:59", 24 * 3600),
    ("63:59-23:59", None),
])
def test_parse_revocable_zone(window, length):
    """Test_parseRevocableZone: the window's length, or an error (None)."""
    parsed = parse_window(window)
    assert (parsed[1] if parsed else None) == length


@pytest.mark.parametrize("window, at, is_open", [
    ("10:00-12:00", 10 * 3600, True), ("10:00-12:00", 12 * 3600, True), ("10:00-12:00", 12 * 3600 + 1, False),
    ("10:00-12:00", 9 * 3600 + 3599, False), ("0:00-0:00", 5 * 3600, True),
    # Past midnight: open after midnight too (Volcano dates both ends from today: closed 00:00-06:00).
    ("22:00-06:00", 3 * 3600, True), ("22:00-06:00", 23 * 3600, True), ("22:00-06:00", 7 * 3600, False),
])
def test_window_on_the_cycle_clock(window, at, is_open):
    assert window_open(parse_window(window), 30 * 86400 + at) is is_open


def tdm_policy(zones: str, period: str = "", actions: str = "enqueue, allocate, backfill, shuffle", more: str = ""):
    period_line = f'\n    evict_period = "{period}"' if period else ""
    return policy(f"tier {{\n  plugin priority\n  plugin gang\n  plugin conformance\n"
                  f"  plugin tdm {{\n    revocable_zones = {{ {zones} }}{period_line}\n  }}\n{more}}}\n"
                  "tier {\n  plugin drf\n  plugin predicates\n  plugin proportion\n  plugin nodeorder\n}\n",
                  actions=actions)


def test_tdm_predicate_and_scores(pure):
    """Test_TDM's three cases: p1 and p3 revocable ("*"), p2 not; rz1 open all day, rz2 closed at noon."""
    state = ClusterState()
    for name, zone in (("n1", "rz1"), ("n2", "rz1"), ("n3", None), ("n4", None), ("n5", "rz2")):
        node(state, name, cpu=16000, memory=64 * GiB, labels={ZONE: zone} if zone else {})
    state.add_podgroup(PodGroup("c1", "pg1", min_member=0, queue="default", phase="Inqueue", uid="pg1"))
    for name, revocable in (("p1", True), ("p2", False), ("p3", True)):
        pod(state, name, ns="c1", group="pg1", annotations={ZONE: "*"} if revocable else {})
    plan = policy('tier {\n  plugin tdm {\n    revocable_zones = { rz1: "0:00-0:00", rz2: "0:00-0:01" }\n  }\n}\n',
                  actions="allocate")
    ssn = open_session(plan, state, Options(pure_python=pure, now=NOON))
    names = ssn.snap.node_names
    expected = {"c1/p1": ({"n1", "n2", "n3", "n4"}, {"n1": 100, "n2": 100, "n3": 0, "n4": 0}),
                "c1/p2": ({"n3", "n4"}, {"n3": 0, "n4": 0}),
                "c1/p3": ({"n1", "n2", "n3", "n4"}, {"n1": 100, "n2": 100, "n3": 0, "n4": 0})}
    for t, key in enumerate(ssn.snap.task_keys):
        cls = ssn.snap.classes[int(ssn.snap.task_class[t])]
        mask, _ = ssn.class_mask(cls)
        passing = {names[n] for n in range(len(names)) if mask[n]}
        score = ssn.class_static_score(cls)
        assert passing == expected[key][0], key
        assert {n: score[names.index(n)] for n in passing} == expected[key][1], key


def victims_state(cases: list[tuple[str, dict[str, str]]]) -> ClusterState:
    """Test_TDM_victimsFn's pods: p1-p5 of pg1 on n1 (p1-p3 preemptable, p4-p5 not), p6-p10 of pg2 on
    n2 (all preemptable); both nodes in rz1. `cases` lists the PodGroups used, with their annotations."""
    state = ClusterState()
    for name in ("n1", "n2"):
        node(state, name, cpu=16000, memory=64 * GiB, labels={ZONE: "rz1"})
    for group, notes in cases:
        budget = (notes.get("volcano.sh/jdb-min-available", ""), notes.get("volcano.sh/jdb-max-unavailable", ""))
        ns = "c1" if group == "pg1" else "c2"
        state.add_podgroup(PodGroup(ns, group, min_member=0, queue="default", phase="Running", uid=group, budget=budget))
        first, host = (1, "n1") if group == "pg1" else (6, "n2")
        for i in range(first, first + 5):
            preemptable = "false" if i in (4, 5) else "true"
            pod(state, f"p{i}", ns=ns, group=group, node_name=host, annotations={PREEMPTABLE: preemptable})
    return state


MAX_U, MIN_A = "volcano.sh/jdb-max-unavailable", "volcano.sh/jdb-min-available"


@pytest.mark.parametrize("groups, window, want", [
    ([("pg1", {MAX_U: "30%"})], "0:00-0:01", 2),
    ([("pg1", {MAX_U: "30%"})], "0:00-0:00", 0),
    ([("pg1", {MAX_U: "99%"})], "0:00-0:01", 3),
    ([("pg2", {MAX_U: "50%"})], "0:00-0:01", 3),
    ([("pg2", {MAX_U: "50%"}), ("pg1", {MAX_U: "90%"})], "0:00-0:01", 6),
    ([("pg2", {MAX_U: "3"})], "0:00-0:01", 3),
    ([("pg2", {MIN_A: "3"})], "0:00-0:01", 2),
    ([("pg2", {MIN_A: "30%"})], "0:00-0:01", 3),
    ([("pg2", {MIN_A: "2"}), ("pg1", {MAX_U: "3"})], "0:00-0:01", 6),
], ids=[f"case {i}" for i in range(9)])
def test_tdm_victims(groups, window, want, pure):
    """Test_TDM_victimsFn: how many pods a closed zone loses at once (each job's budget)."""
    state = victims_state(groups)
    plan = policy(f'tier {{\n  plugin tdm {{\n    revocable_zones = {{ rz1: "{window}" }}\n  }}\n}}\n',
                  actions="allocate, shuffle")
    ssn = open_session(plan, state, Options(pure_python=pure, now=NOON))
    [[(_, victims)]] = ssn.fns("victim")
    running = list(range(len(ssn.snap.task_keys)))
    chosen = victims(running)
    assert len(chosen) == want
    assert all(ssn.snap.pods[t].annotations[PREEMPTABLE] == "true" for t in chosen)


def test_preemptable_pods_use_revocable_nodes_only_while_open(pure):
    state = ClusterState()
    node(state, "r1", labels={ZONE: "rz1"})
    node(state, "n1")
    pod(state, "offline", annotations={PREEMPTABLE: "true"})
    pod(state, "online")
    plan = tdm_policy('rz1: "10:00-12:00"')
    assert placements(run_cycle(plan, state, Options(pure_python=pure, now=10.5 * 3600))) == \
        {"ns/offline": "r1", "ns/online": "n1"}
    decisions = run_cycle(plan, state, Options(pure_python=pure, now=13 * 3600))
    assert placements(decisions) == {"ns/offline": "n1", "ns/online": "n1"}


def test_a_closed_zone_is_emptied_by_shuffle_every_evict_period(pure):
    state = ClusterState()
    node(state, "r1", labels={ZONE: "rz1"})
    node(state, "n1")
    state.add_podgroup(PodGroup("ns", "batch", min_member=1, phase="Running", uid="pg-b"))
    for i in range(3):
        pod(state, f"batch-{i}", group="batch", node_name="r1", annotations={PREEMPTABLE: "true"}, creation=float(i))
    pod(state, "steady", node_name="r1", annotations={PREEMPTABLE: "false"})
    plan = tdm_policy('rz1: "10:00-12:00"', period="1m")
    options = Options(pure_python=pure, now=13 * 3600)
    first = run_cycle(plan, state, options)
    # One pod per job without a budget (Volcano's default), the newest first; never the pod that is not preemptable.
    assert [e.pod for e in first.evictions] == ["ns/batch-2"]
    assert first.evictions[0].reason.kind == "shuffle" and "revocable zone rz1" in first.evictions[0].reason.message
    assert run_cycle(plan, state, Options(pure_python=pure, now=13 * 3600 + 30)).evictions == []
    assert [e.pod for e in run_cycle(plan, state, Options(pure_python=pure, now=13 * 3600 + 60)).evictions] == \
        ["ns/batch-2"]
    # While the zone is open nothing is evicted.
    assert run_cycle(plan, state, Options(pure_python=pure, now=11 * 3600)).evictions == []


def test_a_job_at_its_min_available_budget_loses_nothing(pure):
    # Volcano evicts one pod where the running pods are at or below jdb-min-available; we evict none.
    state = ClusterState()
    node(state, "r1", labels={ZONE: "rz1"})
    state.add_podgroup(PodGroup("ns", "batch", min_member=1, phase="Running", uid="pg-b", budget=("2", "")))
    for i in range(2):
        pod(state, f"batch-{i}", group="batch", node_name="r1", annotations={PREEMPTABLE: "true"})
    assert run_cycle(tdm_policy('rz1: "10:00-12:00"'), state, Options(pure_python=pure, now=13 * 3600)).evictions == []


@pytest.mark.parametrize("preemptor_says, evicted", [("false", ["ns/victim"]), (None, [])],
                         ids=["not preemptable preempts", "preemptable by default preempts nobody"])
def test_preemption_takes_preemptable_pods_off_normal_nodes_only(preemptor_says, evicted, pure):
    state = ClusterState()
    node(state, "n1", cpu=2000)
    node(state, "r1", cpu=2000, labels={ZONE: "rz1"})
    pod(state, "victim", cpu=2000, node_name="n1", priority=1)
    pod(state, "lent", cpu=2000, node_name="r1", priority=1, annotations={PREEMPTABLE: "true"})
    pod(state, "urgent", cpu=2000, priority=100,
        annotations={PREEMPTABLE: preemptor_says} if preemptor_says else {})
    plan = tdm_policy('rz1: "0:00-0:00"', actions="enqueue, allocate, preempt, backfill")
    decisions = run_cycle(plan, state, Options(pure_python=pure, now=NOON))
    assert [e.pod for e in decisions.evictions] == evicted


def test_jobs_that_are_not_preemptable_go_first(pure):
    state = ClusterState()
    node(state, "n1", cpu=1000)
    state.add_podgroup(PodGroup("ns", "offline", min_member=1, phase="Inqueue", uid="pg-o", creation=0.0,
                                job_preemptable=True))
    pod(state, "offline-0", group="offline", creation=0.0, annotations={PREEMPTABLE: "true"})
    state.add_podgroup(PodGroup("ns", "online", min_member=1, phase="Inqueue", uid="pg-n", creation=10.0))
    pod(state, "online-0", group="online", creation=10.0)
    plan = tdm_policy('rz1: "0:00-0:00"')
    assert placements(run_cycle(plan, state, Options(pure_python=pure, now=NOON))) == {"ns/online-0": "n1"}


def test_podgroup_preemptable_and_budget_are_read_from_objects():
    from runtime.cluster.objects import load_objects
    docs = [("t.yaml", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": "pg", "namespace": "ns", "labels": {PREEMPTABLE: "true"},
                                     "annotations": {MAX_U: "30%"}},
                        "spec": {"minMember": 1}})]
    group = load_objects(docs).podgroups["ns/pg"]
    assert group.job_preemptable is True and group.budget == ("", "30%")


def test_simulated_zone_closing_moves_its_pods_once(pure):
    """The simulator's clock starts at 00:00 UTC: rz1 is open for five minutes, then shuffle moves
    its pods (one a minute: each its own job, budget 1) to the normal node, none twice."""
    from runtime.simulation.engine import Limits, Simulation
    from runtime.simulation.scenarios import scenario_from_documents
    plan = tdm_policy('rz1: "0:00-0:05"')
    items = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
             for name, labels in (("r1", {ZONE: "rz1"}), ("n1", {}))]
    items += [{"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"b{i}", "namespace": "ns", "annotations": {PREEMPTABLE: "true"}},
               "spec": {"schedulerName": "volcano",
                        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}} for i in range(2)]
    scenario = scenario_from_documents(plan, [("s.yaml", {"apiVersion": "v1", "kind": "List", "items": items})], [])
    last: dict[str, tuple[float, str]] = {}

    def seen(outcome) -> None:
        for binding in outcome.decisions.bindings:
            last[binding.pod] = (outcome.time, binding.node)

    result = Simulation(plan, scenario, Limits(until=12 * 60.0), Options(pure_python=pure), on_cycle=seen).run()
    assert sum(result.evicted.values()) == 2 and set(result.evicted) == {"ns/b0", "ns/b1"}
    assert result.placements == {"ns/b0": "r1", "ns/b1": "r1"}           # first, while the zone is open
    assert {node for _, node in last.values()} == {"n1"}                   # last, once it closed
    assert all(at > 5 * 60 for at, _ in last.values())
    assert result.metrics.eviction_audit["repeats"] == 0


def test_the_victims_event_says_why_shuffle_evicted_it():
    from runtime.cluster import decisions as d
    from runtime.cluster.model import Pod
    from runtime.kube.events import victim_message
    victim = Pod("ns", "b0", node_name="r1")
    reason = d.Reason(d.SHUFFLE, "revocable zone rz1 (10:00-12:00) is closed: its preemptable pods leave its nodes (tdm)")
    assert victim_message(reason, victim, {}) == ("Evicted by shuffle on node r1: revocable zone rz1 (10:00-12:00) is "
                                                  "closed: its preemptable pods leave its nodes (tdm)")
