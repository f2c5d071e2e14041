"""Kubernetes objects (dicts from YAML/JSON files or the API) to the cluster model.

Reads Nodes, Pods (their spec: runtime.cluster.podspec), PodGroups and Queues
(`scheduling.volcano.sh/v1beta1`), PriorityClasses, Namespaces, and the storage a pod's claims
reach (PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes: runtime.cluster.storagespec),
from multi-document YAML, JSON, `List` objects (what `kubectl get -o yaml` prints) or a folder
of such files. Every problem names the object (and file) it is in; all
problems of a load are reported together as one `ObjectError`, never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from runtime.cluster import kubefields as kf
from runtime.cluster.kubefields import FieldError
from runtime.cluster.nodeusage import node_metrics_usage
from runtime.cluster.model import DEQUEUE_STRATEGIES, NodeGroupAffinity
from runtime.cluster.model import GO_TRUE, PREEMPTABLE_ANNOTATION
from runtime.cluster.model import (
    DEFAULT_MAX_PODS, JOB_ALLOCATED_HYPERNODE, MAX_NODE_QUANTITY, NAMESPACE_NAME_LABEL, ClusterState, Condition,
    DisruptionBudget, NetworkTopology, Node, PodGroup, QueueObject, ResourceQuota, SubGroupPolicy, Taint,
)
from runtime.cluster.draspec import DRA_KINDS, add_dra_object
from runtime.cluster.podspec import read_pod
from runtime.cluster.devices import vgpu_container_asks, vgpu_container_problem
from runtime.cluster.storagespec import read_claim, read_csinode, read_storage_class, read_volume
from runtime.cluster.numa import read_numatopology
from runtime.cluster.topology import read_hypernode

VOLCANO_GROUP = "scheduling.volcano.sh"
KINDS = ("Node", "Pod", "PodGroup", "Queue", "PriorityClass", "Namespace", "PersistentVolume",
         "PersistentVolumeClaim", "StorageClass", "CSINode")
# Read before the rest: pods resolve their priority against PriorityClasses, claims that name no
# class take the default StorageClass.
_FIRST_KINDS = {"PriorityClass": 0, "StorageClass": 0}
# Read after the rest: a NodeMetrics' load is a share of its Node's allocatable.
_LAST_KINDS = {"NodeMetrics": 2}
FILE_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class ObjectProblem:
    source: str            # file path, or "<input>"
    kind: str
    name: str              # namespace/name for namespaced objects
    message: str

    def __str__(self) -> str:
        what = f"{self.kind} {self.name}" if self.name else (self.kind or "object")
        return f"{self.source}: {what}: {self.message}"


class ObjectError(Exception):
    """One or more objects could not be read; `problems` names each one."""

    def __init__(self, problems: list[ObjectProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def problems_text(err: ObjectError) -> str:
    """One line per problem: `file: Kind ns/name: message`, or `file: message` for the file."""
    return "\n".join(str(p) if p.kind or p.name else f"{p.source}: {p.message}" for p in err.problems)


# --- entry points ------------------------------------------------------------------------

def read_documents(path: str | Path) -> list[tuple[str, Any]]:
    """Every document of a file, or of the YAML/JSON files of a folder (sorted, hidden skipped)."""
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.suffix in FILE_SUFFIXES and p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(root).parts))
    elif root.exists():
        files = [root]
    else:
        raise ObjectError([ObjectProblem(str(root), "", "", "no such file or folder")])
    documents: list[tuple[str, Any]] = []
    problems: list[ObjectProblem] = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            problems.append(ObjectProblem(str(file), "", "", f"cannot read: {getattr(err, 'strerror', None) or err}"))
            continue
        try:
            documents.extend((str(file), doc) for doc in parse_documents(text, file.suffix))
        except ValueError as err:
            problems.append(ObjectProblem(str(file), "", "", str(err)))
    if problems:
        raise ObjectError(problems)
    return documents


def load_path(path: str | Path) -> ClusterState:
    """A ClusterState from a file or a folder of files (sorted; hidden folders skipped)."""
    return load_objects(read_documents(path))


def load_text(text: str, source: str = "<input>") -> ClusterState:
    try:
        documents = parse_documents(text, Path(source).suffix)
    except ValueError as err:
        raise ObjectError([ObjectProblem(source, "", "", str(err))]) from None
    return load_objects((source, doc) for doc in documents)


def read_object(obj: dict, state: ClusterState, source: str = "<api>") -> None:
    """Add one object dict (with `kind`) to `state`, without load_objects' cross-object checks:
    a watch delivers objects one at a time and in any order. Raises ObjectError naming it."""
    kind = obj.get("kind", "") if isinstance(obj, dict) else ""
    reader = _READERS.get(kind)
    if reader is None:
        raise ObjectError([ObjectProblem(source, str(kind) or "object", "", f"unknown kind `{kind}`")])
    try:
        reader(obj, state)
    except FieldError as err:
        raise ObjectError([ObjectProblem(source, kind, _display_name(obj), str(err))]) from None


def parse_documents(text: str, suffix: str = "") -> list[Any]:
    """YAML (multi-document) or JSON text to documents; raises ValueError with the position."""
    if suffix == ".json":
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as err:
            raise ValueError(f"invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ValueError(f"invalid YAML{where}: {problem}") from None


def load_objects(documents: Iterable[tuple[str, Any]], state: ClusterState | None = None) -> ClusterState:
    """Add (source, object dict) pairs to a state (a new one by default). Lists are flattened."""
    state = state or ClusterState()
    if state.resource_quotas is None:     # read from objects: a namespace without one has none
        state.resource_quotas = {}
    if state.disruption_budgets is None:
        state.disruption_budgets = {}
    problems: list[ObjectProblem] = []
    flat: list[tuple[str, Any]] = []
    for source, doc in documents:
        _flatten(source, doc, flat, problems)
    flat.sort(key=lambda item: (lambda kind: _FIRST_KINDS.get(kind, _LAST_KINDS.get(kind, 1)))(
        item[1].get("kind") if isinstance(item[1], dict) else None))
    for source, obj in flat:
        kind = obj.get("kind", "")
        name = _display_name(obj)
        try:
            _READERS[kind](obj, state)
        except FieldError as err:
            problems.append(ObjectProblem(source, kind, name, str(err)))
        except KeyError:
            known = ", ".join(KINDS)
            problems.append(ObjectProblem(source, str(kind) or "object", name,
                                          f"unknown kind `{kind}` (known: {known}, List)" if kind else
                                          "missing `kind`"))
    problems.extend(_check_references(state, {_object_key(o): s for s, o in flat}))
    if problems:
        raise ObjectError(problems)
    return state


def _flatten(source: str, doc: Any, out: list, problems: list[ObjectProblem]) -> None:
    if not isinstance(doc, dict):
        problems.append(ObjectProblem(source, "", "", f"expected an object, found {type(doc).__name__}"))
        return
    if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
        items = doc.get("items") or []
        if not isinstance(items, list):
            problems.append(ObjectProblem(source, "List", "", "`items` must be a list"))
            return
        for item in items:
            _flatten(source, item, out, problems)
        return
    out.append((source, doc))


def _display_name(obj: dict) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = str(meta.get("name", "") or "")
    if obj.get("kind") in ("Pod", "PodGroup", "PersistentVolumeClaim") and name:
        return f"{meta.get('namespace') or 'default'}/{name}"
    return name


def _object_key(obj: dict) -> tuple[str, str]:
    return (str(obj.get("kind", "")), _display_name(obj))


# --- readers ------------------------------------------------------------------------------

def _read_node(obj: dict, state: ClusterState) -> None:
    _, name = kf.name_of(obj)
    meta = obj["metadata"]
    spec = kf.mapping(obj, "spec")
    status = kf.mapping(obj, "status")
    allocatable = kf.resources(status.get("allocatable") or status.get("capacity"), "status.allocatable")
    if not allocatable:
        raise FieldError("missing `status.allocatable` (or `status.capacity`)")
    allocatable.setdefault("pods", DEFAULT_MAX_PODS)
    for res, amount in allocatable.items():
        if amount > MAX_NODE_QUANTITY:
            raise FieldError(f"`status.allocatable.{res}`: {amount} is more than a node can offer "
                             f"(at most {MAX_NODE_QUANTITY} base units, 2^50)")
    taints = []
    for t in kf.listing(spec, "taints"):
        if not isinstance(t, dict) or not t.get("key") or t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise FieldError(f"`spec.taints`: bad taint {t!r} (needs key and effect NoSchedule|PreferNoSchedule|NoExecute)")
        taints.append(Taint(str(t["key"]), str(t.get("value") or ""), t["effect"]))
    state.add_node(Node(
        name=name, allocatable=allocatable, labels=kf.strings(meta.get("labels"), "metadata.labels"),
        taints=tuple(taints), unschedulable=bool(spec.get("unschedulable", False)),
        annotations=kf.strings(meta.get("annotations"), "metadata.annotations"), images=_node_images(status),
    ))


def _node_images(status: dict) -> tuple[tuple[tuple[str, ...], int], ...]:
    """status.images: (names, sizeBytes) each; an entry without names names nothing and is skipped."""
    out = []
    for i, image in enumerate(kf.listing(status, "images")):
        if not isinstance(image, dict):
            raise FieldError(f"`status.images[{i}]` must be a mapping with names and sizeBytes")
        names = image.get("names") or []
        if not isinstance(names, list):
            raise FieldError(f"`status.images[{i}].names` must be a list of image names")
        if names:
            out.append((tuple(str(n) for n in names),
                        kf.integer(image.get("sizeBytes", 0), f"status.images[{i}].sizeBytes", 0)))
    return tuple(out)


def _container_images(obj: dict) -> tuple[str, ...]:
    """The image of each init container, then of each container (kube-scheduler's ImageLocality order;
    "" for a container naming none, which still counts in the score's scale)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    return tuple(str(c.get("image") or "") for kind in ("initContainers", "containers")
                 for c in (spec.get(kind) or []) if isinstance(c, dict))


