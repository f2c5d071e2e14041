"""Each plugin's and action's effect on small clusters, by the decisions it changes."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState
from runtime.engine.cycle import open_session
from runtime_helpers import GiB, STANDARD_TIERS, cycle, gang, node, placements, pod, policy


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def test_binpack_packs_and_least_requested_spreads(pure):
    pack = policy("tier { plugin predicates\n plugin binpack }")
    spread = policy("tier { plugin predicates\n plugin nodeorder }")
    for plan, expect_nodes in ((pack, 1), (spread, 3)):
        state = ClusterState()
        for n in ("a", "b", "c"):
            node(state, n)
        for i in range(3):
            pod(state, f"p{i}", cpu=1000, memory=GiB)
        used = set(placements(cycle(plan, state, pure)).values())
        assert len(used) == expect_nodes


def test_binpack_prefers_the_fuller_node(pure):
    state = ClusterState()
    node(state, "empty")
    node(state, "half")
    pod(state, "running", cpu=2000, memory=4 * GiB, node_name="half")
    pod(state, "new", cpu=1000, memory=GiB)
    plan = policy("tier { plugin predicates\n plugin binpack }")
    assert placements(cycle(plan, state, pure)) == {"ns/new": "half"}


def test_gang_is_all_or_nothing_with_a_reason(pure):
    state = ClusterState()
    node(state, "a", cpu=4000)
    node(state, "b", cpu=2000)
    gang(state, "big", size=8, cpu=1000)       # 6 fit, 8 needed
    gang(state, "small", size=2, cpu=1000)
    plan = policy(STANDARD_TIERS)
    decisions = cycle(plan, state, pure)
    bound = placements(decisions)
    assert not any(p.startswith("ns/big") for p in bound)
    assert sum(p.startswith("ns/small") for p in bound) == 2
    messages = [r.message for r in decisions.reasons_for("ns/big-0")]
    assert "gang short by 2 (6/8)" in messages
    big = next(p for p in decisions.podgroups if p.name == "ns/big")
    assert big.phase == "Inqueue"
    assert big.conditions[0].reason == "NotEnoughResources"
    assert big.conditions[0].message.startswith("8/8 tasks in gang unschedulable")
    small = next(p for p in decisions.podgroups if p.name == "ns/small")
    assert small.phase == "Running" and small.conditions[0].type == "Scheduled"


def test_node_reason_counts_causes(pure):
    state = ClusterState()
    node(state, "small1", cpu=1000)
    node(state, "small2", cpu=1000)
    node(state, "small3", cpu=1000)
    node(state, "gpu1", cpu=8000, taints=[("gpu", "true", "NoSchedule")])
    node(state, "gpu2", cpu=8000, taints=[("gpu", "true", "NoSchedule")])
    pod(state, "p", cpu=2000)
    decisions = cycle(policy(STANDARD_TIERS), state, pure)
    assert [r.message for r in decisions.reasons_for("ns/p")] == [
        "0/5 nodes are available: 2 node(s) had untolerated taint {gpu: true}, 3 Insufficient cpu."]
    assert decisions.to_dict()["unschedulable"] == [{"pod": "ns/p", "reasons": [
        "0/5 nodes are available: 2 node(s) had untolerated taint {gpu: true}, 3 Insufficient cpu."]}]


def test_selector_affinity_and_tolerations(pure):
    from runtime.cluster.model import Toleration
    from runtime.cluster.selectors import MatchExpression
    state = ClusterState()
    node(state, "a", labels={"zone": "z1", "disk": "ssd"})
    node(state, "b", labels={"zone": "z2"})
    node(state, "t", labels={"zone": "z3"}, taints=[("dedicated", "ml", "NoExecute")])
    pod(state, "sel", node_selector={"zone": "z2"})
    pod(state, "aff", required_terms=((MatchExpression("disk", "Exists"),),))
    pod(state, "notin", required_terms=((MatchExpression("zone", "NotIn", ("z1", "z2")),),),
        tolerations=(Toleration("dedicated", "Equal", "ml", "NoExecute"),))
    bound = placements(cycle(policy(STANDARD_TIERS), state, pure))
    assert bound == {"ns/sel": "b", "ns/aff": "a", "ns/notin": "t"}


def test_drf_orders_jobs_by_dominant_share(pure):
    state = ClusterState()
    node(state, "a", cpu=4000, memory=64 * GiB)
    # rich already holds two cpus; both jobs want two more and only two are free. A ready job
    # takes one task per turn (as in Volcano), so shares are compared task by task: poor, with
    # the smaller share each time, takes both.
    gang(state, "rich", size=4, min_member=1, cpu=1000, nodes=["a", "a"], creation=0.0)
    gang(state, "poor", size=2, min_member=1, cpu=1000, creation=5.0)
    plan = policy("tier { plugin drf\n plugin predicates }")
    assert sorted(placements(cycle(plan, state, pure))) == ["ns/poor-0", "ns/poor-1"]
    # Without drf, creation order decides and the older rich job goes first each turn.
    fifo = policy("tier { plugin predicates }")
    assert sorted(placements(cycle(fifo, state, pure))) == ["ns/rich-2", "ns/rich-3"]


def test_proportion_shares_by_weight(pure):
    plan = policy(STANDARD_TIERS + "queue a { weight = 3 }\nqueue b { weight = 1 }")
    state = ClusterState()
    for i in range(4):
        node(state, f"n{i}", cpu=4000, memory=64 * GiB)
    for i in range(16):
        gang(state, f"a{i}", size=1, queue="a", cpu=1000, memory=GiB)
        gang(state, f"b{i}", size=1, queue="b", cpu=1000, memory=GiB)
    bound = placements(cycle(plan, state, pure))
    count_a = sum(p.startswith("ns/a") for p in bound)
    count_b = sum(p.startswith("ns/b") for p in bound)
    assert (count_a, count_b) == (12, 4)


def test_hierarchy_borrows_from_an_idle_sibling_and_reclaims_back(pure):
    body = STANDARD_TIERS + """
