"""Queue quotas on Dynamic Resource Allocation devices (`deviceclass/<DeviceClass>`, Volcano's
capacity plugin with capacity.DynamicResourceAllocationEnable): Volcano's
pkg/scheduler/plugins/capacity/capacity_dra_test.go cases translated (each cites its Go name),
cycles on both kernels (a queue capped at 4 GPUs places at most 4 one-GPU pods, gangs, running
pods' devices, shared claims counted once), lint, import and export of the switches."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano
from compiler.volcano.importer import import_volcano_text
from runtime.cluster.dra import Dra
from runtime.cluster.draquota import charge_devices, claim_count, device_class_of, is_capacity_dimension
from runtime.cluster.model import ClusterState
from runtime.cluster.objects import load_objects
from runtime.engine.cycle import Options, run_cycle
from runtime_helpers import policy
from dra_docs import (
    allocation, claim_doc, device_class, first_available, gpus_on, node_doc, pod_doc, podgroup_doc, request,
    slice_doc, gpu, template_doc,
)

QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def capacity_plan(queues: str, actions: str = "enqueue, allocate, backfill", arguments: str = ""):
    return policy("tier {\n  plugin priority\n  plugin gang\n  plugin conformance\n}\n"
                  f"tier {{\n  plugin drf\n  plugin predicates\n  plugin capacity{arguments}\n  plugin nodeorder\n}}\n"
                  + queues, actions)


def queue(name: str, **maps: dict[str, int]) -> str:
    body = "".join(f"  {key} = {{ {', '.join(f'{chr(34)}deviceclass/{c}{chr(34)}: {n}' for c, n in m.items())} }}\n"
                   for key, m in maps.items())
    return f"queue {name} {{\n{body}}}\n"


def in_queue(doc: dict, name: str) -> dict:
    doc["metadata"].setdefault("annotations", {})[QUEUE_ANNOTATION] = name
    return doc


def state_of(docs) -> ClusterState:
    return load_objects(("test.yaml", d) for d in docs)


def bound(decisions) -> dict[str, str]:
    return {b.pod.split("/")[1]: b.node for b in decisions.bindings}


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


# --- Volcano's Test_capacityPlugin_DRA ------------------------------------------------------------
# Its pods each use a claim of `count` devices of one class; one node. Volcano's fake cluster has
# no ResourceSlices (its test runs predicates without DRA filtering); ours must, so node n1
# publishes 8 gpu.com and 8 nic.com devices. Case 4 asks 100 nic.com devices, above kube's 32
# per claim: here 8, still beyond no quota.

VOLCANO_CLUSTER = [node_doc("n1"), device_class("gpu.com", driver="gpu.com"), device_class("nic.com", driver="nic.com"),
                   slice_doc("n1-gpu", [gpu(f"gpu-{i}") for i in range(8)], node="n1", driver="gpu.com"),
                   slice_doc("n1-nic", [gpu(f"nic-{i}") for i in range(8)], node="n1", driver="nic.com")]


def dra_pod(name: str, queue_name: str, cls: str, count: int) -> list[dict]:
    """Volcano's buildDRAPodAndClaim: a claim `<name>-claim`, a pod using it in a PodGroup of one, Inqueue."""
    group = podgroup_doc(f"{name}-pg", 1, queue=queue_name)
    return [claim_doc(f"{name}-claim", request("req-1", cls=cls, count=count)),
            pod_doc(name, claims={"claim-1": f"{name}-claim"}, group=f"{name}-pg"), group]


