"""The mutable cluster model: nodes, pods, PodGroups, Queues and PriorityClasses.

`ClusterState` is what a connector (the simulator, the Kubernetes watcher) keeps up to date
and what `runtime.engine.cycle.run_cycle` reads. It knows nothing about the Plan: the snapshot joins
the two. Resource maps are {resource: int base units} (cpu in millicores, memory in bytes).

State transitions a simulator needs:
- `apply(decisions)`: bindings make pods run on their node (their claims bound first, as the
  PV controller and a provisioner would: runtime.cluster.storage.bind_claims), evictions mark pods
  releasing, PodGroup phases and conditions are recorded;
- `advance()`: releasing pods leave (as a kubelet would after the grace period);
- `complete_pod(key)`: a pod finished, it frees its node's resources but still counts for its
  gang (Succeeded);
- add/remove of every object kind.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from compiler.catalog import DEFAULT_QUEUE
from runtime.cluster.selectors import LabelSelector, SelectorTerm
from runtime.cluster.dra import Dra, release_pod, with_allocation
from runtime.cluster.numa import NumaTopology
from runtime.cluster.storage import Storage, bind_claims
from runtime.cluster.topology import HyperNode, Topology, resolve
from runtime.cluster.topology_labels import LabelTopology, derive_hypernodes

if TYPE_CHECKING:  # pragma: no cover
    from runtime.cluster.decisions import Decisions, Reason
    from runtime.cluster.dra import PodResourceClaim
    from runtime.cluster.nodeusage import NodeUsage
    from runtime.cluster.storage import PodClaim

GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
# A pod without a PodGroup runs in this queue, as Volcano's PodGroup controller puts the group it makes.
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
REVOCABLE_ZONE_ANNOTATION = "volcano.sh/revocable-zone"   # on pods (tdm); the same key labels revocable nodes
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})       # what Go's strconv.ParseBool takes as true
GPU_INDEX_ANNOTATION = "volcano.sh/gpu-index"
VGPU_IDS_ANNOTATION = "volcano.sh/vgpu-ids-new"     # HAMi vGPU's cards of a pod (runtime/engine/devices_vgpu.py)
DEFAULT_SCHEDULER = "volcano"
DEFAULT_MAX_PODS = 110
# The most of any one resource a node may offer, in base units (2^50: 1 PiB of memory, 10^12
# CPUs): a Node above it is invalid, and the snapshot bounds any node given in memory to it, so
# no sum over nodes (8,192 of them at the bound) can pass int64.
MAX_NODE_QUANTITY = 2**50
# A pod's request of a resource is read as at most one more than that: a pod asking more fits no
# node either way (it waits, "fits no node"), and no sum of requests wraps int64 below 8,192 such pods.
MAX_POD_REQUEST = MAX_NODE_QUANTITY + 1
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
# Namespace objects carry this label with their own name (the API server sets it), so a
# namespaceSelector can select by name even where no Namespace object was read.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# Pod phases as Kubernetes names them.
POD_PENDING = "Pending"
POD_RUNNING = "Running"
POD_SUCCEEDED = "Succeeded"
POD_FAILED = "Failed"

# PodGroup phases.
PG_PENDING = "Pending"
PG_INQUEUE = "Inqueue"
PG_RUNNING = "Running"
PG_COMPLETED = "Completed"
PG_UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str            # NoSchedule | PreferNoSchedule | NoExecute

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}" if self.value else f"{{{self.key}}}"


@dataclass(frozen=True)
class Toleration:
    key: str = ""          # empty key with operator Exists tolerates everything
    operator: str = "Equal"
    value: str = ""
    effect: str = ""       # empty matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True)
class PodAffinityTerm:
    """One podAffinity/podAntiAffinity term, its namespaces resolved: `namespaces` lists names
    (the pod's own when the term names none and has no namespaceSelector); `namespace_selector`
    selects more by the Namespace objects' labels (empty: every namespace). matchLabelKeys and
    mismatchLabelKeys are already merged into `selector`, as the API server does."""

    topology_key: str
    selector: LabelSelector | None            # None matches no pod
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None

    # Hashed once (as PodRules): the inter-pod rules key their tables by terms every cycle.
    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash((self.topology_key, self.selector, self.namespaces, self.namespace_selector))

    def matches(self, namespace: str, labels: Mapping[str, str],
                namespace_labels: Callable[[str], Mapping[str, str]]) -> bool:
        if self.selector is None or not self.selector.matches(labels):
            return False
        if namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels(namespace))


@dataclass(frozen=True)
class WeightedTerm:
    weight: int                                # 1..100
    term: PodAffinityTerm


@dataclass(frozen=True)
class SpreadConstraint:
    """One topologySpreadConstraints entry (matchLabelKeys merged into `selector`)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str                    # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector | None             # None: counts no pod
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"        # Honor | Ignore: count only nodes the pod's affinity allows
    node_taints_policy: str = "Ignore"         # Honor | Ignore: count only nodes whose taints it tolerates

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable == "DoNotSchedule"


@dataclass(frozen=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"                        # 0.0.0.0 takes the port on every address

    def conflicts(self, other: "HostPort") -> bool:
        return (self.port == other.port and self.protocol == other.protocol
                and (self.ip == other.ip or WILDCARD_IP in (self.ip, other.ip)))


WILDCARD_IP = "0.0.0.0"


@dataclass(frozen=True)
class PodRules:
    """What makes a pod's placement depend on where other pods are (inter-pod affinity, topology
    spread, host ports). None on a pod that has none of them: most pods."""

    affinity: tuple[PodAffinityTerm, ...] = ()             # required podAffinity
    anti_affinity: tuple[PodAffinityTerm, ...] = ()        # required podAntiAffinity
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()

    def __bool__(self) -> bool:
        return self._any

    @cached_property
    def _any(self) -> bool:     # asked of every class's rules by each rule as a session opens
        return bool(self.affinity or self.anti_affinity or self.preferred_affinity or self.preferred_anti_affinity
                    or self.spread or self.host_ports)

    # Hashed once: a cycle looks rules up by value for every pod that carries them, and a frozen
    # dataclass would hash all its nested terms each time.
    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash((self.affinity, self.anti_affinity, self.preferred_affinity, self.preferred_anti_affinity,
                     self.spread, self.host_ports))


@dataclass
class Node:
    name: str
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    # status.images: each image's names and size in bytes, as the kubelet reports them (the
    # nodeorder plugin's image locality, runtime.engine.images).
    images: tuple[tuple[tuple[str, ...], int], ...] = ()


# Slots: the snapshot's kernels read a pod's fields by member offset (runtime/engine/kernels/passes.py).
@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    requests: dict[str, int] = field(default_factory=dict)
    uid: str = ""
    node_name: str | None = None
    phase: str = POD_PENDING
    scheduler_name: str = DEFAULT_SCHEDULER
    group: str | None = None                   # PodGroup name (same namespace), None = implicit
    priority_class: str | None = None
    priority: int | None = None                # spec.priority when set; else from the class
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[SelectorTerm, ...] = ()
    preferred_terms: tuple[tuple[int, SelectorTerm], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    creation: float = 0.0                      # creationTimestamp as seconds; ties by uid
    releasing: bool = False                    # deletionTimestamp set (evicted, terminating)
    devices: dict[str, tuple[int, ...]] = field(default_factory=dict)
    rules: PodRules | None = None              # inter-pod affinity, topology spread, host ports
    scheduling_gates: tuple[str, ...] = ()     # spec.schedulingGates: never bound while any is left
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    # A field of the pod the scheduler does not evaluate (e.g. "spec.volumes[0].iscsi"): the pod
    # waits, with a reason naming it, rather than be placed as if the field were not there.
    unsupported: str | None = None
    # Why the connector holds the pod back (a runtime.cluster.decisions.Reason): the API server refused
    # its Binding for good, its PodGroup is invalid or names an invalid queue. It is never
    # placed while held, and waits with this reason.
    held_back: Reason | None = None
    # status.nominatedNodeName: the node whose room, being freed by victims, is held for it; and
    # since when (seconds, the cycle clock), for the reservation's time limit.
    nominated_node: str | None = None
    nominated_at: float | None = None
    # When its PodScheduled condition turned True (seconds; the simulator's clock when it binds
    # there): the cdp plugin's cooldown counts from it. None: not known (never protected).
    scheduled_at: float | None = None
    # Its containers' images as written, init containers first, one per container (the nodeorder
    # plugin's image locality, runtime.engine.images).
    images: tuple[str, ...] = ()
    # The PersistentVolumeClaims its volumes name (runtime.cluster.storage.PodClaim); None: no claims.
    volumes: tuple["PodClaim", ...] | None = None
    # Its spec.resourceClaims (Dynamic Resource Allocation: runtime.cluster.dra); None: no claims.
    resource_claims: tuple["PodResourceClaim", ...] | None = None
    # A Guaranteed pod's exclusive CPUs per regular container (runtime.cluster.numa.exclusive_cpus,
    # 0: the shared pool); None: not Guaranteed. The numa-aware plugin places them on NUMA nodes.
    numa_cpus: tuple[int, ...] | None = None
    # Per spec.containers entry its HAMi vGPU requests ({}: it asks none), for a pod of several
    # containers asking vGPU (one device list per container: runtime.engine.devices_vgpu.vgpu_needs);
    # (): `requests` says it.
    vgpu_containers: tuple[dict[str, int], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def task_role(self) -> str:
        """The vcjob task the pod is of: the annotation, else the label (as Volcano reads it)."""
        return self.annotations.get(TASK_SPEC_ANNOTATION) or self.labels.get(TASK_SPEC_ANNOTATION, "")

    @property
    def preemptable_setting(self) -> bool | None:
        """volcano.sh/preemptable: the annotation, else the label; None when neither is set, and a
        value that is not a boolean means no (as Volcano parses it, with Go's strconv.ParseBool)."""
        value = self.annotations.get(PREEMPTABLE_ANNOTATION)
        if value is None:
            value = self.labels.get(PREEMPTABLE_ANNOTATION)
        return None if value is None else value in GO_TRUE

    @property
    def preemptable(self) -> bool:
        """The pod's own say on whether it may be a victim (unset means yes); its PodGroup's
        spec.preemptable decides where the pod says nothing (runtime.engine.actions.eviction)."""
        return self.preemptable_setting is not False

    @property
    def revocable_zone(self) -> str:
        """Volcano's GetPodRevocableZone (the tdm plugin): "*" — it may run on revocable nodes while
        their zone is open — when the annotation volcano.sh/revocable-zone is "*", or, without that
        annotation, volcano.sh/preemptable (annotation) is true; else "" (a zone named otherwise is
        not supported, as in Volcano)."""
        zone = self.annotations.get(REVOCABLE_ZONE_ANNOTATION)
        if zone is not None:
            return "*" if zone == "*" else ""
        return "*" if self.annotations.get(PREEMPTABLE_ANNOTATION) in GO_TRUE else ""

    @property
    def terminal(self) -> bool:
        return self.phase in (POD_SUCCEEDED, POD_FAILED)


class InPlaceChanges:
    """Pods changed in place (the same object, other fields), by identity: what a cycle's pod scan
    kept from the last cycle (runtime.engine.snapshot.SnapshotCache) cannot see by itself, as it
    sees a pod replaced, added or removed. ClusterState's transitions (apply, complete_pod) note
    the pods they change; code changing a Pod of a state in place otherwise calls pod_changed.
    Ids only (no reference kept); a reader keeps (epoch, position) and reads what came after.
    The log is cleared at LIMIT entries and its epoch bumped: a reader of an older epoch scans
    every pod again."""

    LIMIT = 1 << 16

    def __init__(self) -> None:
        self.epoch = 0
        self.ids: list[int] = []

    def note(self, pod: "Pod") -> None:
        if len(self.ids) >= self.LIMIT:
            self.epoch += 1
            self.ids = []
        self.ids.append(id(pod))

    def since(self, epoch: int, position: int) -> list[int] | None:
        """The ids noted after (epoch, position); None when they are no longer known."""
        if epoch != self.epoch:
            return None
        return self.ids[position:]

    def mark(self) -> tuple[int, int]:
        return self.epoch, len(self.ids)


IN_PLACE = InPlaceChanges()


def pod_changed(pod: "Pod") -> None:
    """Say that `pod`, a pod of some ClusterState, was changed in place (a field assigned, its
    requests, labels or annotations changed): the next snapshot reads it again."""
    IN_PLACE.note(pod)


@dataclass(slots=True)      # slots: built field by field in kernels/passes.py
class Condition:
    type: str              # Unschedulable | Scheduled
    status: str            # "True" | "False"
    reason: str
    message: str


@dataclass(frozen=True)
class NetworkTopology:
    """A PodGroup's `spec.networkTopology` (Volcano's HyperNode placement): `hard` keeps the
    whole gang within one HyperNode of tier at most `highest_tier` (or of the tier named
    `highest_tier_name`, matched to HyperNodes' `spec.tierName`); `soft` prefers the tightest
    tier that fits and falls back to the whole cluster."""

    mode: str = "hard"                     # hard | soft
    highest_tier: int | None = None        # spec.networkTopology.highestTierAllowed
    highest_tier_name: str | None = None   # spec.networkTopology.highestTierName

    @property
    def hard(self) -> bool:
        return self.mode == "hard"


# The PodGroup annotation naming the HyperNode a job that asks for topology runs in: the lowest
# HyperNode holding all its placed pods (Volcano v1.12-v1.13 write it, v1.14 keeps it in memory).
JOB_ALLOCATED_HYPERNODE = "volcano.sh/job-allocated-hypernode"


@dataclass(frozen=True)
class SubGroupPolicy:
    """One entry of a PodGroup's `spec.subGroupPolicy` (Volcano's SubGroupPolicySpec): the pods
    that `selector` matches and that carry every label of `match_label_keys` (non-empty) form one
    sub-group per distinct tuple of those labels' values. A sub-group is a gang of `size` pods
    (subGroupSize) placed within one HyperNode by its own `network_topology`; the job is ready
    only when at least `min_groups` (minSubGroups) of the policy's sub-groups are."""

    name: str = ""
    size: int = 1                                  # subGroupSize
    min_groups: int = 0                            # minSubGroups
    selector: LabelSelector | None = None          # labelSelector (None: every pod)
    match_label_keys: tuple[str, ...] = ()         # matchLabelKeys
    network_topology: NetworkTopology | None = None

    def key_of(self, labels: Mapping[str, str]) -> tuple[str, ...] | None:
        """The sub-group of a pod with these labels under this policy, or None when the policy
        does not take it. As Volcano (getSubJobMatchValues), a policy without matchLabelKeys
        takes no pod: its pods stay in the job's default sub-group."""
        if self.selector is not None and not self.selector.matches(labels):
            return None
        if not self.match_label_keys:
            return None
        values = tuple(labels.get(k, "") for k in self.match_label_keys)
        return None if "" in values else values


@dataclass
class PodGroup:
    namespace: str
    name: str
    min_member: int = 1
    min_resources: dict[str, int] | None = None
    min_task_member: dict[str, int] = field(default_factory=dict)
    queue: str = "default"
    priority_class: str | None = None
    phase: str = PG_PENDING
    conditions: list[Condition] = field(default_factory=list)
    uid: str = ""
    creation: float = 0.0
    # spec.preemptable: whether its pods may be victims where a pod does not say itself
    # (volcano.sh/preemptable); None: not set (they may).
    preemptable: bool | None = None
    # A field of the spec the scheduler does not evaluate yet (e.g. "spec.networkTopology"):
    # the group's pods wait, saying so, rather than be placed as if it were not there.
    unsupported: str | None = None
    # spec.networkTopology when it asks something (None: no request, or an empty one).
    network_topology: NetworkTopology | None = None
    # spec.subGroupPolicy, in order (a pod goes to the first policy that takes it).
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    # metadata.annotations[volcano.sh/job-allocated-hypernode]: where the job runs ("" if unset).
    allocated_hypernode: str = ""
    # The sla plugin's waiting time: the annotations volcano.sh/sla-waiting-time, then
    # sla-waiting-time, as written (Volcano reads the first that parses).
    sla_waiting_times: tuple[str, ...] = ()
    # volcano.sh/preemptable on the PodGroup (annotation, else label; unset, or a value Go's
    # ParseBool refuses, means no): Volcano's JobInfo.Preemptable, which the tdm plugin reads.
    job_preemptable: bool = False
    # The job's disruption budget, annotations volcano.sh/jdb-min-available and
    # volcano.sh/jdb-max-unavailable as written ("" when unset): tdm's victims per job.
    budget: tuple[str, str] = ("", "")
    # The task-topology plugin's annotations (volcano.sh/task-topology-affinity, -anti-affinity,
    # -task-order) as (key, value) pairs, as written; Volcano's job controller copies a Job's
    # annotations to the PodGroup it creates.
    task_topology: tuple[tuple[str, str], ...] = ()

    @property
    def asks_topology(self) -> bool:
        """Whether the group or one of its sub-group policies asks for network topology."""
        return self.network_topology is not None or any(p.network_topology is not None for p in self.sub_groups)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def problem(self) -> str | None:
        """Why the group cannot run as it is (a field not evaluated), or None."""
        if self.unsupported is None:
            return None
        return (f"PodGroup {self.key} sets `{self.unsupported}`, which this scheduler does not evaluate yet: "
                f"its pods wait rather than be placed without it")


# A Queue's spec.dequeueStrategy: what its other jobs do in a cycle once one of its jobs failed
# to allocate (Volcano's docs/design/dequeue-strategy.md): go on (traverse), wait when of the
# same or lower priority (fifo), or wait when of lower priority (priorityfifo).
DEQUEUE_STRATEGIES = ("traverse", "fifo", "priorityfifo")
NODEGROUP_LABEL = "volcano.sh/nodegroup-name"    # the node label Volcano's nodegroup plugin reads


@dataclass(frozen=True)
class NodeGroupAffinity:
    """A queue's node groups (Queue spec.affinity, read by Volcano's nodegroup plugin): groups
    are values of the nodes' volcano.sh/nodegroup-name label."""

    required: frozenset[str] = frozenset()            # nodeGroupAffinity.required...
    preferred: frozenset[str] = frozenset()           # nodeGroupAffinity.preferred...
    anti_required: frozenset[str] = frozenset()       # nodeGroupAntiAffinity.required...
    anti_preferred: frozenset[str] = frozenset()      # nodeGroupAntiAffinity.preferred...

    @property
    def empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)


@dataclass
class QueueObject:
    """A `Queue` object of the cluster (the policy's queues are compiler.plan.QueuePlan)."""

    name: str
    weight: int = 1
    capability: dict[str, int] | None = None
    guarantee: dict[str, int] | None = None
    deserved: dict[str, int] | None = None
    reclaimable: bool = True
    priority: int = 0
    parent: str | None = None
    state: str = "open"
    annotations: dict[str, str] = field(default_factory=dict)   # volcano.sh/hierarchy (drf), ...
    uid: str = ""              # metadata.uid: what its Events name
    dequeue: str = "traverse"  # spec.dequeueStrategy (DEQUEUE_STRATEGIES)
    affinity: NodeGroupAffinity | None = None    # spec.affinity (None: not set)
    # Why the object cannot be used as it is (the connector keeps a Queue it could not read,
    # e.g. weight 0, under its name with this): its jobs wait saying so instead of being told
    # the queue does not exist.
    problem: str | None = None


@dataclass(frozen=True)
class SettledPods:
    """Pods a ClusterState leaves out of `pods` and only counts (runtime.kube.cache keeps the
    counts as the watch goes): pods of `scheduler_name` that are bound and not releasing, lone
    ones (no PodGroup) and the members of settled gangs (runtime.kube.settled.gang_settles), and
    bound pods of other schedulers, none holding device cards. A cycle needs of them only the
    room they hold and what they add to their queue, and only when its plan selects no victims
    (runtime.engine.snapshot.folds_settled). Pods of ours that succeeded hold nothing and are left out
    uncounted. A settled gang's PodGroup is Running and already says what the cycle would write;
    `groups` counts them per queue, for the Queue's status."""

    scheduler_name: str
    by_queue: dict[tuple[str | None, tuple], int]     # (queue, request items) -> our pods
    by_node: dict[tuple[str, tuple, bool], int]       # (node, request items, ours) -> pods
    groups: dict[str, int] = field(default_factory=dict)   # queue -> settled gangs (Running)
    # queue -> what settled gangs hold beyond their minResources (elastic: admission counts it free)
    elastic: dict[str, dict[str, int]] = field(default_factory=dict)


def member_settles(pod: Pod) -> bool:
    """Whether a pod of ours, once its job needs nothing more, is only room and a queue's total:
    bound and not releasing, or succeeded; holding no device cards (the card inventory reads
    them)."""
    if pod.devices or GPU_INDEX_ANNOTATION in pod.annotations or VGPU_IDS_ANNOTATION in pod.annotations \
            or pod.phase == POD_FAILED:
        return False
    if pod.rules:  # its affinity terms and ports bind other pods' placements: it stays listed
        return False
    if pod.volumes is not None:  # its volumes count toward attach limits and ReadWriteOncePod
        return False
    return pod.phase == POD_SUCCEEDED or (bool(pod.node_name) and not pod.releasing)


def settles(pod: Pod, scheduler_name: str) -> bool:
    """Whether a pod belongs in SettledPods on its own (its key also must not be in an eviction
    overlay); a pod of ours in a PodGroup settles only with its whole gang."""
    if pod.scheduler_name != scheduler_name:  # bound: it holds room (a finished one holds none)
        return pod.phase != POD_SUCCEEDED and member_settles(pod)
    return not pod.group and member_settles(pod)


def scheduled_condition(ready: int, size: int) -> Condition:
    """A Running PodGroup's condition (runtime.engine.kernels.collect writes the same, field by field)."""
    return Condition("Scheduled", "True", "Scheduled", f"{ready}/{size} tasks ready")


@dataclass(frozen=True)
class ResourceQuota:
    """A namespace's ResourceQuota as the resourcequota plugin reads it (Volcano reads its status:
    `hard` and `used` as the quota controller last wrote them), in base units by resource name."""

    namespace: str
    name: str
    hard: Mapping[str, int]
    used: Mapping[str, int]


@dataclass(frozen=True)
class DisruptionBudget:
    """A PodDisruptionBudget as the pdb plugin reads it (Volcano reads spec.selector and the
    disruption controller's status.disruptionsAllowed and status.disruptedPods)."""

    namespace: str
    name: str
    selector: "LabelSelector | None"
    allowed: int
    disrupted: frozenset[str] = frozenset()


@dataclass
class ClusterState:
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    podgroups: dict[str, PodGroup] = field(default_factory=dict)
    queues: dict[str, QueueObject] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    default_priority: int = 0                  # the globalDefault PriorityClass value, if any
    # Bumped whenever the node set or a node's static description changes; the snapshot cache
    # reuses its node arrays (labels, taints, allocatable) while it stays the same.
    node_generation: int = 0
    # Pods left out of `pods` and only counted (a snapshot of the cluster cache for a plan that
    # folds them); None: `pods` holds every pod.
    settled: SettledPods | None = None
    # Namespace objects' labels by name (a namespaceSelector of a pod affinity term reads them).
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    # With `settled`: the pods it counts, listed on demand (a cycle whose pods carry inter-pod
    # rules needs every placed pod's labels, not only its room).
    settled_pods: Callable[[], Iterable[Pod]] | None = None
    # PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes (runtime.cluster.storage).
    storage: Storage = field(default_factory=Storage)
    # Volcano's HyperNodes by name (runtime.cluster.topology); `topology()` resolves them.
    hypernodes: dict[str, HyperNode] = field(default_factory=dict)
    # DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates (runtime.cluster.dra).
    dra: Dra = field(default_factory=Dra)
    # Bumped whenever a HyperNode is added or removed (with node_generation: when to re-resolve).
    hypernode_generation: int = 0
    # Opt-in: HyperNodes derived from node labels (runtime.cluster.topology_labels) while the
    # cluster has no HyperNode objects; objects, when there are any, win.
    label_topology: LabelTopology | None = None
    # ResourceQuotas by namespace/name; None: not read (the connector watches them only while the
    # resourcequota plugin is on, and until listed the plugin holds jobs, saying so). Reading objects sets it.
    resource_quotas: dict[str, ResourceQuota] | None = None
    # PodDisruptionBudgets by namespace/name; None: not read (the connector watches them only while
    # the pdb plugin is on, and until listed the plugin lets no pod be a victim). Reading objects sets it.
    disruption_budgets: dict[str, DisruptionBudget] | None = None
    # Nodes' load by node name (runtime.cluster.nodeusage: the usage plugin's metrics source, read
    # off the scheduling path); None: no load is read (the plugin's filter passes and it scores 0).
    node_usage: dict[str, NodeUsage] | None = None
    # Volcano's resource exporter's Numatopology objects by node name (runtime.cluster.numa), as the
    # scheduler sees them: the CPUs its placements took since the exporter's last report taken out.
    numatopologies: dict[str, NumaTopology] = field(default_factory=dict)
    # The exclusive CPUs the numa-aware plugin gave a pod it bound: pod key -> (node, CPU ids); the
    # pod gives them back when it finishes or leaves (the kubelet frees them, the exporter reports it).
    numa_held: dict[str, tuple[str, frozenset[int]]] = field(default_factory=dict)
    _topology: tuple[tuple[int, int, int, int], Topology] | None = field(
        default=None, init=False, repr=False, compare=False)

    def namespace_labels(self, name: str) -> dict[str, str]:
        labels = self.namespaces.get(name)
        return labels if labels is not None else {NAMESPACE_NAME_LABEL: name}

    def queue_name_of(self, pod: Pod) -> str:
        """The queue a pod's job is in: its PodGroup's, else its queue annotation's, else default."""
        if pod.group:
            group = self.podgroups.get(f"{pod.namespace}/{pod.group}")
            if group is not None:
                return group.queue
        return pod.annotations.get(QUEUE_ANNOTATION) or DEFAULT_QUEUE

    def placed_pods(self) -> list[Pod]:
        """Every pod that holds room on a node (whoever's), settled ones included."""
        out = [p for p in self.pods.values() if p.node_name and not p.terminal]
        if self.settled is not None and self.settled_pods is not None:
            listed = self.pods.keys()
            out.extend(p for p in self.settled_pods() if p.key not in listed and p.node_name and not p.terminal)
        return out

    # --- objects ---------------------------------------------------------------------------
    def add_node(self, node: Node) -> None:
        self.nodes[node.name] = node
        self.node_generation += 1

    def remove_node(self, name: str) -> None:
        """A node leaves; its pods are gone with it (as after a node deletion)."""
        self.nodes.pop(name, None)
        for key in [k for k, p in self.pods.items() if p.node_name == name]:
            del self.pods[key]
        self.node_generation += 1

    def add_pod(self, pod: Pod) -> None:
        self.pods[pod.key] = pod

    def remove_pod(self, key: str) -> None:
        self.pods.pop(key, None)
        self.numa_give_back(key)

    def add_podgroup(self, group: PodGroup) -> None:
        self.podgroups[group.key] = group

    def remove_podgroup(self, key: str) -> None:
        self.podgroups.pop(key, None)

    def add_queue(self, queue: QueueObject) -> None:
        self.queues[queue.name] = queue

    def remove_queue(self, name: str) -> None:
        self.queues.pop(name, None)

    def add_hypernode(self, hypernode: HyperNode) -> None:
        self.hypernodes[hypernode.name] = hypernode
        self.hypernode_generation += 1

    def remove_hypernode(self, name: str) -> None:
        if self.hypernodes.pop(name, None) is not None:
            self.hypernode_generation += 1

    def add_numatopology(self, topology: NumaTopology) -> None:
        """The exporter's report of a node, as Volcano's cache takes it (api/node_info.go
        RefreshNumaSchedulerInfoByCrd): a report with at least as many free CPUs as the last one
        replaces the scheduler's view (pods left); one with fewer replaces it only when the view
        does not already have fewer (this scheduler's own placements, not reported yet)."""
        seen = self.numatopologies.get(topology.name)
        if seen is not None and topology.reported < seen.reported and len(seen.free_cpus) < len(topology.free_cpus):
            topology = dataclasses.replace(seen, reported=topology.reported)     # the view keeps our placements
        self.numatopologies[topology.name] = topology

    def remove_numatopology(self, name: str) -> None:
        self.numatopologies.pop(name, None)

    def numa_take(self, pod: str, node: str, cpus: frozenset[int]) -> None:
        """A bound pod holds these CPUs of its node's Numatopology (ours until the exporter reports)."""
        topology = self.numatopologies.get(node)
        if topology is None or not cpus:
            return
        self.numatopologies[node] = topology.with_free_cpus(topology.free_cpus - cpus)
        self.numa_held[pod] = (node, cpus)

    def numa_give_back(self, pod: str) -> None:
        """The pod finished or left: its exclusive CPUs are free again."""
        held = self.numa_held.pop(pod, None)
        if held is None:
            return
        topology = self.numatopologies.get(held[0])
        if topology is not None:
            self.numatopologies[held[0]] = topology.with_free_cpus(topology.free_cpus | held[1])

    def topology(self) -> Topology:
        """The HyperNodes resolved against the nodes, kept while neither generation changes
        (a node's labels changing bumps node_generation, as any change of its description). Without
        HyperNode objects and with `label_topology`, the HyperNodes derived from the nodes' labels."""
        key = (self.node_generation, self.hypernode_generation, len(self.nodes), len(self.hypernodes),
               id(self.label_topology))
        cached = self._topology
        if cached is None or cached[0] != key:
            if self.hypernodes or self.label_topology is None:
                resolved = resolve(self.hypernodes, self.nodes)
            else:
                resolved = resolve(derive_hypernodes(self.label_topology, self.nodes), self.nodes)
                resolved = dataclasses.replace(resolved, derived_from=self.label_topology.describe())
            cached = self._topology = (key, resolved)
        return cached[1]

    @property
    def has_hypernodes(self) -> bool:
        """Whether `topology()` has HyperNodes to resolve: objects, or labels to derive them from."""
        return bool(self.hypernodes) or self.label_topology is not None

    def pod_priority(self, pod: Pod) -> int:
        if pod.priority is not None:
            return pod.priority
        if pod.priority_class is not None:
            return self.priority_classes.get(pod.priority_class, self.default_priority)
        return self.default_priority

    def pods_on(self, node_name: str) -> list[Pod]:
        return [p for p in self.pods.values() if p.node_name == node_name]

    # --- transitions -----------------------------------------------------------------------
    def apply(self, decisions: "Decisions") -> None:
        """Make a cycle's decisions true, as the API server and kubelets would."""
        for key, node in decisions.pipelined.items():
            pod = self.pods.get(key)
            if pod is not None and pod.nominated_node != node:
                pod.nominated_node, pod.nominated_at = node, decisions.now
                IN_PLACE.note(pod)
        for key in decisions.released:
            pod = self.pods.get(key)
            if pod is not None:
                pod.nominated_node = pod.nominated_at = None
                IN_PLACE.note(pod)
        for binding in decisions.bindings:
            pod = self.pods.get(binding.pod)
            if pod is None or pod.node_name is not None:
                continue
            if binding.pod in decisions.volumes:
                bind_claims(self, decisions.volumes[binding.pod], binding.node)
            for claim, allocation in decisions.claims.get(binding.pod, ()):
                with_allocation(self.dra, claim, allocation, (pod.uid,))
            IN_PLACE.note(pod)
            pod.nominated_node = pod.nominated_at = None
            pod.node_name = binding.node
            pod.phase = POD_RUNNING
            pod.scheduled_at = decisions.now
            pod.devices = {res: tuple(cards) for res, cards in binding.devices.items()}
            if binding.devices:
                pod.annotations[GPU_INDEX_ANNOTATION] = ",".join(
                    str(c) for cards in binding.devices.values() for c in cards)
            if binding.pod in decisions.numa:
                self.numa_take(binding.pod, binding.node, decisions.numa[binding.pod])
        for eviction in decisions.evictions:
            pod = self.pods.get(eviction.pod)
            if pod is not None:
                pod.releasing = True
                IN_PLACE.note(pod)
        for status in decisions.podgroups:
            group = self.podgroups.get(status.name)
            if group is not None:
                group.phase = status.phase
                group.conditions = list(status.conditions)
        for key, hypernode in decisions.hypernodes.items():
            group = self.podgroups.get(key)
            if group is not None:
                group.allocated_hypernode = hypernode

    def advance(self) -> list[str]:
        """Releasing pods leave. Returns their keys. (A controller would recreate evicted pods
        of a job; the simulator decides whether to.)"""
        gone = [k for k, p in self.pods.items() if p.releasing]
        for key in gone:
            self.numa_give_back(key)
            if self.pods[key].resource_claims:     # its claims no longer reserved for it
                release_pod(self.dra, self.pods[key].uid, self.dra.claims)
            del self.pods[key]
        return gone

    def complete_pod(self, key: str, phase: str = POD_SUCCEEDED) -> None:
        pod = self.pods[key]
        pod.phase = phase
        IN_PLACE.note(pod)
        self.numa_give_back(key)

    def shallow_copy(self) -> "ClusterState":
        """A state whose maps are new and whose objects are shared: what a connection hands each
        cycle, so the scheduler may leave objects out of a cycle without losing them. Every kind
        of object is carried, whatever is added to this class later."""
        values = {}
        for f in fields(self):
            if not f.init:
                continue
            value = getattr(self, f.name)
            values[f.name] = (dict(value) if isinstance(value, dict) else
                              value.copy() if isinstance(value, (Storage, Dra)) else value)
        return ClusterState(**values)

    def merged_with(self, other: "ClusterState") -> "ClusterState":
        """A new state holding the objects of both (other wins on equal names)."""
        merged = ClusterState(
            nodes={**self.nodes, **other.nodes}, pods={**self.pods, **other.pods},
            podgroups={**self.podgroups, **other.podgroups}, queues={**self.queues, **other.queues},
            priority_classes={**self.priority_classes, **other.priority_classes},
            default_priority=other.default_priority or self.default_priority,
            namespaces={**self.namespaces, **other.namespaces},
            storage=self.storage.merged_with(other.storage),
            hypernodes={**self.hypernodes, **other.hypernodes},
            numatopologies={**self.numatopologies, **other.numatopologies},
            dra=self.dra.merged_with(other.dra),
            label_topology=other.label_topology or self.label_topology,
        )
        return merged


def group_key_of(pod: Pod) -> str:
    """The job a pod belongs to: its PodGroup, or an implicit one-pod group named after it."""
    if pod.group:
        return f"{pod.namespace}/{pod.group}"
    return f"{pod.namespace}/{pod.name}"


def total(maps: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out