queue org {
  queue dev { weight = 1 }
  queue prod { weight = 1 }
}"""
    plan = policy(body, actions="enqueue, allocate, reclaim, backfill")
    state = ClusterState()
    for i in range(2):
        node(state, f"n{i}", cpu=4000, memory=64 * GiB)
    for i in range(8):
        gang(state, f"dev{i}", size=1, queue="dev", cpu=1000)
    first = cycle(plan, state, pure)
    assert len(first.bindings) == 8                       # dev borrows prod's idle half
    state.apply(first)
    for i in range(4):
        gang(state, f"prod{i}", size=1, queue="prod", cpu=1000)
    second = cycle(plan, state, pure)
    evicted = {e.pod for e in second.evictions}
    assert len(evicted) == 4 and all(p.startswith("ns/dev") for p in evicted)
    assert all(e.reason.kind == "reclaim" for e in second.evictions)
    assert set(second.pipelined) == {f"ns/prod{i}-0" for i in range(4)}
    state.apply(second)
    state.advance()
    third = cycle(plan, state, pure)
    assert {b.pod for b in third.bindings} == {f"ns/prod{i}-0" for i in range(4)}


def test_no_borrow_caps_at_fair_share(pure):
    body = STANDARD_TIERS + "queue dev { weight = 2 borrow = false }\nqueue prod { weight = 1 }"
    plan = policy(body)
    state = ClusterState()
    node(state, "n0", cpu=8000, memory=64 * GiB)
    for i in range(8):
        gang(state, f"dev{i}", size=1, queue="dev", cpu=1000)
    decisions = cycle(plan, state, pure)
    assert len(decisions.bindings) == 4           # 2/(2+1+1) of 8 cpus (default queue counts)
    assert any("queue dev" in r.message for r in decisions.reasons_for("ns/dev7-0"))


def test_preempt_takes_one_victim_where_one_suffices(pure):
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "a", cpu=4000, memory=64 * GiB)
    node(state, "b", cpu=4000, memory=64 * GiB)
    # Node a: four small low-priority pods; node b: one big low-priority pod.
    for i in range(4):
        gang(state, f"small{i}", size=1, cpu=1000, priority=1, nodes=["a"])
    gang(state, "big", size=1, cpu=4000, priority=2, nodes=["b"])
    gang(state, "urgent", size=1, cpu=3000, priority=100)
    decisions = cycle(plan, state, pure)
    assert [e.pod for e in decisions.evictions] in (["ns/big-0"], )
    assert decisions.evictions[0].reason.message == "preempted by ns/urgent-0 (priority 100)"
    assert decisions.pipelined == {"ns/urgent-0": "b"}


@pytest.mark.parametrize("queue_a_running, evicted", [
    (6, 3),   # a holds 6 cpu of its 4 deserved: three of its low pods go, so that it may take the
              # urgent one (Volcano evicts same-queue victims until the queue may allocate it)
    (3, 1),   # a holds 3 of 4: one victim makes room the queue may use
])
def test_preempt_evicts_only_for_a_preemptor_its_queue_may_allocate(pure, queue_a_running, evicted):
    plan = policy(STANDARD_TIERS + "queue a { weight = 1 }\nqueue b { weight = 1 }",
                  actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "n", cpu=8000, memory=64 * GiB)
    # The node is full; queue b wants more than it has, so a's deserved share is 4 cpu.
    for i in range(queue_a_running):
        gang(state, f"low{i}", size=1, queue="a", cpu=1000, priority=1, nodes=["n"])
    for i in range(8 - queue_a_running):
        gang(state, f"b{i}", size=1, queue="b", cpu=1000, priority=1, nodes=["n"])
    gang(state, "b-more", size=4, queue="b", cpu=1000, priority=1)
    gang(state, "urgent", size=1, queue="a", cpu=1000, priority=100)
    decisions = cycle(plan, state, pure)
    assert len(decisions.evictions) == evicted
    assert all(e.pod.startswith("ns/low") for e in decisions.evictions)
    if evicted:
        assert decisions.pipelined == {"ns/urgent-0": "n"}
        state.apply(decisions)
        state.advance()             # the victim leaves; the reservation binds
        assert placements(cycle(plan, state, pure)) == {"ns/urgent-0": "n"}
    else:
        assert decisions.pipelined == {}
        assert any("queue a may allocate" in r.message for r in decisions.reasons_for("ns/urgent-0"))


def test_preempt_never_takes_a_gang_below_its_minimum(pure):
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "a", cpu=4000, memory=64 * GiB)
    gang(state, "train", size=4, min_member=3, cpu=1000, priority=1, nodes=["a"] * 4)
    gang(state, "urgent", size=1, cpu=2000, priority=100)
    decisions = cycle(plan, state, pure)
    assert decisions.evictions == []          # only one of train's pods may go: not enough
    gang(state, "urgent2", size=1, cpu=1000, priority=100)
    state.remove_pod("ns/urgent-0")
    state.remove_podgroup("ns/urgent")
    decisions = cycle(plan, state, pure)
    assert len(decisions.evictions) == 1


def test_conformance_protects_system_pods(pure):
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "a", cpu=2000, memory=64 * GiB)
    pod(state, "dns", cpu=2000, ns="kube-system", node_name="a", priority=1)
    pod(state, "urgent", cpu=2000, priority=100)
    assert cycle(plan, state, pure).evictions == []


def test_enqueue_rejects_over_capability(pure):
    plan = policy(STANDARD_TIERS + "queue small { capability = { cpu: 2 } }")
    state = ClusterState()
    node(state, "a", cpu=8000, memory=64 * GiB)
    gang(state, "fits", size=2, queue="small", cpu=1000, phase="Pending", min_resources={"cpu": 2000})
    gang(state, "toobig", size=3, queue="small", cpu=1000, phase="Pending", min_resources={"cpu": 3000},
         creation=1.0)
    decisions = cycle(plan, state, pure)
    phases = {p.name: p.phase for p in decisions.podgroups}
    assert phases == {"ns/fits": "Running", "ns/toobig": "Pending"}
    # The binding limit and its figures: 3 asked, capability 2, and fits's 2 already admitted.
    assert ("job needs cpu 3 (minResources); queue small may admit 0 more (capability 2, cluster 8, deserved 2, "
            "allocated 0, inqueue 2, elastic 0)") in [r.message for r in decisions.reasons_for("ns/toobig-0")]


def test_overcommit_factor_limits_admission(pure):
    plan = policy("tier { plugin gang\n plugin overcommit { factor = 1.0 } }\ntier { plugin predicates }")
    state = ClusterState()
    node(state, "a", cpu=4000, memory=64 * GiB)
    gang(state, "one", size=1, cpu=3000, phase="Pending", min_resources={"cpu": 3000})
    gang(state, "two", size=1, cpu=3000, phase="Pending", min_resources={"cpu": 3000}, creation=1.0)
    decisions = cycle(plan, state, pure)
    assert {p.name: p.phase for p in decisions.podgroups} == {"ns/one": "Running", "ns/two": "Pending"}


def test_guarantee_raises_deserved(pure):
    plan = policy(STANDARD_TIERS + "queue big { weight = 9 }\nqueue tiny { weight = 1 guarantee = { cpu: 4 } }")
    state = ClusterState()
    node(state, "a", cpu=8000, memory=64 * GiB)
    gang(state, "b", size=8, min_member=1, queue="big", cpu=1000)
    gang(state, "t", size=8, min_member=1, queue="tiny", cpu=1000)
    bound = placements(cycle(plan, state, pure))
    assert sum(p.startswith("ns/t-") for p in bound) == 4


def test_backfill_places_zero_request_pods(pure):
    plan = policy(STANDARD_TIERS)
    state = ClusterState()
    node(state, "a", cpu=1000)
    pod(state, "full", cpu=1000, node_name="a")
    pod(state, "besteffort", cpu=0, memory=0)
    assert placements(cycle(plan, state, pure)) == {"ns/besteffort": "a"}
    no_backfill = policy(STANDARD_TIERS, actions="enqueue, allocate")
    assert placements(cycle(no_backfill, state, pure)) == {}


def test_device_slices_pack_onto_one_card(pure):
    plan = policy(STANDARD_TIERS.replace("plugin binpack", "plugin binpack\n  plugin deviceshare") +
                  'device "nvidia.com/gpu" { sharing = memory card_memory = 40Gi slice = 10Gi '
                  'memory_resource = "example.com/gpu-mem" }')
    state = ClusterState()
    node(state, "g", cpu=16000, memory=64 * GiB, **{"nvidia.com/gpu": 2})
    for i in range(4):
        pod(state, f"s{i}", cpu=100, memory=GiB, requests={"example.com/gpu-mem": 10 * GiB}, creation=float(i))
    decisions = cycle(plan, state, pure)
    cards = {b.pod: b.devices["nvidia.com/gpu"] for b in decisions.bindings}
    assert cards == {f"ns/s{i}": (0,) for i in range(4)}
    state.apply(decisions)
    assert state.pods["ns/s0"].annotations["volcano.sh/gpu-index"] == "0"
    pod(state, "big", cpu=100, memory=GiB, requests={"example.com/gpu-mem": 30 * GiB})
    pod(state, "huge", cpu=100, memory=GiB, requests={"example.com/gpu-mem": 50 * GiB})
    second = cycle(plan, state, pure)
    assert {b.pod: b.devices["nvidia.com/gpu"] for b in second.bindings} == {"ns/big": (1,)}
    assert [r.message for r in second.reasons_for("ns/huge")] == [
        # No card holds 50Gi however empty: not fragmentation, and said so with the largest card.
        "0/1 nodes are available: 1 no nvidia.com/gpu card holds 50Gi of memory (pod needs 50Gi on a card; "
        "the largest card has 40Gi)."]


def test_device_node_score_counts_only_with_a_weight(pure):
    """Volcano's deviceshare.ScheduleWeight defaults to 0: without `weight N` the card fill does
    not steer the node choice (ties go to the lowest name); with it, binpack fills node b's card."""
    device = ('device "nvidia.com/gpu" { sharing = memory card_memory = 40Gi slice = 10Gi '
              'memory_resource = "example.com/gpu-mem" }')
    state = ClusterState()
    for name in ("a", "b"):
        node(state, name, cpu=16000, memory=64 * GiB, **{"nvidia.com/gpu": 1})
    pod(state, "running", cpu=100, memory=GiB, node_name="b", requests={"example.com/gpu-mem": 10 * GiB},
        devices={"nvidia.com/gpu": (0,)})
    pod(state, "new", cpu=100, memory=GiB, requests={"example.com/gpu-mem": 10 * GiB})
    unweighted = policy("tier { plugin predicates\n plugin deviceshare }\n" + device)
    weighted = policy("tier { plugin predicates\n plugin deviceshare weight 5 }\n" + device)
    assert unweighted.plugin("deviceshare").weight == 0
    assert placements(cycle(unweighted, state, pure)) == {"ns/new": "a"}
    assert placements(cycle(weighted, state, pure)) == {"ns/new": "b"}


