"""Invariants of Dynamic Resource Allocation over generated clusters, both kernels, across two
cycles (the test plays the API server: the first cycle's allocations written into the claims'
dicts): no device is in two claims, every pod bound has every claim allocated with devices its
node reaches, each request got its count of devices, each device satisfies its class's and its
request's selector, every matchAttribute and distinctAttribute constraint holds, a device given to
a request with adminAccess (in a namespace labelled for it) is marked so and is the only kind of
result a device may share with others — as an independent checker reads
the dicts (the selectors are drawn from a small vocabulary the checker evaluates in Python, not
through CEL nor any engine code)."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.objects import load_objects
from runtime_helpers import STANDARD_TIERS, policy
from runtime.engine.cycle import Options, run_cycle
from dra_docs import (
    DRIVER, claim_doc, device_class, gpu, node_doc, pod_doc, podgroup_doc, request, slice_doc, template_doc,
)

PLAN = policy(STANDARD_TIERS)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# selector text -> what it says, for the checker
SELECTORS = {
    None: lambda attrs: True,
    f'device.attributes["{DRIVER}"].model == "A"': lambda attrs: attrs.get("model") == "A",
    f'device.attributes["{DRIVER}"].numa >= 1': lambda attrs: attrs.get("numa", -1) >= 1,
    f'"fast" in device.attributes["{DRIVER}"] && device.attributes["{DRIVER}"].fast':
        lambda attrs: attrs.get("fast") is True,
}
CLASS_SELECTOR = f'device.attributes["{DRIVER}"].healthy'     # class "gpu": healthy devices only


def constrained(doc: dict, constraint: str | None) -> dict:
    """A claim or template whose devices must differ in numa under `constraint == "distinct"`."""
    if constraint == "distinct":
        spec = doc["spec"]["spec"] if doc["kind"] == "ResourceClaimTemplate" else doc["spec"]
        spec["devices"]["constraints"] = [{"distinctAttribute": f"{DRIVER}/numa"}]
    return doc


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 4))
    docs = [node_doc(f"n{i}") for i in range(n)]
    docs.append(device_class("gpu", CLASS_SELECTOR))
    docs.append({"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "ns", "labels": {"resource.kubernetes.io/admin-access": "true"}}})
    for i in range(n):
        devices = []
        for k in range(draw(st.integers(0, 4))):
            attrs = {"model": draw(st.sampled_from(["A", "B"])), "numa": draw(st.integers(0, 1)),
                     "healthy": draw(st.sampled_from([True, True, True, False]))}
            if draw(st.booleans()):
                attrs["fast"] = draw(st.booleans())
            devices.append(gpu(f"gpu-{k}", **attrs))
        docs.append(slice_doc(f"n{i}-gpus", devices, node=f"n{i}"))
    if draw(st.booleans()):       # network-attached devices every node reaches
        docs.append(slice_doc("net", [gpu(f"net-{k}", model="A", numa=k % 2, healthy=True)
                                      for k in range(draw(st.integers(1, 2)))], pool="net", all_nodes=True))
    claims: list[str] = []
    for i in range(draw(st.integers(1, 8))):
        count = draw(st.integers(1, 2))
        selector = draw(st.sampled_from(list(SELECTORS)))
        req = request(count=count, selectors=(selector,) if selector else ())
        constraint = draw(st.sampled_from([None, "match", "distinct"])) if count > 1 else None
        match = [(f"{DRIVER}/numa", [])] if constraint == "match" else None
        if draw(st.integers(0, 4)) == 0:
            req = {**req, "exactly": {**req["exactly"], "adminAccess": True}}
        kind = draw(st.sampled_from(["template", "named", "shared"]))
        group = f"g{i}" if draw(st.integers(0, 3)) == 0 else None
        size = draw(st.integers(2, 3)) if group else 1
        if group:
            docs.append(podgroup_doc(group, size))
        for m in range(size):
            name = f"p{i}-{m}"
            if kind == "template" or (kind == "shared" and not claims):
                docs.append(constrained(template_doc(f"t-{name}", req, match=match), constraint))
                docs.append(pod_doc(name, templates={"gpu": f"t-{name}"}, group=group))
            elif kind == "named":
                docs.append(constrained(claim_doc(f"c-{name}", req, match=match), constraint))
                claims.append(f"c-{name}")
                docs.append(pod_doc(name, claims={"gpu": f"c-{name}"}, group=group))
            else:
                docs.append(pod_doc(name, claims={"gpu": draw(st.sampled_from(claims))}, group=group))
    return docs


def check(docs: list[dict], allocations: dict[str, dict], bound: dict[str, str]) -> None:
    """The independent checker: `allocations` claim key -> {"node", "devices": [(request, pool, device)]}."""
    devices = {}
    reach = {}
    for d in docs:
        if d["kind"] == "ResourceSlice":
            spec = d["spec"]
            for dev in spec["devices"]:
                key = (spec["pool"]["name"], dev["name"])
                devices[key] = {k: next(iter(v.values())) for k, v in dev["attributes"].items()}
                reach[key] = None if spec.get("allNodes") else spec.get("nodeName")
    specs = {f"ns/{d['metadata']['name']}": d["spec"] for d in docs if d["kind"] == "ResourceClaim"}
    specs.update({f"ns/{d['metadata']['name']}": d["spec"]["spec"] for d in docs if d["kind"] == "ResourceClaimTemplate"})
    owner: dict[tuple, str] = {}
    for key, got in allocations.items():
        spec = specs[got["spec"]]
        (req,) = spec["devices"]["requests"]
        exact = req["exactly"]
        admin = exact.get("adminAccess") is True
        assert len(got["devices"]) == exact.get("count", 1), (key, got)
        assert len({(p, n) for _, p, n, _ in got["devices"]}) == len(got["devices"]), (key, got)
        values = []
        for request_name, pool, name, marked in got["devices"]:
            dev = (pool, name)
            assert marked == admin, (key, dev, marked)
            if not admin:      # adminAccess results never make a device in use
                assert dev not in owner, f"{dev} in {owner.get(dev)} and {key}"
                owner[dev] = key
            attrs = devices[dev]
            assert attrs.get("healthy") is True, (key, dev)
            for sel in exact.get("selectors", []):
                assert SELECTORS[sel["cel"]["expression"]](attrs), (key, dev, sel)
            assert reach[dev] in (None, got["node"]), (key, dev, got["node"])
            values.append(attrs.get("numa"))
        for constraint in spec["devices"].get("constraints", ()):
            if "matchAttribute" in constraint:
                assert len(set(values)) == 1, (key, got)
            else:
                assert None not in values and len(set(values)) == len(values), (key, got)
    for pod, node in bound.items():
        for ref in pod_specs(docs)[pod]:
            claim = ref.get("resourceClaimName") or f"{pod.split('/')[1]}-{ref['name']}"
            got = allocations.get(f"ns/{claim}")
            assert got is not None and got["node"] == node, (pod, node, claim, got)


def pod_specs(docs) -> dict[str, list[dict]]:
    return {f"ns/{d['metadata']['name']}": d["spec"]["resourceClaims"] for d in docs if d["kind"] == "Pod"}


def play(docs: list[dict], pure: bool) -> None:
    docs = copy.deepcopy(docs)
    allocations: dict[str, dict] = {}
    bound: dict[str, str] = {}
    templates = {f"ns/{d['metadata']['name']}": d for d in docs if d["kind"] == "ResourceClaimTemplate"}
    for _ in range(2):
        state = load_objects(("gen", d) for d in docs)
        decisions = run_cycle(PLAN, state, Options(pure_python=pure))
        for b in decisions.bindings:
            bound[b.pod] = b.node
            for claim, allocation in decisions.claims.get(b.pod, ()):
                devices = [(r.request, r.pool, r.device, r.admin_access) for r in allocation.devices]
                spec = claim.key
                if claim.template:
                    ref = next(r for r in pod_specs(docs)[b.pod] if f"{b.pod.split('/')[1]}-{r['name']}" == claim.name)
                    spec = f"ns/{ref['resourceClaimTemplateName']}"
                known = allocations.get(claim.key)
                assert known is None or known["devices"] == devices, "a claim allocated twice"
                allocations[claim.key] = {"node": b.node, "devices": devices, "spec": spec}
        check(docs, allocations, bound)
        # the API server: pods bound, claims allocated and reserved (a template's claim created)
        for d in docs:
            key = f"ns/{d['metadata']['name']}"
            if d["kind"] == "Pod" and key in bound:
                d["spec"]["nodeName"] = bound[key]
                d["status"]["phase"] = "Running"
        by_name = {f"ns/{d['metadata']['name']}": d for d in docs if d["kind"] == "ResourceClaim"}
        for key, got in allocations.items():
            doc = by_name.get(key)
            if doc is None:
                template = templates[got["spec"]]
                doc = {"apiVersion": template["apiVersion"], "kind": "ResourceClaim",
                       "metadata": {"name": key.split("/")[1], "namespace": "ns"}, "spec": template["spec"]["spec"]}
                docs.append(doc)
            doc["status"] = {"allocation": {"devices": {"results": [
                {"request": r, "driver": DRIVER, "pool": p, "device": n, **({"adminAccess": True} if a else {})}
                for r, p, n, a in got["devices"]]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [got["node"]]}]}]}},
                "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p.split('/')[1]}"}
                                for p, n in bound.items() if any(
                                    (r.get("resourceClaimName") or f"{p.split('/')[1]}-{r['name']}") == key.split("/")[1]
                                    for r in pod_specs(docs)[p])]}
        # more pods arrive wanting what is left
        for d in [d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"].startswith("p")][:2]:
            extra = copy.deepcopy(d)
            extra["metadata"]["name"] = "late-" + d["metadata"]["name"] + str(len(docs))
            extra["metadata"]["uid"] = "uid-" + extra["metadata"]["name"]
            extra["metadata"].pop("annotations", None)
            extra["spec"].pop("nodeName", None)
            extra["status"] = {"phase": "Pending"}
            if any("resourceClaimTemplateName" in r for r in extra["spec"]["resourceClaims"]):
                docs.append(extra)


@SETTINGS
@given(clusters())
def test_dra_invariants_compiled(docs):
    play(docs, pure=False)


@SETTINGS
@given(clusters())
def test_dra_invariants_python(docs):
    play(docs, pure=True)
