"""DRA `adminAccess` (GA and on by default in Kubernetes v1.37: DRAAdminAccess, locked on since
1.36): the structured allocator's cases (k8s.io/dynamic-resource-allocation
structured/internal/allocatortesting TestAllocator, each citing its Go name), the results marked
and written as kube writes them, such results never making a device in use, and the API server's
rule that only a namespace labelled `resource.kubernetes.io/admin-access: "true"` may ask it —
in the cycle on both kernels."""

from __future__ import annotations

import copy

import pytest

from runtime.cluster.dra import Dra, allocated_devices
from runtime.cluster.draalloc import allocate, build_inventory
from runtime.cluster.model import ClusterState
from runtime.cluster.objects import ObjectError, load_objects
from runtime.engine.cycle import Options, run_cycle
from runtime.engine.rules.dra import ADMIN_NAMESPACE_REFUSED
from runtime.kube.draclaims import allocation_status
from runtime_helpers import STANDARD_TIERS, policy
from dra_docs import DRIVER, allocation, claim_doc, device_class, gpu, gpus_on, node_doc, pod_doc, request, slice_doc

PLAN = policy(STANDARD_TIERS)
TAINTED = {"key": "example.com/broken", "value": "yes", "effect": "NoSchedule"}


def admin(req: dict) -> dict:
    out = copy.deepcopy(req)
    out["exactly"]["adminAccess"] = True
    return out


def admin_namespace(name: str = "ns", labelled: bool = True) -> dict:
    labels = {"resource.kubernetes.io/admin-access": "true"} if labelled else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def state_of(docs) -> ClusterState:
    return load_objects(("test.yaml", d) for d in docs)


def allocate_on_node_1(docs, claims: list[str], allocated: tuple = ()):
    """Per claim its (request, device, adminAccess), allocated together on node-1, or None."""
    dra: Dra = state_of(docs).dra
    inv = build_inventory(dra)
    candidates = [e.index for e in inv.entries if e.slice.node_name == "node-1"]
    used = {inv.by_id[(DRIVER, "node-1", d)] for d in allocated}
    out = allocate([dra.claims[f"ns/{c}"] for c in claims], candidates, inv, used.__contains__, {}, "node-1")
    if out is None:
        return None
    return [[(r.request, r.device, r.admin_access) for r in a.devices] for a in out]


TWO = gpus_on("node-1", 2)      # node-1/gpu-0, node-1/gpu-1


@pytest.mark.parametrize("docs, claims, allocated, expected", [
    # "admin-access-enabled": a device allocated to another claim is taken
    ([TWO, claim_doc("c0", admin(request()))], ["c0"], ("gpu-0", "gpu-1"), [[("gpu", "gpu-0", True)]]),
    # ... and without adminAccess it is not
    ([TWO, claim_doc("c0", request())], ["c0"], ("gpu-0", "gpu-1"), None),
    # "all-devices-some-allocated-admin-access"
    ([TWO, claim_doc("c0", admin(request(mode="All")))], ["c0"], ("gpu-0",),
     [[("gpu", "gpu-0", True), ("gpu", "gpu-1", True)]]),
    # "all-devices-some-allocating-admin-access": the claim's own earlier request took gpu-0, so
    # `All` cannot have every device
    ([TWO, claim_doc("c0", admin(request("r0")), admin(request("r1", mode="All")))], ["c0"], (), None),
    # "count-devices-some-allocated-admin-access"
    ([TWO, claim_doc("c0", admin(request(count=2)))], ["c0"], ("gpu-0",),
     [[("gpu", "gpu-0", True), ("gpu", "gpu-1", True)]]),
    # "separate-claims-share-device-admin-access"
    ([TWO, claim_doc("c0", admin(request())), claim_doc("c1", admin(request()))], ["c0", "c1"], (),
     [[("gpu", "gpu-0", True)], [("gpu", "gpu-0", True)]]),
    # "admin-access-claims-device-allocating-for-non-admin-access"
    ([TWO, claim_doc("c0", request()), claim_doc("c1", admin(request()))], ["c0", "c1"], (),
     [[("gpu", "gpu-0", False)], [("gpu", "gpu-0", True)]]),
    # the other way round: a device an admin claim takes in this search is in use for a plain
    # request (kube's deviceInUse counts devices being allocated to any claim)
    ([TWO, claim_doc("c0", admin(request())), claim_doc("c1", request())], ["c0", "c1"], (),
     [[("gpu", "gpu-0", True)], [("gpu", "gpu-1", False)]]),
    # "tainted-admin-access": adminAccess does not tolerate taints
    ([slice_doc("node-1-gpus", [gpu("gpu-0", taints=[TAINTED])], node="node-1"),
      claim_doc("c0", admin(request()))], ["c0"], ("gpu-0",), None),
])
def test_admin_access_allocator_table(docs, claims, allocated, expected):
    assert allocate_on_node_1([device_class("gpu"), *docs], claims, allocated) == expected


