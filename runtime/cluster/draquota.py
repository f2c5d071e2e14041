"""Queue quotas on Dynamic Resource Allocation devices, as Volcano's capacity plugin counts them
(docs/design/capacity-dra-support.md, `capacity.DynamicResourceAllocationEnable`): a queue's
capability, deserved and guarantee name `deviceclass/<DeviceClass>` for a count of that class's
devices, beside cpu, memory and the rest.

A pod's devices are the requests of the claims it uses, per class:
- an allocated claim counts the devices its allocation holds (each result by the class of the
  request, or `firstAvailable` alternative, it was allocated for);
- a claim not allocated yet counts each `ExactCount` request's `count`; a `firstAvailable`
  request the largest count any of its alternatives asks of each class (what allocation may come
  to: a queue is never taken past its capability by the alternative chosen); an `All` request is
  not counted before allocation (how many devices it takes depends on the node), so a pod with
  one on a class some queue names waits, saying so (`ALL_NOT_COUNTED`);
- a claim several pods share is counted once (Volcano's resourceClaimRefs: charged by the
  first, released by the last): with a running consumer, or a lone settled one, when it has one;
  else each waiting consumer is charged it until one is placed, when the others' charge is taken
  off (runtime.engine.rules.dra), and given back if that placement is undone.

The counts are extra resource columns of the task's request row (runtime.engine.snapshot), so
every queue formula (enqueue, allocatable, overused, shares, reclaim) sees them as any other
resource; no node offers them (the node fit leaves them out: the DynamicResources rule decides
where devices are). The cluster's total of a class is the number of devices its selectors match.
`<dim>.deviceclass/<class>` (Volcano's consumable-capacity quota) is not counted: a queue naming
it is refused where it is read (lint, import).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from runtime.cluster.dra import ALL, Dra, ResourceClaim, SubRequest, claim_name
from runtime.cluster.draalloc import AllocationError, Inventory

DEVICE_CLASS_PREFIX = "deviceclass/"
CAPACITY_SEPARATOR = ".deviceclass/"
ALL_NOT_COUNTED = ("request {request} of resourceclaim \"{claim}\" asks for all devices of class {cls}, which "
                   "queue quota deviceclass/{cls} cannot count before allocation")


def device_class_resource(device_class: str) -> str:
    return DEVICE_CLASS_PREFIX + device_class


def device_class_of(resource: str) -> str | None:
    """The DeviceClass a queue resource `deviceclass/<class>` counts (None: another resource)."""
    if resource.startswith(DEVICE_CLASS_PREFIX) and len(resource) > len(DEVICE_CLASS_PREFIX):
        return resource[len(DEVICE_CLASS_PREFIX):]
    return None


def is_capacity_dimension(resource: str) -> bool:
    """Volcano's `<dim>.deviceclass/<class>` consumable-capacity key (not evaluated here)."""
    head, sep, tail = resource.partition(CAPACITY_SEPARATOR)
    return bool(sep and head and tail)


@dataclass(frozen=True)
class ClaimCount:
    """A claim's devices per class, or why they cannot be counted (an All request unallocated)."""

    devices: tuple[tuple[str, int], ...]
    uncounted: str | None = None          # the class an All request asks of


def claim_count(claim: ResourceClaim) -> ClaimCount:
    if claim.allocation is not None:
        classes: dict[str, str] = {}
        for request in claim.spec.requests:
            if request.exactly is not None:
                classes[request.name] = request.exactly.device_class
            for sub in request.first_available:
                classes[f"{request.name}/{sub.name}"] = sub.device_class
        out: dict[str, int] = {}
        for result in claim.allocation.devices:
            cls = classes.get(result.request) or classes.get(result.request.partition("/")[0])
            if cls is not None:
                out[cls] = out.get(cls, 0) + 1
        return ClaimCount(tuple(sorted(out.items())))
    out = {}
    uncounted = None
    for request in claim.spec.requests:
        if request.exactly is not None:
            sub: SubRequest = request.exactly
            if sub.mode == ALL:
                uncounted = uncounted or f"{request.name}\0{sub.device_class}"
            else:
                out[sub.device_class] = out.get(sub.device_class, 0) + sub.count
            continue
        most: dict[str, int] = {}
        for sub in request.first_available:
            if sub.mode == ALL:
                uncounted = uncounted or f"{request.name}\0{sub.device_class}"
            else:
                most[sub.device_class] = max(most.get(sub.device_class, 0), sub.count)
        for cls, n in most.items():
            out[cls] = out.get(cls, 0) + n
    return ClaimCount(tuple(sorted(out.items())), uncounted)


