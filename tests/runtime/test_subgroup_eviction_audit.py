"""The eviction audit's invariants with jobs with sub-groups as preemptors and reclaimers, through
the simulator (objects parsed as from a cluster: HyperNodes, PodGroups with spec.subGroupPolicy and
spec.networkTopology, labelled pods), both kernels: generated switches full of long-running low
pods, high PodGroups with sub-groups arriving later, under preempt, reclaim, gang_preempt or
gang_reclaim. Every eviction buys its beneficiary (none wasted; bought or still open at the end),
no two queues trade room, and no pod is evicted twice.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.pipeline import compile_text
from runtime.engine.cycle import Options
from runtime.simulation.engine import Limits, simulate
from runtime.simulation.scenarios import scenario_from_documents
from sim_helpers import node, pod, podgroup

KEY = "volcano.sh/task-instance"
ACTIONS = ("preempt", "gang_preempt", "reclaim", "gang_reclaim")


def policy(action: str) -> str:
    return "\n".join([
        'policy "generated" version 1', f"actions [enqueue, allocate, {action}, backfill]",
        "tier {", "plugin priority", "plugin gang", "plugin conformance", "}",
        "tier {", "plugin predicates", "plugin proportion", "plugin nodeorder", "}",
        "queue qa { weight = 1 }", "queue qb { weight = 1 }", ""])


def hypernode(name: str, tier: int, members: list[str], kind: str = "Node") -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}}
                                               for m in members]}}


def topology(mode: str | None, tier: int) -> dict:
    return {} if mode is None else {"mode": mode, "highestTierAllowed": tier}


@st.composite
def scenarios(draw):
    action = draw(st.sampled_from(ACTIONS))
    low_queue, high_queue = ("qa", "qb") if "reclaim" in action else ("qa", "qa")
    switches = draw(st.integers(2, 3))
    objects: list[dict] = []
    names = []
    for s in range(switches):
        members = [f"s{s}n{i}" for i in range(2)]
        names += members
        objects += [node(n, cpu="2", memory="8Gi") for n in members]
        objects.append(hypernode(f"s{s}", 1, members))
    objects.append(hypernode("spine", 2, [f"s{s}" for s in range(switches)], kind="HyperNode"))
    # Low pods: one-pod jobs (or gangs of two, min 1) of 1 cpu, running for hours on most slots.
    slots = [n for n in names for _ in range(draw(st.sampled_from([2, 2, 1])))]
    g = 0
    while slots:
        size = min(draw(st.integers(1, 2)), len(slots))
        where, slots = slots[:size], slots[size:]
        objects.append(podgroup(f"low{g}", min_member=1, queue=low_queue, phase="Running"))
        objects += [pod(f"low{g}-{i}", group=f"low{g}", cpu="1", memory="256Mi", node_name=n, priority=10,
                        duration="2h") for i, n in enumerate(where)]
        g += 1
    for h in range(draw(st.integers(1, 2))):
        groups = draw(st.lists(st.integers(1, 2), min_size=1, max_size=3))
        size = draw(st.integers(1, min(groups)))
        job_mode = draw(st.sampled_from([None, "hard", "soft"]))
        sub_mode = draw(st.sampled_from([None, "hard", "hard", "soft"]))
        policy_spec = {"name": "part", "subGroupSize": size, "matchLabelKeys": [KEY],
                       "minSubGroups": draw(st.integers(0, len(groups)))}
        if sub_mode:
            policy_spec["networkTopology"] = topology(sub_mode, 1)
        # Now and then a plain gang (soft ones choose victims in the tightest HyperNode that holds them).
        spec = {"subGroupPolicy": [policy_spec]} if draw(st.integers(0, 3)) else {}
        if job_mode:
            spec["networkTopology"] = topology(job_mode, draw(st.integers(1, 2)))
        members = sum(groups)
        objects.append(podgroup(f"high{h}", min_member=draw(st.integers(1, members)), queue=high_queue, **spec))
        for gi, count in enumerate(groups):
            for i in range(count):
                p = pod(f"high{h}-{gi}-{i}", group=f"high{h}", cpu="1", memory="256Mi", priority=1000,
                        arrival=f"{30 + 60 * h}s", duration="5m")
                p["metadata"].setdefault("labels", {})[KEY] = str(gi)
                objects.append(p)
    return action, {"apiVersion": "v1", "kind": "List", "items": objects}


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenarios(), st.booleans())
def test_sub_group_preemptors_buy_every_eviction_and_trade_no_room(case, pure):
    action, snapshot = case
    compiled = compile_text(policy(action), "generated.policy")
    assert compiled.plan is not None, compiled.diagnostics
    scenario = scenario_from_documents(compiled.plan, [("cluster", snapshot)], None)
    result = simulate(compiled.plan, scenario, Limits(until=20 * 60.0), Options(pure_python=pure))
    audit = result.metrics.eviction_audit
    assert audit["wasted"] == 0, (action, audit, result.findings)
    assert audit["bought"] + audit["open"] == sum(result.evicted.values()), (action, audit, result.evicted)
    assert audit["exchanges"] == 0 and audit["repeats"] == 0, (action, audit)