def test_admin_results_are_read_and_written_as_kube_writes_them():
    alloc = allocation("node-1", ("gpu", "gpu-0"))
    alloc["devices"]["results"][0]["adminAccess"] = True
    state = state_of([device_class("gpu"), TWO, claim_doc("c0", admin(request()), allocation=alloc)])
    claim = state.dra.claims["ns/c0"]
    (result,) = claim.allocation.devices
    assert result.admin_access
    assert allocated_devices(state.dra.claims.values()) == {}     # device usage: a monitor holds nothing
    written = allocation_status(claim, claim.allocation, state.dra.classes)
    assert written["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": "gpu-0", "adminAccess": True}]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def run(docs, pure: bool):
    return run_cycle(PLAN, state_of(docs), Options(pure_python=pure))


def devices_of(decisions) -> dict[str, list[tuple[str, bool]]]:
    return {pod.split("/")[1]: sorted((f"{r.pool}/{r.device}", r.admin_access) for _, a in chosen for r in a.devices)
            for pod, chosen in decisions.claims.items()}


ONE_GPU = [node_doc("node-1"), gpus_on("node-1", 1), device_class("gpu")]


def test_an_admin_claim_monitors_a_device_in_use_and_leaves_it_in_use_for_no_one(pure):
    # gpu-0 is held by a running pod's claim; the monitor (adminAccess) gets it all the same, and
    # its allocation does not take it from anyone: the allocated admin claim of an earlier cycle
    # does not keep a plain pod off a free device either.
    held = claim_doc("held", allocation=allocation("node-1", ("gpu", "gpu-0")), reserved_for=["uid-busy"])
    busy = pod_doc("busy", claims={"gpu": "held"}, node="node-1", uid="uid-busy")
    docs = [*ONE_GPU, admin_namespace(), held, busy, claim_doc("watch", admin(request())),
            pod_doc("monitor", claims={"gpu": "watch"})]
    decisions = run(docs, pure)
    assert {b.pod: b.node for b in decisions.bindings} == {"ns/monitor": "node-1"}
    assert devices_of(decisions) == {"monitor": [("node-1/gpu-0", True)]}


def test_an_allocated_admin_claim_holds_no_device(pure):
    alloc = allocation("node-1", ("gpu", "gpu-0"))
    alloc["devices"]["results"][0]["adminAccess"] = True
    docs = [*ONE_GPU, admin_namespace(),
            claim_doc("watch", admin(request()), allocation=alloc, reserved_for=["uid-monitor"]),
            pod_doc("monitor", claims={"gpu": "watch"}, node="node-1", uid="uid-monitor"),
            claim_doc("work", request()), pod_doc("worker", claims={"gpu": "work"})]
    decisions = run(docs, pure)
    assert {b.pod: b.node for b in decisions.bindings} == {"ns/worker": "node-1"}
    assert devices_of(decisions) == {"worker": [("node-1/gpu-0", False)]}


@pytest.mark.parametrize("namespace", [None, admin_namespace(labelled=False)], ids=["unknown", "unlabelled"])
def test_admin_access_outside_an_admin_namespace_waits_in_the_api_servers_words(pure, namespace):
    docs = [*ONE_GPU, *([namespace] if namespace else []), claim_doc("watch", admin(request())),
            pod_doc("monitor", claims={"gpu": "watch"})]
    decisions = run(docs, pure)
    assert decisions.bindings == [] or not list(decisions.bindings)
    (reason,) = decisions.reasons_for("ns/monitor")
    assert ADMIN_NAMESPACE_REFUSED in reason.message
    assert "resource.kubernetes.io/admin-access: true" in reason.message


def test_a_bad_admin_access_is_a_located_error():
    req = request()
    req["exactly"]["adminAccess"] = "yes"
    with pytest.raises(ObjectError) as err:
        state_of([claim_doc("c0", req)])
    assert "spec.devices.requests[0].exactly.adminAccess` must be true or false" in str(err.value)
    assert "test.yaml" in str(err.value)
