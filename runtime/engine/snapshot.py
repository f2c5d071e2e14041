"""The struct-of-arrays snapshot one cycle schedules on.

Built from a ClusterState and the Plan: nodes × resources int64 matrices (allocatable, used,
releasing), label and taint bitsets, per-task request vectors and status, job and queue
arrays. The kernels read these arrays; plugins and actions index them. The node part is
cached across cycles (`SnapshotCache`) while the state's `node_generation` is unchanged, so a
steady cluster rebuilds only the pod-dependent arrays; the pass over the pods is kept too
(runtime.engine.podscan: only pods new, replaced or noted changed in place are read again).

Queues come from the policy and from Queue objects: a queue the policy declares is taken from
the policy (the object's spec is ignored); Queue objects add the queues the policy does not
name; the policy's implicit `default` queue yields to a `default` Queue object. Every queue
without a parent hangs under `root` (index 0), whose capability is the whole cluster.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Callable, Iterable

import numpy as np

from compiler import catalog as cat
from compiler.plan import DevicePlan, Plan, QueuePlan
from runtime.engine.kernels import Kernels
from runtime.engine.kernels import load as load_kernels
# Task status codes (int8 array `Snapshot.status`): declared with the kernels, exported from here.
from runtime.engine.kernels.codes import (  # noqa: F401 - the engine imports the codes from here
    ALLOCATED, BOUND, HELD, PENDING, PIPELINED, RELEASING, SUCCEEDED, UNLIMITED,
)
from runtime.engine.kernels.records import JobInfo, PodScan, TaskColumns, TaskOrder, min_resource_vector
from runtime.engine.podscan import PlacedGrouping, PodScanMemo
from runtime.cluster.model import (
    MAX_NODE_QUANTITY, PG_INQUEUE, PG_PENDING, QUEUE_ANNOTATION, ClusterState, NetworkTopology, Node, Pod,
    PodRules, SettledPods, Taint,
)
from runtime.cluster.dra import ClaimProblem, DraSnapshot, dra_snapshot
from runtime.cluster.draalloc import build_inventory
from runtime.cluster.draquota import (
    DeviceCharges, charge_devices, class_totals, device_class_of, is_capacity_dimension,
)
from runtime.cluster.model import NodeGroupAffinity, QueueObject
from runtime.cluster.extenderclient import extender_key
from runtime.cluster.numa import numa_class_key, numa_policy_unevaluated
from runtime.cluster.storage import Storage, VolumeSnapshot, volume_snapshot
from runtime.engine.images import image_class_key, image_locality_weight, node_images
from runtime.cluster.selectors import SelectorSet
from runtime.cluster.topology import Topology as NetworkTree
from runtime.engine.devices import (GPU_NUMBER, DeviceHold, card_model, gfd_card_memory,
                                    hami_numa_groups, held_cards, held_for_devices, held_for_vgpu_quota, unhealthy_cards)
from runtime.engine.devices_vgpu import (VgpuInventory, build_vgpu_inventory, exclusive_rules, vgpu_class_key,
                                         vgpu_on)


READY_STATUSES = (ALLOCATED, BOUND, SUCCEEDED)

BASE_RESOURCES = ("cpu", "memory", "pods")
_RULES_OF = operator.attrgetter("rules")
NVLINK_LABEL = "policydsl.io/nvlink-islands"
NUMA_LABEL = "policydsl.io/gpu-numa"
TOPOLOGY_LABELS = {"nvlink": NVLINK_LABEL, "numa": NUMA_LABEL}
# Actions that may evict (shuffle evicts whether or not any job waits: cycle.run_cycle).
VICTIM_ACTIONS = frozenset({"preempt", "reclaim", "gang_preempt", "gang_reclaim", "shuffle"})


@dataclass
class QueueInfo:
    index: int
    name: str
    parent: int                      # -1 for root
    weight: int
    priority: int
    reclaimable: bool
    borrow: bool
    open: bool
    declared_in_policy: bool
    children: list[int] = field(default_factory=list)
    # Its place in drf's hierarchy (Volcano's hdrf): (name, weight) from the top down, from the
    # Queue's volcano.sh/hierarchy and volcano.sh/hierarchy-weights annotations, else its parents.
    hierarchy: tuple[tuple[str, float], ...] = ()
    # Why its jobs cannot run (an invalid Queue object, a parent that does not exist, a parent
    # cycle): they wait with this reason. Such a queue hangs under root and takes no part in
    # the hierarchy of others.
    problem: str | None = None
    dequeue: str = "traverse"                       # spec.dequeueStrategy / the policy's `dequeue`
    # Its node groups (nodegroup plugin; a Queue's spec.affinity). None: not set, so with the
    # plugin's hierarchy it takes its nearest ancestor's.
    node_groups: NodeGroupAffinity | None = None

    @property
    def leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class TaskClass:
    """Tasks that the predicates and scorers cannot tell apart (same request and constraints)."""

    index: int
    request: tuple[int, ...]
    node_selector: tuple[tuple[str, str], ...]
    required_terms: tuple
    preferred_terms: tuple
    tolerations: tuple
    device_request: tuple[tuple[str, int], ...]
    head: int = -1                   # its first task (namespace, labels and rules are the head pod's)


@dataclass
class DeviceInventory:
    """The cards of one DevicePlan across all nodes (flat arrays, `card_node` says whose)."""

    plan: DevicePlan
    memory_resource: str | None
    memory_unit: int                 # bytes per unit of the memory resource (MiB for Volcano's)
    card_node: np.ndarray            # (C,) node index
    card_local: np.ndarray           # (C,) card index on its node
    card_island: np.ndarray          # (C,) topology group on its node (0 when none)
    card_memory: np.ndarray          # (C,) bytes
    used_memory: np.ndarray          # (C,)
    used_compute: np.ndarray         # (C,) percent
    tasks: np.ndarray                # (C,) tasks sharing the card
    whole: np.ndarray                # (C,) bool: taken whole
    model_ok: np.ndarray             # (N,) bool: node's card model is accepted
    # (C,) bool: in service (volcano-sh/devices lists broken cards in the node annotation
    # volcano.sh/gpu-unhealthy-ids; Volcano drops them from the node's cards). None: all are.
    healthy: np.ndarray | None = None


@dataclass
class Snapshot:
    plan: Plan
    resources: tuple[str, ...]
    resource_index: dict[str, int]
    device_managed: np.ndarray       # (R,) bool: columns the device plugin checks per card
    # nodes
    node_names: list[str]
    node_objects: list[Node]
    allocatable: np.ndarray          # (N,R) int64
    used: np.ndarray                 # (N,R) int64: every pod on the node, releasing included
    releasing: np.ndarray            # (N,R) int64
    schedulable: np.ndarray          # (N,) bool (not cordoned)
    label_bits: np.ndarray           # (N,W) uint64
    label_index: dict[tuple[str, str], int]
    label_key_index: dict[str, int]
    taint_bits: np.ndarray           # (N,Wt) uint64: NoSchedule / NoExecute taints
    prefer_taint_bits: np.ndarray    # (N,Wp) uint64: PreferNoSchedule taints
    taints: list[Taint]
    prefer_taints: list[Taint]
    # tasks
    pods: list[Pod]
    task_keys: list[str]
    request: np.ndarray              # (T,R) int64 (pods column = 1)
    status: np.ndarray               # (T,) int8
    task_node: np.ndarray            # (T,) int64, -1 when not placed
    task_job: np.ndarray             # (T,) int64
    task_priority: np.ndarray        # (T,) int64
    task_class: np.ndarray           # (T,) int64 (pending tasks; 0 for the others)
    classes: list[TaskClass]
    # jobs and queues
    jobs: list[JobInfo]
    job_first: np.ndarray            # (J+1,) int64: job j's tasks are job_first[j]:job_first[j+1]
    queues: list[QueueInfo]
    queue_index: dict[str, int]
    capability: np.ndarray           # (Q,R) int64, UNLIMITED where uncapped
    guarantee: np.ndarray            # (Q,R)
    deserved: np.ndarray | None      # (Q,R) explicit deserved (capacity), UNLIMITED where unset
    borrow_limit: np.ndarray         # (Q,R), UNLIMITED where unset
    total: np.ndarray                # (R,) allocatable of schedulable nodes
    devices: list[DeviceInventory]
    foreign_pods: int = 0            # pods of other schedulers counted in `used`
    # Pending tasks held for a device request no plan places on cards (runtime.engine.devices).
    device_held: dict[int, DeviceHold] = field(default_factory=dict)
    # HAMi vGPU cards, when deviceshare's `vgpu` is on (runtime.engine.devices_vgpu).
    vgpu: VgpuInventory | None = None
    # Our settled lone pods, folded out of the tasks (see folds_settled): their requests per
    # queue (Q,R), None when nothing was folded; and how many there are.
    settled: np.ndarray | None = None
    settled_pods: int = 0
    # What settled gangs hold beyond their minResources, per queue (Q,R); None when none does.
    settled_elastic: np.ndarray | None = None
    # Where inter-pod rules are in play (some pod carries affinity terms, spread constraints
    # or host ports): every pod on a node, whoever's, settled ones included, with its node row;
    # the label keys the rules' selectors read; Namespace labels. Empty otherwise.
    placed_pods: list[Pod] = field(default_factory=list)
    placed_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rule_pods: list[Pod] = field(default_factory=list)
    # The distinct rules objects of rule_pods (by identity; a template's pods share one), in the
    # order first seen: the rules make their terms' tables from these, not from every pod.
    rule_objects: list[PodRules] = field(default_factory=list)
    label_keys: tuple[str, ...] | None = None
    # The placed pods grouped for the rules, kept across cycles by the snapshot cache
    # (runtime.engine.podscan.PlacedGrouping); None: the rules group them (runtime.engine.rules.pods).
    placed_grouping: PlacedGrouping | None = None
    namespace_labels: Callable[[str], dict[str, str]] = lambda name: {}
    topology: "Topology | None" = None
    # Volcano's HyperNodes resolved (runtime.cluster.topology), when some job asks for network
    # topology or the network-topology-aware plugin scores plain pods' nodes by them
    # (hypernode_binpack_on); None otherwise (nobody pays for it).
    hypernodes: NetworkTree | None = None
    # Where some pod in play has PersistentVolumeClaims: their claims resolved (runtime.cluster.storage).
    volumes: VolumeSnapshot | None = None
    # Jobs whose PodGroup sets spec.subGroupPolicy: job index -> its sub-groups (`sub_groups_of`).
    sub_groups: dict[int, tuple["SubGroup", ...]] = field(default_factory=dict)
    # Where some waiting pod has ResourceClaims: their claims resolved (runtime.cluster.dra).
    dra: DraSnapshot | None = None
    # Namespaces' ResourceQuotas (ClusterState.resource_quotas: None when not read), for the
    # resourcequota plugin.
    resource_quotas: dict | None = None
    # Resource columns only queues count (DRA device counts, `deviceclass/<class>`: no node offers
    # them; runtime.cluster.draquota): the node fit leaves them out. None: there are none.
    queue_only: np.ndarray | None = None
    # PodDisruptionBudgets (ClusterState.disruption_budgets: None when not read), for the pdb plugin.
    disruption_budgets: dict | None = None
    # Nodes' load by name (ClusterState.node_usage: None when none is read), for the usage plugin.
    node_usage: dict | None = None
    # Nodes' Numatopology objects by node name (ClusterState.numatopologies), for the numa-aware plugin.
    numatopologies: dict = field(default_factory=dict)
    # What stateful rules keep across cycles, by rule name (SnapshotCache.rule_tables; each rule
    # checks its own against the snapshot, e.g. runtime.engine.rules.volumes.VolumeTables).
    rule_tables: dict[str, object] = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    def rule_kinds(self) -> frozenset[str]:
        """The kinds of inter-pod rule some pod in play carries (RULE_KINDS): a stateful rule no
        pod carries answers nothing and is not opened. Kept across cycles with the rules objects
        (Snapshot.rule_objects is the same list while they are)."""
        kept = self.rule_tables.get(_RULE_KINDS_TABLE)
        if kept is not None and kept[0] is self.rule_objects:
            return kept[1]
        found = frozenset(kind for kind, carries in RULE_KINDS.items()
                          if any(carries(rules) for rules in self.rule_objects))
        self.rule_tables[_RULE_KINDS_TABLE] = (self.rule_objects, found)
        return found

    @property
    def n_resources(self) -> int:
        return len(self.resources)

    def vector(self, amounts: dict[str, int] | None, fill: int = 0) -> np.ndarray:
        out = np.full(self.n_resources, fill, dtype=np.int64)
        for name, value in (amounts or {}).items():
            if name in self.resource_index:
                out[self.resource_index[name]] = value
        return out

    def describe(self, vector: np.ndarray) -> dict[str, int]:
        return {r: int(v) for r, v in zip(self.resources, vector) if v and v < UNLIMITED}

    def nbytes(self) -> int:
        """Memory held by the arrays (the Python object lists are shared with the state)."""
        total = 0
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                total += value.nbytes
        for inv in self.devices:
            total += sum(v.nbytes for v in inv.__dict__.values() if isinstance(v, np.ndarray))
        return total


# --- building --------------------------------------------------------------------------------

@dataclass
class _NodeArrays:
    generation: int
    resources: tuple[str, ...]
    names: list[str]
    objects: list[Node]
    allocatable: np.ndarray
    schedulable: np.ndarray
    label_bits: np.ndarray
    label_index: dict
    label_key_index: dict
    taint_bits: np.ndarray
    prefer_taint_bits: np.ndarray
    taints: list[Taint]
    prefer_taints: list[Taint]
    topology: Topology
    total: np.ndarray | None = None      # cluster_total of these, once asked (read only)


class SnapshotCache:
    """Keeps the node arrays between cycles while the node set and resource list are unchanged,
    and the pass over the pods (`pods`: what each pod read, read again only where a pod changed)."""

    def __init__(self) -> None:
        # The pass over the pods kept, one per folding (a plan that may evict lists every pod for a
        # few cycles after one that needed victims, then folds again: neither starts cold); `pods`
        # is the one the last snapshot used.
        self._pod_memos = {False: PodScanMemo(), True: PodScanMemo()}
        self.pods = self._pod_memos[False]
        self._rule_reading: tuple[frozenset[int], list, tuple[str, ...], SelectorSet, list[Pod]] | None = None
        self._nodes: _NodeArrays | None = None
        self._node_resources: tuple[int, set[str]] | None = None
        self._positions: tuple[int, dict[str, int]] | None = None
        self.node_rebuilds = 0
        # The rules' own tables kept across cycles (Snapshot.rule_tables), by rule name.
        self.rule_tables: dict[str, object] = {}
        # The last group_tasks and task_columns answers, with what they were made from.
        self._tasks: tuple | None = None
        self._columns: tuple | None = None
        # The last volume_snapshot answer, with what it was made from (`volume_snapshot`).
        self._volumes: tuple | None = None

    def group_tasks(self, k: Kernels, scan: PodScan) -> TaskOrder:
        """k.group_tasks(scan) of the pod scan memo's scan, kept while the memo reads no pod again
        (the same scan: the same tasks; read only, shared by the snapshots)."""
        kept = self._tasks
        if not (kept is not None and kept[0] is self.pods and kept[1] == self.pods.generation
                and kept[2] is k.group_tasks):
            kept = self._tasks = (self.pods, self.pods.generation, k.group_tasks, k.group_tasks(scan))
        return kept[3]

    def task_columns(self, k: Kernels, pods: list[Pod], status: np.ndarray, plain: np.ndarray,
                     task_shape: np.ndarray, row_of_shape: np.ndarray, label_keys: tuple[str, ...] | None,
                     extra_keys: dict | None, selectors: SelectorSet | None) -> TaskColumns:
        """k.task_columns of these, kept while every one is the same: the same list of pods (the
        tasks kept by `group_tasks`), equal arrays, label keys and extra keys, the same selector set
        (its answers are the same while it is). A copy of the classes: the session's to keep."""
        arrays = (status, plain, task_shape, row_of_shape)
        kept = self._columns
        if not (kept is not None and kept[0] is pods and kept[1] is k.task_columns and kept[2] is selectors
                and kept[3] == label_keys and kept[4] == extra_keys
                and all(np.array_equal(a, b) for a, b in zip(kept[5], arrays))):
            columns = k.task_columns(pods, status, plain, task_shape, row_of_shape, label_keys, extra_keys, selectors)
            kept = self._columns = (pods, k.task_columns, selectors, label_keys, extra_keys,
                                    tuple(a.copy() for a in arrays), columns)
        columns = kept[6]
        return TaskColumns(columns.task_class.copy(), list(columns.class_heads))

    def node_resources(self, state: ClusterState) -> set[str]:
        """The resource names the nodes offer."""
        cached = self._node_resources
        if cached is None or cached[0] != state.node_generation:
            names: set[str] = set()
            for node in state.nodes.values():
                names.update(node.allocatable)
            cached = self._node_resources = (state.node_generation, names)
        return cached[1]

    def volume_snapshot(self, storage: Storage, task_pods: list[Pod], waiting: list[int],
                        placed: list[tuple[Pod, int]]) -> VolumeSnapshot:
        """runtime.cluster.storage.volume_snapshot of these, kept while every one is the same: the
        same list of pods (the tasks kept by `group_tasks`), equal waiting tasks, equal placed
        pods on the same rows, and equal storage objects by key (they are frozen: a changed claim,
        volume or class is another object, unequal). Read only, shared by the snapshots."""
        # Every collection, CSINodes too: the answer holds the storage it was made of (a copy per
        # snapshot on a cluster), which the volume rule reads on.
        shown = tuple(tuple(objects.items()) for objects in (storage.claims, storage.volumes, storage.classes,
                                                             storage.csinodes))
        kept = self._volumes
        # Tuples compare item by item in C, each by identity first: equal objects decide alike.
        if not (kept is not None and kept[0] is task_pods and kept[1] == waiting and kept[2] == placed
                and kept[3] == shown):
            kept = self._volumes = (task_pods, list(waiting), list(placed), shown,
                                    volume_snapshot(storage, task_pods, waiting, placed))
        return kept[4]

    def node_positions(self, state: ClusterState) -> dict[str, int]:
        """Node name -> row (nodes by name)."""
        cached = self._positions
        if cached is None or cached[0] != state.node_generation:
            cached = self._positions = (state.node_generation, {name: i for i, name in enumerate(sorted(state.nodes))})
        return cached[1]

    def rule_reading(self, rule_pods: list[Pod]) -> tuple[tuple[str, ...], SelectorSet, list[PodRules]]:
        """rule_label_keys, rule_selectors and the distinct rules objects (Snapshot.rule_objects)
        of these pods, kept while their distinct rules objects are the same ones (PodRules are
        frozen: the same objects read the same keys and selectors; the selectors' numbers only
        tell them apart, and a kept SelectorSet keeps what it matched). The objects are held, so
        an id is not taken by another meanwhile; so is the list of pods, which the pod scan hands
        again, unchanged, while it reads no pod again (PodScanMemo): the same list, the same pods."""
        kept = self._rule_reading
        if kept is not None and kept[4] is rule_pods:
            return kept[2], kept[3], kept[1]
        ids = frozenset(map(id, map(_RULES_OF, rule_pods)))
        if kept is not None and kept[0] == ids:
            self._rule_reading = (*kept[:4], rule_pods)
            return kept[2], kept[3], kept[1]
        keys = rule_label_keys(rule_pods)
        selectors = rule_selectors(rule_pods, keys)
        self._rule_reading = (ids, distinct_rules(rule_pods), keys, selectors, rule_pods)
        return keys, selectors, self._rule_reading[1]

    def node_arrays(self, state: ClusterState, resources: tuple[str, ...]) -> _NodeArrays:
        cached = self._nodes
        if cached is not None and cached.generation == state.node_generation and cached.resources == resources:
            return cached
        self._nodes = _build_nodes(state, resources)
        self.node_rebuilds += 1
        return self._nodes


