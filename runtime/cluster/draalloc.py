"""kube's structured allocator (k8s.io/dynamic-resource-allocation/structured, its stable
channel) over runtime.cluster.dra's objects: which devices a pod's claims get on one node.

- `Inventory`: the devices of the pools in use. A pool (driver, pool name) is the slices of its
  highest generation; it is *incomplete* while fewer of them exist than `resourceSliceCount` says
  and *invalid* when two of its slices name the same device: ExactCount requests skip such a pool,
  an All request that would reach it fails with kube's error.
- `allocate`: the claims of one pod on one node, all or none, by kube's exhaustive search: claims
  in order, each request in order (a `firstAvailable` request tries its alternatives in order),
  each device in inventory order (pools by driver and name, slices by name, devices as
  listed). A device is taken when it is free (not allocated to another claim, not taken by an
  earlier request of the search), matches its class's selectors and the request's, its taints
  are tolerated, its pool's shared counters still hold what it consumes, and every
  `matchAttribute` / `distinctAttribute` constraint of its claim still holds. A request with `adminAccess` may take a
  device allocated to another claim, or taken earlier in the search for another claim, but not one
  its own claim takes already; its results say `admin_access`, and such results never make a
  device in use (runtime.engine.rules.dra holds no device for them). Devices of one request are tried in
  increasing inventory order only (a set found in another order is the same set: the first
  solution is kube's).
- `AllocationError`: what makes kube's allocator fail with an error rather than find nothing
  (a class not found, a CEL error, All over an incomplete pool).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from runtime.cluster.dra import (
    ALL, ALLOCATION_RESULTS_MAX, NO_EXECUTE, NO_SCHEDULE, Allocation, DeviceClass, DeviceResult, DistinctAttribute,
    Dra, MatchAttribute, ResourceClaim, ResourceSlice, SubRequest,
)
from runtime.cluster.dracel import CelDevice, CelError, cel_device, compile_selector
from runtime.cluster.selectors import MatchExpression, SelectorTerm

# A search that tries more devices than this gives up (kube bounds its Filter by a timeout).
SEARCH_BUDGET = 200_000


class AllocationError(Exception):
    """The allocator stops with an error (kube's words), not merely without a solution."""


@dataclass(frozen=True)
class Entry:
    """One device of the inventory, with what the search needs of it."""

    index: int
    slice: ResourceSlice
    position: int                     # in its slice
    cel: CelDevice

    @property
    def device(self):
        return self.slice.devices[self.position]

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.slice.driver, self.slice.pool, self.device.name)

    @property
    def pool_id(self) -> tuple[str, str]:
        return (self.slice.driver, self.slice.pool)


@dataclass
class Inventory:
    entries: list[Entry]
    by_id: dict[tuple[str, str, str], int]
    incomplete: set[tuple[str, str]]
    invalid: set[tuple[str, str]]
    # (driver, pool, counter set, counter) -> thousandths the pool's devices may consume together
    counters: dict[tuple[str, str, str, str], int]
    classes: Mapping[str, DeviceClass]
    _matches: dict[tuple, bool] = field(default_factory=dict)

    def consumption(self, index: int) -> list[tuple[tuple[str, str, str, str], int]]:
        e = self.entries[index]
        return [((e.slice.driver, e.slice.pool, cs, name), amount)
                for cs, counters in e.device.consumes for name, amount in counters]

    def selectable(self, request: SubRequest, index: int, claim: str) -> bool:
        """The device matches the request's class and selectors (cached; CEL errors raise)."""
        key = (request.device_class, request.selectors, index)
        found = self._matches.get(key)
        if found is None:
            found = self._matches[key] = self._select(request, index, claim)
        return found

    def _select(self, request: SubRequest, index: int, claim: str) -> bool:
        cls = self.classes.get(request.device_class)
        if cls is None:
            raise AllocationError(f"claim {claim}, request {request.name}: could not retrieve device class "
                                  f"{request.device_class}: deviceclass.resource.k8s.io \"{request.device_class}\" "
                                  f"not found")
        entry = self.entries[index]
        for owner, sels in ((f"class {cls.name}", cls.selectors), (f"claim {claim}", request.selectors)):
            for i, expression in enumerate(sels):
                try:
                    if not compile_selector(expression).matches(entry.cel):
                        return False
                except CelError as err:
                    driver, pool, name = entry.device_id
                    raise AllocationError(f"{owner}: selector #{i} on device {driver}/{pool}/{name}: {err}") from None
        return True


