"""Pods read from the API server a template at a time: what a pod's spec decides is read once
for all the pods that share it.

The pods of one workload (a ReplicaSet's, a Job's, a vcjob task's) have one spec but for
`nodeName`, and each pod comes twice or more (listed or ADDED, then MODIFIED after its bind, and
after each status write). Reading a spec (runtime.cluster.podspec, ~40-70 us a pod) was most of a
restart's processor time (100,000 pods listed) and about a quarter of the scheduler's per pod
bound in the side-by-side benchmark's gang workload (bench/pod_read.py measures it).

`PodTemplates.read(obj, priority_classes)` is `runtime.kube.convert.pod_from`, exactly:
- The key is the pod's namespace and its spec without `nodeName` (and without the random name of
  its service account token volume: _shared_part), serialized by orjson (keys in
  the order sent: the reader's results may follow dict order, e.g. the first of two unsupported
  volume types). Equal bytes mean equal JSON values for what a JSON decoder returns (dicts,
  lists, str, int, float, bool, None); a `null` anywhere (orjson writes NaN and Infinity as
  null too) or anything orjson refuses makes the pod read without the cache. The pod's labels
  join the key when the spec names `matchLabelKeys`/`mismatchLabelKeys` (they enter its rules).
- Everything the pod's metadata and status decide (name, uid, labels, annotations and the group
  they name, creation and deletion, phase, nominated node, PodScheduled time, the claims DRA made
  for it), its nodeName, its priority (PriorityClasses change) and the claim names of generic
  ephemeral volumes (they carry the pod's name) are read for each pod, as read_pod reads them.
- A pod the cache cannot read this way, or whose reading raises, is read by convert.pod_from:
  every error is the uncached path's own, and nothing is remembered of a pod that raised.
- Shared between the pods of a template: frozen objects and tuples (rules, terms, tolerations,
  volumes); `requests` and `node_selector` are dicts, so each pod gets its own copy.
Bounded: at most `limit` templates (the oldest dropped first), each with at most VARIANTS label
variants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from runtime.cluster import kubefields as kf
from runtime.cluster.draspec import pod_resource_claims
from runtime.cluster.kubefields import FieldError
from runtime.cluster.model import GROUP_ANNOTATIONS, POD_PENDING, POD_RUNNING, Pod
from runtime.cluster.objects import scheduled_time
from runtime.cluster.podspec import CRITICAL_CLASSES
from runtime.cluster.storagespec import pod_volumes
from runtime.kube import convert

try:  # optional as in runtime/kube/api.py: without it every pod is read in full
    import orjson
except ImportError:  # pragma: no cover
    orjson = None

TEMPLATES = 4096      # distinct pod specs remembered (a restart's 100,000 pods of one bench have 1)
VARIANTS = 64         # label variants of one spec whose rules read labels (matchLabelKeys)
TIMES = 4096         # creation timestamps remembered
_LABEL_KEYS = b'LabelKeys"'     # matchLabelKeys / mismatchLabelKeys as a key of the serialized spec
_NULL = b"null"
_EXACT = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
          if orjson is not None else 0)   # these raise instead of being written as a string or a dict


class PodTemplates:
    def __init__(self, limit: int = TEMPLATES) -> None:
        self.limit = limit
        # (namespace, spec bytes, volumes unnamed) -> {label variant: a pod read in full with that spec, a copy of
        # the one returned (whose holder may set its fields)}
        self._templates: dict[tuple[str, bytes, tuple[int, ...]], dict[bytes, Pod]] = {}
        # creationTimestamp -> seconds: pods made in one second share it (only the API's UTC
        # form, "...Z", whose reading depends on nothing else; only readings that succeeded).
        self._times: dict[str, float] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._templates)

    def clear(self) -> None:
        self._templates.clear()
        self._times.clear()

    def read(self, obj: dict[str, Any], priority_classes: Mapping[str, int]) -> Pod:
        """convert.pod_from(obj, priority_classes), through the template of obj's spec when known."""
        key = _template_key(obj)
        if key is None:
            return convert.pod_from(obj, priority_classes)
        namespace_spec, variant = key
        variants = self._templates.get(namespace_spec)
        proto = variants.get(variant) if variants is not None else None
        if proto is not None:
            try:
                pod = _from_template(proto, obj, priority_classes, self._times)
            except FieldError:   # the uncached path says what is wrong, as it would have
                pod = None
            if pod is not None:
                self.hits += 1
                return pod
        pod = convert.pod_from(obj, priority_classes)   # raises: nothing remembered
        self.misses += 1
        if variants is None:
            if len(self._templates) >= self.limit:
                del self._templates[next(iter(self._templates))]
            variants = self._templates[namespace_spec] = {}
        elif len(variants) >= VARIANTS:
            variants.clear()
        variants[variant] = replace(pod, requests=dict(pod.requests), node_selector=dict(pod.node_selector),
                                    vgpu_containers=tuple(dict(asks) for asks in pod.vgpu_containers))
        return pod