def device_plans(plan: Plan) -> list[DevicePlan]:
    """The policy's device plans plus the ones deviceshare's Volcano switches imply."""
    plans = list(plan.devices)
    share = plan.plugin("deviceshare")
    known = {d.resource for d in plans}
    if share is not None and "volcano.sh/gpu-number" not in known:
        if share.arguments.get("gpu_sharing"):
            plans.append(DevicePlan("volcano.sh/gpu-number", sharing="memory", memory_resource="volcano.sh/gpu-memory",
                                    policy=share.arguments.get("schedule_policy", "binpack")))
        elif share.arguments.get("gpu_number"):
            plans.append(DevicePlan("volcano.sh/gpu-number", sharing="whole"))
    return plans


def memory_resource_of(device: DevicePlan) -> str | None:
    if device.sharing != "memory":
        return None
    return device.memory_resource or "volcano.sh/gpu-memory"


def memory_unit_of(resource: str | None) -> int:
    # Volcano's volcano.sh/gpu-memory (and vgpu-memory) count MiB; other resources count bytes.
    return 2**20 if resource in ("volcano.sh/gpu-memory", "volcano.sh/vgpu-memory") else 1


def folds_settled(plan: Plan, asked: bool | None = None) -> bool:
    """Whether the snapshot folds settled lone pods out of its tasks: `asked` when given
    (Options.fold_settled), else whether the plan lets it.

    A pod of ours without a PodGroup that is bound and not releasing (or has succeeded) can
    change nothing in a cycle but its queue's allocated and requested totals, unless an
    action may choose it as a victim. Folded, it costs the cycle no task and no job: with a
    cluster full of such pods, a cycle's cost follows the pods still waiting, not the cluster.
    """
    if asked is not None:
        return asked
    return not set(plan.actions) & VICTIM_ACTIONS


