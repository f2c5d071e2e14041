"""Jobs with sub-groups (a PodGroup's `spec.subGroupPolicy`, Volcano's SubJobs) as preemptors and
reclaimers (preempt, reclaim, gang_preempt, gang_reclaim) and in backfill, on both kernels: placed
sub-group by sub-group, each within one HyperNode of its own tier inside the job's HyperNode, the
victims chosen inside that HyperNode, the fewest that do.

Volcano v1.14.1 has no table for this: its preempt skips every job containing network topology, the
job's or a sub-group's (preempt.go, "jobs containing networkTopology do not support preemption",
volcano#4374), and its reclaim and backfill place such jobs' pods wherever they evict or fit,
ignoring the tiers (runtime/README.md says where we differ). The cases here are ours; every
outcome is checked by `hard_ok` of tests/runtime/test_subgroups.py, a checker written from the
pods' labels, the policies and the HyperNodes' members, not with the engine's code.
"""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, NetworkTopology, Pod, PodGroup, SubGroupPolicy
from runtime.cluster.topology import HyperNode, Member
from runtime_helpers import GiB, cycle, node, placements
from test_gang_preempt import HIGH, LOW, PREEMPT_TIERS, RECLAIM_TIERS, cluster, group, outcome, plan, queues, switches
from test_subgroups import hard_ok

PREEMPT = plan("enqueue, allocate, preempt, backfill")
GANG_PREEMPT = plan("enqueue, allocate, gang_preempt, backfill")
RECLAIM = plan("enqueue, allocate, reclaim, backfill", RECLAIM_TIERS)
GANG_RECLAIM = plan("enqueue, allocate, gang_reclaim, backfill", RECLAIM_TIERS)
PREEMPTING = {"preempt": PREEMPT, "gang_preempt": GANG_PREEMPT}
KEY = "volcano.sh/task-instance"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def hard(tier: int) -> NetworkTopology:
    return NetworkTopology("hard", tier, None)