def build_inventory(dra: Dra) -> Inventory:
    """The devices of every pool's current generation, in kube's order."""
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for piece in dra.slices.values():
        pools.setdefault((piece.driver, piece.pool), []).append(piece)
    entries: list[Entry] = []
    by_id: dict[tuple[str, str, str], int] = {}
    incomplete: set[tuple[str, str]] = set()
    invalid: set[tuple[str, str]] = set()
    counters: dict[tuple[str, str, str, str], int] = {}
    for pool_id in sorted(pools):
        pieces = pools[pool_id]
        generation = max(p.generation for p in pieces)
        current = sorted((p for p in pieces if p.generation == generation), key=lambda p: p.name)
        if len(current) < max(p.slice_count for p in current):
            incomplete.add(pool_id)
        names: set[str] = set()
        for piece in current:
            for set_name, amounts in piece.counters:
                for counter, amount in amounts:
                    counters[(*pool_id, set_name, counter)] = amount
            for position, device in enumerate(piece.devices):
                if device.name in names:
                    invalid.add(pool_id)
                names.add(device.name)
                index = len(entries)
                entries.append(Entry(index, piece, position,
                                     cel_device(piece.driver, dict(device.attributes), dict(device.capacity))))
                by_id.setdefault((piece.driver, piece.pool, device.name), index)
    return Inventory(entries, by_id, incomplete, invalid, counters, dra.classes)


def node_matches(terms: Sequence[SelectorTerm], name: str, labels: Mapping[str, str]) -> bool:
    """A NodeSelector (terms ORed, expressions ANDed; matchFields read metadata.name)."""
    for term in terms:
        if term and all(_expr_matches(e, name, labels) for e in term):
            return True
    return False


def _expr_matches(expr: MatchExpression, name: str, labels: Mapping[str, str]) -> bool:
    return expr.matches({expr.key: name} if expr.field else labels)


def tolerated(entry: Entry, request: SubRequest) -> bool:
    """Every NoSchedule / NoExecute taint of the device is tolerated by the request."""
    return all(any(t.tolerates(taint) for t in request.tolerations)
               for taint in entry.device.taints if taint.effect in (NO_SCHEDULE, NO_EXECUTE))


@dataclass
class _Constraint:
    """A claim constraint during the search: `matchAttribute` (one value, how many devices have
    it) or `distinctAttribute` (the values taken so far; kube's distinctAttributeConstraint: a
    value equals another only of the same type). A device without the attribute never fits."""

    spec: MatchAttribute | DistinctAttribute
    value: object = None
    count: int = 0
    seen: list = field(default_factory=list)

    def applies(self, request: str, sub: str | None) -> bool:
        names = self.spec.requests
        return not names or request in names or (sub is not None and f"{request}/{sub}" in names)

    def admits(self, value: object) -> bool:
        if value is None:
            return False
        if isinstance(self.spec, DistinctAttribute):
            return not any(type(v) is type(value) and v == value for v in self.seen)
        return self.count == 0 or (type(value) is type(self.value) and value == self.value)

    def add(self, value: object) -> None:
        if isinstance(self.spec, DistinctAttribute):
            self.seen.append(value)
            return
        if self.count == 0:
            self.value = value
        self.count += 1

    def remove(self) -> None:
        if isinstance(self.spec, DistinctAttribute):
            self.seen.pop()
        else:
            self.count -= 1


