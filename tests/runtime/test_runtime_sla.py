"""The sla plugin, on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/sla/sla_test.go TestSlaPlugin: job1 sets
no waiting time, job2 one hour; with the plugin's sla-waiting-time 3m job1 (deadline 3m) goes
first and is enqueueable, without it job2 goes first (a job with a waiting time before one
without) and job1 is still enqueueable (sla abstains). Then cycles: a job past its waiting time is
admitted past overcommit and goes first; a malformed annotation holds the job, saying so."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup
from runtime.engine.cycle import open_session, run_cycle
from runtime.engine.extension import PERMIT
from runtime.engine.session import Options
from runtime_helpers import GiB, node, placements, pod, policy

NOW = 1_000_000.0


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def sla_policy(argument: str = "", actions: str = "enqueue, allocate"):
    body = f" {{\n    waiting_time = {argument}\n  }}" if argument else ""
    return policy("tier {\n  plugin priority\n  plugin gang\n  plugin conformance\n"
                  f"  plugin sla{body}\n}}\ntier {{\n  plugin drf\n  plugin predicates\n  plugin proportion\n"
                  "  plugin overcommit {\n    factor = 1\n  }\n}\n",
                  actions=actions)


@pytest.mark.parametrize("argument, job1_first", [('"3m"', True), ("", False)],
                         ids=["sla normal placement", "none placement"])
def test_sla_plugin(argument, job1_first, pure):
    state = ClusterState()
    node(state, "n1")
    state.add_podgroup(PodGroup("default", "job1", min_member=3, phase="Pending", uid="pg1", creation=0.0))
    state.add_podgroup(PodGroup("default", "job2", min_member=2, phase="Pending", uid="pg2", creation=0.0,
                                sla_waiting_times=("1h",)))
    for name, size in (("job1", 3), ("job2", 2)):
        for i in range(size):
            pod(state, f"{name}-{i}", group=name, ns="default")
    ssn = open_session(sla_policy(argument), state, Options(pure_python=pure))
    ssn.now = NOW
    j1, j2 = (next(j.index for j in ssn.snap.jobs if j.key == f"default/{n}") for n in ("job1", "job2"))
    assert (ssn.job_order([j2, j1])[0] == j1) is job1_first
    assert ssn.job_enqueueable(j1).vote is not False   # JobEnqueueable(job1) is true either way
    verdict = next(fn for tier in ssn.fns("job_enqueued") for name, fn in tier if name == "sla")(j1)
    assert (verdict.vote is PERMIT) is job1_first


def full_cluster(state: ClusterState, waiting: tuple[str, ...], created: float) -> None:
    node(state, "n1", cpu=4000, memory=8 * GiB)
    state.add_podgroup(PodGroup("ns", "running", min_member=1, phase="Running", uid="pg-r"))
    pod(state, "running-0", cpu=3000, memory=GiB, group="running", node_name="n1")
    state.add_podgroup(PodGroup("ns", "late", min_member=1, phase="Pending", uid="pg-l", creation=created,
                                min_resources={"cpu": 4000}, sla_waiting_times=waiting))
    pod(state, "late-0", cpu=1000, memory=GiB, group="late")


@pytest.mark.parametrize("waited, admitted", [(3600, True), (60, False)], ids=["past", "within"])
def test_a_job_past_its_waiting_time_is_admitted_past_overcommit(waited, admitted, pure):
    # Its minResources (4 CPUs) do not fit beside the running pod: overcommit (factor 1) would keep it Pending.
    state = ClusterState()
    full_cluster(state, ("10m",), NOW - waited)
    decisions = run_cycle(sla_policy(), state, Options(pure_python=pure, now=NOW))
    phases = {s.name: s.phase for s in decisions.podgroups}
    assert (phases.get("ns/late") in ("Inqueue", "Running")) is admitted


def test_the_plugins_waiting_time_applies_to_jobs_without_their_own(pure):
    state = ClusterState()
    full_cluster(state, (), NOW - 3600)
    decisions = run_cycle(sla_policy('"30m"'), state, Options(pure_python=pure, now=NOW))
    assert {s.name: s.phase for s in decisions.podgroups}.get("ns/late") in ("Inqueue", "Running")


def test_the_earliest_deadline_goes_first(pure):
    state = ClusterState()
    node(state, "n1", cpu=1000, memory=8 * GiB)
    state.add_podgroup(PodGroup("ns", "old", min_member=1, phase="Inqueue", uid="pg-o", creation=0.0))
    pod(state, "old-0", cpu=1000, group="old", creation=0.0)
    state.add_podgroup(PodGroup("ns", "urgent", min_member=1, phase="Inqueue", uid="pg-u", creation=100.0,
                                sla_waiting_times=("5m",)))
    pod(state, "urgent-0", cpu=1000, group="urgent", creation=100.0)
    assert placements(run_cycle(sla_policy(), state, Options(pure_python=pure, now=NOW))) == {"ns/urgent-0": "n1"}
    # Without the plugin the older job goes first.
    plain = policy("tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin drf\n  plugin predicates\n"
                   "  plugin proportion\n}\n", actions="enqueue, allocate")
    assert placements(run_cycle(plain, state, Options(pure_python=pure, now=NOW))) == {"ns/old-0": "n1"}


def test_a_malformed_waiting_time_holds_the_job_saying_so(pure):
    state = ClusterState()
    node(state, "n1")
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg", sla_waiting_times=("1 hour",)))
    pod(state, "job-0", group="job")
    decisions = run_cycle(sla_policy(), state, Options(pure_python=pure, now=NOW))
    assert placements(decisions) == {}
    messages = [r.message for r in decisions.reasons_for("ns/job-0")]
    assert any("sla-waiting-time `1 hour`" in m for m in messages), messages


def test_the_annotations_are_read_from_podgroup_objects():
    from runtime.cluster.objects import load_objects
    docs = [("t.yaml", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": "pg", "namespace": "ns",
                                     "annotations": {"sla-waiting-time": "5m", "volcano.sh/sla-waiting-time": "1h"}},
                        "spec": {"minMember": 1}})]
    assert load_objects(docs).podgroups["ns/pg"].sla_waiting_times == ("1h", "5m")
