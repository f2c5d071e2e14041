"""numa-aware: Volcano's plugin of that name (pkg/scheduler/plugins/numaaware, v1.14.1).

It reads each node's Numatopology (runtime.cluster.numa: the kubelet's CPU and topology manager
policies, the free CPUs, each CPU's NUMA node, socket and core, the reserved CPUs) and places a
Guaranteed pod's exclusive CPUs container by container as the kubelet's topology manager would
admit them, so a pod is not bound where the kubelet would refuse it (TopologyAffinityError).

Filter (Volcano's predicateFn), for a Guaranteed pod only (any other passes everywhere):
- a pod whose `volcano.sh/numa-topology-policy` is best-effort, restricted or single-numa-node
  passes only nodes with a Numatopology whose CPU manager policy is `static`, whose topology
  manager policy is the pod's, and that list free CPUs;
- a pod without a policy (or `none`) passes, unchecked, nodes without a Numatopology, with a
  CPU manager policy other than static or a topology manager policy none/empty; on the other
  nodes it is checked under the node's policy, as the kubelet would;
- checked: for each container in order, the CPU hints (every set of NUMA nodes with enough free
  CPUs, those of the fewest NUMA nodes that could ever hold the request preferred) are merged as
  the node's policy merges them (best-effort admits anything, restricted a preferred hint,
  single-numa-node a preferred hint of one NUMA node); a container not admitted fails the node;
  else its CPUs are taken (aligned to the hint first, then by topology: whole sockets, whole
  cores, then threads) and the next container sees the rest.
Score (Volcano's batchNodeOrderFn), for a pod with a policy: fewer NUMA nodes used scores
higher, 100 − ⌊100 × used / most used⌋ over the nodes passing this filter (100 everywhere when
none uses any), times `weight`.
Stateful: each placement takes its CPUs from the node, undone placements give them back;
evicted pods free none in the cycle (Volcano's, which never assigned them). The CPUs of bound
pods go out in Decisions.numa (the scheduler's view keeps them until the exporter reports).

Where this differs from Volcano's code, on purpose (runtime/README.md): the CPU take follows the
kubelet's intent where Volcano's copy compares socket and core ids with CPU ids and sorts with
comparators that are not orderings; a core is (socket, core), as Volcano counts cores; the
score's "most used" is over the nodes passing this filter, not over every filter.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from runtime.cluster.numa import NUMA_POLICIES, NUMA_POLICY_ANNOTATION, NumaTopology, pod_numa_policy
from runtime.engine.extension import MASK_FAIL, MASK_PASS, Check, StatefulRule
from runtime.engine.plugins.base import Plugin
from runtime.engine.snapshot import PENDING

MAX_NODE_SCORE = 100
Hint = tuple  # (NUMA node bitmask or None for "any NUMA node", preferred)

# Why a node fails, in the order a node is counted under its first failure.
PASS, NO_TOPOLOGY, NOT_STATIC, OTHER_POLICY, NO_CPUS, UNALIGNED, BAD_POLICY = range(7)


# --- the kubelet's topology manager, as Volcano's policy package models it ---------------------

def bit_count(mask: int) -> int:
    return bin(mask).count("1")


def merge_hints(numa_nodes: list[int], providers: list[dict[str, list[Hint] | None] | None],
                single_numa: bool = False) -> Hint:
    """The best hint of the providers' (filterProvidersHints + mergeFilteredHints): every
    permutation of one hint per resource AND-ed; preferred beats not, then the narrower mask
    (fewer NUMA nodes, then the lower bitmask). `single_numa` keeps only preferred hints of one
    NUMA node (or "any") first (filterSingleNumaHints)."""
    default = sum(1 << n for n in numa_nodes)
    per_resource: list[list[Hint]] = []
    for hints in providers:
        if not hints:
            per_resource.append([(None, True)])       # no preference at all
            continue
        for resource_hints in hints.values():
            if resource_hints is None:
                per_resource.append([(None, True)])
            elif not resource_hints:
                per_resource.append([(None, False)])  # no NUMA placement possible
            else:
                per_resource.append(list(resource_hints))
    if single_numa:
        per_resource = [[h for h in hints if h[1] and (h[0] is None or bit_count(h[0]) == 1)]
                        for hints in per_resource]
    best: Hint = (default, False)
    for permutation in itertools.product(*per_resource):
        merged = default
        preferred = True
        for mask, pref in permutation:
            merged &= default if mask is None else mask
            preferred = preferred and pref
        if merged == 0:
            continue
        if preferred and not best[1]:
            best = (merged, preferred)
            continue
        if not preferred and best[1]:
            continue
        count, best_count = bit_count(merged), bit_count(best[0])
        if count < best_count or (count == best_count and merged < best[0]):
            best = (merged, preferred)
    return best


def policy_predicate(policy: str, numa_nodes: list[int], providers: list) -> tuple[Hint, bool]:
    """(best hint, admitted) under the node's topology manager policy (policy.GetPolicy)."""
    if policy == "best-effort":
        return merge_hints(numa_nodes, providers), True
    if policy == "restricted":
        best = merge_hints(numa_nodes, providers)
        return best, best[1]
    if policy == "single-numa-node":
        best = merge_hints(numa_nodes, providers, single_numa=True)
        return best, best[1]
    return (None, False), True           # none, or a policy Volcano does not know