def allocate(claims: Sequence[ResourceClaim], candidates: Sequence[int], inventory: Inventory,
             in_use: Callable[[int], bool], counters_used: Mapping[tuple[str, str, str, str], int],
             node_name: str) -> list[Allocation] | None:
    """Allocations for `claims` (in order) from the devices `candidates` (inventory indices the
    node reaches, in inventory order), or None when there is none. `in_use(i)`: device i is
    allocated to another claim; `counters_used`: what allocated devices consume already."""
    search = _Search(claims, candidates, inventory, in_use, counters_used)
    if not search.claim(0):
        if search.exhausted:
            raise AllocationError(f"allocation gave up after trying {SEARCH_BUDGET} devices")
        return None
    out = []
    for results in search.results:
        devices = tuple(DeviceResult(req, *inventory.entries[i].device_id, admin_access=admin)
                        for req, i, admin in results)
        out.append(Allocation(devices, _node_selector([inventory.entries[i] for _, i, _ in results], node_name)))
    return out


def _node_selector(entries: list[Entry], node_name: str) -> tuple[SelectorTerm, ...] | None:
    """Where the allocated devices are reachable (kube's createNodeSelector, simplified to
    stay exact): devices of every node, none; node-local ones, the node by name; devices
    behind one and the same node selector, that selector; others, the node by name."""
    selectors = set()
    for e in entries:
        d, s = e.device, e.slice
        if (s.per_device_nodes and d.all_nodes) or (not s.per_device_nodes and s.all_nodes):
            continue
        terms = d.node_selector if s.per_device_nodes else s.node_selector
        if terms is not None:
            selectors.add(terms)
        else:
            return ((MatchExpression("metadata.name", "In", (node_name,), field=True),),)
    if not selectors:
        return None
    if len(selectors) == 1:
        return next(iter(selectors))
    return ((MatchExpression("metadata.name", "In", (node_name,), field=True),),)


