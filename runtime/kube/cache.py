"""The scheduler's view of the cluster, kept current by list+watch.

One thread per resource (Nodes, Pods, PodGroups, Queues, PriorityClasses, Namespaces, Volcano's
HyperNodes, and the
storage pods claim: PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes) lists, then watches
from the list's resourceVersion. ResourceQuotas and PodDisruptionBudgets are watched only while a
plugin of the policy reads them (`watch_for_plugins`: resourcequota, pdb); until they are listed
(or when the role may not list them) the state holds None for them, "not read", and those plugins
hold jobs or spare victims, saying so, instead of taking "none" for an answer. A watch that ends (server timeout, dropped connection, API
server restart) resumes from the last resourceVersion it saw (bookmarks keep it fresh); only
when the server answers 410 Gone — that version is no longer in its window — does the thread
list again and replace everything it holds for that resource. Connection errors back off
exponentially (capped) and never end the thread. A resource whose CRD may be missing (HyperNodes:
Volcano's topology CRD) counts as synced and empty while its list answers 404 (or 403: a role
older than the resource), said once, and is looked for again every ABSENT_RETRY_S.

`snapshot()` copies the maps (objects are replaced on every change, never mutated, so a
shallow copy is a consistent picture) and lays the scheduler's own recent writes over it:
pods it bound or evicted, PVs it pre-bound and claims it selected a node for, whose watch events
have not arrived yet. Without that overlay the
next cycle would place other pods onto room that is already taken.

`snapshot(fold_settled=True)`, for a plan that folds settled pods (runtime.engine.snapshot.folds_settled),
copies only the pods still in play and counts the rest (runtime.cluster.model.SettledPods): the cache
keeps both as events arrive, lone pods one by one and gangs whole (runtime.kube.settled), so a
cycle's cost follows the pods in play, not the cluster's size.
"""

from __future__ import annotations

import gc
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from runtime.engine.cycle import collector_paused
from runtime.kube import convert
from runtime.kube.api import ApiError, KubeApi
from runtime.kube.podtemplates import PodTemplates
from runtime.kube.settled import Gang, SettledLedger, gang_elastic, gang_settles
from runtime.cluster.model import (
    QUEUE_ANNOTATION, ClusterState, Condition, Node, Pod, PodGroup, QueueObject, member_settles, settles,
)
from runtime.cluster.dra import DeviceClass, ResourceClaim
from runtime.cluster.draspec import DRA_API, add_dra_object, remove_dra_object
from runtime.cluster.kubefields import FieldError
from runtime.cluster.numa import NUMATOPOLOGY_API
from runtime.cluster.objects import ObjectProblem
from runtime.cluster.storage import SELECTED_NODE, ClaimRef, PersistentVolume, PersistentVolumeClaim
from runtime.cluster.topology import TOPOLOGY_API
from runtime.cluster.topology_labels import LabelTopology

log = logging.getLogger("policydsl.kube.cache")
# What a plugin does while the kind it reads is not read (the plugins' reasons say the same).
UNREAD = {"resourcequota": "holds every job with minResources at enqueue",
          "pdb": "lets no pod be a preempt/reclaim victim",
          "numa-aware": "passes no node for a pod asking a NUMA policy (no node has a Numatopology)"}

PAGE_SIZE = 500
WATCH_SECONDS = (240, 480)  # the server ends each watch after a random time in this range
BACKOFF_S = (0.2, 5.0)  # first and longest wait between failed attempts
ERROR_LOG_EVERY_S = 30.0
ABSENT_RETRY_S = 60.0  # an optional resource whose list answered 404 (its CRD missing) is listed again after this
FREEZE_AFTER = 10_000  # a list of at least this many objects is frozen out of the cyclic collector's sight


@dataclass(frozen=True)
class Resource:
    kind: str
    path: str  # list and watch, all namespaces
    api_version: str
    optional: bool = False  # a CRD that may be missing: 404 on the list means none of them, not an error
    # Watched only while this plugin of the policy is on (WATCHED_FOR_PLUGINS); a list answering
    # 403 (a role without it) or 404 leaves it unread (None in the state), never "none of them".
    plugin: str = ""