def _template_key(obj: Any) -> tuple[tuple[str, bytes, tuple[int, ...]], bytes] | None:
    """((namespace, spec bytes, volumes unnamed), label variant), or None: read it in full."""
    if orjson is None or type(obj) is not dict:
        return None
    meta, spec = obj.get("metadata"), obj.get("spec")
    if type(meta) is not dict or type(spec) is not dict:
        return None
    namespace = meta.get("namespace") or "default"
    if type(namespace) is not str:
        return None
    spec, unnamed = _shared_part(spec)
    body = _exact_json(spec)
    if body is None:
        return None
    variant = b""
    if _LABEL_KEYS in body:     # its rules read the pod's labels
        labels = meta.get("labels")
        variant = b"{}" if labels is None else _exact_json(labels)     # read_pod reads None as {}
        if variant is None:
            return None
    return (namespace, body, unnamed), variant


def _shared_part(spec: dict) -> tuple[dict, tuple[int, ...]]:
    """The spec without what differs pod by pod but decides nothing in the Pod: its nodeName (read
    for each pod), the name of a volume that is only `projected` (the service account token
    volume the API server adds to every pod, `kube-api-access-<random>`: read_pod only checks
    the name is a non-empty string) and the containers' `volumeMounts` (that name again; read
    by nothing). The indexes of the volumes whose name was left out come with it, so a volume
    without a name (an error) never shares a key with one whose name was left out."""
    volumes, unnamed = spec.get("volumes"), ()
    if "nodeName" not in spec and not volumes:
        return spec, unnamed
    spec = spec.copy()
    spec.pop("nodeName", None)
    if type(volumes) is list:
        unnamed = tuple(i for i, v in enumerate(volumes) if type(v) is dict and len(v) == 2 and "projected" in v
                        and type(v.get("name")) is str and v["name"])
        if unnamed:
            spec["volumes"] = [{"projected": v["projected"]} if i in unnamed else v for i, v in enumerate(volumes)]
            for kind in ("containers", "initContainers"):
                containers = spec.get(kind)
                if type(containers) is list:
                    spec[kind] = [_without_mounts(c) for c in containers]
    return spec, unnamed


def _without_mounts(container: Any) -> Any:
    if type(container) is dict and "volumeMounts" in container:
        container = container.copy()
        del container["volumeMounts"]
    return container


def _exact_json(value: Any) -> bytes | None:
    """`value` as JSON bytes that no other decoded JSON value shares, or None."""
    try:
        body = orjson.dumps(value, option=_EXACT)
    except TypeError:   # orjson.JSONEncodeError: a value it does not write as JSON
        return None
    return None if _NULL in body else body


def _from_template(proto: Pod, obj: dict, priority_classes: Mapping[str, int], times: dict[str, float]) -> Pod | None:
    """The pod obj describes, its spec's parts taken from `proto` (a pod read in full with the same
    namespace, spec but nodeName, and labels where its rules read them); None: read it in full.
    What read_pod reads of metadata and status, in read_pod's order (the first problem raises)."""
    meta, spec = obj["metadata"], obj["spec"]
    name = meta.get("name")
    if not name or type(name) is not str:
        return None
    status = obj.get("status")
    if status is None:
        status = {}
    elif type(status) is not dict:
        return None
    namespace = proto.namespace
    annotations = kf.strings(meta.get("annotations"), "metadata.annotations")
    labels = kf.strings(meta.get("labels"), "metadata.labels")
    priority = spec.get("priority")
    priority_class = proto.priority_class
    if priority is None and priority_class is not None:
        priority = priority_classes.get(priority_class, CRITICAL_CLASSES.get(priority_class))
    volumes = proto.volumes
    if volumes is not None and any(claim.ephemeral for claim in volumes):   # named after the pod
        volumes = pod_volumes(spec, name)[0]
    node_name = spec.get("nodeName") or None
    resource_claims = proto.resource_claims
    uid = kf.uid_of(meta, namespace, name)
    stamp = meta.get("creationTimestamp")
    creation = times.get(stamp) if type(stamp) is str else None
    if creation is None:
        creation = kf.timestamp(meta)
        if type(stamp) is str and stamp.endswith("Z"):
            if len(times) >= TIMES:
                times.clear()
            times[stamp] = creation
    if resource_claims is not None:     # the claims made for it: status.resourceClaimStatuses
        resource_claims = pod_resource_claims(spec, status)
    group = None
    for annotation in GROUP_ANNOTATIONS:    # the first set, as read_pod takes it
        if annotations.get(annotation):
            group = annotations[annotation]
            break
    return Pod(
        namespace=namespace, name=name, requests=dict(proto.requests), uid=uid, node_name=node_name,
        phase=str(status.get("phase") or (POD_RUNNING if node_name else POD_PENDING)),
        scheduler_name=proto.scheduler_name,
        group=group,
        priority_class=priority_class,
        priority=None if priority is None else kf.integer(priority, "spec.priority", 0),
        node_selector=dict(proto.node_selector), required_terms=proto.required_terms,
        preferred_terms=proto.preferred_terms, tolerations=proto.tolerations, annotations=annotations, labels=labels,
        creation=creation, releasing=bool(meta.get("deletionTimestamp")), rules=proto.rules,
        scheduling_gates=proto.scheduling_gates, preemption_policy=proto.preemption_policy,
        unsupported=proto.unsupported, volumes=volumes, resource_claims=resource_claims,
        nominated_node=str(status.get("nominatedNodeName") or "") or None, numa_cpus=proto.numa_cpus,
        images=proto.images,
        vgpu_containers=proto.vgpu_containers and tuple(dict(asks) for asks in proto.vgpu_containers),
        scheduled_at=scheduled_time(obj),
    )
