"""Dynamic Resource Allocation: the structured allocator on one node (kube's
staging/src/k8s.io/dynamic-resource-allocation/structured TestAllocator cases, translated: each
case cites its Go name), the objects read from YAML with located errors, and the cycle (both
kernels): gangs, shared and allocated claims, templates, reasons in kube-scheduler's words."""

from __future__ import annotations

import pytest

from runtime.cluster.dra import Dra
from runtime.cluster.draalloc import AllocationError, allocate, build_inventory, node_matches
from runtime.cluster.model import ClusterState
from runtime.cluster.objects import ObjectError, load_objects
from runtime.engine.cycle import Options, run_cycle
from runtime.kube.draclaims import allocation_status
from runtime_helpers import STANDARD_TIERS, policy
from dra_docs import (
    DRIVER, allocation, claim_doc, device_class, first_available, gpu, gpus_on, node_doc, pod_doc, podgroup_doc,
    request, slice_doc, template_doc,
)

PLAN = policy(STANDARD_TIERS)
OTHER = "nic.example.com"


def state_of(docs) -> ClusterState:
    return load_objects(("test.yaml", d) for d in docs)


# --- the allocator on one node ------------------------------------------------------------------

def allocate_on(docs, claims: list[str], node: str = "node-1", labels: dict | None = None,
                allocated: tuple = ()) -> list[list[tuple[str, str]]] | None:
    """Allocate the named claims (namespace ns) on `node`: per claim its (request, pool/device)."""
    dra: Dra = state_of(docs).dra
    inv = build_inventory(dra)
    labels = labels or {"region": "r1"}
    candidates = []
    for e in inv.entries:
        d, s = e.device, e.slice
        per = s.per_device_nodes
        name, terms, everywhere = (d.node_name, d.node_selector, d.all_nodes) if per else \
            (s.node_name, s.node_selector, s.all_nodes)
        if everywhere or name == node or (terms is not None and node_matches(terms, node, labels)):
            candidates.append(e.index)
    used = {inv.by_id[i] for i in allocated}
    out = allocate([dra.claims[f"ns/{c}"] for c in claims], candidates, inv, used.__contains__, {}, node)
    if out is None:
        return None
    return [[(r.request, f"{r.pool}/{r.device}") for r in a.devices] for a in out]


def one_class(*docs):
    return [device_class("gpu"), device_class("nic", driver=OTHER), *docs]


def memory_gpus(*sizes: str, node: str = "node-1") -> dict:
    return slice_doc(f"{node}-gpus", [gpu(f"gpu-{i}", memory=m) for i, m in enumerate(sizes)], node=node)


AT_LEAST = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("{}")) >= 0'


