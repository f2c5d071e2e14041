"""Dynamic Resource Allocation side by side on the dev cluster: the same DRA workload scheduled by
kube-scheduler (the dev cluster's binary) and by ours, each outcome read back from the API server
and verified by a checker written here (nothing from runtime/ or compiler/ is imported).

The devices are published as a DRA driver publishes them: one ResourceSlice per node, a pool named
after the node, GPUs shaped as kubernetes-sigs/dra-example-driver's (driver `gpu.example.com`,
attributes `index`, `uuid`, `model`, `driverVersion`, capacity `memory`), some of another model or
with less memory. kube-controller-manager runs its resourceclaim controller only (the issue-29 dev
cluster), so pods asking through a ResourceClaimTemplate get their claims as on a real cluster: a
scheduler must wait for the claim the controller makes, then allocate it.

The workload, the same for both (each in its own namespace, on its own tainted nodes, one after
the other): a pod asking two GPUs of one model (`matchAttribute`), a pod whose claim's CEL selector
reads an attribute, the capacity and the driver version, two pods sharing one claim, a gang of
eight each asking one GPU through a template, and a pod asking three GPUs of one model, which no
node has. The first two are of higher priority so that both schedulers place them first: the
twelve devices then take the rest whatever the order, and twelve pods fit. The checker verifies
what each scheduler wrote: no device in two claims, every request got its count of devices each
published and satisfying its class's and request's selectors, every `matchAttribute` held, each
bound pod's claims allocated and reserved for it, on devices its node reaches, with a node
selector its node matches. Both must have no violation; ours must bind and allocate at least as
many as kube-scheduler. A last test stops the controller to see ours wait for a template's claim,
then allocate the one the controller makes.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes.utils import parse_quantity
from placement_checker import read_placement
from polling import wait_for

from bench.e2e.run import Child, two_free_ports
from bench.e2e.schedulers import Launch, by_key
from policydsl.cli import devcluster
from runtime.kube.api import ApiError, KubeApi

from .connector_helpers import GANG_POLICY, Objects, SchedulerProcess, unique_scheduler_name
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration

API = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"          # dra-example-driver's driver (and its DeviceClass's name)
LATEST, PREVIOUS = "LATEST-GPU-MODEL", "PREVIOUS-GPU-MODEL"
RUN_LABEL = "policydsl.test/dra"    # this run's nodes: the pods' nodeSelector and the taint they tolerate
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Per node, its GPUs as (model, memory, driverVersion). Two GPUs of one model only on n1, n3, n5
# (the pair's matchAttribute rules out the others); n2's first GPU and n4's are short of memory
# or of driver version for the "big" claim's selector.
NODES: tuple[tuple[tuple[str, str, str], ...], ...] = (
    ((LATEST, "80Gi", "1.0.0"), (PREVIOUS, "80Gi", "1.0.0")),
    ((LATEST, "80Gi", "1.0.0"), (LATEST, "80Gi", "1.0.0")),
    ((LATEST, "40Gi", "1.0.0"), (PREVIOUS, "80Gi", "1.0.0")),
    ((PREVIOUS, "80Gi", "1.0.0"), (PREVIOUS, "80Gi", "1.0.0")),
    ((LATEST, "80Gi", "0.9.0"), (PREVIOUS, "40Gi", "0.9.0")),
    ((LATEST, "80Gi", "1.0.0"), (LATEST, "80Gi", "1.0.0")),
)
GANG, GANG_SIZE = "trainer", 8
TEMPLATE = "one-gpu"
# What fits: pair, big, both sharers and the gang (12 pods on 2 + 1 + 1 + 8 = 12 devices); never "three".
EXPECTED_BOUND = 4 + GANG_SIZE
EXPECTED_DEVICES = 2 + 1 + 1 + GANG_SIZE
BIND_TIMEOUT_S = 40.0
SETTLE_S = 1.5  # after the expected binds, for anything beyond them to show

# The selectors the workload uses, as text for the API server and as the checker reads them
# (its own evaluation, not CEL): each takes a published device.
CLASS_SELECTOR = f'device.driver == "{DRIVER}"'
BIG_SELECTOR = (f'device.attributes["{DRIVER}"].model == "{LATEST}" && '
                f'device.capacity["{DRIVER}"].memory.compareTo(quantity("80Gi")) >= 0 && '
                f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("0.9.0"))')


# --------------------------------------------------------------------------- the workload


def _device_class(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": CLASS_SELECTOR}}]}}


def _slice(node: str, gpus: tuple[tuple[str, str, str], ...]) -> dict[str, Any]:
    """A node's GPUs as dra-example-driver publishes them: one slice, the pool named after the node."""
    devices = [{"name": f"gpu-{i}",
                "attributes": {"index": {"int": i}, "uuid": {"string": f"gpu-{uuid.uuid4()}"},
                               "model": {"string": model}, "driverVersion": {"version": version}},
                "capacity": {"memory": {"value": memory}}}
               for i, (model, memory, version) in enumerate(gpus)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def _claim_spec(cls: str, count: int = 1, selector: str | None = None, same_model: bool = False) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}]}
    if same_model:
        devices["constraints"] = [{"requests": ["gpu"], "matchAttribute": f"{DRIVER}/model"}]
    return {"devices": devices}


