"""Dynamic Resource Allocation objects as the scheduler reads them (`resource.k8s.io/v1`;
runtime.cluster.draspec reads them from Kubernetes dicts): DeviceClasses, ResourceSlices (a
driver's pools of devices, with attributes, capacity, taints, shared counters, and the nodes that
reach them), ResourceClaims and ResourceClaimTemplates; and what a pod's `spec.resourceClaims`
come to (`resolve_pod_claims`): the claims kube-scheduler's DynamicResources plugin would look
at, or why the pod cannot be placed at all (its PreFilter's words).

A claim from a template is the one kube-controller-manager's resourceclaim controller made for
the pod (`status.resourceClaimStatuses` names it). Where no controller runs (snapshot files, the
simulator: `Dra.instantiates_templates`), the claim is the template's spec under the name
`<pod>-<claim>`, owned by the pod, made when the pod is bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from runtime.cluster.selectors import SelectorTerm

if TYPE_CHECKING:  # pragma: no cover
    from runtime.cluster.model import Pod

EXACT_COUNT, ALL = "ExactCount", "All"
# resourceapi.AllocationResultsMaxSize: the devices one claim may be allocated.
ALLOCATION_RESULTS_MAX = 32
# resourceapi.ResourceClaimReservedForMaxSize: the consumers a claim may be reserved for.
RESERVED_FOR_MAX = 256
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"


@dataclass(frozen=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE         # NoSchedule | NoExecute | None (informational)


@dataclass(frozen=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"           # Equal | Exists
    value: str = ""
    effect: str = ""                  # empty: every effect

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True)
class Device:
    """One device of a ResourceSlice. `attributes`: qualified name -> int, bool, str or
    runtime.cluster.dracel.Version; `capacity`: qualified name -> thousandths of the unit;
    `consumes`: (counter set, ((counter, thousandths), ...)) it draws from its pool's shared counters.
    With the slice's `perDeviceNodeSelection`, the device says which nodes reach it."""

    name: str
    attributes: tuple[tuple[str, Any], ...] = ()
    capacity: tuple[tuple[str, int], ...] = ()
    taints: tuple[DeviceTaint, ...] = ()
    consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    node_name: str | None = None
    node_selector: tuple[SelectorTerm, ...] | None = None
    all_nodes: bool = False

    def attribute(self, qualified: str, driver: str) -> Any:
        """matchAttribute's lookup (kube's lookupAttribute): the fully qualified name, else the
        bare name when the domain is the driver's. None when the device has no such attribute."""
        attrs = dict(self.attributes)
        if qualified in attrs:
            return attrs[qualified]
        domain, _, ident = qualified.partition("/")
        if ident and domain == driver:
            return attrs.get(ident)
        return None


