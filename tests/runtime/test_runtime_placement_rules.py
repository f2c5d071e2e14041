"""Inter-pod affinity, topology spread, host ports, scheduling gates and kubelet-style requests,
table by table, on pods read from their YAML (so the pod spec reader is exercised too), both
kernels. Expected outcomes are kube-scheduler's: its documented examples
(kubernetes.io: Assigning Pods to Nodes, Pod Topology Spread Constraints) and its plugins'
rules (InterPodAffinity, PodTopologySpread, NodePorts, NodeAffinity)."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState
from runtime.cluster.objects import load_objects
from runtime_helpers import GiB, STANDARD_TIERS, cycle, node, placements, policy

PLAN = policy(STANDARD_TIERS)
PREEMPT = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
# Only the inter-pod scorers decide (no resource-based scores).
SCORES_ONLY = policy("tier {\n plugin predicates\n plugin nodeorder {\n leastrequested = 0\n balancedresource = 0\n }\n}")
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def pod_doc(name: str, labels=None, cpu: str = "100m", ns: str = "ns", node_name: str | None = None,
            affinity=None, spread=None, ports=(), gates=(), priority: int | None = None, group: str | None = None,
            scheduler: str = "volcano", **spec) -> dict:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
    if ports:
        container["ports"] = [dict(p) for p in ports]
    body = {"schedulerName": scheduler, "containers": [container], **spec}
    if affinity:
        body["affinity"] = affinity
    if spread:
        body["topologySpreadConstraints"] = spread
    if gates:
        body["schedulingGates"] = [{"name": g} for g in gates]
    if node_name:
        body["nodeName"] = node_name
    if priority is not None:
        body["priority"] = priority
    meta = {"name": name, "namespace": ns, "labels": dict(labels or {}), "uid": f"uid-{ns}-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body,
            "status": {"phase": "Running" if node_name else "Pending"}}


def term(labels: dict, key: str = HOST, **extra) -> dict:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def anti(*terms) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def affine(*terms) -> dict:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def cluster(nodes: dict[str, dict], pods: list[dict], cpu: int = 4000) -> ClusterState:
    state = ClusterState()
    for name, labels in nodes.items():
        node(state, name, cpu=cpu, labels={HOST: name, **labels})
    return load_objects(("test", p) for p in pods) if not state.nodes else _add(state, pods)


def _add(state: ClusterState, pods: list[dict]) -> ClusterState:
    return load_objects((("test", p) for p in pods), state=state)


def reasons(decisions, pod: str) -> list[str]:
    return [r.message for r in decisions.reasons_for(pod)]


# --- inter-pod affinity ----------------------------------------------------------------------

def test_replicas_with_hostname_anti_affinity_take_one_node_each(pure):
    pods = [pod_doc(f"web-{i}", {"app": "web"}, affinity=anti(term({"app": "web"}))) for i in range(4)]
    state = cluster({"n1": {}, "n2": {}, "n3": {}}, pods)
    decisions = cycle(PLAN, state, pure)
    bound = placements(decisions)
    assert len(bound) == 3 and len(set(bound.values())) == 3
    (waiting,) = {f"ns/web-{i}" for i in range(4)} - set(bound)
    assert reasons(decisions, waiting) == ["0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."]


def test_existing_pods_anti_affinity_is_symmetric(pure):
    # The incoming pod has no rule; the running one repels app=web from its node.
    pods = [pod_doc("guard", {"app": "db"}, node_name="n1", affinity=anti(term({"app": "web"}))),
            pod_doc("web", {"app": "web"})]
    state = cluster({"n1": {}}, pods)
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions) == {}
    assert reasons(decisions, "ns/web") == [
        "0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules."]
    state = cluster({"n1": {}, "n2": {}}, pods)
    assert placements(cycle(PLAN, state, pure)) == {"ns/web": "n2"}


@pytest.mark.parametrize("case, nodes, running, expect", [
    # kubernetes.io "Assigning Pods to Nodes" pod-with-pod-affinity: required affinity to
    # security=S1 in the zone; nodes in zones without S1, or without a zone label, fail.
    ("zone with S1", {"n1": {ZONE: "z1"}, "n2": {ZONE: "z2"}, "n3": {ZONE: "z1"}, "n4": {}},
     [("s1", {"security": "S1"}, "n1")], {"n1", "n3"}),
    ("no S1 anywhere, pod not self-affine", {"n1": {ZONE: "z1"}}, [], set()),
])
def test_required_affinity_needs_a_matching_pod_in_the_domain(pure, case, nodes, running, expect):
    pods = [pod_doc(name, labels, node_name=where) for name, labels, where in running]
    pods.append(pod_doc("p", {"app": "x"}, affinity=affine(term({"security": "S1"}, ZONE))))
    decisions = cycle(PLAN, cluster(nodes, pods), pure)
    got = {placements(decisions).get("ns/p")} - {None}
    assert got <= expect and bool(got) == bool(expect), case
    if not expect:
        assert "node(s) didn't match pod affinity rules" in reasons(decisions, "ns/p")[0]


def test_first_pod_of_a_self_affine_group_goes_anywhere_then_the_rest_follow(pure):
    pods = [pod_doc(f"a-{i}", {"app": "a"}, affinity=affine(term({"app": "a"}, ZONE))) for i in range(3)]
    nodes = {"n1": {ZONE: "z1"}, "n2": {ZONE: "z2"}, "n3": {ZONE: "z2"}, "nolabel": {}}
    state = cluster(nodes, pods, cpu=150)   # one pod per node: the group must share a zone
    decisions = cycle(PLAN, state, pure)
    bound = placements(decisions)
    assert "nolabel" not in bound.values()
    zones = {state.nodes[n].labels[ZONE] for n in bound.values()}
    assert len(zones) == 1
    assert len(bound) == (2 if zones == {"z2"} else 1)


def test_pods_placed_earlier_in_the_cycle_count_within_a_gang(pure):
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 4}, "status": {"phase": "Inqueue"}}
    members = [pod_doc(f"g-{i}", {"job": "g"}, group="g", affinity=anti(term({"job": "g"}))) for i in range(4)]
    decisions = cycle(PLAN, cluster({"n1": {}, "n2": {}, "n3": {}}, [group, *members]), pure)
    assert placements(decisions) == {}                      # 3 nodes for 4 members that repel each other
    decisions = cycle(PLAN, cluster({f"n{i}": {} for i in range(4)}, [group, *members]), pure)
    assert len(set(placements(decisions).values())) == 4


def test_namespaces_and_namespace_selector(pure):
    other = pod_doc("other", {"app": "web"}, ns="other", node_name="n1")
    same_ns = pod_doc("p", {"app": "web"}, affinity=anti(term({"app": "web"})))
    all_ns = pod_doc("q", {"app": "web"}, affinity=anti(term({"app": "web"}, namespaceSelector={})))
    listed = pod_doc("r", {"app": "web"}, affinity=anti(term({"app": "web"}, namespaces=["other"])))
    for doc, may_share in ((same_ns, True), (all_ns, False), (listed, False)):
        decisions = cycle(PLAN, cluster({"n1": {}}, [other, doc]), pure)
        assert bool(placements(decisions)) == may_share, doc["metadata"]["name"]


def test_match_label_keys_narrow_the_selector_to_the_pods_revision(pure):
    old = pod_doc("old", {"app": "x", "pod-template-hash": "h1"}, node_name="n1")
    new = pod_doc("new", {"app": "x", "pod-template-hash": "h2"},
                  affinity=anti(term({"app": "x"}, matchLabelKeys=["pod-template-hash"])))
    assert placements(cycle(PLAN, cluster({"n1": {}}, [old, new]), pure)) == {"ns/new": "n1"}


def test_preferred_anti_affinity_spreads_when_it_can(pure):
    pref = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term({"app": "w"})}]}}
    pods = [pod_doc(f"w-{i}", {"app": "w"}, affinity=pref) for i in range(3)]
    plan = SCORES_ONLY
    assert len(set(placements(cycle(plan, cluster({"n1": {}, "n2": {}, "n3": {}}, pods), pure)).values())) == 3


# --- topology spread ---------------------------------------------------------------------------

B4 = {"node1": {"zone": "zoneA", "node": "node1"}, "node2": {"zone": "zoneA", "node": "node2"},
      "node3": {"zone": "zoneB", "node": "node3"}, "node4": {"zone": "zoneB", "node": "node4"}}
B4_PODS = [("a", "node1"), ("b", "node2"), ("c", "node3")]


def spread(key="zone", skew=1, when="DoNotSchedule", **extra) -> dict:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"foo": "bar"}}, **extra}


@pytest.mark.parametrize("case, constraints, extra_nodes, spec, allowed", [
    ("one constraint", [spread()], {}, {}, {"node3", "node4"}),
    ("maxSkew 2", [spread(skew=2)], {}, {}, {"node1", "node2", "node3", "node4"}),
    ("per node", [spread(key="node")], {}, {}, {"node4"}),
    ("two constraints", [spread(), spread(key="node")], {}, {}, {"node4"}),
    ("node affinity honoured", [spread()], {"node5": {"zone": "zoneC", "node": "node5"}},
     {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
         {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["zoneC"]}]}]}}}},
     {"node3", "node4"}),
    ("without it zoneC is the minimum", [spread()], {"node5": {"zone": "zoneC", "node": "node5"}}, {}, {"node5"}),
])
def test_topology_spread_documented_examples(pure, case, constraints, extra_nodes, spec, allowed):
    pods = [pod_doc(n, {"foo": "bar"}, node_name=w) for n, w in B4_PODS]
    affinity = spec.get("affinity")
    pods.append(pod_doc("new", {"foo": "bar"}, spread=constraints, affinity=affinity))
    decisions = cycle(PLAN, cluster({**B4, **extra_nodes}, pods), pure)
    assert placements(decisions).get("ns/new") in allowed, case


def test_topology_spread_with_no_room_says_so(pure):
    nodes = {"node1": {"zone": "zoneA", "node": "node1"}, "node2": {"zone": "zoneA", "node": "node2"},
             "node3": {"zone": "zoneB", "node": "node3"}}
    pods = [pod_doc(n, {"foo": "bar"}, node_name=w) for n, w in
            (("a", "node1"), ("b", "node1"), ("c", "node2"), ("d", "node3"), ("e", "node3"))]
    pods.append(pod_doc("new", {"foo": "bar"}, spread=[spread(), spread(key="node")]))
    decisions = cycle(PLAN, cluster(nodes, pods), pure)
    assert placements(decisions) == {}
    assert reasons(decisions, "ns/new") == [
        "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints."]


def test_min_domains_holds_the_minimum_at_zero(pure):
    nodes = {f"n{z}": {"zone": z} for z in ("a", "b", "c")}
    pods = [pod_doc(n, {"foo": "bar"}, node_name=w) for n, w in
            (("1", "na"), ("2", "na"), ("3", "nb"), ("4", "nb"), ("5", "nc"))]
    pods.append(pod_doc("new", {"foo": "bar"}, spread=[spread(minDomains=5)]))
    assert placements(cycle(PLAN, cluster(nodes, pods), pure)) == {}
    pods[-1] = pod_doc("new", {"foo": "bar"}, spread=[spread()])
    assert placements(cycle(PLAN, cluster(nodes, pods), pure)) == {"ns/new": "nc"}


def test_a_deployment_spreads_evenly_over_zones_in_one_cycle(pure):
    nodes = {f"n{i}": {"zone": f"z{i % 3}"} for i in range(6)}
    pods = [pod_doc(f"r-{i}", {"foo": "bar"}, spread=[spread()]) for i in range(7)]
    state = cluster(nodes, pods)
    bound = placements(cycle(PLAN, state, pure))
    per_zone = {}
    for n in bound.values():
        per_zone[state.nodes[n].labels["zone"]] = per_zone.get(state.nodes[n].labels["zone"], 0) + 1
    assert len(bound) == 7 and max(per_zone.values()) - min(per_zone.values()) <= 1


def test_schedule_anyway_prefers_the_emptier_domain(pure):
    pods = [pod_doc(n, {"foo": "bar"}, node_name=w) for n, w in B4_PODS]
    pods.append(pod_doc("new", {"foo": "bar"}, spread=[spread(when="ScheduleAnyway")]))
    plan = SCORES_ONLY
    assert placements(cycle(plan, cluster(B4, pods), pure))["ns/new"] in {"node3", "node4"}


# --- host ports ------------------------------------------------------------------------------

@pytest.mark.parametrize("first, second, share", [
    ({"hostPort": 8080, "containerPort": 80}, {"hostPort": 8080, "containerPort": 80}, False),
    ({"hostPort": 8080, "containerPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 8080, "containerPort": 80}, False),
    ({"hostPort": 8080, "containerPort": 80, "hostIP": "10.0.0.1"},
     {"hostPort": 8080, "containerPort": 80, "hostIP": "10.0.0.2"}, True),
    ({"hostPort": 53, "containerPort": 53, "protocol": "UDP"}, {"hostPort": 53, "containerPort": 53}, True),
])
def test_host_ports_conflict_by_port_protocol_and_ip(pure, first, second, share):
    pods = [pod_doc("a", ports=[first], node_name="n1"), pod_doc("b", ports=[second])]
    decisions = cycle(PLAN, cluster({"n1": {}}, pods), pure)
    assert bool(placements(decisions)) == share
    if not share:
        assert reasons(decisions, "ns/b") == [
            "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."]


def test_two_pending_pods_asking_for_one_port_take_two_nodes(pure):
    pods = [pod_doc(f"p{i}", ports=[{"hostPort": 9000, "containerPort": 9000}]) for i in range(3)]
    bound = placements(cycle(PLAN, cluster({"n1": {}, "n2": {}}, pods), pure))
    assert len(bound) == 2 and len(set(bound.values())) == 2


def test_a_port_taken_by_another_class_holds_for_a_class_placed_before(pure):
    # Jobs of minMember 1 take one task a turn, so each class places again after the others
    # took ports: a class whose placement was made before must see their nodes taken.
    docs, port = [], [{"hostPort": 7000, "containerPort": 7000}]
    for j, cpu in enumerate(("100m", "200m", "300m")):
        docs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": f"j{j}", "namespace": "ns"}, "spec": {"minMember": 1},
                     "status": {"phase": "Inqueue"}})
        docs += [pod_doc(f"j{j}-{t}", cpu=cpu, group=f"j{j}", ports=port) for t in range(2)]
    decisions = cycle(PLAN, cluster({f"n{i}": {} for i in range(4)}, docs), pure)
    bound = placements(decisions)
    assert len(bound) == 4 and len(set(bound.values())) == 4, bound
    assert {key.split("-")[0] for key in bound} == {"ns/j0", "ns/j1", "ns/j2"}


def test_a_leaving_pods_port_is_a_future_fit(pure):
    state = cluster({"n1": {}}, [pod_doc("old", ports=[{"hostPort": 80, "containerPort": 80}], node_name="n1"),
                                 pod_doc("new", ports=[{"hostPort": 80, "containerPort": 80}])])
    state.pods["ns/old"].releasing = True
    decisions = cycle(PLAN, state, pure)
    assert placements(decisions) == {} and decisions.pipelined == {"ns/new": "n1"}


# --- gates, pods not ours, requests, node fields -----------------------------------------------

def test_gated_pods_are_never_bound_and_say_why(pure):
    decisions = cycle(PLAN, cluster({"n1": {}}, [pod_doc("g", gates=["example.com/quota"])]), pure)
    assert placements(decisions) == {}
    assert reasons(decisions, "ns/g") == ["waiting for scheduling gates: [example.com/quota]"]


def test_a_pod_with_a_node_name_only_takes_room(pure):
    pods = [pod_doc("pinned", cpu="3", node_name="n1"), pod_doc("p", cpu="2")]
    assert placements(cycle(PLAN, cluster({"n1": {}, "n2": {}}, pods), pure)) == {"ns/p": "n2"}


def test_native_sidecars_count_as_the_kubelet_counts_them(pure):
    def sidecar_pod(i: int) -> dict:
        doc = pod_doc(f"s{i}", cpu="4")
        doc["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always",
                                          "resources": {"requests": {"cpu": "4"}}},
                                         {"name": "setup", "resources": {"limits": {"cpu": "6"}}}]
        return doc
    state = cluster({"n1": {}}, [sidecar_pod(i) for i in range(3)], cpu=8000)
    assert state.pods["ns/s0"].requests["cpu"] == 10000    # max(4 + 4, 4 + 6): the init peak beside the sidecar
    state = cluster({"n1": {}}, [sidecar_pod(i) for i in range(3)], cpu=16000)
    assert len(placements(cycle(PLAN, state, pure))) == 1


def test_pod_level_resources_and_limits_stand_in_for_requests():
    from runtime.cluster.podspec import pod_requests
    spec = {"containers": [{"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}}},
                           {"resources": {"limits": {"memory": "512Mi"}}}],
            "resources": {"requests": {"cpu": "3"}}, "overhead": {"cpu": "250m"}}
    assert pod_requests(spec) == {"cpu": 3250, "memory": GiB + GiB // 2}


def test_match_fields_place_a_daemonset_style_pod_on_its_node(pure):
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}
    decisions = cycle(PLAN, cluster({"n1": {}, "n2": {}, "n3": {}}, [pod_doc("ds", affinity=pinned)]), pure)
    assert placements(decisions) == {"ns/ds": "n2"}


# --- preemption sees the rules -----------------------------------------------------------------

def test_a_preemptor_blocked_by_a_low_priority_pods_anti_affinity_evicts_it(pure):
    pods = [pod_doc("low", {"app": "batch"}, priority=1, node_name="n1", affinity=anti(term({"app": "web"}))),
            pod_doc("web", {"app": "web"}, priority=100)]
    decisions = cycle(PREEMPT, cluster({"n1": {}}, pods), pure)
    assert [e.pod for e in decisions.evictions] == ["ns/low"]
    assert decisions.pipelined == {"ns/web": "n1"}


def test_preemption_policy_never_evicts_nothing(pure):
    pods = [pod_doc("low", cpu="4", priority=1, node_name="n1"),
            pod_doc("high", cpu="4", priority=100, preemptionPolicy="Never")]
    decisions = cycle(PREEMPT, cluster({"n1": {}}, pods), pure)
    assert decisions.evictions == [] and placements(decisions) == {}
    pods[1] = pod_doc("high", cpu="4", priority=100)
    assert [e.pod for e in cycle(PREEMPT, cluster({"n1": {}}, pods), pure).evictions] == ["ns/low"]


def test_victims_that_would_not_free_a_port_are_not_chosen(pure):
    # The port is held by a high-priority pod: evicting the low one frees cpu but not the port.
    pods = [pod_doc("keeper", cpu="100m", priority=1000, node_name="n1", ports=[{"hostPort": 80, "containerPort": 80}]),
            pod_doc("low", cpu="3", priority=1, node_name="n1"),
            pod_doc("web", cpu="2", priority=100, ports=[{"hostPort": 80, "containerPort": 80}])]
    decisions = cycle(PREEMPT, cluster({"n1": {}}, pods), pure)
    assert decisions.evictions == []