def _read_pod(obj: dict, state: ClusterState) -> None:
    pod = read_pod(obj, state.priority_classes)
    pod.images = _container_images(obj)
    pod.unsupported = pod.unsupported or vgpu_container_problem(obj)
    pod.vgpu_containers = vgpu_container_asks(obj)
    pod.scheduled_at = scheduled_time(obj)
    state.add_pod(pod)


def scheduled_time(obj: dict) -> float | None:
    """When the pod's PodScheduled condition turned True (the cdp plugin's cooldown start), or None."""
    status = obj.get("status")
    for c in (status.get("conditions") or []) if isinstance(status, dict) else []:
        if isinstance(c, dict) and c.get("type") == "PodScheduled":
            if c.get("status") != "True" or c.get("lastTransitionTime") is None:
                return None
            try:
                return kf.timestamp({"creationTimestamp": c["lastTransitionTime"]})
            except FieldError:
                raise FieldError("`status.conditions[PodScheduled].lastTransitionTime` is not a timestamp: "
                                 f"`{c['lastTransitionTime']}`") from None
    return None


# A PodGroup's sla waiting time annotations, in the order Volcano reads them (api/job_info.go).
SLA_WAITING_TIME_KEYS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")
# A PodGroup's disruption budget annotations (min available first, as Volcano reads them: tdm).
JOB_BUDGET_KEYS = ("volcano.sh/jdb-min-available", "volcano.sh/jdb-max-unavailable")