@pytest.mark.parametrize("queues, pods, expected", [
    # "Case 1: DRA Request within quota"
    (queue("q1", capability={"gpu.com": 2}), [("p1", "q1", "gpu.com", 1)], {"p1"}),
    # "Case 2: DRA Request exceeds quota"
    (queue("q2", capability={"gpu.com": 1}), [("p2", "q2", "gpu.com", 2)], set()),
    # "Case 3: Multiple Device Classes and Mixed Success/Failure"
    (queue("q3", capability={"gpu.com": 1, "nic.com": 1}),
     [("p3-1", "q3", "gpu.com", 1), ("p3-2", "q3", "nic.com", 1), ("p3-3", "q3", "gpu.com", 1)], {"p3-1", "p3-2"}),
    # "Case 4: Pass-through for unconfigured DeviceClass"
    (queue("q4", capability={"gpu.com": 1}), [("p4-1", "q4", "gpu.com", 1), ("p4-2", "q4", "nic.com", 8)],
     {"p4-1", "p4-2"}),
    # "Case 5: Job Enqueue DRA Check rejects oversize job"
    (queue("q5", capability={"gpu.com": 1}), [("p5-1", "q5", "gpu.com", 2)], set()),
], ids=["case1", "case2", "case3", "case4", "case5"])
def test_volcano_capacity_dra_cases(queues, pods, expected, pure):
    docs = [*VOLCANO_CLUSTER]
    for name, q, cls, count in pods:
        docs += dra_pod(name, q, cls, count)
    decisions = run_cycle(capacity_plan(queues), state_of(docs), Options(pure_python=pure))
    assert set(bound(decisions)) == expected


def test_shared_resource_claim_is_charged_once():
    """TestSharedResourceClaimIsChargedOnce: two pods of a queue using one claim charge it once."""
    state = state_of([*VOLCANO_CLUSTER, claim_doc("shared", request("gpu-request", cls="gpu.com")),
                      pod_doc("a", claims={"gpu": "shared"}), pod_doc("b", claims={"gpu": "shared"})])
    pods = sorted(state.pods.values(), key=lambda p: p.name)
    # a running consumer carries it: the waiting one is charged nothing (refs 2, counted once)
    charges = charge_devices(state.dra, {"gpu.com": 7}, pods, [0], [1])
    assert charges.tasks == {0: ((7, 1),)} and charges.shared == {}
    # both waiting: each carries it until one is placed (the DynamicResources rule takes it off
    # the other then, and gives it back if that placement is undone: the cycle tests below)
    charges = charge_devices(state.dra, {"gpu.com": 7}, pods, [], [0, 1])
    assert charges.tasks == {0: ((7, 1),), 1: ((7, 1),)}
    assert charges.shared == {"ns/shared": (((7, 1),), [0, 1])}


def test_job_enqueueable_checks_dra_without_min_resources(pure):
    """TestJobEnqueueableChecksDRAWithoutMinResources: a PodGroup without minResources whose
    task asks 2 devices of a class its queue caps at 1 is not admitted, the reason naming it."""
    group = podgroup_doc("job1", 1, queue="q1")
    group["status"]["phase"] = "Pending"
    docs = [*VOLCANO_CLUSTER, group, claim_doc("c", request(cls="gpu.com", count=2)),
            pod_doc("task1", claims={"gpu": "c"}, group="job1")]
    decisions = run_cycle(capacity_plan(queue("q1", capability={"gpu.com": 1})), state_of(docs),
                          Options(pure_python=pure))
    assert bound(decisions) == {}
    text = " ".join(r.message for r in decisions.reasons_for("ns/task1"))
    assert "deviceclass/gpu.com" in text and "minResources" in text


# --- cycles ---------------------------------------------------------------------------------------

GPU_CLUSTER = [node_doc("node-1"), node_doc("node-2"), gpus_on("node-1", 4), gpus_on("node-2", 4),
               device_class("gpu"), template_doc("one-gpu", request())]
CAP4 = queue("team", capability={"gpu": 4}, deserved={"gpu": 4})


def one_gpu_pods(n: int, group: str | None = None, prefix: str = "p") -> list[dict]:
    return [in_queue(pod_doc(f"{prefix}{i}", templates={"gpu": "one-gpu"}, group=group), "team") for i in range(n)]


def test_a_queue_capped_at_four_gpus_places_four_one_gpu_pods(pure):
    decisions = run_cycle(capacity_plan(CAP4), state_of([*GPU_CLUSTER, *one_gpu_pods(6)]), Options(pure_python=pure))
    assert len(bound(decisions)) == 4            # 8 devices free: the queue's capability bounds it
    waiting = [r.message for p in ("p4", "p5") for r in decisions.reasons_for(f"ns/{p}")]
    assert waiting and all("deviceclass/gpu" in m and "queue team" in m for m in waiting)


