"""Benchmark of the scheduling engine (not a test).

1. One full cycle (snapshot, plugins open, enqueue, allocate with predicates, gang, drf,
   proportion and binpack, collect) for 5,000 nodes and 20,000 pods in 2,000 gang jobs over 20
   queues, with the compiled kernels and the node cache warm (a running scheduler's steady
   state): placements per second of the best of --repeat cycles; median and worst shown too.
2. The same cycle on the same cluster with the kernels interpreted (the same sources, Cython's
   pure-Python mode run by the interpreter: runtime.engine.kernels.load(pure=True) — the snapshot's
   passes over the pods and its jobs, the placement segment tree and its refresh policy, the
   ledger, the share helpers, collect's decisions), best of as many cycles. Both paths must make
   identical decisions (checked). `speedup_vs_python` =
   python cycle seconds ÷ compiled cycle seconds (`speedup_vs_python_cpu`: the same from the
   least processor time of the runs). The plugins' and actions' Python code between kernel calls (and a few numpy
   calls) is the same in both, so the ratio is bounded by that shared part (`phases` shows it);
   `speedup_actions` compares the actions phase only, `speedup_placement_kernels` the time
   inside the placement-tree kernels (timed per call).
3. Scaling of the compiled cycle at 1k / 5k / 10k nodes (4 pods per node), best of 3.
4. Snapshot memory (its arrays) for 10k nodes / 100k pods.
5. A settled cluster: 1,000 nodes, 10,000 bound pods without PodGroups, 200 waiting (a plan
   without preempt or reclaim). The compiled cycle with every pod a task (`listed`), with the
   snapshot folding the settled pods into their queues' totals (`folded`, the default for such a
   plan), and on a state that only counts them (`counted`: ClusterState.settled, as the kube
   connector's cache hands it over). All three must decide alike (checked).
6. Placement rules: 5,000 nodes in 50 zones, 20,000 pods in groups of 10 replicas, a third
   with required hostname anti-affinity within their group, a third with zone topology spread
   (maxSkew 1, DoNotSchedule), a third plain; placements per second, against the same cycle with
   the rules left out of the pods, in one run (`cost` = with ÷ without). The compiled and the
   pure-Python paths must decide alike (checked, at a tenth of the size).
7. Storage: section 1's cycle where a tenth of the pods (every tenth gang) carry a delayed-binding
   claim (WaitForFirstConsumer): half of those of a local class, one static PV pinned to each
   node (so each placement also picks the smallest PV its node offers, reserved for the cycle),
   half of a class that provisions in two of the three zones; against the same cycle with the
   claims left out, in one run (`cost` = with ÷ without). Checked: every pod placed, no PV for two
   claims, each local claim's PV on its pod's node; the compiled and pure-Python paths decide
   alike (at a tenth of the size).
8. Network topology (Volcano's HyperNodes): 5,000 nodes under three tiers of HyperNodes (tier 1:
   20 nodes each; tier 2: 10 tier-1 HyperNodes each; tier 3: 5 tier-2 each), 20,000 pods as gangs
   of 8 to 64 (sizes cycling 8, 16, ... 64), every other gang with hard tier-1 topology
   (`networkTopology: {mode: hard, highestTierAllowed: 1}`), section 1's policy (allocate keeps
   the topology without the network-topology-aware plugin, choosing among HyperNodes by its
   documented stand-in rule: the plugin's per-placement rescoring of every node under a touched
   HyperNode would dominate the figure, see docs/benchmarks.md); placements per second against the
   same cycle with no HyperNode and no topology request, in one run (`cost` = with ÷ without), best
   of at most 3 cycles (a cycle with the topology takes seconds). Checked by a checker
   of this script's own (leaf sets from the HyperNodes' member lists, not the engine's
   resolution): the share of hard gangs placed whole inside one tier-1 HyperNode (must be 1.0),
   and that every hard gang was placed; the compiled and pure-Python paths decide alike (at a
   tenth of the size).

9. Dynamic Resource Allocation: 1,000 nodes each publishing a ResourceSlice of 8 GPUs (in the
   shape of kubernetes-sigs/dra-example-driver's: model, index, memory capacity), a DeviceClass
   with a CEL selector on the driver, 8,000 pods in gangs of 8 each with a ResourceClaim of its
   own (made from a template, as kube-controller-manager makes them) asking one GPU with a CEL
   selector (four variants: memory at least 16, 32, 40 or 80Gi); placements per second against
   the same pods asking one whole card as an extended resource (`nvidia.com/gpu: 1`, 8 per
   node), in one run (`cost` = with ÷ without). The CEL cost: the time spent evaluating
   selectors in the best cycle (each distinct (class, selectors, device) evaluated once per
   cycle, then cached), per claim. Checked by this script's own count: every pod placed, no
   device in two allocations, each allocated device on its pod's node; the compiled and
   pure-Python paths decide alike (at a tenth of the size).

10. HAMi vGPU (`deviceshare { vgpu = true }`): 2,000 nodes with 8 cards of 40 GiB each in HAMi's
   register annotation (volcano.sh/node-vgpu-register, split 10), 20,000 pods in gangs of 8 each
   asking one vGPU of mixed memory and cores (2 to 20 GiB, 0 to 50%); placements per second against
   the same cycle with each pod asking a whole card (`nvidia.com/gpu: 1`, 8 per node: 16,000 fit),
   in one run (`cost` = with ÷ without). Checked by this script's own count from the pods' requests
   and the cards the bindings name: every vGPU pod placed, none over a card's memory, 100% of its
   cores or its split count; the compiled and pure-Python paths decide alike (at a tenth of the size).
   `--vgpu-only` runs this section alone.

11. Volcano's numa-aware, nodegroup and task-topology plugins on: 2,000 nodes of 64 CPUs in two NUMA
   nodes (a Numatopology each: static CPU manager, single-numa-node topology manager) in 10 node
   groups, the 20 queues two to a group (`node_groups`), 16,000 Guaranteed pods in gangs of 8 (a
   `ps` of 8 CPUs and seven `worker`s of 4, volcano.sh/numa-topology-policy: single-numa-node,
   task-topology affinity ps,worker and anti-affinity ps); placements per second against section
   1's policy on the same pods without what the plugins read, in one run (`cost` = with ÷
   without), best of at most 3. Checked by this script's own count from the bindings and their
   CPUs (Decisions.numa): every pod placed, its CPUs within one NUMA node, no CPU given twice,
   every pod in its queue's group; the compiled and pure-Python paths decide alike (at a tenth of
   the size). `--sections 11` runs this section alone.

The machine may be shared: best-of-N is the figure, and the load average at the start and
the spread (median, worst) say how noisy the run was. The cluster state is frozen out of the
garbage collector's reach once built (`freeze_state`), as a long-running scheduler would.

    python bench/core.py [--json] [--quick] [--repeat N] [--sections 6,7]

--sections runs only the listed self-contained sections (5 to 9, 11), e.g. the rule costs alone.

With --json the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.pipeline import compile_text  # noqa: E402
from runtime.engine.cycle import Options, collect, open_session  # noqa: E402
from runtime.engine.actions import registry as actions  # noqa: E402
from runtime.kube.settled import SettledLedger  # noqa: E402
from runtime.cluster.model import (  # noqa: E402
    QUEUE_ANNOTATION, ClusterState, Node, Pod, PodAffinityTerm, PodGroup, PodRules, SpreadConstraint, settles,
)
from runtime.cluster.selectors import LabelSelector, MatchExpression  # noqa: E402
from runtime.cluster.model import NODEGROUP_LABEL, TASK_SPEC_ANNOTATION as TASK_SPEC, NetworkTopology  # noqa: E402
from runtime.cluster.numa import NUMA_POLICY_ANNOTATION, CpuInfo, NumaTopology  # noqa: E402
from runtime.cluster.topology import HyperNode, Member  # noqa: E402
from runtime.engine.snapshot import SnapshotCache, build_snapshot  # noqa: E402
from runtime.engine import devices_vgpu as vg  # noqa: E402
from runtime.cluster import draalloc  # noqa: E402
from runtime.cluster.dra import (  # noqa: E402
    ClaimSpec, Device, DeviceClass, DeviceRequest, PodResourceClaim, ResourceClaim, ResourceClaimTemplate,
    ResourceSlice, SubRequest,
)
from runtime.cluster.storage import (  # noqa: E402
    WAIT_FOR_FIRST_CONSUMER, PersistentVolume, PersistentVolumeClaim, PodClaim, StorageClass,
)

QUEUES = 20
POLICY = """policy "bench" version 1
actions [enqueue, allocate]
tier {
  plugin priority
  plugin gang
}
tier {
  plugin drf
  plugin predicates
  plugin proportion
  plugin binpack
}
""" + "\n".join(f"queue q{i} {{ weight = {1 + i % 4} }}" for i in range(QUEUES)) + "\n"

TOPOLOGY_REPEAT = 3      # section 8's cycles take seconds each: best of at most this many
NUMA_REPEAT = 3          # section 11's too
TASK_TOPOLOGY_AFFINITY = "volcano.sh/task-topology-affinity"
TASK_TOPOLOGY_ANTI = "volcano.sh/task-topology-anti-affinity"
GANG_SIZES = (8, 16, 24, 32, 40, 48, 56, 64)
# Section 8's tree: nodes per tier-1 HyperNode, then children per HyperNode of tiers 2 and 3.
TOPOLOGY_FANOUT = (20, 10, 5)

GiB = 2**30


def make_cluster(nodes: int, pods: int, jobs: int, queues: int = QUEUES) -> ClusterState:
    """A deterministic cluster: nodes of 4 shapes; jobs of `pods // jobs` identical tasks whose
    requests vary by job, spread round-robin over the queues."""
    state = ClusterState()
    shapes = [(32000, 128 * GiB), (64000, 256 * GiB), (16000, 64 * GiB), (96000, 384 * GiB)]
    for n in range(nodes):
        cpu, mem = shapes[n % len(shapes)]
        state.add_node(Node(f"node-{n:05d}", {"cpu": cpu, "memory": mem, "pods": 110},
                            labels={"zone": f"z{n % 3}"}))
    per_job = pods // jobs
    for j in range(jobs):
        ns = "bench"
        name = f"job-{j:05d}"
        cpu = 500 * (1 + j % 4)
        mem = GiB * (1 + j % 3)
        state.add_podgroup(PodGroup(ns, name, min_member=per_job, queue=f"q{j % queues}", phase="Inqueue",
                                    uid=f"pg-{j}", creation=float(j)))
        for t in range(per_job):
            state.add_pod(Pod(ns, f"{name}-{t}", {"cpu": cpu, "memory": mem}, uid=f"{j}-{t}", group=name,
                              creation=float(j)))
    return state


def one_cycle(plan, state, pure: bool, cache: SnapshotCache | None = None, fold: bool | None = None):
    """Seconds for snapshot + session + actions + collect, placements, phases, decisions. The
    phases include the cycle's processor time (what other processes on a shared machine do
    not inflate as much as the wall clock)."""
    cpu = time.process_time()
    start = time.perf_counter()
    ssn = open_session(plan, state, Options(pure_python=pure, fold_settled=fold), cache)
    opened = time.perf_counter()
    registry = actions()
    for name in plan.actions:
        registry[name](ssn)
    acted = time.perf_counter()
    decisions = collect(ssn)
    ssn.close()
    end = time.perf_counter()
    phases = {"snapshot_and_open_s": round(opened - start, 4), "actions_s": round(acted - opened, 4),
              "collect_s": round(end - acted, 4), "cycle_cpu_s": round(time.process_time() - cpu, 4)}
    return end - start, len(decisions.bindings), phases, decisions


def best_of(plan, state, pure: bool, cache: SnapshotCache, repeat: int, fold: bool | None = None):
    """(best run, all seconds, least processor seconds): the best run is (seconds, placements,
    phases, decisions). Only the best run's decisions are kept: holding every run's would leave
    the later runs more live objects for the garbage collector to walk."""
    best, seconds, cpu = None, [], []
    for _ in range(repeat):
        run = one_cycle(plan, state, pure, cache, fold)
        seconds.append(run[0])
        cpu.append(run[2]["cycle_cpu_s"])
        if best is None or run[0] < best[0]:
            best = run
        del run
    return best, sorted(seconds), min(cpu)


def settled_cycles(plan, nodes: int, bound: int, waiting: int, repeat: int) -> dict:
    """Best compiled cycle seconds on a settled cluster: listed, folded and counted (section 5)."""
    state = ClusterState()
    for n in range(nodes):
        state.add_node(Node(f"node-{n:05d}", {"cpu": 32000, "memory": 128 * GiB, "pods": 110}))
    for i in range(bound + waiting):
        state.add_pod(Pod("bench", f"pod-{i:06d}", {"cpu": 100, "memory": GiB // 8}, uid=f"u{i}",
                          node_name=f"node-{i % nodes:05d}" if i < bound else None, phase="Running" if i < bound
                          else "Pending", creation=float(i // 500), annotations={QUEUE_ANNOTATION: f"q{i % QUEUES}"}))
    ledger = SettledLedger("volcano")
    in_play = {}
    for key, pod in state.pods.items():
        if settles(pod, "volcano"):
            # A lone pod is counted under the queue its annotation names, as the cache does.
            ledger.add(pod, pod.annotations.get(QUEUE_ANNOTATION))
        else:
            in_play[key] = pod
    counted = dataclasses.replace(state, pods=in_play, settled=ledger.view())
    freeze_state()
    out: dict = {"nodes": nodes, "bound": bound, "waiting": waiting}
    decided = {}
    for name, st, fold in (("listed", state, False), ("folded", state, True), ("counted", counted, True)):
        cache = SnapshotCache()
        one_cycle(plan, st, False, cache, fold)
        (seconds, placed, _, decisions), _, cpu = best_of(plan, st, False, cache, repeat, fold)
        out[name] = {"cycle_s": round(seconds, 4), "cycle_cpu_s": round(cpu, 4), "placements": placed}
        decided[name] = decisions.to_json()
    out["identical_decisions"] = decided["listed"] == decided["folded"] == decided["counted"]
    return out


def make_rules_cluster(nodes: int, pods: int, zones: int, with_rules: bool) -> ClusterState:
    """Section 6's cluster: groups of 10 replicas, cycling through hostname anti-affinity, zone
    spread and no rule (left out everywhere when `with_rules` is false)."""
    state = ClusterState()
    for n in range(nodes):
        name = f"node-{n:05d}"
        state.add_node(Node(name, {"cpu": 64000, "memory": 256 * GiB, "pods": 110},
                            labels={"kubernetes.io/hostname": name, "zone": f"z{n * zones // nodes:02d}"}))
    for g in range(pods // 10):
        selector = LabelSelector((("group", f"g{g}"),))
        kind = g % 3
        rules = None
        if with_rules and kind == 0:
            rules = PodRules(anti_affinity=(PodAffinityTerm("kubernetes.io/hostname", selector, frozenset({"bench"})),))
        elif with_rules and kind == 1:
            rules = PodRules(spread=(SpreadConstraint(1, "zone", "DoNotSchedule", selector),))
        for r in range(10):
            state.add_pod(Pod("bench", f"g{g}-{r}", {"cpu": 250 * (1 + g % 4), "memory": GiB}, uid=f"g{g}-{r}",
                              labels={"group": f"g{g}"}, rules=rules, creation=float(g),
                              annotations={QUEUE_ANNOTATION: f"q{g % QUEUES}"}))
    return state


def with_and_without(plan, make: Callable[[bool], ClusterState], repeat: int) -> tuple[dict, ClusterState, object]:
    """Best compiled cycle of the cluster `make(False)` (without the feature) and `make(True)`
    (with it), each on a frozen state of its own: their figures and `cost` (with ÷ without),
    and the state and decisions of the run with it, for checking."""
    out: dict = {}
    for name, with_it in (("without", False), ("with", True)):
        state = make(with_it)
        freeze_state()
        cache = SnapshotCache()
        one_cycle(plan, state, False, cache)
        (seconds, placed, parts, decisions), _, cpu = best_of(plan, state, False, cache, repeat)
        out[name] = {"cycle_s": round(seconds, 4), "cycle_cpu_s": round(cpu, 4), "placements": placed,
                     "placements_per_s": round(placed / seconds), "phases": parts}
    out["cost"] = round(out["with"]["cycle_s"] / out["without"]["cycle_s"], 2)
    return out, state, decisions


def rules_cycles(plan, nodes: int, pods: int, zones: int, repeat: int) -> dict:
    """Section 6: best compiled cycle with and without the rules; decisions of both paths alike."""
    out, _, _ = with_and_without(plan, lambda with_rules: make_rules_cluster(nodes, pods, zones, with_rules), repeat)
    out.update(nodes=nodes, pods=pods, zones=zones)
    small = make_rules_cluster(max(nodes // 10, zones), max(pods // 10, 30), zones, True)
    decided = [one_cycle(plan, small, pure, SnapshotCache())[3].to_json() for pure in (False, True)]
    out["identical_decisions"] = decided[0] == decided[1]
    return out


def make_storage_cluster(nodes: int, pods: int, jobs: int, with_claims: bool) -> ClusterState:
    """Section 7's cluster: section 1's, every tenth gang's pods each with a delayed claim of its
    own (alternately local and provisioned), one local PV of 100Gi per node."""
    state = make_cluster(nodes, pods, jobs)
    if not with_claims:
        return state
    st = state.storage
    st.classes["local"] = StorageClass("local", "kubernetes.io/no-provisioner", WAIT_FOR_FIRST_CONSUMER)
    st.classes["zonal"] = StorageClass("zonal", "disk.csi.example.com", WAIT_FOR_FIRST_CONSUMER,
                                       ((MatchExpression("zone", "In", ("z0", "z1")),),))
    for n in range(nodes):
        name = f"node-{n:05d}"
        st.volumes[f"pv-{n:05d}"] = PersistentVolume(
            f"pv-{n:05d}", 100 * GiB, ("ReadWriteOnce",), "local",
            node_affinity=((MatchExpression("metadata.name", "In", (name,), field=True),),))
    for key, pod in state.pods.items():
        job = int(pod.group.split("-")[1])
        if job % 10:
            continue
        cls = "local" if (job // 10) % 2 == 0 else "zonal"
        claim = f"data-{pod.name}"
        st.claims[f"bench/{claim}"] = PersistentVolumeClaim("bench", claim, uid=f"c-{pod.uid}", storage_class=cls,
                                                            access_modes=("ReadWriteOnce",), request=10 * GiB)
        pod.volumes = (PodClaim("data", claim),)
    return state


def storage_cycles(plan, nodes: int, pods: int, jobs: int, repeat: int) -> dict:
    """Section 7: best compiled cycle with and without the claims; the volume invariants of the
    decisions; both paths alike."""
    out, state, decisions = with_and_without(
        plan, lambda with_claims: make_storage_cluster(nodes, pods, jobs, with_claims), repeat)
    out.update(nodes=nodes, pods=pods, claims=len(state.storage.claims))
    nodes_of = {b.pod: b.node for b in decisions.bindings}
    picked = [(c.volume, nodes_of[pod]) for pod, choices in decisions.volumes.items() for c in choices]
    static = [v for v, _ in picked if v]
    out["static_volumes"] = len(static)
    out["provisioned"] = len(picked) - len(static)
    out["volumes_checked"] = (out["with"]["placements"] == pods and len(decisions.volumes) == out["claims"]
                              and len(static) == len(set(static))
                              and all(state.storage.volumes[v].node_affinity[0][0].values[0] == node
                                      for v, node in picked if v))
    small = make_storage_cluster(max(nodes // 10, 30), max(pods // 10, 120), max(jobs // 10, 12), True)
    decided = [one_cycle(plan, small, pure, SnapshotCache())[3].to_json() for pure in (False, True)]
    out["identical_decisions"] = decided[0] == decided[1]
    return out


DRA_DRIVER = "gpu.example.com"
DRA_DEVICES = 8          # per node
DRA_SELECTORS = tuple(f'device.capacity["{DRA_DRIVER}"].memory.compareTo(quantity("{size}Gi")) >= 0'
                      for size in (16, 32, 40, 80))


def make_dra_cluster(nodes: int, pods: int, with_claims: bool) -> ClusterState:
    """Section 9's cluster: nodes of 64 CPUs; with the claims, each node's ResourceSlice of
    DRA_DEVICES GPUs of 80Gi and each pod a claim of its own for one GPU with one of
    DRA_SELECTORS (by gang); without, each node `nvidia.com/gpu: DRA_DEVICES` and each pod
    `nvidia.com/gpu: 1`. Gangs of 8 over the queues."""
    state = ClusterState()
    for n in range(nodes):
        name = f"node-{n:05d}"
        allocatable = {"cpu": 64000, "memory": 512 * GiB, "pods": 110}
        if not with_claims:
            allocatable["nvidia.com/gpu"] = DRA_DEVICES
        state.add_node(Node(name, allocatable, labels={"kubernetes.io/hostname": name}))
        if with_claims:
            devices = tuple(Device(f"gpu-{i}", attributes=(("index", i), ("model", "LATEST-GPU-MODEL")),
                                   capacity=(("memory", 80 * GiB * 1000),)) for i in range(DRA_DEVICES))
            state.dra.slices[f"{name}-gpus"] = ResourceSlice(f"{name}-gpus", DRA_DRIVER, name, generation=1,
                                                             node_name=name, devices=devices)
    if with_claims:
        state.dra.classes["gpu"] = DeviceClass("gpu", (f'device.driver == "{DRA_DRIVER}"',))
        state.dra.instantiates_templates = False      # the controller's claims are listed, as on a cluster
    for g in range(pods // 8):
        name = f"job-{g:05d}"
        state.add_podgroup(PodGroup("bench", name, min_member=8, queue=f"q{g % QUEUES}", phase="Inqueue",
                                    uid=f"pg-{g}", creation=float(g)))
        spec = ClaimSpec((DeviceRequest("gpu", SubRequest("gpu", "gpu", (DRA_SELECTORS[g % len(DRA_SELECTORS)],))),))
        template = f"gpu-{g % len(DRA_SELECTORS)}"
        if with_claims:
            state.dra.templates[f"bench/{template}"] = ResourceClaimTemplate("bench", template, spec)
        for r in range(8):
            uid = f"{g}-{r}"
            requests = {"cpu": 1000, "memory": 8 * GiB}
            pod = Pod("bench", f"{name}-{r}", requests if with_claims else {**requests, "nvidia.com/gpu": 1},
                      uid=uid, group=name, creation=float(g))
            if with_claims:
                claim = f"{pod.name}-gpu"
                pod.resource_claims = (PodResourceClaim("gpu", template=template, generated=claim),)
                state.dra.claims[f"bench/{claim}"] = ResourceClaim("bench", claim, spec, uid=f"c-{uid}", owner_uid=uid)
            state.add_pod(pod)
    return state


class CelTimer:
    """Times every CEL selector evaluation of the structured allocator (the first per (class,
    selectors, device) in a cycle: the inventory caches the answer) while in use."""

    def __init__(self):
        self.seconds, self.evaluations, self._original = 0.0, 0, draalloc.compile_selector

    def __enter__(self):
        original, timer = self._original, self

        class Timed:
            def __init__(self, selector):
                self.selector = selector

            def matches(self, device):
                start = time.perf_counter()
                try:
                    return self.selector.matches(device)
                finally:
                    timer.seconds += time.perf_counter() - start
                    timer.evaluations += 1

        draalloc.compile_selector = lambda expression: Timed(original(expression))
        return self

    def __exit__(self, *exc):
        draalloc.compile_selector = self._original


def dra_checked(state: ClusterState, decisions) -> bool:
    """This script's own check of section 9: every pod placed, no device in two allocations, each
    device allocated on its pod's node (node-local slices: the pool is the node's name)."""
    nodes_of = {b.pod: b.node for b in decisions.bindings}
    devices = [(r.pool, r.device, nodes_of.get(pod)) for pod, chosen in decisions.claims.items()
               for _, allocation in chosen for r in allocation.devices]
    return (len(nodes_of) == len(state.pods) == len(decisions.claims) == len(devices)
            and len({(pool, device) for pool, device, _ in devices}) == len(devices)
            and all(pool == node for pool, _, node in devices))


def dra_cycles(plan, nodes: int, pods: int, repeat: int) -> dict:
    """Section 9: best compiled cycle with the claims and with extended resources instead; the CEL
    time of the best cycle with the claims, per claim; the allocation check; both paths alike."""
    out, state, decisions = with_and_without(plan, lambda with_claims: make_dra_cluster(nodes, pods, with_claims),
                                             repeat)
    out.update(nodes=nodes, devices=nodes * DRA_DEVICES, pods=pods, claims=len(state.dra.claims),
               selectors=len(DRA_SELECTORS))
    cel = []
    for _ in range(max(1, min(repeat, 3))):
        with CelTimer() as timer:
            one_cycle(plan, state, False, SnapshotCache())
        cel.append((timer.seconds, timer.evaluations))
    seconds, evaluations = min(cel)
    out["cel"] = {"seconds": round(seconds, 4), "evaluations": evaluations,
                  "per_claim_us": round(seconds / max(out["claims"], 1) * 1e6, 1),
                  "per_evaluation_us": round(seconds / max(evaluations, 1) * 1e6, 1),
                  "share_of_cycle": round(seconds / out["with"]["cycle_s"], 3)}
    out["allocations_checked"] = dra_checked(state, decisions)
    small = make_dra_cluster(max(nodes // 10, 10), max(pods // 10, 80), True)
    decided = [one_cycle(plan, small, pure, SnapshotCache())[3].to_json() for pure in (False, True)]
    out["identical_decisions"] = decided[0] == decided[1]
    return out


def make_topology_cluster(nodes: int, pods: int, with_topology: bool) -> ClusterState:
    """Section 8's cluster: make_cluster's node shapes; gangs of GANG_SIZES (the last one shorter
    if `pods` asks), every other one (even index) with hard tier-1 topology; with `with_topology`,
    three tiers of HyperNodes (TOPOLOGY_FANOUT), else none and no topology request."""
    state = ClusterState()
    shapes = [(32000, 128 * GiB), (64000, 256 * GiB), (16000, 64 * GiB), (96000, 384 * GiB)]
    for n in range(nodes):
        cpu, mem = shapes[n % len(shapes)]
        state.add_node(Node(f"node-{n:05d}", {"cpu": cpu, "memory": mem, "pods": 110}))
    if with_topology:
        members = [f"node-{n:05d}" for n in range(nodes)]
        kind = "Node"
        for tier, fanout in enumerate(TOPOLOGY_FANOUT, start=1):
            names = []
            for h in range(0, len(members), fanout):
                name = f"t{tier}-{h // fanout:04d}"
                state.add_hypernode(HyperNode(name, tier, "", tuple(Member(kind, exact=m)
                                                                     for m in members[h:h + fanout])))
                names.append(name)
            members, kind = names, "HyperNode"
    hard = NetworkTopology("hard", 1)
    placed, j = 0, 0
    while placed < pods:
        size = min(GANG_SIZES[j % len(GANG_SIZES)], pods - placed)
        name = f"gang-{j:05d}"
        cpu, mem = 500 * (1 + j % 4), GiB * (1 + j % 3)
        state.add_podgroup(PodGroup("bench", name, min_member=size, queue=f"q{j % QUEUES}", phase="Inqueue",
                                    uid=f"pg-{j}", creation=float(j),
                                    network_topology=hard if with_topology and j % 2 == 0 else None))
        for t in range(size):
            state.add_pod(Pod("bench", f"{name}-{t}", {"cpu": cpu, "memory": mem}, uid=f"{j}-{t}", group=name,
                              creation=float(j)))
        placed += size
        j += 1
    return state


def tier1_leaf_sets(state: ClusterState) -> dict[str, set[str]]:
    """Each tier-1 HyperNode's nodes, read from its member list (exact node names), written here
    rather than taken from the engine's resolution (runtime.cluster.topology)."""
    return {h.name: {m.exact for m in h.members if m.type == "Node"}
            for h in state.hypernodes.values() if h.tier == 1}


