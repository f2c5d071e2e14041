"""DRA `distinctAttribute` claim constraints (DRAConsumableCapacity, beta and on by default since
Kubernetes 1.36, so served by v1.37's default allocator): the structured allocator's cases
(k8s.io/dynamic-resource-allocation structured/internal/allocatortesting TestAllocator, each
citing its Go name; those that also need allowMultipleAllocations, still refused here, are left
out), objects read with located errors, and the cycle on both kernels checked by a checker of its
own (pairwise different values read from the dicts)."""

from __future__ import annotations

import pytest

from runtime.cluster.dra import DistinctAttribute, MatchAttribute
from runtime.cluster.draalloc import AllocationError, allocate, build_inventory
from runtime.cluster.objects import ObjectError, load_objects
from runtime.engine.cycle import Options, run_cycle
from runtime_helpers import STANDARD_TIERS, policy
from dra_docs import DRIVER, claim_doc, device_class, gpu, node_doc, pod_doc, request, slice_doc

PLAN = policy(STANDARD_TIERS)


def distinct(claim: dict, attribute: str, requests: list[str] | None = None) -> dict:
    devices = claim["spec"]["devices"]
    devices.setdefault("constraints", []).append(
        {"distinctAttribute": f"{DRIVER}/{attribute}", **({"requests": requests} if requests else {})})
    return claim


def state_of(docs):
    return load_objects(("test.yaml", d) for d in docs)


def allocate_on_node_1(docs, claims: list[str]):
    dra = state_of([device_class("gpu"), *docs]).dra
    inv = build_inventory(dra)
    candidates = [e.index for e in inv.entries if e.slice.node_name == "node-1"]
    out = allocate([dra.claims[f"ns/{c}"] for c in claims], candidates, inv, lambda i: False, {}, "node-1")
    return None if out is None else [[(r.request, r.device) for r in a.devices] for a in out]


def gpus(*attributes: dict, node: str = "node-1") -> dict:
    return slice_doc(f"{node}-gpus", [gpu(f"gpu-{i}", **a) for i, a in enumerate(attributes)], node=node)


@pytest.mark.parametrize("docs, claims, expected", [
    # "with-distinct-constraints" (without allowMultipleAllocations: each request its own device):
    # constraints over nested request sets, of bool, string and int attributes
    ([gpus(dict(flag=True, version="1.0.0", numa=0), dict(flag=False, version="1.0.1", numa=1),
           dict(flag=True, version="1.0.2", numa=2), dict(flag=True, version="1.0.0", numa=3)),
      distinct(distinct(distinct(claim_doc("c0", request("r0"), request("r1"), request("r2"), request("r3")),
                                 "flag", ["r0", "r1"]), "version", ["r0", "r1", "r2"]), "numa")],
     ["c0"], [[("r0", "gpu-0"), ("r1", "gpu-1"), ("r2", "gpu-2"), ("r3", "gpu-3")]]),
    # "distinct-constraint-single-request-count-3-not-distinct"
    ([gpus(dict(s="value1"), dict(s="value2"), dict(s="value1")), distinct(claim_doc("c0", request(count=3)), "s")],
     ["c0"], None),
    # "distinct-constraint-single-request-count-3-all-distinct"
    ([gpus(dict(s="value1"), dict(s="value2"), dict(s="value3")), distinct(claim_doc("c0", request(count=3)), "s")],
     ["c0"], [[("gpu", "gpu-0"), ("gpu", "gpu-1"), ("gpu", "gpu-2")]]),
    # "distinct-constraint-two-requests-with-count-not-distinct"
    ([gpus(dict(s="value1"), dict(s="value2"), dict(s="value1")),
      distinct(claim_doc("c0", request("r0", count=2), request("r1")), "s", ["r0", "r1"])], ["c0"], None),
    # "with-distinct-constraints-attribute-not-set"
    ([gpus(dict()), distinct(claim_doc("c0", request("r0")), "flag", ["r0"])], ["c0"], None),
    # "distinct-constraint-single-request-multiple-devices-attribute-not-set"
    ([gpus(dict(), dict(), dict()), distinct(claim_doc("c0", request(count=3)), "numa")], ["c0"], None),
    # "distinct-constraint-single-request-not-enough-distinct-values"
    ([gpus(dict(numa=1), dict(numa=2), dict(numa=2)), distinct(claim_doc("c0", request(count=3)), "numa")],
     ["c0"], None),
    # backtracking: the first two devices share a value, the search skips to the third
    ([gpus(dict(numa=0), dict(numa=0), dict(numa=1)), distinct(claim_doc("c0", request(count=2)), "numa")],
     ["c0"], [[("gpu", "gpu-0"), ("gpu", "gpu-2")]]),
    # a value of another type is a different value (an int 1 and a string "1")
    ([gpus(dict(v=1), dict(v="1")), distinct(claim_doc("c0", request(count=2)), "v")],
     ["c0"], [[("gpu", "gpu-0"), ("gpu", "gpu-1")]]),
    # requests outside the constraint take any device
    ([gpus(dict(numa=0), dict(numa=0), dict(numa=1)),
      distinct(claim_doc("c0", request("a"), request("b"), request("c")), "numa", ["a", "c"])],
     ["c0"], [[("a", "gpu-0"), ("b", "gpu-1"), ("c", "gpu-2")]]),
    # with matchAttribute on the same claim: same model, different numa
    ([gpus(dict(model="A", numa=0), dict(model="B", numa=1), dict(model="A", numa=0), dict(model="A", numa=1)),
      distinct(claim_doc("c0", request(count=2), match=[(f"{DRIVER}/model", [])]), "numa")],
     ["c0"], [[("gpu", "gpu-0"), ("gpu", "gpu-3")]]),
])
def test_distinct_attribute_allocator_table(docs, claims, expected):
    assert allocate_on_node_1(docs, claims) == expected