def hypernode_binpack_on(plan: Plan) -> bool:
    """Whether the network-topology-aware plugin scores nodes of pods without topology by their
    HyperNodes (its normal-pod binpack): the snapshot then carries the HyperNodes for every job."""
    return any(p.name == "network-topology-aware" and p.arguments.get("normal_pod_binpack", True)
               and p.enabled("node_order") for tier in plan.tiers for p in tier.plugins)


def build_snapshot(state: ClusterState, plan: Plan, scheduler_name: str = "volcano",
                   cache: SnapshotCache | None = None, kernels: Kernels | None = None,
                   fold_settled: bool | None = None) -> Snapshot:
    """The cycle's snapshot. The passes over the pods run in `kernels` (compiled unless the
    pure-Python reference is asked for: runtime.engine.kernels.load). `fold_settled`: None follows
    folds_settled(plan); the decisions are the same either way."""
    k = kernels or load_kernels()
    fold = folds_settled(plan, fold_settled)
    devices = device_plans(plan)
    # A sharing plan's memory and cores are checked card by card, not by the node fit. Its card
    # count (`volcano.sh/gpu-number`, ...) stays in the node fit as well: the kubelet admits a
    # pod by the sum of every pod's request for it against the node's allocatable, whatever
    # cards the pods share.
    managed = set()
    for d in devices:
        if d.sharing == "memory":
            managed.update(r for r in (memory_resource_of(d), d.cores_resource) if r)
    once = cache is None
    if once:     # one cycle: nothing to keep the pods' reading for
        cache = SnapshotCache()
        scan = k.scan_pods(state.pods, scheduler_name, state.priority_classes, state.default_priority,
                           cache.node_positions(state), fold)
    else:
        cache.pods = cache._pod_memos[bool(fold)]
        scan = cache.pods.scan(k, state.pods, scheduler_name, state.priority_classes, state.default_priority,
                               cache.node_positions(state), fold)
    counted_room = np.zeros((0, 4), dtype=np.int64)
    if state.settled is not None:
        if not fold or state.settled.scheduler_name != scheduler_name:
            raise ValueError(f"this state counts settled pods of {state.settled.scheduler_name} instead of listing "
                             f"them: only a plan that folds them can schedule {scheduler_name}'s pods on it")
        counted_room = _merge_counted(scan, state.settled, cache.node_positions(state))
    resources = _resource_list(state, plan, managed, scan.shapes, cache)
    index = {r: i for i, r in enumerate(resources)}
    nodes = cache.node_arrays(state, resources)
    n, r = len(nodes.names), len(resources)
    pods_col = index["pods"]

    # One row per distinct request map: pods share a few shapes, so rows are built once each.
    shapes = np.zeros((len(scan.shapes), r), dtype=np.int64)
    for sid, requests in enumerate(scan.shapes):
        for res, amount in requests.items():
            shapes[sid, index[res]] = amount
    shapes[:, pods_col] = 1
    # Shapes with equal rows (request maps that differ only in key order) are one request.
    rows = [tuple(row) for row in shapes.tolist()]
    row_ids: dict[tuple, int] = {}
    row_of_shape = np.array([row_ids.setdefault(row, sid) for sid, row in enumerate(rows)], dtype=np.int64)

    # Node usage: every non-terminal pod on a known node, whoever's it is.
    used = np.zeros((n, r), dtype=np.int64)
    releasing = np.zeros((n, r), dtype=np.int64)
    foreign = k.node_usage(scan.placed_node, scan.placed_shape, scan.placed_gone, scan.placed_mine, shapes, used,
                           releasing)
    counted_room = counted_room[counted_room[:, 0] >= 0]
    if len(counted_room):
        np.add.at(used, counted_room[:, 0], shapes[counted_room[:, 1]] * counted_room[:, 3, None])
        foreign += int(counted_room[counted_room[:, 2] == 0, 3].sum())

    # Tasks: pods of our scheduler grouped by job (by name), each job's tasks by priority
    # (descending), creation, uid, so that each job's tasks are one contiguous range.
    # Kept while the pod scan memo reads no pod again (not where settled pods are merged in).
    tasks = k.group_tasks(scan) if once or state.settled is not None else cache.group_tasks(k, scan)
    task_shape = scan.shape[tasks.order]
    request = shapes[task_shape]
    task_priority = scan.priority[tasks.order]
    status = scan.status[tasks.order]
    label_keys, selectors, rule_objects = None, None, []
    if scan.rule_pods:
        label_keys, selectors, rule_objects = ((rule_label_keys(scan.rule_pods), None, distinct_rules(scan.rule_pods))
                                               if once else cache.rule_reading(scan.rule_pods))
        if selectors is None:
            selectors = rule_selectors(scan.rule_pods, label_keys)
    volumes = _volume_snapshot(state, scan, tasks, status, cache.node_positions(state), cache) \
        if scan.volume_pods else None
    plain, extra_keys = scan.plain[tasks.order], volumes.class_keys if volumes is not None else None
    asking = _asking_tasks(scan, tasks)
    dra = _dra_snapshot(state, tasks.pods, status, asking)
    if dra is not None:      # tasks with claims are classed by them too (never by their request alone)
        plain[list(dra.uses)] = False
        extra_keys = {t: (extra_keys.get(t) if extra_keys else None, dra.class_keys.get(t))
                      for t in set(dra.class_keys) | set(extra_keys or ())}
    if image_locality_weight(plan) and node_images(nodes.objects).any:   # nodeorder scores a class by its images
        plain, extra_keys = pod_class_keys(plain, extra_keys, tasks.pods, status, image_class_key)
    queues, queue_index, capability, guarantee, deserved, borrow_limit = _build_queues(state, plan, index, r)
    capacity = plan.plugin("capacity")
    charges = None if capacity is not None and capacity.arguments.get("device_class_quota") is False else \
        _dra_quota(state, tasks.pods, status, request, index, dra, scheduler_name, fold, cache.node_positions(state))
    if charges is not None and charges.tasks:   # tasks charged different device counts are told apart
        extra_keys = dict(extra_keys or {})
        for t, row in charges.tasks.items():
            if status[t] == PENDING:
                plain[t] = False
                extra_keys[t] = (extra_keys.get(t), row)
    task_job = np.repeat(np.arange(len(tasks.job_names), dtype=np.int64), np.diff(tasks.job_first))
    jobs = k.build_jobs(state.podgroups, state.priority_classes, state.default_priority, tasks.job_names, tasks.pods,
                        tasks.job_first, task_priority, queue_index, [q.leaf for q in queues], index, r,
                        cat.DEFAULT_QUEUE)
    if plan.plugin("nodegroup") is not None:     # its answer depends on the queue: a class never spans two
        plain, extra_keys = queue_class_keys(plain, extra_keys, jobs, task_job, status)
    if plan.plugin("task-topology") is not None:     # a class's node score is its bucket's: one bucket each
        # Lazy: the plugins package imports this module.
        from runtime.engine.plugins.task_topology import topology_class_keys
        plain, extra_keys = topology_class_keys(plain, extra_keys, jobs, task_job, tasks.pods, status,
                                                scan.node[tasks.order], nodes.names, request, tuple(resources))
    if plan.plugin("tdm") is not None:   # its filter and score read the pod's revocable zone: a class never spans two
        plain, extra_keys = pod_class_keys(plain, extra_keys, tasks.pods, status, lambda p: p.revocable_zone)
    if plan.plugin("extender") is not None:   # asked for a class by its first pod: only pods told alike share one
        plain, extra_keys = pod_class_keys(plain, extra_keys, tasks.pods, status, extender_key)
    if vgpu_on(plan):     # the vGPU rule answers for a class by its first pod's card filters
        plain, extra_keys = pod_class_keys(plain, extra_keys, tasks.pods, status,
                                           vgpu_class_key(exclusive_rules(plan)))
    if plan.plugin("numa-aware") is not None:     # it answers for a class by its first pod's CPUs and policy
        plain, extra_keys = pod_class_keys(plain, extra_keys, tasks.pods, status, numa_class_key)
    columns = (k.task_columns if once else partial(cache.task_columns, k))(
        tasks.pods, status, plain, task_shape, row_of_shape, label_keys, extra_keys, selectors)
    device_names = managed | {d.resource for d in devices}
    classes = []
    for cid, head in enumerate(columns.class_heads):
        pod = tasks.pods[head]
        selector = tuple(sorted(pod.node_selector.items())) if pod.node_selector else ()
        device_request = tuple(sorted((res, v) for res, v in pod.requests.items() if res in device_names)) \
            if device_names else ()
        classes.append(TaskClass(cid, rows[int(row_of_shape[task_shape[head]])], selector, pod.required_terms,
                                 pod.preferred_terms, pod.tolerations, device_request, head))
    device_managed = np.zeros(r, dtype=bool)
    device_managed[[index[m] for m in managed if m in index]] = True

    job_first = _add_podless_jobs(jobs, tasks.job_first, state, queue_index, [q.leaf for q in queues], index, r)
    if any(q.problem for q in queues):
        for job in jobs:
            if job.queue >= 0 and queues[job.queue].problem and not job.problem:
                job.problem = queues[job.queue].problem
    settled, settled_pods = _fold_settled(scan.settled, shapes, queue_index, len(queues), r)
    if nodes.total is None:     # kept with the node arrays: with 10,000 nodes the exact sum is of Python ints
        nodes.total = cluster_total(nodes.allocatable, nodes.schedulable)
        nodes.total.flags.writeable = False
    total = nodes.total.copy()
    if charges is not None:
        settled = _charge_queues(charges, state, tasks.pods, jobs, total, queue_index, settled, len(queues), r)
        if dra is not None:
            dra.inventory, dra.shared_charges = charges.inventory, charges.shared
    capability[0] = np.minimum(capability[0], total)
    snapshot = Snapshot(
        plan=plan, resources=resources, resource_index=index, device_managed=device_managed,
        node_names=nodes.names, node_objects=nodes.objects, allocatable=nodes.allocatable, used=used,
        releasing=releasing, schedulable=nodes.schedulable, label_bits=nodes.label_bits,
        label_index=nodes.label_index, label_key_index=nodes.label_key_index, taint_bits=nodes.taint_bits,
        prefer_taint_bits=nodes.prefer_taint_bits, taints=nodes.taints, prefer_taints=nodes.prefer_taints,
        pods=tasks.pods, task_keys=tasks.keys, request=request, status=status, task_node=scan.node[tasks.order],
        task_job=task_job, task_priority=task_priority, task_class=columns.task_class, classes=classes,
        jobs=jobs, job_first=job_first, queues=queues, queue_index=queue_index, capability=capability,
        guarantee=guarantee, deserved=deserved, borrow_limit=borrow_limit, total=total, devices=[],
        foreign_pods=foreign, settled=settled, settled_pods=settled_pods, topology=nodes.topology,
        volumes=volumes,
        hypernodes=state.topology() if any(
            job.podgroup is not None and job.podgroup.asks_topology for job in jobs)
        or (state.has_hypernodes and hypernode_binpack_on(plan)) else None,
        sub_groups={job.index: sub_groups_of(job, tasks.pods) for job in jobs
                    if job.podgroup is not None and job.podgroup.sub_groups and len(job.tasks)},
    )
    if scan.rule_pods:
        # Every pod holding room on a known node (ClusterState.placed_pods), from the scan's rows.
        known = scan.placed_node >= 0
        if once:
            listed = list(state.pods.values())
            snapshot.placed_pods = [listed[i] for i in scan.placed_at[known].tolist()]
        else:     # the kept scan's list, made again only where it read a pod again (read only)
            snapshot.placed_pods = cache.pods.placed_pods()
        snapshot.placed_rows = scan.placed_node[known]
        if state.settled is not None and state.settled_pods is not None:   # and those only counted
            positions = cache.node_positions(state)
            names = state.pods.keys()
            extra = [p for p in state.settled_pods() if p.key not in names and p.node_name and not p.terminal]
            rows_of = np.array([positions.get(p.node_name, -1) for p in extra], dtype=np.int64)
            ok = rows_of >= 0
            # A new list: the kept scan's is shared.
            snapshot.placed_pods = snapshot.placed_pods + [p for p, good in zip(extra, ok.tolist()) if good]
            snapshot.placed_rows = np.concatenate([snapshot.placed_rows, rows_of[ok]])
        snapshot.rule_pods = scan.rule_pods
        snapshot.rule_objects = rule_objects
        snapshot.label_keys = label_keys
        if not once and state.settled is None:     # the placed pods are the kept scan's
            snapshot.placed_grouping = cache.pods.placed_grouping(label_keys or ())
    # inter-pod rules' namespaceSelectors and DRA's adminAccess namespaces read them
    snapshot.namespace_labels = state.namespace_labels
    if state.settled is not None and state.settled.elastic:
        snapshot.settled_elastic = _settled_elastic(state.settled.elastic, queue_index, index, len(queues), r)
    snapshot.dra = dra
    if charges is not None:
        snapshot.queue_only = np.array([device_class_of(name) is not None for name in resources], dtype=bool)
    snapshot.resource_quotas = state.resource_quotas
    snapshot.disruption_budgets = state.disruption_budgets
    snapshot.node_usage = state.node_usage
    snapshot.numatopologies = state.numatopologies
    snapshot.rule_tables = cache.rule_tables
    snapshot.devices = [_build_inventory(snapshot, d, state) for d in devices]
    if vgpu_on(plan):
        snapshot.vgpu = build_vgpu_inventory(snapshot.node_objects, state.pods.values(),
                                             {name: i for i, name in enumerate(snapshot.node_names)},
                                             exclusive_rules(plan))
    # Last, over the finished tasks: a held task keeps its class, which only pending tasks use.
    snapshot.device_held = held_for_devices(tasks.pods, request, status, PENDING, index, devices, vgpu_on(plan))
    for t in snapshot.device_held:
        status[t] = HELD
    snapshot.device_held.update(held_for_vgpu_quota(snapshot, PENDING, UNLIMITED))
    if plan.plugin("numa-aware") is None:
        waiting = [t for t in asking if status[t] == PENDING]
        snapshot.device_held.update({t: DeviceHold(*why) for t, why in numa_policy_unevaluated(tasks.pods, waiting).items()})
    for t in snapshot.device_held:
        status[t] = HELD
    return snapshot


