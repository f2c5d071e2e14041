"""Dynamic Resource Allocation objects (`resource.k8s.io/v1`: DeviceClass, ResourceSlice,
ResourceClaim, ResourceClaimTemplate) and a pod's `spec.resourceClaims` as the scheduler reads
them from Kubernetes dicts; each problem a FieldError naming its field, which
runtime.cluster.objects turns into a located ObjectProblem. Every CEL selector is compiled here,
so that a selector that does not compile is an error of its object, not of a cycle.

Fields that change what may be allocated and that this reader does not evaluate are refused,
naming them (nothing the user asks for is silently ignored): a selector other than `cel`, a
constraint other than `matchAttribute` or `distinctAttribute`, `capacity.requests` (consumable
capacity), `allowMultipleAllocations`, `bindingConditions`.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.cluster import kubefields as kf
from runtime.cluster.dra import (
    ALL, EXACT_COUNT, Allocation, ClaimSpec, Device, DeviceClass, DistinctAttribute, Dra, DeviceRequest, DeviceResult, DeviceTaint,
    DeviceToleration, MatchAttribute, PodResourceClaim, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
    SubRequest,
)
from runtime.cluster.dracel import CelError, Version, compile_selector, quantity_milli, semver_key
from runtime.cluster.kubefields import FieldError

GROUP = "resource.k8s.io"
VERSIONS = ("v1",)
DRA_API = f"{GROUP}/v1"
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


def _check_api(obj: dict) -> None:
    api = str(obj.get("apiVersion", ""))
    group, _, version = api.partition("/")
    if group != GROUP or version not in VERSIONS:
        raise FieldError(f"apiVersion must be {GROUP}/v1, found `{api}`")


def _string(raw: dict, key: str, where: str, required: bool = True) -> str:
    value = raw.get(key)
    if value is None or value == "":
        if required:
            raise FieldError(f"`{where}.{key}` is missing")
        return ""
    if not isinstance(value, str):
        raise FieldError(f"`{where}.{key}` must be a string, found `{value}`")
    return value


def _refuse(raw: dict, where: str, keys: tuple[str, ...]) -> None:
    for key in keys:
        if raw.get(key) not in (None, False, [], {}):
            raise FieldError(f"`{where}.{key}` is not evaluated by this scheduler")


def selectors(raw: dict, where: str) -> tuple[str, ...]:
    out = []
    for i, sel in enumerate(kf.listing(raw, "selectors")):
        at = f"{where}.selectors[{i}]"
        if not isinstance(sel, dict) or set(sel) != {"cel"}:
            raise FieldError(f"`{at}` must have a `cel` selector (the only kind)")
        expression = _string(kf.mapping(sel, "cel"), "expression", f"{at}.cel")
        try:
            compile_selector(expression)
        except CelError as err:
            raise FieldError(f"`{at}.cel.expression`: {err}") from None
        out.append(expression)
    return tuple(out)


# --- DeviceClass ----------------------------------------------------------------------------

def read_device_class(obj: dict) -> DeviceClass:
    _check_api(obj)
    _, name = kf.name_of(obj)
    spec = kf.mapping(obj, "spec")
    return DeviceClass(name, selectors(spec, "spec"),
                       tuple(_opaque(c, f"spec.config[{i}]") for i, c in enumerate(kf.listing(spec, "config"))))


def _opaque(raw: Any, where: str) -> str:
    """A DeviceConfiguration (`opaque: {driver, parameters}`), kept as JSON text for the allocation."""
    if not isinstance(raw, dict) or not isinstance(raw.get("opaque"), dict) or not raw["opaque"].get("driver"):
        raise FieldError(f"`{where}.opaque.driver` is missing")
    return json.dumps({"opaque": raw["opaque"]}, sort_keys=True)


# --- ResourceSlice --------------------------------------------------------------------------

def _attribute(raw: Any, where: str) -> Any:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise FieldError(f"`{where}` must have exactly one of int, bool, string, version")
    (kind, value), = raw.items()
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "version" and isinstance(value, str):
        try:
            semver_key(value)
        except ValueError:
            raise FieldError(f"`{where}.version` must be a semantic version, found `{value}`") from None
        return Version(value)
    raise FieldError(f"`{where}` must have exactly one of int, bool, string, version, found `{kind}: {value}`")


def _quantity(raw: Any, where: str) -> int:
    try:
        return quantity_milli(raw if isinstance(raw, (int, float)) else str(raw))
    except ValueError as err:
        raise FieldError(f"`{where}`: {err}") from None


def _counters(raw: Any, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, dict):
        raise FieldError(f"`{where}` must be a mapping of counters")
    out = []
    for name, counter in raw.items():
        if not isinstance(counter, dict) or "value" not in counter:
            raise FieldError(f"`{where}.{name}.value` is missing")
        out.append((str(name), _quantity(counter["value"], f"{where}.{name}.value")))
    return tuple(sorted(out))


def _node_fields(raw: dict, where: str) -> tuple[str | None, tuple | None, bool]:
    node_name = _string(raw, "nodeName", where, required=False) or None
    selector = raw.get("nodeSelector")
    terms = None
    if selector is not None:
        terms = kf.node_selector_terms(kf.listing(kf.mapping(raw, "nodeSelector"), "nodeSelectorTerms"),
                                       f"{where}.nodeSelector.nodeSelectorTerms")
    return node_name, terms, bool(raw.get("allNodes"))


def _device(raw: Any, where: str, per_device: bool) -> Device:
    if not isinstance(raw, dict):
        raise FieldError(f"`{where}` must be a mapping")
    name = _string(raw, "name", where)
    _refuse(raw, where, ("allowMultipleAllocations", "bindingConditions", "bindingFailureConditions"))
    attrs = tuple(sorted((str(k), _attribute(v, f"{where}.attributes.{k}"))
                         for k, v in kf.mapping(raw, "attributes").items()))
    caps = []
    for k, v in kf.mapping(raw, "capacity").items():
        if not isinstance(v, dict) or "value" not in v:
            raise FieldError(f"`{where}.capacity.{k}.value` is missing")
        _refuse(v, f"{where}.capacity.{k}", ("requestPolicy",))
        caps.append((str(k), _quantity(v["value"], f"{where}.capacity.{k}.value")))
    taints = []
    for i, t in enumerate(kf.listing(raw, "taints")):
        at = f"{where}.taints[{i}]"
        if not isinstance(t, dict):
            raise FieldError(f"`{at}` must be a mapping")
        effect = _string(t, "effect", at)
        if effect not in TAINT_EFFECTS:
            raise FieldError(f"`{at}.effect` must be one of {', '.join(TAINT_EFFECTS)}, found `{effect}`")
        taints.append(DeviceTaint(_string(t, "key", at), str(t.get("value") or ""), effect))
    consumes = []
    for i, c in enumerate(kf.listing(raw, "consumesCounters")):
        at = f"{where}.consumesCounters[{i}]"
        if not isinstance(c, dict):
            raise FieldError(f"`{at}` must be a mapping")
        consumes.append((_string(c, "counterSet", at), _counters(c.get("counters") or {}, f"{at}.counters")))
    node_name, terms, all_nodes = _node_fields(raw, where)
    if not per_device and (node_name or terms is not None or all_nodes):
        raise FieldError(f"`{where}` names its nodes, which needs the slice's `spec.perDeviceNodeSelection`")
    if per_device and sum((bool(node_name), terms is not None, all_nodes)) != 1:
        raise FieldError(f"`{where}` must set exactly one of nodeName, nodeSelector, allNodes "
                         f"(the slice sets perDeviceNodeSelection)")
    return Device(name, attrs, tuple(sorted(caps)), tuple(taints), tuple(consumes), node_name, terms, all_nodes)


def read_resource_slice(obj: dict) -> ResourceSlice:
    _check_api(obj)
    _, name = kf.name_of(obj)
    spec = kf.mapping(obj, "spec", required=True)
    driver = _string(spec, "driver", "spec")
    pool = kf.mapping(spec, "pool", required=True)
    pool_name = _string(pool, "name", "spec.pool")
    generation = kf.integer(pool.get("generation"), "spec.pool.generation", 0)
    count = kf.integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1)
    if count < 1:
        raise FieldError(f"`spec.pool.resourceSliceCount` must be at least 1, found `{count}`")
    node_name, terms, all_nodes = _node_fields(spec, "spec")
    per_device = bool(spec.get("perDeviceNodeSelection"))
    if sum((bool(node_name), terms is not None, all_nodes, per_device)) != 1:
        raise FieldError("`spec` must set exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection")
    devices = tuple(_device(d, f"spec.devices[{i}]", per_device) for i, d in enumerate(kf.listing(spec, "devices")))
    counters = []
    for i, c in enumerate(kf.listing(spec, "sharedCounters")):
        at = f"spec.sharedCounters[{i}]"
        if not isinstance(c, dict):
            raise FieldError(f"`{at}` must be a mapping")
        counters.append((_string(c, "name", at), _counters(c.get("counters") or {}, f"{at}.counters")))
    known = {n for n, _ in counters}
    for d, raw in zip(devices, kf.listing(spec, "devices")):
        for i, (set_name, _) in enumerate(d.consumes):
            if counters and set_name not in known:
                raise FieldError(f"`spec.devices[{devices.index(d)}].consumesCounters[{i}].counterSet` names "
                                 f"`{set_name}`, which the slice's sharedCounters do not define")
    return ResourceSlice(name, driver, pool_name, generation, count, node_name, terms, all_nodes, per_device, devices,
                         tuple(counters))


# --- claims -----------------------------------------------------------------------------------

def _tolerations(raw: dict, where: str) -> tuple[DeviceToleration, ...]:
    out = []
    for i, t in enumerate(kf.listing(raw, "tolerations")):
        at = f"{where}.tolerations[{i}]"
        if not isinstance(t, dict):
            raise FieldError(f"`{at}` must be a mapping")
        op = str(t.get("operator") or "Equal")
        if op not in ("Equal", "Exists"):
            raise FieldError(f"`{at}.operator` must be Equal or Exists, found `{op}`")
        out.append(DeviceToleration(str(t.get("key") or ""), op, str(t.get("value") or ""), str(t.get("effect") or "")))
    return tuple(out)


def _sub_request(raw: dict, where: str, name: str) -> SubRequest:
    _refuse(raw, where, ("capacity",))
    mode = str(raw.get("allocationMode") or EXACT_COUNT)
    if mode not in (EXACT_COUNT, ALL):
        raise FieldError(f"`{where}.allocationMode` must be ExactCount or All, found `{mode}`")
    count = kf.integer(raw.get("count"), f"{where}.count", 1)
    if mode == EXACT_COUNT and count < 1:
        raise FieldError(f"`{where}.count` must be at least 1, found `{count}`")
    if mode == ALL and raw.get("count") is not None:
        raise FieldError(f"`{where}.count` must not be set with allocationMode All")
    admin = raw.get("adminAccess")
    if admin is not None and not isinstance(admin, bool):
        raise FieldError(f"`{where}.adminAccess` must be true or false, found `{admin}`")
    return SubRequest(name, _string(raw, "deviceClassName", where), selectors(raw, where), mode,
                      count if mode == EXACT_COUNT else 0, _tolerations(raw, where), admin is True)


def claim_spec(spec: dict, where: str) -> ClaimSpec:
    devices = kf.mapping(spec, "devices")
    requests = []
    names: set[str] = set()
    for i, r in enumerate(kf.listing(devices, "requests")):
        at = f"{where}.devices.requests[{i}]"
        if not isinstance(r, dict):
            raise FieldError(f"`{at}` must be a mapping")
        name = _string(r, "name", at)
        if name in names:
            raise FieldError(f"`{at}.name` `{name}` is used by another request")
        names.add(name)
        exactly, first = r.get("exactly"), r.get("firstAvailable")
        if (exactly is None) == (first is None):
            raise FieldError(f"`{at}` must set exactly one of exactly, firstAvailable")
        if exactly is not None:
            requests.append(DeviceRequest(name, exactly=_sub_request(kf.mapping(r, "exactly"), f"{at}.exactly", name)))
            continue
        subs = []
        for k, s in enumerate(kf.listing(r, "firstAvailable")):
            sat = f"{at}.firstAvailable[{k}]"
            if not isinstance(s, dict):
                raise FieldError(f"`{sat}` must be a mapping")
            subs.append(_sub_request(s, sat, _string(s, "name", sat)))
        if not subs:
            raise FieldError(f"`{at}.firstAvailable` must not be empty")
        requests.append(DeviceRequest(name, first_available=tuple(subs)))
    qualified = names | {f"{r.name}/{s.name}" for r in requests for s in r.first_available}
    constraints = []
    for i, c in enumerate(kf.listing(devices, "constraints")):
        at = f"{where}.devices.constraints[{i}]"
        if not isinstance(c, dict):
            raise FieldError(f"`{at}` must be a mapping")
        kinds = [k for k in ("matchAttribute", "distinctAttribute") if c.get(k) not in (None, "")]
        if len(kinds) != 1:
            raise FieldError(f"`{at}` must set exactly one of matchAttribute, distinctAttribute")
        (kind,) = kinds
        attribute = _string(c, kind, at)
        if "/" not in attribute:
            raise FieldError(f"`{at}.{kind}` must be a fully qualified name (domain/name), found `{attribute}`")
        wanted = tuple(str(n) for n in kf.listing(c, "requests"))
        for n in wanted:
            if n not in qualified:
                raise FieldError(f"`{at}.requests` names `{n}`, which is no request of the claim")
        constraints.append(MatchAttribute(attribute, wanted) if kind == "matchAttribute"
                           else DistinctAttribute(attribute, wanted))
    config = []
    for i, c in enumerate(kf.listing(devices, "config")):
        at = f"{where}.devices.config[{i}]"
        wanted = tuple(str(n) for n in kf.listing(c, "requests")) if isinstance(c, dict) else ()
        for n in wanted:
            if n not in qualified:
                raise FieldError(f"`{at}.requests` names `{n}`, which is no request of the claim")
        config.append((wanted, _opaque(c, at)))
    return ClaimSpec(tuple(requests), tuple(constraints), tuple(config))


def _allocation(raw: Any) -> Allocation | None:
    if not raw:
        return None
    if not isinstance(raw, dict):
        raise FieldError("`status.allocation` must be a mapping")
    results = []
    for i, r in enumerate(kf.listing(kf.mapping(raw, "devices"), "results")):
        at = f"status.allocation.devices.results[{i}]"
        if not isinstance(r, dict):
            raise FieldError(f"`{at}` must be a mapping")
        results.append(DeviceResult(_string(r, "request", at), _string(r, "driver", at), _string(r, "pool", at),
                                    _string(r, "device", at),
                                    r.get("adminAccess") is True))
    terms = None
    if raw.get("nodeSelector") is not None:
        terms = kf.node_selector_terms(kf.listing(kf.mapping(raw, "nodeSelector"), "nodeSelectorTerms"),
                                       "status.allocation.nodeSelector.nodeSelectorTerms")
    return Allocation(tuple(results), terms)


def read_resource_claim(obj: dict) -> ResourceClaim:
    _check_api(obj)
    namespace, name = kf.name_of(obj)
    meta = kf.mapping(obj, "metadata")
    status = kf.mapping(obj, "status")
    reserved, consumers = [], []
    for i, ref in enumerate(kf.listing(status, "reservedFor")):
        if not isinstance(ref, dict) or not ref.get("uid"):
            raise FieldError(f"`status.reservedFor[{i}].uid` is missing")
        reserved.append(str(ref["uid"]))
        consumers.append((str(ref.get("apiGroup") or ""), str(ref.get("resource") or ""), str(ref.get("name") or ""),
                          str(ref["uid"])))
    owner = next((str(o.get("uid")) for o in kf.listing(meta, "ownerReferences")
                  if isinstance(o, dict) and o.get("kind") == "Pod" and o.get("controller")), None)
    return ResourceClaim(namespace, name, claim_spec(kf.mapping(obj, "spec"), "spec"),
                         kf.uid_of(meta, namespace, name), _allocation(status.get("allocation")), tuple(reserved),
                         bool(meta.get("deletionTimestamp")), owner, version=str(meta.get("resourceVersion") or ""),
                         finalizers=tuple(str(f) for f in kf.listing(meta, "finalizers")),
                         consumers=tuple(consumers))


def read_resource_claim_template(obj: dict) -> ResourceClaimTemplate:
    _check_api(obj)
    namespace, name = kf.name_of(obj)
    spec = kf.mapping(kf.mapping(obj, "spec", required=True), "spec")
    return ResourceClaimTemplate(namespace, name, claim_spec(spec, "spec.spec"))


# --- a pod's spec.resourceClaims ----------------------------------------------------------------

def pod_resource_claims(spec: dict, status: dict) -> tuple[PodResourceClaim, ...] | None:
    """A pod's `spec.resourceClaims`, each with the claim `status.resourceClaimStatuses` says
    the controller made for it (None: the pod has none)."""
    raw = kf.listing(spec, "resourceClaims")
    if not raw:
        return None
    generated = {}
    for i, s in enumerate(kf.listing(status, "resourceClaimStatuses")):
        if isinstance(s, dict) and s.get("name") and s.get("resourceClaimName"):
            generated[str(s["name"])] = str(s["resourceClaimName"])
    out = []
    for i, claim in enumerate(raw):
        where = f"spec.resourceClaims[{i}]"
        if not isinstance(claim, dict) or not claim.get("name"):
            raise FieldError(f"`{where}.name` is missing")
        by_name, by_template = claim.get("resourceClaimName"), claim.get("resourceClaimTemplateName")
        if bool(by_name) == bool(by_template):
            raise FieldError(f"`{where}` must set exactly one of resourceClaimName, resourceClaimTemplateName")
        out.append(PodResourceClaim(str(claim["name"]), str(by_name) if by_name else None,
                                    str(by_template) if by_template else None, generated.get(str(claim["name"]))))
    return tuple(out)


# --- one object at a time (a connector's watch) --------------------------------------------------

DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")


def add_dra_object(dra: Dra, obj: dict) -> None:
    """Add or replace one DRA object (its `kind` says which); raises FieldError naming the field."""
    kind = obj.get("kind")
    if kind == "DeviceClass":
        cls = read_device_class(obj)
        dra.classes[cls.name] = cls
    elif kind == "ResourceSlice":
        piece = read_resource_slice(obj)
        dra.slices[piece.name] = piece
    elif kind == "ResourceClaim":
        claim = read_resource_claim(obj)
        dra.claims[claim.key] = claim
    elif kind == "ResourceClaimTemplate":
        template = read_resource_claim_template(obj)
        dra.templates[template.key] = template
    else:
        raise FieldError(f"`kind` {kind} is no Dynamic Resource Allocation kind")


def remove_dra_object(dra: Dra, kind: str, key: str) -> None:
    """Forget one DRA object (`key`: name, or namespace/name for claims and templates)."""
    {"DeviceClass": dra.classes, "ResourceSlice": dra.slices, "ResourceClaim": dra.claims,
     "ResourceClaimTemplate": dra.templates}[kind].pop(key, None)