def _pod(name: str, scheduler: str, run: str, claim: dict[str, str], *, priority: str | None = None,
         group: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
        "resourceClaims": [{"name": "gpu", **claim}],
        "nodeSelector": {RUN_LABEL: run},
        "tolerations": [{"key": RUN_LABEL, "operator": "Equal", "value": run, "effect": "NoSchedule"}],
    }
    if priority:
        spec["priorityClassName"] = priority
    annotations = {GROUP_ANNOTATION: group} if group else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations}, "spec": spec}


def _setup(objects: Objects, scheduler: str) -> None:
    run = objects.namespace
    cls = f"{DRIVER}-{run}"
    api, ns = objects.api, objects.namespace
    high = f"{run}-high"
    objects.priority_class(high, 1000)
    api.post(f"{API}/deviceclasses", _device_class(cls))
    objects.cluster_objects.append(f"{API}/deviceclasses/{cls}")
    for i, gpus in enumerate(NODES):
        node = f"{run}-n{i}"
        objects.node(node, cpu="8", memory="32Gi", labels={RUN_LABEL: run},
                     taints=[{"key": RUN_LABEL, "value": run, "effect": "NoSchedule"}])
        api.post(f"{API}/resourceslices", _slice(node, gpus))
        objects.cluster_objects.append(f"{API}/resourceslices/{node}-{DRIVER}")
    claims = {"pair": _claim_spec(cls, 2, same_model=True), "big": _claim_spec(cls, selector=BIG_SELECTOR),
              "shared": _claim_spec(cls), "three": _claim_spec(cls, 3, same_model=True)}
    for name, spec in claims.items():
        api.post(f"{API}/namespaces/{ns}/resourceclaims",
                 {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                  "spec": spec})
    api.post(f"{API}/namespaces/{ns}/resourceclaimtemplates",
             {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": TEMPLATE},
              "spec": {"spec": _claim_spec(cls)}})
    objects.podgroup(GANG, GANG_SIZE)   # Volcano's PodGroup: ours keeps the gang whole; kube-scheduler ignores it
    pods = [_pod("pair", scheduler, run, {"resourceClaimName": "pair"}, priority=high),
            _pod("big", scheduler, run, {"resourceClaimName": "big"}, priority=high),
            _pod("shared-0", scheduler, run, {"resourceClaimName": "shared"}),
            _pod("shared-1", scheduler, run, {"resourceClaimName": "shared"}),
            *(_pod(f"{GANG}-{i}", scheduler, run, {"resourceClaimTemplateName": TEMPLATE}, group=GANG)
              for i in range(GANG_SIZE)),
            _pod("three", scheduler, run, {"resourceClaimName": "three"})]
    for body in pods:
        api.post(f"/api/v1/namespaces/{ns}/pods", body)