def test_all_mode_under_a_distinct_constraint_it_breaks_is_kubes_error():
    # allocateOne with allocationMode All and must=true: "cannot add device ... claim constraint"
    docs = [gpus(dict(numa=0), dict(numa=0)), distinct(claim_doc("c0", request(mode="All")), "numa")]
    with pytest.raises(AllocationError, match="because a claim constraint would not be satisfied"):
        allocate_on_node_1(docs, ["c0"])


def test_distinct_attribute_is_read():
    claim = state_of([distinct(claim_doc("c0", request("a"), request("b"), match=[(f"{DRIVER}/model", [])]),
                               "numa", ["a"])]).dra.claims["ns/c0"]
    assert claim.spec.constraints == (MatchAttribute(f"{DRIVER}/model"), DistinctAttribute(f"{DRIVER}/numa", ("a",)))


@pytest.mark.parametrize("constraint, message", [
    ({"distinctAttribute": f"{DRIVER}/numa", "matchAttribute": f"{DRIVER}/model"}, "exactly one of matchAttribute"),
    ({}, "exactly one of matchAttribute"),
    ({"distinctAttribute": "numa"}, "distinctAttribute` must be a fully qualified name"),
    ({"distinctAttribute": f"{DRIVER}/numa", "requests": ["nosuch"]}, "names `nosuch`"),
])
def test_bad_distinct_constraints_are_located_errors(constraint, message):
    doc = claim_doc("c0")
    doc["spec"]["devices"]["constraints"] = [constraint]
    with pytest.raises(ObjectError) as err:
        state_of([doc])
    assert message in str(err.value) and "test.yaml" in str(err.value) and "constraints[0]" in str(err.value)


# --- the cycle, both kernels, with a checker of its own ---------------------------------------

@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def check_distinct(docs: list[dict], decisions, attribute: str) -> None:
    """Every claim under a distinctAttribute got devices of pairwise different values (read from
    the ResourceSlice dicts), none of them in two claims."""
    values = {(s["spec"]["pool"]["name"], d["name"]): d["attributes"].get(attribute)
              for s in docs if s["kind"] == "ResourceSlice" for d in s["spec"]["devices"]}
    seen: set[tuple[str, str]] = set()
    for _, chosen in decisions.claims.items():
        for claim, alloc in chosen:
            devices = [(r.pool, r.device) for r in alloc.devices]
            assert not seen & set(devices), devices
            seen |= set(devices)
            got = [values[d] for d in devices]
            assert None not in got and len({repr(v) for v in got}) == len(got), (claim.key, got)


def test_pairs_of_different_numa_nodes_across_a_cluster(pure):
    # node-1: numa 0,0,1,1 -> two pairs; node-2: numa 0,0,0,1 -> one pair (its other two share 0)
    docs = [node_doc("node-1"), node_doc("node-2"), device_class("gpu"),
            gpus(dict(numa=0), dict(numa=0), dict(numa=1), dict(numa=1)),
            gpus(dict(numa=0), dict(numa=0), dict(numa=0), dict(numa=1), node="node-2")]
    for i in range(4):
        docs += [distinct(claim_doc(f"pair-{i}", request(count=2)), "numa"), pod_doc(f"p{i}", claims={"gpu": f"pair-{i}"})]
    decisions = run_cycle(PLAN, state_of(docs), Options(pure_python=pure))
    assert len(decisions.bindings) == 3
    check_distinct(docs, decisions, "numa")
    (reason,) = decisions.reasons_for(f"ns/{({f'p{i}' for i in range(4)} - {b.pod.split('/')[1] for b in decisions.bindings}).pop()}")
    assert "cannot allocate all claims" in reason.message
