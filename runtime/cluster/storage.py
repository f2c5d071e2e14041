"""Storage objects as the scheduler reads them: PersistentVolumes, PersistentVolumeClaims,
StorageClasses and CSINodes (runtime.cluster.storagespec reads them from Kubernetes dicts), and what a
pod's claim comes to (`resolve_claims`): kube-scheduler's VolumeBinding classification.

A claim is *bound* once `spec.volumeName` is set and the PV controller finished the binding
(annotation `pv.kubernetes.io/bind-completed`, or `status.phase: Bound` — snapshot files written
by hand seldom carry the annotation). An unbound claim of a `WaitForFirstConsumer` class is
*delayed*: the scheduler chooses its node (and a static PV, when one fits) with the pod's. Every
other unbound claim is *immediate* and the pod waits for the PV controller to bind it. A claim
that is missing, being deleted or lost, or an ephemeral volume's claim the pod does not own,
keeps its pod waiting with kube-scheduler's words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from runtime.cluster.selectors import LabelSelector, MatchExpression, SelectorTerm

if TYPE_CHECKING:  # pragma: no cover
    from runtime.cluster.decisions import VolumeChoice
    from runtime.cluster.model import ClusterState, Pod

# Annotations and names of the PV controller and the scheduler's volume binder.
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")
NO_PROVISIONER = "kubernetes.io/no-provisioner"
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", READ_WRITE_ONCE_POD)
VOLUME_MODES = ("Filesystem", "Block")
# PV labels VolumeZone compares with the node's (the beta keys also match the GA ones).
ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
               "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
GA_ZONE_LABEL = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
                 "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}
# A node's own attach limit per CSI driver (older kubelets publish it there; CSINode wins).
ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
# In-tree volume sources counted under the CSI driver they migrated to (NodeVolumeLimits).
MIGRATED_DRIVERS = {
    "awsElasticBlockStore": ("ebs.csi.aws.com", "volumeID"),
    "gcePersistentDisk": ("pd.csi.storage.gke.io", "pdName"),
    "azureDisk": ("disk.csi.azure.com", "diskURI"),
    "cinder": ("cinder.csi.openstack.org", "volumeID"),
}

# Phases
PV_AVAILABLE = "Available"
CLAIM_BOUND = "Bound"
CLAIM_LOST = "Lost"


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PersistentVolume:
    name: str
    capacity: int                                  # bytes
    access_modes: tuple[str, ...] = ()
    storage_class: str = ""
    volume_mode: str = "Filesystem"
    # spec.nodeAffinity.required: nodes the volume is reachable from (None: every node)
    node_affinity: tuple[SelectorTerm, ...] | None = None
    claim_ref: ClaimRef | None = None
    phase: str = PV_AVAILABLE
    labels: Mapping[str, str] = field(default_factory=dict)
    csi_driver: str = ""                           # the attaching driver (CSI, or migrated in-tree)
    volume_handle: str = ""
    deleting: bool = False
    uid: str = ""
    resource_version: str = ""                     # a write's precondition (runtime/kube/volumes.py)

    def bound_to(self, claim: "PersistentVolumeClaim") -> bool:
        """Pre-bound or bound to this claim (its namespace and name, and uid when the ref has one)."""
        ref = self.claim_ref
        return (ref is not None and ref.namespace == claim.namespace and ref.name == claim.name
                and (not ref.uid or ref.uid == claim.uid))


@dataclass(frozen=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str = ""
    storage_class: str | None = None               # None: none named (and no default class)
    volume_name: str = ""
    phase: str = "Pending"
    access_modes: tuple[str, ...] = ()
    request: int = 0                               # bytes of spec.resources.requests.storage
    volume_mode: str = "Filesystem"
    selector: LabelSelector | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False
    owner_uid: str = ""                            # the controller ownerReference's uid
    resource_version: str = ""

    @cached_property
    def key(self) -> str:
        # Cached: the volume rule asks it several times per placement (a frozen dataclass's
        # cached_property writes the instance's dict directly; it is no field).
        return f"{self.namespace}/{self.name}"

    @property
    def fully_bound(self) -> bool:
        return bool(self.volume_name) and (BIND_COMPLETED in self.annotations or self.phase == CLAIM_BOUND)

    @property
    def selected_node(self) -> str | None:
        return self.annotations.get(SELECTED_NODE) or None


@dataclass(frozen=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = IMMEDIATE
    # allowedTopologies: nodes a new volume can be provisioned for (empty: any)
    allowed_topologies: tuple[SelectorTerm, ...] = ()
    default: bool = False

    @property
    def provisions(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER


@dataclass(frozen=True)
class CSINode:
    name: str                                      # the node's name
    limits: Mapping[str, int] = field(default_factory=dict)   # driver -> allocatable.count
    drivers: tuple[str, ...] = ()


@dataclass
class Storage:
    """The storage objects of a ClusterState, by key (claims: namespace/name)."""

    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    csinodes: dict[str, CSINode] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.volumes or self.claims or self.classes or self.csinodes)

    def merged_with(self, other: "Storage") -> "Storage":
        return Storage({**self.volumes, **other.volumes}, {**self.claims, **other.claims},
                       {**self.classes, **other.classes}, {**self.csinodes, **other.csinodes})

    def copy(self) -> "Storage":
        return Storage(dict(self.volumes), dict(self.claims), dict(self.classes), dict(self.csinodes))

    def class_of(self, claim: PersistentVolumeClaim) -> StorageClass | None:
        return self.classes.get(claim.storage_class) if claim.storage_class else None

    def default_class(self) -> str | None:
        """The default StorageClass a claim naming none gets (the DefaultStorageClass admission
        plugin's choice when several are marked: Kubernetes takes the newest; we the first by name)."""
        return next((c.name for c in sorted(self.classes.values(), key=lambda c: c.name) if c.default), None)


# --- a pod's claims ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PodClaim:
    """One claim a pod's volume names: `spec.volumes[i].persistentVolumeClaim.claimName`, or the
    claim of a generic ephemeral volume (`<pod>-<volume>`, which the pod must own)."""

    volume: str                                    # the pod's volume name
    claim: str                                     # the claim's name (pod's namespace)
    ephemeral: bool = False


BOUND, DELAYED, PREBOUND, SELECTED = "bound", "delayed", "prebound", "selected"


@dataclass(frozen=True)
class ClaimUse:
    """A claim of a waiting pod, resolved: `mode` bound (to `volume`), delayed (the scheduler
    picks a PV or provisioning), prebound (a PV's claimRef names it, the PV controller has not
    bound it yet) or selected (provisioning for `claim.selected_node` is under way)."""

    claim: PersistentVolumeClaim
    mode: str
    storage_class: StorageClass | None = None
    volume: PersistentVolume | None = None         # bound or prebound PV; None if missing

    @property
    def key(self) -> str:
        return self.claim.key


@dataclass(frozen=True)
class Unusable:
    """Why a pod's claims keep it waiting before any node is looked at (kube-scheduler's
    PreFilter answers, its exact words)."""

    message: str
    claim: str                                     # namespace/name of the claim it is about


def resolve_claims(pod: Pod, storage: Storage, refs: "ClaimRefIndex | None" = None,
                   ) -> tuple[tuple[ClaimUse, ...], Unusable | None]:
    """Each distinct claim of a waiting pod, resolved, or why the pod cannot be placed at all.
    `refs`: the PVs by the claim their claimRef names, when resolving many pods at once."""
    uses: list[ClaimUse] = []
    seen: set[str] = set()
    claims = pod.volumes or ()
    for ref in claims:
        key = f"{pod.namespace}/{ref.claim}"
        claim = storage.claims.get(key)
        if claim is None:
            if ref.ephemeral:
                return (), Unusable(f'waiting for ephemeral volume controller to create the persistentvolumeclaim '
                                    f'"{ref.claim}"', key)
            return (), Unusable(f'persistentvolumeclaim "{ref.claim}" not found', key)
        if claim.phase == CLAIM_LOST:
            return (), Unusable(f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume '
                                f'"{claim.volume_name}"', key)
        if claim.deleting:
            return (), Unusable(f'persistentvolumeclaim "{claim.name}" is being deleted', key)
        if ref.ephemeral and claim.owner_uid != pod.uid:
            return (), Unusable(f"PVC {key} was not created for pod {pod.key} (pod is not owner)", key)
        if key in seen:
            continue
        seen.add(key)
        uses.append(_use(claim, storage, refs))
    if any(u.mode == IMMEDIATE for u in uses):
        first = next(u for u in uses if u.mode == IMMEDIATE)
        return (), Unusable("pod has unbound immediate PersistentVolumeClaims", first.key)
    return tuple(uses), None


class ClaimRefIndex:
    """The PVs whose claimRef names a claim, by that claim's namespace/name, in the storage's
    order: finding a delayed claim's pre-bound PV without a pass over every PV per claim."""

    def __init__(self, storage: Storage):
        self._by_claim: dict[str, list[PersistentVolume]] = {}
        for pv in storage.volumes.values():
            if pv.claim_ref is not None:
                self._by_claim.setdefault(pv.claim_ref.key, []).append(pv)

    def prebound(self, claim: PersistentVolumeClaim) -> PersistentVolume | None:
        """The first PV (in the storage's order) bound or pre-bound to `claim`."""
        return next((pv for pv in self._by_claim.get(claim.key, ()) if pv.bound_to(claim)), None)


def _use(claim: PersistentVolumeClaim, storage: Storage, refs: ClaimRefIndex | None = None) -> ClaimUse:
    cls = storage.class_of(claim)
    if claim.fully_bound:
        return ClaimUse(claim, BOUND, cls, storage.volumes.get(claim.volume_name))
    delayed = cls is not None and cls.binding_mode == WAIT_FOR_FIRST_CONSUMER and not claim.volume_name
    if not delayed:       # pre-bound by its volumeName, or of a class that binds at once
        return ClaimUse(claim, IMMEDIATE, cls)
    if claim.selected_node is not None:
        return ClaimUse(claim, SELECTED, cls)
    if refs is None:
        refs = ClaimRefIndex(storage)
    prebound = refs.prebound(claim)
    if prebound is not None:
        return ClaimUse(claim, PREBOUND, cls, prebound)
    return ClaimUse(claim, DELAYED, cls)


def volume_fits(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """Whether an unclaimed PV can take a delayed claim, nodes aside (the PV controller's and
    volume binder's match: free and Available, the claim's class, at least its size, its
    volume mode, every access mode it asks, its selector)."""
    return (pv.claim_ref is None and pv.phase == PV_AVAILABLE and not pv.deleting
            and pv.storage_class == (claim.storage_class or "") and pv.capacity >= claim.request
            and pv.volume_mode == claim.volume_mode and all(m in pv.access_modes for m in claim.access_modes)
            and (claim.selector is None or claim.selector.matches(pv.labels)))


def attach_identity(pv: PersistentVolume | None, claim: PersistentVolumeClaim,
                    storage: Storage) -> tuple[str, str] | None:
    """(CSI driver, unique volume) NodeVolumeLimits counts a claim's volume under: the bound PV's
    driver and handle; for an unbound claim its class's provisioner and the claim itself."""
    if pv is not None:
        return (pv.csi_driver, f"{pv.csi_driver}/{pv.volume_handle}") if pv.csi_driver and pv.volume_handle \
            else None
    cls = storage.class_of(claim)
    if cls is None or not cls.provisions:
        return None
    return cls.provisioner, f"{cls.provisioner}/claim:{claim.key}"


def claims_of(pods: Iterable[Pod]) -> set[str]:
    return {f"{p.namespace}/{c.claim}" for p in pods for c in (p.volumes or ())}


# --- what a cycle's snapshot keeps of them ------------------------------------------------------

@dataclass(frozen=True)
class PlacedVolumes:
    """A pod on a node whose volumes count there: toward its drivers' attach limits, and as a
    user of its claims (ReadWriteOncePod)."""

    pod: Pod
    row: int
    leaving: bool
    claims: tuple[PersistentVolumeClaim, ...]
    attached: tuple[tuple[str, str], ...]          # (driver, unique volume)


@dataclass
class VolumeSnapshot:
    """The storage side of a cycle's snapshot (runtime.engine.snapshot.Snapshot.volumes), made only when
    some pod in play has claims: our waiting tasks' claims resolved (`uses`, by task), the
    tasks that cannot be placed at all and why (`held`), every placed pod's volumes."""

    storage: Storage
    uses: dict[int, tuple[ClaimUse, ...]]
    held: dict[int, Unusable]
    placed: list[PlacedVolumes]
    # task -> what tells its claims apart for the task classes (runtime.engine.kernels task_columns)
    class_keys: dict[int, tuple]


def claim_shape(claim: PersistentVolumeClaim) -> tuple:
    """What decides which PVs can take a delayed claim: claims alike share their candidates."""
    return (claim.storage_class or "", claim.request, tuple(sorted(claim.access_modes)), claim.volume_mode,
            claim.selector)


def volume_snapshot(storage: Storage, task_pods: list[Pod], waiting: Iterable[int], placed: Iterable[tuple[Pod, int]],
                    ) -> VolumeSnapshot:
    """`waiting`: the tasks (indices into task_pods) with claims still to place; `placed`: the
    pods with claims on a node (row)."""
    pending = [t for t in waiting]
    # A claim more than one pod names is told apart by name: once one of them is placed, the
    # others must follow its volume.
    counts: dict[str, int] = {}
    for t in pending:
        for ref in task_pods[t].volumes or ():
            key = f"{task_pods[t].namespace}/{ref.claim}"
            counts[key] = counts.get(key, 0) + 1
    placed_volumes = []
    for pod, row in placed:
        claims = []
        attached = []
        for ref in pod.volumes or ():
            claim = storage.claims.get(f"{pod.namespace}/{ref.claim}")
            if claim is None:       # kube-scheduler counts nothing of a claim it cannot look up
                continue
            counts[claim.key] = counts.get(claim.key, 0) + 1
            claims.append(claim)
            pv = storage.volumes.get(claim.volume_name) if claim.volume_name else None
            ident = attach_identity(pv, claim, storage)
            if ident is not None:
                attached.append(ident)
        placed_volumes.append(PlacedVolumes(pod, row, pod.releasing, tuple(claims), tuple(dict.fromkeys(attached))))
    uses: dict[int, tuple[ClaimUse, ...]] = {}
    held: dict[int, Unusable] = {}
    class_keys: dict[int, tuple] = {}
    refs = ClaimRefIndex(storage)
    for t in pending:
        resolved, unusable = resolve_claims(task_pods[t], storage, refs)
        if unusable is not None:
            held[t] = unusable
            continue
        uses[t] = resolved
        class_keys[t] = tuple((u.mode, claim_shape(u.claim)) if u.mode == DELAYED and counts.get(u.key, 0) <= 1
                              and READ_WRITE_ONCE_POD not in u.claim.access_modes else (u.mode, u.key)
                              for u in resolved)
    return VolumeSnapshot(storage, uses, held, placed_volumes, class_keys)


# --- the simulator's PV controller and provisioner -------------------------------------------

def bind_claims(state: "ClusterState", choices: Iterable["VolumeChoice"], node: str) -> None:
    """Make a placement's volume choices true at once, as the PV controller (static PVs: the
    claim bound to the PV whose claimRef the scheduler wrote) and a provisioner (a new PV for a
    claim whose node was selected) would on a cluster. A provisioned volume is reachable from
    the nodes that share the selected node's values of the keys its class's allowedTopologies
    name, else from the selected node alone (a simulator cannot know the driver's topology; the
    narrower guess never lets a later pod where the volume could not follow)."""
    storage = state.storage
    target = state.nodes.get(node)
    for choice in choices:
        claim = storage.claims.get(choice.claim)
        if claim is None or claim.fully_bound:
            continue
        ref = ClaimRef(claim.namespace, claim.name, claim.uid)
        if choice.volume is not None:
            pv = storage.volumes.get(choice.volume)
            if pv is None:
                continue
            storage.volumes[pv.name] = replace(pv, claim_ref=ref, phase=CLAIM_BOUND)
            name = pv.name
        else:
            cls = storage.class_of(claim)
            keys = [e.key for term in (cls.allowed_topologies if cls else ()) for e in term]
            labels = target.labels if target is not None else {}
            if keys and all(k in labels for k in keys):
                affinity: tuple[SelectorTerm, ...] = (tuple(MatchExpression(k, "In", (labels[k],))
                                                            for k in dict.fromkeys(keys)),)
            else:
                affinity = ((MatchExpression("metadata.name", "In", (node,), field=True),),)
            name = f"pvc-{claim.uid}"
            driver = cls.provisioner if cls is not None else ""
            storage.volumes[name] = PersistentVolume(
                name=name, capacity=claim.request, access_modes=claim.access_modes,
                storage_class=claim.storage_class or "", volume_mode=claim.volume_mode, node_affinity=affinity,
                claim_ref=ref, phase=CLAIM_BOUND, csi_driver=driver, volume_handle=name if driver else "")
        storage.claims[claim.key] = replace(claim, volume_name=name, phase=CLAIM_BOUND,
                                            annotations={**claim.annotations, BIND_COMPLETED: "yes"})
