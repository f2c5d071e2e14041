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

12. Scale, every rule on (the full run's last section; `--sections 12` alone): 10,000 nodes in
   10 zones (4 shapes and instance types; 10% GPU nodes of 8 cards tainted nvidia.com/gpu, 5%
   infra nodes tainted dedicated=infra, 30% empty general nodes, 55% general nodes holding the
   bound pods) and 100,000 pods, 90,000 bound and 10,000 pending: Deployment-like groups of 10
   replicas (20% required hostname anti-affinity, 20% hard zone spread, 10% soft zone spread, 5% a host port, 10% required
   node affinity on the instance type, 5% infra pods with node selector and toleration, 5%
   tolerating every taint, the rest plain; one group in 50 with a delayed claim on its pending pods,
   of a class provisioning in half the zones) and gangs of 8-64 (half of GPU pods on the tainted
   GPU nodes), in 20 leaf queues under 4 parents (capacity, hierarchical, deserved and capability).
   The best of at most 5 compiled cycles placing the 10,000 (target 200 ms), its phases (snapshot,
   plugins open, actions, collect), tracemalloc's bytes for the snapshot and the session, the cost
   from 1k to 10k nodes (pods scaled alike) as a table (`--markdown FILE`: also as a Markdown
   table and a Mermaid chart in FILE). Checked by this script's own reading of the
   pods' specs (scale_checked): room, taints, selectors, anti-affinity both ways, hard spread,
   host ports, gangs all or nothing, claims' zones, queues' capabilities; every pending pod placed;
   the compiled and pure-Python paths decide alike (at a tenth of the size). The placement quality
   (binpack fill of the general nodes, soft spread skew) against a kube-scheduler-like stand-in of
   this script's own (sampled_placement) scoring only kube-scheduler's adaptive
   percentageOfNodesToScore of the feasible nodes, and the same stand-in scoring all of them.

"In one run (`cost` = with ÷ without)": the two clusters' cycles take turns in one process, one
each per round, and each side's best is kept (`with_and_without`), so that a minute in which the
shared machine runs slower falls on both.

The machine may be shared: best-of-N is the figure, and the load average at the start and
the spread (median, worst) say how noisy the run was. The cluster state is frozen out of the
garbage collector's reach once built (`freeze_state`), as a long-running scheduler would.

    python bench/core.py [--json] [--quick] [--repeat N] [--sections 6,7]
    python bench/core.py --sections 12 --markdown growth.md   # section 12's growth, table and chart
                                                              # (a full run writes it too)

--sections runs only the listed self-contained sections (5 to 9, 11, 12), e.g. the rule costs alone.

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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.pipeline import compile_text  # noqa: E402
from runtime.engine.cycle import Options, collect, collector_paused, open_session  # noqa: E402
from runtime.engine.actions import registry as actions  # noqa: E402
from runtime.kube.settled import SettledLedger  # noqa: E402
from runtime.cluster.model import (  # noqa: E402
    QUEUE_ANNOTATION, ClusterState, HostPort, Node, Pod, PodAffinityTerm, PodGroup, PodRules, SpreadConstraint, Taint,
    Toleration, settles,
)
from runtime.cluster.decisions import Binding, Decisions, VolumeChoice  # noqa: E402
from runtime.engine.actions.reservations import hold_reservations  # noqa: E402
from runtime.engine.kernels import load as load_kernels  # noqa: E402
from runtime.engine.plugins import registry as plugin_registry  # noqa: E402
from runtime.engine.session import Session  # noqa: E402
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


def act_and_collect(plan, ssn):
    """The plan's actions run on an open session, its decisions collected and the session
    closed: (when the actions ended, perf_counter; the decisions)."""
    registry = actions()
    for name in plan.actions:
        registry[name](ssn)
    acted = time.perf_counter()
    decisions = collect(ssn)
    ssn.close()
    return acted, decisions


def one_cycle(plan, state, pure: bool, cache: SnapshotCache | None = None, fold: bool | None = None):
    """Seconds for snapshot + session + actions + collect, placements, phases, decisions. The
    phases include the cycle's processor time (what other processes on a shared machine do
    not inflate as much as the wall clock). The cyclic collector is paused for the cycle, as
    run_cycle (the scheduler's loop) pauses it."""
    cpu = time.process_time()
    start = time.perf_counter()
    with collector_paused:
        ssn = open_session(plan, state, Options(pure_python=pure, fold_settled=fold), cache)
        opened = time.perf_counter()
        acted, decisions = act_and_collect(plan, ssn)
        del ssn    # gone before the collector is back, as run_cycle's session is
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
    and the state and decisions of the run with it, for checking. The two take turns, a cycle
    each: on a shared machine whose speed drifts by a third over minutes, a ratio of two bests
    taken one side after the other measures the drift as much as the feature."""
    states = {with_it: make(with_it) for with_it in (False, True)}
    freeze_state()
    caches = {with_it: SnapshotCache() for with_it in states}
    for with_it, state in states.items():
        one_cycle(plan, state, False, caches[with_it])
    best: dict[bool, tuple] = {}
    cpu: dict[bool, float] = {}
    for _ in range(repeat):
        for with_it, state in states.items():
            run, _, run_cpu = best_of(plan, state, False, caches[with_it], 1)
            if with_it not in best or run[0] < best[with_it][0]:
                best[with_it] = run
            cpu[with_it] = min(cpu.get(with_it, run_cpu), run_cpu)
            del run
    out: dict = {}
    for name, with_it in (("without", False), ("with", True)):
        seconds, placed, parts, _ = best[with_it]
        out[name] = {"cycle_s": round(seconds, 4), "cycle_cpu_s": round(cpu[with_it], 4), "placements": placed,
                     "placements_per_s": round(placed / seconds), "phases": parts}
    out["cost"] = round(out["with"]["cycle_s"] / out["without"]["cycle_s"], 2)
    return out, states[True], best[True][3]


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


def run_figures(run: dict, unit: str = "") -> str:
    """One measured cycle as printed: "N{unit}/s (P placed, T ms, cpu C ms)"."""
    return (f"{run['placements_per_s']:,}{unit}/s ({run['placements']} placed, {run['cycle_s'] * 1000:.1f} ms, "
            f"cpu {run['cycle_cpu_s'] * 1000:.1f} ms)")


def vgpu_section(scale: int, repeat: int, result: dict) -> bool:
    """Section 10 run and printed; whether its checks hold."""
    compilation = compile_text(VGPU_POLICY, "bench-vgpu.policy")
    out = result["vgpu"] = vgpu_cycles(compilation.plan, 2000 // scale, 20000 // scale, repeat)
    w, wo = out["with"], out["without"]
    print(f"vGPU {out['nodes']} nodes / {out['cards']} cards (HAMi register) / {out['pods']} pods of mixed memory and "
          f"cores: {run_figures(w, ' placements')}, whole cards (nvidia.com/gpu) {run_figures(wo)} "
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
          f"{run_figures(w, ' placements')}, plugins off {run_figures(wo)} (cost {out['cost']}x; best of "
          f"{min(repeat, NUMA_REPEAT)}); within one NUMA node {out['pods_within_one_numa_node']}/{w['placements']}, "
          f"in their group {out['pods_in_their_group']}/{w['placements']}, CPUs given twice {out['cpus_given_twice']}; "
          f"compiled and Python decide alike: {out['identical_decisions']}")
    return out["numa_checked"] and out["identical_decisions"] and w["placements"] == out["pods"]


# --- section 12: 10,000 nodes / 100,000 pods, every rule kind, 20 queues in a hierarchy ----------

SCALE_ZONES = 10
SCALE_REPLICAS = 10           # pods per Deployment-like group
SCALE_DEPARTMENTS = 4         # parent queues, QUEUES // SCALE_DEPARTMENTS leaf queues each
SCALE_REPEAT = 5              # best of at most this many 10k cycles
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU = "nvidia.com/gpu"
SCALE_SHAPES = ((16000, 64 * GiB, "m16"), (32000, 128 * GiB, "m32"), (64000, 256 * GiB, "m64"),
                (96000, 384 * GiB, "m96"))
# A group's kind by g % 20: its share of the groups is the number of residues listed.
SCALE_KINDS = {0: "anti", 1: "anti", 2: "anti", 3: "anti", 4: "spread", 5: "spread", 6: "spread", 7: "spread",
               8: "soft_spread", 9: "soft_spread", 10: "port", 11: "affinity", 12: "affinity", 13: "infra",
               14: "tolerate_all"}            # 15-19: plain
GPU_TAINT = Taint(GPU, "present", "NoSchedule")
INFRA_TAINT = Taint("dedicated", "infra", "NoSchedule")
CLAIM_ZONES = tuple(f"z{z}" for z in range(SCALE_ZONES // 2))   # the zonal class provisions in half the zones


def scale_pool(n: int) -> str:
    """A node's pool from its block of SCALE_ZONES consecutive nodes (one per zone, so any pool
    is a whole number of blocks and pool[i] lies in zone i % SCALE_ZONES): gpu 10%, infra 5%,
    `fresh` (general, empty: nodes just added) 30%, `busy` (general, holding the bound pods) 55%."""
    block = (n // SCALE_ZONES) % 20
    if block in (9, 19):
        return "gpu"
    if block == 0:
        return "infra"
    return "fresh" if block in (6, 7, 8, 16, 17, 18) else "busy"


def scale_policy(nodes: int) -> str:
    """Section 1's tiers with capacity (hierarchical) for proportion and nodeorder's soft rules
    scored beside binpack; 20 leaf queues under SCALE_DEPARTMENTS parents, deserved shares
    summing to the cluster's CPU and memory, capabilities above them (borrowing allowed)."""
    cpu = sum(SCALE_SHAPES[n % 4][0] for n in range(nodes)) // 1000
    mem = sum(SCALE_SHAPES[n % 4][1] for n in range(nodes)) // GiB
    per_dept = QUEUES // SCALE_DEPARTMENTS
    lines = ['policy "bench-scale" version 1', "actions [enqueue, allocate]",
             "tier {\n  plugin priority\n  plugin gang\n}",
             "tier {\n  plugin drf\n  plugin predicates\n  plugin capacity { enable_hierarchy = true }\n"
             "  plugin nodeorder {\n    leastrequested = 0\n    balancedresource = 0\n  }\n  plugin binpack\n}"]
    for d in range(SCALE_DEPARTMENTS):
        lines.append(f"queue dept{d} {{\n  deserved = {{ cpu: {cpu // SCALE_DEPARTMENTS}, "
                     f"memory: {mem // SCALE_DEPARTMENTS}Gi }}\n  capability = {{ cpu: {cpu // 2}, memory: {mem // 2}Gi }}")
        for i in range(d * per_dept, (d + 1) * per_dept):
            lines.append(f"  queue q{i} {{\n    deserved = {{ cpu: {cpu // QUEUES}, memory: {mem // QUEUES}Gi }}\n"
                         f"    capability = {{ cpu: {cpu // 4}, memory: {mem // 4}Gi }}\n  }}")
        lines.append("}")
    return "\n".join(lines) + "\n"