def test_a_gang_above_the_queue_capability_is_not_admitted(pure):
    group = podgroup_doc("g", 6, queue="team")
    group["status"]["phase"] = "Pending"
    decisions = run_cycle(capacity_plan(CAP4), state_of([*GPU_CLUSTER, group, *one_gpu_pods(6, "g")]),
                          Options(pure_python=pure))
    assert bound(decisions) == {}
    assert decisions.claims == {} or all(not c for c in decisions.claims.values())


def test_a_gang_within_the_capability_takes_what_the_queue_allows(pure):
    group = podgroup_doc("g", 2, queue="team")
    decisions = run_cycle(capacity_plan(CAP4), state_of([*GPU_CLUSTER, group, *one_gpu_pods(6, "g")]),
                          Options(pure_python=pure))
    assert len(bound(decisions)) == 4


def test_running_pods_devices_count_in_their_queue(pure):
    running = [claim_doc(f"r{i}-claim", allocation=allocation("node-1", ("gpu", f"gpu-{i}")),
                         reserved_for=[f"uid-r{i}"]) for i in range(3)]
    running += [in_queue(pod_doc(f"r{i}", claims={"gpu": f"r{i}-claim"}, node="node-1"), "team") for i in range(3)]
    decisions = run_cycle(capacity_plan(CAP4), state_of([*GPU_CLUSTER, *running, *one_gpu_pods(3)]),
                          Options(pure_python=pure))
    assert len(bound(decisions)) == 1            # 3 held, 1 more within 4


def test_a_claim_shared_by_pods_counts_once(pure):
    docs = [*GPU_CLUSTER, claim_doc("shared", request(count=2)),
            *(in_queue(pod_doc(f"s{i}", claims={"gpu": "shared"}), "team") for i in range(3)),
            *one_gpu_pods(2)]
    decisions = run_cycle(capacity_plan(CAP4), state_of(docs), Options(pure_python=pure))
    # 2 devices for the three of them and 2 for the others: 4 (counted per pod it would be 8)
    assert set(bound(decisions)) == {"s0", "s1", "s2", "p0", "p1"}
    # with a third one-GPU pod placed first, the shared claim's 2 would make 5: its pods wait
    docs.append(in_queue(pod_doc("p2", templates={"gpu": "one-gpu"}), "team"))
    decisions = run_cycle(capacity_plan(CAP4), state_of(docs), Options(pure_python=pure))
    assert set(bound(decisions)) == {"p0", "p1", "p2"}


def test_the_switch_off_counts_no_devices(pure):
    plan = capacity_plan(CAP4, arguments=" {\n    device_class_quota = false\n  }")
    decisions = run_cycle(plan, state_of([*GPU_CLUSTER, *one_gpu_pods(6)]), Options(pure_python=pure))
    assert len(bound(decisions)) == 6


def test_an_all_request_on_a_counted_class_waits_saying_why(pure):
    docs = [*GPU_CLUSTER, claim_doc("every", request(mode="All")),
            in_queue(pod_doc("a", claims={"gpu": "every"}), "team")]
    decisions = run_cycle(capacity_plan(CAP4), state_of(docs), Options(pure_python=pure))
    assert bound(decisions) == {}
    [reason] = decisions.reasons_for("ns/a")
    assert "asks for all devices of class gpu" in reason.message and "deviceclass/gpu" in reason.message


def test_claim_counts():
    state = state_of([device_class("gpu"), device_class("nic"),
                      claim_doc("two", request(count=2), request("n", cls="nic")),
                      claim_doc("alt", first_available("x", request("big", count=3), request("small", count=1),
                                                       request("other", cls="nic", count=2))),
                      claim_doc("done", request(count=2), allocation=allocation("n1", ("gpu", "a"), ("gpu", "b")))])
    claims = state.dra.claims
    assert claim_count(claims["ns/two"]).devices == (("gpu", 2), ("nic", 1))
    # firstAvailable: the most any alternative may take of each class
    assert claim_count(claims["ns/alt"]).devices == (("gpu", 3), ("nic", 2))
    assert claim_count(claims["ns/done"]).devices == (("gpu", 2),)
    assert device_class_of("deviceclass/gpu.nvidia.com") == "gpu.nvidia.com" and device_class_of("cpu") is None
    assert is_capacity_dimension("cores.deviceclass/vgpu") and not is_capacity_dimension("deviceclass/vgpu")
    assert isinstance(state.dra, Dra)


