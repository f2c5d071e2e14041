"""DynamicResources (kube-scheduler's plugin for Dynamic Resource Allocation): a pod's
ResourceClaims must be allocatable on the node, by kube's structured allocator
(runtime.cluster.draalloc), from the devices no other claim holds.

- A claim allocated already (its `status.allocation`, or earlier in this cycle for another pod
  that shares it) passes only the nodes its allocation's node selector names; it is allocated
  once however many pods use it.
- The pod's other claims are allocated together on the node (all or none). Devices allocated to
  any claim — those of the cluster's claims and those this cycle's placements took — are not
  free: a gang of eight pods asking one GPU each gets eight different devices; a placement
  undone (a gang that did not fit) gives its devices back.
- A claim whose consumers are all leaving (deleted, or evicted this cycle) frees its devices once
  they are gone: a node that fits only with them is a future fit (pipelined), as a leaving pod's
  resources are.

Failing nodes say kube-scheduler's words, `cannot allocate all claims`, with the node's figures
(how many devices on it match the claims' requests, how many of them are free); an allocator
error (a class not found, a CEL error) is named as kube names it. The allocations a placement made
(`choices`) become the cycle's `Decisions.claims`, written before the pod is bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from runtime.cluster.dra import Allocation, DraSnapshot, ResourceClaim, claim_name
from runtime.cluster.draalloc import AllocationError, Inventory, allocate, build_inventory
from runtime.engine.extension import MASK_FAIL, MASK_LATER, MASK_PASS, Check, StatefulRule
from runtime.engine.nodemasks import terms_mask

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.session import Session

CANNOT_ALLOCATE = "cannot allocate all claims"
# A reason gives each failing node's device figures while at most this many nodes fail and their
# figures come in at most this many variants (else one line per variant would bury the reason).
FIGURED_NODES, FIGURE_VARIANTS = 64, 3
NODE_SELECTOR_MISMATCH = "resourceclaim not available on the node"
# resourceapi.DRAAdminNamespaceLabelKey: the API server takes a claim (or template) with adminAccess
# only in a namespace labelled so; a snapshot's claim elsewhere waits with the server's words.
ADMIN_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_NAMESPACE_REFUSED = (f"admin access to devices requires the `{ADMIN_NAMESPACE_LABEL}: true` label on the "
                           f"containing namespace")


class DraRule(StatefulRule):
    name = "dynamicresources"

    def __init__(self, ssn: Session):
        self.ssn = ssn
        self.snap = snap = ssn.snap
        ds: DraSnapshot = snap.dra
        self.ds = ds
        self.n = snap.n_nodes
        self.inv: Inventory = ds.inventory if ds.inventory is not None else build_inventory(ds.dra)
        rows = {name: i for i, name in enumerate(snap.node_names)}
        self._node_row = rows
        # Which nodes reach each device: node-local ones by row, those of every node, and those
        # behind a node selector (one mask per selector).
        self._local: dict[int, list[int]] = {}
        self._everywhere: list[int] = []
        groups: dict[tuple, list[int]] = {}
        self._reach: list[np.ndarray | None] = []      # per device: rows, None = every node
        for e in self.inv.entries:
            d, s = e.device, e.slice
            per = s.per_device_nodes
            node_name = d.node_name if per else s.node_name
            selector = d.node_selector if per else s.node_selector
            everywhere = d.all_nodes if per else s.all_nodes
            if everywhere:
                self._everywhere.append(e.index)
                self._reach.append(None)
            elif node_name:
                row = rows.get(node_name)
                if row is not None:
                    self._local.setdefault(row, []).append(e.index)
                self._reach.append(np.array([row] if row is not None else [], dtype=np.int64))
            else:
                groups.setdefault(selector or (), []).append(e.index)
                self._reach.append(None)        # set below
        self._groups: list[tuple[np.ndarray, list[int]]] = []
        for terms, indices in groups.items():
            mask = terms_mask(snap, terms)
            self._groups.append((mask, indices))
            reach = np.flatnonzero(mask)
            for i in indices:
                self._reach[i] = reach
        self._candidates: dict[int, list[int]] = {}
        self._masks: dict[tuple, np.ndarray] = {}
        # Devices held: device -> claim key; claims whose consumers are all leaving.
        self._owner: dict[int, str] = {}
        self._claim_devices: dict[str, list[int]] = {}
        self._counters_live: dict[tuple, int] = {}
        self._counters_any: dict[tuple, int] = {}
        claims = ds.dra.claims
        self._leaving_claims: set[str] = set()
        self._victims: set[str] = set()      # uids evicted this cycle
        for key, claim in claims.items():
            if claim.allocation is None or (claim.reserved_for and set(claim.reserved_for) <= ds.done_uids):
                continue      # unallocated, or only finished pods used it (the controller frees it)
            held = [self.inv.by_id[r.device_id] for r in claim.allocation.devices
                    if r.device_id in self.inv.by_id and not r.admin_access]
            self._hold(key, held, self._all_leaving(claim))
        # This cycle's allocations: claim key -> (allocation, tasks consuming it)
        self._allocated: dict[str, tuple[Allocation, list[int]]] = {}
        self.choices: dict[int, list[tuple[ResourceClaim, Allocation]]] = {}
        self._classes: set[int] = set()
        self._named_classes: dict[str, set[int]] = {}
        # Queue quotas on devices: a shared claim's charge rides on each waiting consumer's request
        # row until one is placed (runtime.cluster.draquota); claim key -> its placed consumers.
        self._charged: dict[str, set[int]] = {}

    # --- device state ----------------------------------------------------------------------
    def _all_leaving(self, claim: ResourceClaim) -> bool:
        gone = self.ds.leaving_uids | self.ds.done_uids
        live = [u for u in claim.reserved_for if u not in gone and u not in self._victims]
        return bool(claim.reserved_for) and not live

    def _hold(self, key: str, devices: list[int], leaving: bool) -> None:
        self._claim_devices[key] = devices
        if leaving:
            self._leaving_claims.add(key)
        for i in devices:
            self._owner[i] = key
            for counter, amount in self.inv.consumption(i):
                self._counters_any[counter] = self._counters_any.get(counter, 0) + amount
                if not leaving:
                    self._counters_live[counter] = self._counters_live.get(counter, 0) + amount

    def _drop(self, key: str) -> list[int]:
        devices = self._claim_devices.pop(key, [])
        leaving = key in self._leaving_claims
        self._leaving_claims.discard(key)
        for i in devices:
            self._owner.pop(i, None)
            for counter, amount in self.inv.consumption(i):
                self._counters_any[counter] -= amount
                if not leaving:
                    self._counters_live[counter] -= amount
        return devices

    def _set_leaving(self, key: str, leaving: bool) -> None:
        if (key in self._leaving_claims) == leaving or key not in self._claim_devices:
            return
        devices = self._drop(key)
        self._hold(key, devices, leaving)
        self._touch(devices)

    def _touch(self, devices: list[int]) -> None:
        """The answer changed on the nodes that reach these devices, for every class with claims."""
        if not devices:
            return
        reach = [self._reach[i] for i in devices]
        nodes = None if any(r is None for r in reach) else np.unique(np.concatenate(reach))
        for cid in self._classes:
            self.ssn.mark_dirty(cid, nodes)

    def _candidates_of(self, node: int) -> list[int]:
        found = self._candidates.get(node)
        if found is None:
            found = list(self._local.get(node, ())) + self._everywhere
            for mask, indices in self._groups:
                if mask[node]:
                    found.extend(indices)
            found.sort()
            self._candidates[node] = found
        return found

    def _selector_mask(self, terms) -> np.ndarray:
        if terms is None:
            return np.ones(self.n, dtype=bool)
        mask = self._masks.get(terms)
        if mask is None:
            mask = self._masks[terms] = terms_mask(self.snap, terms)
        return mask

    def _allocation_of(self, claim: ResourceClaim) -> Allocation | None:
        mine = self._allocated.get(claim.key)
        if mine is not None:
            return mine[0]
        current = self.ds.dra.claims.get(claim.key)
        return current.allocation if current is not None else claim.allocation

    # --- classes ---------------------------------------------------------------------------
    def _claims(self, cid: int) -> tuple[ResourceClaim, ...] | None:
        uses = self.ds.uses.get(self.snap.classes[cid].head)
        if uses is None:
            return None
        if cid not in self._classes:
            self._classes.add(cid)
            for c in uses.claims:
                if not _own(c):
                    self._named_classes.setdefault(c.key, set()).add(cid)
        return uses.claims

    def filters(self, cid: int) -> bool:
        return self._claims(cid) is not None

    def _split(self, claims) -> tuple[np.ndarray, list[ResourceClaim]]:
        """(the nodes the allocated claims allow, the claims still to allocate)."""
        allowed = np.ones(self.n, dtype=bool)
        pending = []
        for c in claims:
            if _own(c):          # the class stands for each pod's own claim of this spec: never allocated yet
                pending.append(c)
                continue
            allocation = self._allocation_of(c)
            if allocation is not None:
                allowed = allowed & self._selector_mask(allocation.node_selector)
            else:
                pending.append(c)
        return allowed, pending

    def _try(self, pending: list[ResourceClaim], node: int, leaving_free: bool) -> list[Allocation] | None:
        if leaving_free:
            in_use = lambda i: i in self._owner and self._owner[i] not in self._leaving_claims  # noqa: E731
            counters = self._counters_live
        else:
            in_use = self._owner.__contains__
            counters = self._counters_any
        return allocate(pending, self._candidates_of(node), self.inv, in_use, counters, self.snap.node_names[node])

    def _node_code(self, pending: list[ResourceClaim], node: int) -> tuple[int, str | None]:
        try:
            if self._try(pending, node, False) is not None:
                return MASK_PASS, None
            if self._leaving_claims and self._try(pending, node, True) is not None:
                return MASK_LATER, None
        except AllocationError as err:
            return MASK_FAIL, str(err)
        return MASK_FAIL, None

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        claims = self._claims(cid)
        rows = np.arange(self.n) if nodes is None else nodes
        out = np.full(len(rows), MASK_PASS, dtype=np.uint8)
        if claims is None:
            return out
        allowed, pending = self._split(claims)
        out[~allowed[rows]] = MASK_FAIL
        if self._admin_refused(cid, pending):
            out[:] = MASK_FAIL
            return out
        if pending:
            for k, node in enumerate(rows.tolist()):
                if out[k] != MASK_FAIL:
                    out[k] = self._node_code(pending, node)[0]
        return out

    def checks(self, cid: int) -> list[Check]:
        claims = self._claims(cid)
        if claims is None:
            return []
        allowed, pending = self._split(claims)
        failing: dict[str, np.ndarray] = {}

        def fail(message: str, node: int) -> None:
            failing.setdefault(message, np.ones(self.n, dtype=bool))[node] = False

        if self._admin_refused(cid, pending):
            return [Check(ADMIN_NAMESPACE_REFUSED, np.zeros(self.n, dtype=bool))]
        for node in np.flatnonzero(~allowed).tolist():
            fail(NODE_SELECTOR_MISMATCH, node)
        if pending:
            plain: list[int] = []
            for node in np.flatnonzero(allowed).tolist():
                code, error = self._node_code(pending, node)
                if code == MASK_FAIL:
                    if error:
                        fail(error, node)
                    else:
                        plain.append(node)
            figures = {node: f"{CANNOT_ALLOCATE} ({self._figures(pending, node)})" for node in plain[:FIGURED_NODES]}
            # The nodes' figures while they are few enough to read; kube's words alone beyond
            one_message = len(plain) > FIGURED_NODES or len(set(figures.values())) > FIGURE_VARIANTS
            for node in plain:
                fail(CANNOT_ALLOCATE if one_message else figures[node], node)
        return [Check(m, p) for m, p in failing.items()]

    def _admin_refused(self, cid: int, pending: list[ResourceClaim]) -> bool:
        """A claim to allocate asks adminAccess outside a namespace labelled for it."""
        if not any(s.admin_access for c in pending for r in c.spec.requests for s in r.alternatives):
            return False
        namespace = self.snap.pods[self.snap.classes[cid].head].namespace
        return self.snap.namespace_labels(namespace).get(ADMIN_NAMESPACE_LABEL) != "true"

    def _figures(self, pending: list[ResourceClaim], node: int) -> str:
        """How many of the node's devices match the claims' requests, and how many are free."""
        matching = free = 0
        subs = [(c.key, s) for c in pending for r in c.spec.requests for s in r.alternatives]
        for i in self._candidates_of(node):
            try:
                hit = any(self.inv.selectable(s, i, key) for key, s in subs)
            except AllocationError:
                hit = False
            if hit:
                matching += 1
                free += i not in self._owner
        return f"{matching} matching device(s) on the node, {free} free"

    # --- placements ------------------------------------------------------------------------
    def placed(self, t: int, node: int) -> None:
        uses = self.ds.uses.get(t)
        if uses is None:
            return
        chosen: list[tuple[ResourceClaim, Allocation]] = []
        pending = []
        for c in uses.claims:
            mine = self._allocated.get(c.key)
            if mine is not None:
                mine[1].append(t)
                chosen.append((c, mine[0]))
            elif self._allocation_of(c) is not None:
                current = self.ds.dra.claims.get(c.key, c)
                if self.snap.pods[t].uid not in current.reserved_for:
                    chosen.append((current, current.allocation))
            else:
                pending.append(c)
        if pending:
            try:
                made = self._try(pending, node, False) or self._try(pending, node, True)
            except AllocationError:
                made = None
            if made is None:      # the filter passed the node: cannot happen but leave no trace
                made = []
            for c, allocation in zip(pending, made):
                # adminAccess results leave the device free for others (kube's allocated state)
                devices = [self.inv.by_id[r.device_id] for r in allocation.devices if not r.admin_access]
                self._allocated[c.key] = (allocation, [t])
                self._hold(c.key, devices, False)
                chosen.append((c, allocation))
                self._touch(devices)
                for cid in self._named_classes.get(c.key, ()):
                    self.ssn.mark_dirty(cid, None)
        self.choices[t] = chosen
        self._move_charges(t, placed=True)

    def _move_charges(self, t: int, placed: bool) -> None:
        """The first consumer of a shared claim placed carries its queue charge, the others'
        rows lose it (they were charged it, as any of them might have come first); the last one
        unplaced gives it back to them. Rows of placed tasks never change (the ledger takes back
        what it added). If the first is undone while others stay, the claim goes uncounted for
        the rest of the cycle (a gang is undone whole, so all of a job's consumers go together)."""
        for key, (charge, consumers) in self.ds.shared_charges.items():
            if t not in consumers:
                continue
            holders = self._charged.setdefault(key, set())
            if placed:
                if not holders:
                    self._shift(charge, [c for c in consumers if c != t], -1)
                holders.add(t)
            else:
                holders.discard(t)
                if not holders:
                    self._shift(charge, [c for c in consumers if c != t], 1)

    def _shift(self, charge, tasks: list[int], sign: int) -> None:
        request = self.snap.request
        for col, n in charge:
            request[tasks, col] += sign * n

    def unplaced(self, t: int, node: int) -> None:
        uses = self.ds.uses.get(t)
        if uses is None:
            return
        self._move_charges(t, placed=False)
        self.choices.pop(t, None)
        for c in uses.claims:
            mine = self._allocated.get(c.key)
            if mine is None or t not in mine[1]:
                continue
            mine[1].remove(t)
            if mine[1]:
                continue
            del self._allocated[c.key]
            self._touch(self._drop(c.key))
            for cid in self._named_classes.get(c.key, ()):
                self.ssn.mark_dirty(cid, None)

    def _victim_claims(self, t: int) -> list[str]:
        pod = self.snap.pods[t]
        out = []
        for ref in pod.resource_claims or ():
            name = claim_name(pod, ref, self.ds.dra)
            if name is not None:
                out.append(f"{pod.namespace}/{name}")
        return out

    def evicted(self, t: int, node: int) -> None:
        self._victims.add(self.snap.pods[t].uid)
        self._refresh(t)

    def unevicted(self, t: int, node: int) -> None:
        self._victims.discard(self.snap.pods[t].uid)
        self._refresh(t)

    def _refresh(self, t: int) -> None:
        for key in self._victim_claims(t):
            claim = self.ds.dra.claims.get(key)
            if claim is not None and claim.allocation is not None:
                self._set_leaving(key, self._all_leaving(claim))


def _own(claim: ResourceClaim) -> bool:
    """A pod's own claim not allocated yet (a template's): pods alike share a class by its spec
    (runtime.cluster.dra.PodClaims.shape), whatever its name."""
    return claim.allocation is None and bool(claim.owner_uid or claim.template)


def dra_rule(ssn: Session) -> DraRule:
    return DraRule(ssn)
