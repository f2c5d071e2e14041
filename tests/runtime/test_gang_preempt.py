"""Gangs preempted and reclaimed whole (gang_preempt, gang_reclaim: Volcano v1.15's gangpreempt and
gangreclaim; runtime/engine/actions/bundles.py), and victims of a preemptor asking for hard network
topology chosen within its HyperNode (preempt, reclaim and their gang-aware variants), on both
kernels.

The tables translate Volcano's tests for these actions: the scenarios of test/e2e/gangevict
(GangPreempt E2E Test "GP-n", GangReclaim E2E Test "GR-n": 4 nodes of 1 cpu, pods of 1 cpu; the
topology ones over Volcano's 2-tier tree of 2 switches of 2 nodes) and the victim-selection unit
tests of pkg/scheduler/actions/{gangpreempt,gangreclaim,utils} (named in each case). Outcomes are
read from the decisions, and the property at the end checks them with a checker written here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.model import ClusterState, NetworkTopology, PodGroup, QueueObject
from runtime.cluster.topology import HyperNode, Member
from runtime_helpers import GiB, cycle, node, pod, policy

PREEMPT_TIERS = """
tier {
  plugin priority
  plugin gang
  plugin conformance
}
tier {
  plugin predicates
  plugin nodeorder
}
"""
# As Volcano's gangevict e2e config: capacity (flat) in the first tier, deserved on every queue.
RECLAIM_TIERS = """
tier {
  plugin priority
  plugin gang { enable_preemptable = false }
  plugin conformance
  plugin capacity { enable_hierarchy = false }
}
tier {
  plugin predicates
  plugin nodeorder
}
"""
LOW, MED, HIGH = 10, 50, 100


def plan(actions: str, tiers: str = PREEMPT_TIERS, settings_text: str = ""):
    return policy(tiers + settings_text, actions=actions)


GANG_PREEMPT = plan("enqueue, allocate, gang_preempt, backfill")
LEGACY_PREEMPT = plan("enqueue, allocate, preempt, backfill")
NO_WHOLE = plan("enqueue, allocate, gang_preempt, backfill",
                settings_text="action gang_preempt {\n  whole_gangs = false\n}\n")
GANG_RECLAIM = plan("enqueue, allocate, gang_reclaim, backfill", RECLAIM_TIERS)


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def group(state: ClusterState, name: str, size: int, min_member: int, priority: int, queue: str = "default",
          running_on: list[str] | None = None, cpu: int = 1000, topology: NetworkTopology | None = None,
          roles: dict[str, int] | None = None, min_roles: dict[str, int] | None = None,
          preemptable: bool | None = None, creation: float = 0.0) -> None:
    """A PodGroup of `size` pods (`roles`: role -> count instead), running on `running_on` in order."""
    state.add_podgroup(PodGroup("ns", name, min_member=min_member, queue=queue,
                                phase="Running" if running_on else "Inqueue", uid=f"pg-{name}",
                                network_topology=topology, min_task_member=dict(min_roles or {}),
                                preemptable=preemptable, creation=creation))
    names = [(f"{name}-{role}-{i}" if role else f"{name}-{i}", role)
             for role, n in (roles or {"": size}).items() for i in range(n)]
    for i, (pod_name, role) in enumerate(names):
        where = running_on[i] if running_on and i < len(running_on) else None
        annotations = {"volcano.sh/task-spec": role} if role else {}
        pod(state, pod_name, cpu=cpu, memory=GiB // 4, group=name, node_name=where, priority=priority,
            creation=creation + i / 100, annotations=annotations)


def cluster(nodes: int = 4, cpu: int = 1000) -> ClusterState:
    state = ClusterState()
    for i in range(nodes):
        node(state, f"n{i}", cpu=cpu, memory=8 * GiB)
    return state


def switches(state: ClusterState) -> None:
    """Volcano's gangevict tree (setupTopoHyperNodes): s0 = {n0, n1}, s1 = {n2, n3} (tier 1), s2 over both."""
    state.add_hypernode(HyperNode("s0", 1, "", (Member("Node", exact="n0"), Member("Node", exact="n1"))))
    state.add_hypernode(HyperNode("s1", 1, "", (Member("Node", exact="n2"), Member("Node", exact="n3"))))
    state.add_hypernode(HyperNode("s2", 2, "", (Member("HyperNode", exact="s0"), Member("HyperNode", exact="s1"))))


@dataclass
class Outcome:
    evicted: dict[str, int] = field(default_factory=dict)     # job -> pods evicted
    pipelined: dict[str, list[str]] = field(default_factory=dict)   # job -> nodes of its pipelined pods