NODES = Resource("Node", "/api/v1/nodes", "v1")
PODS = Resource("Pod", "/api/v1/pods", "v1")
PODGROUPS = Resource("PodGroup", "/apis/scheduling.volcano.sh/v1beta1/podgroups", convert.VOLCANO_API)
QUEUES = Resource("Queue", "/apis/scheduling.volcano.sh/v1beta1/queues", convert.VOLCANO_API)
PRIORITY_CLASSES = Resource("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", "scheduling.k8s.io/v1")
NAMESPACES = Resource("Namespace", "/api/v1/namespaces", "v1")  # labels, for affinity namespaceSelectors
# What pods' claims reach (runtime.cluster.storage): kube-scheduler's volume plugins read the same four.
PERSISTENT_VOLUMES = Resource("PersistentVolume", "/api/v1/persistentvolumes", "v1")
CLAIMS = Resource("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", "v1")
STORAGE_CLASSES = Resource("StorageClass", "/apis/storage.k8s.io/v1/storageclasses", "storage.k8s.io/v1")
CSINODES = Resource("CSINode", "/apis/storage.k8s.io/v1/csinodes", "storage.k8s.io/v1")
STORAGE_RESOURCES = (STORAGE_CLASSES, CSINODES, PERSISTENT_VOLUMES, CLAIMS)
# Dynamic Resource Allocation (runtime.cluster.dra): what kube-scheduler's DynamicResources plugin reads.
# Optional: a cluster whose API server does not serve resource.k8s.io/v1 has none of them.
DEVICE_CLASSES = Resource("DeviceClass", f"/apis/{DRA_API}/deviceclasses", DRA_API, optional=True)
RESOURCE_SLICES = Resource("ResourceSlice", f"/apis/{DRA_API}/resourceslices", DRA_API, optional=True)
RESOURCE_CLAIMS = Resource("ResourceClaim", f"/apis/{DRA_API}/resourceclaims", DRA_API, optional=True)
CLAIM_TEMPLATES = Resource("ResourceClaimTemplate", f"/apis/{DRA_API}/resourceclaimtemplates", DRA_API, optional=True)
DRA_RESOURCES = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, CLAIM_TEMPLATES)
# Volcano's network topology (runtime.cluster.topology), cluster-scoped; its CRD is often not installed.
HYPERNODES = Resource("HyperNode", f"/apis/{TOPOLOGY_API}/hypernodes", TOPOLOGY_API, optional=True)
RESOURCES = (PRIORITY_CLASSES, NAMESPACES, NODES, HYPERNODES, QUEUES, PODGROUPS, *STORAGE_RESOURCES, *DRA_RESOURCES, PODS)
# What only one plugin reads, watched while it is on (ClusterCache.watch_for_plugins): namespaces'
# ResourceQuotas (resourcequota, at enqueue) and PodDisruptionBudgets (pdb, choosing victims).
RESOURCE_QUOTAS = Resource("ResourceQuota", "/api/v1/resourcequotas", "v1", plugin="resourcequota")
DISRUPTION_BUDGETS = Resource("PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets", "policy/v1",
                              plugin="pdb")
# Volcano's resource exporter's Numatopology objects (numa-aware); its CRD may be missing (404: none read).
NUMATOPOLOGIES = Resource("Numatopology", f"/apis/{NUMATOPOLOGY_API}/numatopologies", NUMATOPOLOGY_API,
                          plugin="numa-aware")
WATCHED_FOR_PLUGINS = (RESOURCE_QUOTAS, DISRUPTION_BUDGETS, NUMATOPOLOGIES)


@dataclass(frozen=True)
class InvalidObject:
    """An object the cache could not read: what is wrong, and which version it said so of."""

    kind: str
    key: str              # namespace/name, or name
    uid: str
    version: str          # metadata.resourceVersion
    message: str


class Gone(Exception):
    """410: the resourceVersion we hold is older than the server's window; list again."""


def _static(node: Node) -> tuple:
    """What the snapshot's cached node arrays (and the image index built from their nodes,
    runtime.engine.images) depend on."""
    return (node.allocatable, node.labels, node.taints, node.unschedulable, node.images)