def _cleanup(objects: Objects) -> None:
    """Pods, then claims (the delete-protection finalizer taken off: nothing deallocates them once
    the controller is gone), templates, then what Objects made."""
    ns = objects.namespace
    try:
        objects.api.request("DELETE", f"/api/v1/namespaces/{ns}/pods", query={"gracePeriodSeconds": "0"})
    except ApiError:
        pass
    for item in objects.api.get(f"{API}/namespaces/{ns}/resourceclaims")["items"]:
        path = f"{API}/namespaces/{ns}/resourceclaims/{item['metadata']['name']}"
        try:
            objects.api.merge_patch(path, {"metadata": {"finalizers": None}})
            objects.api.delete(path)
        except ApiError:
            pass
    for kind in ("resourceclaimtemplates",):
        try:
            objects.api.request("DELETE", f"{API}/namespaces/{ns}/{kind}")
        except ApiError:
            pass
    objects.cleanup()


# --------------------------------------------------------------------------- the checker


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    node: str | None          # the slice's nodeName (None: allNodes or a node selector, not used here)
    attributes: Mapping[str, Any]
    capacity: Mapping[str, Decimal]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


SELECTORS: dict[str, Callable[[Device], bool]] = {
    CLASS_SELECTOR: lambda d: d.driver == DRIVER,
    BIG_SELECTOR: lambda d: (d.attributes.get("model") == LATEST
                             and d.capacity.get("memory", Decimal(0)) >= Decimal(parse_quantity("80Gi"))
                             and _version(str(d.attributes.get("driverVersion", "0.0.0"))) > (0, 9, 0)),
}


def _attribute(raw: Mapping[str, Any]) -> Any:
    for kind in ("string", "int", "bool", "version"):
        if kind in raw:
            return raw[kind]
    raise AssertionError(f"unknown attribute value {raw}")


def _published(slices: list[dict[str, Any]]) -> dict[tuple[str, str, str], Device]:
    """(driver, pool, device) -> the device, from the newest generation of each pool."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s["spec"]["driver"], s["spec"]["pool"]["name"])
        newest[key] = max(newest.get(key, 0), int(s["spec"]["pool"]["generation"]))
    devices = {}
    for s in slices:
        driver, pool = s["spec"]["driver"], s["spec"]["pool"]
        if int(pool["generation"]) != newest[(driver, pool["name"])]:
            continue
        for d in s["spec"].get("devices") or []:
            attrs = {name.split("/")[-1]: _attribute(v) for name, v in (d.get("attributes") or {}).items()}
            capacity = {name.split("/")[-1]: Decimal(parse_quantity(v["value"]))
                        for name, v in (d.get("capacity") or {}).items()}
            devices[(driver, pool["name"], d["name"])] = Device(driver, pool["name"], d["name"],
                                                                s["spec"].get("nodeName"), attrs, capacity)
    return devices


def _node_selector_matches(selector: Mapping[str, Any] | None, node: Mapping[str, Any]) -> bool:
    """A v1 NodeSelector (terms ORed, requirements ANDed) against a node's labels and name."""
    if not selector:
        return True
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}

    def holds(req: Mapping[str, Any], values: Mapping[str, str]) -> bool:
        key, op, wanted = req["key"], req["operator"], req.get("values") or []
        if op == "In":
            return key in values and values[key] in wanted
        if op == "NotIn":
            return values.get(key) not in wanted
        if op == "Exists":
            return key in values
        if op == "DoesNotExist":
            return key not in values
        raise AssertionError(f"operator {op} not expected in an allocation's node selector")

    return any(all(holds(r, labels) for r in term.get("matchExpressions") or [])
               and all(holds(r, fields) for r in term.get("matchFields") or [])
               for term in selector.get("nodeSelectorTerms") or [])


def _pod_claim_names(pod: Mapping[str, Any]) -> list[str | None]:
    """The claim each entry of the pod's spec.resourceClaims stands for (None: not made yet)."""
    made = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    return [ref.get("resourceClaimName") or made.get(ref["name"]) for ref in pod["spec"].get("resourceClaims") or []]