def job_preemptable(annotations: dict[str, str], labels: dict[str, str]) -> bool:
    """Volcano's JobInfo.Preemptable: volcano.sh/preemptable, the annotation else the label; no when
    unset or not a boolean (api/job_info.go extractPreemptable)."""
    value = annotations.get(PREEMPTABLE_ANNOTATION, labels.get(PREEMPTABLE_ANNOTATION))
    return value is not None and value in GO_TRUE
# A PodGroup's task-topology annotations, in the order Volcano's plugin reads them.
TASK_TOPOLOGY_KEYS = ("volcano.sh/task-topology-affinity", "volcano.sh/task-topology-anti-affinity",
                      "volcano.sh/task-topology-task-order")
# PodGroup spec fields the scheduler reads but does not evaluate yet (runtime/README.md).
PODGROUP_NOT_EVALUATED: tuple[str, ...] = ()
# The fields of a spec.subGroupPolicy entry this scheduler evaluates (Volcano v1.14's
# SubGroupPolicySpec); any other makes the group wait, naming it.
SUBGROUP_FIELDS = ("name", "subGroupSize", "minSubGroups", "labelSelector", "matchLabelKeys", "networkTopology")


def read_network_topology(value: Any, where: str = "spec.networkTopology") -> NetworkTopology | None:
    """`spec.networkTopology` (or a sub-group's, at `where`): None when absent or empty (an empty
    request asks nothing)."""
    if not value:
        return None
    if not isinstance(value, dict):
        raise FieldError(f"`{where}` must be a mapping, found {value!r}")
    unknown = sorted(set(value) - {"mode", "highestTierAllowed", "highestTierName"})
    if unknown:
        raise FieldError(f"`{where}.{unknown[0]}` is not a field of networkTopology "
                         "(mode, highestTierAllowed, highestTierName)")
    mode = value.get("mode") or "hard"
    if mode not in ("hard", "soft"):
        raise FieldError(f"`{where}.mode` must be hard or soft, found {mode!r}")
    tier = value.get("highestTierAllowed")
    if tier is not None:
        tier = kf.integer(tier, f"{where}.highestTierAllowed", 1)
        if tier < 0:
            raise FieldError(f"`{where}.highestTierAllowed` must not be negative, found {tier}")
    name = value.get("highestTierName")
    if name is not None and (not isinstance(name, str) or not name):
        raise FieldError(f"`{where}.highestTierName` must be a non-empty string, found {name!r}")
    if tier is not None and name is not None:
        raise FieldError(f"`{where}` sets both highestTierAllowed and highestTierName: set one")
    return NetworkTopology(mode=mode, highest_tier=tier, highest_tier_name=name)


