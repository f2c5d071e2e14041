"""The resourcequota plugin, on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/resourcequota/resourcequota_test.go
TestResourceQuotaPlugin: a quota of 2 CPUs / 2G admits a PodGroup asking 2 CPUs / 2G, refuses one
asking 20 / 20G, a namespace without quotas admits it, and a PodGroup without minResources is
admitted. Then: jobs admitted earlier in the cycle count, quota names compare literally, status
wins over spec, and where quotas are not read (a live cluster) a job waits, saying so."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodGroup, ResourceQuota
from runtime.cluster.objects import load_objects
from runtime.engine.cycle import open_session, run_cycle
from runtime.engine.extension import REJECT
from runtime.engine.plugins.resourcequota import NOT_READ
from runtime.engine.session import Options
from runtime_helpers import policy


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


NORMAL = {"cpu": "2000m", "memory": "2G"}
HUGE = {"cpu": "20000m", "memory": "20G"}


def podgroup(name: str, min_resources: dict | None, namespace: str = "default", phase: str = "Pending") -> dict:
    spec = {"minMember": 2, "queue": "c1"}
    if min_resources is not None:
        spec["minResources"] = min_resources
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": {"phase": phase}}


def quota(name: str, hard: dict, used: dict | None = None, namespace: str = "default", status: bool = True) -> dict:
    obj = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace},
           "spec": {"hard": hard}}
    if status:
        obj["status"] = {"hard": hard, "used": used or {}}
    return obj


QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "c1"},
         "spec": {"weight": 1}}
PLAN = policy("tier {\n  plugin resourcequota\n}\ntier {\n  plugin predicates\n  plugin proportion\n}\n",
              actions="enqueue, allocate")


def condition_text(decisions, group: str) -> str:
    return " ".join(c.message for s in decisions.podgroups if s.name == group for c in s.conditions)


def enqueueable(objects: list[dict], pure: bool) -> dict[str, bool]:
    ssn = open_session(PLAN, load_objects([("t.yaml", o) for o in (QUEUE, *objects)]), Options(pure_python=pure))
    return {job.key: ssn.job_enqueueable(job.index).vote is not REJECT for job in ssn.snap.jobs}


@pytest.mark.parametrize("groups, quotas, expected", [
    ([podgroup("pg1", NORMAL)], [quota("test", NORMAL)], True),
    ([podgroup("pg2", HUGE)], [quota("test", NORMAL)], False),
    ([podgroup("pg2", HUGE)], [], True),
    ([podgroup("pg3", None)], [quota("test", NORMAL)], True),
], ids=["ResourceQuota capacity can match the needs of this pg",
        "ResourceQuota capacity can't match the needs of this pg",
        "No ResourceQuota resource object", "MinResources field of pg is not set"])
def test_resource_quota_plugin(groups, quotas, expected, pure):
    assert set(enqueueable(groups + quotas, pure).values()) == {expected}


def test_used_and_earlier_admissions_count_and_the_refusal_says_why(pure):
    objects = [QUEUE, quota("team", {"cpu": "4", "pods": "10"}, {"cpu": "1"}),
               podgroup("first", {"cpu": "2"}), podgroup("second", {"cpu": "2"}),
               podgroup("other-ns", {"cpu": "2"}, namespace="elsewhere")]
    state = load_objects([("t.yaml", o) for o in objects])
    decisions = run_cycle(PLAN, state, Options(pure_python=pure))
    phases = {s.name: s.phase for s in decisions.podgroups}
    assert phases.get("default/first") == "Inqueue" and phases.get("elsewhere/other-ns") == "Inqueue"
    assert phases.get("default/second", "Pending") == "Pending"
    text = condition_text(decisions, "default/second")
    assert "resource quota team insufficient, requested: cpu 2, used: cpu 1, admitted this cycle: cpu 2, " \
           "limited: cpu 4" in text


def test_quota_names_compare_literally():
    # `requests.cpu` is not `cpu`: Volcano's Mask keeps only the quota's own names.
    got = enqueueable([podgroup("pg", HUGE), quota("q", {"requests.cpu": "1", "pods": "1"})], False)
    assert set(got.values()) == {True}


def test_a_quota_without_status_is_read_by_its_spec():
    state = load_objects([("t.yaml", quota("q", {"cpu": "1"}, status=False))])
    assert state.resource_quotas["default/q"] == ResourceQuota("default", "q", {"cpu": 1000}, {})
    assert set(enqueueable([podgroup("pg", NORMAL), quota("q", {"cpu": "1"}, status=False)], False).values()) == {False}


def test_where_quotas_are_not_read_a_job_with_min_resources_waits_saying_so(pure):
    state = ClusterState()          # as the connector's: resource_quotas None
    state.add_podgroup(PodGroup("ns", "pg", min_member=1, min_resources={"cpu": 1000}, uid="pg"))
    state.add_podgroup(PodGroup("ns", "plain", min_member=1, uid="plain"))
    decisions = run_cycle(PLAN, state, Options(pure_python=pure))
    phases = {s.name: s.phase for s in decisions.podgroups}
    assert phases.get("ns/pg", "Pending") == "Pending" and phases.get("ns/plain") == "Inqueue"
    assert NOT_READ in condition_text(decisions, "ns/pg")
