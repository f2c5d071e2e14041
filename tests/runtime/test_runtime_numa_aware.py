"""The numa-aware plugin (Volcano's numaaware), its Numatopology objects, and cycles on both kernels.

Tables translated from Volcano v1.14.1 (pkg/scheduler/plugins/numaaware):
- policy/policy_none_test.go Test_none_predicate, policy_best_effort_test.go Test_best_effort_predicate,
  policy_restricted_test.go Test_restricted_predicate, policy_single_numa_node_test.go
  Test_single_numa_node_predicate: the best hint of the cpu and gpu providers' hints on NUMA nodes 0, 1;
- provider/cpumanager/cpu_mng_test.go Test_GetTopologyHints and Test_Allocate: hints and CPUs on an
  8-CPU node, NUMA node 0 = socket 0 = CPUs 0-3, NUMA node 1 = socket 1 = CPUs 4-7, two threads a core.
Then cycles: a pod is bound only where the node's topology manager admits its exclusive CPUs, placements
in one cycle take CPUs, fewer NUMA nodes score higher, reasons name what is missing, and the simulator's
state keeps what a bound pod holds until it finishes. Placements are checked by counting CPUs here."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState
from runtime.cluster.numa import (
    NUMA_POLICY_ANNOTATION, exclusive_cpus, guaranteed, parse_cpu_list, read_numatopology,
)
from runtime.cluster.objects import ObjectError, load_objects
from runtime.engine.cycle import open_session
from runtime.engine.plugins.numa_aware import (
    CpuTopology, allocate_cpus, cpu_hints, merge_hints, policy_predicate, take_by_topology,
)
from runtime.engine.session import Options
from runtime_helpers import cycle, placements, policy


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def m(*numa: int) -> int:
    return sum(1 << n for n in numa)


# --- Volcano's policy tables ---------------------------------------------------------------------
# Each case: provider hints as [{resource: [(mask, preferred), ...]}, ...], and the expected best hint.
CPU_GPU = lambda cpu, gpu: [{"cpu": cpu}, {"gpu": gpu}]  # noqa: E731 - a table shorthand

BEST_EFFORT_AND_RESTRICTED = [   # Test_best_effort_predicate and Test_restricted_predicate share their cases
    ("test-1", CPU_GPU([(m(0, 1), False), (m(0), True)], [(m(0, 1), False), (m(0), True)]), (m(0), True)),
    ("test-2", CPU_GPU([(m(0, 1), False), (m(1), True)], [(m(0, 1), False), (m(1), True)]), (m(1), True)),
    ("test-3", CPU_GPU([(m(0, 1), False), (m(0), True), (m(1), True)],
                       [(m(0, 1), False), (m(0), True), (m(1), True)]), (m(0), True)),
    ("test-4", CPU_GPU([(m(0, 1), False), (m(0), True)], [(m(0, 1), False), (m(1), True)]), (m(0), False)),
    ("test-5", CPU_GPU([(m(0, 1), False), (m(0), True)], [(m(0, 1), True)]), (m(0), True)),
    ("test-6", CPU_GPU([(m(0, 1), True)], [(m(0, 1), True)]), (m(0, 1), True)),
]
SINGLE_NUMA_NODE = [             # Test_single_numa_node_predicate
    ("test-1", CPU_GPU([(m(0, 1), False), (m(0), True)], [(m(0, 1), False), (m(0), True)]), (m(0), True)),
    ("test-2", CPU_GPU([(m(0, 1), False), (m(1), True)], [(m(0, 1), False), (m(1), True)]), (m(1), True)),
    ("test-3", CPU_GPU([(m(0, 1), False), (m(0), True), (m(1), True)],
                       [(m(0, 1), False), (m(0), True), (m(1), True)]), (m(0), True)),
    ("test-4", CPU_GPU([(m(0, 1), False), (m(0), True)], [(m(0, 1), False), (m(1), True)]), (m(0, 1), False)),
    ("test-5", CPU_GPU([(m(0, 1), False), (m(0), True)], [(m(0, 1), True)]), (m(0, 1), False)),
]


@pytest.mark.parametrize("name, providers, expected", BEST_EFFORT_AND_RESTRICTED,
                         ids=[c[0] for c in BEST_EFFORT_AND_RESTRICTED])
@pytest.mark.parametrize("node_policy", ["best-effort", "restricted"])
def test_volcano_best_effort_and_restricted_predicate(node_policy, name, providers, expected):
    best, admitted = policy_predicate(node_policy, [0, 1], providers)
    assert best == expected
    assert admitted == (node_policy == "best-effort" or expected[1])


@pytest.mark.parametrize("name, providers, expected", SINGLE_NUMA_NODE, ids=[c[0] for c in SINGLE_NUMA_NODE])
def test_volcano_single_numa_node_predicate(name, providers, expected):
    best, admitted = policy_predicate("single-numa-node", [0, 1], providers)
    assert best == expected
    assert admitted == expected[1]


def test_volcano_none_predicate():
    # Test_none_predicate: no hints, an empty hint, admitted.
    assert policy_predicate("none", [0, 1], []) == ((None, False), True)


def test_no_provider_preference_is_any_numa_preferred():
    # filterProvidersHints: a provider with no hints prefers nothing (any NUMA node, preferred); a
    # resource with an empty list can be placed nowhere (not preferred).
    assert merge_hints([0, 1], [None]) == (m(0, 1), True)
    assert merge_hints([0, 1], [{"cpu": []}]) == (m(0, 1), False)


# --- Volcano's cpu manager tables ----------------------------------------------------------------
EIGHT_CPUS = {"cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2} for c in range(8)}}


def topology_doc(name: str = "n1", free: str = "0-7", cpu_policy: str = "static",
                 topo_policy: str = "single-numa-node", detail: dict | None = None,
                 reserved: str | None = None) -> dict:
    spec = {"policies": {"CPUManagerPolicy": cpu_policy, "TopologyManagerPolicy": topo_policy},
            "numares": {"cpu": {"allocatable": free, "capacity": len(parse_cpu_list(free, "t"))}},
            **(detail or EIGHT_CPUS)}
    if reserved is not None:
        spec["resReserved"] = {"cpu": reserved}
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name},
            "spec": spec}


EIGHT = CpuTopology.of(read_numatopology(topology_doc()))

GET_TOPOLOGY_HINTS = [           # Test_GetTopologyHints: (name, request, available, hints in order)
    ("test-1", 4, "0-7", [(m(0), True), (m(1), True), (m(0, 1), False)]),
    ("test-2", 4, "1-7", [(m(1), True), (m(0, 1), False)]),
    ("test-3", 5, "0-7", [(m(0, 1), True)]),
    ("test-4", 8, "0-7", [(m(0, 1), True)]),
    ("test-5", 9, "0-7", []),
    ("test-6", 4, "2-5", [(m(0, 1), False)]),
]


@pytest.mark.parametrize("name, request_cpus, available, hints", GET_TOPOLOGY_HINTS,
                         ids=[c[0] for c in GET_TOPOLOGY_HINTS])
def test_volcano_get_topology_hints(name, request_cpus, available, hints):
    assert cpu_hints(EIGHT, parse_cpu_list(available, "t"), request_cpus) == hints


ALLOCATE = [                     # Test_Allocate: (name, request, available, best hint, CPUs taken)
    ("test-1", 4, "0-7", (m(0), True), "0-3"),
    ("test-2", 4, "1-7", (m(1), True), "4-7"),
    ("test-3", 5, "0-7", (m(0, 1), True), "0-4"),
    ("test-4", 5, "1-7", (m(0, 1), True), "1,4-7"),
    ("test-5", 8, "1-7", (m(0, 1), True), ""),
]


@pytest.mark.parametrize("name, request_cpus, available, hint, taken", ALLOCATE, ids=[c[0] for c in ALLOCATE])
def test_volcano_allocate(name, request_cpus, available, hint, taken):
    assert allocate_cpus(EIGHT, parse_cpu_list(available, "t"), request_cpus, hint) == parse_cpu_list(taken, "t")


def test_take_by_topology_whole_cores_before_threads():
    # Three CPUs on a node whose core (0, 0) is half used: the whole core (0, 1) first, then a thread
    # of the half-used core on the same socket.
    assert take_by_topology(EIGHT, parse_cpu_list("1-7", "t"), 3) == frozenset({1, 2, 3})
    assert take_by_topology(EIGHT, parse_cpu_list("1-7", "t"), 8) is None


# --- reading objects ------------------------------------------------------------------------------
def test_numatopology_is_read_with_reserved_cpus():
    state = load_objects([("n.yaml", topology_doc(free="0-3,6", reserved="1500m"))])
    topo = state.numatopologies["n1"]
    assert (topo.cpu_manager_policy, topo.topology_manager_policy) == ("static", "single-numa-node")
    assert topo.free_cpus == frozenset({0, 1, 2, 3, 6}) and topo.reserved_cpus == 2


@pytest.mark.parametrize("change, message", [
    ({"numares": {"cpu": {"allocatable": "3-1"}}}, "runs backwards"),
    ({"numares": {"cpu": {"allocatable": "0-x"}}}, "CPU list"),
    ({"numares": {"cpu": {"allocatable": "0-9"}}}, "lists CPU 8, which `spec.cpuDetail` does not describe"),
    ({"cpuDetail": {"0": {"numa": -1}}}, "must not be negative"),
    ({"policies": {"CpuPolicy": "static"}}, "is not a policy Volcano reads"),
    ({"resReserved": {"cpu": "lots"}}, "spec.resReserved.cpu"),
    ({"numaRes": {}}, "`spec.numaRes` is not a field of Numatopology"),
])
def test_bad_numatopology_is_a_located_error(change, message):
    doc = topology_doc()
    doc["spec"].update(change)
    with pytest.raises(ObjectError) as err:
        load_objects([("n.yaml", doc)])
    text = str(err.value)
    assert "n.yaml" in text and "Numatopology" in text and "n1" in text and message in text


def _spec(*containers: tuple[str, str], init: tuple[str, str] | None = None, requests_only=False) -> dict:
    def one(cpu, memory):
        res = {"requests": {"cpu": cpu, "memory": memory}}
        if not requests_only:
            res["limits"] = {"cpu": cpu, "memory": memory}
        return {"name": "c", "resources": res}
    spec = {"containers": [one(*c) for c in containers]}
    if init:
        spec["initContainers"] = [one(*init)]
    return spec


@pytest.mark.parametrize("spec, cpus", [
    (_spec(("2", "1Gi"), ("1500m", "1Gi")), (2, 0)),
    (_spec(("4", "1Gi"), init=("1", "1Gi")), (4,)),
    (_spec(("4", "1Gi"), requests_only=True), None),             # Burstable
    ({"containers": [{"name": "c", "resources": {"limits": {"cpu": "3", "memory": "1Gi"}}}]}, (3,)),
    ({"containers": [{"name": "c", "resources": {"limits": {"cpu": "3"}}}]}, None),
    ({"containers": [{"name": "c"}]}, None),                       # BestEffort
])
def test_guaranteed_pods_and_their_exclusive_cpus(spec, cpus):
    assert exclusive_cpus(spec) == cpus
    assert guaranteed(spec) == (cpus is not None)


# --- cycles -------------------------------------------------------------------------------------
def node_doc(name: str, cpu: str = "8") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}}


def pod_doc(name: str, *cpus: str, policy: str | None = "single-numa-node", guaranteed_pod: bool = True,
            group: str | None = None) -> dict:
    containers = []
    for i, cpu in enumerate(cpus):
        res = {"requests": {"cpu": cpu, "memory": "1Gi"}}
        if guaranteed_pod:
            res["limits"] = {"cpu": cpu, "memory": "1Gi"}
        containers.append({"name": f"c{i}", "resources": res})
    annotations = {NUMA_POLICY_ANNOTATION: policy} if policy else {}
    if group:
        annotations["scheduling.k8s.io/group-name"] = group
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "annotations": annotations,
                         "creationTimestamp": f"2026-01-01T00:00:{len(name):02d}Z"},
            "spec": {"schedulerName": "volcano", "containers": containers}}


def numa_policy(weight: int | None = None, on: bool = True):
    body = f" weight {weight}" if weight is not None else ""
    plugin = f"  plugin numa-aware{body}\n" if on else ""
    return policy(f"tier {{\n  plugin priority\n  plugin gang\n}}\ntier {{\n  plugin predicates\n  plugin proportion\n"
                  f"{plugin}}}\n", actions="enqueue, allocate")


def check_cpus(state: ClusterState, decisions) -> None:
    """Independent of the engine: no CPU of a node given twice, every CPU free before and on its node."""
    seen: dict[str, set[int]] = {}
    for b in decisions.bindings:
        cpus = decisions.numa.get(b.pod, frozenset())
        topo = state.numatopologies.get(b.node)
        if cpus:
            assert topo is not None and cpus <= topo.free_cpus, (b, cpus)
            assert not (seen.setdefault(b.node, set()) & cpus), (b, cpus)
            seen[b.node] |= cpus


def test_a_single_numa_node_pod_binds_only_where_one_numa_node_holds_it(pure):
    # n1's NUMA node 0 has 3 free CPUs and node 1 has 2: a 4-CPU pod fits no single NUMA node there.
    # n2 has NUMA node 1 whole. n3 has no Numatopology. n4's topology manager is restricted.
    docs = [node_doc(n) for n in ("n1", "n2", "n3", "n4")]
    docs += [topology_doc("n1", free="1-3,6-7"), topology_doc("n2", free="2,4-7"),
             topology_doc("n4", topo_policy="restricted")]
    docs.append(pod_doc("p", "4"))
    state = load_objects([("c.yaml", d) for d in docs])
    decisions = cycle(numa_policy(), state, pure)
    assert placements(decisions) == {"ns/p": "n2"}
    assert decisions.numa["ns/p"] == frozenset({4, 5, 6, 7})
    check_cpus(state, decisions)


def test_placements_in_one_cycle_take_cpus(pure):
    # One node, two NUMA nodes of 4 CPUs: three 4-CPU single-numa-node pods, two fit.
    docs = [node_doc("n1", "16"), topology_doc("n1")] + [pod_doc(f"p{i}", "4") for i in range(3)]
    state = load_objects([("c.yaml", d) for d in docs])
    decisions = cycle(numa_policy(), state, pure)
    assert len(placements(decisions)) == 2
    assert sorted(map(sorted, decisions.numa.values())) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    check_cpus(state, decisions)
    [waiting] = [u for u in decisions.unschedulable if u.pod.startswith("ns/p")]
    assert "had no free CPUs in their Numatopology" in " ".join(map(str, waiting.reasons))


def test_a_pod_the_policy_cannot_align_waits_saying_so(pure):
    # NUMA node 0 has 2 free CPUs, node 1 has 3: a 4-CPU single-numa-node pod fits neither.
    docs = [node_doc("n1", "16"), topology_doc("n1", free="0-1,5-7"), pod_doc("p", "4")]
    decisions = cycle(numa_policy(), load_objects([("c.yaml", d) for d in docs]), pure)
    assert not decisions.bindings
    text = str(decisions.unschedulable[0].reasons[0])
    assert "could not align the pod's exclusive CPUs with NUMA nodes" in text
    assert "(pod needs 4 CPUs; node n1's NUMA nodes 0, 1 have 2, 3 free)" in text


def test_a_pod_without_a_numatopology_waits_naming_it(pure):
    docs = [node_doc("n1"), node_doc("n2"), topology_doc("n2", cpu_policy="none"),
            pod_doc("p", "2", policy="restricted")]
    decisions = cycle(numa_policy(), load_objects([("c.yaml", d) for d in docs]), pure)
    assert not decisions.bindings
    text = " ".join(map(str, decisions.unschedulable[0].reasons))
    assert "no Numatopology (nodeinfo.volcano.sh/v1alpha1" in text and "restricted" in text
    assert "CPU manager policy other than static" in text


def test_an_unknown_policy_waits_saying_so(pure):
    docs = [node_doc("n1"), topology_doc("n1"), pod_doc("p", "2", policy="single-numa")]
    decisions = cycle(numa_policy(), load_objects([("c.yaml", d) for d in docs]), pure)
    assert not decisions.bindings
    assert "`single-numa` is none of none, best-effort, restricted, single-numa-node" in str(
        decisions.unschedulable[0].reasons[0])


def test_guaranteed_pods_without_policy_are_checked_under_the_nodes_policy(pure):
    # No annotation: Volcano still checks a Guaranteed pod on a static node with a topology policy;
    # a Burstable pod is not checked at all.
    docs = [node_doc("n1", "16"), topology_doc("n1", free="0-2,4-6"),
            pod_doc("g", "4", policy=None), pod_doc("b", "4", policy=None, guaranteed_pod=False)]
    decisions = cycle(numa_policy(), load_objects([("c.yaml", d) for d in docs]), pure)
    assert placements(decisions) == {"ns/b": "n1"}


def test_best_effort_admits_what_restricted_refuses(pure):
    docs = [node_doc("n1", "16"), node_doc("n2", "16"), topology_doc("n1", free="1-3,5-7", topo_policy="best-effort"),
            topology_doc("n2", free="1-3,5-7", topo_policy="restricted"),
            pod_doc("be", "4", policy="best-effort"), pod_doc("r", "4", policy="restricted")]
    state = load_objects([("c.yaml", d) for d in docs])
    decisions = cycle(numa_policy(), state, pure)
    # restricted: the preferred hint is one NUMA node (4 CPUs could fit one), none has 4 free.
    assert placements(decisions) == {"ns/be": "n1"}
    assert len(decisions.numa["ns/be"]) == 4
    check_cpus(state, decisions)


def test_fewer_numa_nodes_score_higher(pure):
    # best-effort admits both nodes; on n1 the pod spans two NUMA nodes, on n2 one.
    docs = [node_doc("n1", "16"), node_doc("n2", "16"),
            topology_doc("n1", free="1-3,5-7", topo_policy="best-effort"),
            topology_doc("n2", free="0-3", topo_policy="best-effort"), pod_doc("p", "4", policy="best-effort")]
    plan = numa_policy(weight=10)
    state = load_objects([("c.yaml", d) for d in docs])
    ssn = open_session(plan, state, Options(pure_python=pure))
    cid = int(ssn.snap.task_class[0])
    rule = ssn.plugins["numa-aware"].rule
    rule.codes(cid, None)
    assert list(rule.score(cid, None)) == [0.0, 500.0]         # 10 x (100 - 100 * used / most used)
    assert placements(cycle(plan, load_objects([("c.yaml", d) for d in docs]), pure)) == {"ns/p": "n2"}


def test_without_the_plugin_a_numa_policy_waits_naming_the_annotation(pure):
    docs = [node_doc("n1"), topology_doc("n1"), pod_doc("p", "2"), pod_doc("q", "2", policy="none")]
    decisions = cycle(numa_policy(on=False), load_objects([("c.yaml", d) for d in docs]), pure)
    assert placements(decisions) == {"ns/q": "n1"}
    [waiting] = decisions.unschedulable
    assert NUMA_POLICY_ANNOTATION in str(waiting.reasons[0]) and "numa-aware" in str(waiting.reasons[0])


def test_the_state_keeps_bound_cpus_until_the_pod_finishes(pure):
    # The simulator's cycles: a pod bound in one cycle holds its CPUs in the next (no exporter
    # reports in between); once it finishes, they are free again.
    docs = [node_doc("n1", "16"), topology_doc("n1", free="0-3")] + [pod_doc(f"p{i}", "4") for i in range(2)]
    state = load_objects([("c.yaml", d) for d in docs])
    plan = numa_policy()
    first = cycle(plan, state, pure)
    assert len(first.bindings) == 1
    state.apply(first)
    assert state.numatopologies["n1"].free_cpus == frozenset()
    assert not cycle(plan, state, pure).bindings
    state.complete_pod(first.bindings[0].pod)
    assert state.numatopologies["n1"].free_cpus == frozenset(range(4))
    assert len(cycle(plan, state, pure).bindings) == 1


def test_an_exporter_report_replaces_the_view_as_volcano_does():
    state = load_objects([("c.yaml", topology_doc("n1", free="0-7"))])
    state.numa_take("ns/p", "n1", frozenset({0, 1, 2, 3}))
    # The exporter has not seen the pod yet (fewer than reported before? no: the same 8): taken.
    state.add_numatopology(read_numatopology(topology_doc("n1", free="0-7")))
    assert len(state.numatopologies["n1"].free_cpus) == 8
    state.numa_take("ns/q", "n1", frozenset({0, 1, 2, 3, 4, 5}))
    # A report with fewer free CPUs than the last one but more than the view: the view stays.
    state.add_numatopology(read_numatopology(topology_doc("n1", free="0-5")))
    assert state.numatopologies["n1"].free_cpus == frozenset({6, 7})


# --- the connector ------------------------------------------------------------------------------
def test_the_connector_watches_numatopologies_while_the_plugin_is_on(caplog):
    import logging

    from runtime.kube.cache import NUMATOPOLOGIES, ClusterCache
    from test_connector_plugin_kinds import FakeApi, wait_until

    api = FakeApi()
    doc = topology_doc("n1")
    doc["metadata"]["resourceVersion"] = "1"
    api.items[NUMATOPOLOGIES.path] = [doc]
    cache = ClusterCache(api=api, scheduler_name="volcano")  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="policydsl.kube.cache"):
        cache.watch_for_plugins(["gang"])
        cache.start()
        try:
            assert cache.wait_synced(5) and NUMATOPOLOGIES.path not in api.listed
            cache.watch_for_plugins(["numa-aware"])
            wait_until(lambda: "n1" in cache.snapshot().numatopologies, "the Numatopology to be listed")
            # A binding's CPUs leave the scheduler's view of the node until the exporter reports.
            cache.assume_numa("ns/p", "n1", frozenset({0, 1, 2, 3}))
            assert cache.snapshot().numatopologies["n1"].free_cpus == frozenset({4, 5, 6, 7})
            with cache._lock:
                cache._delete(NUMATOPOLOGIES, doc)
            assert cache.snapshot().numatopologies == {}
        finally:
            cache.stop()
            api.close()
    assert any("Numatopology: watched, since the policy's numa-aware plugin reads them" in r.getMessage()
               for r in caplog.records)


def test_a_cluster_without_the_crd_reads_no_numatopology(monkeypatch, caplog):
    import logging

    from runtime.kube import cache as cache_module
    from runtime.kube.cache import NUMATOPOLOGIES, ClusterCache
    from test_connector_plugin_kinds import FakeApi

    monkeypatch.setattr(cache_module, "ABSENT_RETRY_S", 0.05)
    api = FakeApi()
    api.forbidden = {NUMATOPOLOGIES.path}
    cache = ClusterCache(api=api, scheduler_name="volcano")  # type: ignore[arg-type]
    cache.watch_for_plugins(["numa-aware"])
    with caplog.at_level(logging.WARNING, logger="policydsl.kube.cache"):
        cache.start()
        try:
            assert cache.wait_synced(5)
            assert cache.snapshot().numatopologies == {}
        finally:
            cache.stop()
            api.close()
    assert any("the numa-aware plugin passes no node for a pod asking a NUMA policy" in r.getMessage()
               for r in caplog.records)


def test_the_simulator_keeps_a_running_pods_cpus_until_it_finishes(pure):
    # NUMA node 0 has 4 free CPUs, node 1 none: two 4-CPU single-numa-node pods of 60 s run one after
    # the other (the node has CPU room for both; only the Numatopology keeps them apart).
    from runtime.simulation.engine import Limits, simulate
    from runtime.simulation.workload import DURATION_ANNOTATION, build_scenario

    pods = [pod_doc(f"p{i}", "4") for i in range(2)]
    for p in pods:
        p["metadata"]["annotations"][DURATION_ANNOTATION] = "60s"
    docs = [node_doc("n1", "16"), topology_doc("n1", free="0-3")] + pods
    scenario = build_scenario([("c.yaml", d) for d in docs], [])
    result = simulate(numa_policy(), scenario, Limits(until=600), Options(pure_python=pure))
    first, second = sorted(result.bind_times.values())
    assert first == 0 and second >= 60


def test_volcano_user_guide_practice(pure):
    # docs/user-guide/how_to_use_numa_aware.md, "Practice": node-1 has 12 + 12 allocatable CPUs on its
    # two NUMA nodes, node-2 20 + 20; a best-effort task of 16 CPUs (limits only) goes to node-2,
    # where one NUMA node holds it (node-1 would need both).
    def detail(per_numa: int) -> dict:
        return {"cpuDetail": {str(c): {"numa": c // per_numa, "socket": c // per_numa, "core": c // 2}
                              for c in range(2 * per_numa)}}
    pod = pod_doc("test", "16", policy="best-effort")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "16", "memory": "100Mi"}}
    docs = [node_doc("node-1", "24"), node_doc("node-2", "40"), pod,
            topology_doc("node-1", free="0-23", topo_policy="best-effort", detail=detail(12)),
            topology_doc("node-2", free="0-39", topo_policy="best-effort", detail=detail(20))]
    state = load_objects([("c.yaml", d) for d in docs])
    decisions = cycle(numa_policy(weight=10), state, pure)
    assert placements(decisions) == {"ns/test": "node-2"}
    assert len({c // 20 for c in decisions.numa["ns/test"]}) == 1
    check_cpus(state, decisions)


def test_a_simulated_snapshot_writes_the_cpus_bound_pods_hold(pure):
    # simulate --at T --snapshot-out: a Numatopology is written with the free CPUs at T, so
    # explain --snapshot of it sees what the run saw.
    from runtime.cluster.numa import format_cpu_list
    from runtime.simulation.snapshot_out import state_documents

    assert format_cpu_list(frozenset({0, 1, 2, 3, 6, 8, 9})) == "0-3,6,8-9" and format_cpu_list(frozenset()) == ""
    docs = [node_doc("n1", "16"), topology_doc("n1", free="0-7"), pod_doc("p", "4")]
    state = load_objects([("c.yaml", d) for d in docs])
    state.apply(cycle(numa_policy(), state, pure))
    written = state_documents(state, [("c.yaml", d) for d in docs], 60.0)
    [topology] = [d for d in written if d["kind"] == "Numatopology"]
    assert topology["spec"]["numares"]["cpu"]["allocatable"] == "4-7"
    again = load_objects([("again.yaml", d) for d in written])
    assert again.numatopologies["n1"].free_cpus == frozenset(range(4, 8))


# --- an invariant over random clusters, with its own checker --------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402 - the property's imports, kept with it
from hypothesis import strategies as st  # noqa: E402


@st.composite
def numa_clusters(draw) -> list:
    """Nodes with random free CPUs and policies; gangs (some too big to fit whole, so placements
    are undone) of Guaranteed pods with random policies and one or two containers."""
    docs = []
    for n in range(draw(st.integers(1, 4))):
        free = sorted(draw(st.sets(st.integers(0, 7), min_size=0, max_size=8)))
        docs.append(node_doc(f"n{n}", "16"))
        docs.append(topology_doc(f"n{n}", free=",".join(map(str, free)),
                                 topo_policy=draw(st.sampled_from(["single-numa-node", "restricted", "best-effort"]))))
    for g in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 3))
        docs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": f"g{g}", "namespace": "ns"}, "spec": {"minMember": size},
                     "status": {"phase": "Inqueue"}})
        policy = draw(st.sampled_from(["single-numa-node", "restricted", "best-effort", None]))
        cpus = [str(draw(st.integers(1, 4))) for _ in range(draw(st.integers(1, 2)))]
        docs += [pod_doc(f"g{g}-{i}", *cpus, policy=policy, group=f"g{g}") for i in range(size)]
    return docs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(numa_clusters())
def test_no_cpu_twice_and_policies_kept_on_random_clusters(docs):
    """Checked here, not by the engine: every bound pod's CPUs were free on its node and no other
    pod got them; a pod's policy is its node's; on a single-numa-node node each container's CPUs
    came from one NUMA node, on a restricted one every CPU asked was given; both kernels alike."""
    decided = []
    for pure in (False, True):
        state = load_objects([("c.yaml", d) for d in docs])
        decisions = cycle(numa_policy(), state, pure)
        check_cpus(state, decisions)
        pods = {f"ns/{d['metadata']['name']}": d for d in docs if d["kind"] == "Pod"}
        for b in decisions.bindings:
            doc = pods[b.pod]
            asked = sum(int(c["resources"]["requests"]["cpu"]) for c in doc["spec"]["containers"])
            policy = doc["metadata"]["annotations"].get(NUMA_POLICY_ANNOTATION)
            topo = state.numatopologies[b.node]
            cpus = decisions.numa.get(b.pod, frozenset())
            if policy is not None:
                assert topo.topology_manager_policy == policy, b
            if topo.topology_manager_policy == "single-numa-node":
                # Each container within one NUMA node, every CPU it asked for given.
                assert len(cpus) == asked and len(cpus) <= 4 * len(doc["spec"]["containers"]), b
                numa_nodes = {c // 4 for c in cpus}
                assert len(numa_nodes) <= len(doc["spec"]["containers"]), b
            elif topo.topology_manager_policy == "restricted":
                assert len(cpus) == asked, b
        decided.append((decisions.to_json(), decisions.numa))
    assert decided[0] == decided[1]
