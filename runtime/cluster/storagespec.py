"""Storage objects (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode) and a pod's
volumes as the scheduler reads them from Kubernetes dicts; each problem a FieldError naming its
field, which runtime.cluster.objects turns into a located ObjectProblem.

A pod's volumes: `persistentVolumeClaim` and generic `ephemeral` volumes are claims the
scheduler evaluates (runtime.cluster.storage); the volume types below need nothing of the scheduler.
Any other type — in-tree disks whose conflicts and attach limits kube-scheduler checks
(gcePersistentDisk, awsElasticBlockStore, rbd, iscsi, ...) or one this reader does not know —
is named in `Pod.unsupported`, so the pod waits rather than be placed as if it were absent.
"""

from __future__ import annotations

from typing import Any

from runtime.cluster import kubefields as kf
from runtime.cluster.kubefields import FieldError
from runtime.cluster.selectors import MatchExpression, SelectorTerm
from runtime.cluster.storage import (
    ACCESS_MODES, BETA_CLASS_ANNOTATION, CLAIM_BOUND, DEFAULT_CLASS_ANNOTATIONS, IMMEDIATE, MIGRATED_DRIVERS,
    PV_AVAILABLE, VOLUME_MODES, WAIT_FOR_FIRST_CONSUMER, ClaimRef, CSINode, PersistentVolume, PersistentVolumeClaim,
    PodClaim, StorageClass,
)

# Volume types that ask nothing of the scheduler: the kubelet mounts them wherever the pod runs.
PLAIN_VOLUME_TYPES = frozenset({
    "emptyDir", "configMap", "secret", "downwardAPI", "projected", "hostPath", "nfs", "csi", "image", "gitRepo",
    "cephfs", "glusterfs", "fc", "flexVolume", "azureFile", "quobyte", "storageos", "flocker",
})
CLAIM_TYPES = ("persistentVolumeClaim", "ephemeral")
STORAGE = "storage"


def pod_volumes(spec: dict, pod_name: str) -> tuple[tuple[PodClaim, ...] | None, str | None]:
    """The claims of a pod's volumes (None when it has none), and the first volume field the
    scheduler does not evaluate (`spec.volumes[2].iscsi`), if any."""
    claims: list[PodClaim] = []
    for i, vol in enumerate(kf.listing(spec, "volumes")):
        where = f"spec.volumes[{i}]"
        if not isinstance(vol, dict):
            raise FieldError(f"`{where}` must be a mapping")
        name = vol.get("name")
        if not name or not isinstance(name, str):
            raise FieldError(f"`{where}.name` is missing")
        types = [k for k in vol if k != "name"]
        if "persistentVolumeClaim" in vol:
            source = kf.mapping(vol, "persistentVolumeClaim")
            claim = source.get("claimName")
            if not claim or not isinstance(claim, str):
                raise FieldError(f"`{where}.persistentVolumeClaim.claimName` is missing")
            claims.append(PodClaim(name, claim))
        elif "ephemeral" in vol:
            kf.mapping(vol, "ephemeral")
            claims.append(PodClaim(name, f"{pod_name}-{name}", ephemeral=True))
        else:
            odd = next((t for t in types if t not in PLAIN_VOLUME_TYPES), None)
            if odd is not None:
                return None, f"{where}.{odd}"
    return (tuple(claims) if claims else None), None


def _access_modes(spec: dict, where: str) -> tuple[str, ...]:
    modes = []
    for i, mode in enumerate(kf.listing(spec, "accessModes")):
        if mode not in ACCESS_MODES:
            raise FieldError(f"`{where}.accessModes[{i}]` must be one of {', '.join(ACCESS_MODES)}, found `{mode}`")
        modes.append(str(mode))
    return tuple(modes)


def _volume_mode(spec: dict, where: str) -> str:
    mode = str(spec.get("volumeMode") or "Filesystem")
    if mode not in VOLUME_MODES:
        raise FieldError(f"`{where}.volumeMode` must be Filesystem or Block, found `{mode}`")
    return mode


def _storage_bytes(values: Any, where: str, required: bool) -> int:
    amounts = kf.resources(values, where)
    if STORAGE not in amounts:
        if required:
            raise FieldError(f"missing `{where}.storage`")
        return 0
    return amounts[STORAGE]


