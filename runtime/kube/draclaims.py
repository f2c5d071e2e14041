"""Writing a pod's ResourceClaim allocations before its Binding, as kube-scheduler's
DynamicResources PreBind does, and undoing them when the Binding does not happen (its Unreserve).

For each claim a cycle allocated (runtime.engine.rules.dra, `Decisions.claims`):
- a claim allocated now: the finalizer `resource.kubernetes.io/delete-protection` added (so the
  claim is not deleted while devices are allocated to it), then its status written: `allocation`
  (the devices by request, the class's and the claim's configuration for the drivers, the node
  selector) and `reservedFor` the pod;
- a claim allocated already (shared, or by an earlier cycle): the pod added to `reservedFor`.

Every write carries the resourceVersion the cache read (a claim that changed since is not
overwritten: the write fails, the pod is not bound, the next cycle sees the claim as it is). The
cache lays what was written (or is being written) over the claims it watches until the watch shows
it (`ClusterCache.assume_claims`), so the next cycle does not give the same devices to another pod.
Undo removes the pod from `reservedFor`, and the allocation with it when this write made it and no
other pod is reserved.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from runtime.cluster.dra import Allocation, DeviceClass, ResourceClaim
from runtime.cluster.draspec import DRA_API
from runtime.cluster.model import Pod
from runtime.kube.api import ApiError, KubeApi

log = logging.getLogger("policydsl.kube.draclaims")

FINALIZER = "resource.kubernetes.io/delete-protection"


def claim_path(claim: ResourceClaim, status: bool = False) -> str:
    return f"/apis/{DRA_API}/namespaces/{claim.namespace}/resourceclaims/{claim.name}" + ("/status" if status else "")


def _terms(terms) -> dict:
    out = []
    for term in terms:
        exprs = [{"key": e.key, "operator": e.operator, **({"values": list(e.values)} if e.values else {})}
                 for e in term if not e.field]
        fields = [{"key": e.key, "operator": e.operator, "values": list(e.values)} for e in term if e.field]
        out.append({**({"matchExpressions": exprs} if exprs else {}), **({"matchFields": fields} if fields else {})})
    return {"nodeSelectorTerms": out}


def allocation_status(claim: ResourceClaim, allocation: Allocation, classes: Mapping[str, DeviceClass]) -> dict:
    """`status.allocation` as kube's allocator writes it: results, then configuration — each
    class's once, for the requests allocated from it (FromClass), then the claim's (FromClaim) —
    a configuration for every request naming none."""
    results = [{"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device,
                **({"adminAccess": True} if r.admin_access else {})}
               for r in allocation.devices]
    chosen: dict[str, str] = {}              # request name as allocated -> its device class
    for req in claim.spec.requests:
        for sub in req.alternatives:
            name = sub.name if req.exactly is not None else f"{req.name}/{sub.name}"
            if any(r.request == name for r in allocation.devices):
                chosen[name] = sub.device_class
                break
    config: list[dict] = []
    by_class: dict[str, list[str]] = {}
    for name, cls in chosen.items():
        by_class.setdefault(cls, []).append(name)
    for cls_name, names in by_class.items():
        cls = classes.get(cls_name)
        for raw in cls.config if cls is not None else ():
            config.append({"source": "FromClass", "requests": names, **json.loads(raw)})
    for requests, raw in claim.spec.config:
        config.append({"source": "FromClaim", **({"requests": list(requests)} if requests else {}), **json.loads(raw)})
    for entry in config:       # a configuration for every request: "empty means all"
        if len(entry.get("requests", ())) == len(claim.spec.requests):
            entry.pop("requests", None)
    out: dict = {"devices": {"results": results, **({"config": config} if config else {})}}
    if allocation.node_selector is not None:
        out["nodeSelector"] = _terms(allocation.node_selector)
    return out


def _consumer(pod: Pod) -> dict:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def _consumers(claim: ResourceClaim) -> list[dict]:
    """The claim's reservedFor as it was read (apiGroup left out when empty: the core group)."""
    return [{**({"apiGroup": g} if g else {}), "resource": r, "name": n, "uid": u} for g, r, n, u in claim.consumers]