def outcome(state: ClusterState, decisions) -> Outcome:
    out = Outcome()
    for e in decisions.evictions:
        job = state.pods[e.pod].group
        out.evicted[job] = out.evicted.get(job, 0) + 1
    for key, where in sorted(decisions.pipelined.items()):
        out.pipelined.setdefault(state.pods[key].group, []).append(where)
    return out


# --- GangPreempt E2E Test (test/e2e/gangevict/gangevict.go) -------------------------------------

def test_gp1_safe_bundle_evicts_surplus_and_the_victim_gang_survives(pure):
    """GP-1: a low gang of 4 (min 2) fills the cluster; a high gang of 2 (min 2) takes its surplus."""
    state = cluster()
    group(state, "victim", 4, 2, LOW, running_on=["n0", "n1", "n2", "n3"])
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    got = outcome(state, cycle(GANG_PREEMPT, state, pure))
    assert got.evicted == {"victim": 2} and len(got.pipelined["preemptor"]) == 2


def test_gp2_safe_bundles_across_gangs_break_no_gang(pure):
    """GP-2: two low gangs of 2 (min 1) each give their one surplus pod."""
    state = cluster()
    group(state, "victim-a", 2, 1, LOW, running_on=["n0", "n1"])
    group(state, "victim-b", 2, 1, LOW, running_on=["n2", "n3"])
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    got = outcome(state, cycle(GANG_PREEMPT, state, pure))
    assert got.evicted == {"victim-a": 1, "victim-b": 1} and len(got.pipelined["preemptor"]) == 2


def test_gp3_whole_bundle_breaks_exactly_one_gang(pure):
    """GP-3: two tight low gangs (2 of min 2): one is evicted whole, the other untouched."""
    state = cluster()
    group(state, "victim-a", 2, 2, LOW, running_on=["n0", "n1"])
    group(state, "victim-b", 2, 2, LOW, running_on=["n2", "n3"])
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    got = outcome(state, cycle(GANG_PREEMPT, state, pure))
    assert list(got.evicted.values()) == [2] and len(got.pipelined["preemptor"]) == 2


def test_gp3_without_the_switch_no_gang_at_its_minimum_is_a_victim(pure):
    """The same cluster under preempt (or gang_preempt with whole_gangs = false): nothing is evicted."""
    for plan_ in (LEGACY_PREEMPT, NO_WHOLE):
        state = cluster()
        group(state, "victim-a", 2, 2, LOW, running_on=["n0", "n1"])
        group(state, "victim-b", 2, 2, LOW, running_on=["n2", "n3"])
        group(state, "preemptor", 2, 2, HIGH, creation=1)
        decisions = cycle(plan_, state, pure)
        assert not decisions.evictions and not decisions.pipelined


def test_gp4_whole_bundles_break_both_gangs_for_a_large_preemptor(pure):
    """GP-4: the preemptor needs all 4 slots: both tight gangs go."""
    state = cluster()
    group(state, "victim-a", 2, 2, LOW, running_on=["n0", "n1"])
    group(state, "victim-b", 2, 2, LOW, running_on=["n2", "n3"])
    group(state, "preemptor", 4, 4, HIGH, creation=1)
    got = outcome(state, cycle(GANG_PREEMPT, state, pure))
    assert got.evicted == {"victim-a": 2, "victim-b": 2}
    assert sorted(got.pipelined["preemptor"]) == ["n0", "n1", "n2", "n3"]


def test_gp5_a_gang_filling_the_cluster_is_evicted_whole(pure):
    """GP-5: a low gang of 4 (min 4); a high gang of 2 needs half of it: the gang goes whole, never
    left running 2 below its minimum."""
    state = cluster()
    group(state, "victim", 4, 4, LOW, running_on=["n0", "n1", "n2", "n3"])
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    decisions = cycle(GANG_PREEMPT, state, pure)
    got = outcome(state, decisions)
    assert got.evicted == {"victim": 4} and len(got.pipelined["preemptor"]) == 2
    # Each victim's reason says so, and names a pipelined pod of the preemptor (the audit's beneficiary).
    for e in decisions.evictions:
        assert e.reason.message.endswith("(gang ns/victim evicted whole)")
        assert e.reason.details["preemptor"] in decisions.pipelined


def test_gp6_gang_preemption_does_not_cross_queues(pure):
    """GP-6: the only victims are in another queue: gang_preempt evicts nothing."""
    state = cluster()
    state.add_queue(QueueObject("q1"))
    state.add_queue(QueueObject("q2", reclaimable=False))
    group(state, "victim", 4, 4, LOW, queue="q2", running_on=["n0", "n1", "n2", "n3"])
    group(state, "preemptor", 2, 2, HIGH, queue="q1", creation=1)
    decisions = cycle(GANG_PREEMPT, state, pure)
    assert not decisions.evictions and not decisions.pipelined