def test_whole_cards_prefer_one_nvlink_island(pure):
    plan = policy(STANDARD_TIERS.replace("plugin binpack", "plugin binpack\n  plugin deviceshare") +
                  'device "nvidia.com/gpu" { topology = nvlink models = ["A100"] }')
    state = ClusterState()
    node(state, "g", cpu=16000, memory=64 * GiB, labels={"policydsl.io/nvlink-islands": "0-3_4-7",
                                                          "nvidia.com/gpu.product": "A100"},
         **{"nvidia.com/gpu": 8})
    node(state, "other", cpu=16000, memory=64 * GiB, labels={"nvidia.com/gpu.product": "T4"},
         **{"nvidia.com/gpu": 8})
    pod(state, "one", cpu=100, requests={"nvidia.com/gpu": 1}, node_name="g", devices={"nvidia.com/gpu": (0,)})
    pod(state, "four", cpu=100, requests={"nvidia.com/gpu": 4})
    decisions = cycle(plan, state, pure)
    assert decisions.binding_of("ns/four").node == "g"
    assert decisions.binding_of("ns/four").devices == {"nvidia.com/gpu": (4, 5, 6, 7)}


def test_cluster_state_transitions():
    plan = policy(STANDARD_TIERS)
    state = ClusterState()
    node(state, "a", cpu=2000)
    pod(state, "p", cpu=2000)
    pod(state, "q", cpu=2000, creation=1.0)
    first = cycle(plan, state)
    assert placements(first) == {"ns/p": "a"}
    state.apply(first)
    assert state.pods["ns/p"].node_name == "a"
    assert placements(cycle(plan, state)) == {}
    state.complete_pod("ns/p")
    assert placements(cycle(plan, state)) == {"ns/q": "a"}
    state.remove_node("a")
    assert state.pods.keys() == {"ns/q"}