@dataclass
class Written:
    """What one pod's writes did, for undo: the claim as it now stands, and whether the write
    made its allocation."""

    claim: ResourceClaim
    allocated: bool


class ClaimWriter:
    def __init__(self, api: KubeApi, classes: Callable[[], Mapping[str, DeviceClass]],
                 may_write: Callable[[], bool] = lambda: True) -> None:
        self.api = api
        self.classes = classes
        self.may_write = may_write

    def write(self, pod: Pod, claims: Sequence[tuple[ResourceClaim, Allocation]]) -> tuple[list[Written], str | None]:
        """Write the pod's claims in order; stops at the first failure: (what was written, why
        it stopped or None)."""
        done: list[Written] = []
        if not self.may_write():
            return done, "not the leader: claims not written"
        for claim, allocation in claims:
            try:
                done.append(self._write_one(pod, claim, allocation))
            except ApiError as err:
                return done, f"ResourceClaim {claim.key}: {err.status} {err.reason}: {err.message}".rstrip(": ")
        return done, None

    def _write_one(self, pod: Pod, claim: ResourceClaim, allocation: Allocation) -> Written:
        version = claim.version
        reserved = [c for c in _consumers(claim) if c["uid"] != pod.uid]
        allocate = claim.allocation is None
        if allocate and FINALIZER not in claim.finalizers:
            answer = self.api.merge_patch(claim_path(claim), {"metadata": {
                "resourceVersion": version, "finalizers": [*claim.finalizers, FINALIZER]}})
            version = str(((answer or {}).get("metadata") or {}).get("resourceVersion") or "")
        status: dict = {"reservedFor": [*reserved, _consumer(pod)]}
        if allocate:
            status["allocation"] = allocation_status(claim, allocation, self.classes())
        answer = self.api.merge_patch(claim_path(claim, status=True),
                                      {"metadata": {"resourceVersion": version}, "status": status})
        version = str(((answer or {}).get("metadata") or {}).get("resourceVersion") or version)
        now = replace(claim, allocation=claim.allocation or allocation, version=version,
                      reserved_for=tuple(dict.fromkeys((*claim.reserved_for, pod.uid))),
                      consumers=(*(c for c in claim.consumers if c[3] != pod.uid), ("", "pods", pod.name, pod.uid)),
                      finalizers=tuple(dict.fromkeys((*claim.finalizers, FINALIZER))) if allocate else claim.finalizers)
        return Written(now, allocate)

    def undo(self, pod: Pod, written: Sequence[Written]) -> None:
        """Take the pod out of the claims it was written into (latest first); an allocation this
        write made goes too when nobody else is reserved. Failures are logged: the resourceclaim
        controller clears a claim no pod uses."""
        for w in reversed(written):
            claim = w.claim
            others = [c for c in _consumers(claim) if c["uid"] != pod.uid]
            status: dict = {"reservedFor": others or None}
            if w.allocated and not others:
                status["allocation"] = None
            try:
                self.api.merge_patch(claim_path(claim, status=True),
                                     {"metadata": {"resourceVersion": claim.version}, "status": status})
            except ApiError as err:
                log.warning("ResourceClaim %s: undoing the allocation for pod %s failed: %s %s", claim.key,
                            pod.key, err.status, err.reason, extra={"pod": pod.key})


def assumed_claim(claim: ResourceClaim, allocation: Allocation, pod: Pod) -> ResourceClaim:
    """The claim as the writes will leave it: allocated, reserved for the pod."""
    return replace(claim, allocation=claim.allocation or allocation,
                   reserved_for=tuple(dict.fromkeys((*claim.reserved_for, pod.uid))),
                   consumers=(*(c for c in claim.consumers if c[3] != pod.uid), ("", "pods", pod.name, pod.uid)))