def test_gp7_an_equal_priority_gang_is_not_preempted(pure):
    """GP-7."""
    state = cluster()
    group(state, "victim", 4, 4, MED, running_on=["n0", "n1", "n2", "n3"])
    group(state, "preemptor", 2, 2, MED, creation=1)
    decisions = cycle(GANG_PREEMPT, state, pure)
    assert not decisions.evictions and not decisions.pipelined


def test_gp8_a_medium_preemptor_cannot_evict_a_high_gang(pure):
    """GP-8: only the low gang's 2 slots may be freed and the preemptor needs 4: nothing at all is
    evicted (no eviction that buys nothing)."""
    state = cluster()
    group(state, "gang-a", 2, 2, HIGH, running_on=["n0", "n1"])
    group(state, "gang-b", 2, 2, LOW, running_on=["n2", "n3"])
    group(state, "preemptor-c", 4, 4, MED, creation=1)
    decisions = cycle(GANG_PREEMPT, state, pure)
    assert not decisions.evictions and not decisions.pipelined


def test_gpr1_role_minimums_keep_role_tight_tasks(pure):
    """GP-R1: a low victim of ps (1, min 1) and workers (3, min 2), minMember 3: the 1-pod
    preemptor takes the spare worker; ps and two workers stay."""
    state = cluster()
    group(state, "victim", 0, 3, LOW, running_on=["n0", "n1", "n2", "n3"], roles={"ps": 1, "worker": 3},
          min_roles={"ps": 1, "worker": 2})
    group(state, "preemptor", 1, 1, HIGH, creation=1)
    decisions = cycle(GANG_PREEMPT, state, pure)
    assert [e.pod for e in decisions.evictions] == ["ns/victim-worker-2"]


@pytest.mark.parametrize("plan_", [GANG_PREEMPT, LEGACY_PREEMPT], ids=["gang_preempt", "preempt"])
def test_gpr2_a_preemptor_gang_fills_its_roles_minimums_first(plan_, pure):
    """A preemptor of workers (4, min 2) and ps (2, min 1), minMember 3, its workers' pods made
    first, on room for 4 held by a low gang: it takes room for ps and two workers, not for the
    workers first (ps would then find none, and the gang never be pipelined)."""
    state = cluster()
    group(state, "victim", 4, 1, LOW, running_on=["n0", "n1", "n2", "n3"])
    group(state, "preemptor", 0, 3, HIGH, roles={"worker": 4, "ps": 2}, min_roles={"ps": 1, "worker": 2},
          creation=1)
    decisions = cycle(plan_, state, pure)
    roles = sorted(key.split("-")[1] for key in decisions.pipelined if state.pods[key].group == "preemptor")
    assert roles.count("ps") >= 1 and roles.count("worker") >= 2, (roles, decisions.evictions)


# --- hard network topology (GP-T1..T4) -------------------------------------------------------

def hard(tier: int) -> NetworkTopology:
    return NetworkTopology("hard", tier, None)


@pytest.mark.parametrize("plan_", [GANG_PREEMPT, LEGACY_PREEMPT], ids=["gang_preempt", "preempt"])
def test_gpt1_hard_tier1_preemptor_evicts_within_one_switch(plan_, pure):
    """GP-T1 (4 nodes of 8 cpu in Volcano; 1 cpu here, one pod each): a low gang of 4 (min 2, hard
    tier 2), a high gang of 2 (min 2, hard tier 1): its victims and its pods share one switch."""
    state = cluster()
    switches(state)
    group(state, "victim", 4, 2, LOW, running_on=["n0", "n2", "n1", "n3"], topology=hard(2))
    group(state, "preemptor", 2, 2, HIGH, topology=hard(1), creation=1)
    decisions = cycle(plan_, state, pure)
    got = outcome(state, decisions)
    where = set(got.pipelined["preemptor"])
    assert where in ({"n0", "n1"}, {"n2", "n3"}) and got.evicted == {"victim": 2}
    assert {state.pods[e.pod].node_name for e in decisions.evictions} == where