def _tasks_at(tasks: TaskOrder, positions: list[int]) -> list[int]:
    """The tasks of the pods at these scan positions (PodScan's task lists), in the same order."""
    if not positions:
        return []
    inverse = np.empty(len(tasks.order), dtype=np.int64)
    inverse[tasks.order] = np.arange(len(tasks.order), dtype=np.int64)
    return inverse[positions].tolist()


def _asking_tasks(scan: PodScan, tasks: TaskOrder) -> list[int]:
    """The tasks (in task order) the scan found waiting with ResourceClaims or a NUMA policy
    annotation (PodScan.asking_tasks): what the DRA and NUMA passes read, instead of every
    waiting pod."""
    return sorted(_tasks_at(tasks, scan.asking_tasks))


def _dra_snapshot(state: ClusterState, task_pods: list[Pod], status: np.ndarray,
                  asking: list[int]) -> DraSnapshot | None:
    """The claims of the waiting tasks that have ResourceClaims (None when none has); those
    whose claims keep them from every node are HELD (status changed in place). `asking`: the
    tasks that may have claims (_asking_tasks), in task order."""
    waiting = [t for t in asking if status[t] == PENDING and task_pods[t].resource_claims is not None]
    if not waiting:
        return None
    dra = dra_snapshot(state.dra, task_pods, waiting, state.pods.values())
    for t in dra.held:
        status[t] = HELD
    return dra


