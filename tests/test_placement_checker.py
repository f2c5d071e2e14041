"""The placement checker (tests/placement_checker.py) on hand-made placements: for each rule, a
placement that breaks it is caught, and one that keeps it is not, so that a checker that passes
everything (or fails everything) cannot pass these."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from placement_checker import RULES, Violation, check, list_all, pod_requests

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


# --- objects ------------------------------------------------------------------------------------

def node(name: str, zone: str | None = "a", cpu: str = "8", pods: str = "110", labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None, unschedulable: bool = False, **extra: str) -> dict[str, Any]:
    node_labels = {HOST: name, **({ZONE: zone} if zone else {}), **(labels or {})}
    allocatable = {"cpu": cpu, "memory": "32Gi", "pods": pods, **extra}
    return {"metadata": {"name": name, "labels": node_labels},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": allocatable, "capacity": allocatable}}


def container(cpu: str | None = "1", limit: str | None = None, ports: list[dict[str, Any]] | None = None,
              sidecar: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu}
    if limit is not None:
        resources["limits"] = {"cpu": limit}
    made: dict[str, Any] = {"name": "c", "image": "busybox", "resources": resources}
    if ports:
        made["ports"] = ports
    if sidecar:
        made["restartPolicy"] = "Always"
    return made


def pod(name: str, on: str | None = None, *, ns: str = "default", labels: dict[str, str] | None = None,
        cpu: str = "1", containers: list[dict[str, Any]] | None = None, init: list[dict[str, Any]] | None = None,
        phase: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": containers or [container(cpu)], **spec}
    if init:
        body["initContainers"] = init
    if on:
        body["nodeName"] = on
    made = {"metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": body}
    if phase:
        made["status"] = {"phase": phase}
    return made


def term(key: str = HOST, **match: Any) -> dict[str, Any]:
    """An inter-pod term over `app` labels: term(app="web"), or labelSelector=..., namespaces=..."""
    made: dict[str, Any] = {"topologyKey": key}
    for field in ("namespaces", "namespaceSelector", "labelSelector", "matchLabelKeys", "mismatchLabelKeys"):
        if field in match:
            made[field] = match.pop(field)
    if match:
        made["labelSelector"] = {"matchLabels": match}
    return made


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def attract(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def spread(key: str = ZONE, skew: int = 1, **extra: Any) -> dict[str, Any]:
    selector = extra.pop("labelSelector", {"matchLabels": {"app": "web"}})
    return {"topologyKey": key, "maxSkew": skew, "whenUnsatisfiable": extra.pop("when", "DoNotSchedule"),
            "labelSelector": selector, **extra}


def required_nodes(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def port(number: int, protocol: str | None = None, ip: str | None = None) -> dict[str, Any]:
    made: dict[str, Any] = {"containerPort": number, "hostPort": number}
    if protocol:
        made["protocol"] = protocol
    if ip:
        made["hostIP"] = ip
    return made


def web(name: str, on: str, **spec: Any) -> dict[str, Any]:
    return pod(name, on, labels={"app": "web"}, **spec)


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


NODES_3 = [node("n1", "a"), node("n2", "a"), node("n3", "b")]
ZONES_3 = [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b"), node("c1", "c")]


# --- requests as the kubelet computes them --------------------------------------------------------

@pytest.mark.parametrize(("spec", "cpu"), [
    pytest.param({"containers": [container("1"), container("2")]}, "3", id="containers add up"),
    pytest.param({"containers": [container(None, limit="5")]}, "5", id="a limit stands in for a missing request"),
    pytest.param({"containers": [container("1", limit="5")]}, "1", id="a request wins over its limit"),
    pytest.param({"containers": [container("1")], "initContainers": [container("6")]}, "6",
                 id="an init container larger than the containers"),
    pytest.param({"containers": [container("4")], "initContainers": [container("3"), container("2")]}, "4",
                 id="init containers run alone, one at a time"),
    pytest.param({"containers": [container("4")], "initContainers": [container("4", sidecar=True)]}, "8",
                 id="a sidecar adds to the containers"),
    pytest.param({"containers": [container("1")], "initContainers": [container("2", sidecar=True), container("5")]},
                 "7", id="a sidecar runs next to every later init container"),
    pytest.param({"containers": [container("1")], "initContainers": [container("5"), container("2", sidecar=True)]},
                 "5", id="an init container before the sidecar runs without it"),
    pytest.param({"containers": [container("4"), container("4")], "resources": {"requests": {"cpu": "2"}}}, "2",
                 id="pod-level requests replace the containers' sum"),
    pytest.param({"containers": [container(None)], "resources": {"limits": {"cpu": "3"}}}, "3",
                 id="a pod-level limit alone stands for the request"),
    pytest.param({"containers": [container("1")], "overhead": {"cpu": "250m"}}, "1.25", id="overhead is added"),
])
def test_requests_are_what_the_kubelet_admits(spec: dict[str, Any], cpu: str) -> None:
    assert pod_requests({"spec": spec})["cpu"] == Decimal(cpu)


def test_limits_stand_in_per_resource_only() -> None:
    made = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "1Gi"},
                                                                "limits": {"cpu": "2", "memory": "4Gi"}}}]}}
    assert pod_requests(made) == {"cpu": Decimal(2), "memory": Decimal(2**30)}


# --- every rule, broken and kept ----------------------------------------------------------------

# name -> (nodes, pods, the (pod, rule) pairs the checker must report: exactly these)
Case = tuple[list[dict[str, Any]], list[dict[str, Any]], set[tuple[str, str]]]

CASES: dict[str, Case] = {
    # resources and pod count
    "cpu within allocatable": ([node("n1")], [pod("p1", "n1", cpu="4"), pod("p2", "n1", cpu="4")], set()),
    "cpu over allocatable": ([node("n1")], [pod("p1", "n1", cpu="4"), pod("p2", "n1", cpu="5")],
                             {("default/p1,default/p2", "resources")}),
    "limits counted as requests": ([node("n1")], [pod("p1", "n1", containers=[container(None, limit="5")]),
                                                  pod("p2", "n1", containers=[container(None, limit="5")])],
                                   {("default/p1,default/p2", "resources")}),
    "native sidecars of 4+4 on an 8-cpu node": (
        [node("n1")],
        [pod(f"s{i}", "n1", cpu="4", init=[container("4", sidecar=True)]) for i in range(2)],
        {("default/s0,default/s1", "resources")}),
    "one native sidecar pod of 4+4 fits": (
        [node("n1")], [pod("s0", "n1", cpu="4", init=[container("4", sidecar=True)])], set()),
    "finished pods take no room": ([node("n1")], [pod("p1", "n1", cpu="8"), pod("done", "n1", cpu="8",
                                                                                phase="Succeeded")], set()),
    "a resource the node lacks": (
        [node("n1")], [pod("gpu", "n1", containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])],
        {("default/gpu", "resources")}),
    "extended resource within allocatable": (
        [node("n1", **{"nvidia.com/gpu": "1"})],
        [pod("gpu", "n1", containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])], set()),
    "pod count": ([node("n1", pods="2")], [pod(f"p{i}", "n1", cpu="1") for i in range(3)],
                  {("default/p0,default/p1,default/p2", "pod-count")}),
    # nodes, history, gates
    "bound to a node that does not exist": ([node("n1")], [pod("p1", "gone")], {("default/p1", "node")}),
    "unbound pods are not checked": ([node("n1", cpu="1")], [pod("p1", cpu="64")], set()),
    "a gated pod bound": ([node("n1")], [pod("g", "n1", schedulingGates=[{"name": "example.com/wait"}])],
                          {("default/g", "scheduling-gates")}),
    "a gated pod waiting": ([node("n1")], [pod("g", schedulingGates=[{"name": "example.com/wait"}])], set()),
    "one pod listed on two nodes": ([node("n1"), node("n2")], [pod("p", "n1"), pod("p", "n2")],
                                    {("default/p", "bound-once")}),
    # node selection
    "nodeSelector kept": ([node("n1", labels={"disk": "ssd"})], [pod("p", "n1", nodeSelector={"disk": "ssd"})], set()),
    "nodeSelector broken": ([node("n1")], [pod("p", "n1", nodeSelector={"disk": "ssd"})],
                            {("default/p", "node-selector")}),
    "node affinity In kept": ([node("n1", "a")], [pod("p", "n1", affinity=required_nodes(
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}))], set()),
    "node affinity In broken": ([node("n1", "c")], [pod("p", "n1", affinity=required_nodes(
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}))],
        {("default/p", "node-affinity")}),
    "node affinity terms are ORed": ([node("n1", "c")], [pod("p", "n1", affinity=required_nodes(
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["c"]}]}))], set()),
    "node affinity NotIn matches a missing label": ([node("n1", None)], [pod("p", "n1", affinity=required_nodes(
        {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["a"]}]}))], set()),
    "node affinity Gt broken": ([node("n1", labels={"gen": "3"})], [pod("p", "n1", affinity=required_nodes(
        {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}))],
        {("default/p", "node-affinity")}),
    "matchFields on metadata.name kept": ([node("n1"), node("n2")], [pod("ds", "n1", affinity=required_nodes(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}))], set()),
    "matchFields on metadata.name broken": ([node("n1"), node("n2")], [pod("ds", "n2", affinity=required_nodes(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}))],
        {("default/ds", "node-affinity")}),
    # taints
    "NoSchedule taint untolerated": ([node("n1", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])],
                                     [pod("p", "n1")], {("default/p", "taints")}),
    "NoExecute taint, wrong value": ([node("n1", taints=[{"key": "gpu", "value": "yes", "effect": "NoExecute"}])],
                                     [pod("p", "n1", tolerations=[{"key": "gpu", "value": "no"}])],
                                     {("default/p", "taints")}),
    "taint tolerated with Exists": ([node("n1", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])],
                                    [pod("p", "n1", tolerations=[{"key": "gpu", "operator": "Exists"}])], set()),
    "taint tolerated with Equal and effect": (
        [node("n1", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])],
        [pod("p", "n1", tolerations=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])], set()),
    "an empty key with Exists tolerates everything": (
        [node("n1", taints=[{"key": "x", "effect": "NoExecute"}])],
        [pod("p", "n1", tolerations=[{"operator": "Exists"}])], set()),
    "a toleration of another effect": (
        [node("n1", taints=[{"key": "gpu", "effect": "NoSchedule"}])],
        [pod("p", "n1", tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}])],
        {("default/p", "taints")}),
    "PreferNoSchedule filters nothing": ([node("n1", taints=[{"key": "x", "effect": "PreferNoSchedule"}])],
                                         [pod("p", "n1")], set()),
    "cordoned node": ([node("n1", unschedulable=True)], [pod("p", "n1")], {("default/p", "unschedulable")}),
    "cordoned node tolerated": ([node("n1", unschedulable=True)], [pod("p", "n1", tolerations=[
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}])], set()),
    # host ports
    "same host port on two nodes": ([node("n1"), node("n2")],
                                    [pod("a", "n1", containers=[container(ports=[port(80)])]),
                                     pod("b", "n2", containers=[container(ports=[port(80)])])], set()),
    "same host port on one node": ([node("n1")], [pod("a", "n1", containers=[container(ports=[port(80)])]),
                                                  pod("b", "n1", containers=[container(ports=[port(80)])])],
                                   {("default/a,default/b", "host-ports")}),
    "same port, other protocol": ([node("n1")], [pod("a", "n1", containers=[container(ports=[port(53)])]),
                                                 pod("b", "n1", containers=[container(ports=[port(53, "UDP")])])],
                                  set()),
    "same port, two host IPs": ([node("n1")], [pod("a", "n1", containers=[container(ports=[port(80, ip="10.0.0.1")])]),
                                               pod("b", "n1", containers=[container(ports=[port(80, ip="10.0.0.2")])])],
                                set()),
    "0.0.0.0 conflicts with every address": (
        [node("n1")], [pod("a", "n1", containers=[container(ports=[port(80, ip="10.0.0.1")])]),
                       pod("b", "n1", containers=[container(ports=[port(80, ip="0.0.0.0")])])],
        {("default/a,default/b", "host-ports")}),
    "a sidecar's host port counts": ([node("n1")], [
        pod("a", "n1", containers=[container(ports=[port(80)])]),
        pod("b", "n1", init=[container(ports=[port(80)], sidecar=True)])], {("default/a,default/b", "host-ports")}),
    "a plain init container's host port is not held": ([node("n1")], [
        pod("a", "n1", containers=[container(ports=[port(80)])]),
        pod("b", "n1", init=[container(ports=[port(80)])])], set()),
    # pod anti-affinity
    "replicas on distinct hosts": (NODES_3, [web(f"w{i}", f"n{i + 1}", affinity=anti(term(app="web")))
                                             for i in range(3)], set()),
    "two replicas on one host": (NODES_3, [web("w0", "n1", affinity=anti(term(app="web"))),
                                           web("w1", "n1", affinity=anti(term(app="web"))),
                                           web("w2", "n3", affinity=anti(term(app="web")))],
                                 {("default/w0", "pod-anti-affinity"), ("default/w1", "pod-anti-affinity")}),
    "an existing pod's anti-affinity repels a pod without any": (
        NODES_3, [web("w0", "n1", affinity=anti(term(app="web"))), web("plain", "n1")],
        {("default/w0", "pod-anti-affinity")}),
    "zone anti-affinity across hosts of one zone": (
        NODES_3, [web("w0", "n1", affinity=anti(term(ZONE, app="web"))), web("w1", "n2")],
        {("default/w0", "pod-anti-affinity")}),
    "anti-affinity on a node without the key": (
        [node("x1", None), node("x2", None)],
        [web("w0", "x1", affinity=anti(term(ZONE, app="web"))), web("w1", "x2", affinity=anti(term(ZONE, app="web")))],
        set()),
    "anti-affinity looks in its own namespace only": (
        NODES_3, [web("w0", "n1", affinity=anti(term(app="web"))), pod("w1", "n1", ns="other", labels={"app": "web"})],
        set()),
    "anti-affinity over listed namespaces": (
        NODES_3, [web("w0", "n1", affinity=anti(term(app="web", namespaces=["other"]))),
                  pod("w1", "n1", ns="other", labels={"app": "web"})], {("default/w0", "pod-anti-affinity")}),
    "anti-affinity over a namespaceSelector": (
        NODES_3, [web("w0", "n1", affinity=anti(term(app="web", namespaceSelector={"matchLabels": {"team": "x"}}))),
                  pod("w1", "n1", ns="other", labels={"app": "web"}),
                  pod("w2", "n2", ns="third", labels={"app": "web"})], {("default/w0", "pod-anti-affinity")}),
    "an empty namespaceSelector is every namespace": (
        NODES_3, [web("w0", "n1", affinity=anti(term(app="web", namespaceSelector={}))),
                  pod("w1", "n1", ns="third", labels={"app": "web"})], {("default/w0", "pod-anti-affinity")}),
    "matchExpressions in the selector": (
        NODES_3, [web("w0", "n1", affinity=anti(term(labelSelector={"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web", "api"]}]}))), pod("api", "n1", labels={"app": "api"})],
        {("default/w0", "pod-anti-affinity")}),
    "a null labelSelector matches no pod": (
        NODES_3, [web("w0", "n1", affinity=anti({"topologyKey": HOST})), web("w1", "n1")], set()),
    "mismatchLabelKeys keeps tenants apart": (
        NODES_3, [pod("t1", "n1", labels={"tenant": "x"}, affinity=anti(term(
            labelSelector={"matchExpressions": [{"key": "tenant", "operator": "Exists"}]},
            mismatchLabelKeys=["tenant"]))),
                  pod("t2", "n1", labels={"tenant": "x"}), pod("t3", "n1", labels={"tenant": "y"})],
        {("default/t1", "pod-anti-affinity")}),
    # pod affinity
    "affinity to a pod in the same zone": (
        NODES_3, [pod("db", "n1", labels={"app": "db"}), pod("api", "n2", affinity=attract(term(ZONE, app="db")))],
        set()),
    "affinity to a pod in another zone": (
        NODES_3, [pod("db", "n3", labels={"app": "db"}), pod("api", "n1", affinity=attract(term(ZONE, app="db")))],
        {("default/api", "pod-affinity")}),
    "affinity to a pod nobody runs": (NODES_3, [pod("api", "n1", affinity=attract(term(ZONE, app="db")))],
                                      {("default/api", "pod-affinity")}),
    "affinity on a node without the key": (
        [node("x1", None)], [pod("db", "x1", labels={"app": "db"}),
                             pod("api", "x1", affinity=attract(term(ZONE, app="db")))],
        {("default/api", "pod-affinity")}),
    "the first pod of a self-affine group goes anywhere": (
        NODES_3, [web("w0", "n3", affinity=attract(term(ZONE, app="web")))], set()),
    "a self-affine group in one zone": (
        NODES_3, [web(f"w{i}", f"n{i + 1}", affinity=attract(term(ZONE, app="web"))) for i in range(2)], set()),
    "a self-affine group started twice": (
        NODES_3, [web("w0", "n1", affinity=attract(term(ZONE, app="web"))),
                  web("w1", "n3", affinity=attract(term(ZONE, app="web")))],
        {("default/w1", "pod-affinity")}),
    "a self-affine group split 2 + 1": (
        NODES_3, [web("w0", "n1", affinity=attract(term(ZONE, app="web"))),
                  web("w1", "n2", affinity=attract(term(ZONE, app="web"))),
                  web("w2", "n3", affinity=attract(term(ZONE, app="web")))],
        {("default/w2", "pod-affinity")}),
    "a self-affine group joined by a pod it attracts elsewhere": (
        NODES_3, [web("w0", "n1", affinity=attract(term(ZONE, app="web"))), web("plain", "n3")], set()),
    "every term needs one pod that matches all of them": (
        NODES_3, [pod("a", "n1", labels={"app": "db"}), pod("b", "n1", labels={"tier": "cache"}),
                  pod("c", "n2", affinity=attract(term(ZONE, app="db"), term(ZONE, tier="cache")))],
        {("default/c", "pod-affinity")}),
    # topology spread
    "zones 2/2/1 with maxSkew 1": (ZONES_3, [web("w0", "a1", topologySpreadConstraints=[spread()]),
                                             web("w1", "a2", topologySpreadConstraints=[spread()]),
                                             web("w2", "b1", topologySpreadConstraints=[spread()]),
                                             web("w3", "b2", topologySpreadConstraints=[spread()]),
                                             web("w4", "c1", topologySpreadConstraints=[spread()])], set()),
    "zones 2/0/0 with maxSkew 1": (ZONES_3, [web("w0", "a1", topologySpreadConstraints=[spread()]),
                                             web("w1", "a2", topologySpreadConstraints=[spread()])],
                                   {("default/w0", "topology-spread"), ("default/w1", "topology-spread")}),
    "zones 2/0/0 with maxSkew 2": (ZONES_3, [web("w0", "a1", topologySpreadConstraints=[spread(skew=2)]),
                                             web("w1", "a2", topologySpreadConstraints=[spread(skew=2)])], set()),
    "ScheduleAnyway filters nothing": (ZONES_3, [web(f"w{i}", "a1", topologySpreadConstraints=[
        spread(when="ScheduleAnyway")]) for i in range(3)], set()),
    "a zone the pod may not use is no domain": (
        ZONES_3, [web(f"w{i}", n, affinity=required_nodes(
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}),
            topologySpreadConstraints=[spread()]) for i, n in enumerate(["a1", "a2", "b1"])], set()),
    "nodeAffinityPolicy Ignore counts the other zones": (
        ZONES_3, [web(f"w{i}", n, affinity=required_nodes(
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}),
            topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")]) for i, n in enumerate(["a1", "a2", "b1"])],
        {("default/w0", "topology-spread"), ("default/w1", "topology-spread")}),
    "nodeTaintsPolicy Honor leaves out a tainted zone": (
        [node("a1", "a"), node("b1", "b"), node("c1", "c", taints=[{"key": "t", "effect": "NoSchedule"}])],
        [web(f"w{i}", n, topologySpreadConstraints=[spread(nodeTaintsPolicy="Honor")])
         for i, n in enumerate(["a1", "b1"])], set()),
    "nodeTaintsPolicy Ignore counts a tainted zone": (
        [node("a1", "a"), node("b1", "b"), node("b2", "b"),
         node("c1", "c", taints=[{"key": "t", "effect": "NoSchedule"}])],
        [web(f"w{i}", n, topologySpreadConstraints=[spread()]) for i, n in enumerate(["a1", "b1", "b2"])],
        {("default/w1", "topology-spread"), ("default/w2", "topology-spread")}),
    "minDomains above the domains: at most maxSkew per domain": (
        [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b")],
        [web(f"w{i}", n, topologySpreadConstraints=[spread(minDomains=3)]) for i, n in enumerate(["a1", "a2", "b1"])],
        {("default/w0", "topology-spread"), ("default/w1", "topology-spread")}),
    "minDomains met": (
        ZONES_3, [web(f"w{i}", n, topologySpreadConstraints=[spread(minDomains=3)])
                  for i, n in enumerate(["a1", "b1", "c1"])], set()),
    "spread on a node without the key": (
        [node("a1", "a"), node("x1", None)], [web("w0", "x1", topologySpreadConstraints=[spread()])],
        {("default/w0", "topology-spread")}),
    "a node without the key is not counted": (
        [node("a1", "a"), node("b1", "b"), node("x1", None)],
        [web("w0", "a1", topologySpreadConstraints=[spread()]), web("w1", "b1", topologySpreadConstraints=[spread()]),
         web("w2", "x1"), web("w3", "x1")], set()),
    "spread counts its own namespace only": (
        ZONES_3, [web("w0", "a1", topologySpreadConstraints=[spread()]), pod("o", "a2", ns="x", labels={"app": "web"})],
        set()),
    "pods being deleted are not counted": (
        ZONES_3, [web("w0", "a1", topologySpreadConstraints=[spread()]),
                  {**web("old", "a2"), "metadata": {"name": "old", "namespace": "default", "labels": {"app": "web"},
                                                    "deletionTimestamp": "2026-01-01T00:00:00Z"}}], set()),
    "matchLabelKeys spreads each revision on its own": (
        ZONES_3, [pod(f"w{i}", "a1" if i < 2 else "b1", labels={"app": "web", "rev": str(i)},
                      topologySpreadConstraints=[spread(matchLabelKeys=["rev"])]) for i in range(3)], set()),
    "hostname spread of replicas": (
        ZONES_3, [web(f"w{i}", "a1", topologySpreadConstraints=[spread(HOST)]) for i in range(2)],
        {("default/w0", "topology-spread"), ("default/w1", "topology-spread")}),
}


def _summary(violations: list[Violation]) -> set[tuple[str, str]]:
    return {(v.pod, v.rule) for v in violations}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_rule_is_caught_when_broken_and_only_then(case: str) -> None:
    nodes, pods, expected = CASES[case]
    namespaces = [namespace("default"), namespace("other", team="x"), namespace("third")]
    violations = check(nodes, pods, namespaces)
    assert _summary(violations) == expected, "\n".join(map(str, violations))
    assert all(v.detail for v in violations)


def test_every_rule_has_a_breaking_case() -> None:
    broken = {rule for _, _, expected in CASES.values() for _, rule in expected}
    assert broken | {"gang"} == set(RULES)  # gang has a test of its own


def test_a_pod_given_two_nodes_over_time() -> None:
    violations = check([node("n1"), node("n2")], [pod("p", "n2")], history={"default/p": ["n1", "n1", "n2"],
                                                                             "default/q": ["n1", "n1"]})
    assert _summary(violations) == {("default/p", "bound-once")}
    assert "n1 then n2" in violations[0].detail


def gang_member(name: str, on: str | None, group: str = "train") -> dict[str, Any]:
    made = pod(name, on)
    made["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
    return made


@pytest.mark.parametrize(("bound", "expected"), [(0, set()), (2, {("default/m0,default/m1", "gang")}), (4, set())])
def test_a_gang_is_bound_whole_or_not_at_all(bound: int, expected: set[tuple[str, str]]) -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    members = [gang_member(f"m{i}", f"n{i}" if i < bound else None) for i in range(4)]
    group = {"metadata": {"name": "train", "namespace": "default"}, "spec": {"minMember": 4}}
    assert _summary(check(nodes, members, podgroups=[group])) == expected


def test_violations_name_what_broke() -> None:
    violations = check(ZONES_3, [web("w0", "a1", topologySpreadConstraints=[spread()]),
                                 web("w1", "a2", topologySpreadConstraints=[spread()])])
    assert [str(v) for v in violations][0] == (
        "default/w0: topology-spread: topology.kubernetes.io/zone=a holds 2 matching pods, more than 1 "
        "(maxSkew 1; a: 2, b: 0, c: 0)")
    ports = check([node("n1")], [pod("a", "n1", containers=[container(ports=[port(80)])]),
                                 pod("b", "n1", containers=[container(ports=[port(80)])])])
    assert ports[0].pods == ("default/a", "default/b") and "TCP 80" in ports[0].detail


def test_lists_are_read_page_by_page() -> None:
    pages = {"": {"items": [1, 2], "metadata": {"continue": "x"}}, "x": {"items": [3], "metadata": {}}}
    asked: list[dict[str, str]] = []

    def get(path: str, query: dict[str, str]) -> dict[str, Any]:
        asked.append(dict(query))
        return pages[query.get("continue", "")]

    assert list_all(get, "/api/v1/pods", page=2) == [1, 2, 3]
    assert asked == [{"limit": "2"}, {"limit": "2", "continue": "x"}]


def test_large_placements_are_checked_quickly() -> None:
    # The benchmark's workload (d) at full size: 1,000 nodes, 10,000 pods in groups of 10 with
    # hostname anti-affinity and zone spread; the check must not dominate a benchmark run.
    import time

    nodes = [node(f"n{i:04d}", f"z{i % 10}") for i in range(1000)]
    pods = []
    for group in range(1000):
        for member in range(10):
            rules = {"affinity": anti(term(group=f"g{group}")),
                     "topologySpreadConstraints": [spread(labelSelector={"matchLabels": {"group": f"g{group}"}})]}
            pods.append(pod(f"g{group}-{member}", f"n{(group * 7 + member * 100 + member) % 1000:04d}",
                            labels={"group": f"g{group}"}, cpu="100m", **rules))
    started = time.monotonic()
    violations = check(nodes, pods)
    assert time.monotonic() - started < 30
    assert violations == []