def test_decisions_json_is_sorted_and_exact():
    plan = policy(STANDARD_TIERS)
    state = ClusterState()
    node(state, "a", cpu=2000)
    gang(state, "g", size=2, cpu=1000)
    text = cycle(plan, state).to_json()
    import json
    data = json.loads(text)
    assert list(data) == ["bindings", "evictions", "podgroups", "unschedulable"]
    assert data["bindings"] == [{"devices": {}, "node": "a", "pod": "ns/g-0"},
                                {"devices": {}, "node": "a", "pod": "ns/g-1"}]
    assert data["podgroups"] == [{"name": "ns/g", "phase": "Running"}]


def test_policy_queues_merge_with_queue_objects():
    from runtime.cluster.model import QueueObject
    plan = policy(STANDARD_TIERS + "queue online { weight = 3 }")
    state = ClusterState()
    node(state, "a")
    state.add_queue(QueueObject("online", weight=7))      # the policy wins
    state.add_queue(QueueObject("batch", weight=2))       # added
    ssn = open_session(plan, state)
    weights = {q.name: q.weight for q in ssn.snap.queues}
    assert weights["online"] == 3 and weights["batch"] == 2 and "default" in weights


@pytest.mark.parametrize("admission", ["proportion", "capacity", "overcommit"])
def test_admission_ignores_a_card_memory_resource_no_node_offers(pure, admission):
    """card_memory sizes the cards, so nodes need not advertise the memory resource: a
    minResources naming it is the device plugin's check, not a cap of 0 at admission."""
    plan = policy(f"tier {{ plugin gang }}\ntier {{ plugin predicates\n plugin {admission}\n plugin deviceshare }}\n"
                  'device "nvidia.com/gpu" { sharing = memory card_memory = 40Gi slice = 10Gi '
                  'memory_resource = "example.com/gpu-mem" }')
    state = ClusterState()
    node(state, "g", cpu=4000, memory=64 * GiB, **{"nvidia.com/gpu": 2})
    card = {"example.com/gpu-mem": 10 * GiB}
    gang(state, "infer", size=1, cpu=1000, phase="Pending", requests=card,
         min_resources={"cpu": 1000, **card})
    gang(state, "huge", size=1, cpu=1000, phase="Pending", requests=card, creation=1.0,
         min_resources={"cpu": 100_000, **card})
    decisions = cycle(plan, state, pure)
    assert {p.name: p.phase for p in decisions.podgroups} == {"ns/infer": "Running", "ns/huge": "Pending"}
    assert decisions.binding_of("ns/infer-0").devices == {"nvidia.com/gpu": (0,)}
    # Still refused on what the cluster has, and only that is named.
    [reason] = decisions.reasons_for("ns/huge-0")
    assert "cpu" in reason.message and "example.com/gpu-mem" not in reason.message


