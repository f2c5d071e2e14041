"""Properties of jobs with sub-groups under preempt, reclaim, gang_preempt, gang_reclaim and
backfill, on both kernels, over generated clusters (switches of 2-3 nodes under one spine, low pods
and gangs filling them, one or two high jobs with a subGroupPolicy, some of their pods requesting
nothing, some already running), cycle after cycle with the decisions applied:

- (the high jobs are now and then plain gangs, hard ones among them, which preempt and reclaim
  place on idle room in their HyperNode before evicting there)
- no hard job or hard sub-group spans above its tier, counting pods bound, pipelined and reserved
  (nominated) — `hard_ok`, the independent checker of tests/runtime/test_subgroups.py;
- every eviction is for a job then pipelined: its pods running, pipelined or nominated reach its
  minMember and, per policy, minSubGroups sub-groups of subGroupSize (counted here from the pods'
  labels, not with the engine's code);
- the eviction audit counts no eviction wasted, none repeated, no room traded, and every eviction
  bought once the cycles have run.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.model import ClusterState, NetworkTopology, Pod, PodGroup, QueueObject, SubGroupPolicy
from runtime.cluster.topology import HyperNode, Member
from runtime.engine.evictions import EvictionAudit, eviction_jobs, eviction_queues
from runtime_helpers import GiB, cycle, node
from test_gang_preempt import PREEMPT_TIERS, RECLAIM_TIERS, plan
from test_subgroups import hard_ok

KEY = "volcano.sh/task-instance"
# proportion in the preempting policies: the queue then holds its whole share and may take a
# preemptor's pods only with its victims gone.
WITH_SHARES = PREEMPT_TIERS.replace("plugin nodeorder", "plugin nodeorder\n  plugin proportion")
ACTIONS = {
    "preempt": plan("enqueue, allocate, preempt, backfill", WITH_SHARES),
    "gang_preempt": plan("enqueue, allocate, gang_preempt, backfill", WITH_SHARES),
    "reclaim": plan("enqueue, allocate, reclaim, backfill", RECLAIM_TIERS),
    "gang_reclaim": plan("enqueue, allocate, gang_reclaim, backfill", RECLAIM_TIERS),
}
# Soft ones choose their victims in the tightest HyperNode that holds them, widening to the cluster.
TOPOLOGIES = [None, NetworkTopology("hard", 1, None), NetworkTopology("hard", 2, None),
              NetworkTopology("soft", 1, None), NetworkTopology("soft", 2, None)]


@st.composite
def scenarios(draw):
    action = draw(st.sampled_from(sorted(ACTIONS)))
    reclaiming = "reclaim" in action
    switches = draw(st.lists(st.integers(2, 3), min_size=2, max_size=3))
    state = ClusterState()
    names: list[list[str]] = []
    for s, count in enumerate(switches):
        names.append([f"s{s}n{i}" for i in range(count)])
        for n in names[-1]:
            node(state, n, cpu=2000, memory=8 * GiB)
        state.add_hypernode(HyperNode(f"s{s}", 1, "", tuple(Member("Node", exact=n) for n in names[-1])))
    state.add_hypernode(HyperNode("spine", 2, "", tuple(Member("HyperNode", exact=f"s{s}")
                                                         for s in range(len(switches)))))
    every = [n for group in names for n in group]
    total = 2 * len(every)
    low_queue, high_queue = ("q2", "q1") if reclaiming else ("default", "default")
    if reclaiming:
        share = draw(st.integers(total // 2, total - 1))
        state.add_queue(QueueObject("q1", deserved={"cpu": share * 1000}))
        state.add_queue(QueueObject("q2", deserved={"cpu": (total - share) * 1000}))
    # Low work filling most slots (2 one-cpu pods a node): gangs of 1-4 consecutive slots, each
    # of minMember 1..size and one priority.
    slots = [n for n in every for _ in range(draw(st.sampled_from([2, 2, 2, 2, 1])))]
    g = 0
    while slots:
        size = min(draw(st.integers(1, 4)), len(slots))
        where, slots = slots[:size], slots[size:]
        state.add_podgroup(PodGroup("ns", f"low{g}", min_member=draw(st.sampled_from([1, 1, size])), queue=low_queue,
                                    phase="Running", uid=f"pg-low{g}"))
        priority = draw(st.integers(1, 4))
        for i, n in enumerate(where):
            state.add_pod(Pod("ns", f"low{g}-{i}", {"cpu": 1000, "memory": GiB // 4}, uid=f"u-low{g}-{i}",
                              node_name=n, phase="Running", group=f"low{g}", priority=priority, creation=g + i / 10))
        g += 1
    # High jobs with one subGroupPolicy each.
    for h in range(draw(st.integers(1, 2))):
        groups = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
        size = draw(st.integers(1, min(groups)))    # a sub-group smaller than its size never runs
        job_topology = draw(st.sampled_from(TOPOLOGIES))
        sub_topology = draw(st.sampled_from(TOPOLOGIES))
        members = sum(groups)
        state.add_podgroup(PodGroup(
            "ns", f"high{h}", min_member=draw(st.integers(1, members)), queue=high_queue, phase="Inqueue",
            uid=f"pg-high{h}", network_topology=job_topology, creation=100 + h,
            # Now and then a plain gang: a hard one may need idle and freed room in its HyperNode.
            sub_groups=(SubGroupPolicy("part", size, draw(st.integers(0, len(groups))), None, (KEY,),
                                       sub_topology),) if draw(st.integers(0, 3)) else ()))
        for g, count in enumerate(groups):
            for i in range(count):
                zero = draw(st.integers(0, 7)) == 0
                state.add_pod(Pod("ns", f"high{h}-{g}-{i}", {} if zero else {"cpu": 1000, "memory": GiB // 4},
                                  uid=f"u-high{h}-{g}-{i}", group=f"high{h}", phase="Pending",
                                  priority=10 + h, creation=100 + h + i / 10, labels={KEY: str(g)}))
    return action, state


def pipelined_job(state: ClusterState, job: str, placed: dict[str, str]) -> bool:
    """Whether the job's pods that run, are placed now or nominated, and those requesting nothing
    (Volcano counts them ready), reach its minMember and each policy's minSubGroups."""
    group = state.podgroups[f"ns/{job}"]
    members = [p for p in state.pods.values() if p.group == job and p.namespace == "ns"]

    def counted(p: Pod) -> bool:
        return bool(p.node_name or placed.get(p.key) or p.nominated_node or not any(p.requests.values()))

    if sum(1 for p in members if counted(p)) < group.min_member:
        return False
    for policy in group.sub_groups:
        sizes: dict[str, int] = {}
        for p in members:
            value = p.labels.get(KEY)
            if value and counted(p):
                sizes[value] = sizes.get(value, 0) + 1
        if sum(1 for n in sizes.values() if n >= policy.size) < policy.min_groups:
            return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenarios(), st.booleans())
def test_sub_groups_stay_within_their_tiers_and_every_eviction_buys_its_job(case, pure):
    action, state = case
    audit = EvictionAudit()
    evicted = 0
    for step in range(6):
        decisions = cycle(ACTIONS[action], state, pure)
        placed = {**{b.pod: b.node for b in decisions.bindings}, **decisions.pipelined}
        assert hard_ok(state, placed), (action, step, placed)
        for job in {state.pods[e.reason.details.get("preemptor") or e.reason.details.get("for")].group
                    for e in decisions.evictions}:
            assert pipelined_job(state, job, placed), (action, step, job)
        evicted += len(decisions.evictions)
        audit.record(step, decisions, eviction_queues(state, decisions), eviction_jobs(state, decisions))
        state.apply(decisions)
        state.advance()
    assert audit.wasted == 0 and audit.repeats == 0 and audit.exchanges == 0, (action, vars(audit))
    assert audit.bought == evicted, (action, vars(audit))
