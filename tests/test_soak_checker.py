"""The soak's checker (bench/soak/checker.py) on hand-made API objects: every invariant it claims
must flag a world that breaks it, and pass one that does not. A checker that never says anything
would let the soak report 0 violations whatever the scheduler does."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from bench.soak.checker import Checker, Limits, World, pod_requests

T0 = 1_000_000.0
SCHEDULER = "soak"
LIMITS = Limits(SCHEDULER, race_grace_s=5.0, gang_grace_s=10.0, fit_deadline_s=30.0)


def node(name: str, cpu: str = "4", memory: str = "16Gi", *, taints: list[dict] | None = None,
         labels: dict[str, str] | None = None, unschedulable: bool = False, gpus: int = 0) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable |= {"volcano.sh/gpu-number": str(gpus), "volcano.sh/gpu-memory": str(gpus * 16384)}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": {"allocatable": allocatable,
                                     "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str | None = None, cpu: str = "1", memory: str = "1Gi", *, namespace: str = "ns",
        phase: str | None = None, group: str | None = None, queue: str | None = None,
        extra: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    notes = dict(annotations or {})
    if group:
        notes["scheduling.k8s.io/group-name"] = group
    if queue:
        notes["scheduling.volcano.sh/queue-name"] = queue
    body: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}", "annotations": notes,
                     "creationTimestamp": "2026-12-01T12:00:00Z"},
        "spec": {"schedulerName": SCHEDULER,
                 "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory,
                                                                            **(extra or {})}}}],
                 **spec},
        "status": {"phase": phase or ("Running" if node_name else "Pending")},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def queue(name: str, capability: dict[str, str] | None = None, guarantee: dict[str, str] | None = None) -> dict:
    spec: dict[str, Any] = {"weight": 1}
    if capability:
        spec["capability"] = capability
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return {"kind": "Queue", "metadata": {"name": name}, "spec": spec, "status": {"state": "Open"}}


def podgroup(name: str, min_member: int, namespace: str = "ns", queue_name: str = "default") -> dict:
    return {"kind": "PodGroup", "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member, "queue": queue_name}}


class Run:
    """A checker that has seen `pods` appear (pending) at T0 and bound at `bound_at`."""

    def __init__(self) -> None:
        self.checker = Checker(LIMITS, T0 - 100)

    def see(self, pods: list[dict], at: float, deleted: bool = False) -> None:
        for p in pods:
            self.checker.saw_pod(p, at, deleted)

    def check(self, at: float, nodes: list[dict], pods: list[dict], *, queues: list[dict] | None = None,
              podgroups: list[dict] | None = None, namespaces: list[dict] | None = None) -> list[tuple[str, str]]:
        world = World(now=at, nodes=nodes, pods=pods, podgroups=podgroups or [],
                      queues=queues if queues is not None else [queue("default")], namespaces=namespaces or [])
        return [(v.invariant, v.subject) for v in self.checker.check(world)]


def bound_world(nodes: list[dict], pods: list[dict], **kwargs: Any) -> list[tuple[str, str]]:
    """Pods first seen pending, then bound a minute later, then checked."""
    run = Run()
    run.see([{**p, "spec": {k: v for k, v in p["spec"].items() if k != "nodeName"}} for p in pods], T0)
    run.see(pods, T0 + 60)
    return run.check(T0 + 61, nodes, pods, **kwargs)


# ---------------------------------------------------------------- requests as the kubelet counts them


def test_requests_take_the_larger_of_init_and_containers_plus_overhead_and_sidecars() -> None:
    body = pod("p", cpu="500m", memory="1Gi")
    body["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
        {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}},
    ]
    body["spec"]["overhead"] = {"cpu": "100m", "memory": "64Mi"}
    requests = pod_requests(body)
    # init phase: sidecar 250m + init 2 = 2.25; running: 500m + sidecar 250m = 750m; + overhead 100m.
    assert requests["cpu"] == Decimal("2.35")
    assert requests["memory"] == 2**30 + 64 * 2**20
    assert requests["pods"] == 1


def test_a_request_defaults_to_the_limit() -> None:
    body = pod("p")
    body["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "3", "nvidia.com/gpu": "1"}}
    assert pod_requests(body)["cpu"] == 3 and pod_requests(body)["nvidia.com/gpu"] == 1


# ---------------------------------------------------------------- each invariant flags a broken world


def test_a_clean_world_passes() -> None:
    nodes = [node("n0"), node("n1", taints=[{"key": "k", "effect": "NoSchedule"}])]
    pods = [pod("a", "n0", cpu="2"), pod("b", "n0", cpu="2"),
            pod("c", "n1", tolerations=[{"key": "k", "operator": "Exists"}])]
    assert bound_world(nodes, pods) == []


def test_an_over_committed_node_is_flagged() -> None:
    assert bound_world([node("n0", cpu="4")], [pod("a", "n0", cpu="3"), pod("b", "n0", cpu="2")]) == \
        [("node-capacity", "n0")]


def test_an_init_container_counts_as_the_kubelet_counts_it() -> None:
    big_init = pod("a", "n0", cpu="100m")
    big_init["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "5"}}}]
    assert bound_world([node("n0", cpu="4")], [big_init]) == [("node-capacity", "n0")]


def test_too_many_pods_for_the_node_is_flagged() -> None:
    small = node("n0")
    small["status"]["allocatable"]["pods"] = "1"
    assert bound_world([small], [pod("a", "n0", cpu="1"), pod("b", "n0", cpu="1")]) == [("node-capacity", "n0")]


def test_a_node_cut_under_its_pods_is_not_the_schedulers_doing_but_a_bind_after_the_cut_is() -> None:
    run = Run()
    pods = [pod("a", "n0", cpu="3")]
    run.see(pods, T0)
    assert run.check(T0 + 1, [node("n0", cpu="4")], pods) == []
    assert run.check(T0 + 2, [node("n0", cpu="2")], pods) == []   # the cut: over, but nothing bound since
    later = pods + [pod("b", "n0", cpu="1")]
    run.see(later[1:], T0 + 3)                                      # within the race grace: excused
    assert run.check(T0 + 3.5, [node("n0", cpu="2")], later) == []
    again = later + [pod("c", "n0", cpu="1")]
    run.see(again[2:], T0 + 20)                                     # long after the cut: flagged
    assert run.check(T0 + 21, [node("n0", cpu="2")], again) == [("node-capacity", "n0")]


def test_an_over_committed_node_is_reported_once_per_episode() -> None:
    run = Run()
    pods = [pod("a", "n0", cpu="3"), pod("b", "n0", cpu="2")]
    run.see(pods, T0)
    assert run.check(T0 + 1, [node("n0", cpu="4")], pods) == [("node-capacity", "n0")]
    assert run.check(T0 + 2, [node("n0", cpu="4")], pods) == []


def test_a_gpu_card_oversubscribed_is_flagged() -> None:
    def gpu(name: str, mib: int, cards: str) -> dict:
        return pod(name, "g0", cpu="100m", extra={"volcano.sh/gpu-memory": str(mib)},
                   annotations={"volcano.sh/gpu-index": cards})
    fine = [gpu("a", 8192, "0"), gpu("b", 8192, "0"), gpu("c", 16384, "1")]
    assert bound_world([node("g0", gpus=2)], fine) == []
    over = [gpu("a", 8192, "0"), gpu("b", 12288, "0")]
    assert bound_world([node("g0", gpus=2)], over) == [("gpu-card-memory", "g0/card0")]


@pytest.mark.parametrize("annotation", [None, "7", "x", "0,1"])
def test_a_gpu_pod_without_a_valid_card_record_is_flagged(annotation: str | None) -> None:
    notes = {"volcano.sh/gpu-index": annotation} if annotation is not None else {}
    body = pod("a", "g0", cpu="100m", extra={"volcano.sh/gpu-memory": "1024"}, annotations=notes)
    assert bound_world([node("g0", gpus=2)], [body]) == [("gpu-card-memory", "ns/a")]


def test_a_pod_violating_a_taint_is_flagged() -> None:
    tainted = node("n0", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    assert bound_world([tainted], [pod("a", "n0")]) == [("node-match", "ns/a")]
    wrong_value = [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}]
    assert bound_world([tainted], [pod("a", "n0", tolerations=wrong_value)]) == [("node-match", "ns/a")]
    right = [{"key": "dedicated", "operator": "Equal", "value": "db"}]
    assert bound_world([tainted], [pod("a", "n0", tolerations=right)]) == []


def test_a_no_execute_taint_is_checked_and_prefer_no_schedule_is_not() -> None:
    assert bound_world([node("n0", taints=[{"key": "k", "effect": "NoExecute"}])], [pod("a", "n0")]) == \
        [("node-match", "ns/a")]
    assert bound_world([node("n0", taints=[{"key": "k", "effect": "PreferNoSchedule"}])], [pod("a", "n0")]) == []


def test_a_cordoned_node_a_selector_and_affinity_mismatch_and_a_missing_node_are_flagged() -> None:
    assert bound_world([node("n0", unschedulable=True)], [pod("a", "n0")]) == [("node-match", "ns/a")]
    zoned = node("n0", labels={"zone": "a"})
    assert bound_world([zoned], [pod("a", "n0", nodeSelector={"zone": "b"})]) == [("node-match", "ns/a")]
    assert bound_world([zoned], [pod("a", "n0", nodeSelector={"zone": "a"})]) == []
    not_a = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]}}}
    assert bound_world([zoned], [pod("a", "n0", affinity=not_a)]) == [("node-match", "ns/a")]
    assert bound_world([zoned], [pod("a", "nowhere")]) == [("node-match", "ns/a")]


def test_a_taint_added_just_before_the_bind_is_a_race_not_a_violation() -> None:
    run = Run()
    pending = pod("a")
    run.see([pending], T0)
    assert run.check(T0 + 1, [node("n0")], [pending]) == []
    tainted = node("n0", taints=[{"key": "k", "effect": "NoSchedule"}])
    assert run.check(T0 + 2, [tainted], [pending]) == []   # tainted at T0+2, seen then
    bound = pod("a", "n0")
    run.see([bound], T0 + 3)                              # bound a second later: decided before
    assert run.check(T0 + 4, [tainted], [bound]) == []


def test_a_short_gang_is_flagged_after_the_grace_period() -> None:
    members = [pod(f"g-{i}", "n0" if i < 2 else None, cpu="100m", group="g") for i in range(3)]
    run = Run()
    run.see(members, T0)
    groups = [podgroup("g", 3)]
    assert run.check(T0 + 1, [node("n0")], members, podgroups=groups) == []
    assert run.check(T0 + 5, [node("n0")], members, podgroups=groups) == []
    assert run.check(T0 + 12, [node("n0")], members, podgroups=groups) == [("gang-min-member", "ns/g")]


def test_a_gang_at_its_minimum_or_with_none_bound_passes_and_one_that_lost_a_member_is_not_judged() -> None:
    run = Run()
    at_min = [pod(f"a-{i}", "n0" if i < 2 else None, cpu="100m", group="a") for i in range(3)]
    none = [pod(f"b-{i}", None, cpu="100m", group="b") for i in range(3)]
    lost = [pod(f"c-{i}", "n0" if i < 2 else None, cpu="100m", group="c") for i in range(3)]
    run.see(at_min + none + lost, T0)
    run.see([pod("c-2", "n0", cpu="100m", group="c")], T0 + 1)
    run.see([pod("c-2", "n0", cpu="100m", group="c")], T0 + 2, deleted=True)   # evicted while bound
    everything = at_min + none + lost[:2]
    groups = [podgroup("a", 2), podgroup("b", 3), podgroup("c", 3)]
    for at in (T0 + 3, T0 + 20, T0 + 40):
        assert run.check(at, [node("n0")], everything, podgroups=groups) == []


def test_a_queue_above_its_capability_is_flagged() -> None:
    queues = [queue("default"), queue("capped", {"cpu": "2"})]
    pods = [pod("a", "n0", cpu="1500m", queue="capped"), pod("b", "n0", cpu="1", queue="capped"),
            pod("c", "n0", cpu="1")]
    assert bound_world([node("n0", cpu="8")], pods, queues=queues) == [("queue-capability", "capped")]
    within = [pod("a", "n0", cpu="1500m", queue="capped"), pod("c", "n0", cpu="3")]
    assert bound_world([node("n0", cpu="8")], within, queues=queues) == []


def test_a_gangs_queue_is_its_podgroups() -> None:
    queues = [queue("default"), queue("capped", {"cpu": "1"})]
    members = [pod(f"g-{i}", "n0", cpu="1", group="g", queue="default") for i in range(2)]
    assert bound_world([node("n0", cpu="8")], members, queues=queues,
                       podgroups=[podgroup("g", 2, queue_name="capped")]) == [("queue-capability", "capped")]


def test_a_pod_bound_twice_is_flagged() -> None:
    run = Run()
    run.see([pod("a")], T0)
    run.see([pod("a", "n0")], T0 + 1)
    run.see([pod("a", "n1")], T0 + 2)
    assert ("bound-once", "ns/a") in run.check(T0 + 3, [node("n0"), node("n1")], [pod("a", "n1")])


def test_a_pending_pod_that_fits_is_flagged_after_the_deadline() -> None:
    run = Run()
    waiting = pod("a", cpu="1")
    run.see([waiting], T0)
    assert run.check(T0 + 1, [node("n0")], [waiting]) == []
    assert run.check(T0 + 20, [node("n0")], [waiting]) == []
    assert run.check(T0 + 32, [node("n0")], [waiting]) == [("fit-bound-in-time", "ns/a")]


@pytest.mark.parametrize("why", ["tainted", "full", "selector", "capped queue", "contended", "gang", "spread",
                                 "port taken", "anti-affinity", "no card", "leader change"])
def test_a_pending_pod_that_does_not_fit_is_not_flagged(why: str) -> None:
    nodes = [node("n0", cpu="4", labels={"zone": "a"}, gpus=1)]
    waiting = pod("a", cpu="1")
    others: list[dict] = []
    queues = [queue("default")]
    podgroups: list[dict] = []
    if why == "tainted":
        nodes = [node("n0", taints=[{"key": "k", "effect": "NoExecute"}])]
    elif why == "full":
        others = [pod("b", "n0", cpu="3500m")]
    elif why == "selector":
        waiting = pod("a", cpu="1", nodeSelector={"zone": "b"})
    elif why == "capped queue":
        queues = [queue("default", {"cpu": "1500m"})]
        others = [pod("b", "n0", cpu="1")]
    elif why == "contended":
        others = [pod("b", cpu="3500m")]      # a second pending pod: together they exceed the cluster
    elif why == "gang":
        waiting = pod("a", cpu="1", group="g")
        podgroups = [podgroup("g", 2)]
    elif why == "spread":
        waiting = pod("a", cpu="1", topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone",
                                                                 "whenUnsatisfiable": "DoNotSchedule"}])
    elif why == "port taken":
        port = [{"name": "main", "ports": [{"containerPort": 80, "hostPort": 8080}],
                 "resources": {"requests": {"cpu": "100m"}}}]
        waiting = pod("a", containers=port)
        others = [pod("b", "n0", containers=port)]
    elif why == "anti-affinity":
        waiting["metadata"]["labels"] = {"app": "x"}
        repel = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}]}}
        others = [pod("b", "n0", cpu="100m", affinity=repel)]
    elif why == "no card":
        waiting = pod("a", cpu="1", extra={"volcano.sh/gpu-memory": "10000"})
        others = [pod("b", "n0", cpu="100m", extra={"volcano.sh/gpu-memory": "10000"},
                      annotations={"volcano.sh/gpu-index": "0"})]
    run = Run()
    run.see([waiting, *others], T0)
    everything = [waiting, *others]
    for at in (T0 + 1, T0 + 20, T0 + 40):
        leader = f"r{int(at) % 2}" if why == "leader change" else ""
        world = World(now=at, nodes=nodes, pods=everything, podgroups=podgroups, queues=queues, namespaces=[],
                      leader=leader)
        if why == "leader change":
            run.checker.check(world)
            continue
        assert [v.invariant for v in run.checker.check(world)] == []
    if why == "leader change":   # clocks restart at every leader change: 19 s, then 20 s, never 30
        assert run.checker.violations == []


# ---------------------------------------------------------------- the schedulers' memory


def test_rss_growth_after_warm_up_is_flagged_and_a_flat_or_short_process_is_not() -> None:
    from bench.soak.rss import Sample, instances

    def series(pid: int, values: list[float], start: float = 0.0) -> list[Sample]:
        return [Sample(start + 10.0 * i, "r0", pid, mib) for i, mib in enumerate(values)]

    warm_then_grow = series(1, [20, 80, 80, 90, 120, 160, 200])   # 80 MiB after warm-up, 200 at the end
    flat = series(2, [20, 80, 82, 79, 84, 81, 83], start=100)
    short = series(3, [20, 300])                                   # gone before it could be judged
    judged = {i.pid: i for i in instances(warm_then_grow + flat + short, warmup_s=10.0)}
    assert judged[1].grew and judged[1].warm_mib == 80 and judged[1].peak_mib == 200
    assert not judged[2].grew and judged[2].warm_mib == 80
    assert not judged[3].grew and judged[3].warm_mib is None