@pytest.mark.parametrize("plan_", [GANG_PREEMPT, LEGACY_PREEMPT], ids=["gang_preempt", "preempt"])
def test_gpt2_hard_tier1_preemption_blocked_when_no_switch_holds_the_gang(plan_, pure):
    """GP-T2: 3 pods of 5 cpu cannot fit into a switch of two 8-cpu nodes: nothing is evicted."""
    state = cluster(cpu=8000)
    switches(state)
    group(state, "victim", 4, 4, LOW, running_on=["n0", "n1", "n2", "n3"], topology=hard(2))
    group(state, "preemptor", 3, 3, HIGH, cpu=5000, topology=hard(1), creation=1)
    decisions = cycle(plan_, state, pure)
    assert not decisions.evictions and not decisions.pipelined


def test_gpt3_hard_tier2_preemption_uses_the_wider_domain(pure):
    """GP-T3: a high gang of 3 (hard tier 2) needs both switches."""
    state = cluster()
    switches(state)
    group(state, "victim", 4, 2, LOW, running_on=["n0", "n1", "n2", "n3"], topology=hard(2))
    group(state, "preemptor", 3, 3, HIGH, topology=hard(2), creation=1)
    state_plan = plan("enqueue, allocate, gang_preempt, backfill")
    got = outcome(state, cycle(state_plan, state, pure))
    # The victim's surplus (2) is not enough; its whole gang goes.
    assert got.evicted == {"victim": 4} and len(got.pipelined["preemptor"]) == 3


@pytest.mark.parametrize("plan_", [GANG_PREEMPT, LEGACY_PREEMPT], ids=["gang_preempt", "preempt"])
def test_gpt4_hard_tier2_preemptor_lands_in_one_switch_when_one_suffices(plan_, pure):
    """GP-T4: tier 2 allowed, tier 1 tried first: the preemptor lands within one switch."""
    state = cluster()
    switches(state)
    group(state, "victim", 4, 2, LOW, running_on=["n0", "n2", "n1", "n3"], topology=hard(2))
    group(state, "preemptor", 2, 2, HIGH, topology=hard(2), creation=1)
    got = outcome(state, cycle(plan_, state, pure))
    assert set(got.pipelined["preemptor"]) in ({"n0", "n1"}, {"n2", "n3"}) and got.evicted == {"victim": 2}


# --- GangReclaim E2E Test ---------------------------------------------------------------------

def queues(state: ClusterState, deserved_cpu: dict[str, int], reclaimable: dict[str, bool] | None = None,
           guarantee_cpu: dict[str, int] | None = None) -> None:
    for name, cpu in deserved_cpu.items():
        guarantee = (guarantee_cpu or {}).get(name)
        state.add_queue(QueueObject(name, deserved={"cpu": cpu * 1000},
                                    guarantee={"cpu": guarantee * 1000} if guarantee else None,
                                    reclaimable=(reclaimable or {}).get(name, True)))


def test_gr1_safe_bundle_reclaim_keeps_the_victim_gang(pure):
    """GR-1: q2's gang of 4 (min 2) overuses its deserved 2; q1's gang of 2 takes its surplus."""
    state = cluster()
    queues(state, {"q1": 2, "q2": 2})
    group(state, "victim", 4, 2, LOW, queue="q2", running_on=["n0", "n1", "n2", "n3"])
    group(state, "reclaimer", 2, 2, LOW, queue="q1", creation=1)
    got = outcome(state, cycle(GANG_RECLAIM, state, pure))
    assert got.evicted == {"victim": 2} and len(got.pipelined["reclaimer"]) == 2


def test_gr2_whole_bundle_reclaim_breaks_exactly_one_gang(pure):
    """GR-2: two tight gangs in q2 (2 of min 2): one goes whole."""
    state = cluster()
    queues(state, {"q1": 2, "q2": 2})
    group(state, "victim-a", 2, 2, LOW, queue="q2", running_on=["n0", "n1"])
    group(state, "victim-b", 2, 2, LOW, queue="q2", running_on=["n2", "n3"])
    group(state, "reclaimer", 2, 2, LOW, queue="q1", creation=1)
    got = outcome(state, cycle(GANG_RECLAIM, state, pure))
    assert list(got.evicted.values()) == [2] and len(got.pipelined["reclaimer"]) == 2


def test_gr4_no_reclaim_from_queues_within_their_deserved(pure):
    """GR-4."""
    state = cluster()
    queues(state, {"q1": 2, "q2": 2, "q3": 2})
    group(state, "job-q2", 2, 2, LOW, queue="q2", running_on=["n0", "n1"])
    group(state, "job-q3", 2, 2, LOW, queue="q3", running_on=["n2", "n3"])
    group(state, "reclaimer", 2, 2, LOW, queue="q1", creation=1)
    decisions = cycle(GANG_RECLAIM, state, pure)
    assert not decisions.evictions and not decisions.pipelined