@pytest.mark.parametrize("share_plugin", ["proportion", "capacity"])
def test_a_closed_session_is_freed_without_the_garbage_collector(share_plugin):
    """Plugins' callbacks are closures over the session (a reference cycle); closing drops
    them, so a cycle's snapshot goes with its last reference, not at a later full collection."""
    import gc
    import weakref

    tiers = STANDARD_TIERS.replace("plugin proportion", f"plugin {share_plugin}\n  plugin overcommit")
    plan = policy(tiers.replace("plugin binpack", "plugin binpack\n  plugin deviceshare") +
                  'device "nvidia.com/gpu" { sharing = memory card_memory = 40Gi slice = 10Gi }',
                  actions="enqueue, allocate, preempt, reclaim, backfill")
    state = ClusterState()
    node(state, "g", cpu=8000, **{"nvidia.com/gpu": 2})
    gang(state, "run", size=2, cpu=1000, nodes=["g", "g"], priority=1)
    gang(state, "wait", size=2, cpu=4000, priority=5, requests={"volcano.sh/gpu-memory": 10 * 1024})
    ssn = open_session(plan, state)
    from runtime.engine.actions import registry
    for name in plan.actions:
        registry()[name](ssn)
    from runtime.engine.cycle import collect
    decisions = collect(ssn)
    assert decisions.podgroups                  # the session did work
    ssn.close()
    freed = weakref.ref(ssn), weakref.ref(ssn.snap)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        del ssn
        assert [ref() for ref in freed] == [None, None]
    finally:
        if was_enabled:
            gc.enable()