@dataclass(frozen=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int = 0
    slice_count: int = 1
    node_name: str | None = None
    node_selector: tuple[SelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_nodes: bool = False
    devices: tuple[Device, ...] = ()
    # sharedCounters: counter set -> ((counter, thousandths), ...)
    counters: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()            # CEL expressions
    # spec.config: opaque driver configuration (JSON text each), copied into an allocation's
    # status as kube's allocator does (source FromClass) for the drivers to read
    config: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubRequest:
    """An exact request, or one alternative of `firstAvailable` (then `name` is the
    alternative's, and results name `<request>/<alternative>`)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    tolerations: tuple[DeviceToleration, ...] = ()
    admin_access: bool = False


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    exactly: SubRequest | None = None
    first_available: tuple[SubRequest, ...] = ()

    @property
    def alternatives(self) -> tuple[SubRequest, ...]:
        return (self.exactly,) if self.exactly is not None else self.first_available


@dataclass(frozen=True)
class MatchAttribute:
    """A claim's `constraints[i]`: every device allocated for `requests` (all of the claim's
    when empty; a name may be `<request>/<alternative>`) has the same value of `attribute`."""

    attribute: str
    requests: tuple[str, ...] = ()


@dataclass(frozen=True)
class DistinctAttribute:
    """A claim's `constraints[i].distinctAttribute` (DRAConsumableCapacity, beta and on by default
    since 1.36): the devices allocated for `requests` (all of the claim's when empty) have pairwise
    different values of `attribute` (values of different types differ)."""

    attribute: str
    requests: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchAttribute | DistinctAttribute, ...] = ()
    # spec.devices.config: (the requests it is for, empty: all; opaque configuration as JSON text)
    config: tuple[tuple[tuple[str, ...], str], ...] = ()


@dataclass(frozen=True)
class DeviceResult:
    """One allocated device (`status.allocation.devices.results[i]`)."""

    request: str
    driver: str
    pool: str
    device: str
    # allocated for a request with adminAccess: the device stays free for other claims (kube's
    # allocated state skips such results)
    admin_access: bool = False

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class Allocation:
    devices: tuple[DeviceResult, ...]
    # The nodes that reach every allocated device (None: all nodes); a single node's name
    # when it is node-local (kube writes a matchFields metadata.name term).
    node_selector: tuple[SelectorTerm, ...] | None = None


@dataclass(frozen=True)
class ResourceClaim:
    namespace: str
    name: str
    spec: ClaimSpec
    uid: str = ""
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()        # pod uids
    deleting: bool = False
    owner_uid: str | None = None              # the pod a template's claim was made for
    template: bool = False                    # made from a template by us (no controller runs)
    version: str = ""                         # metadata.resourceVersion (a write's precondition)
    # status.reservedFor as read: (apiGroup, resource, name, uid) each, written back as they are
    consumers: tuple[tuple[str, str, str, str], ...] = ()
    finalizers: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PodResourceClaim:
    """One entry of a pod's `spec.resourceClaims`: a claim by name or from a template, and the
    claim the controller made from it (`status.resourceClaimStatuses`)."""

    name: str
    claim: str | None = None
    template: str | None = None
    generated: str | None = None


@dataclass
class Dra:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)          # namespace/name
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    # Whether the scheduler makes a template's claim itself (no resourceclaim controller runs:
    # snapshot files, the simulator); a connector to a cluster waits for the controller.
    instantiates_templates: bool = True

    def __bool__(self) -> bool:
        return bool(self.classes or self.slices or self.claims or self.templates)

    def copy(self) -> "Dra":
        return Dra(dict(self.classes), dict(self.slices), dict(self.claims), dict(self.templates),
                   self.instantiates_templates)

    def merged_with(self, other: "Dra") -> "Dra":
        return Dra({**self.classes, **other.classes}, {**self.slices, **other.slices},
                   {**self.claims, **other.claims}, {**self.templates, **other.templates},
                   self.instantiates_templates and other.instantiates_templates)


# --- a pod's claims ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PodClaims:
    """A waiting pod's claims resolved: (its entry name, the claim) each, the claim made from a
    template where we make it (not in `Dra.claims` yet)."""

    claims: tuple[ResourceClaim, ...]

    def shape(self) -> tuple:
        """What tells apart pods whose placement the claims make differ: a claim allocated, or
        one several pods may share, by name; a pod's own unallocated claim by its spec."""
        return tuple(("spec", c.spec) if c.allocation is None and (c.owner_uid or c.template) else ("claim", c.key)
                     for c in self.claims)


@dataclass(frozen=True)
class ClaimProblem:
    """Why a pod's claims keep it from every node (kube-scheduler's DynamicResources PreFilter)."""

    message: str
    claim: str


def claim_name(pod: "Pod", ref: PodResourceClaim, dra: Dra) -> str | None:
    """The name of the claim an entry of the pod's spec.resourceClaims stands for (None: a
    template's claim not made yet)."""
    if ref.claim:
        return ref.claim
    if ref.generated:
        return ref.generated
    if dra.instantiates_templates:
        return f"{pod.name}-{ref.name}"
    return None


def resolve_pod_claims(pod: "Pod", dra: Dra) -> tuple[PodClaims | None, ClaimProblem | None]:
    """The claims of a waiting pod, or why it cannot be placed anywhere (kube's words)."""
    out: list[ResourceClaim] = []
    seen: set[str] = set()
    for ref in pod.resource_claims or ():
        name = claim_name(pod, ref, dra)
        if name is None:
            return None, ClaimProblem(f'waiting for dynamic resource controller to create the resourceclaim '
                                      f'"{pod.name}-{ref.name}"', f"{pod.namespace}/{ref.template}")
        key = f"{pod.namespace}/{name}"
        claim = dra.claims.get(key)
        if claim is None and ref.template and not ref.generated and dra.instantiates_templates:
            template = dra.templates.get(f"{pod.namespace}/{ref.template}")
            if template is None:
                return None, ClaimProblem(f'resourceclaimtemplate "{ref.template}" not found',
                                          f"{pod.namespace}/{ref.template}")
            claim = ResourceClaim(pod.namespace, name, template.spec, owner_uid=pod.uid, template=True)
        if claim is None:
            return None, ClaimProblem(f'resourceclaim "{name}" not found', key)
        if claim.deleting:
            return None, ClaimProblem(f'resourceclaim "{name}" is being deleted', key)
        if ref.template and claim.owner_uid is not None and claim.owner_uid != pod.uid:
            return None, ClaimProblem(f"ResourceClaim {key} was not created for pod {pod.key} (pod is not owner)", key)
        if claim.allocation is None and pod.uid not in claim.reserved_for \
                and len(claim.reserved_for) >= RESERVED_FOR_MAX:
            return None, ClaimProblem(f'resourceclaim "{name}" in use by too many pods', key)
        if claim.allocation is not None and pod.uid not in claim.reserved_for \
                and len(claim.reserved_for) >= RESERVED_FOR_MAX:
            return None, ClaimProblem(f"resourceclaim in use by the maximum number of {RESERVED_FOR_MAX} consumers",
                                      key)
        if key in seen:
            continue
        seen.add(key)
        out.append(claim)
    return PodClaims(tuple(out)), None


def allocated_devices(claims: Iterable[ResourceClaim]) -> dict[tuple[str, str, str], str]:
    """Device id -> the claim it is allocated to, of every allocated claim (adminAccess results
    are not allocations that hold a device: kube's allocated state skips them)."""
    out: dict[tuple[str, str, str], str] = {}
    for claim in claims:
        if claim.allocation is not None:
            for result in claim.allocation.devices:
                if not result.admin_access:
                    out[result.device_id] = claim.key
    return out


def with_allocation(dra: Dra, claim: ResourceClaim, allocation: Allocation, pod_uids: Iterable[str]) -> None:
    """Write an allocation and its consumers into `dra` (the simulator's API server)."""
    current = dra.claims.get(claim.key, claim)
    reserved = tuple(dict.fromkeys((*current.reserved_for, *pod_uids)))
    dra.claims[claim.key] = replace(current, allocation=current.allocation or allocation, reserved_for=reserved)


def release_pod(dra: Dra, pod_uid: str, claims: Mapping[str, ResourceClaim]) -> None:
    """A pod left: drop it from its claims' consumers; a claim made for it alone goes with it
    (the resourceclaim controller deletes a template's claim), another claim without consumers
    is deallocated (the controller clears status.allocation)."""
    for key, claim in list(claims.items()):
        if pod_uid not in claim.reserved_for:
            continue
        reserved = tuple(u for u in claim.reserved_for if u != pod_uid)
        if not reserved and claim.owner_uid == pod_uid:
            dra.claims.pop(key, None)
        elif not reserved:
            dra.claims[key] = replace(claim, reserved_for=(), allocation=None)
        else:
            dra.claims[key] = replace(claim, reserved_for=reserved)


# --- the cycle's view ---------------------------------------------------------------------------

@dataclass
class DraSnapshot:
    """The claims of the cycle's pods: each waiting task's resolved (`uses`), or why it waits
    (`held`); the class key that tells tasks with different claims apart (`class_keys`); the
    uids of pods that are leaving (a claim only they consume frees its devices once they are gone)
    and of pods that finished (a claim only they consumed is free: the resourceclaim controller
    takes finished pods out of reservedFor and deallocates it)."""

    dra: Dra
    uses: dict[int, PodClaims]
    held: dict[int, ClaimProblem]
    class_keys: dict[int, tuple]
    leaving_uids: frozenset[str]
    done_uids: frozenset[str] = frozenset()
    # The cluster's devices (runtime.cluster.draalloc.Inventory) where the snapshot built them
    # already (queue quotas on devices count them); None: the rule builds them.
    inventory: Any = None
    # Queue quotas on devices (runtime.cluster.draquota): a named claim several waiting tasks
    # use -> (its charge as (request column, devices) pairs, those tasks).
    shared_charges: dict[str, tuple[tuple[tuple[int, int], ...], list[int]]] = field(default_factory=dict)


def dra_snapshot(dra: Dra, task_pods: list["Pod"], waiting: Iterable[int], pods: Iterable["Pod"]) -> DraSnapshot:
    uses: dict[int, PodClaims] = {}
    held: dict[int, ClaimProblem] = {}
    keys: dict[int, tuple] = {}
    for t in waiting:
        resolved, problem = resolve_pod_claims(task_pods[t], dra)
        if problem is not None:
            held[t] = problem
        elif resolved is not None:
            uses[t] = resolved
            keys[t] = resolved.shape()
    pods = list(pods)
    leaving = frozenset(p.uid for p in pods if p.releasing and not p.terminal)
    done = frozenset(p.uid for p in pods if p.terminal)
    return DraSnapshot(dra, uses, held, keys, leaving, done)