def _dra_quota(state: ClusterState, task_pods: list[Pod], status: np.ndarray, request: np.ndarray,
               index: dict[str, int], dra: DraSnapshot | None, scheduler_name: str, fold: bool,
               node_pos: dict[str, int]) -> DeviceCharges | None:
    """Queue quotas on DRA devices (runtime.cluster.draquota): where a queue names
    `deviceclass/<class>`, each task's request row is charged the devices its claims count of
    the class (in place); a task whose claims cannot be counted is HELD, saying why. None when no
    queue names a DeviceClass."""
    columns = {cls: i for name, i in index.items() if (cls := device_class_of(name)) is not None}
    if not columns:
        return None
    pods = [t for t, p in enumerate(task_pods) if p.resource_claims is not None]
    running = [t for t in pods if status[t] not in (PENDING, SUCCEEDED, HELD)]
    pending = [t for t in pods if status[t] == PENDING]
    settled = [(p.annotations.get(QUEUE_ANNOTATION), p) for p in state.pods.values()
               if fold and p.resource_claims is not None and p.scheduler_name == scheduler_name and not p.group
               and not p.terminal and p.node_name in node_pos and not p.releasing]
    charges = charge_devices(state.dra, columns, task_pods, running, pending, settled)
    for t, row in charges.tasks.items():
        for col, n in row:
            request[t, col] += n
    for t, (message, claim) in charges.held.items():
        status[t] = HELD
        if dra is not None:
            dra.held[t] = ClaimProblem(message, claim)
    return charges


def _charge_queues(charges: DeviceCharges, state: ClusterState, task_pods: list[Pod], jobs: list[JobInfo],
                   total: np.ndarray, queue_index: dict[str, int], settled: np.ndarray | None, q_n: int,
                   r: int) -> np.ndarray | None:
    """The rest of the DRA quota: a class's cluster total (the devices its selectors match), lone
    settled pods' devices in their queues, and a PodGroup's minResources raised by the devices
    of the tasks its minMember (or minTaskMember) needs, where it names none of the class itself
    (Volcano's capacity admits a job on its DRA requests without minResources)."""
    inventory = charges.inventory = build_inventory(state.dra)
    for cls, n in class_totals(inventory, charges.columns).items():
        total[charges.columns[cls]] = n
    for queue, row in charges.settled.items():
        q = queue_index.get(queue or cat.DEFAULT_QUEUE, -1)
        if q < 0:
            continue
        if settled is None:
            settled = np.zeros((q_n, r), dtype=np.int64)
        for col, n in row.items():
            settled[q, col] += n
    for job in jobs:
        if job.implicit or not any(int(t) in charges.tasks for t in job.tasks):
            continue
        needed: list[int] = []
        if job.min_task_member:
            for role, n in job.min_task_member.items():
                needed += [int(t) for t in job.tasks if task_pods[int(t)].task_role == role][:n]
        else:
            needed = [int(t) for t in job.tasks[:job.min_member]]
        devices = np.zeros(r, dtype=np.int64)
        for t in needed:
            for col, n in charges.tasks.get(t, ()):
                devices[col] += n
        if not devices.any():
            continue
        floor = job.min_resources if job.min_resources is not None else np.zeros(r, dtype=np.int64)
        job.min_resources = np.where(floor > 0, floor, devices)
    return settled


def _volume_snapshot(state: ClusterState, scan: PodScan, tasks, status: np.ndarray,
                     positions: dict[str, int], cache: SnapshotCache) -> VolumeSnapshot:
    """The claims of the pods in play resolved; tasks whose claims keep them from any node are
    HELD (status changed in place), the reason in `held`."""
    waiting = [t for t in _tasks_at(tasks, scan.volume_tasks) if status[t] == PENDING]
    placed = [(p, positions[p.node_name]) for p in scan.volume_pods if p.node_name and p.node_name in positions]
    volumes = cache.volume_snapshot(state.storage, tasks.pods, waiting, placed)
    for t in volumes.held:
        status[t] = HELD
    return volumes


def queue_class_keys(plain: np.ndarray, class_keys: dict | None, jobs: list, task_job: np.ndarray,
                     status: np.ndarray) -> tuple[np.ndarray, dict]:
    """(plain, class keys) that also tell apart the pending tasks of different queues."""
    out = dict(class_keys) if class_keys else {}
    pending = np.flatnonzero(status == PENDING)
    plain = plain.copy()
    plain[pending] = False
    for t in pending.tolist():
        out[t] = (out.get(t), jobs[int(task_job[t])].queue)
    return plain, out


def pod_class_keys(plain: np.ndarray, class_keys: dict | None, pods: list, status: np.ndarray,
                   key_of: Callable[[Pod], object]) -> tuple[np.ndarray, dict]:
    """(plain, class keys) that also tell apart the pending tasks whose pods `key_of` tells apart
    (a pod it answers a false value for stays as it was)."""
    out = dict(class_keys) if class_keys else {}
    plain = plain.copy()
    for t in np.flatnonzero(status == PENDING).tolist():
        key = key_of(pods[t])
        if key:
            plain[t] = False
            out[t] = (out.get(t), key)
    return plain, out


def _node_groups(q: QueuePlan, obj: QueueObject | None) -> NodeGroupAffinity | None:
    """A queue's node groups: its Queue object's spec.affinity, else the policy's settings."""
    if obj is not None:
        return obj.affinity
    groups = NodeGroupAffinity(frozenset(q.node_groups), frozenset(q.preferred_node_groups),
                               frozenset(q.excluded_node_groups), frozenset(q.avoided_node_groups))
    return None if groups.empty else groups


def _settled_elastic(elastic: dict[str, dict[str, int]], queue_index: dict[str, int], index: dict[str, int],
                     q_n: int, r: int) -> np.ndarray:
    out = np.zeros((q_n, r), dtype=np.int64)
    for queue, held in elastic.items():
        q = queue_index.get(queue, -1)
        if q >= 0:
            for res, amount in held.items():
                if res in index:
                    out[q, index[res]] += amount
    return out


