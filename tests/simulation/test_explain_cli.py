"""`policydsl explain`: why a pod or PodGroup waits, by kind of reason, or where it goes."""

from __future__ import annotations

import json

import pytest

from sim_helpers import POLICIES, node, pod, podgroup, policy_text, run_cli, write_objects, write_policy

TAINT = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]


def explain(capsys, tmp_path, objects, target, *extra):
    snapshot = write_objects(tmp_path / "cluster.yaml", objects)
    return run_cli(capsys, "explain", target, "--snapshot", snapshot, *extra)


def test_failed_predicates_are_counted_per_node(tmp_path, capsys):
    objects = [node("n1"), node("gpu", taints=TAINT), pod("filler", cpu="2", node_name="n1"), pod("fat", cpu="3")]
    code, out, _ = explain(capsys, tmp_path, objects, "ns/fat")
    assert code == 0
    assert out.splitlines() == [
        "ns/fat waits (no PodGroup, queue default)",
        "  why:",
        "  - no node fits: 0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: yes}.",
        "      1 node: Insufficient cpu",
        "      1 node: node(s) had untolerated taint {gpu: yes}",
    ]


def test_a_pod_that_would_be_bound_says_where(tmp_path, capsys):
    code, out, _ = explain(capsys, tmp_path, [node("n1"), node("gpu", taints=TAINT), pod("web")], "ns/web")
    assert code == 0
    assert out.strip() == "ns/web would be bound to node n1 this cycle (no PodGroup, queue default)"


def test_a_running_pod_says_so(tmp_path, capsys):
    code, out, _ = explain(capsys, tmp_path, [node("n1"), pod("web", node_name="n1")], "ns/web")
    assert code == 0 and out.strip() == "ns/web is already running on node n1"


def test_queue_over_capability(tmp_path, capsys):
    policy = write_policy(tmp_path / "small.policy", policy_text(
        "small", "enqueue, allocate", "  plugin predicates\n  plugin proportion",
        "queue small { capability = { cpu: 2 } }\n"))
    objects = [node("n1", cpu="8"), podgroup("job", queue="small", min_member=3, minResources={"cpu": "3"})]
    objects += [pod(f"job-{i}", group="job") for i in range(3)]
    code, out, _ = explain(capsys, tmp_path, objects, "ns/job", "--policy", policy)
    assert code == 0
    assert out.startswith("PodGroup ns/job (queue small, minMember 3): phase Pending after one cycle; 3 pods, 3 wait")
    assert ("- queue limit: job needs cpu 3 (minResources); queue small may admit 2 more (capability 2, cluster 8, "
            "deserved 2, allocated 0, inqueue 0, elastic 0) (3 pods)") in out


def test_gang_short_by_n(tmp_path, capsys):
    objects = [node("n1", cpu="4"), podgroup("train", min_member=3, phase="Inqueue")]
    objects += [pod(f"train-{i}", group="train", cpu="2") for i in range(3)]
    code, out, _ = explain(capsys, tmp_path, objects, "ns/train", "--output", "json")
    assert code == 0
    result = json.loads(out)
    assert (result["kind"], result["status"], result["phase"]) == ("podgroup", "waiting", "Inqueue")
    gang = [c for c in result["causes"] if c["kind"] == "gang"]
    assert gang == [{"kind": "gang", "message": "gang short by 1 (2/3)", "pods": 3,
                     "details": {"ready": 2, "min_member": 3}}]
    assert result["condition"].startswith("Unschedulable: 3/3 tasks in gang unschedulable")


def test_device_memory_fragmentation(tmp_path, capsys):
    card_node = node("pcie", cpu="16", memory="64Gi", labels={"nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB"},
                     **{"nvidia.com/gpu-40gb": "2", "nvidia.com/gpu-40gb-memory": "80Gi"})
    objects = [card_node]
    for card in (0, 1):
        running = pod(f"model-{card}", node_name="pcie", **{"nvidia.com/gpu-40gb-memory": "25Gi"})
        running["metadata"]["annotations"]["volcano.sh/gpu-index"] = str(card)
        objects.append(running)
    objects.append(pod("late", **{"nvidia.com/gpu-40gb-memory": "20Gi"}))
    code, out, _ = explain(capsys, tmp_path, objects, "ns/late", "--policy", POLICIES / "gpu-sharing.policy")
    assert code == 0
    assert ("- device: device memory fragmented: pod needs 20Gi of nvidia.com/gpu-40gb memory on a card and 50% of "
            "each card's compute; node pcie's cards have 15Gi and 15Gi free (38% and 38% of their compute) on 1 node"
            in out)
    # 30Gi are idle in all: the node has the memory, just not on one card.
    assert "insufficient nvidia.com/gpu-40gb-memory" not in out