def check_dra(classes: list[dict[str, Any]], slices: list[dict[str, Any]], claims: list[dict[str, Any]],
              pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> list[str]:
    """The violations, one line each: what kube-scheduler's DynamicResources plugin must never write."""
    devices = _published(slices)
    class_by_name = {c["metadata"]["name"]: c for c in classes}
    node_by_name = {n["metadata"]["name"]: n for n in nodes}
    claim_by_name = {c["metadata"]["name"]: c for c in claims}
    violations: list[str] = []
    holder: dict[tuple[str, str, str], str] = {}
    for claim in claims:
        name = claim["metadata"]["name"]
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            continue
        results = allocation["devices"].get("results") or []
        for r in results:
            key = (r["driver"], r["pool"], r["device"])
            if key in holder:
                violations.append(f"device {key} in claims {holder[key]} and {name}")
            holder[key] = name
            if key not in devices:
                violations.append(f"claim {name}: device {key} is not published")
        for request in claim["spec"]["devices"]["requests"]:
            exactly = request["exactly"]
            got = [devices.get((r["driver"], r["pool"], r["device"]))
                   for r in results if r["request"] == request["name"]]
            if len(got) != exactly.get("count", 1):
                violations.append(f"claim {name}: request {request['name']} got {len(got)} devices, "
                                  f"asked {exactly.get('count', 1)}")
            cls = class_by_name.get(exactly["deviceClassName"])
            if cls is None:
                violations.append(f"claim {name}: class {exactly['deviceClassName']} not found")
                continue
            expressions = [s["cel"]["expression"] for s in cls["spec"].get("selectors") or []]
            expressions += [s["cel"]["expression"] for s in exactly.get("selectors") or []]
            for device in got:
                for text in expressions:
                    if device is not None and not SELECTORS[text](device):
                        violations.append(f"claim {name}: device {device.pool}/{device.name} fails {text!r}")
        for constraint in claim["spec"]["devices"].get("constraints") or []:
            attribute = constraint["matchAttribute"].split("/")[-1]
            values = {devices[(r["driver"], r["pool"], r["device"])].attributes.get(attribute)
                      for r in results if (r["driver"], r["pool"], r["device"]) in devices}
            if len(values) > 1:
                violations.append(f"claim {name}: matchAttribute {constraint['matchAttribute']} has values {values}")
    for pod in pods:
        node_name = pod["spec"].get("nodeName")
        if not node_name:
            continue
        pod_name, node = pod["metadata"]["name"], node_by_name.get(node_name)
        if node is None:
            violations.append(f"pod {pod_name}: bound to {node_name}, not a node of this run")
            continue
        for ref, claim_name in zip(pod["spec"]["resourceClaims"], _pod_claim_names(pod)):
            claim = claim_by_name.get(claim_name or "")
            if claim is None:
                violations.append(f"pod {pod_name}: bound without its claim for {ref['name']} ({claim_name})")
                continue
            status = claim.get("status") or {}
            if not status.get("allocation"):
                violations.append(f"pod {pod_name}: bound with claim {claim_name} not allocated")
                continue
            if pod["metadata"]["uid"] not in {c.get("uid") for c in status.get("reservedFor") or []}:
                violations.append(f"pod {pod_name}: claim {claim_name} not reserved for it")
            if ref.get("resourceClaimTemplateName"):
                owners = claim["metadata"].get("ownerReferences") or []
                if not any(o.get("uid") == pod["metadata"]["uid"] and o.get("controller") for o in owners):
                    violations.append(f"pod {pod_name}: claim {claim_name} from its template is not owned by it")
            if not _node_selector_matches(status["allocation"].get("nodeSelector"), node):
                violations.append(f"pod {pod_name}: on {node_name}, outside claim {claim_name}'s node selector")
            for r in status["allocation"]["devices"].get("results") or []:
                device = devices.get((r["driver"], r["pool"], r["device"]))
                if device is not None and device.node not in (None, node_name):
                    violations.append(f"pod {pod_name}: on {node_name}, claim {claim_name} holds "
                                      f"{device.pool}/{device.name} of node {device.node}")
    return violations


@dataclass(frozen=True)
class Outcome:
    bound: dict[str, str]                 # pod -> node
    devices: int                          # devices allocated to this run's claims
    claims: dict[str, dict[str, Any]]     # name -> claim as read back
    pods: dict[str, dict[str, Any]]
    violations: list[str]

    def describe(self) -> str:
        return "\n".join([f"bound {len(self.bound)} pods {sorted(self.bound)}, {self.devices} devices allocated"]
                         + [f"  {v}" for v in self.violations])


def _outcome(objects: Objects, expected: int) -> Outcome:
    try:
        wait_for(lambda: len(objects.bound()) >= expected, f"{expected} pods bound", BIND_TIMEOUT_S, interval=0.2)
    except AssertionError:
        pass  # fewer is an outcome too: the caller compares
    time.sleep(SETTLE_S)
    api, ns = objects.api, objects.namespace
    nodes = api.get("/api/v1/nodes", query={"labelSelector": f"{RUN_LABEL}={ns}"})["items"]
    slices = [s for s in api.get(f"{API}/resourceslices")["items"]
              if s["spec"].get("nodeName") in {n["metadata"]["name"] for n in nodes}]
    classes = api.get(f"{API}/deviceclasses")["items"]
    claims = api.get(f"{API}/namespaces/{ns}/resourceclaims")["items"]
    pods = objects.pods()
    violations = check_dra(classes, slices, claims, list(pods.values()), nodes)
    # The rules any placement keeps (resources, taints, node selector, the gang's minMember), by the
    # shared independent checker.
    placement = read_placement(api.get, node_selector=f"{RUN_LABEL}={ns}", namespace=ns)
    violations += [str(v) for v in placement.check()]
    bound = {name: p["spec"]["nodeName"] for name, p in pods.items() if p["spec"].get("nodeName")}
    allocated = sum(len(((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or [])
                    for c in claims)
    return Outcome(bound, allocated, {c["metadata"]["name"]: c for c in claims}, pods, violations)


def _fresh_objects(api: KubeApi) -> Objects:
    namespace = f"dra-{uuid.uuid4().hex[:8]}"
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    return Objects(api, namespace)


# --------------------------------------------------------------------------- fixtures and tests


@pytest.fixture(scope="module")
def claim_controller(kube_cluster: KubeCluster) -> Iterator[None]:
    """kube-controller-manager with only its resourceclaim controller, on the session's cluster."""
    try:
        devcluster.controller_manager_binary()
    except devcluster.DevClusterError as exc:
        if os.environ.get("CI"):   # CI runs .ci/install-kube.sh, which builds it: missing there is a failure
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))
    directory = kube_cluster.cluster.directory
    devcluster.start_controller_manager(directory, [devcluster.RESOURCECLAIM_CONTROLLER])
    try:
        yield
    finally:
        devcluster.stop_controller_manager(directory)


@pytest.fixture(scope="module")
def kube_scheduler_outcome(kube_cluster: KubeCluster, claim_controller: None,
                           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    workdir = tmp_path_factory.mktemp("kube-scheduler-dra")
    cluster = kube_cluster.cluster
    objects = _fresh_objects(KubeApi(kube_cluster.api_client))
    name = f"kube-scheduler-{objects.namespace}"
    launch = Launch(server=cluster.server, ca_cert=cluster.ca_cert, kubeconfig=cluster.kubeconfig,
                    scheduler_name=name, workdir=workdir, ports=two_free_ports(), token=cluster.token, variant=None)
    command = by_key("kube-scheduler").command(launch)
    try:
        _setup(objects, name)
        scheduler = Child(command.argv, workdir / "kube-scheduler.log", env=command.env)
        try:
            outcome = _outcome(objects, EXPECTED_BOUND)
            assert scheduler.alive(), f"kube-scheduler exited:\n{scheduler.log_tail()}"
        finally:
            scheduler.stop()
    finally:
        _cleanup(objects)
    yield outcome


def test_kube_scheduler_allocates_without_violation(kube_scheduler_outcome: Outcome) -> None:
    outcome = kube_scheduler_outcome
    assert outcome.violations == [], outcome.describe()
    # The checker's own sanity: this workload fits whole, and kube-scheduler places all of it.
    assert len(outcome.bound) == EXPECTED_BOUND and outcome.devices == EXPECTED_DEVICES, outcome.describe()
    assert "three" not in outcome.bound


def test_policydsl_allocates_without_violation_and_as_many_as_kube_scheduler(
        kube_cluster: KubeCluster, claim_controller: None, kube_scheduler_outcome: Outcome, tmp_path: Path) -> None:
    objects = _fresh_objects(KubeApi(kube_cluster.api_client))
    name = unique_scheduler_name()
    try:
        _setup(objects, name)
        with SchedulerProcess(tmp_path, GANG_POLICY, kube_cluster.kubeconfig, name) as scheduler:
            outcome = _outcome(objects, len(kube_scheduler_outcome.bound))
            assert scheduler.proc is not None and scheduler.proc.poll() is None, scheduler.log()[-3000:]
            log = scheduler.log()
    finally:
        _cleanup(objects)
    report = (f"policydsl: {outcome.describe()}\nkube-scheduler: {kube_scheduler_outcome.describe()}\n"
              f"scheduler log tail:\n{log[-2000:]}")
    assert outcome.violations == [], report
    assert len(outcome.bound) >= len(kube_scheduler_outcome.bound), report
    assert outcome.devices >= kube_scheduler_outcome.devices, report
    assert "three" not in outcome.bound, report
    # The gang's claims are the controller's, one per pod, named in the pod's status; ours made none.
    gang = [outcome.pods[f"{GANG}-{i}"] for i in range(GANG_SIZE)]
    made = [_pod_claim_names(p)[0] for p in gang]
    assert all(made) and len(set(made)) == GANG_SIZE, report
    assert set(outcome.claims) == {"pair", "big", "shared", "three", *made}, report   # type: ignore[arg-type]
    # The pair's two GPUs are of one model, on one of the nodes having two of a model.
    pair = outcome.claims["pair"]["status"]["allocation"]["devices"]["results"]
    assert {r["pool"] for r in pair} == {outcome.bound["pair"]} and \
        outcome.bound["pair"].rsplit("-", 1)[1] in {"n1", "n3", "n5"}, report
    assert outcome.bound["shared-0"] == outcome.bound["shared-1"], report


def test_policydsl_waits_for_the_claim_the_controller_makes(kube_cluster: KubeCluster, claim_controller: None,
                                                          objects: Objects, in_process) -> None:
    """With the resourceclaim controller stopped, a pod asking through a template waits, saying it
    waits for the controller's claim, and no claim is made; once the controller runs, the claim it
    makes (owned by the pod, named in the pod's status) is the one allocated and the pod bound."""
    directory, ns, name = kube_cluster.cluster.directory, objects.namespace, unique_scheduler_name()
    cls = f"{DRIVER}-{ns}"
    devcluster.stop_controller_manager(directory)
    try:
        objects.api.post(f"{API}/deviceclasses", _device_class(cls))
        objects.cluster_objects.append(f"{API}/deviceclasses/{cls}")
        node = f"{ns}-n0"
        objects.node(node, cpu="8", labels={RUN_LABEL: ns},
                     taints=[{"key": RUN_LABEL, "value": ns, "effect": "NoSchedule"}])
        objects.api.post(f"{API}/resourceslices", _slice(node, NODES[1]))
        objects.cluster_objects.append(f"{API}/resourceslices/{node}-{DRIVER}")
        objects.api.post(f"{API}/namespaces/{ns}/resourceclaimtemplates",
                         {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                          "metadata": {"name": TEMPLATE}, "spec": {"spec": _claim_spec(cls)}})
        objects.api.post(f"/api/v1/namespaces/{ns}/pods",
                         _pod("worker", name, ns, {"resourceClaimTemplateName": TEMPLATE}))
        scheduler = in_process(name)
        wait_for(lambda: scheduler.sees(ns, 1, nodes=1), "the cache to see the pod and its node")
        (reason,) = scheduler.cycle().decisions.reasons_for(f"{ns}/worker")
        assert "waiting for dynamic resource controller to create the resourceclaim" in reason.message, reason
        assert objects.api.get(f"{API}/namespaces/{ns}/resourceclaims")["items"] == []
        assert not objects.bound()
    finally:
        devcluster.start_controller_manager(directory)
    try:
        scheduler.cycle_until(lambda: objects.bound().get("worker") == node, 30, "the pod bound")
        pod = objects.pods()["worker"]
        (made,) = _pod_claim_names(pod)
        (claim,) = objects.api.get(f"{API}/namespaces/{ns}/resourceclaims")["items"]
        assert claim["metadata"]["name"] == made
        owners = [o["uid"] for o in claim["metadata"]["ownerReferences"] if o.get("controller")]
        assert owners == [pod["metadata"]["uid"]]
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
        assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
    finally:
        _cleanup(objects)


def test_checker_reports_each_violation() -> None:
    """The checker itself, on hand-written objects (no cluster): each rule it keeps, broken once."""
    cls = _device_class("c")
    slices = [_slice("a", ((LATEST, "80Gi", "1.0.0"), (PREVIOUS, "40Gi", "1.0.0"))),
              _slice("b", ((LATEST, "80Gi", "1.0.0"),))]
    nodes = [{"metadata": {"name": n, "labels": {}}} for n in ("a", "b")]

    def claim(name: str, spec: dict[str, Any], results: list[tuple[str, str]], pods: list[str],
              node: str | None = None) -> dict[str, Any]:
        selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                            "values": [node]}]}]} if node else None
        return {"metadata": {"name": name}, "spec": spec,
                "status": {"allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device} for pool, device in results]},
                    "nodeSelector": selector},
                    "reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in pods]}}

    def pod(name: str, node: str, claim_name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "uid": name},
                "spec": {"nodeName": node, "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}]}}

    good = [claim("pair", _claim_spec("c", 2), [("a", "gpu-0"), ("a", "gpu-1")], ["p"], node="a")]
    assert check_dra([cls], slices, good, [pod("p", "a", "pair")], nodes) == []
    cases = {
        "in claims": ([claim("x", _claim_spec("c"), [("a", "gpu-0")], []),
                       claim("y", _claim_spec("c"), [("a", "gpu-0")], [])], []),
        "got 1 devices, asked 2": ([claim("x", _claim_spec("c", 2), [("a", "gpu-0")], [])], []),
        "fails": ([claim("x", _claim_spec("c", selector=BIG_SELECTOR), [("a", "gpu-1")], [])], []),
        "matchAttribute": ([claim("x", _claim_spec("c", 2, same_model=True), [("a", "gpu-0"), ("a", "gpu-1")], [])],
                           []),
        "not published": ([claim("x", _claim_spec("c"), [("a", "gpu-7")], [])], []),
        "not reserved for it": ([claim("x", _claim_spec("c"), [("a", "gpu-0")], [], node="a")], [pod("p", "a", "x")]),
        "outside claim x's node selector": ([claim("x", _claim_spec("c"), [("a", "gpu-0")], ["p"], node="b")],
                                            [pod("p", "a", "x")]),
        "of node b": ([claim("x", _claim_spec("c"), [("b", "gpu-0")], ["p"])], [pod("p", "a", "x")]),
        "without its claim": ([], [pod("p", "a", "x")]),
    }
    for words, (claims, pods) in cases.items():
        found = check_dra([cls], slices, claims, pods, nodes)
        assert len(found) == 1 and words in found[0], (words, found)