# --- the CPU manager (Volcano's cpumanager provider) --------------------------------------------

@dataclass
class CpuTopology:
    """A node's CPUs by NUMA node, socket and core (a core is (socket, core), as the exporter
    numbers cores within a socket)."""

    numa_nodes: list[int]
    numa_of: dict[int, int]
    socket_of: dict[int, int]
    core_of: dict[int, tuple[int, int]]
    in_numa: dict[int, frozenset[int]]
    in_socket: dict[int, frozenset[int]]
    in_core: dict[tuple[int, int], frozenset[int]]
    cpus_per_socket: int
    cpus_per_core: int

    @classmethod
    def of(cls, topology: NumaTopology) -> "CpuTopology":
        numa_of = {c: i.numa for c, i in topology.cpus.items()}
        socket_of = {c: i.socket for c, i in topology.cpus.items()}
        core_of = {c: (i.socket, i.core) for c, i in topology.cpus.items()}

        def group(of: dict) -> dict:
            out: dict = {}
            for c, key in of.items():
                out.setdefault(key, set()).add(c)
            return {k: frozenset(v) for k, v in out.items()}

        in_numa, in_socket, in_core = group(numa_of), group(socket_of), group(core_of)
        n = len(topology.cpus)
        return cls(sorted(in_numa), numa_of, socket_of, core_of, in_numa, in_socket, in_core,
                   n // max(len(in_socket), 1), n // max(len(in_core), 1))


def take_by_topology(topo: CpuTopology, available: frozenset[int], count: int) -> frozenset[int] | None:
    """`count` of `available` CPUs, best fit by topology (the kubelet's static policy): whole free
    sockets when the request is a socket's worth, then whole free cores, then single threads
    on the sockets already used, fullest first. None when there are not enough."""
    if count <= 0:
        return frozenset()
    if count > len(available):
        return None
    free = set(available)
    result: set[int] = set()

    def take(cpus) -> None:
        result.update(cpus)
        free.difference_update(cpus)

    def need() -> int:
        return count - len(result)

    if topo.cpus_per_socket and need() >= topo.cpus_per_socket:
        for s in sorted(s for s, cpus in topo.in_socket.items() if cpus <= free):
            take(topo.in_socket[s])
            if need() <= 0:
                return frozenset(result)
            if need() < topo.cpus_per_socket:
                break
    if topo.cpus_per_core and need() >= topo.cpus_per_core:
        whole = [c for c, cpus in topo.in_core.items() if cpus <= free]
        per_socket: dict[int, int] = {}
        for s, _ in whole:
            per_socket[s] = per_socket.get(s, 0) + 1
        for core in sorted(whole, key=lambda c: (per_socket[c[0]], c[0], c[1])):
            take(topo.in_core[core])
            if need() <= 0:
                return frozenset(result)
            if need() < topo.cpus_per_core:
                break
    if need() > 0:
        socket_free: dict[int, int] = {}
        socket_used: dict[int, int] = {}
        for c in free:
            socket_free[topo.socket_of[c]] = socket_free.get(topo.socket_of[c], 0) + 1
        for c in result:
            socket_used[topo.socket_of[c]] = socket_used.get(topo.socket_of[c], 0) + 1
        cores = {topo.core_of[c] for c in free}
        order = sorted(cores, key=lambda core: (-socket_used.get(core[0], 0), socket_free.get(core[0], 0),
                                                len(topo.in_core[core] & free), core[0], core[1]))
        for core in order:
            for c in sorted(topo.in_core[core] & free):
                if need() <= 0:
                    break
                take((c,))
            if need() <= 0:
                break
    return frozenset(result) if need() <= 0 else None


def cpu_hints(topo: CpuTopology, available: frozenset[int], request: int) -> list[Hint]:
    """generateCPUTopologyHints: each set of NUMA nodes (by size, then in order) with `request`
    available CPUs is a hint; those of as few NUMA nodes as could ever hold the request are preferred."""
    free_in = {n: len(topo.in_numa[n] & available) for n in topo.numa_nodes}
    fewest = len(topo.numa_nodes)
    found: list[tuple[int, int]] = []
    for size in range(1, len(topo.numa_nodes) + 1):
        for combo in itertools.combinations(topo.numa_nodes, size):
            if sum(len(topo.in_numa[n]) for n in combo) >= request and size < fewest:
                fewest = size
            if sum(free_in[n] for n in combo) >= request:
                found.append((sum(1 << n for n in combo), size))
    return [(mask, size == fewest) for mask, size in found]


def allocate_cpus(topo: CpuTopology, available: frozenset[int], request: int, hint: Hint) -> frozenset[int]:
    """cpuMng.Allocate: the hint's NUMA nodes first, then any; nothing when the take fails."""
    result: frozenset[int] = frozenset()
    if hint[0] is not None:
        aligned = frozenset(c for c in available if hint[0] >> topo.numa_of[c] & 1)
        taken = take_by_topology(topo, aligned, min(request, len(aligned)))
        if taken is None:
            return frozenset()
        result = taken
    rest = take_by_topology(topo, available - result, request - len(result))
    return frozenset() if rest is None else result | rest


@dataclass
class NodeCpus:
    """One node's Numatopology in the session: its topology, reserved CPUs and what is free now."""

    topology: NumaTopology
    cpus: CpuTopology
    reserved: frozenset[int]
    free: frozenset[int]

    @classmethod
    def of(cls, topology: NumaTopology, shapes: dict) -> "NodeCpus":
        """`shapes`: CpuTopology and reserved CPUs by cpuDetail and reservation, shared by nodes
        of one shape (a fleet has a few), so their answers can be shared too (NumaRule.outcome)."""
        key = (tuple((c, i.numa, i.socket, i.core) for c, i in topology.cpus.items()), topology.reserved_cpus)
        shape = shapes.get(key)
        if shape is None:
            cpus = CpuTopology.of(topology)
            reserved = take_by_topology(cpus, frozenset(topology.cpus), topology.reserved_cpus) or frozenset()
            shape = shapes[key] = (cpus, reserved)
        return cls(topology, shape[0], shape[1], topology.free_cpus)


def place_containers(node: NodeCpus, policy: str, containers: tuple[int, ...]) -> tuple[bool, frozenset[int]]:
    """Whether the node's policy admits every container, and the CPUs they take."""
    free = node.free
    taken: frozenset[int] = frozenset()
    for request in containers:
        available = free - node.reserved
        providers = [{"cpu": cpu_hints(node.cpus, available, request)}] if request > 0 else [None]
        hint, admitted = policy_predicate(policy, node.cpus.numa_nodes, providers)
        if not admitted:
            return False, taken
        got = allocate_cpus(node.cpus, available, request, hint) if request > 0 else frozenset()
        taken |= got
        free = free - got
    return True, taken


# --- the rule -----------------------------------------------------------------------------------

@dataclass
class Answer:
    """The answer per node for one (policy, containers) ask, which many task classes share (they
    differ by queue, bucket, ...): the failure cause (PASS: passes), the NUMA nodes its CPUs
    would span, and the node's version it was computed at (-1: not yet)."""

    cause: np.ndarray
    spans: np.ndarray
    version: np.ndarray
    most: int = 0        # the most NUMA nodes used among passing nodes (the score's scale)


class NumaRule(StatefulRule):
    name = "numa-aware"
    preempts = False        # evicting a pod frees no CPU the plugin knows of (Volcano's)

    def __init__(self, ssn, weight: float):
        self.ssn = ssn
        snap = ssn.snap
        self.weight = weight
        n = snap.n_nodes
        self.nodes: list[NodeCpus | None] = [None] * n
        shapes: dict = {}
        for i, name in enumerate(snap.node_names):
            topology = snap.numatopologies.get(name)
            if topology is not None:
                self.nodes[i] = NodeCpus.of(topology, shapes)
        self.version = np.zeros(n, dtype=np.int64)
        self.answers: dict[tuple, Answer] = {}
        # place_containers' outcome by (shape, free CPUs, policy, containers): nodes of one shape
        # with the same CPUs free answer alike (at first, every node of a shape).
        self.outcomes: dict[tuple, tuple[bool, frozenset[int]]] = {}
        self.assigned: dict[int, tuple[int, frozenset[int]]] = {}   # task -> (node, CPUs)
        self.ask: dict[int, tuple[str, tuple[int, ...]]] = {}       # concerned class -> (policy, containers)
        self.scored: set[int] = set()
        for cls in snap.classes:
            pod = snap.pods[cls.head]
            if pod.numa_cpus is None:
                continue
            policy = pod_numa_policy(pod.annotations)
            self.ask[cls.index] = (policy, pod.numa_cpus)
            if policy not in ("", "none"):
                self.scored.add(cls.index)
        # Classes asked since they last had no pending task, by ask: only they are told of changes
        # (a class with nothing pending is asked again only after an undo, which marks it whole).
        self.pending = np.bincount(snap.task_class[ssn.status == PENDING], minlength=len(snap.classes))
        self.live: dict[tuple, set[int]] = {}
        self.dropped: set[int] = set()       # classes taken out of `live`, their marks not kept since
        # Each class's tasks (order[bounds[c]:bounds[c + 1]]), to recount its pending ones exactly.
        self.order = np.argsort(snap.task_class, kind="stable")
        self.bounds = np.searchsorted(snap.task_class[self.order], np.arange(len(snap.classes) + 1))

    def filters(self, cid: int) -> bool:
        return cid in self.ask

    def scores(self, cid: int) -> bool:
        return cid in self.scored and self.weight != 0

    # --- answers -------------------------------------------------------------------------
    def _answer_node(self, policy: str, containers: tuple[int, ...], row: int) -> tuple[int, int]:
        node = self.nodes[row]
        if policy not in ("", "none"):
            if policy not in NUMA_POLICIES:
                return BAD_POLICY, 0
            if node is None:
                return NO_TOPOLOGY, 0
            if node.topology.cpu_manager_policy != "static":
                return NOT_STATIC, 0
            if node.topology.topology_manager_policy != policy:
                return OTHER_POLICY, 0
            if not node.free:
                return NO_CPUS, 0
        elif node is None or node.topology.cpu_manager_policy != "static" \
                or node.topology.topology_manager_policy in ("", "none"):
            return PASS, 0
        admitted, taken = self.outcome(node, containers)
        if not admitted:
            return UNALIGNED, 0
        return PASS, len({node.cpus.numa_of[c] for c in taken})

    def outcome(self, node: NodeCpus, containers: tuple[int, ...]) -> tuple[bool, frozenset[int]]:
        """place_containers under the node's policy, shared by nodes of one shape and free CPUs."""
        policy = node.topology.topology_manager_policy
        key = (id(node.cpus), node.free, policy, containers)
        found = self.outcomes.get(key)
        if found is None:
            found = self.outcomes[key] = place_containers(node, policy, containers)
        return found

    def _refresh(self, ask: tuple, rows: np.ndarray | None) -> Answer:
        n = self.ssn.snap.n_nodes
        answer = self.answers.get(ask)
        if answer is None:
            answer = self.answers[ask] = Answer(np.zeros(n, dtype=np.int8), np.zeros(n, dtype=np.int64),
                                                np.full(n, -1, dtype=np.int64))
        which = np.arange(n) if rows is None else rows
        stale = which[answer.version[which] != self.version[which]]
        if len(stale):
            policy, containers = ask
            for row in stale.tolist():
                answer.cause[row], answer.spans[row] = self._answer_node(policy, containers, row)
            answer.version[stale] = self.version[stale]
        if rows is None:
            answer.most = int(answer.spans[answer.cause == PASS].max(initial=0))
        return answer

    def _answer(self, cid: int, rows: np.ndarray | None) -> Answer:
        ask = self.ask[cid]
        if self.pending[cid] > 0:
            self.live.setdefault(ask, set()).add(cid)
        return self._refresh(ask, rows)

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        answer = self._answer(cid, nodes)
        cause = answer.cause if nodes is None else answer.cause[nodes]
        return np.where(cause == PASS, MASK_PASS, MASK_FAIL).astype(np.uint8)

    def checks(self, cid: int) -> list[Check]:
        answer = self._answer(cid, None)
        policy = self.ask[cid][0]
        messages = {
            BAD_POLICY: f"pod's {NUMA_POLICY_ANNOTATION} `{policy}` is none of {', '.join(NUMA_POLICIES)}",
            NO_TOPOLOGY: "node(s) had no Numatopology (nodeinfo.volcano.sh/v1alpha1, Volcano's resource exporter) "
                         f"for the pod's NUMA policy {policy}",
            NOT_STATIC: "node(s) had a CPU manager policy other than static",
            OTHER_POLICY: f"node(s) had a topology manager policy other than the pod's {policy}",
            NO_CPUS: "node(s) had no free CPUs in their Numatopology",
            UNALIGNED: "node(s) could not align the pod's exclusive CPUs with NUMA nodes as their topology "
                       "manager policy requires" + self._figures(cid, answer),
        }
        return [Check(message, answer.cause != code) for code, message in messages.items()
                if (answer.cause == code).any()]

    def _figures(self, cid: int, answer: Answer) -> str:
        """What the pod needs and what the roomiest node it could not align has, per NUMA node:
        " (pod needs 4 CPUs; node n1's NUMA nodes 0, 1 have 3, 2 free)"."""
        rows = np.flatnonzero(answer.cause == UNALIGNED)
        if not len(rows):
            return ""
        containers = self.ask[cid][1]
        need = f"{containers[0]} CPUs" if len(containers) == 1 else \
            " + ".join(map(str, containers)) + " CPUs by container"
        row = max(rows.tolist(), key=lambda r: (len(self.nodes[r].free - self.nodes[r].reserved), -r))
        node = self.nodes[row]
        available = node.free - node.reserved
        free = [len(node.cpus.in_numa[n] & available) for n in node.cpus.numa_nodes]
        return (f" (pod needs {need}; node {self.ssn.snap.node_names[row]}'s NUMA nodes "
                f"{', '.join(map(str, node.cpus.numa_nodes))} have {', '.join(map(str, free))} free)")

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        answer = self._answer(cid, nodes)
        passing = answer.cause == PASS
        most = answer.most
        spans = answer.spans if nodes is None else answer.spans[nodes]
        if most == 0:
            out = np.full(len(spans), MAX_NODE_SCORE, dtype=np.float64)
        else:
            out = (MAX_NODE_SCORE - (MAX_NODE_SCORE * spans) // most).astype(np.float64)
        ok = passing if nodes is None else passing[nodes]
        return np.where(ok, out * self.weight, 0.0)

    # --- placements ----------------------------------------------------------------------
    def _changed(self, node: int) -> None:
        """The node's free CPUs changed: each ask's answer there is computed again, and only the
        classes whose answer did change are marked (a node keeps passing, alike, until it fills)."""
        self.version[node] += 1
        version = int(self.version[node])
        rows = None
        mark = self.ssn.mark_dirty
        for ask, answer in self.answers.items():
            classes = self.live.get(ask)
            if not classes:
                continue
            cause, spans = int(answer.cause[node]), int(answer.spans[node])
            new_cause, new_spans = self._answer_node(ask[0], ask[1], node)
            answer.cause[node], answer.spans[node], answer.version[node] = new_cause, new_spans, version
            if (cause, spans) == (new_cause, new_spans):
                continue
            if rows is None:
                rows = np.array([node], dtype=np.int64)
            whole = False
            if ask[0] not in ("", "none"):
                # The score's scale is the most NUMA nodes any passing node would use: when it
                # moves, every node scores anew.
                before = answer.most
                if new_cause == PASS and new_spans > before:
                    answer.most = new_spans
                elif cause == PASS and spans == before:
                    answer.most = int(answer.spans[answer.cause == PASS].max(initial=0))
                whole = answer.most != before
            for cid in classes:
                mark(cid, None if whole else rows)

    def _counted(self, t: int, step: int) -> None:
        """A task of a concerned class placed (step 1) or taken back (-1): a class with no task
        pending leaves `live` (recounted from the session's statuses first, so a placement of a
        task that was not pending cannot drop a class early); one taken back is marked whole."""
        cid = int(self.ssn.snap.task_class[t])
        if cid not in self.ask:
            return
        if step > 0:
            self.pending[cid] -= 1
            if self.pending[cid] <= 0:
                tasks = self.order[self.bounds[cid]:self.bounds[cid + 1]]
                self.pending[cid] = int((self.ssn.status[tasks] == PENDING).sum())
                if self.pending[cid] == 0:
                    self.live.get(self.ask[cid], set()).discard(cid)
                    self.dropped.add(cid)
        else:
            self.pending[cid] += 1
            if cid in self.dropped:
                self.dropped.discard(cid)
                self.ssn.mark_dirty(cid, None)      # its changes were not followed while nothing was pending

    def placed(self, t: int, node: int) -> None:
        self._counted(t, 1)
        pod = self.ssn.snap.pods[t]
        target = self.nodes[node]
        if pod.numa_cpus is None or target is None:
            return
        policy = target.topology.topology_manager_policy
        if target.topology.cpu_manager_policy != "static" or policy in ("", "none"):
            return
        admitted, taken = self.outcome(target, pod.numa_cpus)
        if not taken:
            return
        self.assigned[t] = (node, taken)
        target.free = target.free - taken
        self._changed(node)

    def unplaced(self, t: int, node: int) -> None:
        self._counted(t, -1)
        held = self.assigned.pop(t, None)
        if held is None:
            return
        target = self.nodes[held[0]]
        target.free = target.free | held[1]
        self._changed(held[0])


class NumaAwarePlugin(Plugin):
    name = "numa-aware"
    answers = frozenset({"predicate", "node_order"})

    def on_session_open(self, ssn) -> None:
        weight = float(self.spec.weight if self.spec.weight is not None else 1.0)
        self.rule = NumaRule(ssn, weight)
        self.register(ssn, "predicate", self.rule)
        self.register(ssn, "node_order", self.rule)

    def bound_cpus(self, bound: set[str]) -> dict[str, frozenset[int]]:
        """The exclusive CPUs of the pods bound this cycle (Decisions.numa)."""
        keys = self.rule.ssn.snap.task_keys
        return {keys[t]: cpus for t, (_, cpus) in self.rule.assigned.items() if keys[t] in bound}


PLUGIN = NumaAwarePlugin