@pytest.mark.parametrize("docs, claims, expected", [
    # "simple"
    (one_class(gpus_on("node-1", 1), claim_doc("c0")), ["c0"], [[("gpu", "node-1/gpu-0")]]),
    # "other-node": the node's own devices only
    (one_class(gpus_on("node-2", 1), slice_doc("n1-nics", [gpu("nic-0")], node="node-1", driver=OTHER),
               claim_doc("c0")), ["c0"], None),
    # "small-and-large"
    (one_class(memory_gpus("1Gi", "2Gi"),
               claim_doc("c0", request("small", selectors=(AT_LEAST.format("1Gi"),)),
                         request("large", selectors=(AT_LEAST.format("2Gi"),)))),
     ["c0"], [[("small", "node-1/gpu-0"), ("large", "node-1/gpu-1")]]),
    # "small-and-large-backtrack-requests": the large device first in the slice; the first
    # choice for the small request must be undone
    (one_class(memory_gpus("2Gi", "1Gi"),
               claim_doc("c0", request("small", selectors=(AT_LEAST.format("1Gi"),)),
                         request("large", selectors=(AT_LEAST.format("2Gi"),)))),
     ["c0"], [[("small", "node-1/gpu-1"), ("large", "node-1/gpu-0")]]),
    # "small-and-large-backtrack-claims": the same across two claims of the pod
    (one_class(memory_gpus("2Gi", "1Gi"), claim_doc("c0", request("small", selectors=(AT_LEAST.format("1Gi"),))),
               claim_doc("c1", request("large", selectors=(AT_LEAST.format("2Gi"),)))),
     ["c0", "c1"], [[("small", "node-1/gpu-1")], [("large", "node-1/gpu-0")]]),
    # "too-many-devices-single-request": more than 32 devices for one claim is never allocated
    (one_class(gpus_on("node-1", 40), claim_doc("c0", request(count=33))), ["c0"], None),
    # "all-devices-many-plus-another"
    (one_class(gpus_on("node-1", 2), slice_doc("nics", [gpu("nic-0")], node="node-1", driver=OTHER),
               claim_doc("c0", request(mode="All")), claim_doc("c1", request("nic", cls="nic"))),
     ["c0", "c1"], [[("gpu", "node-1/gpu-0"), ("gpu", "node-1/gpu-1")], [("nic", "node-1/nic-0")]]),
    # "all-devices-no-solution": one device, two claims wanting it
    (one_class(gpus_on("node-1", 1), claim_doc("c1", request()), claim_doc("c0", request(mode="All"))),
     ["c1", "c0"], None),
    # "all-devices-slice-without-devices", "all-devices-no-slices": All needs at least one device
    (one_class(slice_doc("empty", [], node="node-1"), claim_doc("c0", request(mode="All"))), ["c0"], None),
    (one_class(claim_doc("c0", request(mode="All"))), ["c0"], None),
    # "network-attached-device": a device every node reaches (node selector); the allocation
    # carries the slice's selector
    (one_class(slice_doc("net", [gpu("gpu-0")], pool="net", node_selector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]}]}), claim_doc("c0")),
     ["c0"], [[("gpu", "net/gpu-0")]]),
    # "with-constraint": two devices with the same numa
    (one_class(slice_doc("s", [gpu("gpu-0", numa=0), gpu("gpu-1", numa=1), gpu("gpu-2", numa=1)], node="node-1"),
               claim_doc("c0", request(count=2), match=[(f"{DRIVER}/numa", [])])),
     ["c0"], [[("gpu", "node-1/gpu-1"), ("gpu", "node-1/gpu-2")]]),
    # "with-constraint-not-matching-int-attribute"
    (one_class(slice_doc("s", [gpu("gpu-0", numa=0), gpu("gpu-1", numa=1)], node="node-1"),
               claim_doc("c0", request(count=2), match=[(f"{DRIVER}/numa", [])])), ["c0"], None),
    # "with-constraint-non-existent-attribute"
    (one_class(gpus_on("node-1", 2), claim_doc("c0", request(count=2), match=[(f"{DRIVER}/nosuch", [])])),
     ["c0"], None),
    # a constraint on some requests only ("with-constraint" variants naming requests): the
    # unconstrained request takes any device
    (one_class(slice_doc("s", [gpu("gpu-0", numa=0), gpu("gpu-1", numa=1), gpu("gpu-2", numa=1)], node="node-1"),
               claim_doc("c0", request("a"), request("b"), request("c"), match=[(f"{DRIVER}/numa", ["b", "c"])])),
     ["c0"], [[("a", "node-1/gpu-0"), ("b", "node-1/gpu-1"), ("c", "node-1/gpu-2")]]),
    # "prioritized-list-*": the first alternative that can be allocated
    (one_class(gpus_on("node-1", 1), claim_doc("c0", first_available(
        "gpu", request("two", count=2), request("one", count=1)))), ["c0"], [[("gpu/one", "node-1/gpu-0")]]),
    # "all-devices-slice-without-devices-prioritized-list"
    (one_class(slice_doc("empty", [], node="node-1"), slice_doc("nics", [gpu("nic-0")], node="node-1", driver=OTHER),
               claim_doc("c0", first_available("req", request("all", mode="All"), request("nic", cls="nic")))),
     ["c0"], [[("req/nic", "node-1/nic-0")]]),
    # "tainted-two-devices": NoSchedule taints keep devices from requests that do not tolerate them
    (one_class(slice_doc("s", [gpu("gpu-0", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
                               gpu("gpu-1", taints=[{"key": "k", "value": "v", "effect": "NoExecute"}])], node="node-1"),
               claim_doc("c0")), ["c0"], None),
    # ... and tolerated ones do not; an informational taint (effect None) never does
    (one_class(slice_doc("s", [gpu("gpu-0", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
                               gpu("gpu-1", taints=[{"key": "k", "value": "v", "effect": "None"}])], node="node-1"),
               claim_doc("c0", request(count=2, tolerations=[{"key": "k", "operator": "Exists",
                                                               "effect": "NoSchedule"}]))),
     ["c0"], [[("gpu", "node-1/gpu-0"), ("gpu", "node-1/gpu-1")]]),
])
def test_allocator_table(docs, claims, expected):
    assert allocate_on(docs, claims) == expected