def test_gr5_no_reclaim_from_a_queue_that_is_not_reclaimable(pure):
    """GR-5."""
    state = cluster()
    queues(state, {"q1": 2, "q2": 2}, reclaimable={"q2": False})
    group(state, "victim", 4, 2, LOW, queue="q2", running_on=["n0", "n1", "n2", "n3"])
    group(state, "reclaimer", 2, 2, LOW, queue="q1", creation=1)
    decisions = cycle(GANG_RECLAIM, state, pure)
    assert not decisions.evictions and not decisions.pipelined


def test_gr6_reclaim_stops_at_the_guarantee(pure):
    """GR-6: q2 (deserved = guarantee = 2) runs 4; q1 needs 4 but only 2 are above the guarantee:
    nothing is evicted."""
    state = cluster()
    queues(state, {"q1": 4, "q2": 2}, guarantee_cpu={"q2": 2})
    group(state, "victim", 4, 2, LOW, queue="q2", running_on=["n0", "n1", "n2", "n3"])
    group(state, "reclaimer", 4, 4, LOW, queue="q1", creation=1)
    decisions = cycle(GANG_RECLAIM, state, pure)
    assert not decisions.evictions and not decisions.pipelined


def test_gr7_an_overused_queue_does_not_reclaim(pure):
    """GR-7: q1 (deserved 1) already runs 2; it reclaims nothing from q2 (deserved 3, runs 2)."""
    state = cluster()
    queues(state, {"q1": 1, "q2": 3})
    group(state, "q1-running", 2, 2, LOW, queue="q1", running_on=["n0", "n1"])
    group(state, "q2-running", 2, 2, LOW, queue="q2", running_on=["n2", "n3"])
    group(state, "reclaimer", 2, 2, LOW, queue="q1", creation=1)
    decisions = cycle(GANG_RECLAIM, state, pure)
    assert not decisions.evictions and not decisions.pipelined


def test_grt1_hard_tier1_reclaimer_within_one_switch(pure):
    """GR-T1."""
    state = cluster()
    switches(state)
    queues(state, {"q1": 2, "q2": 2})
    group(state, "victim", 4, 2, LOW, queue="q2", running_on=["n0", "n2", "n1", "n3"], topology=hard(2))
    group(state, "reclaimer", 2, 2, LOW, queue="q1", topology=hard(1), creation=1)
    got = outcome(state, cycle(GANG_RECLAIM, state, pure))
    assert set(got.pipelined["reclaimer"]) in ({"n0", "n1"}, {"n2", "n3"}) and got.evicted == {"victim": 2}


# --- pkg/scheduler/actions/{gangpreempt,gangreclaim,utils} unit tests -----------------------------

def test_select_domain_victims_respect_allow_whole_bundle(pure):
    """TestSelectDomainVictims_RespectAllowWholeBundle: a one-pod job (min 1) running its pod offers
    only a WHOLE bundle: a victim with whole_gangs, none without."""
    for plan_, evicted in ((GANG_PREEMPT, ["ns/victim-0"]), (NO_WHOLE, [])):
        state = cluster(nodes=1)
        group(state, "victim", 1, 1, LOW, running_on=["n0"])
        group(state, "preemptor", 1, 1, HIGH, creation=1)
        assert [e.pod for e in cycle(plan_, state, pure).evictions] == evicted


@pytest.mark.parametrize("setting, evicted", [(False, []), (None, ["ns/victim-0"])], ids=["false", "unset"])
def test_select_domain_victims_respect_victim_job_preemptable(setting, evicted, pure):
    """TestSelectDomainVictims_RespectVictimJobPreemptable / _AllowVictimJobWhenPreemptableUnset
    (both actions): a PodGroup that is not preemptable offers nothing; unset, it may be a victim."""
    state = cluster(nodes=1)
    group(state, "victim", 1, 1, LOW, running_on=["n0"], preemptable=setting)
    group(state, "preemptor", 1, 1, HIGH, creation=1)
    assert [e.pod for e in cycle(GANG_PREEMPT, state, pure).evictions] == evicted


def test_select_domain_victims_reclaimable_cross_queue_only(pure):
    """TestSelectDomainVictims_ReclaimableCrossQueueOnly: of two victims in other queues, only the one
    of a reclaimable queue goes."""
    state = cluster(nodes=1, cpu=2000)
    queues(state, {"q1": 1, "q2": 0, "q3": 0}, reclaimable={"q3": False})
    group(state, "victim", 1, 1, LOW, queue="q2", running_on=["n0"])
    group(state, "other", 1, 1, LOW, queue="q3", running_on=["n0"])
    group(state, "reclaimer", 1, 1, HIGH, queue="q1", creation=1)
    assert [e.pod for e in cycle(GANG_RECLAIM, state, pure).evictions] == ["ns/victim-0"]