@dataclass(frozen=True)
class SubGroup:
    """A sub-group of a job (Volcano's SubJob): the pods one `spec.subGroupPolicy` entry takes
    with one tuple of matchLabelKeys values, or (policy -1) the job's other pods, its default
    sub-group (a gang of 1, under the job's own networkTopology, which the job's turn applies)."""

    policy: int                                # index in spec.subGroupPolicy; -1: the default sub-group
    values: tuple[str, ...]                    # the pods' matchLabelKeys values
    tasks: np.ndarray                          # task indices, in task order
    size: int                                  # subGroupSize: how many must run together
    network_topology: NetworkTopology | None   # the policy's (None for the default sub-group)
    match_index: int                           # the first value read as an integer (0 if not one): order

    @property
    def name(self) -> str:
        return "-".join(self.values) if self.policy >= 0 else "(default)"


def sub_groups_of(job: JobInfo, pods: list[Pod]) -> tuple[SubGroup, ...]:
    """Job's tasks grouped as Volcano's JobInfo.getOrCreateSubJob does: each pod to the first
    policy that takes it, by its matchLabelKeys values; pods no policy takes form the default
    sub-group. Sub-groups in policy order, then by values; the default last."""
    policies = job.podgroup.sub_groups
    members: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for t in job.tasks.tolist():
        labels = pods[t].labels
        key: tuple[int, tuple[str, ...]] = (-1, ())
        for i, policy in enumerate(policies):
            values = policy.key_of(labels)
            if values is not None:
                key = (i, values)
                break
        members.setdefault(key, []).append(t)
    out = []
    for (i, values), tasks in sorted(members.items(), key=lambda kv: (kv[0][0] < 0, kv[0])):
        first = values[0] if values else ""
        out.append(SubGroup(i, values, np.array(tasks, dtype=np.int64), policies[i].size if i >= 0 else 1,
                            policies[i].network_topology if i >= 0 else None,
                            int(first) if first.lstrip("-").isdigit() else 0))
    return tuple(out)


def _add_podless_jobs(jobs: list[JobInfo], job_first: np.ndarray, state: ClusterState, queue_index: dict[str, int],
                      leaf: list[bool], index: dict[str, int], r: int) -> np.ndarray:
    """PodGroups waiting for admission or for their pods (Pending, Inqueue) that no pod names
    yet become jobs without tasks, appended to `jobs`: Volcano's job controller creates a
    vcjob's pods only once enqueue has admitted its PodGroup. Returns job_first with their
    (empty) ranges."""
    waiting = [(key, group) for key, group in state.podgroups.items() if group.phase in (PG_PENDING, PG_INQUEUE)]
    if not waiting:   # most PodGroups of a busy cluster run: the phase is looked at first
        return job_first
    named = {job.key for job in jobs}
    added = 0
    none = np.zeros(0, dtype=np.int64)
    for key, group in waiting:
        if key in named:
            continue
        q = queue_index.get(group.queue, -1)
        problem = group.problem or (f"queue {group.queue} does not exist" if q < 0 else
                                    f"queue {group.queue} is not a leaf queue" if not leaf[q] else None)
        min_res = min_resource_vector(group, index, r)
        priority = (state.priority_classes.get(group.priority_class, state.default_priority)
                    if group.priority_class else state.default_priority)
        jobs.append(JobInfo(len(jobs), key, group, False, q, group.queue, group.min_member,
                            dict(group.min_task_member), min_res, priority, group.creation, group.uid, group.phase,
                            none, problem))
        added += 1
    if not added:
        return job_first
    return np.concatenate([job_first, np.full(added, job_first[-1], dtype=np.int64)])


# What each kind of inter-pod rule reads of a pod's rules (Snapshot.rule_kinds).
RULE_KINDS: dict[str, Callable[[PodRules], bool]] = {
    "podaffinity": lambda r: bool(r.affinity or r.anti_affinity or r.preferred_affinity or r.preferred_anti_affinity),
    "podtopologyspread": lambda r: bool(r.spread),
    "nodeports": lambda r: bool(r.host_ports),
}
_RULE_KINDS_TABLE = "rule-kinds"


def distinct_rules(rule_pods: list[Pod]) -> list[PodRules]:
    """The pods' rules objects, each once (by identity), in the order first seen."""
    return list({id(r): r for r in map(_RULES_OF, rule_pods)}.values())


def rule_label_keys(rule_pods: list[Pod]) -> tuple[str, ...]:
    """The label keys any inter-pod selector of these pods reads (sorted): pods that agree on
    them (and on namespace and rules) are alike to every rule, whatever their other labels."""
    keys: set[str] = set()
    # Distinct by identity: a union of keys needs no equal rules merged (hashing 40,000 rules by
    # value costs more than reading a shared one's terms again).
    for rules in {id(pod.rules): pod.rules for pod in rule_pods}.values():
        terms = [*rules.affinity, *rules.anti_affinity, *(w.term for w in rules.preferred_affinity),
                 *(w.term for w in rules.preferred_anti_affinity)]
        for term in terms:
            if term.selector is not None:
                keys |= term.selector.keys()
        for c in rules.spread:
            if c.selector is not None:
                keys |= c.selector.keys()
    return tuple(sorted(keys))


def rule_selectors(rule_pods: list[Pod], keys: tuple[str, ...]) -> SelectorSet:
    """The inter-pod selectors of these pods' rules, interned: task classes key on which of them
    a pod's labels satisfy (runtime.engine.kernels.task_columns)."""
    selectors = []
    for rules in {id(pod.rules): pod.rules for pod in rule_pods}.values():
        for term in (*rules.affinity, *rules.anti_affinity, *(w.term for w in rules.preferred_affinity),
                     *(w.term for w in rules.preferred_anti_affinity)):
            if term.selector is not None:
                selectors.append(term.selector)
        selectors.extend(c.selector for c in rules.spread if c.selector is not None)
    return SelectorSet(selectors, keys)


class Topology:
    """Each node's domain under a topology key: the nodes' distinct values of that label,
    numbered; computed on first use per key, kept with the node arrays across cycles."""

    def __init__(self, objects: list[Node]):
        self._objects = objects
        self._keys: dict[str, "Domains"] = {}

    def domains(self, key: str) -> "Domains":
        found = self._keys.get(key)
        if found is None:
            values: dict[str, int] = {}
            of = np.array([values.setdefault(node.labels[key], len(values)) if key in node.labels else -1
                           for node in self._objects], dtype=np.int64)
            order = np.argsort(of, kind="stable")
            starts = np.searchsorted(of[order], np.arange(len(values) + 1))
            found = self._keys[key] = Domains(key, of, len(values), order, starts, list(values))
        return found


@dataclass(frozen=True)
class Domains:
    key: str
    of: np.ndarray                   # (N,) int64: each node's domain, -1 where the node lacks the label
    count: int
    _order: np.ndarray               # nodes sorted by domain (those without the label first)
    _starts: np.ndarray              # domain d's nodes are _order[_starts[d]:_starts[d + 1]]
    values: list[str]

    def nodes(self, d: int) -> np.ndarray:
        """Domain d's node rows (read only), kept in `kept_nodes`: the counting rules ask for a
        domain's nodes on each placement that changes its count."""
        found = self.kept_nodes[d]
        if found is None:
            found = self.kept_nodes[d] = self._order[self._starts[d]:self._starts[d + 1]]
        return found

    @cached_property
    def kept_nodes(self) -> list[np.ndarray | None]:
        """`nodes(d)` per domain d, None where not asked yet (a hot caller reads it first)."""
        self._order.flags.writeable = False      # the domains' node lists are views of it
        return [None] * self.count

    # As lists (read only), for the counting rules' per-placement reads: made once and kept with
    # the Domains, which the node arrays keep across cycles (a hostname key's 10,000 rows).
    @cached_property
    def of_list(self) -> list[int]:
        return self.of.tolist()

    @cached_property
    def sizes(self) -> list[int]:
        """How many nodes each domain has."""
        return np.diff(self._starts).tolist()


def _resource_list(state: ClusterState, plan: Plan, managed: set[str], shapes: list[dict[str, int]],
                   cache: SnapshotCache) -> tuple[str, ...]:
    seen: set[str] = set(managed)
    seen.update(cache.node_resources(state))
    for requests in shapes:
        seen.update(requests)
    for q in plan.queues:
        for m in (q.capability, q.guarantee, q.deserved, q.borrow_limit):
            seen.update(m or {})
    for q in state.queues.values():
        for m in (q.capability, q.guarantee, q.deserved):
            seen.update(m or {})
    for d in plan.devices:
        seen.add(d.resource)
    return BASE_RESOURCES + tuple(sorted(seen - set(BASE_RESOURCES)))