# --- lint, import, export -------------------------------------------------------------------------

def test_a_capacity_dimension_quota_is_refused_by_lint():
    text = ('policy "t" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin capacity\n}\n'
            'queue vgpu {\n  capability = { "memory.deviceclass/vgpu": 320Gi }\n}\n')
    compiled = compile_text(text, "q.policy")
    [diag] = [d for d in compiled.errors if d.code == "PD217"]
    assert diag.span.line == 8 and "deviceclass/vgpu" in diag.hint


CONFIG = """actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: capacity
    arguments:
      capacity.DynamicResourceAllocationEnable: false
"""


def test_the_switches_import_and_export(tmp_path: Path):
    result = import_volcano_text(CONFIG, "c.conf")
    assert result.exit_code == 0, [d.message for d in result.diagnostics]
    compiled = compile_text(result.text)
    assert compiled.ok and compiled.plan.plugin("capacity").arguments["device_class_quota"] is False
    path = tmp_path / "p.policy"
    path.write_text(result.text)
    [config] = [d for d in yaml.safe_load_all(export_volcano(str(path)).text) if d and "tiers" in d]
    plugins = {p["name"]: p for t in config["tiers"] for p in t["plugins"]}
    assert plugins["capacity"]["arguments"] == {"capacity.DynamicResourceAllocationEnable": False}
    assert plugins["predicates"]["arguments"] == {"predicate.DynamicResourceAllocationEnable": True}


@pytest.mark.parametrize("change, text", [
    ("capacity.DynamicResourceAllocationEnable: false", "capacity.DRAConsumableCapacityEnable"),
    ("predicate.DynamicResourceAllocationEnable: true", "predicate.DynamicResourceAllocationEnable"),
], ids=["consumable-capacity", "predicate-off"])
def test_switches_not_evaluated_are_refused_located(change, text):
    replacement = ("capacity.DRAConsumableCapacityEnable: true" if "capacity." in change
                   else "predicate.DynamicResourceAllocationEnable: false")
    result = import_volcano_text(CONFIG.replace(change, replacement), "c.conf")
    [diag] = [d for d in result.diagnostics if d.code == "PD614"]
    assert text in diag.message and diag.span.line > 0 and result.exit_code == 1


def test_reclaim_takes_devices_back_above_deserved(pure):
    """Queue a holds all 8 GPUs (deserved 4); queue b (deserved 4) asks for 2: reclaim evicts 2 of a's
    pods, each freeing its device (capacity's reclaimable, on the deviceclass column)."""
    queues = (queue("a", capability={"gpu": 8}, deserved={"gpu": 4}) +
              queue("b", capability={"gpu": 8}, deserved={"gpu": 4}))
    docs = [*GPU_CLUSTER]
    for i in range(8):
        node = f"node-{1 + i // 4}"
        docs.append(claim_doc(f"r{i}-claim", allocation=allocation(node, ("gpu", f"gpu-{i % 4}")),
                              reserved_for=[f"uid-r{i}"]))
        docs.append(in_queue(pod_doc(f"r{i}", claims={"gpu": f"r{i}-claim"}, node=node), "a"))
    docs += [in_queue(pod_doc(f"b{i}", templates={"gpu": "one-gpu"}), "b") for i in range(2)]
    plan = capacity_plan(queues, "enqueue, allocate, reclaim, backfill")
    decisions = run_cycle(plan, state_of(docs), Options(pure_python=pure))
    assert len(decisions.evictions) == 2
    assert all(e.pod.split("/")[1].startswith("r") for e in decisions.evictions)


def test_a_queue_object_with_a_capacity_dimension_holds_its_jobs(pure):
    queue_obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "vgpu"},
                 "spec": {"capability": {"cores.deviceclass/gpu": "800"}}}
    docs = [*GPU_CLUSTER, queue_obj, in_queue(pod_doc("a", templates={"gpu": "one-gpu"}), "vgpu")]
    decisions = run_cycle(capacity_plan(""), state_of(docs), Options(pure_python=pure))
    assert bound(decisions) == {}
    [reason] = decisions.reasons_for("ns/a")
    assert "cores.deviceclass/gpu" in reason.message and "not counted" in reason.message