class ClusterCache:
    def __init__(self, api: KubeApi, scheduler_name: str,
                 on_watch_restart: Callable[[str, str], None] | None = None) -> None:
        self.api = api
        self.scheduler_name = scheduler_name
        self._on_restart = on_watch_restart or (lambda kind, reason: None)
        self._lock = threading.Lock()
        self._state = ClusterState()
        self._last_snapshot: weakref.ref[ClusterState] | None = None   # whose resolved topology the next reuses
        self._classes: dict[str, convert.PriorityClass] = {}
        self._pg_status: dict[str, dict[str, Any]] = {}
        self._queue_status: dict[str, dict[str, Any]] = {}
        # The scheduler's own writes that the watch has not shown yet.
        self._assumed: dict[str, tuple[str, dict[str, str]]] = {}
        # ResourceClaims as our writes leave them (runtime/kube/draclaims.py), until the watch shows it.
        self._assumed_claims: dict[str, ResourceClaim] = {}
        self._state.dra.instantiates_templates = False    # kube-controller-manager makes templates' claims
        self._releasing: set[str] = set()
        # Nominations the scheduler wrote or cleared (status.nominatedNodeName) that the watch has
        # not shown yet (None: cleared), and since when each pod has been nominated to its node.
        self._nominating: dict[str, str | None] = {}
        self._nominated_since: dict[tuple[str, str], float] = {}
        # Every pod of _state.pods is in exactly one of these: counted in _ledger (the objects
        # and the queue counted, to uncount them) or in play.
        self._ledger = SettledLedger(scheduler_name)
        self._settled: dict[str, tuple[Pod, str | None]] = {}
        self._in_play: dict[str, Pod] = {}
        # Pods read a spec at a time: a restart lists 100,000 pods of a few specs, and each pod
        # comes again after its bind (runtime/kube/podtemplates.py).
        self._pod_templates = PodTemplates()
        self._gangs: dict[str, Gang] = {}  # PodGroup key -> our pods naming it
        self._synced: dict[str, threading.Event] = {r.kind: threading.Event() for r in RESOURCES}
        self._resources: list[Resource] = list(RESOURCES)   # watched: RESOURCES and those plugins asked for
        self._started = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # Objects that could not be read, by (kind, key): logged once per resourceVersion; a
        # Queue among them stays in the state as a placeholder saying so (QueueObject.problem),
        # a PodGroup's pods are held back by the connector, each saying what is wrong.
        self._invalid: dict[tuple[str, str], InvalidObject] = {}
        self._terminating: set[str] = set()  # namespaces being deleted: nothing new can be created in them
        self._on_work: Callable[[], None] = lambda: None
        # Volume writes of the scheduler the watch has not shown yet (runtime/kube/volumes.py):
        # PV name -> the claim it was pre-bound to; claim key -> the node selected for it.
        self._claim_refs: dict[str, ClaimRef] = {}
        self._selected: dict[str, str] = {}
        self._orphans: dict[str, set[str]] = {}   # node not (or no longer) known -> keys of pods bound to it

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            self._started = True
            resources = list(self._resources)
        for resource in resources:
            self._start_reflector(resource)

    def _start_reflector(self, resource: Resource) -> None:
        thread = threading.Thread(target=self._reflect, args=(resource,), name=f"watch-{resource.kind}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def watch_for_plugins(self, plugins: Iterable[str]) -> None:
        """Watch the kinds the named plugins read (WATCHED_FOR_PLUGINS), from now on: the first
        policy's at start, a reloaded policy's when it turns such a plugin on (it keeps being
        watched if a later policy turns it off). The cache counts as synced again once listed."""
        wanted = set(plugins)
        with self._lock:
            new = [r for r in WATCHED_FOR_PLUGINS if r.plugin in wanted and r not in self._resources]
            for resource in new:
                self._synced[resource.kind] = threading.Event()
                self._resources.append(resource)
            started = self._started
        for resource in new:
            log.info("%s: watched, since the policy's %s plugin reads them", resource.kind, resource.plugin)
            if started:
                self._start_reflector(resource)

    def stop(self) -> None:
        self._stop.set()
        self.api.close()
        for thread in self._threads:
            thread.join(timeout=2.0)

    @property
    def synced(self) -> bool:
        return all(event.is_set() for event in list(self._synced.values()))

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for event in list(self._synced.values()):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not event.wait(left):
                return False
        return True

    def use_label_topology(self, config: LabelTopology | None) -> None:
        """Derive HyperNodes from node labels while the cluster has no HyperNode objects (opt-in,
        `run --topology-labels`). Each snapshot's topology() derives them again whenever a node or
        its labels change (node_generation), the path that re-resolves HyperNode objects."""
        with self._lock:
            self._state.label_topology = config

    def on_work(self, callback: Callable[[], None]) -> None:
        """Call `callback` (under the cache's lock: it must be quick) when a pod of ours that waits
        for a node, or a PodGroup, appears."""
        self._on_work = callback

    # --- reads -----------------------------------------------------------------------------
    def snapshot(self, fold_settled: bool = False) -> ClusterState:
        """The cluster as the cache sees it, with the scheduler's recent writes laid over it;
        with `fold_settled`, settled pods are counted in `settled` instead of listed in `pods`."""
        with self._lock:
            src = self._state
            state = ClusterState(
                nodes=dict(src.nodes), pods=dict(self._in_play if fold_settled else src.pods),
                podgroups=dict(src.podgroups), queues=dict(src.queues), priority_classes=dict(src.priority_classes),
                default_priority=src.default_priority, node_generation=src.node_generation,
                settled=self._ledger.view() if fold_settled else None, namespaces=dict(src.namespaces),
                settled_pods=self.settled_pods if fold_settled else None, storage=src.storage.copy(),
                hypernodes=dict(src.hypernodes), hypernode_generation=src.hypernode_generation,
                dra=src.dra.copy(),
                label_topology=src.label_topology,
                resource_quotas=None if src.resource_quotas is None else dict(src.resource_quotas),
                disruption_budgets=None if src.disruption_budgets is None else dict(src.disruption_budgets),
                numatopologies=dict(src.numatopologies), numa_held=dict(src.numa_held),
            )
            assumed = list(self._assumed.items())
            state.dra.claims.update(self._assumed_claims)
            releasing = list(self._releasing)
            claim_refs, selected = dict(self._claim_refs), dict(self._selected)
        storage = state.storage
        for name, ref in claim_refs.items():
            pv = storage.volumes.get(name)
            if pv is not None:
                storage.volumes[name] = replace(pv, claim_ref=ref)
        for key, node in selected.items():
            claim = storage.claims.get(key)
            if claim is not None:
                storage.claims[key] = replace(claim, annotations={**claim.annotations, SELECTED_NODE: node})
        for key, (node, cards) in assumed:
            pod = state.pods.get(key)
            if pod is not None and pod.node_name is None:
                state.pods[key] = replace(pod, node_name=node, annotations={**pod.annotations, **cards})
        for key in releasing:
            pod = state.pods.get(key)
            if pod is not None and not pod.releasing:
                state.pods[key] = replace(pod, releasing=True)
        self._overlay_nominations(state)
        # The HyperNodes resolved (or derived from labels) for the last snapshot serve this one while
        # its nodes and HyperNodes are the same (ClusterState.topology() checks the generations), so
        # a cycle resolves again only after a change. A weak reference: the live view keeps the last
        # cycle's state anyway, and without it a lost memo only costs resolving again.
        last = self._last_snapshot() if self._last_snapshot is not None else None
        if last is not None and last._topology is not None:
            state._topology = last._topology
        self._last_snapshot = weakref.ref(state)
        return state

    def _overlay_nominations(self, state: ClusterState) -> None:
        """Nominations as the scheduler last wrote them, each with the time it was first seen
        (a reservation's time limit counts from there; a restart counts afresh)."""
        with self._lock:
            nominating = dict(self._nominating)
        now = time.time()
        seen: dict[tuple[str, str], float] = {}
        for key, pod in state.pods.items():
            node = nominating.get(key, pod.nominated_node) if pod.node_name is None else None
            if node is None:
                if pod.nominated_node is not None:
                    state.pods[key] = replace(pod, nominated_node=None, nominated_at=None)
                continue
            since = seen[(key, node)] = self._nominated_since.get((key, node), now)
            state.pods[key] = replace(pod, nominated_node=node, nominated_at=since)
        with self._lock:
            self._nominated_since = seen

    def assume_nominated(self, key: str, node: str | None) -> None:
        """The scheduler wrote (or, with None, cleared) the pod's nominatedNodeName."""
        with self._lock:
            self._nominating[key] = node

    def settled_pods(self) -> list[Pod]:
        """The pods counted as settled, listed (a cycle whose pods carry inter-pod rules reads
        every placed pod's labels)."""
        with self._lock:
            return [pod for pod, _ in self._settled.values()]

    def pod(self, key: str) -> Pod | None:
        with self._lock:
            return self._state.pods.get(key)

    def node(self, name: str) -> Node | None:
        with self._lock:
            return self._state.nodes.get(name)

    def podgroup(self, key: str) -> PodGroup | None:
        with self._lock:
            return self._state.podgroups.get(key)

    def podgroup_status(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._pg_status.get(key)

    def podgroup_statuses(self) -> dict[str, dict[str, Any]]:
        """Every PodGroup's last known status, at once (one lock instead of one per group)."""
        with self._lock:
            return dict(self._pg_status)

    def queue_status(self, name: str) -> dict[str, Any] | None:
        """The status of a Queue *object* of the cluster (None for queues only the policy has)."""
        with self._lock:
            return self._queue_status.get(name) if name in self._state.queues else None

    def terminating_namespaces(self) -> frozenset[str]:
        """Namespaces being deleted (deletionTimestamp set): the API server refuses Bindings and
        Events in them."""
        with self._lock:
            return frozenset(self._terminating)

    def invalid_objects(self) -> list[InvalidObject]:
        with self._lock:
            return list(self._invalid.values())

    def queue_objects_by_name(self) -> dict[str, QueueObject]:
        with self._lock:
            return dict(self._state.queues)

    def queue_objects(self) -> list[str]:
        with self._lock:
            return list(self._state.queues)

    # --- the scheduler's own writes --------------------------------------------------------
    def assume_bound(self, key: str, node: str, annotations: dict[str, str]) -> None:
        with self._lock:
            pod = self._state.pods.get(key)
            if pod is not None and pod.node_name is None:
                self._assumed[key] = (node, annotations)

    def assume_numa(self, key: str, node: str, cpus: frozenset[int]) -> None:
        """The exclusive CPUs the numa-aware plugin gave a pod being bound: out of the scheduler's
        view of its node until the exporter reports (ClusterState.numa_take)."""
        with self._lock:
            self._state.numa_take(key, node, cpus)

    def device_classes(self) -> dict[str, DeviceClass]:
        with self._lock:
            return dict(self._state.dra.classes)

    def assume_claims(self, claims: list[ResourceClaim]) -> None:
        """ResourceClaims as the scheduler is writing them (allocated, reserved for a pod): each
        snapshot shows them so until the watch does, or `forget_claims`."""
        with self._lock:
            for claim in claims:
                self._assumed_claims[claim.key] = claim

    def forget_claims(self, keys: list[str]) -> None:
        """Writes that did not happen (or were undone): the watched claims stand."""
        with self._lock:
            for key in keys:
                self._assumed_claims.pop(key, None)

    def forget_assumed(self, key: str) -> None:
        """A bind that did not happen: the pod is pending again for the next cycle."""
        with self._lock:
            self._assumed.pop(key, None)

    def assume_releasing(self, key: str) -> None:
        with self._lock:
            pod = self._state.pods.get(key)
            if pod is not None and not pod.releasing:
                self._releasing.add(key)
                self._track(key)  # an overlaid pod stays in play

    def claim(self, key: str) -> PersistentVolumeClaim | None:
        with self._lock:
            return self._state.storage.claims.get(key)

    def volume(self, name: str) -> PersistentVolume | None:
        with self._lock:
            return self._state.storage.volumes.get(name)

    def assume_claim_ref(self, volume: str, ref: ClaimRef | None) -> None:
        """The scheduler is pre-binding PV `volume` to a claim (None: no longer)."""
        with self._lock:
            if ref is None:
                self._claim_refs.pop(volume, None)
            else:
                self._claim_refs[volume] = ref

    def assume_selected_node(self, claim: str, node: str | None) -> None:
        """The scheduler is asking provisioning of `claim` for `node` (None: no longer)."""
        with self._lock:
            if node is None:
                self._selected.pop(claim, None)
            else:
                self._selected[claim] = node

    def observe(self, kind: str, obj: dict[str, Any]) -> None:
        """An object as the API server answered a write of ours: taken at once unless the
        watch already brought a newer version."""
        resource = next(r for r in RESOURCES if r.kind == kind)
        with self._lock:
            held = self._held_version(resource, obj)
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if held.isdigit() and version.isdigit() and int(held) >= int(version):
                return
            self._upsert(resource, obj)

    def _held_version(self, resource: Resource, obj: dict[str, Any]) -> str:
        storage = self._state.storage
        key = convert.object_key(obj)
        held = (storage.volumes.get(key) if resource is PERSISTENT_VOLUMES else
                storage.claims.get(key) if resource is CLAIMS else None)
        return held.resource_version if held is not None else ""

    def assumed_count(self) -> int:
        with self._lock:
            return len(self._assumed)

    def record_podgroup_status(self, key: str, status: dict[str, Any], hypernode: str | None = None) -> None:
        """A status (and, unless None, the job's HyperNode annotation) the scheduler wrote: seen
        by the next cycle before the watch echoes it."""
        with self._lock:
            group = self._state.podgroups.get(key)
            if group is None:
                return
            merged = {**self._pg_status.get(key, {}), **status}
            self._pg_status[key] = merged
            self._state.podgroups[key] = replace(
                group, phase=str(merged.get("phase") or group.phase), conditions=_conditions(merged),
                allocated_hypernode=group.allocated_hypernode if hypernode is None else hypernode)
            self._review(key)

    def record_queue_status(self, name: str, status: dict[str, Any]) -> None:
        with self._lock:
            if name in self._state.queues:
                self._queue_status[name] = {**self._queue_status.get(name, {}), **status}

    # --- reflector ---------------------------------------------------------------------------
    def _reflect(self, resource: Resource) -> None:
        version: str | None = None
        delay = BACKOFF_S[0]
        failing_since: float | None = None
        last_logged = 0.0
        absent_said = False
        while not self._stop.is_set():
            try:
                if version is None:
                    try:
                        version = self._list(resource)
                    except ApiError as err:
                        if resource.plugin and err.status in (404, 403):
                            if not absent_said:
                                log.warning("%s: %s %s (the scheduler's ClusterRole may not list it, "
                                            "deploy/rbac.yaml): not read, so the %s plugin %s; looked for again "
                                            "every %.0fs", resource.kind, err.status, resource.path, resource.plugin,
                                            UNREAD[resource.plugin], ABSENT_RETRY_S)
                                absent_said = True
                            self._unread(resource)
                            self._synced[resource.kind].set()
                            failing_since, delay = None, BACKOFF_S[0]
                            self._stop.wait(ABSENT_RETRY_S)
                            continue
                        if not (resource.optional and err.status in (404, 403)):
                            raise
                        # The CRD is not installed (404), or our role predates it (403): none of
                        # them, synced (scheduling goes on without them); looked for again later.
                        if not absent_said:
                            why = ("its CRD is not installed" if err.status == 404 else
                                   "the scheduler's ClusterRole may not list it (deploy/rbac.yaml)")
                            log.warning("%s: %s %s (%s): taken as none, looked for again every %.0fs",
                                        resource.kind, err.status, resource.path, why, ABSENT_RETRY_S)
                            absent_said = True
                        self._replace(resource, [])
                        self._synced[resource.kind].set()
                        failing_since, delay = None, BACKOFF_S[0]
                        self._stop.wait(ABSENT_RETRY_S)
                        continue
                    if absent_said:
                        log.info("%s: served by the API server now; watching", resource.kind)
                        absent_said = False
                    self._synced[resource.kind].set()
                    if failing_since is not None:
                        log.info("%s: listed again after %.1fs of errors", resource.kind, time.monotonic() - failing_since)
                    failing_since, delay = None, BACKOFF_S[0]
                # The version advances with every event, so a dropped watch resumes where it was.
                for version in self._watch(resource, version):
                    if failing_since is not None:
                        log.info("watch %s: connected again after %.1fs", resource.kind, time.monotonic() - failing_since)
                        failing_since, delay = None, BACKOFF_S[0]
            except Gone:
                log.info("watch %s: resourceVersion %s expired (410 Gone), listing again", resource.kind, version)
                self._on_restart(resource.kind, "expired")
                version = None
            except ApiError as err:
                if self._stop.is_set():
                    return
                if err.status == 410 or ((resource.optional or resource.plugin) and err.status == 404):  # 404: its CRD went away
                    self._on_restart(resource.kind, "expired" if err.status == 410 else "error")
                    version = None
                    continue
                self._on_restart(resource.kind, "error")
                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                if now - last_logged >= ERROR_LOG_EVERY_S:
                    log.warning("watch %s failed (%s); retrying with backoff", resource.kind, err)
                    last_logged = now
                self._stop.wait(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, BACKOFF_S[1])
            except Exception:  # noqa: BLE001 - a dead watch thread would freeze the cache for good
                log.exception("watch %s: unexpected error; listing again", resource.kind)
                self._on_restart(resource.kind, "error")
                version = None
                self._stop.wait(BACKOFF_S[1])

    def _list(self, resource: Resource) -> str:
        started = time.monotonic()
        # The cyclic collector off while any reflector lists (they list at once at start), the
        # same pause as a cycle's: parsing and converting a list allocates millions of containers
        # that all stay alive, and each collection they trigger walks everything built so far
        # (40% of the time to list 100,000 pods: 52 s against 31 s). Nothing a list builds is
        # cyclic garbage.
        with collector_paused:
            version, count = self._list_and_replace(resource)
        if count >= FREEZE_AFTER:
            # What the list built lives until replaced: out of the cyclic collector's sight, each
            # full collection while pods stream in does not walk 100,000 pods again (refcounting
            # frees them all the same once replaced: nothing of them is cyclic).
            gc.freeze()
        seconds = time.monotonic() - started
        log.log(logging.INFO if seconds >= 1.0 else logging.DEBUG, "%s: listed %d in %.1fs", resource.kind, count,
                seconds)
        return version

    def _list_and_replace(self, resource: Resource) -> tuple[str, int]:
        # resourceVersion 0, as client-go's reflectors list: the API server answers from its watch
        # cache (any version it holds, not a quorum read of etcd), in one answer whatever the limit;
        # the watch from the version listed brings whatever came after. Paged quorum reads cost
        # 4-5x as long: 100,000 pods in 200 pages of 500 took 16-25 s against 4.5 s.
        items: list[dict[str, Any]] = []
        query: dict[str, Any] = {"limit": PAGE_SIZE, "resourceVersion": "0"}
        while True:
            try:
                page = self.api.get(resource.path, query)
            except ApiError as err:
                if err.status == 410 and "continue" in query:  # the continue token expired: start over
                    items, query = [], {"limit": PAGE_SIZE, "resourceVersion": "0"}
                    continue
                raise
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                version = str(meta.get("resourceVersion", ""))
                break
            query = {"limit": PAGE_SIZE, "continue": meta["continue"]}
        self._replace(resource, items)
        return version, len(items)

    def _watch(self, resource: Resource, version: str) -> Iterator[str]:
        """Apply the events of one watch; yields the resourceVersion after each."""
        query = {"resourceVersion": version, "allowWatchBookmarks": "true"}
        for event in self.api.watch(resource.path, query, random.randint(*WATCH_SECONDS)):
            if self._stop.is_set():
                return
            if event.type == "ERROR":
                code = int(event.object.get("code") or 0)
                if code == 410:
                    raise Gone()
                raise ApiError(code, str(event.object.get("reason", "")), str(event.object.get("message", "")))
            meta = event.object.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            if event.type != "BOOKMARK":
                with self._lock:
                    if event.type == "DELETED":
                        self._delete(resource, event.object)
                    else:
                        self._upsert(resource, event.object)
            yield version

    # --- applying objects (caller holds the lock) ----------------------------------------------
    def _unread(self, resource: Resource) -> None:
        """A kind a plugin reads that could not be listed: not read (None), until it is."""
        with self._lock:
            if resource is RESOURCE_QUOTAS:
                self._state.resource_quotas = None
            elif resource is DISRUPTION_BUDGETS:
                self._state.disruption_budgets = None
            elif resource is NUMATOPOLOGIES:
                self._state.numatopologies = {}

    def _replace(self, resource: Resource, items: list[dict[str, Any]]) -> None:
        with self._lock:
            st = self._state
            if resource is NODES:
                st.nodes = {}
                st.node_generation += 1
            elif resource is PODS:
                st.pods = {}
                self._ledger.clear()
                self._settled, self._in_play, self._gangs = {}, {}, {}
                self._orphans = {}
            elif resource is PODGROUPS:
                st.podgroups, self._pg_status = {}, {}
            elif resource is QUEUES:
                st.queues, self._queue_status = {}, {}
            elif resource is PRIORITY_CLASSES:
                self._classes = {}
            elif resource is NAMESPACES:
                st.namespaces = {}
                self._terminating = set()
            elif resource is PERSISTENT_VOLUMES:
                st.storage.volumes = {}
            elif resource is CLAIMS:
                st.storage.claims = {}
            elif resource is STORAGE_CLASSES:
                st.storage.classes = {}
            elif resource is CSINODES:
                st.storage.csinodes = {}
            elif resource in DRA_RESOURCES:
                remove_all = {DEVICE_CLASSES: st.dra.classes, RESOURCE_SLICES: st.dra.slices,
                              RESOURCE_CLAIMS: st.dra.claims, CLAIM_TEMPLATES: st.dra.templates}[resource]
                remove_all.clear()
            elif resource is HYPERNODES:
                if st.hypernodes:
                    st.hypernodes = {}
                    st.hypernode_generation += 1
            elif resource is RESOURCE_QUOTAS:
                st.resource_quotas = {}
            elif resource is DISRUPTION_BUDGETS:
                st.disruption_budgets = {}
            elif resource is NUMATOPOLOGIES:     # listed again: each report merges with the view (add_numatopology)
                listed = {str((item.get("metadata") or {}).get("name", "")) for item in items}
                st.numatopologies = {k: v for k, v in st.numatopologies.items() if k in listed}
            self._invalid = {k: v for k, v in self._invalid.items() if k[0] != resource.kind}
            for item in items:
                self._upsert(resource, item)
            if resource is PODS:  # drop overlays the listed state already shows (or never will)
                self._assumed = {k: v for k, v in self._assumed.items()
                                 if k in st.pods and st.pods[k].node_name is None}
                self._releasing = {k for k in self._releasing if k in st.pods and not st.pods[k].releasing}
            if resource is PRIORITY_CLASSES:
                self._refresh_classes()
            if resource is NODES:   # nodes the listing no longer has: their pods count nowhere
                self._track_pods_on({p.node_name for p in st.pods.values() if p.node_name is not None
                                     and p.node_name not in st.nodes and p.node_name not in self._orphans})
            if resource is PODGROUPS:  # gangs whose PodGroup the listing no longer has
                for key in list(self._gangs):
                    self._review(key)

    def _upsert(self, resource: Resource, obj: dict[str, Any]) -> None:
        st = self._state
        key = convert.object_key(obj)
        try:
            if resource is PODS:
                pod = self._pod_templates.read(obj, st.priority_classes)
                if convert.pod_matters(pod, self.scheduler_name):
                    if pod.node_name is None and pod.key not in st.pods and pod.scheduler_name == self.scheduler_name:
                        self._on_work()
                    st.pods[pod.key] = pod
                    if pod.node_name is not None or self._nominating.get(pod.key, "") == pod.nominated_node:
                        self._nominating.pop(pod.key, None)   # the watch shows what was written
                    if pod.node_name is not None:
                        self._assumed.pop(pod.key, None)
                    if pod.releasing:
                        self._releasing.discard(pod.key)
                    self._track(pod.key)
                else:
                    self._forget_pod(pod.key)
            elif resource is NODES:
                node = convert.node_from(obj)
                old = st.nodes.get(node.name)
                st.nodes[node.name] = node
                if old is None or _static(old) != _static(node):
                    st.node_generation += 1
                if old is None:
                    for key in list(self._orphans.pop(node.name, ())):
                        self._track(key)
            elif resource is PODGROUPS:
                group = convert.podgroup_from(obj)
                if group.key not in st.podgroups:
                    self._on_work()
                st.podgroups[group.key] = group
                self._pg_status[group.key] = dict(obj.get("status") or {})
                self._review(group.key)
            elif resource is QUEUES:
                queue = convert.queue_from(obj)
                st.queues[queue.name] = queue
                self._queue_status[queue.name] = dict(obj.get("status") or {})
            elif resource is PRIORITY_CLASSES:
                pc = convert.priority_class_from(obj)
                self._classes[pc.name] = pc
                self._refresh_classes()
            elif resource is NAMESPACES:
                name, labels = convert.namespace_from(obj)
                st.namespaces[name] = labels
                if (obj.get("metadata") or {}).get("deletionTimestamp"):
                    self._terminating.add(name)
                else:
                    self._terminating.discard(name)
            elif resource is PERSISTENT_VOLUMES:
                pv = convert.volume_from(obj)
                st.storage.volumes[pv.name] = pv
                if pv.claim_ref is not None and self._claim_refs.get(pv.name) == pv.claim_ref:
                    del self._claim_refs[pv.name]     # the watch shows what was written
            elif resource is CLAIMS:
                claim = convert.claim_from(obj)
                st.storage.claims[claim.key] = claim
                if claim.volume_name or (claim.key in self._selected and
                                         claim.selected_node == self._selected[claim.key]):
                    self._selected.pop(claim.key, None)
            elif resource is STORAGE_CLASSES:
                cls = convert.storage_class_from(obj)
                st.storage.classes[cls.name] = cls
            elif resource is CSINODES:
                csinode = convert.csinode_from(obj)
                st.storage.csinodes[csinode.name] = csinode
            elif resource in DRA_RESOURCES:
                try:
                    add_dra_object(st.dra, {**obj, "kind": resource.kind, "apiVersion": DRA_API})
                except FieldError as err:
                    raise convert.ObjectError([ObjectProblem("<api>", resource.kind, key, str(err))]) from None
                assumed = self._assumed_claims.get(key) if resource is RESOURCE_CLAIMS else None
                if assumed is not None:     # the watch shows our write: the overlay is done
                    seen = st.dra.claims[key]
                    if seen.allocation is not None and set(assumed.reserved_for) <= set(seen.reserved_for):
                        self._assumed_claims.pop(key, None)
            elif resource is HYPERNODES:
                hypernode = convert.hypernode_from(obj)
                if st.hypernodes.get(hypernode.name) != hypernode:   # a status update changes nothing here
                    st.add_hypernode(hypernode)
            elif resource is RESOURCE_QUOTAS:
                if st.resource_quotas is not None:     # else listed again (after 403/404) before it counts
                    st.resource_quotas[key] = convert.resource_quota_from(obj)
            elif resource is DISRUPTION_BUDGETS:
                if st.disruption_budgets is not None:
                    st.disruption_budgets[key] = convert.disruption_budget_from(obj)
            elif resource is NUMATOPOLOGIES:
                st.add_numatopology(convert.numatopology_from(obj))
        except convert.ObjectError as err:
            meta = obj.get("metadata") or {}
            version = str(meta.get("resourceVersion", ""))
            message = "; ".join(p.message for p in err.problems)
            seen = self._invalid.get((resource.kind, key))
            if seen is None or seen.version != version:
                what = {"PodGroup": "its pods wait until it is fixed", "Queue": "its jobs wait until it is fixed",
                        "HyperNode": "left out of the topology until it is fixed"}
                log.warning("%s %s is invalid (%s): %s", resource.kind, key, what.get(resource.kind, "ignored"),
                            message, extra={resource.kind.lower(): key})
            self._delete(resource, obj)
            self._invalid[(resource.kind, key)] = InvalidObject(resource.kind, key, str(meta.get("uid") or ""),
                                                                version, message)
            if resource is QUEUES:   # PodGroups naming it are told what is wrong with it, not that it is missing
                st.queues[key] = QueueObject(key, uid=str(meta.get("uid") or ""), problem=message)
                self._queue_status[key] = dict(obj.get("status") or {})
            return
        self._invalid.pop((resource.kind, key), None)

    def _delete(self, resource: Resource, obj: dict[str, Any]) -> None:
        st = self._state
        key = convert.object_key(obj)
        self._invalid.pop((resource.kind, key), None)
        if resource is PODS:
            self._forget_pod(key)
        elif resource is NODES:
            if st.nodes.pop(key, None) is not None:
                st.node_generation += 1
                self._track_pods_on({key})
        elif resource is PODGROUPS:
            st.podgroups.pop(key, None)
            self._pg_status.pop(key, None)
            self._review(key)
        elif resource is QUEUES:
            st.queues.pop(key, None)
            self._queue_status.pop(key, None)
        elif resource is PRIORITY_CLASSES:
            self._classes.pop(key, None)
            self._refresh_classes()
        elif resource is NAMESPACES:
            st.namespaces.pop(key, None)
            self._terminating.discard(key)
        elif resource is PERSISTENT_VOLUMES:
            st.storage.volumes.pop(key, None)
            self._claim_refs.pop(key, None)
        elif resource is CLAIMS:
            st.storage.claims.pop(key, None)
            self._selected.pop(key, None)
        elif resource is STORAGE_CLASSES:
            st.storage.classes.pop(key, None)
        elif resource is CSINODES:
            st.storage.csinodes.pop(key, None)
        elif resource in DRA_RESOURCES:
            remove_dra_object(st.dra, resource.kind, key)
            self._assumed_claims.pop(key, None)
        elif resource is HYPERNODES:
            st.remove_hypernode(key)
        elif resource is RESOURCE_QUOTAS:
            if st.resource_quotas is not None:
                st.resource_quotas.pop(key, None)
        elif resource is DISRUPTION_BUDGETS:
            if st.disruption_budgets is not None:
                st.disruption_budgets.pop(key, None)
        elif resource is NUMATOPOLOGIES:
            st.remove_numatopology(key)

    def _forget_pod(self, key: str) -> None:
        self._state.pods.pop(key, None)
        self._assumed.pop(key, None)
        self._nominating.pop(key, None)
        self._releasing.discard(key)
        self._track(key)

    def _track_pods_on(self, nodes: set[str]) -> None:
        """Count again the pods bound to `nodes` (deleted): a pass over the pods, as rare as node deletions."""
        if nodes:
            for key in [k for k, p in self._state.pods.items() if p.node_name in nodes]:
                self._track(key)

    def _track(self, key: str) -> None:
        """Count the pod now at `key` as settled, or keep it in play (after any change to it)."""
        counted = self._settled.pop(key, None)
        if counted is not None:
            self._ledger.remove(*counted)
        before = self._in_play.pop(key, None) or (counted[0] if counted is not None else None)
        pod = self._state.pods.get(key)
        gang_before, gang_now = self._gang_key(before), self._gang_key(pod)
        if gang_before is not None and gang_before != gang_now:
            self._gangs[gang_before].leave(key)
            self._review(gang_before)
        if before is not None and before.node_name in self._orphans:
            self._orphans[before.node_name].discard(key)
        if pod is None:
            return
        # Bound to a node that is gone (the pod garbage collector has not removed it yet): kept
        # in play, where the snapshot counts it in no queue and on no node, until its node
        # comes back (listed late) or the pod goes.
        orphan = pod.node_name is not None and pod.node_name not in self._state.nodes and not pod.terminal
        if orphan:
            self._orphans.setdefault(pod.node_name, set()).add(key)
        if gang_now is not None:
            self._in_play[key] = pod
            gang = self._gangs.setdefault(gang_now, Gang())
            gang.join(key, pod, key not in self._releasing and not orphan and member_settles(pod))
            self._review(gang_now, key)
        elif orphan:
            self._in_play[key] = pod
        elif key not in self._releasing and settles(pod, self.scheduler_name):
            self._count(key, pod, pod.annotations.get(QUEUE_ANNOTATION))
        else:
            self._in_play[key] = pod

    def _gang_key(self, pod: Pod | None) -> str | None:
        """The PodGroup a pod of ours belongs to; None for lone pods and other schedulers' pods."""
        if pod is None or not pod.group or pod.scheduler_name != self.scheduler_name:
            return None
        return f"{pod.namespace}/{pod.group}"

    def _review(self, gang_key: str, changed: str | None = None) -> None:
        """Settle the gang, or put it in play, after a change to it (`changed`: a member's key,
        which _track left in play)."""
        gang = self._gangs.get(gang_key)
        if gang is None:
            return
        group = self._state.podgroups.get(gang_key)
        # The queue to count it under while it settles; None while it is in play.
        queue = group.queue if group is not None and gang_settles(
            group, self._pg_status.get(gang_key), gang, self._state.has_hypernodes) else None
        if gang.folded is not None and gang.folded != queue:
            for key, (pod, _) in gang.members.items():
                counted = self._settled.pop(key, None)
                if counted is not None:
                    self._ledger.remove(*counted)
                    self._in_play[key] = pod
            self._ledger.add_group(gang.folded, -1, gang.elastic)
            gang.folded, gang.elastic = None, {}
        if queue is not None:
            if gang.folded is None:
                for key, (pod, _) in gang.members.items():
                    del self._in_play[key]
                    self._count(key, pod, queue)
                gang.elastic = gang_elastic(group, gang)
                self._ledger.add_group(queue, 1, gang.elastic)
                gang.folded = queue
            elif changed is not None and changed in self._in_play:
                self._count(changed, self._in_play.pop(changed), queue)
        if not gang.members:
            del self._gangs[gang_key]

    def _count(self, key: str, pod: Pod, queue: str | None) -> None:
        self._settled[key] = (pod, queue)
        self._ledger.add(pod, queue)

    def _refresh_classes(self) -> None:
        st = self._state
        st.priority_classes = {pc.name: pc.value for pc in self._classes.values()}
        st.default_priority = next((pc.value for pc in self._classes.values() if pc.global_default), 0)


def _conditions(status: dict[str, Any]) -> list[Condition]:
    return [Condition(str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason", "")),
                      str(c.get("message", ""))) for c in status.get("conditions") or [] if isinstance(c, dict)]


__all__ = ["ClusterCache", "Resource", "RESOURCES", "WATCHED_FOR_PLUGINS", "Gone"]