def scale_capabilities(nodes: int) -> dict[str, tuple[str | None, dict[str, int]]]:
    """Each queue's parent and capability as scale_policy writes them (the checker's copy)."""
    cpu = sum(SCALE_SHAPES[n % 4][0] for n in range(nodes)) // 1000
    mem = sum(SCALE_SHAPES[n % 4][1] for n in range(nodes)) // GiB
    out: dict[str, tuple[str | None, dict[str, int]]] = {}
    per_dept = QUEUES // SCALE_DEPARTMENTS
    for d in range(SCALE_DEPARTMENTS):
        out[f"dept{d}"] = (None, {"cpu": cpu // 2 * 1000, "memory": mem // 2 * GiB})
        for i in range(d * per_dept, (d + 1) * per_dept):
            out[f"q{i}"] = (f"dept{d}", {"cpu": cpu // 4 * 1000, "memory": mem // 4 * GiB})
    return out


class _BoundPlacer:
    """Places the settled pods of section 12's cluster when building it (this script's own
    deterministic placement, keeping every rule: room, one pod of an anti-affinity group or a
    host port per node, replicas cycling through the zones)."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.used: list[dict[str, int]] = [{} for _ in nodes]
        self.groups: list[set[str]] = [set() for _ in nodes]
        self.ports: list[set[int]] = [set() for _ in nodes]

    def fits(self, i: int, requests: dict[str, int]) -> bool:
        used, alloc = self.used[i], self.nodes[i].allocatable
        return (used.get("pods", 0) < alloc["pods"]
                and all(used.get(r, 0) + v <= alloc.get(r, 0) for r, v in requests.items()))

    def take(self, i: int, pod: Pod, group: str | None, port: int | None) -> None:
        for r, v in pod.requests.items():
            self.used[i][r] = self.used[i].get(r, 0) + v
        self.used[i]["pods"] = self.used[i].get("pods", 0) + 1
        if group:
            self.groups[i].add(group)
        if port:
            self.ports[i].add(port)
        pod.node_name, pod.phase = self.nodes[i].name, "Running"

    def place(self, pool: list[int], start: int, step: int, pod: Pod, group: str | None, port: int | None) -> None:
        """From pool[start], then every SCALE_ZONES-th (same zone) until the pod fits its rules."""
        for k in range(len(pool)):
            i = pool[(start + k * step) % len(pool)]
            if self.fits(i, pod.requests) and (group is None or group not in self.groups[i]) \
                    and (port is None or port not in self.ports[i]):
                self.take(i, pod, group, port)
                return
        raise RuntimeError(f"section 12's builder found no node for the settled pod {pod.key}")


def make_scale_cluster(nodes: int, with_rules: bool = True) -> ClusterState:
    """Section 12's cluster: `nodes` nodes in SCALE_ZONES zones (4 shapes and instance types;
    pools by scale_pool: GPU nodes of 8 cards tainted nvidia.com/gpu, infra nodes tainted
    dedicated=infra, 30% empty) and 10 × `nodes` pods, 9 × `nodes` of them bound and `nodes`
    pending. Deployment-like groups of SCALE_REPLICAS replicas without PodGroups, by SCALE_KINDS:
    required hostname anti-affinity within the group, zone spread (maxSkew 1) hard or soft, a host
    port, required node affinity on instance type, infra pods (node selector + toleration),
    pods tolerating every taint, plain ones; one in 50 groups' pending pods a delayed claim of a
    class provisioning in half the zones. Gangs of GANG_SIZES (PodGroups), every other one of GPU
    pods (1 card, tolerating the GPU taint, node selector pool=gpu). Every job in one of the 20
    leaf queues (scale_policy). Without `with_rules`, the same pods and places without their
    inter-pod rules (anti-affinity, spread, host ports): what those cost."""
    state = ClusterState()
    node_list = []
    for n in range(nodes):
        cpu, mem, kind = SCALE_SHAPES[n % 4]
        pool = scale_pool(n)
        allocatable = {"cpu": cpu, "memory": mem, "pods": 110}
        taints: tuple[Taint, ...] = ()
        if pool == "gpu":
            allocatable[GPU] = 8
            taints = (GPU_TAINT,)
        elif pool == "infra":
            taints = (INFRA_TAINT,)
        name = f"node-{n:05d}"
        node = Node(name, allocatable, labels={HOSTNAME: name, ZONE: f"z{n % SCALE_ZONES}", INSTANCE_TYPE: kind,
                                               "pool": "general" if pool in ("busy", "fresh") else pool},
                    taints=taints)
        state.add_node(node)
        node_list.append(node)
    pools = {p: [n for n in range(nodes) if scale_pool(n) == p] for p in ("gpu", "infra", "busy")}
    pools["big"] = [n for n in pools["busy"] if n % 4 >= 2]
    placer = _BoundPlacer(node_list)
    st = state.storage
    st.classes["zonal"] = StorageClass("zonal", "disk.csi.example.com", WAIT_FOR_FIRST_CONSUMER,
                                       ((MatchExpression(ZONE, "In", CLAIM_ZONES),),))
    # Groups: 88% of the pods; one in 16 groups new (all pending), one in 4 one replica short.
    groups = nodes * 88 // 100
    group_pending = 0
    for g in range(groups):
        kind = SCALE_KINDS.get(g % 20, "plain")
        app = f"app-{g:05d}"
        pending = SCALE_REPLICAS if g % 16 == 15 else (1 if g % 4 == 0 else 0)
        selector = LabelSelector((("app", app),))
        rules, port = None, None
        node_selector: dict[str, str] = {}
        required: tuple = ()
        tolerations: tuple[Toleration, ...] = ()
        pool = pools["busy"]
        if kind == "anti":
            rules = PodRules(anti_affinity=(PodAffinityTerm(HOSTNAME, selector, frozenset({"bench"})),))
        elif kind in ("spread", "soft_spread"):
            rules = PodRules(spread=(SpreadConstraint(1, ZONE, "DoNotSchedule" if kind == "spread" else "ScheduleAnyway",
                                                      selector),))
        elif kind == "port":
            port = 8000 + g % 3
            rules = PodRules(host_ports=(HostPort(port),))
        elif kind == "affinity":
            required = ((MatchExpression(INSTANCE_TYPE, "In", ("m64", "m96")),),)
            pool = pools["big"]
        elif kind == "infra":
            node_selector = {"pool": "infra"}
            tolerations = (Toleration("dedicated", "Equal", "infra", "NoSchedule"),)
            pool = pools["infra"]
        elif kind == "tolerate_all":
            tolerations = (Toleration(operator="Exists"),)
        requests = {"cpu": 100 * (1 + g % 5), "memory": GiB // 4 * (1 + g % 4)}
        for r in range(SCALE_REPLICAS):
            pod = Pod("bench", f"{app}-{r}", dict(requests), uid=f"a{g}-{r}", labels={"app": app},
                      rules=rules if with_rules else None,
                      node_selector=node_selector, required_terms=required, tolerations=tolerations,
                      creation=float(g), annotations={QUEUE_ANNOTATION: f"q{g % QUEUES}"})
            if r < SCALE_REPLICAS - pending:
                placer.place(pool, g * 7 + r * (SCALE_ZONES + 1), SCALE_ZONES, pod,
                             app if kind == "anti" else None, port)
            else:
                group_pending += 1
                if g % 50 == 19:
                    claim = f"data-{pod.name}"
                    st.claims[f"bench/{claim}"] = PersistentVolumeClaim(
                        "bench", claim, uid=f"c-{pod.uid}", storage_class="zonal", access_modes=("ReadWriteOnce",),
                        request=10 * GiB)
                    pod.volumes = (PodClaim("data", claim),)
            state.add_pod(pod)
    # Gangs: the rest, bound ones first (Running), then pending ones up to `nodes` pending pods.
    bound_left = nodes * 9 - (groups * SCALE_REPLICAS - group_pending)
    pending_left = nodes - group_pending
    cursor = {"gpu": 0, "busy": 0}
    j = 0
    while bound_left > 0 or pending_left > 0:
        bound = bound_left > 0
        left = bound_left if bound else pending_left
        size = min(GANG_SIZES[j % len(GANG_SIZES)], left)
        gpu = j % 2 == 1
        name = f"gang-{j:05d}"
        state.add_podgroup(PodGroup("bench", name, min_member=size, queue=f"q{j % QUEUES}",
                                    phase="Running" if bound else "Inqueue", uid=f"pg-{j}", creation=float(j)))
        requests = {"cpu": 1000, "memory": 4 * GiB, GPU: 1} if gpu else {"cpu": 2000, "memory": 8 * GiB}
        for t in range(size):
            pod = Pod("bench", f"{name}-{t}", dict(requests), uid=f"{j}-{t}", group=name, creation=float(j),
                      labels={"job": name}, node_selector={"pool": "gpu"} if gpu else {},
                      tolerations=(Toleration(GPU, "Exists", "", "NoSchedule"),) if gpu else ())
            if bound:
                pool = pools["gpu" if gpu else "busy"]
                key = "gpu" if gpu else "busy"
                # GPU gangs fill card by card (half the GPU nodes end up full); CPU gangs go round.
                while not placer.fits(pool[cursor[key] % len(pool)], pod.requests):
                    cursor[key] += 1
                placer.take(pool[cursor[key] % len(pool)], pod, None, None)
                if not gpu:
                    cursor[key] += 1
            state.add_pod(pod)
        if bound:
            bound_left -= size
        else:
            pending_left -= size
        j += 1
    return state


def scale_cycle(plan, state, cache: SnapshotCache) -> tuple[float, dict, object]:
    """One compiled cycle timed by phase: snapshot, plugins open (with reservations), actions,
    collect; (seconds, phases, decisions). The cyclic collector is paused for the cycle, as
    run_cycle (the scheduler's loop) pauses it."""
    cpu = time.process_time()
    start = time.perf_counter()
    with collector_paused:
        kernels = load_kernels(False)
        snap = build_snapshot(state, plan, "volcano", cache, kernels)
        snapped = time.perf_counter()
        ssn = Session(plan, snap, kernels)
        ssn.open_plugins(plugin_registry())
        hold_reservations(ssn, None)
        ssn.lost_to = {}
        opened = time.perf_counter()
        acted, decisions = act_and_collect(plan, ssn)
        del ssn, snap    # gone before the collector is back, as run_cycle's are (else its next pass walks them)
    end = time.perf_counter()
    phases = {"snapshot_s": round(snapped - start, 4), "plugins_open_s": round(opened - snapped, 4),
              "actions_s": round(acted - opened, 4), "collect_s": round(end - acted, 4),
              "cycle_cpu_s": round(time.process_time() - cpu, 4)}
    return end - start, phases, decisions


def scale_memory(plan, state) -> dict:
    """tracemalloc over a cold cycle (as section 4): bytes the snapshot holds once built, its
    build's peak, what opening the session adds, and the peak over the actions and collect."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kernels = load_kernels(False)
    snap = build_snapshot(state, plan, "volcano", SnapshotCache(), kernels)
    snapshot_bytes, snapshot_peak = tracemalloc.get_traced_memory()
    ssn = Session(plan, snap, kernels)
    ssn.open_plugins(plugin_registry())
    hold_reservations(ssn, None)
    ssn.lost_to = {}
    opened = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    registry = actions()
    for name in plan.actions:
        registry[name](ssn)
    collect(ssn)
    _, cycle_peak = tracemalloc.get_traced_memory()
    ssn.close()
    tracemalloc.stop()
    return {"snapshot_bytes": snapshot_bytes - base, "snapshot_build_peak_bytes": snapshot_peak - base,
            "snapshot_arrays_bytes": snap.nbytes(), "session_open_bytes": opened - snapshot_bytes,
            "cycle_peak_bytes": cycle_peak - base}


# The checker of section 12: this script's own reading of the pods' specs (match labels,
# tolerations, In expressions), not the engine's.

def _own_tolerates(tolerations, taint: Taint) -> bool:
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if not t.key:
            if t.operator == "Exists":
                return True
            continue
        if t.key == taint.key and (t.operator == "Exists" or t.value == taint.value):
            return True
    return False


def _own_selects(selector, labels: dict[str, str]) -> bool:
    if selector.match_expressions:
        raise ValueError("section 12's checker reads match labels only")
    return all(labels.get(k) == v for k, v in selector.match_labels)


def _own_term_holds(term, labels: dict[str, str]) -> bool:
    for e in term:
        if e.operator != "In" or e.field:
            raise ValueError("section 12's checker reads In expressions on labels only")
        if labels.get(e.key) not in e.values:
            return False
    return True


def scale_checked(state: ClusterState, decisions, nodes: int) -> dict:
    """Section 12's check: every binding of a pending pod to a node with room for it (all pods
    counted), its NoSchedule taints tolerated, its node selector and required affinity met, no
    other pod of its anti-affinity selector on its node (either way), its hard spread within
    maxSkew over the zones, no host port twice on a node, each gang all or nothing, each claim
    provisioned in an allowed zone, every queue and parent within its capability. Also the soft
    spread skews (not rules) and the binpack fill, as placement_quality reads them."""
    new = {b.pod: b.node for b in decisions.bindings}
    where = {k: p.node_name for k, p in state.pods.items() if p.node_name}
    errors = {k: 0 for k in ("rebound", "resources", "taints", "selector", "anti_affinity", "spread", "ports",
                             "gangs", "volumes", "queues")}
    for key in new:
        errors["rebound"] += key in where
    where.update(new)
    on_node: dict[str, list[Pod]] = {}
    for key, node in where.items():
        on_node.setdefault(node, []).append(state.pods[key])
    for node, pods in on_node.items():
        alloc = state.nodes[node].allocatable
        used: dict[str, int] = {"pods": len(pods)}
        for p in pods:
            for r, v in p.requests.items():
                used[r] = used.get(r, 0) + v
        errors["resources"] += any(v > alloc.get(r, 0) for r, v in used.items())
        seen_ports: set[tuple[int, str]] = set()
        for p in pods:
            for hp in (p.rules.host_ports if p.rules else ()):
                errors["ports"] += (hp.port, hp.protocol) in seen_ports
                seen_ports.add((hp.port, hp.protocol))
    for key, node_name in new.items():
        pod, node = state.pods[key], state.nodes[node_name]
        errors["taints"] += any(t.effect in ("NoSchedule", "NoExecute") and not _own_tolerates(pod.tolerations, t)
                                for t in node.taints)
        errors["selector"] += (any(node.labels.get(k) != v for k, v in pod.node_selector.items())
                               or (bool(pod.required_terms)
                                   and not any(_own_term_holds(t, node.labels) for t in pod.required_terms)))
        neighbours = on_node[node_name]
        for other in neighbours:
            if other is pod:
                continue
            for holder, target in ((pod, other), (other, pod)):
                for term in (holder.rules.anti_affinity if holder.rules else ()):
                    if term.topology_key != HOSTNAME:
                        raise ValueError("section 12's checker reads hostname anti-affinity only")
                    errors["anti_affinity"] += target.namespace in term.namespaces and _own_selects(term.selector,
                                                                                                     target.labels)
    zone_of = {name: n.labels[ZONE] for name, n in state.nodes.items()}
    zones = sorted(set(zone_of.values()))
    by_label: dict[tuple[str, str], list[str]] = {}
    for key in where:
        for pair in state.pods[key].labels.items():
            by_label.setdefault(pair, []).append(key)
    soft_skews, hard_skews = [], []
    checked: set = set()
    for key in new:
        pod = state.pods[key]
        for c in (pod.rules.spread if pod.rules else ()):
            if (c.selector, c.topology_key) in checked:
                continue
            checked.add((c.selector, c.topology_key))
            if c.topology_key != ZONE or pod.node_selector or pod.required_terms:
                raise ValueError("section 12's checker reads zone spread of pods without node affinity only")
            (pair,) = c.selector.match_labels
            counts = {z: 0 for z in zones}
            for k in by_label.get(pair, ()):
                counts[zone_of[where[k]]] += 1
            skew = max(counts.values()) - min(counts.values())
            (hard_skews if c.hard else soft_skews).append(skew)
            errors["spread"] += c.hard and skew > c.max_skew
    for pg in state.podgroups.values():
        if pg.phase == "Inqueue":
            placed = sum(f"bench/{pg.name}-{t}" in new for t in range(pg.min_member))
            errors["gangs"] += placed not in (0, pg.min_member)
    for key, node_name in new.items():
        for claim in state.pods[key].volumes or ():
            chosen = [c for c in decisions.volumes.get(key, ()) if c.claim == f"bench/{claim.claim}"]
            errors["volumes"] += not (len(chosen) == 1 and chosen[0].volume is None
                                      and zone_of[node_name] in CLAIM_ZONES)
    capabilities = scale_capabilities(nodes)
    queue_used: dict[str, dict[str, int]] = {}
    for key in where:
        pod = state.pods[key]
        queue = state.queue_name_of(pod)
        while queue is not None:
            used = queue_used.setdefault(queue, {})
            for r, v in pod.requests.items():
                used[r] = used.get(r, 0) + v
            queue = capabilities[queue][0]
    for queue, used in queue_used.items():
        errors["queues"] += any(used.get(r, 0) > cap for r, cap in capabilities[queue][1].items())
    pending = sum(1 for p in state.pods.values() if not p.node_name)
    return {"errors": errors, "rules_checked": not any(errors.values()), "pending": pending, "placed": len(new),
            "hard_spread_max_skew": max(hard_skews, default=0),
            "soft_spread_skew": _skew_summary(soft_skews), "fill": _fill(state, where)}


def _skew_summary(skews: list[int]) -> dict:
    return {"groups": len(skews), "mean": round(sum(skews) / len(skews), 3) if skews else None,
            "max": max(skews, default=0), "over_1": sum(s > 1 for s in skews)}


def _fill(state: ClusterState, where: dict[str, str]) -> dict:
    """Binpack fill over the general-purpose nodes: how many stayed empty of those empty before,
    and the mean CPU and memory requested ÷ allocatable of the nodes in use."""
    general = {name for name, n in state.nodes.items() if n.labels["pool"] == "general"}
    cpu: dict[str, int] = {}
    mem: dict[str, int] = {}
    before: set[str] = set()
    for key, node in where.items():
        if node in general:
            pod = state.pods[key]
            cpu[node] = cpu.get(node, 0) + pod.requests.get("cpu", 0)
            mem[node] = mem.get(node, 0) + pod.requests.get("memory", 0)
            if pod.node_name:
                before.add(node)
    empty_before = len(general) - len(before)
    used = list(cpu)
    touched = {node for key, node in where.items() if node in general and not state.pods[key].node_name}
    return {"empty_before": empty_before, "empty_after": len(general) - len(used), "touched": len(touched),
            "touched_cpu_util": round(sum(cpu[n] / state.nodes[n].allocatable["cpu"] for n in touched)
                                      / max(len(touched), 1), 4),
            "kept_empty": round((len(general) - len(used)) / empty_before, 4) if empty_before else None,
            "used_cpu_util": round(sum(cpu[n] / state.nodes[n].allocatable["cpu"] for n in used) / len(used), 4),
            "used_mem_util": round(sum(mem[n] / state.nodes[n].allocatable["memory"] for n in used) / len(used), 4)}


def kube_percentage_of_nodes_to_score(nodes: int) -> int:
    """kube-scheduler's adaptive percentageOfNodesToScore (unset in its configuration): 50 less
    one per 125 nodes, at least 5 (pkg/scheduler/schedule_one.go numFeasibleNodesToFind)."""
    return max(5, 50 - nodes // 125)


def kube_nodes_to_find(nodes: int, percentage: int) -> int:
    """How many feasible nodes kube-scheduler looks for before scoring: every node below 100
    nodes or at 100%, else the percentage of all nodes, at least 100."""
    if nodes < 100 or percentage >= 100:
        return nodes
    return max(nodes * percentage // 100, 100)


def sampled_placement(state: ClusterState, order: list[str], percentage: int) -> tuple[dict[str, str], dict]:
    """A kube-scheduler-like stand-in, this script's own: the pods one at a time in `order`, each
    filtered over the nodes from where the previous search stopped (round robin) until
    kube_nodes_to_find feasible ones are found, the best of those by the section's scorers
    (binpack on CPU and memory; for soft zone spread, nodeorder's podtopologyspread at weight 2:
    fewer of the group in the node's zone is better), the first on a tie. Filters: room, NoSchedule
    taints, node selector and required affinity, hostname anti-affinity within the group, host
    ports, hard zone spread, the claim's zones. (pod key -> node, the regret: how far below the
    best score among all feasible nodes the chosen one scored, in score points, and how often)."""
    names = list(state.nodes)
    index = {name: i for i, name in enumerate(names)}
    count = len(names)
    alloc = {r: np.array([state.nodes[n].allocatable.get(r, 0) for n in names], dtype=np.int64)
             for r in ("cpu", "memory", "pods", GPU)}
    used = {r: np.zeros(count, dtype=np.int64) for r in alloc}
    zones = sorted({n.labels[ZONE] for n in state.nodes.values()})
    zone_idx = np.array([zones.index(state.nodes[n].labels[ZONE]) for n in names])
    occupied: dict[tuple[str, str], np.ndarray] = {}
    zone_counts: dict[tuple[str, str], np.ndarray] = {}
    ports: dict[int, np.ndarray] = {}

    def take(pod: Pod, i: int) -> None:
        for r, v in pod.requests.items():
            used[r][i] += v
        used["pods"][i] += 1
        for pair in pod.labels.items():
            occupied.setdefault(pair, np.zeros(count, dtype=bool))[i] = True
            zone_counts.setdefault(pair, np.zeros(len(zones), dtype=np.int64))[zone_idx[i]] += 1
        for hp in (pod.rules.host_ports if pod.rules else ()):
            ports.setdefault(hp.port, np.zeros(count, dtype=bool))[i] = True

    for pod in state.pods.values():
        if pod.node_name:
            take(pod, index[pod.node_name])
    static: dict[tuple, np.ndarray] = {}

    def static_mask(pod: Pod) -> np.ndarray:
        key = (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.required_terms, bool(pod.volumes))
        mask = static.get(key)
        if mask is None:
            mask = np.array([
                all(t.effect not in ("NoSchedule", "NoExecute") or _own_tolerates(pod.tolerations, t) for t in node.taints)
                and all(node.labels.get(k) == v for k, v in pod.node_selector.items())
                and (not pod.required_terms or any(_own_term_holds(t, node.labels) for t in pod.required_terms))
                and (not pod.volumes or node.labels[ZONE] in CLAIM_ZONES)
                for node in state.nodes.values()])
            static[key] = mask
        return mask

    to_find = kube_nodes_to_find(count, percentage)
    start = 0
    out: dict[str, str] = {}
    regrets: list[float] = []
    for key in order:
        pod = state.pods[key]
        mask = static_mask(pod) & (used["pods"] < alloc["pods"])
        for r, v in pod.requests.items():
            mask &= used[r] + v <= alloc[r]
        soft = None
        for term in (pod.rules.anti_affinity if pod.rules else ()):
            (pair,) = term.selector.match_labels
            if pair in occupied:
                mask &= ~occupied[pair]
        for hp in (pod.rules.host_ports if pod.rules else ()):
            if hp.port in ports:
                mask &= ~ports[hp.port]
        for c in (pod.rules.spread if pod.rules else ()):
            (pair,) = c.selector.match_labels
            counts = zone_counts.get(pair, np.zeros(len(zones), dtype=np.int64))
            if c.hard:
                mask &= (counts + 1 - counts.min() <= c.max_skew)[zone_idx]
            else:
                soft = counts
        feasible = np.flatnonzero(mask)
        if not feasible.size:
            continue
        rotated = np.concatenate((feasible[feasible >= start], feasible[feasible < start]))
        sample = rotated[:to_find]
        start = (int(sample[-1]) + 1) % count if rotated.size > to_find else start

        def scores(nodes: np.ndarray) -> np.ndarray:
            score = ((used["cpu"][nodes] + pod.requests.get("cpu", 0)) / alloc["cpu"][nodes]
                     + (used["memory"][nodes] + pod.requests.get("memory", 0)) / alloc["memory"][nodes]) * 50
            if soft is not None:
                in_zone = soft[zone_idx[nodes]]
                low, high = in_zone.min(), in_zone.max()
                score = score + 2 * (100 * (high - in_zone) / (high - low) if high > low else 100)
            return score

        score = scores(sample)
        best = int(np.argmax(score))
        regrets.append(float(scores(feasible).max() - score[best]) if len(sample) < len(feasible) else 0.0)
        i = int(sample[best])
        take(pod, i)
        out[key] = names[i]
    missed = [r for r in regrets if r > 1e-9]
    return out, {"mean_points": round(sum(regrets) / max(len(regrets), 1), 3),
                 "max_points": round(max(regrets, default=0.0), 2), "share_below_best": round(
                     len(missed) / max(len(regrets), 1), 4)}


def placement_quality(state: ClusterState, new: dict[str, str], regret: dict | None = None) -> dict:
    """The binpack fill and spread skews of the pending pods placed as `new` says."""
    decisions = Decisions(bindings=[Binding(pod, node) for pod, node in new.items()],
                          volumes={k: tuple(VolumeChoice(f"bench/{c.claim}", None) for c in state.pods[k].volumes)
                                   for k in new if state.pods[k].volumes})
    checked = scale_checked(state, decisions, len(state.nodes))
    return {"placed": len(new), "fill": checked["fill"], "soft_spread_skew": checked["soft_spread_skew"],
            "hard_spread_max_skew": checked["hard_spread_max_skew"], "rules_checked": checked["rules_checked"],
            **({"regret": regret} if regret is not None else {})}


def scale_section(scale: int, repeat: int, result: dict) -> bool:
    """Section 12 run and printed; whether its checks hold."""
    nodes = 10000 // scale
    repeat = max(1, min(repeat, SCALE_REPEAT))
    compilation = compile_text(scale_policy(nodes), "bench-scale.policy")
    if not compilation.ok:
        print("\n".join(str(d) for d in compilation.diagnostics), file=sys.stderr)
        return False
    plan = compilation.plan
    built = time.perf_counter()
    state = make_scale_cluster(nodes)
    built = time.perf_counter() - built
    freeze_state()
    cache = SnapshotCache()
    scale_cycle(plan, state, cache)                 # warm: the node cache filled, as a running scheduler's
    best, seconds, cpu = None, [], []
    for _ in range(repeat):
        run = scale_cycle(plan, state, cache)
        seconds.append(run[0])
        cpu.append(run[1]["cycle_cpu_s"])
        if best is None or run[0] < best[0]:
            best = run
        del run
    cycle_s, phases, decisions = best
    checked = scale_checked(state, decisions, nodes)
    out = result["scale"] = {
        "nodes": nodes, "pods": len(state.pods), "bound": len(state.pods) - checked["pending"],
        "pending": checked["pending"], "placements": checked["placed"], "gangs_pending": sum(
            pg.phase == "Inqueue" for pg in state.podgroups.values()),
        "claims": len(state.storage.claims), "queues": QUEUES + SCALE_DEPARTMENTS, "build_s": round(built, 2),
        "cycle_s": round(cycle_s, 4), "cycle_cpu_s": round(min(cpu), 4), "spread": spread(sorted(seconds)),
        "placements_per_s": round(checked["placed"] / cycle_s), "phases": phases,
        # A steady state: nothing changed between the measured cycles, so the kept pod scan
        # (runtime.engine.podscan) read no pod again; bench/core.py measures no churn here.
        "pods_read_by_scan": cache.pods.rescanned,
        "memory": scale_memory(plan, state), "errors": checked["errors"], "rules_checked": checked["rules_checked"],
        "target_s": 0.2}
    plain = make_scale_cluster(nodes, with_rules=False)
    freeze_state()
    plain_cache = SnapshotCache()
    scale_cycle(plan, plain, plain_cache)
    plain_runs = [scale_cycle(plan, plain, plain_cache)[:2] for _ in range(repeat)]
    plain_best = min(plain_runs, key=lambda r: r[0])
    out["without_rules"] = {"cycle_s": round(plain_best[0], 4), "cycle_cpu_s": min(r[1]["cycle_cpu_s"] for r in plain_runs),
                            "phases": plain_best[1]}
    out["rules_cost"] = round(cycle_s / plain_best[0], 2)
    del plain, plain_cache, plain_runs
    order = [b.pod for b in decisions.bindings]
    order += [k for k, p in state.pods.items() if not p.node_name and k not in set(order)]
    ours = {b.pod: b.node for b in decisions.bindings}
    percentage = kube_percentage_of_nodes_to_score(nodes)
    quality = {"ours": placement_quality(state, ours)}
    for name, pct in (("stand_in_all_nodes", 100), (f"stand_in_{percentage}pct", percentage)):
        quality[name] = placement_quality(state, *sampled_placement(state, order, pct))
    quality["kube_percentage"] = percentage
    quality["kube_nodes_to_find"] = kube_nodes_to_find(nodes, percentage)
    out["quality"] = quality
    del state, decisions, best
    small = make_scale_cluster(max(nodes // 10, 100))
    small_plan = compile_text(scale_policy(len(small.nodes)), "bench-scale.policy").plan
    decided = [one_cycle(small_plan, small, pure, SnapshotCache())[3].to_json() for pure in (False, True)]
    out["identical_decisions"] = decided[0] == decided[1]
    del small, decided
    growth = []
    for n in (1000 // scale, 2500 // scale, 5000 // scale):
        g_plan = compile_text(scale_policy(n), "bench-scale.policy").plan
        g_state = make_scale_cluster(n)
        freeze_state()
        g_cache = SnapshotCache()
        scale_cycle(g_plan, g_state, g_cache)
        g_best = min((scale_cycle(g_plan, g_state, g_cache)[:2] for _ in range(3)), key=lambda r: r[0])
        growth.append({"nodes": n, "pods": len(g_state.pods), "pending": n, "cycle_s": round(g_best[0], 4),
                       "cycle_cpu_s": g_best[1]["cycle_cpu_s"], "phases": g_best[1]})
        del g_state, g_cache
    growth.append({"nodes": nodes, "pods": out["pods"], "pending": out["pending"], "cycle_s": out["cycle_s"],
                   "cycle_cpu_s": out["cycle_cpu_s"], "phases": phases})
    for row in growth:
        row["per_placement_us"] = round(row["cycle_s"] / row["pending"] * 1e6, 1)
        row["relative"] = round(row["cycle_s"] / growth[0]["cycle_s"], 2)
    out["growth"] = growth
    mem = out["memory"]
    print(f"section 12 (scale) {nodes} nodes / {out['pods']} pods ({out['bound']} bound, {out['pending']} pending, "
          f"{out['gangs_pending']} pending gangs, {out['claims']} delayed claims, {out['queues']} queues): "
          f"{out['placements']} placed in {cycle_s * 1000:.1f} ms (cpu {out['cycle_cpu_s'] * 1000:.1f} ms; best of "
          f"{repeat}, median {out['spread']['median_s'] * 1000:.1f} ms; target 200 ms; pods read again by its scan: "
          f"{out['pods_read_by_scan']}) {phases}; rules checked: "
          f"{out['rules_checked']} {checked['errors']}; compiled and Python decide alike: {out['identical_decisions']}")
    wo = out["without_rules"]
    print(f"  without the inter-pod rules (same pods, no anti-affinity, spread or host ports): "
          f"{wo['cycle_s'] * 1000:.1f} ms (cpu {wo['cycle_cpu_s'] * 1000:.1f} ms) {wo['phases']}: the rules cost "
          f"{out['rules_cost']}x (cpu {out['cycle_cpu_s'] / max(wo['cycle_cpu_s'], 1e-9):.2f}x)")
    print(f"  memory: snapshot {mem['snapshot_bytes'] / 2**20:.1f} MiB (arrays {mem['snapshot_arrays_bytes'] / 2**20:.1f} "
          f"MiB, build peak {mem['snapshot_build_peak_bytes'] / 2**20:.1f} MiB), session open "
          f"+{mem['session_open_bytes'] / 2**20:.1f} MiB, cycle peak {mem['cycle_peak_bytes'] / 2**20:.1f} MiB")
    for row in growth:
        print(f"  growth {row['nodes']:>6} nodes / {row['pods']:>7} pods: {row['cycle_s'] * 1000:8.1f} ms "
              f"({row['relative']}x, {row['per_placement_us']} us a placement) {row['phases']}")
    for name in ("ours", "stand_in_all_nodes", f"stand_in_{percentage}pct"):
        q = quality[name]
        print(f"  quality {name}: placed {q['placed']}, general nodes empty {q['fill']['empty_after']}/"
              f"{q['fill']['empty_before']} kept, used nodes' cpu {q['fill']['used_cpu_util']:.3f} memory "
              f"{q['fill']['used_mem_util']:.3f}, {q['fill']['touched']} general nodes took pods (their cpu "
              f"{q['fill']['touched_cpu_util']:.3f}), regret {q.get('regret')}, soft spread skew mean {q['soft_spread_skew']['mean']} max "
              f"{q['soft_spread_skew']['max']}, hard spread max {q['hard_spread_max_skew']}; rules kept "
              f"{q['rules_checked']}")
    return (out["rules_checked"] and out["identical_decisions"] and out["placements"] == out["pending"]
            and quality["ours"]["rules_checked"])


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


def growth_markdown(scale: dict) -> str:
    """Section 12's growth from 1k to 10k nodes as docs/benchmarks.md shows it: a Markdown table
    and a Mermaid line chart (cycle against nodes, the target beside it), rendered where the
    Markdown is read (GitHub, GitLab) with nothing to build or commit but the text."""
    rows = scale["growth"]
    target_ms = scale["target_s"] * 1000
    lines = ["| nodes | pods | pending | cycle (wall) | processor | per placement | × the smallest |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['nodes']:,} | {row['pods']:,} | {row['pending']:,} | {row['cycle_s'] * 1000:.1f} ms | "
                     f"{row['cycle_cpu_s'] * 1000:.1f} ms | {row['per_placement_us']} µs | {row['relative']} |")
    cycles = [round(row["cycle_s"] * 1000, 1) for row in rows]
    top = max([*cycles, target_ms])
    lines += ["", "```mermaid", "xychart-beta",
              f'    title "Section 12: one cycle placing a tenth of the pods, every rule on (line: the {target_ms:.0f} ms target)"',
              f'    x-axis "nodes (10 pods a node)" [{", ".join(str(row["nodes"]) for row in rows)}]',
              f'    y-axis "cycle (ms)" 0 --> {top * 1.1:.0f}',
              f"    line [{', '.join(str(c) for c in cycles)}]",
              f"    line [{', '.join(f'{target_ms:.0f}' for _ in rows)}]",
              "```"]
    return "\n".join(lines) + "\n"


def spread(seconds: list[float]) -> dict:
    return {"best_s": round(seconds[0], 4), "median_s": round(statistics.median(seconds), 4),
            "worst_s": round(seconds[-1], 4), "runs": len(seconds)}


def wanted_sections(text: str) -> set[int]:
    """--sections' numbers (empty: a full run)."""
    return {int(x) for x in text.split(",") if x.strip()}


def only_sections(plan, args, scale: int, result: dict) -> int:
    """`--sections`: the self-contained sections asked for, their figures and checks as in a
    full run (exit 1 when a check fails)."""
    wanted = wanted_sections(args.sections)
    unknown = wanted - {5, 6, 7, 8, 9, 11, 12}
    if unknown:
        print(f"--sections: only sections 5 to 9, 11 and 12 run alone (not {sorted(unknown)})", file=sys.stderr)
        return 2
    print(f"load average {result['load_average_1m']} on {result['cpus']} cpus")
    ok = True
    if 5 in wanted:
        out = result["settled"] = settled_cycles(plan, 1000 // scale, 10000 // scale, 200 // scale, args.repeat)
        print("settled: " + ", ".join(f"{n} {out[n]['cycle_s'] * 1000:.1f} ms" for n in ("listed", "folded", "counted"))
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
    if 12 in wanted:
        ok &= scale_section(scale, args.repeat, result)
        if args.markdown and not write_growth(args.markdown, result):
            return 2
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
    parser.add_argument("--markdown", metavar="FILE",
                        help="write section 12's growth (1k to 10k nodes) to FILE as a Markdown table and a "
                             "Mermaid chart (a full run, or --sections with 12)")
    parser.add_argument("--sections", default="",
                        help="only these of the self-contained sections 5-9, 11 and 12, comma-separated (e.g. 6,7)")
    args = parser.parse_args(argv)
    try:
        wanted = wanted_sections(args.sections)
    except ValueError:
        parser.error(f"--sections takes section numbers separated by commas, not {args.sections!r}")
    if args.markdown and (args.vgpu_only or wanted and 12 not in wanted):
        parser.error("--markdown writes section 12's growth: run it (a full run, or --sections with 12)")
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
    # 12. scale, every rule on (the run's largest clusters, built last)
    if not scale_section(scale, args.repeat, result):
        print("the scale cycle broke a rule, left a pod unplaced, or the paths decided differently", file=sys.stderr)
        return 1
    if args.markdown and not write_growth(args.markdown, result):
        return 2
    if args.json:
        print(json.dumps(result))
    return 0


def write_growth(path: str, result: dict) -> bool:
    """--markdown: section 12's growth written to `path`; False (said why) when it cannot be."""
    try:
        Path(path).write_text(growth_markdown(result["scale"]), encoding="utf-8")
    except OSError as err:
        print(f"--markdown: cannot write {path}: {err.strerror}", file=sys.stderr)
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
