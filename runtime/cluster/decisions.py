"""What one scheduling cycle decided: bindings, evictions, PodGroup status, and why pods wait.

Reasons are objects (`Reason.kind`, `.message`, `.details`) so `policydsl explain` and
Kubernetes Events can use the same facts; `Decisions.to_json()` is the stable, sorted text form:

    {"bindings": [{"pod": "ns/name", "node": "...", "devices": {...}}],
     "evictions": [{"pod": "ns/name", "reason": "..."}],
     "podgroups": [{"name": "ns/pg", "phase": "..."}],
     "unschedulable": [{"pod": "ns/name", "reasons": ["..."]}]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from runtime.cluster.model import Condition

if TYPE_CHECKING:  # pragma: no cover
    from runtime.cluster.dra import Allocation, ResourceClaim

# Reason kinds.
NODES = "nodes"                  # no node passes the predicates (with per-cause node counts)
QUEUE = "queue"                  # the queue may not take more (capability, deserved, closed)
GANG = "gang"                    # the gang could not be placed as a whole
DEVICE = "device"                # no card fits
ENQUEUE = "enqueue"              # the job was not admitted
MEMBERS = "members"              # the gang has fewer pods than minMember: it waits for them to exist
JOB = "job"                      # the job is invalid (unknown queue or PodGroup, ...)
PREEMPTION = "preemption"        # evicted for a preemptor
RECLAIM = "reclaim"              # evicted for another queue
SHUFFLE = "shuffle"              # evicted by the shuffle action (a closed revocable zone, an overused node)
RESERVATION = "reservation"      # a held room released
GATED = "gated"                  # the pod has scheduling gates
UNSUPPORTED = "unsupported"      # the pod sets a field the scheduler does not evaluate
BIND = "bind"                    # the API server refused the pod's Binding for good: held back until it changes
VOLUME = "volume"                # its PersistentVolumeClaims keep it from every node (missing, unbound, ...)
CLAIM = "claim"                  # its ResourceClaims keep it from every node (missing, being deleted, ...)


@dataclass(frozen=True)
class Reason:
    kind: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        return self.message


@dataclass(slots=True)                   # slots: built field by field in kernels/passes.py
class Binding:
    pod: str
    node: str
    devices: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"pod": self.pod, "node": self.node,
                "devices": {r: list(c) for r, c in sorted(self.devices.items())}}


@dataclass(frozen=True)
class VolumeChoice:
    """What a placement decided for one of the pod's claims that is not bound yet: the PV to
    bind it to (`volume`), or provisioning for the pod's node (`volume` None). On a cluster the
    PV's claimRef, or the claim's `volume.kubernetes.io/selected-node`, is written before the
    pod's Binding, which waits until the claim is bound."""

    claim: str                    # namespace/name
    volume: str | None

    def to_dict(self) -> dict:
        return {"claim": self.claim, "volume": self.volume}


@dataclass(frozen=True)
class Eviction:
    pod: str
    reason: Reason

    def to_dict(self) -> dict:
        return {"pod": self.pod, "reason": self.reason.message}


@dataclass(frozen=True, slots=True)      # slots: built field by field in kernels/passes.py
class PodGroupStatus:
    name: str
    phase: str
    conditions: tuple[Condition, ...] = ()

    def to_dict(self) -> dict:
        return {"name": self.name, "phase": self.phase}


@dataclass(frozen=True)
class Unschedulable:
    pod: str
    reasons: tuple[Reason, ...]

    def to_dict(self) -> dict:
        return {"pod": self.pod, "reasons": [r.message for r in self.reasons]}


@dataclass
class Decisions:
    bindings: list[Binding] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    podgroups: list[PodGroupStatus] = field(default_factory=list)
    unschedulable: list[Unschedulable] = field(default_factory=list)
    # Tasks pipelined onto nodes whose releasing pods will make room (no binding yet): each is
    # nominated there (status.nominatedNodeName), its room held across cycles.
    pipelined: dict[str, str] = field(default_factory=dict)
    # Reservations that ended without a binding: pod -> why (nomination cleared).
    released: dict[str, Reason] = field(default_factory=dict)
    now: float | None = None         # the cycle's clock (Options.now)
    # Bindings whose pods have claims not bound yet: pod -> what to bind each claim to (the
    # pod's binding waits for them on a cluster; the simulator binds them at once).
    volumes: dict[str, tuple[VolumeChoice, ...]] = field(default_factory=dict)
    # Jobs asking for network topology whose HyperNode changed: PodGroup key -> the lowest
    # HyperNode holding all their placed pods (the volcano.sh/job-allocated-hypernode annotation).
    hypernodes: dict[str, str] = field(default_factory=dict)
    # Bindings whose pods have ResourceClaims not allocated (or not reserved for them) yet: pod ->
    # (claim, its allocation) each, written (status.allocation, status.reservedFor) before the
    # Binding (runtime.engine.rules.dra).
    claims: dict[str, tuple[tuple["ResourceClaim", "Allocation"], ...]] = field(default_factory=dict)
    # Bindings' exclusive CPUs as the numa-aware plugin assigned them: pod -> CPU ids of its node's
    # Numatopology (the scheduler's view holds them until the exporter reports: ClusterState.numa_take).
    numa: dict[str, frozenset[int]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {
            "bindings": [b.to_dict() for b in sorted(self.bindings, key=lambda b: b.pod)],
            "evictions": [e.to_dict() for e in sorted(self.evictions, key=lambda e: e.pod)],
            "podgroups": [p.to_dict() for p in sorted(self.podgroups, key=lambda p: p.name)],
            "unschedulable": [u.to_dict() for u in sorted(self.unschedulable, key=lambda u: u.pod)],
        }
        if self.volumes:
            out["volumes"] = [{"pod": pod, "claims": [c.to_dict() for c in choices]}
                              for pod, choices in sorted(self.volumes.items())]
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    def binding_of(self, pod: str) -> Binding | None:
        return next((b for b in self.bindings if b.pod == pod), None)

    def reasons_for(self, pod: str) -> tuple[Reason, ...]:
        return next((u.reasons for u in self.unschedulable if u.pod == pod), ())