def sub_job(state: ClusterState, name: str, groups: dict[str, int], size: int, min_member: int, priority: int,
            sub_topology: NetworkTopology | None = None, topology: NetworkTopology | None = None,
            queue: str = "default", running: dict[str, str] | None = None, min_groups: int = 0,
            zero: tuple[str, ...] = (), creation: float = 1.0) -> None:
    """A PodGroup with one subGroupPolicy (pods grouped by their `KEY` label): `groups` maps a
    label value to its pod count; pods are named <name>-<value>-<i>; `running` maps pod names to
    nodes; pods named in `zero` request nothing."""
    state.add_podgroup(PodGroup("ns", name, min_member=min_member, queue=queue,
                                phase="Running" if running else "Inqueue", uid=f"pg-{name}",
                                network_topology=topology, creation=creation,
                                sub_groups=(SubGroupPolicy("part", size, min_groups, None, (KEY,), sub_topology),)))
    i = 0
    for value, count in groups.items():
        for k in range(count):
            pod_name = f"{name}-{value}-{k}"
            where = (running or {}).get(pod_name)
            requests = {} if pod_name in zero else {"cpu": 1000, "memory": GiB // 4}
            state.add_pod(Pod("ns", pod_name, requests, uid=f"uid-{pod_name}", node_name=where, group=name,
                              phase="Running" if where else "Pending", priority=priority,
                              creation=creation + i / 100, labels={KEY: value}))
            i += 1


def fillers(state: ClusterState, nodes: list[str], priority: int = LOW, queue: str = "default") -> None:
    """One low one-pod job per node, filling its one cpu."""
    for n in nodes:
        group(state, f"low-{n}", 1, 1, priority, queue=queue, running_on=[n])


def switch_of(where: list[str]) -> str | None:
    tiers = [{"n0", "n1"}, {"n2", "n3"}]
    for i, s in enumerate(tiers):
        if set(where) <= s:
            return f"s{i}"
    return None


def check(state: ClusterState, decisions) -> None:
    assert hard_ok(state, {**placements(decisions), **decisions.pipelined})


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_each_sub_group_preempts_within_its_own_switch(action, pure):
    """Every node runs a low pod; a high job of two sub-groups of 2 (hard tier 1 each; the job
    itself hard tier 2) needs the whole cluster: each sub-group's pods and victims share one
    switch. Before, such a job was never a preemptor."""
    state = cluster()
    switches(state)
    fillers(state, ["n0", "n1", "n2", "n3"])
    sub_job(state, "high", {"a": 2, "b": 2}, 2, 4, HIGH, hard(1), hard(2))
    decisions = cycle(PREEMPTING[action], state, pure)
    check(state, decisions)
    got = outcome(state, decisions)
    assert len(decisions.evictions) == 4 and len(got.pipelined["high"]) == 4
    for value in ("a", "b"):
        where = [w for k, w in decisions.pipelined.items() if k.startswith(f"ns/high-{value}-")]
        assert len(where) == 2 and switch_of(where) is not None


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_a_sub_group_takes_idle_room_beside_its_victims_and_evicts_no_more(action, pure):
    """s0 has one idle node (n1) and one low pod (n0); s1 runs two low pods. A high sub-group of 2
    (hard tier 1) needs idle room plus freed room: one eviction in s0, not two in s1, and
    never one in s1 beside one in s0."""
    state = cluster()
    switches(state)
    fillers(state, ["n0", "n2", "n3"])
    sub_job(state, "high", {"a": 2}, 2, 2, HIGH, hard(1))
    decisions = cycle(PREEMPTING[action], state, pure)
    check(state, decisions)
    assert [e.pod for e in decisions.evictions] == ["ns/low-n0-0"]
    assert sorted(outcome(state, decisions).pipelined["high"]) == ["n0", "n1"]


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_victims_are_the_cheapest_switch_s(action, pure):
    """Both switches are full; s0's pods have a higher priority than s1's: the sub-group evicts in
    s1 only (the lowest highest-victim priority), not the lowest pod of each switch."""
    state = cluster()
    switches(state)
    fillers(state, ["n0"], priority=LOW + 5)
    fillers(state, ["n1"], priority=LOW)
    fillers(state, ["n2", "n3"], priority=LOW + 1)
    sub_job(state, "high", {"a": 2}, 2, 2, HIGH, hard(1))
    decisions = cycle(PREEMPTING[action], state, pure)
    check(state, decisions)
    assert sorted(e.pod for e in decisions.evictions) == ["ns/low-n2-0", "ns/low-n3-0"]


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_no_switch_can_hold_the_sub_group_so_nothing_is_evicted(action, pure):
    """A sub-group of 3 (hard tier 1) over switches of 2 nodes: no eviction could place it, so
    none is made (no wasted eviction)."""
    state = cluster()
    switches(state)
    fillers(state, ["n0", "n1", "n2", "n3"])
    sub_job(state, "high", {"a": 3}, 3, 3, HIGH, hard(1))
    decisions = cycle(PREEMPTING[action], state, pure)
    assert not decisions.evictions and not decisions.pipelined


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_a_sub_group_joins_its_running_members_switch(action, pure):
    """One pod of sub-group a runs on n2 (s1); its other pod evicts within s1 (n3), not on s0's
    cheaper pods."""
    state = cluster()
    switches(state)
    fillers(state, ["n0", "n1"], priority=LOW)
    fillers(state, ["n3"], priority=LOW + 5)
    sub_job(state, "high", {"a": 2}, 2, 2, HIGH, hard(1), running={"high-a-0": "n2"})
    decisions = cycle(PREEMPTING[action], state, pure)
    check(state, decisions)
    assert [e.pod for e in decisions.evictions] == ["ns/low-n3-0"]
    assert decisions.pipelined == {"ns/high-a-1": "n3"}


def test_min_sub_groups_is_what_the_preemptor_needs(pure):
    """Three sub-groups of 2 (hard tier 1), minSubGroups 1, minMember 2: the job is pipelined
    with one sub-group, so only one switch's pods are evicted."""
    state = cluster()
    switches(state)
    fillers(state, ["n0", "n1", "n2", "n3"])
    sub_job(state, "high", {"a": 2, "b": 2, "c": 2}, 2, 2, HIGH, hard(1), min_groups=1)
    decisions = cycle(PREEMPT, state, pure)
    check(state, decisions)
    assert len(decisions.evictions) == 2
    assert switch_of(list(decisions.pipelined.values())) is not None


def test_gang_preempt_evicts_one_whole_gang_for_a_sub_group(pure):
    """Two tight low gangs (2 of min 2), one per switch; a high sub-group of 2 (hard tier 1): one
    gang goes whole, its switch is the sub-group's."""
    state = cluster()
    switches(state)
    group(state, "victim-a", 2, 2, LOW, running_on=["n0", "n1"])
    group(state, "victim-b", 2, 2, LOW, running_on=["n2", "n3"])
    sub_job(state, "high", {"a": 2}, 2, 2, HIGH, hard(1))
    decisions = cycle(GANG_PREEMPT, state, pure)
    check(state, decisions)
    got = outcome(state, decisions)
    assert list(got.evicted.values()) == [2]
    assert switch_of(got.pipelined["high"]) == ("s0" if "victim-a" in got.evicted else "s1")


@pytest.mark.parametrize("plan_", [RECLAIM, GANG_RECLAIM], ids=["reclaim", "gang_reclaim"])
def test_a_sub_group_reclaims_within_one_switch(plan_, pure):
    """q2 (deserved 2) runs 4 low pods, one per node, spread over both switches; q1 (deserved 2)
    has a sub-group of 2 (hard tier 1): it reclaims the two pods of one switch."""
    state = cluster()
    switches(state)
    queues(state, {"q1": 2, "q2": 2})
    group(state, "victim", 4, 1, LOW, queue="q2", running_on=["n0", "n2", "n1", "n3"])
    sub_job(state, "reclaimer", {"a": 2}, 2, 2, LOW, hard(1), queue="q1")
    decisions = cycle(plan_, state, pure)
    check(state, decisions)
    got = outcome(state, decisions)
    assert got.evicted == {"victim": 2} and switch_of(got.pipelined["reclaimer"]) is not None
    evicted_at = {state.pods[e.pod].node_name for e in decisions.evictions}
    assert evicted_at == set(got.pipelined["reclaimer"])


def test_backfill_places_a_sub_groups_best_effort_pods_in_its_switch(pure):
    """Sub-group a (hard tier 1) runs a pod on n2; its two pods that request nothing join it in s1,
    never in s0; sub-group b's (nothing placed) stay within one switch. With s1 out of pod slots,
    a's wait, saying why, and b's still land."""
    for slots in (110, 1):
        state = ClusterState()
        for i in range(4):
            node(state, f"n{i}", cpu=1000, memory=8 * GiB, pods=slots if i >= 2 else 110)
        switches(state)
        sub_job(state, "job", {"a": 3, "b": 2}, 1, 1, LOW, hard(1), running={"job-a-0": "n2"},
                zero=("job-a-1", "job-a-2", "job-b-0", "job-b-1"))
        decisions = cycle(PREEMPT, state, pure)
        check(state, decisions)
        bound = placements(decisions)
        a = [w for k, w in bound.items() if k.startswith("ns/job-a-")]
        b = [w for k, w in bound.items() if k.startswith("ns/job-b-")]
        assert len(b) == 2 and switch_of(b) is not None
        if slots > 1:
            assert len(a) == 2 and set(a) <= {"n2", "n3"}
        else:
            assert not a
            reasons = {r.message for u in decisions.unschedulable for r in u.reasons}
            assert any("sub-group a" in m for m in reasons), reasons


def test_a_three_tier_job_keeps_its_sub_groups_inside_its_hypernode(pure):
    """Tier 1: s0..s3 of 2 nodes; tier 2: t0 = {s0, s1}, t1 = {s2, s3}. Every node runs a low pod;
    a high job (hard tier 2) of two sub-groups of 2 (hard tier 1): both sub-groups in one tier-2
    HyperNode, each in one of its switches."""
    state = ClusterState()
    for i in range(8):
        node(state, f"n{i}", cpu=1000, memory=8 * GiB)
    for s in range(4):
        state.add_hypernode(HyperNode(f"s{s}", 1, "", (Member("Node", exact=f"n{2 * s}"),
                                                         Member("Node", exact=f"n{2 * s + 1}"))))
    for t in range(2):
        state.add_hypernode(HyperNode(f"t{t}", 2, "", (Member("HyperNode", exact=f"s{2 * t}"),
                                                         Member("HyperNode", exact=f"s{2 * t + 1}"))))
    fillers(state, [f"n{i}" for i in range(8)])
    sub_job(state, "high", {"a": 2, "b": 2}, 2, 4, HIGH, hard(1), hard(2))
    decisions = cycle(PREEMPT, state, pure)
    check(state, decisions)
    where = set(decisions.pipelined.values())
    assert len(decisions.evictions) == 4 and (where <= {f"n{i}" for i in range(4)}
                                                 or where <= {f"n{i}" for i in range(4, 8)})


def test_the_reservations_bind_and_every_eviction_is_bought(pure):
    """Over cycles: the sub-group job's pods are nominated, bind once their victims left, each in
    its switch; the eviction audit counts every eviction bought, none wasted or repeated."""
    from runtime.engine.evictions import EvictionAudit, eviction_jobs, eviction_queues
    for plan_ in (PREEMPT, GANG_PREEMPT):
        state = cluster()
        switches(state)
        fillers(state, ["n0", "n1", "n2", "n3"])
        sub_job(state, "high", {"a": 2, "b": 2}, 2, 4, HIGH, hard(1))
        audit = EvictionAudit()
        bound: dict[str, str] = {}
        for step in range(5):
            decisions = cycle(plan_, state, pure)
            check(state, decisions)
            audit.record(step, decisions, eviction_queues(state, decisions), eviction_jobs(state, decisions))
            bound.update({b.pod: b.node for b in decisions.bindings})
            state.apply(decisions)
            state.advance()
        assert sorted(bound) == [f"ns/high-{v}-{k}" for v in "ab" for k in range(2)]
        for v in "ab":
            assert switch_of([w for p, w in bound.items() if p.startswith(f"ns/high-{v}-")]) is not None
        assert audit.bought == 4 and audit.wasted == 0 and audit.repeats == 0



@pytest.mark.parametrize("sub_groups", [False, True], ids=["gang", "sub-groups"])
def test_reservations_bind_though_the_jobs_extra_pod_finds_no_room(sub_groups, pure):
    """A hard tier-1 job of 3 pods (minMember 2) over two full switches: gang_preempt evicts for
    2 in one switch; once the victims leave, allocate binds the 2 reservations although the third
    pod finds no room there (it used to pass the switch over for lacking that room, so the
    reservations never bound and their evictions were wasted)."""
    from runtime.engine.evictions import EvictionAudit, eviction_jobs, eviction_queues
    state = cluster()
    switches(state)
    fillers(state, ["n0", "n1", "n2", "n3"])
    if sub_groups:
        sub_job(state, "high", {"a": 3}, 1, 2, HIGH, None, hard(1))
    else:
        group(state, "high", 3, 2, HIGH, topology=hard(1), creation=1)
    audit = EvictionAudit()
    bound: dict[str, str] = {}
    for step in range(4):
        decisions = cycle(GANG_PREEMPT, state, pure)
        check(state, decisions)
        audit.record(step, decisions, eviction_queues(state, decisions), eviction_jobs(state, decisions))
        bound.update({b.pod: b.node for b in decisions.bindings})
        state.apply(decisions)
        state.advance()
    assert len(bound) == 2 and switch_of(list(bound.values())) is not None
    assert audit.bought == 2 and audit.wasted == 0 and audit.repeats == 0


@pytest.mark.parametrize("plan_", [PREEMPT, GANG_PREEMPT], ids=["preempt", "gang_preempt"])
@pytest.mark.parametrize("min_groups,evicted", [(2, 0), (1, 1)])
def test_a_victim_keeps_its_min_sub_groups(plan_, min_groups, evicted, pure):
    """A low job of two sub-groups of 2 (minMember 2) runs on every node; a high one-pod job needs
    one node. With minSubGroups 2 no pod of it may go (the job would run with one ready sub-group,
    below its minimum; Volcano's gang plugin counts only minMember and evicts one); with 1, one
    pod goes. gang_preempt (whole_gangs) may instead take the whole job, its only bundle then."""
    state = cluster()
    sub_job(state, "low", {"a": 2, "b": 2}, 2, 2, LOW, min_groups=min_groups,
            running={"low-a-0": "n0", "low-a-1": "n1", "low-b-0": "n2", "low-b-1": "n3"}, creation=0.0)
    group(state, "high", 1, 1, HIGH, creation=1)
    decisions = cycle(plan_, state, pure)
    gone = sorted(e.pod for e in decisions.evictions)
    if plan_ is GANG_PREEMPT and not evicted:
        assert gone in ([], [f"ns/low-{v}-{k}" for v in "ab" for k in range(2)])   # nothing, or WHOLE
    else:
        assert len(gone) == evicted


def test_beyond_max_domains_the_switch_with_idle_room_is_tried(pure):
    """Ten switches of 2 nodes, all full but s9, which has one idle node: a sub-group of 2 (hard
    tier 1) is tried in at most 8 switches a tier; s9 is among them (most idle room toward its
    need first), so one eviction does, not two."""
    state = ClusterState()
    names = []
    for s in range(10):
        members = [f"s{s}a", f"s{s}b"]
        names += members
        for n in members:
            node(state, n, cpu=1000, memory=8 * GiB)
        state.add_hypernode(HyperNode(f"s{s}", 1, "", tuple(Member("Node", exact=n) for n in members)))
    fillers(state, [n for n in names if n != "s9b"])
    sub_job(state, "high", {"a": 2}, 2, 2, HIGH, hard(1))
    decisions = cycle(PREEMPT, state, pure)
    check(state, decisions)
    assert [e.pod for e in decisions.evictions] == ["ns/low-s9a-0"]
    assert sorted(decisions.pipelined.values()) == ["s9a", "s9b"]


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_a_queue_at_its_share_preempts_within_itself(action, pure):
    """Under proportion the default queue already holds the whole cluster (its deserved share):
    the sub-group may take its room only with its victims gone, so the queue is asked then, not
    before (the dev-cluster test found this: asked before, nothing was ever evicted)."""
    tiers = PREEMPT_TIERS.replace("plugin nodeorder", "plugin nodeorder\n  plugin proportion")
    state = cluster()
    switches(state)
    fillers(state, ["n0", "n1", "n2", "n3"])
    sub_job(state, "high", {"a": 2}, 2, 2, HIGH, hard(1))
    decisions = cycle(plan(f"enqueue, allocate, {action}, backfill", tiers), state, pure)
    check(state, decisions)
    assert len(decisions.evictions) == 2 and switch_of(list(decisions.pipelined.values())) is not None


def victim_with_sub_groups(state: ClusterState, min_member: int, min_groups: int,
                           pods: list[tuple[str, str, int]]) -> None:
    """A running victim job of sub-groups of 2 (label `sg`): pods (name, sub-group, priority), one
    per node n0, n1, ... in order."""
    state.add_podgroup(PodGroup("ns", "victim", min_member=min_member, phase="Running", uid="pg-victim",
                                sub_groups=(SubGroupPolicy("part", 2, min_groups, None, ("sg",)),)))
    for rank, (name, sg, priority) in enumerate(pods):
        state.add_pod(Pod("ns", name, {"cpu": 1000, "memory": GiB // 4}, uid=name, node_name=f"n{rank}",
                          phase="Running", group="victim", priority=priority, labels={"sg": sg}))


@pytest.mark.parametrize("action", sorted(PREEMPTING))
def test_an_already_broken_sub_group_is_the_one_to_lose_more(action, pure):
    """Volcano v1.15's TestCreateJobBundles_AlreadyBrokenSubJobIsSubjectToFurtherEviction, through
    preempt as well as gang_preempt: minMember 3, minSubGroups 2; sj1 runs 1 of its 2 pods
    (broken), sj2 and sj3 are ready. Only sj1's pod may go (taking any other breaks a second
    sub-group, one ready left): here it has a higher priority than sj2a, the lowest."""
    state = cluster(nodes=5)
    victim_with_sub_groups(state, 3, 2, [("sj1a", "1", LOW + 5), ("sj2a", "2", LOW), ("sj2b", "2", LOW + 1),
                                         ("sj3a", "3", LOW + 2), ("sj3b", "3", LOW + 3)])
    group(state, "preemptor", 1, 1, HIGH, creation=1)
    decisions = cycle(PREEMPTING[action], state, pure)
    assert [e.pod for e in decisions.evictions] == ["ns/sj1a"]


def test_group_slack_caps_what_preempt_takes(pure):
    """Volcano v1.15's TestCreateJobBundles_SubJobGroupSlackCapsSafe, through preempt (the
    gang_preempt translation is tests/runtime/test_gang_preempt.py's): minMember 4, three ready
    sub-groups of 2, minSubGroups 2; a preemptor of 2 pods takes both pods of one sub-group, not
    the two lowest (sg1's and sg2's first), which would leave one ready sub-group."""
    state = cluster(nodes=6)
    victim_with_sub_groups(state, 4, 2, [(f"t{sg}{i}", str(sg), LOW + rank) for rank, (sg, i) in
                                         enumerate([(1, "a"), (2, "a"), (3, "a"), (1, "b"), (2, "b"), (3, "b")])])
    group(state, "preemptor", 2, 2, HIGH, creation=1)
    decisions = cycle(PREEMPT, state, pure)
    assert sorted(e.pod for e in decisions.evictions) == ["ns/t1a", "ns/t1b"]