def hard_gangs_within(state: ClusterState, decisions) -> dict:
    """Of the gangs asking for hard tier-1 topology: how many were placed, and how many of those
    lie whole inside one tier-1 HyperNode (the independent check of section 8)."""
    leaves = tier1_leaf_sets(state)
    where: dict[str, set[str]] = {}
    for binding in decisions.bindings:
        group = state.pods[binding.pod].group
        where.setdefault(group, set()).add(binding.node)
    hard = [pg.name for pg in state.podgroups.values() if pg.network_topology is not None]
    placed = [g for g in hard if g in where]
    within = [g for g in placed if any(where[g] <= nodes for nodes in leaves.values())]
    return {"hard_gangs": len(hard), "hard_gangs_placed": len(placed), "hard_gangs_within_tier1": len(within),
            "share_within_tier1": round(len(within) / len(placed), 4) if placed else None}


def topology_cycles(plan, nodes: int, pods: int, repeat: int) -> dict:
    """Section 8: best compiled cycle with and without the topology; the hard gangs' placement
    checked; both paths alike at a tenth of the size."""
    out, state, decisions = with_and_without(
        plan, lambda with_topology: make_topology_cluster(nodes, pods, with_topology), repeat)
    out.update(nodes=nodes, pods=pods, gangs=len(state.podgroups), hypernodes=len(state.hypernodes),
               hypernodes_by_tier={t: sum(h.tier == t for h in state.hypernodes.values())
                                   for t in range(1, len(TOPOLOGY_FANOUT) + 1)})
    out.update(hard_gangs_within(state, decisions))
    small = make_topology_cluster(max(nodes // 10, 40), max(pods // 10, 160), True)
    decided = [one_cycle(plan, small, pure, SnapshotCache())[3].to_json() for pure in (False, True)]
    out["identical_decisions"] = decided[0] == decided[1]
    return out


# --- section 10: HAMi vGPU ---------------------------------------------------------------------

VGPU_CARDS = 8
VGPU_CARD_MIB = 40960
VGPU_SPLIT = 10
# The pods' asks cycle through these (MiB per card, percent of a card's cores).
VGPU_ASKS = ((4096, 10), (8192, 25), (10240, 20), (20480, 50), (2048, 0), (5120, 30))
VGPU_POLICY = POLICY.replace("  plugin binpack\n", "  plugin binpack\n  plugin deviceshare { vgpu = true }\n", 1)


def make_vgpu_cluster(nodes: int, pods: int, with_vgpu: bool) -> ClusterState:
    """Section 10's cluster: nodes of 64 CPUs; with vGPU, each node's VGPU_CARDS cards in HAMi's
    register annotation (volcano.sh/node-vgpu-register) and its vgpu-number/-memory/-cores
    allocatable, each pod one vGPU of VGPU_ASKS (by pod); without, each node `nvidia.com/gpu:
    VGPU_CARDS` and each pod `nvidia.com/gpu: 1`. Gangs of 8 over the queues."""
    state = ClusterState()
    for n in range(nodes):
        name = f"node-{n:05d}"
        allocatable = {"cpu": 64000, "memory": 512 * GiB, "pods": 110}
        annotations = {}
        if with_vgpu:
            allocatable.update({vg.VGPU_NUMBER: VGPU_CARDS * VGPU_SPLIT, vg.VGPU_MEMORY: VGPU_CARDS * VGPU_CARD_MIB,
                                vg.VGPU_CORES: VGPU_CARDS * 100})
            annotations[vg.REGISTER] = "".join(f"GPU-{n:05d}-{i},{VGPU_SPLIT},{VGPU_CARD_MIB},NVIDIA-A100,true,hami-core:"
                                               for i in range(VGPU_CARDS))
        else:
            allocatable["nvidia.com/gpu"] = VGPU_CARDS
        state.add_node(Node(name, allocatable, labels={"kubernetes.io/hostname": name}, annotations=annotations))
    for g in range(pods // 8):
        name = f"job-{g:05d}"
        state.add_podgroup(PodGroup("bench", name, min_member=8, queue=f"q{g % QUEUES}", phase="Inqueue",
                                    uid=f"pg-{g}", creation=float(g)))
        for r in range(8):
            memory, cores = VGPU_ASKS[(g * 8 + r) % len(VGPU_ASKS)]
            requests = {"cpu": 1000, "memory": 4 * GiB}
            requests.update({vg.VGPU_NUMBER: 1, vg.VGPU_MEMORY: memory, vg.VGPU_CORES: cores} if with_vgpu
                            else {"nvidia.com/gpu": 1})
            state.add_pod(Pod("bench", f"{name}-{r}", requests, uid=f"{g}-{r}", group=name, creation=float(g)))
    return state


def vgpu_checked(state: ClusterState, decisions) -> dict:
    """This script's own check of section 10, from the pods' requests and the cards the bindings
    name (places in the node's register): no card over its memory, 100% of its cores or its split
    count; every bound pod one card."""
    pods = {f"{p.namespace}/{p.name}": p for p in state.pods.values()}
    memory: dict = {}
    cores: dict = {}
    tasks: dict = {}
    one_card = True
    for b in decisions.bindings:
        cards = b.devices.get(vg.VGPU_NUMBER, ())
        one_card &= len(cards) == 1
        requests = pods[b.pod].requests
        for c in cards:
            key = (b.node, c)
            memory[key] = memory.get(key, 0) + requests[vg.VGPU_MEMORY]
            cores[key] = cores.get(key, 0) + requests.get(vg.VGPU_CORES, 0)
            tasks[key] = tasks.get(key, 0) + 1
    within = (all(m <= VGPU_CARD_MIB for m in memory.values()) and all(c <= 100 for c in cores.values())
              and all(t <= VGPU_SPLIT for t in tasks.values()))
    return {"cards_used": len(tasks), "within_cards": within and one_card,
            "peak_card_memory_mib": max(memory.values(), default=0), "peak_card_cores": max(cores.values(), default=0)}


def vgpu_cycles(plan, nodes: int, pods: int, repeat: int) -> dict:
    """Section 10: best compiled cycle with vGPU asks and with whole cards instead; the card check;
    both paths alike (at a tenth of the size)."""
    out, state, decisions = with_and_without(plan, lambda with_vgpu: make_vgpu_cluster(nodes, pods, with_vgpu), repeat)
    out.update(nodes=nodes, cards=nodes * VGPU_CARDS, pods=pods, **vgpu_checked(state, decisions))
    small = make_vgpu_cluster(max(nodes // 10, 10), max(pods // 10, 80), True)
    decided = [one_cycle(plan, small, pure, SnapshotCache())[3].to_json() for pure in (False, True)]
    out["identical_decisions"] = decided[0] == decided[1]
    return out


def vgpu_section(scale: int, repeat: int, result: dict) -> bool:
    """Section 10 run and printed; whether its checks hold."""
    compilation = compile_text(VGPU_POLICY, "bench-vgpu.policy")
    out = result["vgpu"] = vgpu_cycles(compilation.plan, 2000 // scale, 20000 // scale, repeat)
    w, wo = out["with"], out["without"]
    print(f"vGPU {out['nodes']} nodes / {out['cards']} cards (HAMi register) / {out['pods']} pods of mixed memory and "
          f"cores: {w['placements_per_s']:,} placements/s ({w['placements']} placed, {w['cycle_s'] * 1000:.1f} ms, cpu "
          f"{w['cycle_cpu_s'] * 1000:.1f} ms), whole cards (nvidia.com/gpu) {wo['placements_per_s']:,}/s "
          f"({wo['placements']} placed, {wo['cycle_s'] * 1000:.1f} ms, cpu {wo['cycle_cpu_s'] * 1000:.1f} ms) "
          f"(cost {out['cost']}x; best of {repeat}); {out['cards_used']} cards used, within each card's memory, "
          f"cores and split: {out['within_cards']}; compiled and Python decide alike: {out['identical_decisions']}")
    return out["within_cards"] and out["identical_decisions"] and w["placements"] == out["pods"]


# --- section 11: numa-aware, nodegroup and task-topology -------------------------------------

NUMA_NODES_PER_HOST = 2
NUMA_CPUS = 32                # per NUMA node: one socket of 16 cores, two threads each
NUMA_GROUPS = 10              # node groups (volcano.sh/nodegroup-name), two queues each
NUMA_POLICY_ON = POLICY.replace("  plugin binpack\n", "  plugin binpack\n  plugin nodegroup\n  plugin numa-aware\n"
                                "  plugin task-topology\n", 1).replace(
    "\n".join(f"queue q{i} {{ weight = {1 + i % 4} }}" for i in range(QUEUES)),
    "\n".join(f"queue q{i} {{\n  weight = {1 + i % 4}\n  node_groups = [\"g{i % NUMA_GROUPS}\"]\n}}"
              for i in range(QUEUES)))


def numatopology_of(name: str) -> "NumaTopology":
    """A node's Numatopology as Volcano's resource exporter reports it: static CPU manager,
    single-numa-node topology manager, every CPU free, cpuDetail by NUMA node = socket."""
    cpus = {c: CpuInfo(c // NUMA_CPUS, c // NUMA_CPUS, (c % NUMA_CPUS) // 2)
            for c in range(NUMA_NODES_PER_HOST * NUMA_CPUS)}
    return NumaTopology(name, "static", "single-numa-node", {"cpu": frozenset(cpus)}, cpus,
                        reported=len(cpus))


def make_numa_cluster(nodes: int, pods: int, with_plugins: bool) -> ClusterState:
    """Section 11's cluster: nodes of 64 CPUs in two NUMA nodes; gangs of 8 Guaranteed pods (one
    `ps` of 8 CPUs, seven `worker`s of 4 CPUs) over the queues. With the plugins: each node a
    Numatopology and a node group (nodes split evenly over NUMA_GROUPS), each pod
    volcano.sh/numa-topology-policy: single-numa-node, each PodGroup task-topology affinity
    ps,worker and anti-affinity ps; without, none of that (same requests)."""
    state = ClusterState()
    for n in range(nodes):
        name = f"node-{n:05d}"
        labels = {"kubernetes.io/hostname": name}
        if with_plugins:
            labels[NODEGROUP_LABEL] = f"g{n * NUMA_GROUPS // nodes}"
            state.add_numatopology(numatopology_of(name))
        state.add_node(Node(name, {"cpu": NUMA_NODES_PER_HOST * NUMA_CPUS * 1000, "memory": 512 * GiB, "pods": 110},
                            labels=labels))
    for g in range(pods // 8):
        name = f"job-{g:05d}"
        topology = ((TASK_TOPOLOGY_AFFINITY, "ps,worker"), (TASK_TOPOLOGY_ANTI, "ps")) if with_plugins else ()
        state.add_podgroup(PodGroup("bench", name, min_member=8, queue=f"q{g % QUEUES}", phase="Inqueue",
                                    uid=f"pg-{g}", creation=float(g), task_topology=topology))
        for r in range(8):
            task, cpus = ("ps", 8) if r == 0 else ("worker", 4)
            annotations = {TASK_SPEC: task}
            if with_plugins:
                annotations[NUMA_POLICY_ANNOTATION] = "single-numa-node"
            state.add_pod(Pod("bench", f"{name}-{r}", {"cpu": cpus * 1000, "memory": 4 * GiB}, uid=f"{g}-{r}",
                              group=name, creation=float(g), annotations=annotations, numa_cpus=(cpus,)))
    return state


def numa_checked(state: ClusterState, decisions) -> dict:
    """This script's own check of section 11, from the bindings, Decisions.numa and the node
    labels: every pod bound got its CPUs, all within one NUMA node of its node, none given
    twice; every pod on a node of its queue's group."""
    pods = {f"{p.namespace}/{p.name}": p for p in state.pods.values()}
    queue_of = {f"{g.namespace}/{g.name}": g.queue for g in state.podgroups.values()}
    taken: dict[str, set[int]] = {}
    one_numa = twice = in_group = 0
    for b in decisions.bindings:
        pod = pods[b.pod]
        cpus = decisions.numa.get(b.pod, frozenset())
        one_numa += len(cpus) == pod.numa_cpus[0] and len({c // NUMA_CPUS for c in cpus}) == 1
        twice += bool(taken.setdefault(b.node, set()) & cpus)
        taken[b.node] |= cpus
        group = state.nodes[b.node].labels.get(NODEGROUP_LABEL)
        queue = queue_of[f"{pod.namespace}/{pod.group}"]
        in_group += group == f"g{int(queue[1:]) % NUMA_GROUPS}"
    placed = len(decisions.bindings)
    return {"pods_within_one_numa_node": one_numa, "cpus_given_twice": twice, "pods_in_their_group": in_group,
            "numa_checked": placed > 0 and one_numa == placed and twice == 0 and in_group == placed}


def numa_cycles(nodes: int, pods: int, repeat: int) -> dict:
    """Section 11: best compiled cycle with numa-aware, nodegroup and task-topology on against
    section 1's policy on the same pods without what they read, in one run; the check; both
    paths alike (at a tenth of the size)."""
    plans = {name: compile_text(text, f"bench-{name}.policy").plan
             for name, text in (("with", NUMA_POLICY_ON), ("without", POLICY))}
    out: dict = {}
    for name, with_it in (("without", False), ("with", True)):
        plan = plans[name]
        state = make_numa_cluster(nodes, pods, with_it)
        freeze_state()
        cache = SnapshotCache()
        one_cycle(plan, state, False, cache)
        (seconds, placed, parts, decisions), _, cpu = best_of(plan, state, False, cache, repeat)
        out[name] = {"cycle_s": round(seconds, 4), "cycle_cpu_s": round(cpu, 4), "placements": placed,
                     "placements_per_s": round(placed / seconds), "phases": parts}
    out["cost"] = round(out["with"]["cycle_s"] / out["without"]["cycle_s"], 2)
    out.update(nodes=nodes, pods=pods, gangs=pods // 8, **numa_checked(state, decisions))
    small = make_numa_cluster(max(nodes // 10, NUMA_GROUPS), max(pods // 10, 80), True)
    decided = [one_cycle(plans["with"], small, pure, SnapshotCache())[3] for pure in (False, True)]
    out["identical_decisions"] = decided[0].to_json() == decided[1].to_json() and decided[0].numa == decided[1].numa
    return out


def numa_section(scale: int, repeat: int, result: dict) -> bool:
    """Section 11 run and printed; whether its checks hold."""
    out = result["numa"] = numa_cycles(2000 // scale, 16000 // scale, min(repeat, NUMA_REPEAT))
    w, wo = out["with"], out["without"]
    print(f"numa-aware + nodegroup + task-topology {out['nodes']} nodes (2 NUMA nodes x {NUMA_CPUS} CPUs, "
          f"{NUMA_GROUPS} node groups) / {out['pods']} Guaranteed pods in {out['gangs']} gangs: "
          f"{w['placements_per_s']:,} placements/s ({w['placements']} placed, {w['cycle_s'] * 1000:.1f} ms, cpu "
          f"{w['cycle_cpu_s'] * 1000:.1f} ms), plugins off {wo['placements_per_s']:,}/s ({wo['placements']} placed, "
          f"{wo['cycle_s'] * 1000:.1f} ms, cpu {wo['cycle_cpu_s'] * 1000:.1f} ms) (cost {out['cost']}x; best of "
          f"{min(repeat, NUMA_REPEAT)}); within one NUMA node {out['pods_within_one_numa_node']}/{w['placements']}, "
          f"in their group {out['pods_in_their_group']}/{w['placements']}, CPUs given twice {out['cpus_given_twice']}; "
          f"compiled and Python decide alike: {out['identical_decisions']}")
    return out["numa_checked"] and out["identical_decisions"] and w["placements"] == out["pods"]


def freeze_state() -> None:
    """Move everything alive now (the cluster state just built) out of the garbage collector's
    reach. A scheduler's cluster state lives as long as the process; left in the collector's
    oldest generation, its 20,000 pods (and their dicts) would be walked by every full
    collection, ~30 ms that lands at random in one measured cycle or another, of either path.
    Freezing is what a long-running scheduler would do after loading its state."""
    gc.collect()
    gc.freeze()


def placement_kernel_seconds(plan, state, pure: bool, cache: SnapshotCache) -> float:
    """Seconds inside the placement-tree kernels (build, refresh, place) over one cycle's actions.
    Each call is timed from Python, so the timer's own cost (well under a microsecond a call)
    counts against the compiled kernels."""
    ssn = open_session(plan, state, Options(pure_python=pure), cache)
    spent = [0.0]
    tree_class = ssn.k.PlacementTree

    class TimedTree:
        def __init__(self, *arrays):
            self.tree = tree_class(*arrays)

        def __getattr__(self, name: str):
            method = getattr(self.tree, name)
            if not callable(method):       # out_nodes, out_kinds
                return method

            def timed(*args):
                start = time.perf_counter()
                out = method(*args)
                spent[0] += time.perf_counter() - start
                return out
            return timed

    ssn.k = dataclasses.replace(ssn.k, PlacementTree=TimedTree)
    registry = actions()
    for name in plan.actions:
        registry[name](ssn)
    return spent[0]


def spread(seconds: list[float]) -> dict:
    return {"best_s": round(seconds[0], 4), "median_s": round(statistics.median(seconds), 4),
            "worst_s": round(seconds[-1], 4), "runs": len(seconds)}


def only_sections(plan, args, scale: int, result: dict) -> int:
    """`--sections`: the self-contained sections asked for, their figures and checks as in a
    full run (exit 1 when a check fails)."""
    wanted = {int(x) for x in args.sections.split(",") if x.strip()}
    unknown = wanted - {5, 6, 7, 8, 9, 11}
    if unknown:
        print(f"--sections: only sections 5 to 9 and 11 run alone (not {sorted(unknown)})", file=sys.stderr)
        return 2
    print(f"load average {result['load_average_1m']} on {result['cpus']} cpus")
    ok = True
    if 5 in wanted:
        out = result["settled"] = settled_cycles(plan, 1000 // scale, 10000 // scale, 200 // scale, args.repeat)
        print(f"settled: " + ", ".join(f"{n} {out[n]['cycle_s'] * 1000:.1f} ms" for n in ("listed", "folded", "counted"))
              + f"; identical decisions: {out['identical_decisions']}")
        ok &= out["identical_decisions"]
    runs = [(6, "placement_rules", lambda: rules_cycles(plan, 5000 // scale, 20000 // scale, 50 // scale, args.repeat)),
            (7, "storage", lambda: storage_cycles(plan, 5000 // scale, 20000 // scale, 2000 // scale, args.repeat)),
            (8, "topology", lambda: topology_cycles(plan, 5000 // scale, 20000 // scale,
                                                    min(args.repeat, TOPOLOGY_REPEAT))),
            (9, "dra", lambda: dra_cycles(plan, 1000 // scale, 8000 // scale, args.repeat))]
    for number, name, run in runs:
        if number not in wanted:
            continue
        out = result[name] = run()
        w, wo = out["with"], out["without"]
        print(f"section {number} ({name}): with {w['cycle_s'] * 1000:.1f} ms = {w['placements_per_s']:,} placements/s "
              f"(cpu {w['cycle_cpu_s'] * 1000:.1f} ms), without {wo['cycle_s'] * 1000:.1f} ms = "
              f"{wo['placements_per_s']:,}/s (cpu {wo['cycle_cpu_s'] * 1000:.1f} ms): cost {out['cost']}x "
              f"(cpu {w['cycle_cpu_s'] / max(wo['cycle_cpu_s'], 1e-9):.2f}x); best of {args.repeat}; "
              f"compiled and Python decide alike: {out['identical_decisions']}"
              + (f"; volumes checked: {out['volumes_checked']}" if number == 7 else "")
              + (f"; hard gangs within tier 1: {out['share_within_tier1']}" if number == 8 else "")
              + (f"; CEL {out['cel']['per_claim_us']} us per claim ({out['cel']['share_of_cycle']:.1%} of the cycle); "
                 f"allocations checked: {out['allocations_checked']}" if number == 9 else ""))
        ok &= out["identical_decisions"] and out.get("volumes_checked", True) \
            and out.get("allocations_checked", True) \
            and out.get("share_within_tier1", 1.0) == 1.0 and out.get("hard_gangs_placed") == out.get("hard_gangs")
    if 11 in wanted:
        ok &= numa_section(scale, args.repeat, result)
    if args.json:
        print(json.dumps(result))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    parser.add_argument("--vgpu-only", action="store_true", help="only section 10 (HAMi vGPU against whole cards)")
    parser.add_argument("--repeat", type=int, default=7,
                        help="cycles measured per path, compiled and pure Python alike (the best counts)")
    parser.add_argument("--sections", default="",
                        help="only these of the self-contained sections 5-9 and 11, comma-separated (e.g. 6,7)")
    args = parser.parse_args(argv)
    compilation = compile_text(POLICY, "bench.policy")
    if not compilation.ok:
        print("\n".join(str(d) for d in compilation.diagnostics), file=sys.stderr)
        return 2
    plan = compilation.plan
    scale = 10 if args.quick else 1
    result: dict = {"load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    if args.vgpu_only:
        print(f"load average {result['load_average_1m']} on {result['cpus']} cpus")
        ok = vgpu_section(scale, args.repeat, result)
        if args.json:
            print(json.dumps(result))
        return 0 if ok else 1
    if args.sections:
        return only_sections(plan, args, scale, result)

    # 1. the main cycle, compiled
    nodes, pods, jobs = 5000 // scale, 20000 // scale, 2000 // scale
    state = make_cluster(nodes, pods, jobs)
    freeze_state()
    one_cycle(plan, make_cluster(200, 800, 80), pure=False)   # warm imports
    cold_seconds = one_cycle(plan, state, pure=False)[0]
    cache = SnapshotCache()
    one_cycle(plan, state, pure=False, cache=cache)            # fill the node cache
    (seconds, placed, parts, compiled_decisions), all_seconds, cpu = best_of(plan, state, False, cache, args.repeat)
    result.update(nodes=nodes, pods=pods, jobs=jobs, queues=QUEUES, placements=placed,
                  cycle_s=round(seconds, 4), placements_per_s=round(placed / seconds), phases=parts,
                  spread=spread(all_seconds), cold_cycle_s=round(cold_seconds, 4),
                  cold_placements_per_s=round(placed / cold_seconds),
                  note=f"placements_per_s: best of {args.repeat} cycles, node cache warm; cold: first cycle")
    print(f"load average {result['load_average_1m']} on {result['cpus']} cpus")
    print(f"cycle {nodes} nodes / {pods} pods / {jobs} jobs: {placed} placements in {seconds:.3f}s "
          f"= {placed / seconds:,.0f} placements/s (best of {args.repeat}; median "
          f"{statistics.median(all_seconds):.3f}s, worst {all_seconds[-1]:.3f}s) {parts}; cold {cold_seconds:.3f}s")

    # 2. the pure-Python kernels, same cluster, same run
    (py_seconds, py_placed, py_parts, py_decisions), py_all, py_cpu = best_of(plan, state, True, cache, args.repeat)
    if py_decisions.to_json() != compiled_decisions.to_json():
        print("the pure-Python path decided differently from the compiled one", file=sys.stderr)
        return 1
    result.update(
        python={"cycle_s": round(py_seconds, 4), "placements_per_s": round(py_placed / py_seconds),
                "phases": py_parts, "spread": spread(py_all)},
        speedup_vs_python=round(py_seconds / seconds, 1),
        speedup_actions=round(py_parts["actions_s"] / max(parts["actions_s"], 1e-9), 1),
        cycle_cpu_s={"compiled": round(cpu, 4), "python": round(py_cpu, 4)},
        speedup_vs_python_cpu=round(py_cpu / max(cpu, 1e-9), 1),
        speedup_note=("whole cycle, same cluster, same run, identical decisions; the kernels (the snapshot's "
                      "passes over the pods and its jobs, placement trees, ledger, shares, collect's decisions) are "
                      "compiled in one path and the same sources interpreted (Cython's pure-Python mode) "
                      "in the other; the plugins' and actions' Python code between kernel calls is shared "
                      "and bounds the ratio (phases); speedup_vs_python_cpu: the same from the least "
                      "processor time of the runs (less disturbed by other processes); "
                      "speedup_actions: the actions phase alone; speedup_placement_kernels: time inside "
                      "PlacementTree build/refresh/place"))
    kernel = [min(placement_kernel_seconds(plan, state, pure, cache) for _ in range(3)) for pure in (False, True)]
    result.update(placement_kernel_s={"compiled": round(kernel[0], 4), "python": round(kernel[1], 4)},
                  speedup_placement_kernels=round(kernel[1] / max(kernel[0], 1e-9), 1))
    print(f"pure python, same cluster: {py_seconds:.3f}s = {py_placed / py_seconds:,.0f} placements/s {py_parts}; "
          f"speedup {result['speedup_vs_python']}x whole cycle, {result['speedup_actions']}x actions phase, "
          f"{result['speedup_placement_kernels']}x placement-tree kernels ({kernel[0]:.4f}s vs {kernel[1]:.4f}s) "
          f"(identical decisions)")

    # 3. scaling
    scaling = []
    for n in (1000 // scale, 5000 // scale, 10000 // scale):
        st = make_cluster(n, n * 4, n * 4 // 10)
        freeze_state()
        scale_cache = SnapshotCache()
        one_cycle(plan, st, False, scale_cache)
        (s, p, _, _), _, _ = best_of(plan, st, False, scale_cache, 3)
        scaling.append({"nodes": n, "pods": n * 4, "placements": p, "seconds": round(s, 3),
                        "placements_per_s": round(p / s)})
        print(f"scaling {n} nodes / {n * 4} pods: {p} placements in {s:.3f}s = {p / s:,.0f}/s (best of 3)")
    result["scaling"] = scaling

    # 4. snapshot memory
    m_nodes, m_pods = 10000 // scale, 100000 // scale
    big = make_cluster(m_nodes, m_pods, m_pods // 10)
    tracemalloc.start()
    snap = build_snapshot(big, plan, cache=SnapshotCache())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result["snapshot_memory"] = {"nodes": m_nodes, "pods": m_pods, "array_bytes": snap.nbytes(),
                                 "build_peak_bytes": peak}
    print(f"snapshot {m_nodes} nodes / {m_pods} pods: arrays {snap.nbytes() / 2**20:.1f} MiB, "
          f"build peak {peak / 2**20:.1f} MiB")

    # 5. a settled cluster
    settled = settled_cycles(plan, 1000 // scale, 10000 // scale, 200 // scale, args.repeat)
    result["settled"] = settled
    print(f"settled cluster {settled['nodes']} nodes / {settled['bound']} bound / {settled['waiting']} waiting: "
          + ", ".join(f"{name} {settled[name]['cycle_s'] * 1000:.1f} ms" for name in ("listed", "folded", "counted"))
          + f" (best of {args.repeat}; identical decisions: {settled['identical_decisions']})")
    if not settled["identical_decisions"]:
        print("folding or counting the settled pods changed the decisions", file=sys.stderr)
        return 1

    # 6. placement rules
    rules = rules_cycles(plan, 5000 // scale, 20000 // scale, 50 // scale, args.repeat)
    result["placement_rules"] = rules
    print(f"placement rules {rules['nodes']} nodes in {rules['zones']} zones / {rules['pods']} pods: "
          f"{rules['with']['placements_per_s']:,} placements/s with the rules, "
          f"{rules['without']['placements_per_s']:,} without (cost {rules['cost']}x; best of {args.repeat}; "
          f"compiled and Python decide alike: {rules['identical_decisions']})")
    if not rules["identical_decisions"]:
        print("the pure-Python path decided differently from the compiled one on the rules", file=sys.stderr)
        return 1

    # 7. storage
    storage = storage_cycles(plan, 5000 // scale, 20000 // scale, 2000 // scale, args.repeat)
    result["storage"] = storage
    print(f"storage {storage['nodes']} nodes / {storage['pods']} pods, {storage['claims']} with a delayed claim "
          f"({storage['static_volumes']} static PVs chosen, {storage['provisioned']} provisioned): "
          f"{storage['with']['cycle_s'] * 1000:.1f} ms with the claims, {storage['without']['cycle_s'] * 1000:.1f} ms "
          f"without (cost {storage['cost']}x; best of {args.repeat}; volumes checked: {storage['volumes_checked']}; "
          f"compiled and Python decide alike: {storage['identical_decisions']})")
    if not (storage["identical_decisions"] and storage["volumes_checked"]):
        print("the storage cycle broke a volume invariant or the paths decided differently", file=sys.stderr)
        return 1

    # 8. network topology
    topo_repeat = min(args.repeat, TOPOLOGY_REPEAT)
    topo = topology_cycles(plan, 5000 // scale, 20000 // scale, topo_repeat)
    result["topology"] = topo
    print(f"network topology {topo['nodes']} nodes under {topo['hypernodes']} HyperNodes "
          f"({', '.join(f'tier {t}: {n}' for t, n in topo['hypernodes_by_tier'].items())}) / {topo['pods']} pods in "
          f"{topo['gangs']} gangs of 8-64, {topo['hard_gangs']} with hard tier-1 topology: "
          f"{topo['with']['placements_per_s']:,} placements/s with the topology "
          f"({topo['with']['placements']} placed), {topo['without']['placements_per_s']:,} without "
          f"({topo['without']['placements']} placed) (cost {topo['cost']}x; best of {topo_repeat}); hard gangs placed "
          f"{topo['hard_gangs_placed']}/{topo['hard_gangs']}, within one tier-1 HyperNode "
          f"{topo['hard_gangs_within_tier1']}/{topo['hard_gangs_placed']}; "
          f"compiled and Python decide alike: {topo['identical_decisions']}")
    if not (topo["identical_decisions"] and topo["share_within_tier1"] == 1.0
            and topo["hard_gangs_placed"] == topo["hard_gangs"]):
        print("the topology cycle spread a hard gang, left one unplaced, or the paths decided differently",
              file=sys.stderr)
        return 1

    # 9. Dynamic Resource Allocation
    dra = dra_cycles(plan, 1000 // scale, 8000 // scale, args.repeat)
    result["dra"] = dra
    cel = dra["cel"]
    print(f"DRA {dra['nodes']} nodes publishing {dra['devices']} devices / {dra['pods']} pods, {dra['claims']} claims "
          f"with CEL selectors: {dra['with']['placements_per_s']:,} placements/s "
          f"({dra['with']['cycle_s'] * 1000:.1f} ms), whole cards as an extended resource "
          f"{dra['without']['placements_per_s']:,}/s ({dra['without']['cycle_s'] * 1000:.1f} ms) (cost {dra['cost']}x; "
          f"best of {args.repeat}); CEL {cel['seconds'] * 1000:.1f} ms per cycle = {cel['per_claim_us']} us per claim "
          f"({cel['evaluations']} evaluations, {cel['per_evaluation_us']} us each, {cel['share_of_cycle']:.1%} of the "
          f"cycle); allocations checked: {dra['allocations_checked']}; "
          f"compiled and Python decide alike: {dra['identical_decisions']}")
    if not (dra["identical_decisions"] and dra["allocations_checked"]):
        print("the DRA cycle broke an allocation invariant or the paths decided differently", file=sys.stderr)
        return 1
    # 10. HAMi vGPU
    if not vgpu_section(scale, args.repeat, result):
        print("the vGPU cycle over-committed a card, left a pod unplaced, or the paths decided differently",
              file=sys.stderr)
        return 1
    # 11. numa-aware, nodegroup and task-topology
    if not numa_section(scale, args.repeat, result):
        print("the NUMA cycle split a pod's CPUs, gave a CPU twice, left a group, left a pod unplaced, or the paths "
              "decided differently", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