@dataclass
class DeviceCharges:
    """What each task is charged in the queues (task -> ((column, count), ...)), the tasks that
    cannot be counted (task -> (message, claim key)), and lone settled pods' charges per queue
    name (they are counted by shape, not as tasks)."""

    tasks: dict[int, tuple[tuple[int, int], ...]]
    held: dict[int, tuple[str, str]]
    settled: dict[str | None, dict[int, int]]
    columns: dict[str, int] = field(default_factory=dict)      # class -> its resource column
    inventory: Inventory | None = None                         # the cluster's devices, once built
    # A named claim several waiting tasks use, unallocated or used by no running task: (its
    # charge, its consumers), each of whom is charged it until one is placed.
    shared: dict[str, tuple[tuple[tuple[int, int], ...], list[int]]] = field(default_factory=dict)


def _pod_claims(pod, dra: Dra) -> list[ResourceClaim]:
    out = []
    for ref in pod.resource_claims or ():
        name = claim_name(pod, ref, dra)
        if name is None:
            continue
        claim = dra.claims.get(f"{pod.namespace}/{name}")
        if claim is None and ref.template and dra.instantiates_templates:
            template = dra.templates.get(f"{pod.namespace}/{ref.template}")
            if template is not None:
                claim = ResourceClaim(pod.namespace, name, template.spec, owner_uid=pod.uid, template=True)
        if claim is not None:
            out.append(claim)
    return out


def charge_devices(dra: Dra, columns: Mapping[str, int], task_pods: list, running: Iterable[int],
                   pending: Iterable[int], settled_pods: Iterable[tuple[str | None, object]] = ()) -> DeviceCharges:
    """Device counts of the classes that have a column (`columns`: class -> resource column) for
    the settled lone pods (queue name, pod), then the `running` tasks, then the `pending` ones,
    each shared claim charged to the first that uses it."""
    seen: set[str] = set()
    counts: dict[str, ClaimCount] = {}

    # A named claim only waiting tasks use: charged to each of them (never fewer devices than
    # the first placed brings); runtime.engine.rules.dra takes the charge off the others once one is placed.
    shared: dict[str, tuple[tuple[tuple[int, int], ...], list[int]]] = {}

    def charge(pod, task: int | None = None) -> tuple[dict[int, int], tuple[str, str] | None]:
        row: dict[int, int] = {}
        problem = None
        for claim in _pod_claims(pod, dra):
            if claim.key in shared and task is not None:
                claim_row, consumers = shared[claim.key]
                consumers.append(task)
                for col, n in claim_row:
                    row[col] = row.get(col, 0) + n
                continue
            if claim.key in seen:
                continue
            seen.add(claim.key)
            count = counts.get(claim.key) if not claim.template else None
            if count is None:
                count = claim_count(claim)
                if not claim.template:
                    counts[claim.key] = count
            claim_row = tuple((columns[cls], n) for cls, n in count.devices if cls in columns)
            for col, n in claim_row:
                row[col] = row.get(col, 0) + n
            if task is not None and not claim.template and claim_row:
                shared[claim.key] = (claim_row, [task])
            if count.uncounted and problem is None:
                request, _, cls = count.uncounted.partition("\0")
                if cls in columns:
                    problem = (ALL_NOT_COUNTED.format(request=request, claim=claim.name, cls=cls), claim.key)
        return row, problem

    settled: dict[str | None, dict[int, int]] = {}
    for queue, pod in settled_pods:
        row, _ = charge(pod)
        if row:
            into = settled.setdefault(queue, {})
            for col, n in row.items():
                into[col] = into.get(col, 0) + n
    tasks: dict[int, tuple[tuple[int, int], ...]] = {}
    held: dict[int, tuple[str, str]] = {}
    for t in running:
        row, _ = charge(task_pods[t])
        if row:
            tasks[t] = tuple(sorted(row.items()))
    for t in pending:
        row, problem = charge(task_pods[t], t)
        if problem is not None:
            held[t] = problem
        elif row:
            tasks[t] = tuple(sorted(row.items()))
    return DeviceCharges(tasks, held, settled, dict(columns),
                         shared={key: value for key, value in shared.items() if len(value[1]) > 1})


def class_totals(inventory: Inventory, classes: Iterable[str]) -> dict[str, int]:
    """The devices each class's selectors match, among the inventory's (runtime.cluster.draalloc);
    a class not found or a selector in error counts none."""
    out = {}
    for cls in classes:
        probe = SubRequest("quota", cls)
        n = 0
        try:
            for i in range(len(inventory.entries)):
                n += inventory.selectable(probe, i, "queue quota")
        except AllocationError:
            n = 0
        out[cls] = n
    return out