def read_volume(obj: dict) -> PersistentVolume:

    _, name = kf.name_of(obj)
    meta = obj["metadata"]
    spec = kf.mapping(obj, "spec", required=True)
    status = kf.mapping(obj, "status")
    capacity = _storage_bytes(spec.get("capacity"), "spec.capacity", required=True)
    affinity = None
    required = kf.mapping(kf.mapping(spec, "nodeAffinity"), "required")
    if required:
        where = "spec.nodeAffinity.required.nodeSelectorTerms"
        affinity = kf.node_selector_terms(kf.listing(required, "nodeSelectorTerms"), where)
        if not affinity:
            raise FieldError(f"`{where}` must not be empty")
    ref = kf.mapping(spec, "claimRef")
    claim_ref = None
    if ref:
        if not ref.get("name"):
            raise FieldError("`spec.claimRef.name` is missing")
        claim_ref = ClaimRef(str(ref.get("namespace") or "default"), str(ref["name"]), str(ref.get("uid") or ""))
    annotations = kf.strings(meta.get("annotations"), "metadata.annotations")
    driver, handle = "", ""
    csi = kf.mapping(spec, "csi")
    if csi:
        driver, handle = str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        if not driver or not handle:
            raise FieldError("`spec.csi` needs `driver` and `volumeHandle`")
    else:
        for source, (migrated, field) in MIGRATED_DRIVERS.items():
            raw = kf.mapping(spec, source)
            if raw:
                driver, handle = migrated, str(raw.get(field) or "")
                break
    phase = str(status.get("phase") or (CLAIM_BOUND if claim_ref is not None else PV_AVAILABLE))
    return PersistentVolume(
        name=name, capacity=capacity, access_modes=_access_modes(spec, "spec"),
        storage_class=str(annotations.get(BETA_CLASS_ANNOTATION) or spec.get("storageClassName") or ""),
        volume_mode=_volume_mode(spec, "spec"), node_affinity=affinity, claim_ref=claim_ref, phase=phase,
        labels=kf.strings(meta.get("labels"), "metadata.labels"), csi_driver=driver, volume_handle=handle,
        deleting=bool(meta.get("deletionTimestamp")), uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def read_claim(obj: dict, default_class: str | None = None) -> PersistentVolumeClaim:
    """A claim; one that names no class (`storageClassName` absent, not "") gets `default_class`,
    as the API server's DefaultStorageClass admission gives it."""

    namespace, name = kf.name_of(obj)
    meta = obj["metadata"]
    spec = kf.mapping(obj, "spec", required=True)
    status = kf.mapping(obj, "status")
    annotations = kf.strings(meta.get("annotations"), "metadata.annotations")
    if BETA_CLASS_ANNOTATION in annotations:
        storage_class: str | None = annotations[BETA_CLASS_ANNOTATION] or None
    elif "storageClassName" in spec and spec["storageClassName"] is not None:
        storage_class = str(spec["storageClassName"]) or None
    else:
        storage_class = default_class
    resources = kf.mapping(spec, "resources")
    owner = next((o for o in kf.listing(meta, "ownerReferences") if isinstance(o, dict) and o.get("controller")),
                 None)
    return PersistentVolumeClaim(
        namespace=namespace, name=name, uid=kf.uid_of(meta, namespace, name), storage_class=storage_class,
        volume_name=str(spec.get("volumeName") or ""), phase=str(status.get("phase") or "Pending"),
        access_modes=_access_modes(spec, "spec"),
        request=_storage_bytes(resources.get("requests"), "spec.resources.requests", required=False),
        volume_mode=_volume_mode(spec, "spec"), selector=kf.label_selector(spec.get("selector"), "spec.selector"),
        annotations=annotations, deleting=bool(meta.get("deletionTimestamp")),
        owner_uid=str(owner.get("uid") or "") if owner else "",
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def read_storage_class(obj: dict) -> StorageClass:
    _, name = kf.name_of(obj)
    meta = obj["metadata"]
    if not obj.get("provisioner") or not isinstance(obj.get("provisioner"), str):
        raise FieldError("missing `provisioner`")
    mode = str(obj.get("volumeBindingMode") or IMMEDIATE)
    if mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
        raise FieldError(f"`volumeBindingMode` must be {IMMEDIATE} or {WAIT_FOR_FIRST_CONSUMER}, found `{mode}`")
    terms: list[SelectorTerm] = []
    for i, term in enumerate(kf.listing(obj, "allowedTopologies")):
        where = f"allowedTopologies[{i}]"
        if not isinstance(term, dict):
            raise FieldError(f"`{where}` must be a mapping")
        exprs = []
        for k, expr in enumerate(kf.listing(term, "matchLabelExpressions")):
            at = f"{where}.matchLabelExpressions[{k}]"
            if not isinstance(expr, dict) or not expr.get("key"):
                raise FieldError(f"`{at}.key` is missing")
            values = tuple(str(v) for v in kf.listing(expr, "values"))
            if not values:
                raise FieldError(f"`{at}.values` must not be empty")
            exprs.append(MatchExpression(str(expr["key"]), "In", values))
        terms.append(tuple(exprs))
    annotations = kf.strings(meta.get("annotations"), "metadata.annotations")
    return StorageClass(name=name, provisioner=str(obj["provisioner"]), binding_mode=mode,
                        allowed_topologies=tuple(terms),
                        default=any(annotations.get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS))


def read_csinode(obj: dict) -> CSINode:
    _, name = kf.name_of(obj)
    spec = kf.mapping(obj, "spec")
    limits: dict[str, int] = {}
    drivers = []
    for i, raw in enumerate(kf.listing(spec, "drivers")):
        where = f"spec.drivers[{i}]"
        if not isinstance(raw, dict) or not raw.get("name"):
            raise FieldError(f"`{where}.name` is missing")
        drivers.append(str(raw["name"]))
        allocatable = kf.mapping(raw, "allocatable")
        if allocatable.get("count") is not None:
            count = kf.integer(allocatable.get("count"), f"{where}.allocatable.count", 0)
            if count < 0:
                raise FieldError(f"`{where}.allocatable.count` must not be negative")
            limits[str(raw["name"])] = count
    return CSINode(name=name, limits=limits, drivers=tuple(drivers))