def read_sub_group_policy(value: Any) -> tuple[tuple[SubGroupPolicy, ...], str | None]:
    """`spec.subGroupPolicy`: the policies in order, and the first field not evaluated
    (`spec.subGroupPolicy[i].<field>`, the group then waits naming it) or None."""
    if value is None:
        return (), None
    if not isinstance(value, list):
        raise FieldError(f"`spec.subGroupPolicy` must be a list, found {type(value).__name__}")
    policies: list[SubGroupPolicy] = []
    unsupported: str | None = None
    for i, raw in enumerate(value):
        where = f"spec.subGroupPolicy[{i}]"
        if not isinstance(raw, dict):
            raise FieldError(f"`{where}` must be a mapping, found {type(raw).__name__}")
        unknown = sorted(k for k in raw if k not in SUBGROUP_FIELDS and raw[k] not in (None, "", [], {}))
        if unknown and unsupported is None:
            unsupported = f"{where}.{unknown[0]}"
        name = raw.get("name") or ""
        if not isinstance(name, str):
            raise FieldError(f"`{where}.name` must be a string, found {name!r}")
        size = kf.integer(raw.get("subGroupSize"), f"{where}.subGroupSize", 1)
        if size < 1:
            raise FieldError(f"`{where}.subGroupSize` must be at least 1, found {size}")
        min_groups = kf.integer(raw.get("minSubGroups"), f"{where}.minSubGroups", 0)
        if min_groups < 0:
            raise FieldError(f"`{where}.minSubGroups` must not be negative, found {min_groups}")
        keys = raw.get("matchLabelKeys") or []
        if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
            raise FieldError(f"`{where}.matchLabelKeys` must be a list of label keys, found {keys!r}")
        policies.append(SubGroupPolicy(
            name=name, size=size, min_groups=min_groups,
            selector=kf.label_selector(raw.get("labelSelector"), f"{where}.labelSelector"),
            match_label_keys=tuple(keys),
            network_topology=read_network_topology(raw.get("networkTopology"), f"{where}.networkTopology"),
        ))
    return tuple(policies), unsupported