def test_create_job_bundles_safe_and_whole(pure):
    """TestCreateJobBundles_SafeAndWhole: 5 running of min 3: 2 SAFE, the rest WHOLE. A preemptor
    of 2 takes the 2 SAFE pods (lowest priority first); one of 3 takes the whole job."""
    for size, evicted in ((2, 2), (3, 5)):
        state = cluster(nodes=5)
        group(state, "victim", 5, 3, LOW, running_on=[f"n{i}" for i in range(5)])
        group(state, "preemptor", size, size, HIGH, creation=1)
        assert outcome(state, cycle(GANG_PREEMPT, state, pure)).evicted == {"victim": evicted}


def test_apply_allowed_tasks_whole_bundle_is_atomic(pure):
    """TestApplyAllowedTasks_WholeAtomicAndSafeShrink: a WHOLE bundle with one task the voters keep
    (a pod that says volcano.sh/preemptable: false) is not a bundle at all."""
    state = cluster()
    group(state, "victim", 4, 4, LOW, running_on=["n0", "n1", "n2", "n3"])
    state.pods["ns/victim-3"].annotations["volcano.sh/preemptable"] = "false"
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    decisions = cycle(GANG_PREEMPT, state, pure)
    assert not decisions.evictions


def test_the_boundary_safe_bundle_is_trimmed(pure):
    """volcano#5984 (fixed by our selection, open in Volcano): a victim of 11 pods (min 1), a
    preemptor needing one pod's room: one pod is evicted, not the 10 of the SAFE bundle."""
    state = cluster(nodes=1, cpu=11000)
    group(state, "victim", 11, 1, LOW, running_on=["n0"] * 11)
    group(state, "preemptor", 1, 1, HIGH, creation=1)
    assert outcome(state, cycle(GANG_PREEMPT, state, pure)).evicted == {"victim": 1}


def test_safe_bundles_are_taken_before_a_whole_gang(pure):
    """Gang a (2 of min 2) offers a WHOLE bundle, job b (min 0) two SAFE ones: b's pods go, a stays."""
    state = cluster()
    group(state, "a", 2, 2, LOW, running_on=["n0", "n1"])
    group(state, "b", 2, 0, LOW, running_on=["n2", "n3"])
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    assert outcome(state, cycle(GANG_PREEMPT, state, pure)).evicted == {"b": 2}


# --- the property ----------------------------------------------------------------------------

@st.composite
def scenarios(draw):
    nodes = draw(st.integers(2, 6))
    slots = draw(st.integers(1, 3))                    # pods of 1 cpu per node
    topo = draw(st.booleans())
    victims = draw(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6), st.integers(0, 2)), min_size=2,
                            max_size=5))
    preemptor = draw(st.tuples(st.integers(1, 4), st.integers(1, 4)))
    tier = draw(st.sampled_from([1, 2, 3]))
    whole = draw(st.booleans())
    seed = draw(st.randoms(use_true_random=False))
    shares = draw(st.booleans())           # proportion's queue check too (one queue: the whole cluster)
    mode = draw(st.sampled_from(["hard", "hard", "soft"]))
    return nodes, slots, topo, victims, preemptor, tier, whole, seed, shares, mode