def _merge_counted(scan: PodScan, counted: SettledPods, node_pos: dict[str, int]) -> np.ndarray:
    """Adds pods the state only counts to the scan: their request maps to its shapes, ours to
    its settled counts. Returns the room they hold as rows of (node row or -1, shape, ours, pods)."""
    sid_of = {tuple(shape.items()): sid for sid, shape in enumerate(scan.shapes)}

    def shape_id(items: tuple) -> int:
        sid = sid_of.get(items)
        if sid is None:
            sid = sid_of[items] = len(scan.shapes)
            scan.shapes.append(dict(items))
        return sid

    for (queue, items), count in counted.by_queue.items():
        key = (queue, shape_id(items))
        scan.settled[key] = scan.settled.get(key, 0) + count
    rows = [(node_pos.get(node, -1), shape_id(items), ours, count)
            for (node, items, ours), count in counted.by_node.items()]
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _fold_settled(counts: dict[tuple[str | None, int], int], shapes: np.ndarray, queue_index: dict[str, int],
                  q_n: int, r: int) -> tuple[np.ndarray | None, int]:
    """Settled lone pods' requests per queue. A pod naming an unknown queue counts nowhere, as
    its job would not (build_jobs gives it queue -1)."""
    if not counts:
        return None, 0
    settled = np.zeros((q_n, r), dtype=np.int64)
    for (queue, sid), count in counts.items():
        q = queue_index.get(queue or cat.DEFAULT_QUEUE, -1)
        if q >= 0:
            settled[q] += shapes[sid] * count
    return settled, sum(counts.values())


