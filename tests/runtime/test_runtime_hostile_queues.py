"""One hostile cluster object is one invalid object with a reason, never a failed cycle (issue 30).

A Queue parent chain or `volcano.sh/hierarchy` annotation deeper than MAX_QUEUE_DEPTH makes
those queues invalid (their jobs wait, saying so) and every other queue schedules; the queue
walks are linear (each chain step taken once), so thousands of levels cost no more than
thousands of queues. Node quantities are bounded on read, so no sum over nodes wraps int64.
"""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, QueueObject
from runtime.engine import snapshot as snapshot_module
from runtime.engine.cycle import Options, run_cycle
MAX_QUEUE_DEPTH = 64   # runtime.engine.snapshot.MAX_QUEUE_DEPTH, as runtime/README.md says
from tests.runtime.runtime_helpers import STANDARD_TIERS, gang, node, pod, policy

PLAN = policy(STANDARD_TIERS)
HDRF_PLAN = policy(STANDARD_TIERS.replace("plugin drf\n", "plugin drf { enable_hierarchy = true }\n")
                   .replace("  plugin proportion\n", ""))
CAPACITY_PLAN = policy(STANDARD_TIERS.replace("plugin proportion", "plugin capacity { enable_hierarchy = true }"))
KERNELS = [False, True]   # compiled, pure Python


def chain_cluster(depth: int) -> ClusterState:
    """Queues d1 ← d2 ← … ← d{depth} (each the parent of the next), a job in the deepest and
    in a queue at the bound, and a job in a plain queue."""
    state = ClusterState()
    node(state, "n0", cpu=8000)
    for i in range(1, depth + 1):
        state.add_queue(QueueObject(f"d{i}", parent=f"d{i - 1}" if i > 1 else None))
    state.add_queue(QueueObject("ok"))
    state.add_queue(QueueObject(f"side{MAX_QUEUE_DEPTH}", parent=f"d{MAX_QUEUE_DEPTH - 1}"))
    gang(state, "deep", 1, queue=f"d{depth}")
    gang(state, "edge", 1, queue=f"side{MAX_QUEUE_DEPTH}")
    gang(state, "fine", 1, queue="ok")
    return state


@pytest.mark.parametrize("plan", [PLAN, HDRF_PLAN, CAPACITY_PLAN], ids=["proportion", "hdrf", "capacity"])
@pytest.mark.parametrize("pure", KERNELS)
def test_a_2000_level_parent_chain_leaves_the_rest_scheduled(plan, pure) -> None:
    decisions = run_cycle(plan, chain_cluster(2000), Options(pure_python=pure))
    assert sorted(b.pod for b in decisions.bindings) == ["ns/edge-0", "ns/fine-0"]   # 64 levels deep is allowed
    reasons = {u.pod: [r.message for r in u.reasons] for u in decisions.unschedulable}
    assert reasons == {"ns/deep-0": ["queue d2000 is nested deeper than 64 levels"]}


def test_the_queue_walks_take_each_chain_step_once(monkeypatch) -> None:
    calls = []
    real = snapshot_module.parent_of
    monkeypatch.setattr(snapshot_module, "parent_of", lambda specs, name: calls.append(name) or real(specs, name))
    for depth in (500, 2000):
        calls.clear()
        run_cycle(HDRF_PLAN, chain_cluster(depth))
        assert len(calls) <= depth + 3      # one step per queue (d1..d{depth}, ok, side64, default)


@pytest.mark.parametrize("depth, waits", [(1000, True), (MAX_QUEUE_DEPTH, False)])
@pytest.mark.parametrize("pure", KERNELS)
def test_a_deep_hierarchy_annotation_makes_one_queue_invalid(depth, waits, pure) -> None:
    state = ClusterState()
    node(state, "n0", cpu=8000)
    path = "root/" + "/".join(f"l{i}" for i in range(depth))
    state.add_queue(QueueObject("deep", annotations={"volcano.sh/hierarchy": path}))
    state.add_queue(QueueObject("ok", annotations={"volcano.sh/hierarchy": "root/ok"}))
    gang(state, "deep", 1, queue="deep")
    gang(state, "fine", 1, queue="ok")
    decisions = run_cycle(HDRF_PLAN, state, Options(pure_python=pure))
    bound = sorted(b.pod for b in decisions.bindings)
    reasons = {u.pod: [r.message for r in u.reasons] for u in decisions.unschedulable}
    if waits:
        assert bound == ["ns/fine-0"]
        assert reasons == {"ns/deep-0": ["queue deep is nested deeper than 64 levels"]}
    else:
        assert bound == ["ns/deep-0", "ns/fine-0"] and reasons == {}


def test_a_long_parent_cycle_is_named_by_its_ends() -> None:
    state = ClusterState()
    node(state, "n0", cpu=8000)
    for i in range(3000):
        state.add_queue(QueueObject(f"c{i}", parent=f"c{(i + 1) % 3000}"))
    gang(state, "looped", 1, queue="c5")
    pod(state, "fine")
    decisions = run_cycle(PLAN, state)
    assert [b.pod for b in decisions.bindings] == ["ns/fine"]
    [waiting] = decisions.unschedulable
    assert waiting.reasons[0].message == ("queue c5 cannot be used: its parents form a cycle "
                                          "(c5 → c6 → c7 → c8 → c9 → c10 → c11 → c12 → … (3000 queues) → c5)")