def _read_podgroup(obj: dict, state: ClusterState) -> None:
    _check_group(obj)
    namespace, name = kf.name_of(obj)
    meta = obj["metadata"]
    spec = kf.mapping(obj, "spec")
    status = kf.mapping(obj, "status")
    min_member = kf.integer(spec.get("minMember"), "spec.minMember", 1)
    if min_member < 0:
        raise FieldError("`spec.minMember` must not be negative")
    min_task = spec.get("minTaskMember") or {}
    if not isinstance(min_task, dict):
        raise FieldError("`spec.minTaskMember` must be a mapping")
    conditions = [Condition(str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason", "")),
                            str(c.get("message", ""))) for c in kf.listing(status, "conditions") if isinstance(c, dict)]
    preemptable = spec.get("preemptable")
    if preemptable is not None and not isinstance(preemptable, bool):
        raise FieldError(f"`spec.preemptable` must be true or false, found {preemptable!r}")
    # A field not evaluated makes the group wait, naming it, rather than be placed as if it asked
    # nothing. Network topology and sub-groups are evaluated (actions/topology.py).
    sub_groups, sub_unsupported = read_sub_group_policy(spec.get("subGroupPolicy"))
    unsupported = next((f"spec.{name}" for name in PODGROUP_NOT_EVALUATED if spec.get(name)), None) or sub_unsupported
    annotations = kf.strings(meta.get("annotations"), "metadata.annotations")
    state.add_podgroup(PodGroup(
        namespace=namespace, name=name, min_member=min_member,
        min_resources=kf.resources(spec["minResources"], "spec.minResources") if spec.get("minResources") else None,
        min_task_member={str(k): kf.integer(v, f"spec.minTaskMember.{k}", 0) for k, v in min_task.items()},
        queue=str(spec.get("queue") or "default"), priority_class=spec.get("priorityClassName"),
        phase=str(status.get("phase") or "Pending"), conditions=conditions, uid=kf.uid_of(meta, namespace, name),
        creation=kf.timestamp(meta), preemptable=preemptable, unsupported=unsupported,
        network_topology=read_network_topology(spec.get("networkTopology")), sub_groups=sub_groups,
        allocated_hypernode=annotations.get(JOB_ALLOCATED_HYPERNODE, ""),
        sla_waiting_times=tuple(annotations[k] for k in SLA_WAITING_TIME_KEYS if k in annotations),
        job_preemptable=job_preemptable(annotations, kf.strings(meta.get("labels"), "metadata.labels")),
        budget=(annotations.get(JOB_BUDGET_KEYS[0], ""), annotations.get(JOB_BUDGET_KEYS[1], "")),
        task_topology=tuple((k, annotations[k]) for k in TASK_TOPOLOGY_KEYS if k in annotations),
    ))


def _read_queue(obj: dict, state: ClusterState) -> None:
    _check_group(obj)
    _, name = kf.name_of(obj)
    spec = kf.mapping(obj, "spec")
    status = kf.mapping(obj, "status")
    weight = kf.integer(spec.get("weight"), "spec.weight", 1)
    # 0 is Volcano's scheduler's too (its own tests build such queues): shared nothing out but
    # its guarantee. Its CRD schema refuses 0 on a cluster, so the scheduler says so in a log
    # line and an Event on the Queue, and its jobs' reasons show the weight (kube/scheduler.py).
    if not 0 <= weight <= 65535:
        raise FieldError(f"`spec.weight` must be 0..65535, found {weight}")
    state_name = str(status.get("state") or spec.get("state") or "Open").lower()
    state.add_queue(QueueObject(
        name=name, weight=weight,
        capability=kf.resources(spec["capability"], "spec.capability") if spec.get("capability") else None,
        guarantee=kf.resources(kf.mapping(spec, "guarantee").get("resource"), "spec.guarantee.resource") or None,
        deserved=kf.resources(spec["deserved"], "spec.deserved") if spec.get("deserved") else None,
        reclaimable=spec.get("reclaimable") is not False, priority=kf.integer(spec.get("priority"), "spec.priority", 0),
        parent=spec.get("parent") or None, state="open" if state_name == "open" else "closed",
        annotations=kf.strings(obj["metadata"].get("annotations"), "metadata.annotations"),
        uid=str(obj["metadata"].get("uid") or ""),
        dequeue=read_dequeue_strategy(spec.get("dequeueStrategy")),
        affinity=read_queue_affinity(spec.get("affinity")),
    ))


def read_dequeue_strategy(value: Any) -> str:
    """`spec.dequeueStrategy`; unset or empty is Volcano's default, traverse."""
    if value in (None, ""):
        return "traverse"
    if value not in DEQUEUE_STRATEGIES:
        raise FieldError(f"`spec.dequeueStrategy` must be one of {', '.join(DEQUEUE_STRATEGIES)}, found {value!r}")
    return str(value)


AFFINITY_FIELDS = {"nodeGroupAffinity": ("required", "preferred"), "nodeGroupAntiAffinity": ("anti_required",
                                                                                              "anti_preferred")}