def leaves(state: ClusterState) -> dict[str, set[str]]:
    """HyperNode -> node names, walked here from the members (not the engine's resolution)."""
    def walk(name: str) -> set[str]:
        out: set[str] = set()
        for m in state.hypernodes[name].members:
            out |= {m.exact} if m.type == "Node" else walk(m.exact)
        return out
    return {name: walk(name) for name in state.hypernodes}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_bundles_are_whole_needed_and_within_the_tier(spec, pure):
    """Over generated clusters: a victim gang keeps at least its minimum or loses every running pod;
    the preemptor's pipelined pods fit the room left (counted here) and lie within one HyperNode of
    its tier (a soft one: anywhere); and every evicted bundle is needed: with any one of them kept,
    the pods the preemptor needs do not fit in the tightest HyperNode holding them (counted here:
    pods of 1 cpu, so a node holds as many as its free cpu)."""
    nodes, slots, topo, victims, (size, min_member), tier, whole, rng, shares, mode = spec
    min_member = min(min_member, size)
    state = cluster(nodes, cpu=1000 * slots)
    names = [f"n{i}" for i in range(nodes)]
    if topo:
        half = (nodes + 1) // 2
        state.add_hypernode(HyperNode("s0", 1, "", tuple(Member("Node", exact=n) for n in names[:half])))
        state.add_hypernode(HyperNode("s1", 1, "", tuple(Member("Node", exact=n) for n in names[half:])))
        state.add_hypernode(HyperNode("top", 2, "", (Member("HyperNode", exact="s0"), Member("HyperNode", exact="s1"))))
    free = {n: slots for n in names}
    for v, (vsize, vmin, prio) in enumerate(victims):
        where = []
        for _ in range(vsize):
            choices = [n for n in names if free[n] > 0]
            if not choices:
                break
            n = rng.choice(choices)
            free[n] -= 1
            where.append(n)
        if where:
            group(state, f"v{v}", len(where), min(vmin, len(where)), LOW + prio, running_on=where)
    request = NetworkTopology(mode, tier, None) if topo else None
    group(state, "p", size, min_member, HIGH, topology=request, creation=1)
    settings_text = "" if whole else "action gang_preempt {\n  whole_gangs = false\n}\n"
    tiers = PREEMPT_TIERS.replace("plugin nodeorder", "plugin nodeorder\n  plugin proportion") if shares else PREEMPT_TIERS
    decisions = cycle(plan("enqueue, allocate, gang_preempt, backfill", tiers, settings_text), state, pure)

    evicted = {e.pod for e in decisions.evictions}
    preemptor = {k: n for k, n in decisions.pipelined.items() if state.pods[k].group == "p"}
    bound = {b.pod: b.node for b in decisions.bindings if state.pods[b.pod].group == "p"}
    if not evicted:
        return
    # Evictions buy something: the preemptor is pipelined to its minimum.
    assert len(preemptor) + len(bound) >= max(min_member, 1)
    # Whole or untouched beyond the spare.
    running = {}
    for key, p in state.pods.items():
        if p.node_name and p.group != "p":
            running.setdefault(p.group, set()).add(key)
    for job, pods in running.items():
        gone = pods & evicted
        if gone:
            minimum = state.podgroups[f"ns/{job}"].min_member
            assert gone == pods and whole or len(pods) - len(gone) >= minimum, (job, len(pods), len(gone), minimum)
    # Within its tier.
    where = set(preemptor.values()) | set(bound.values())
    domain = set(names)
    if topo:
        sets = leaves(state)
        reach = tier if mode == "hard" else 3         # soft: any tier, then the cluster
        fitting = [sets[h] for h, hn in state.hypernodes.items() if hn.tier <= reach and where <= sets[h]]
        if reach < 3:
            assert fitting, (where, tier)
        if fitting:
            domain = min(fitting, key=len)
        if mode == "soft" and whole and not bound:
            # Every running pod may go (whole gangs of lower priority): a switch with the slots
            # for the preemptor's pods holds them, and a soft preemptor takes the tightest.
            switch_slots = [len(sets[h]) * slots for h, hn in state.hypernodes.items() if hn.tier == 1]
            if any(room >= len(preemptor) for room in switch_slots):
                assert any(where <= sets[h] for h, hn in state.hypernodes.items() if hn.tier == 1), where
    # The room left holds the preemptor's pods; each bundle is needed.
    def room(kept: set[str]) -> dict[str, int]:
        used = {n: 0 for n in names}
        for key, p in state.pods.items():
            if p.node_name and (key not in evicted or key in kept):
                used[p.node_name] += 1
        return {n: slots - used[n] for n in names}

    left = room(set())
    for n in where:
        assert list(preemptor.values()).count(n) + list(bound.values()).count(n) <= left[n]
    needed = len(preemptor) + len(bound)
    bundles: list[set[str]] = []
    for job, pods in running.items():
        gone = pods & evicted
        if len(gone) > len(pods) - state.podgroups[f"ns/{job}"].min_member:
            bundles.append(gone)               # whole
        else:
            bundles.extend({k} for k in gone)  # safe, one by one
    for b in bundles:
        without = room(b)
        fits = sum(max(without[n], 0) for n in domain)
        assert fits < needed, f"bundle {sorted(b)} was not needed"