class _Search:
    def __init__(self, claims, candidates, inventory: Inventory, in_use, counters_used):
        self.claims = claims
        self.candidates = list(candidates)
        self.inv = inventory
        self.in_use = in_use
        self.counters_used = counters_used
        # device -> how many claims of the search take it (adminAccess lets several); per claim
        self.taking: dict[int, int] = {}
        self.claim_taking: list[set[int]] = [set() for _ in claims]
        self.extra: dict[tuple[str, str, str, str], int] = {}
        self.results: list[list[tuple[str, int, bool]]] = [[] for _ in claims]
        self.constraints = [[_Constraint(c) for c in claim.spec.constraints] for claim in claims]
        self.steps = 0
        self.exhausted = False
        self._all: dict[tuple[int, int, int], list[int]] = {}

    # -- the recursion: claim -> request -> (alternative) -> device ----------------------------
    def claim(self, ci: int) -> bool:
        if ci == len(self.claims):
            return True
        return self.request(ci, 0)

    def request(self, ci: int, ri: int) -> bool:
        claim = self.claims[ci]
        if ri == len(claim.spec.requests):
            return self.claim(ci + 1)
        req = claim.spec.requests[ri]
        if req.exactly is not None:
            return self.device(ci, ri, 0, req.exactly, None, 0, -1)
        for k, alt in enumerate(req.first_available):
            if self.device(ci, ri, k, alt, req.name, 0, -1):
                return True
        return False

    def _all_devices(self, ci: int, ri: int, k: int, sub: SubRequest) -> list[int]:
        key = (ci, ri, k)
        found = self._all.get(key)
        if found is None:
            claim = self.claims[ci]
            found = []
            for i in self.candidates:
                pool = self.inv.entries[i].pool_id
                if pool in self.inv.incomplete:
                    raise AllocationError(f"claim {claim.key}, request {sub.name}: asks for all devices, but "
                                          f"resource pool {pool[0]}/{pool[1]} is currently being updated")
                if pool in self.inv.invalid:
                    raise AllocationError(f"claim {claim.key}, request {sub.name}: asks for all devices, but "
                                          f"resource pool {pool[0]}/{pool[1]} is currently invalid")
                if self.inv.selectable(sub, i, claim.key):
                    found.append(i)
            self._all[key] = found
        return found

    def device(self, ci: int, ri: int, k: int, sub: SubRequest, parent: str | None, di: int, after: int) -> bool:
        claim = self.claims[ci]
        all_mode = sub.mode == ALL
        if all_mode:
            everything = self._all_devices(ci, ri, k, sub)
            if not everything:
                return False
            needed = len(everything)
        else:
            needed = sub.count
        if di >= needed:
            return self.request(ci, ri + 1)
        if len(self.results[ci]) + needed - di > ALLOCATION_RESULTS_MAX:
            return False
        request_name = sub.name if parent is None else f"{parent}/{sub.name}"
        base, sub_name = (sub.name, None) if parent is None else (parent, sub.name)
        if all_mode:
            i = everything[di]
            if not self._take(ci, i, sub, base, sub_name, must=True):
                return False
            self.results[ci].append((request_name, i, sub.admin_access))
            if self.device(ci, ri, k, sub, parent, di + 1, i):
                return True
            self._give_back(ci, i, base, sub_name)
            return False
        for i in self.candidates:
            if i <= after:
                continue
            self.steps += 1
            if self.steps > SEARCH_BUDGET:
                self.exhausted = True
                return False
            pool = self.inv.entries[i].pool_id
            if pool in self.inv.incomplete or pool in self.inv.invalid:
                continue
            if self._busy(ci, i, sub):
                continue
            if not self.inv.selectable(sub, i, claim.key):
                continue
            if not self._take(ci, i, sub, base, sub_name, must=False):
                continue
            self.results[ci].append((request_name, i, sub.admin_access))
            if self.device(ci, ri, k, sub, parent, di + 1, i):
                return True
            self._give_back(ci, i, base, sub_name)
            if self.exhausted:
                return False
        return False

    # -- taking one device ----------------------------------------------------------------------
    def _busy(self, ci: int, i: int, sub: SubRequest) -> bool:
        """kube's in-use test: adminAccess is refused only a device its own claim takes already;
        any other request a device allocated or taken in this search by any claim."""
        if sub.admin_access:
            return i in self.claim_taking[ci]
        return i in self.taking or self.in_use(i)

    def _take(self, ci: int, i: int, sub: SubRequest, base: str, sub_name: str | None, must: bool) -> bool:
        if self._busy(ci, i, sub):
            return False
        entry = self.inv.entries[i]
        need = self.inv.consumption(i)
        for key, amount in need:
            if self.counters_used.get(key, 0) + self.extra.get(key, 0) + amount > self.inv.counters.get(key, 0):
                return False
        if not tolerated(entry, sub):
            return False
        added = []
        for c in self.constraints[ci]:
            if not c.applies(base, sub_name):
                continue
            value = entry.device.attribute(c.spec.attribute, entry.slice.driver)
            if not c.admits(value):
                for done in added:
                    done.remove()
                if must:
                    driver, pool, name = entry.device_id
                    raise AllocationError(f"claim {self.claims[ci].key}, request {sub.name}: cannot add device "
                                          f"{driver}/{pool}/{name} because a claim constraint would not be satisfied")
                return False
            c.add(value)
            added.append(c)
        self.taking[i] = self.taking.get(i, 0) + 1
        self.claim_taking[ci].add(i)
        for key, amount in need:
            self.extra[key] = self.extra.get(key, 0) + amount
        return True

    def _give_back(self, ci: int, i: int, base: str, sub_name: str | None) -> None:
        self.results[ci].pop()
        left = self.taking[i] - 1
        if left:
            self.taking[i] = left
        else:
            del self.taking[i]
        self.claim_taking[ci].discard(i)
        for key, amount in self.inv.consumption(i):
            self.extra[key] -= amount
        for c in self.constraints[ci]:
            if c.applies(base, sub_name):
                c.remove()