AFFINITY_TERMS = ("requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution")


def read_queue_affinity(value: Any) -> NodeGroupAffinity | None:
    """`spec.affinity`: the node groups of Volcano's nodegroup plugin. Every field is read; one
    this scheduler does not know is refused, naming it (Volcano's schema has no other)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise FieldError(f"`spec.affinity` must be a mapping, found {type(value).__name__}")
    groups: dict[str, frozenset[str]] = {}
    for key, raw in value.items():
        if key not in AFFINITY_FIELDS:
            raise FieldError(f"`spec.affinity.{key}` is not a field of a Queue's affinity "
                             f"(it has {', '.join(AFFINITY_FIELDS)})")
        where = f"spec.affinity.{key}"
        terms = kf.mapping(value, key)
        for term in terms:
            if term not in AFFINITY_TERMS:
                raise FieldError(f"`{where}.{term}` is not a field of {key} (it has {', '.join(AFFINITY_TERMS)})")
        for term, slot in zip(AFFINITY_TERMS, AFFINITY_FIELDS[key]):
            names = kf.listing(terms, term)
            if not all(isinstance(n, str) and n for n in names):
                raise FieldError(f"`{where}.{term}` must be a list of node group names")
            groups[slot] = frozenset(names)
    return NodeGroupAffinity(**groups)


def _read_priority_class(obj: dict, state: ClusterState) -> None:
    _, name = kf.name_of(obj)
    if "value" not in obj:
        raise FieldError("missing `value`")
    value = kf.integer(obj.get("value"), "value", 0)
    state.priority_classes[name] = value
    if obj.get("globalDefault"):
        state.default_priority = value


def _read_namespace(obj: dict, state: ClusterState) -> None:
    _, name = kf.name_of(obj)
    labels = kf.strings(obj["metadata"].get("labels"), "metadata.labels")
    labels.setdefault(NAMESPACE_NAME_LABEL, name)
    state.namespaces[name] = labels


def _read_volume(obj: dict, state: ClusterState) -> None:
    pv = read_volume(obj)
    state.storage.volumes[pv.name] = pv


def _read_claim(obj: dict, state: ClusterState) -> None:
    claim = read_claim(obj, state.storage.default_class())
    state.storage.claims[claim.key] = claim


def _read_storage_class(obj: dict, state: ClusterState) -> None:
    cls = read_storage_class(obj)
    state.storage.classes[cls.name] = cls


def _read_csinode(obj: dict, state: ClusterState) -> None:
    node = read_csinode(obj)
    state.storage.csinodes[node.name] = node


def _check_group(obj: dict) -> None:
    api = str(obj.get("apiVersion", ""))
    if not api.startswith(VOLCANO_GROUP + "/"):
        raise FieldError(f"apiVersion must be {VOLCANO_GROUP}/v1beta1, found `{api}`")


_READERS: dict[str, Callable[[dict, ClusterState], None]] = {
    "Node": _read_node, "Pod": _read_pod, "PodGroup": _read_podgroup, "Queue": _read_queue,
    "PriorityClass": _read_priority_class, "Namespace": _read_namespace, "PersistentVolume": _read_volume,
    "PersistentVolumeClaim": _read_claim, "StorageClass": _read_storage_class, "CSINode": _read_csinode,
}

# ResourceQuotas (v1), for the resourcequota plugin: Volcano reads status.hard and status.used (the
# quota controller's); an object without status.hard (a hand-written snapshot) is read by its
# spec.hard with nothing used.
KINDS += ("ResourceQuota",)


def _read_resource_quota(obj: dict, state: ClusterState) -> None:
    namespace, name = kf.name_of(obj)
    spec, status = kf.mapping(obj, "spec"), kf.mapping(obj, "status")
    hard = kf.resources(status["hard"], "status.hard") if status.get("hard") is not None else \
        kf.resources(spec.get("hard"), "spec.hard")
    used = kf.resources(status.get("used"), "status.used") if status.get("hard") is not None else {}
    if state.resource_quotas is None:
        state.resource_quotas = {}
    state.resource_quotas[f"{namespace}/{name}"] = ResourceQuota(namespace, name, hard, used)


_READERS["ResourceQuota"] = _read_resource_quota

# PodDisruptionBudgets (policy/v1), for the pdb plugin: spec.selector and the disruption
# controller's status (disruptionsAllowed, disruptedPods), which policydsl does not compute.
KINDS += ("PodDisruptionBudget",)


def _read_disruption_budget(obj: dict, state: ClusterState) -> None:
    namespace, name = kf.name_of(obj)
    spec, status = kf.mapping(obj, "spec"), kf.mapping(obj, "status")
    if status.get("disruptionsAllowed") is None:
        raise FieldError("`status.disruptionsAllowed` is missing: the pdb plugin reads the disruption controller's "
                         "count, which policydsl does not compute; write it (e.g. `status: {disruptionsAllowed: 1}`)")
    disrupted = status.get("disruptedPods") or {}
    if not isinstance(disrupted, dict):
        raise FieldError("`status.disruptedPods` must be a mapping of pod name to time")
    if state.disruption_budgets is None:
        state.disruption_budgets = {}
    state.disruption_budgets[f"{namespace}/{name}"] = DisruptionBudget(
        namespace, name, kf.label_selector(spec.get("selector"), "spec.selector"),
        kf.integer(status.get("disruptionsAllowed"), "status.disruptionsAllowed", 0), frozenset(map(str, disrupted)))


_READERS["PodDisruptionBudget"] = _read_disruption_budget

# metrics.k8s.io NodeMetrics (`kubectl get nodemetrics -o yaml`), for the usage plugin in snapshots
# and the simulator: the stand-in for its metrics source (runtime.cluster.nodeusage.node_metrics_usage).
KINDS += ("NodeMetrics",)


def _read_node_metrics(obj: dict, state: ClusterState) -> None:
    _namespace, name = kf.name_of(obj)
    node = state.nodes.get(name)
    if node is None:
        raise FieldError(f"no Node `{name}` in the snapshot: a NodeMetrics gives the load of a node it lists")
    usage = kf.resources(kf.mapping(obj, "usage", required=True), "usage")
    if state.node_usage is None:
        state.node_usage = {}
    state.node_usage[name] = node_metrics_usage(usage, node.allocatable)


_READERS["NodeMetrics"] = _read_node_metrics

# Volcano's HyperNodes (topology.volcano.sh/v1alpha1), read by runtime.cluster.topology; gangs asking
# for network topology are placed within them (runtime/engine/actions/topology.py).
KINDS += ("HyperNode",)
_READERS["HyperNode"] = lambda obj, state: state.add_hypernode(read_hypernode(obj))

# Volcano's resource exporter's Numatopology objects (nodeinfo.volcano.sh/v1alpha1), one per node,
# for the numa-aware plugin (runtime.cluster.numa).
KINDS += ("Numatopology",)
_READERS["Numatopology"] = lambda obj, state: state.add_numatopology(read_numatopology(obj))

# Dynamic Resource Allocation (resource.k8s.io/v1), read by runtime.cluster.draspec; pods' claims are
# allocated devices by runtime.engine.rules.dra.
KINDS += DRA_KINDS


def _read_dra(obj: dict, state: ClusterState) -> None:
    add_dra_object(state.dra, obj)


for _kind in DRA_KINDS:
    _READERS[_kind] = _read_dra


def _check_references(state: ClusterState, sources: dict[tuple[str, str], str]) -> list[ObjectProblem]:
    """Cross-object checks: a pod's node exists. (A PodGroup naming a queue nobody defines is no
    error of the input: its job waits, saying so, as Volcano skips it.)"""
    problems = []
    for pod in state.pods.values():
        if pod.node_name and pod.node_name not in state.nodes and not pod.terminal:
            problems.append(ObjectProblem(sources.get(("Pod", pod.key), "<input>"), "Pod", pod.key,
                                          f"runs on node `{pod.node_name}`, which does not exist"))
    return problems


def check_queues(state: ClusterState, known_queues: Iterable[str]) -> list[ObjectProblem]:
    """PodGroups naming a queue neither the policy nor the cluster defines (run_cycle calls it
    with the policy's queues, since a policy queue may be what a PodGroup names)."""
    known = set(known_queues) | set(state.queues)
    return [ObjectProblem("<state>", "PodGroup", g.key, f"names queue `{g.queue}`, which does not exist")
            for g in state.podgroups.values() if g.queue not in known]