def test_allocated_devices_are_not_free():
    # "all-devices-some-allocated": All fails when one device is allocated elsewhere; ExactCount skips it
    docs = one_class(gpus_on("node-1", 2), claim_doc("all", request(mode="All")), claim_doc("one"))
    taken = ((DRIVER, "node-1", "gpu-0"),)
    assert allocate_on(docs, ["all"], allocated=taken) is None
    assert allocate_on(docs, ["one"], allocated=taken) == [[("gpu", "node-1/gpu-1")]]


def test_all_devices_of_an_incomplete_pool_is_an_error():
    # "all-devices-of-the-incomplete-pool"
    docs = one_class(slice_doc("s", [gpu("gpu-0")], node="node-1", count=2), claim_doc("c0", request(mode="All")))
    with pytest.raises(AllocationError, match="asks for all devices, but resource pool gpu.example.com/node-1 is "
                                              "currently being updated"):
        allocate_on(docs, ["c0"])
    # ExactCount skips the incomplete pool
    assert allocate_on(one_class(slice_doc("s", [gpu("gpu-0")], node="node-1", count=2), claim_doc("c0")),
                       ["c0"]) is None


def test_a_pool_is_its_newest_generation():
    docs = one_class(slice_doc("old", [gpu("gpu-old")], node="node-1", pool="p", generation=1),
                     slice_doc("new", [gpu("gpu-new")], node="node-1", pool="p", generation=2), claim_doc("c0"))
    assert allocate_on(docs, ["c0"]) == [[("gpu", "p/gpu-new")]]


def test_shared_counters_bound_partitions():
    # partitionable devices: two halves and a whole drawing from one counter set of 80Gi
    counters = [{"name": "gpu-0-mem", "counters": {"memory": {"value": "80Gi"}}}]

    def part(name, size):
        d = gpu(name, memory=size)
        d["consumesCounters"] = [{"counterSet": "gpu-0-mem", "counters": {"memory": {"value": size}}}]
        return d

    docs = one_class(slice_doc("s", [part("whole", "80Gi"), part("half-a", "40Gi"), part("half-b", "40Gi")],
                               node="node-1", counters=counters),
                     claim_doc("c0", request(count=2)), claim_doc("c1", request(count=3)))
    assert allocate_on(docs, ["c0"]) == [[("gpu", "node-1/half-a"), ("gpu", "node-1/half-b")]]
    assert allocate_on(docs, ["c1"]) is None


def test_a_missing_class_is_kubes_error():
    with pytest.raises(AllocationError, match='could not retrieve device class nosuch'):
        allocate_on(one_class(gpus_on("node-1", 1), claim_doc("c0", request(cls="nosuch"))), ["c0"])


# --- objects read from YAML ---------------------------------------------------------------------