def test_a_hard_gang_takes_idle_room_beside_its_victims_within_its_switch(pure):
    """Each switch has one idle node and one running a low pod; a high gang of 2 (hard tier 1)
    evicts one low pod and takes that switch's idle node too, under proportion's queue check
    (its reservations counted once). preempt too: a hard gang's pods go on idle room within its
    HyperNode first (Volcano places a preemptor only where it evicts, and skips such jobs)."""
    for actions, evicted in (("enqueue, allocate, gang_preempt, gang_reclaim, backfill", 1),
                             ("enqueue, allocate, preempt, reclaim, backfill", 1)):
        state = cluster()
        switches(state)
        for n in ("n0", "n2"):
            pod(state, f"low-{n}", cpu=1000, memory=GiB // 4, node_name=n, priority=LOW)
        group(state, "high", 2, 2, HIGH, topology=hard(1), creation=1)
        tiers = PREEMPT_TIERS.replace("plugin nodeorder", "plugin nodeorder\n  plugin proportion")
        decisions = cycle(plan(actions, tiers), state, pure)
        where = set(outcome(state, decisions).pipelined.get("high", []))
        assert len(decisions.evictions) == evicted
        assert where in ({"n0", "n1"}, {"n2", "n3"}) if evicted else not where


def test_backfill_places_a_hard_gangs_best_effort_pods_within_its_switch(pure):
    """A hard tier-1 job runs one pod on n2; its two pods that request nothing join it in s1 (n2,
    n3), never in s0 (backfill skipped such jobs before). With s1's nodes out of pod slots, they
    wait, saying why."""
    for slots, expect in ((110, {"n2", "n3"}), (1, set())):
        state = ClusterState()
        for i in range(4):
            node(state, f"n{i}", cpu=1000, memory=8 * GiB, pods=slots if i >= 2 else 110)
        switches(state)
        state.add_podgroup(PodGroup("ns", "hard", min_member=1, phase="Running", uid="pg-hard",
                                    network_topology=hard(1)))
        pod(state, "hard-run", cpu=0, memory=0, group="hard", node_name="n2", priority=LOW)
        for i in range(2):
            pod(state, f"hard-be-{i}", cpu=0, memory=0, group="hard", priority=LOW)
        decisions = cycle(GANG_PREEMPT, state, pure)
        where = {b.node for b in decisions.bindings}
        if expect:
            assert len(decisions.bindings) == 2 and where <= expect
        else:
            assert not decisions.bindings
            reasons = {r.message for u in decisions.unschedulable for r in u.reasons}
            assert any("HyperNode" in m for m in reasons), reasons


def test_a_whole_gangs_room_stays_reserved_until_the_preemptor_binds(pure):
    """GP-3 over cycles: the preemptor's pods are nominated; while the evicted gang leaves, its room
    is held for them (reservations), and they bind once it has left: every eviction bought."""
    from runtime.engine.evictions import EvictionAudit, eviction_jobs, eviction_queues
    state = cluster()
    group(state, "victim-a", 2, 2, LOW, running_on=["n0", "n1"])
    group(state, "victim-b", 2, 2, LOW, running_on=["n2", "n3"])
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    audit = EvictionAudit()
    bound: dict[str, str] = {}
    for step in range(4):
        decisions = cycle(GANG_PREEMPT, state, pure)
        audit.record(step, decisions, eviction_queues(state, decisions), eviction_jobs(state, decisions))
        bound.update({b.pod: b.node for b in decisions.bindings})
        state.apply(decisions)
        state.advance()
    assert sorted(bound) == ["ns/preemptor-0", "ns/preemptor-1"]
    assert audit.bought == 2 and audit.wasted == 0 and audit.repeats == 0


def test_create_job_bundles_sub_job_group_slack_caps_safe(pure):
    """TestCreateJobBundles_SubJobGroupSlackCapsSafe: a victim of minMember 4 in 3 sub-groups of 2
    (minSubGroups 2), all running; pod priorities interleave the sub-groups (sg1's first pod lowest,
    then sg2's, ...). A preemptor needing 2 pods' room takes both pods of one sub-group: taking the
    two lowest (sg1's and sg2's first) would leave 1 ready sub-group, below minSubGroups, with the
    job still running; after sg1's first pod only pods of the broken sg1 are SAFE."""
    from runtime.cluster.model import Pod, SubGroupPolicy
    state = cluster(nodes=6)
    state.add_podgroup(PodGroup("ns", "victim", min_member=4, phase="Running", uid="pg-victim",
                                sub_groups=(SubGroupPolicy("part", 2, 2, None, ("sg",)),)))
    for rank, (sg, i) in enumerate([(1, "a"), (2, "a"), (3, "a"), (1, "b"), (2, "b"), (3, "b")]):
        state.add_pod(Pod("ns", f"t{sg}{i}", {"cpu": 1000, "memory": GiB // 4}, uid=f"t{sg}{i}",
                          node_name=f"n{rank}", phase="Running", group="victim", priority=LOW + rank,
                          labels={"sg": str(sg)}))
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    decisions = cycle(GANG_PREEMPT, state, pure)
    assert sorted(e.pod for e in decisions.evictions) == ["ns/t1a", "ns/t1b"]