def _bitset(rows: list[Iterable[int]], width: int) -> np.ndarray:
    words = max(1, (width + 63) // 64)
    out = np.zeros((len(rows), words), dtype=np.uint64)
    for i, bits in enumerate(rows):
        for b in bits:
            out[i, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return out


def cluster_total(allocatable: np.ndarray, schedulable: np.ndarray) -> np.ndarray:
    """Σ allocatable of the schedulable nodes per resource, below UNLIMITED (each node's at most
    MAX_NODE_QUANTITY: int64 holds the sum of 2,048 of them; beyond, it is summed exactly)."""
    rows = allocatable[schedulable]
    if len(rows) * MAX_NODE_QUANTITY < UNLIMITED:
        return rows.sum(axis=0, dtype=np.int64)
    return np.minimum(rows.sum(axis=0, dtype=object), UNLIMITED - 1).astype(np.int64)


def _build_nodes(state: ClusterState, resources: tuple[str, ...]) -> _NodeArrays:
    names = sorted(state.nodes)
    objects = [state.nodes[n] for n in names]
    index = {r: i for i, r in enumerate(resources)}
    allocatable = np.zeros((len(names), len(resources)), dtype=np.int64)
    label_index: dict[tuple[str, str], int] = {}
    label_key_index: dict[str, int] = {}
    taint_index: dict[Taint, int] = {}
    prefer_index: dict[Taint, int] = {}
    label_rows, taint_rows, prefer_rows = [], [], []
    for i, node in enumerate(objects):
        for res, amount in node.allocatable.items():   # bounded, as objects.py reads a Node
            allocatable[i, index[res]] = min(amount, MAX_NODE_QUANTITY)
        bits = []
        for k, v in node.labels.items():
            bits.append(label_key_index.setdefault(k, len(label_index) + len(label_key_index)))
            bits.append(label_index.setdefault((k, v), len(label_index) + len(label_key_index)))
        label_rows.append(bits)
        taint_rows.append([taint_index.setdefault(t, len(taint_index)) for t in node.taints
                           if t.effect in ("NoSchedule", "NoExecute")])
        prefer_rows.append([prefer_index.setdefault(t, len(prefer_index)) for t in node.taints
                            if t.effect == "PreferNoSchedule"])
    return _NodeArrays(
        generation=state.node_generation, resources=resources, names=names,
        objects=objects,
        allocatable=allocatable, schedulable=np.array([not n.unschedulable for n in objects], dtype=bool),
        label_bits=_bitset(label_rows, len(label_index) + len(label_key_index)), label_index=label_index,
        label_key_index=label_key_index, taint_bits=_bitset(taint_rows, len(taint_index)),
        prefer_taint_bits=_bitset(prefer_rows, len(prefer_index)), taints=list(taint_index),
        prefer_taints=list(prefer_index), topology=Topology(objects),
    )


HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"


MAX_QUEUE_DEPTH = 64   # levels below root; Volcano sets none. A queue deeper is invalid (its jobs wait).


def _annotated_hierarchy(annotations: dict[str, str]) -> tuple[tuple[str, float], ...] | None:
    """The queue's path below root from Volcano's annotations ("root/eng/prod", weights
    "1/2/8"; a weight below 1 or missing counts 1), or None without them."""
    path = annotations.get(HIERARCHY_ANNOTATION)
    if not path:
        return None
    names = path.split("/")[1:]
    weights = annotations.get(HIERARCHY_WEIGHTS_ANNOTATION, "").split("/")[1:]
    out = []
    for i, name in enumerate(names):
        try:
            weight = float(weights[i])
        except (IndexError, ValueError):
            weight = 1.0
        out.append((name, max(weight, 1.0)))
    return tuple(out)


def _hierarchies(queues: list[QueueInfo], annotated: dict[int, tuple[tuple[str, float], ...]]) -> None:
    """Each queue's path below root for hierarchical drf: its annotations' path, else its parent
    chain and weights, each chain built once from its parent's (top down)."""
    chains: dict[int, tuple[tuple[str, float], ...]] = {0: ()}
    order = [0]
    for q in order:
        order.extend(queues[q].children)
        if q:
            info = queues[q]
            chains[q] = chains[info.parent] + ((info.name, float(max(info.weight, 1))),)
            info.hierarchy = annotated.get(q, chains[q])


def parent_of(specs: dict[str, QueuePlan], name: str) -> str:
    """The parent queue `name` names (root when none): one step of a chain."""
    return specs[name].parent or cat.ROOT_QUEUE


def _loop_text(loop: list[str], start: int) -> str:
    """The parent cycle from loop[start] round to it again; a long one by its ends."""
    n = len(loop)
    names = [loop[(start + i) % n] for i in range(min(n, 8))]
    if n > 8:
        names.append(f"… ({n} queues)")
    return " → ".join(names + [loop[start]])


def _ancestry_problems(specs: dict[str, QueuePlan], names: Iterable[str]) -> dict[str, str | None]:
    """Why each queue has no place in the hierarchy: an ancestor that does not exist, a parent
    cycle (Volcano's webhook refuses both when a Queue is made; objects made without it, or a
    parent deleted later, still arrive), or more than MAX_QUEUE_DEPTH levels below root. Each
    queue's chain is walked once: a walk stops at the first queue already known."""
    # Per queue: ("ok", depth) | ("missing", last queue of the chain, the parent it names)
    # | ("cycle", the loop, where this queue's walk enters it).
    known: dict[str, tuple] = {}
    for name in names:
        path: list[str] = []
        at: dict[str, int] = {}
        cur = name
        while True:
            if cur == cat.ROOT_QUEUE:
                base: tuple = ("ok", 0)
                break
            if cur in known:
                base = known[cur]
                break
            if cur not in specs:
                base = ("missing", path[-1], cur)
                break
            if cur in at:   # a cycle: each queue on it enters it at itself
                first = at[cur]
                loop = path[first:]
                for k, member in enumerate(loop):
                    known[member] = ("cycle", loop, k)
                del path[first:]
                base = known[cur]
                break
            at[cur] = len(path)
            path.append(cur)
            cur = parent_of(specs, cur)
        for member in reversed(path):
            base = ("ok", base[1] + 1) if base[0] == "ok" else base
            known[member] = base
    out: dict[str, str | None] = {}
    for name in names:
        kind, *rest = known[name]
        if kind == "ok":
            deep = rest[0] > MAX_QUEUE_DEPTH
            out[name] = f"queue {name} is nested deeper than {MAX_QUEUE_DEPTH} levels" if deep else None
        elif kind == "missing":
            last, parent = rest
            whose = "its parent" if last == name else f"its ancestor {last}'s parent"
            out[name] = f"queue {name} cannot be used: {whose} {parent} does not exist"
        else:
            out[name] = f"queue {name} cannot be used: its parents form a cycle ({_loop_text(*rest)})"
    return out


def _build_queues(state: ClusterState, plan: Plan, index: dict[str, int], r: int):
    specs: dict[str, QueuePlan] = {}
    for q in plan.queues:
        specs[q.name] = q
    for obj in state.queues.values():
        existing = specs.get(obj.name)
        if existing is not None and existing.declared:
            continue   # the policy wins
        specs[obj.name] = QueuePlan(
            name=obj.name, parent=obj.parent or cat.ROOT_QUEUE, weight=obj.weight, capability=obj.capability,
            guarantee=obj.guarantee, deserved=obj.deserved, priority=obj.priority, reclaimable=obj.reclaimable,
            state=obj.state, declared=False, dequeue=obj.dequeue)
    queues = [QueueInfo(0, cat.ROOT_QUEUE, -1, 1, 0, False, True, True, True)]
    queue_index = {cat.ROOT_QUEUE: 0}
    ordered = sorted(s for s in specs if s != cat.ROOT_QUEUE)
    for name in ordered:
        q = specs[name]
        queue_index[name] = len(queues)
        queues.append(QueueInfo(len(queues), name, 0, q.weight, q.priority, q.reclaimable, q.borrow,
                                q.state == "open", q.name in {p.name for p in plan.queues if p.declared}))
    ancestry = _ancestry_problems(specs, ordered)
    annotated: dict[int, tuple[tuple[str, float], ...]] = {}
    for name in ordered:
        q = specs[name]
        info = queues[queue_index[name]]
        obj = state.queues.get(name)
        path = _annotated_hierarchy(obj.annotations) if obj is not None else None
        if path is not None and len(path) > MAX_QUEUE_DEPTH:
            ancestry[name] = ancestry[name] or f"queue {name} is nested deeper than {MAX_QUEUE_DEPTH} levels"
        elif path is not None:
            annotated[info.index] = path
        info.problem = (f"queue {name} is invalid: {obj.problem}" if obj is not None and obj.problem
                        and not info.declared_in_policy else ancestry[name])
        info.dequeue = q.dequeue
        info.node_groups = _node_groups(q, obj if not info.declared_in_policy else None)
        if info.node_groups is not None and not info.node_groups.empty and not info.problem \
                and plan.plugin("nodegroup") is None:
            # Volcano ignores a Queue's affinity without its nodegroup plugin; we say so instead.
            info.problem = (f"queue {name} sets spec.affinity (node groups), which only the nodegroup plugin "
                            f"evaluates, and the policy does not enable it")
        dimension = next((r for m in (q.capability, q.guarantee, q.deserved) for r in (m or {})
                          if is_capacity_dimension(r)), None)
        if dimension is not None and not info.problem:     # lint refuses it in a policy (PD217)
            info.problem = (f"queue {name} sets {dimension}, a quota on a DeviceClass's consumable capacity, which "
                            f"is not counted (a class's device count, deviceclass/<class>, is)")
        # A queue whose ancestry is broken hangs under root: walking it would never end or
        # reach nothing. (Only Queue objects can be so: the compiler checks the policy's.)
        info.parent = 0 if info.problem else queue_index[q.parent or cat.ROOT_QUEUE]
    if cat.ROOT_QUEUE in specs:      # a Queue named root (or the policy's `queue root`) may name node groups
        root = specs[cat.ROOT_QUEUE]
        queues[0].node_groups = _node_groups(root, state.queues.get(cat.ROOT_QUEUE) if not root.declared else None)
    for info in queues[1:]:
        queues[info.parent].children.append(info.index)
    _hierarchies(queues, annotated)
    q_n = len(queues)
    capability = np.full((q_n, r), UNLIMITED, dtype=np.int64)
    guarantee = np.zeros((q_n, r), dtype=np.int64)
    deserved = np.full((q_n, r), UNLIMITED, dtype=np.int64)
    borrow_limit = np.full((q_n, r), UNLIMITED, dtype=np.int64)
    for name, qi in queue_index.items():
        q = specs.get(name)
        if q is None:
            continue
        # A queue that cannot run its jobs holds no room for them either.
        promises = ((guarantee, q.guarantee), (deserved, q.deserved)) if not queues[qi].problem else ()
        for arr, values in ((capability, q.capability), *promises, (borrow_limit, q.borrow_limit)):
            for res, amount in (values or {}).items():
                if res in index:
                    arr[qi, index[res]] = amount
    return queues, queue_index, capability, guarantee, deserved, borrow_limit


# --- devices ---------------------------------------------------------------------------------

def parse_card_groups(value: str) -> list[list[int]]:
    """`0-3_4-7` or `0.1_2.3` -> [[0,1,2,3],[4,5,6,7]] (label values allow only [-_.A-Za-z0-9])."""
    groups = []
    for part in value.split("_"):
        cards: list[int] = []
        for item in part.split("."):
            if "-" in item:
                lo, _, hi = item.partition("-")
                cards.extend(range(int(lo), int(hi) + 1))
            elif item:
                cards.append(int(item))
        if cards:
            groups.append(cards)
    return groups


def _build_inventory(snap: Snapshot, device: DevicePlan, state: ClusterState) -> DeviceInventory:
    mem_res = memory_resource_of(device)
    unit = memory_unit_of(mem_res)
    card_node, card_local, card_island, card_memory, card_healthy = [], [], [], [], []
    first_card: dict[int, int] = {}
    model_ok = np.ones(snap.n_nodes, dtype=bool)
    topo_label = TOPOLOGY_LABELS.get(device.topology)
    for ni, node in enumerate(snap.node_objects):
        count = int(node.allocatable.get(device.resource, 0))
        if device.models:
            model_ok[ni] = card_model(node.labels, device.model_label) in device.models
        if count <= 0:
            continue
        if device.card_memory:
            per_card = device.card_memory
        elif mem_res and node.allocatable.get(mem_res):
            per_card = node.allocatable[mem_res] * unit // count
        else:
            # GPU Feature Discovery's labels; 0: unknown (the pod's reason says so).
            per_card = gfd_card_memory(node.labels, device.resource, count) or 0
        islands: dict[int, int] = {}
        if topo_label and node.labels.get(topo_label):
            try:
                for g, cards in enumerate(parse_card_groups(node.labels[topo_label])):
                    for c in cards:
                        islands[c] = g
            except ValueError:
                islands = {}
        elif device.topology == "numa":
            islands = hami_numa_groups(node.annotations)     # our label above overrides HAMi's register
        first_card[ni] = len(card_node)
        broken = unhealthy_cards(node.annotations) if device.resource == GPU_NUMBER else ()
        for c in range(count):
            card_node.append(ni)
            card_local.append(c)
            card_island.append(islands.get(c, 0))
            card_memory.append(per_card)
            card_healthy.append(c not in broken)
    c_n = len(card_node)
    inv = DeviceInventory(
        plan=device, memory_resource=mem_res, memory_unit=unit,
        card_node=np.array(card_node, dtype=np.int64), card_local=np.array(card_local, dtype=np.int64),
        card_island=np.array(card_island, dtype=np.int64), card_memory=np.array(card_memory, dtype=np.int64),
        used_memory=np.zeros(c_n, dtype=np.int64), used_compute=np.zeros(c_n, dtype=np.int64),
        tasks=np.zeros(c_n, dtype=np.int64), whole=np.zeros(c_n, dtype=bool), model_ok=model_ok,
        healthy=np.array(card_healthy, dtype=bool),
    )
    node_pos = {name: i for i, name in enumerate(snap.node_names)}
    for pod in state.pods.values():
        if not pod.node_name or pod.terminal or pod.node_name not in node_pos:
            continue
        ni = node_pos[pod.node_name]
        if ni not in first_card:
            continue
        cards = held_cards(pod, device.resource, mem_res)
        if not cards:
            continue
        need = device_need(device, mem_res, unit, pod.requests)
        for c in cards:
            ci = first_card[ni] + c
            if ci >= c_n or inv.card_node[ci] != ni:
                continue
            if device.sharing == "whole":
                inv.whole[ci] = True
            else:
                inv.used_memory[ci] += need.memory
                inv.used_compute[ci] += need.compute
            inv.tasks[ci] += 1
    return inv


@dataclass(frozen=True)
class DeviceNeed:
    cards: int
    memory: int          # bytes per card (shared), 0 for whole cards
    compute: int         # percent per card (shared)


def device_need(device: DevicePlan, mem_res: str | None, unit: int, requests: dict[str, int]) -> DeviceNeed:
    """What a pod asks of one device plan: how many cards, and per card memory and compute."""
    if device.sharing == "whole":
        return DeviceNeed(int(requests.get(device.resource, 0)), 0, 0)
    memory = int(requests.get(mem_res, 0)) * unit if mem_res else 0
    cards = int(requests.get(device.resource, 0)) or (1 if memory else 0)
    if cards == 0:
        return DeviceNeed(0, 0, 0)
    if memory == 0 and device.card_memory:
        memory = device.card_memory      # a shared-plan card request without memory takes a card
    if device.slice and memory:
        memory = -(-memory // device.slice) * device.slice
    if device.cores_resource and requests.get(device.cores_resource):
        compute = int(requests[device.cores_resource])
    elif device.compute_percent and device.slice and memory:
        compute = int(round(memory // device.slice * device.compute_percent))
    else:
        compute = 0
    return DeviceNeed(cards, memory, min(compute, 100))
