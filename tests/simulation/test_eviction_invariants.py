"""Evictions buy something, over generated clusters, workloads and policies, both kernels: every
pod preempt or reclaim evicts is evicted for a beneficiary that binds within the audit's window
(no wasted eviction), and no two queues trade room back and forth (no exchange). The audit
(runtime.engine.evictions) reads only the cycles' decisions; the checks below read the simulation's
own record of bindings and evictions too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.pipeline import compile_text
from runtime.engine.cycle import Options
from runtime.simulation.engine import Limits, simulate
from runtime.simulation.scenarios import scenario_from_documents

# A longer search than CI's: POLICYDSL_EVICTION_EXAMPLES=3000 python -m pytest this file.
EXAMPLES = int(os.environ.get("POLICYDSL_EVICTION_EXAMPLES", "30"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUEUES = ("qa", "qb")


def _policy(actions: str, share: str, gang: bool, caps: dict[str, int], weights: dict[str, int],
            cluster_cpu: int) -> str:
    tiers = ["plugin priority", *(["plugin gang"] if gang else []), "plugin conformance"]
    queues = []
    for q in QUEUES:
        fields = [f"weight = {weights[q]}"]
        if share == "capacity":
            fair = cluster_cpu * weights[q] // sum(weights.values())
            fields.append(f"deserved = {{ cpu: {min(fair, caps[q]) if caps.get(q) else fair} }}")
        if caps.get(q):
            fields.append(f"capability = {{ cpu: {caps[q]} }}")
        queues.append(f"queue {q} {{ {' '.join(fields)} }}")
    return "\n".join([
        'policy "generated" version 1',
        f"actions [{actions}]",
        "tier {", *tiers, "}",
        "tier {", "plugin drf", "plugin predicates", f"plugin {share}", "plugin binpack", "}",
        *queues, ""])


@st.composite
def scenarios(draw):
    nodes = draw(st.integers(1, 2))
    node_cpu = draw(st.sampled_from([4, 8]))
    cluster_cpu = nodes * node_cpu
    actions = draw(st.sampled_from([
        "enqueue, allocate, preempt, backfill",
        "enqueue, allocate, reclaim, backfill",
        "enqueue, allocate, preempt, reclaim, backfill",
    ]))
    share = draw(st.sampled_from(["proportion", "capacity"]))
    weights = {q: draw(st.integers(1, 3)) for q in QUEUES}
    caps = {q: draw(st.sampled_from([0, cluster_cpu, cluster_cpu // 2 + node_cpu // 2])) for q in QUEUES}
    text = _policy(actions, share, draw(st.booleans()), caps, weights, cluster_cpu)
    snapshot = {"apiVersion": "v1", "kind": "List", "items": [
        *({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
           "status": {"allocatable": {"cpu": str(node_cpu), "memory": "64Gi", "pods": "110"}}} for i in range(nodes)),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
    ]}
    jobs = []
    for i in range(draw(st.integers(2, 5))):
        replicas = draw(st.integers(1, 3))
        jobs.append({
            "name": f"j{i}", "namespace": "ns", "queue": draw(st.sampled_from(QUEUES)),
            "count": draw(st.integers(1, 4)), "interval": f"{draw(st.integers(1, 20))}s",
            "start": f"{draw(st.integers(0, 90))}s", "replicas": replicas,
            "minMember": draw(st.sampled_from([1, replicas])),
            "priorityClassName": draw(st.sampled_from(["high", "low"])),
            "resources": {"cpu": str(draw(st.sampled_from([1, 2, 3]))), "memory": "1Gi"},
            "duration": draw(st.sampled_from(["5m", "2h", "2h"])),
        })
    workload = {"apiVersion": "simulation.policydsl.io/v1alpha1", "kind": "Workload", "metadata": {"name": "w"},
                "spec": {"seed": draw(st.integers(0, 3)), "jobs": jobs}}
    return text, snapshot, workload


def _simulate(text: str, snapshot: dict, workload: dict, pure: bool):
    result = compile_text(text, "generated.policy")
    assert result.plan is not None, result.diagnostics
    scenario = scenario_from_documents(result.plan, [("cluster", snapshot)], [("workload", workload)])
    return simulate(result.plan, scenario, Limits(until=20 * 60.0), Options(pure_python=pure))


@SETTINGS
@given(scenarios(), st.booleans())
def test_every_eviction_buys_its_beneficiary(case, pure):
    text, snapshot, workload = case
    result = _simulate(text, snapshot, workload, pure)
    audit = result.metrics.eviction_audit
    assert audit["wasted"] == 0, (audit, result.findings, text)
    # Whatever was evicted was bought (or is still open at the end): nothing is lost.
    assert audit["bought"] + audit["open"] == sum(result.evicted.values()), (audit, result.evicted)


@SETTINGS
@given(scenarios(), st.booleans())
def test_no_queues_trade_room(case, pure):
    # Repeats are not checked here: a pod evicted for one preemptor may be evicted again for a
    # higher-priority pod that arrives later, as priority says it must.
    text, snapshot, workload = case
    audit = _simulate(text, snapshot, workload, pure).metrics.eviction_audit
    assert audit["exchanges"] == 0, (audit, text)


# Cases the properties above found, each a class fixed (the directory names it):
# - exchange-after-leftover: under capacity, reclaim frees more than its beneficiary takes and
#   allocate gives the leftover to the taker's queue past its deserved share; a preemption
#   inside the victim's queue then lowers that queue's allocation, so taking the room back looks
#   fair to the shares. A job does not reclaim from a queue it lost pods to within the window.
# - wasted-reclaim-after-preempt: preempt reserved room for one pod of a queue, and reclaim then
#   evicted for another pod of it that the queue could not take with the first (the reservation
#   never bound). A queue's reservations count when an action reserves more for it.
# - wasted-reservation-share-taken: reclaim reserved room for a pod; the next cycle allocate gave
#   the queue's share to a pod of the same queue and priority whose job came first in job order
#   (drf), so the reservation could never bind. A queue's held reservations count in its
#   allocation for pods of their priority or lower.
# - wasted-reservation-share-moved: preempt reserved room for a pod within its queue's deserved
#   share; a pod of another queue arrived, the share shrank and the reservation ended. Under
#   proportion a reservation is held up to the queue's capability (its deserved share where the
#   queue may not borrow).
# - repeat-across-idle-time: a pod evicted twice, 300 s apart; the audit counted cycles run,
#   and the simulator skips idle time. Its clock is the period grid now.
FOUND = sorted((Path(__file__).parent / "thrash" / "found").iterdir())


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("here", FOUND, ids=[p.name for p in FOUND])
def test_found_cases_buy_every_eviction_once(here, pure):
    text = (here / "generated.policy").read_text()
    snapshot, workload = (yaml.safe_load((here / name).read_text()) for name in ("cluster.yaml", "jobs.yaml"))
    result = _simulate(text, snapshot, workload, pure)
    audit = result.metrics.eviction_audit
    assert sum(result.evicted.values()) > 0          # the case still evicts: it tests something
    assert (audit["wasted"], audit["repeats"], audit["exchanges"]) == (0, 0, 0), audit