def test_a_hard_topology_gang_with_counted_devices_is_placed_within_its_hypernode(pure):
    """The device columns are the queue's, not a HyperNode's room: a hard tier-1 gang of 4 one-GPU
    pods fits the HyperNode whose node has 4 free devices."""
    hypernodes = [{"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                   "metadata": {"name": f"s{i}"},
                   "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": f"node-{i}"}}}]}}
                  for i in (1, 2)]
    group = podgroup_doc("g", 4, queue="team")
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    docs = [*GPU_CLUSTER, *hypernodes, group, *one_gpu_pods(4, "g")]
    decisions = run_cycle(capacity_plan(CAP4), state_of(docs), Options(pure_python=pure))
    nodes = bound(decisions)
    assert len(nodes) == 4 and len(set(nodes.values())) == 1


DRA_POLICY = ('policy "t" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin capacity\n}\n'
              'queue gpus {\n  capability = { cpu: 64, "deviceclass/gpu.example.com": 8 }\n}\n')


def _exported_config(text: str, tmp_path: Path, name: str = "p.policy") -> tuple[dict, list]:
    path = tmp_path / name
    path.write_text(text)
    result = export_volcano(str(path))
    assert result.exit_code == 0 and result.text is not None, [d.message for d in result.errors]
    [config] = [d for d in yaml.safe_load_all(result.text) if d and "tiers" in d]
    return config, result.diagnostics


def _predicates_arguments(config: dict) -> dict | None:
    [entry] = [p for t in config["tiers"] for p in t["plugins"] if p["name"] == "predicates"]
    return entry.get("arguments")


def test_a_policy_using_dra_exports_the_predicate_switch_on_and_round_trips(tmp_path: Path):
    """Volcano's predicates allocate ResourceClaims only with predicate.DynamicResourceAllocationEnable,
    off by default (predicates.go); ours always allocate: a policy whose queues count DeviceClass
    devices exports the switch on though it never wrote it, and the export imports back to a policy
    that exports the same config (a fixed point)."""
    config, diagnostics = _exported_config(DRA_POLICY, tmp_path)
    assert _predicates_arguments(config) == {"predicate.DynamicResourceAllocationEnable": True}
    assert not [d for d in diagnostics if d.code == "PD610"]
    imported = import_volcano_text(yaml.safe_dump(config), "back.conf")
    assert imported.exit_code == 0, [d.message for d in imported.diagnostics]
    compiled = compile_text(imported.text)
    assert compiled.ok and compiled.plan.plugin("predicates").arguments["dynamic_resources"] is True
    again, _ = _exported_config(imported.text, tmp_path, "back.policy")
    assert again == config


@pytest.mark.parametrize("policy_text, expected", [
    # no DRA named anywhere: the default stays implicit (Volcano's real configs export back unchanged)
    (DRA_POLICY.replace(', "deviceclass/gpu.example.com": 8', ""), None),
    # written by the author: exported once, as written
    (DRA_POLICY.replace("  plugin predicates\n", "  plugin predicates {\n    dynamic_resources = true\n  }\n"),
     {"predicate.DynamicResourceAllocationEnable": True}),
    # capacity's DRA switch set, no device quota yet: the policy uses DRA all the same
    (DRA_POLICY.replace(', "deviceclass/gpu.example.com": 8', "")
     .replace("  plugin capacity\n", "  plugin capacity {\n    device_class_quota = true\n  }\n"),
     {"predicate.DynamicResourceAllocationEnable": True}),
], ids=["no-dra", "explicit", "capacity-switch"])
def test_the_predicate_switch_is_written_only_where_the_policy_uses_dra(policy_text, expected, tmp_path: Path):
    config, _ = _exported_config(policy_text, tmp_path)
    assert _predicates_arguments(config) == expected


def test_a_policy_using_dra_without_predicates_is_warned_located(tmp_path: Path):
    text = DRA_POLICY.replace("  plugin predicates\n", "  plugin gang\n")
    _, diagnostics = _exported_config(text, tmp_path)
    [warning] = [d for d in diagnostics if d.code == "PD610" and "ResourceClaims" in d.message]
    assert warning.span is not None and warning.span.line == 8 and "plugin predicates" in warning.hint