def test_card_memory_request_is_admitted_when_nodes_advertise_only_cards(tmp_path, capsys):
    # gpu-sharing.policy sizes its cards with card_memory, so the node need not advertise
    # nvidia.com/gpu-40gb-memory; the PodGroup's minResources may still name it.
    card_node = node("pcie", cpu="16", memory="64Gi", labels={"nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB"},
                     **{"nvidia.com/gpu-40gb": "2"})
    memory = {"nvidia.com/gpu-40gb-memory": "10Gi"}
    objects = [card_node, podgroup("infer", queue="inference", minResources={"cpu": "1", **memory}),
               pod("infer-0", group="infer", **memory)]
    code, out, _ = explain(capsys, tmp_path, objects, "ns/infer", "--policy", POLICIES / "gpu-sharing.policy")
    assert code == 0
    assert out.splitlines() == ["PodGroup ns/infer (queue inference, minMember 1): phase Running after one cycle; "
                                "1 pod, 1 would be bound",
                                "  condition: Scheduled: 1/1 tasks ready"]
    code, out, _ = explain(capsys, tmp_path, objects, "ns/infer-0", "--policy", POLICIES / "gpu-sharing.policy")
    assert out.strip().startswith("ns/infer-0 would be bound to node pcie, nvidia.com/gpu-40gb cards 0 this cycle")


def test_not_admitted_by_enqueue(tmp_path, capsys):
    objects = [node("n1", cpu="4"), podgroup("huge", minResources={"cpu": "100"}), pod("huge-0", group="huge")]
    code, out, _ = explain(capsys, tmp_path, objects, "ns/huge-0", "--output", "json")
    assert code == 0
    result = json.loads(out)
    [cause] = result["causes"]
    assert cause["kind"] == "enqueue"
    # The binding limit with its figures: 4 cpu × Volcano's 1.2 overcommit, nothing used yet.
    assert cause["message"] == ("job needs cpu 100 (minResources); the cluster may admit 4800m more "
                                "(cluster 4 × 1.2 overcommit, used 0, inqueue 0)")
    assert result["phase"] == "Pending"


def test_another_schedulers_pod(tmp_path, capsys):
    other = pod("web")
    other["spec"]["schedulerName"] = "default-scheduler"
    code, out, _ = explain(capsys, tmp_path, [node("n1"), other], "ns/web")
    assert code == 0 and "has schedulerName default-scheduler" in out


def test_unknown_pod_is_a_clear_error(tmp_path, capsys):
    code, out, err = explain(capsys, tmp_path, [node("n1"), pod("web")], "ns/wbe")
    assert code == 2 and out == ""
    assert err.strip() == "policydsl explain: no pod or PodGroup `ns/wbe` in the snapshot; did you mean ns/web?"


def test_bad_snapshot_is_a_usage_error(tmp_path, capsys):
    code, _, err = explain(capsys, tmp_path, [node("n1", cpu="many")], "ns/web")
    assert code == 2 and "Node n1: `status.allocatable.cpu`" in err and "Traceback" not in err


@pytest.mark.parametrize("target, kind", [("web", "pod"), ("default/web", "pod")])
def test_a_bare_name_means_namespace_default(tmp_path, capsys, target, kind):
    code, out, _ = explain(capsys, tmp_path, [node("n1"), pod("web", ns="default")], target, "--output", "json")
    assert code == 0 and json.loads(out)["kind"] == kind



def test_a_gangs_causes_do_not_depend_on_the_order_the_cluster_is_listed_in():
    # Members wait for different reasons (the queue's room stops one, the gang the rest): the
    # causes come in the same order however the cluster lists the pods (a snapshot file sorted,
    # a live watch cache in arrival order), so live and offline explain agree.
    from compiler.pipeline import compile_text
    from runtime.engine.cycle import Options
    from runtime.cluster.model import PG_INQUEUE, ClusterState, Node, Pod, PodGroup
    from runtime.engine.explanation import explain as explain_target

    plan = compile_text(policy_text("small", "allocate", "  plugin predicates\n  plugin proportion",
                                    "queue small { capability = { cpu: 4 } }\n"), "small.policy").plan
    texts = []
    for order in (range(3), reversed(range(3))):
        state = ClusterState()
        state.add_node(Node("n1", {"cpu": 12000, "memory": 32 << 30, "pods": 110}))
        state.add_podgroup(PodGroup("ns", "big", min_member=3, queue="small", phase=PG_INQUEUE))
        for i in order:
            state.add_pod(Pod("ns", f"big-{i}", {"cpu": 2000}, uid=f"u{i}", group="big", scheduler_name="volcano"))
        result = explain_target(plan, state, "ns/big", Options(scheduler_name="volcano"))
        texts.append(result.lines())
    assert any("queue limit" in line for line in texts[0]) and any("gang" in line for line in texts[0]), texts[0]
    assert texts[0] == texts[1]