@pytest.mark.parametrize("doc, message", [
    (device_class("bad", "device.driver =="), "`spec.selectors[1].cel.expression`: CEL compile error"),
    ({**slice_doc("s", [gpu("g")], node="n"), "apiVersion": "resource.k8s.io/v1beta1"},
     "apiVersion must be resource.k8s.io/v1"),
    (slice_doc("s", [{"name": "g", "attributes": {"x": {"float": 1.5}}}], node="n"),
     "`spec.devices[0].attributes.x` must have exactly one of int, bool, string, version"),
    (slice_doc("s", [gpu("g")]), "`spec` must set exactly one of nodeName, nodeSelector, allNodes"),
    (claim_doc("c", request(count=0)), "`spec.devices.requests[0].exactly.count` must be at least 1"),
    (claim_doc("c", {"name": "r"}), "`spec.devices.requests[0]` must set exactly one of exactly, firstAvailable"),
    (claim_doc("c", request(), match=[("numa", [])]), "must be a fully qualified name"),
    (claim_doc("c", request(), match=[(f"{DRIVER}/numa", ["nosuch"])]), "names `nosuch`, which is no request"),
    ({**claim_doc("c"), "spec": {"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "gpu", "capacity": {"requests": {"memory": "1Gi"}}}}]}}},
     "`spec.devices.requests[0].exactly.capacity` is not evaluated by this scheduler"),
    (pod_doc("p", claims={"gpu": "c"}) | {"spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "x"}]}},
     "`spec.resourceClaims[0]` must set exactly one of resourceClaimName, resourceClaimTemplateName"),
])
def test_bad_dra_objects_are_located_errors(doc, message):
    with pytest.raises(ObjectError) as err:
        state_of([doc])
    assert message in str(err.value) and "test.yaml" in str(err.value)


# --- the cycle ----------------------------------------------------------------------------------

@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def run(state_or_docs, pure: bool):
    state = state_or_docs if isinstance(state_or_docs, ClusterState) else state_of(state_or_docs)
    return run_cycle(PLAN, state, Options(pure_python=pure))


def bound(decisions) -> dict[str, str]:
    return {b.pod.split("/")[1]: b.node for b in decisions.bindings}


def devices_of(decisions) -> dict[str, list[str]]:
    return {pod.split("/")[1]: sorted(f"{r.pool}/{r.device}" for _, a in chosen for r in a.devices)
            for pod, chosen in decisions.claims.items()}


def messages(decisions, pod: str) -> list[str]:
    return [r.message for r in decisions.reasons_for(f"ns/{pod}")]


GPU_NODES = [node_doc("node-1"), node_doc("node-2"), gpus_on("node-1", 4), gpus_on("node-2", 4), device_class("gpu"),
             template_doc("one-gpu", request())]


def test_a_gang_of_eight_gets_eight_different_devices(pure):
    docs = [*GPU_NODES, podgroup_doc("g", 8), *(pod_doc(f"p{i}", templates={"gpu": "one-gpu"}, group="g")
                                                for i in range(8))]
    decisions = run(docs, pure)
    assert len(bound(decisions)) == 8
    taken = [d for devices in devices_of(decisions).values() for d in devices]
    assert len(taken) == 8 and len(set(taken)) == 8
    for pod, node in bound(decisions).items():
        assert all(d.startswith(node + "/") for d in devices_of(decisions)[pod])


def test_a_gang_that_does_not_fit_takes_no_device(pure):
    docs = [*GPU_NODES, podgroup_doc("g", 9), *(pod_doc(f"p{i}", templates={"gpu": "one-gpu"}, group="g")
                                                for i in range(9)),
            pod_doc("solo", templates={"gpu": "one-gpu"})]
    decisions = run(docs, pure)
    # all or none: the gang's undone placements gave their devices back, so the lone pod gets one
    assert set(bound(decisions)) == {"solo"}
    assert decisions.claims and all(len(c) == 1 for c in decisions.claims.values())


def test_a_pod_asking_two_gpus_with_the_same_attribute(pure):
    slices = [slice_doc("n1", [gpu("gpu-0", model="A"), gpu("gpu-1", model="B")], node="node-1"),
              slice_doc("n2", [gpu("gpu-0", model="A"), gpu("gpu-1", model="A")], node="node-2")]
    docs = [node_doc("node-1"), node_doc("node-2"), *slices, device_class("gpu"),
            claim_doc("pair", request(count=2), match=[(f"{DRIVER}/model", [])]), pod_doc("p", claims={"gpu": "pair"})]
    decisions = run(docs, pure)
    assert bound(decisions) == {"p": "node-2"}
    assert devices_of(decisions) == {"p": ["node-2/gpu-0", "node-2/gpu-1"]}


def test_a_claim_shared_by_pods_is_allocated_once(pure):
    docs = [*GPU_NODES, claim_doc("shared"), pod_doc("a", claims={"gpu": "shared"}),
            pod_doc("b", claims={"gpu": "shared"})]
    decisions = run(docs, pure)
    nodes = bound(decisions)
    assert set(nodes) == {"a", "b"} and nodes["a"] == nodes["b"]
    allocations = {a for chosen in decisions.claims.values() for _, a in chosen}
    assert len(allocations) == 1


def test_an_allocated_claim_pins_its_pods_to_its_node_and_its_devices_are_not_free(pure):
    docs = [*GPU_NODES, claim_doc("mine", allocation=allocation("node-2", ("gpu", "gpu-3"))),
            pod_doc("p", claims={"gpu": "mine"}),
            claim_doc("all-of-n2", request(mode="All")), pod_doc("q", claims={"gpu": "all-of-n2"})]
    state = state_of(docs)
    state.nodes["node-1"].unschedulable = True     # q could only go to node-2, where gpu-3 is taken
    decisions = run(state, pure)
    assert bound(decisions) == {"p": "node-2"}
    assert "q" not in bound(decisions)
    (reason,) = decisions.reasons_for("ns/q")
    assert "cannot allocate all claims (4 matching device(s) on the node, 3 free)" in reason.message


def test_a_missing_claim_holds_the_pod_in_kubes_words(pure):
    decisions = run([*GPU_NODES, pod_doc("p", claims={"gpu": "nosuch"})], pure)
    assert bound(decisions) == {}
    assert messages(decisions, "p") == ['0/2 nodes are available: resourceclaim "nosuch" not found.']


def test_no_free_device_says_so_per_node(pure):
    docs = [*GPU_NODES, *(pod_doc(f"p{i}", templates={"gpu": "one-gpu"}) for i in range(9))]
    decisions = run(docs, pure)
    assert len(bound(decisions)) == 8
    (waiting,) = [u for u in decisions.unschedulable]
    assert [r.message for r in waiting.reasons] == [
        "0/2 nodes are available: 2 cannot allocate all claims (4 matching device(s) on the node, 0 free)."]


def test_the_simulator_writes_allocations_and_releases_them(pure):
    state = state_of([*GPU_NODES, pod_doc("p", templates={"gpu": "one-gpu"})])
    decisions = run(state, pure)
    state.apply(decisions)
    claim = state.dra.claims["ns/p-gpu"]
    assert claim.allocation is not None and claim.reserved_for == ("uid-p",)
    # the next cycle counts its device as taken
    state2 = state_of([*GPU_NODES, *(pod_doc(f"q{i}", templates={"gpu": "one-gpu"}) for i in range(8))])
    state2.dra.claims.update(state.dra.claims)
    state2.pods["ns/p"] = state.pods["ns/p"]
    assert len(bound(run(state2, pure))) == 7
    # the pod leaves: its template's claim goes with it
    state.pods["ns/p"].releasing = True
    state.advance()
    assert "ns/p-gpu" not in state.dra.claims


# --- what the connector writes (runtime/kube/draclaims.py) ---------------------------------------

def test_the_allocation_status_carries_the_class_and_claim_configuration():
    # kube's allocator: each class's config once, for the requests allocated from it (FromClass);
    # then the claim's (FromClaim); a config for every request names none
    cls = device_class("gpu") | {"spec": {**device_class("gpu")["spec"], "config": [
        {"opaque": {"driver": DRIVER, "parameters": {"sharing": "timeslice"}}}]}}
    claim = claim_doc("c0", request("a"), first_available("b", request("big", cls="nic"), request("small")))
    claim["spec"]["devices"]["config"] = [{"requests": ["a"], "opaque": {"driver": DRIVER, "parameters": {"x": 1}}}]
    docs = one_class(gpus_on("node-1", 2), claim)
    docs[0] = cls
    state = state_of(docs)
    inv = build_inventory(state.dra)
    (allocation,) = allocate([state.dra.claims["ns/c0"]], list(range(len(inv.entries))), inv, lambda i: False, {},
                             "node-1")
    status = allocation_status(state.dra.claims["ns/c0"], allocation, state.dra.classes)
    assert status["devices"]["results"] == [
        {"request": "a", "driver": DRIVER, "pool": "node-1", "device": "gpu-0"},
        {"request": "b/small", "driver": DRIVER, "pool": "node-1", "device": "gpu-1"}]
    assert status["devices"]["config"] == [
        {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"sharing": "timeslice"}}},
        {"source": "FromClaim", "requests": ["a"], "opaque": {"driver": DRIVER, "parameters": {"x": 1}}}]
    assert status["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}


def test_preemption_frees_the_victims_devices(pure):
    # the only GPU is allocated to a running low-priority pod's claim: preempt evicts it and the
    # preemptor is pipelined onto the device it frees; once the victim is gone its claim is
    # deallocated (no consumer left) and the preemptor gets the device
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
    state = state_of([node_doc("node-1"), gpus_on("node-1", 1), device_class("gpu"),
                      claim_doc("low-gpu", allocation=allocation("node-1", ("gpu", "gpu-0")), reserved_for=["uid-low"]),
                      pod_doc("low", claims={"gpu": "low-gpu"}, node="node-1", priority=1),
                      claim_doc("high-gpu"), pod_doc("high", claims={"gpu": "high-gpu"}, priority=1000)])
    decisions = run_cycle(plan, state, Options(pure_python=pure))
    assert [e.pod for e in decisions.evictions] == ["ns/low"]
    assert decisions.pipelined == {"ns/high": "node-1"} and decisions.bindings == []
    state.apply(decisions)
    state.advance()
    assert state.dra.claims["ns/low-gpu"].allocation is None
    decisions = run_cycle(plan, state, Options(pure_python=pure))
    assert bound(decisions) == {"high": "node-1"} and devices_of(decisions) == {"high": ["node-1/gpu-0"]}


def test_a_template_claim_the_controller_has_not_made_yet(pure):
    # dynamicresources_test.go "missing-claim": a template's claim not created yet (a cluster's
    # resourceclaim controller makes it) keeps the pod from every node
    state = state_of([*GPU_NODES, pod_doc("my-pod", templates={"my-resource": "one-gpu"})])
    state.dra.instantiates_templates = False
    decisions = run(state, pure)
    assert messages(decisions, "my-pod") == [
        '0/2 nodes are available: waiting for dynamic resource controller to create the resourceclaim '
        '"my-pod-my-resource".']


def test_many_kinds_of_figures_fold_into_kubes_words(pure):
    # four nodes, each short in its own way: one line per variant would bury the reason
    docs = [device_class("gpu"), template_doc("one-gpu", request(count=10))]
    for i in range(4):
        docs += [node_doc(f"node-{i}"), gpus_on(f"node-{i}", i + 1)]
    decisions = run([*docs, pod_doc("p", templates={"gpu": "one-gpu"})], pure)
    assert messages(decisions, "p") == ["0/4 nodes are available: 4 cannot allocate all claims."]
    two = run([*docs[:4], pod_doc("p", templates={"gpu": "one-gpu"})], pure)
    assert messages(two, "p") == ["0/1 nodes are available: 1 cannot allocate all claims "
                                  "(1 matching device(s) on the node, 1 free)."]


def test_a_finished_pods_devices_are_free(pure):
    # the resourceclaim controller takes a finished pod out of reservedFor and deallocates its
    # claim: its device is free now, not once it leaves
    docs = [node_doc("node-1"), gpus_on("node-1", 1), device_class("gpu"),
            claim_doc("done-gpu", allocation=allocation("node-1", ("gpu", "gpu-0")), reserved_for=["uid-done"]),
            pod_doc("done", claims={"gpu": "done-gpu"}, node="node-1") | {"status": {"phase": "Succeeded"}},
            pod_doc("next", templates={"gpu": "one-gpu"}), template_doc("one-gpu", request())]
    decisions = run(docs, pure)
    assert bound(decisions) == {"next": "node-1"} and devices_of(decisions) == {"next": ["node-1/gpu-0"]}
