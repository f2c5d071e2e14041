"""The nodegroup plugin and a Queue's node groups (spec.affinity), on both kernels.

The table is Volcano's TestNodeGroup (pkg/scheduler/plugins/nodegroup/nodegroup_test.go, v1.14.1):
five nodes, n1..n4 in group1..group4 and n5 in none, and for one pod of the queue under test the
filter's verdict and the score on each node. Then cycles: pods land only where their queue's
groups allow, and a Queue's affinity without the plugin holds its jobs, saying so."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.cluster.objects import ObjectError, load_objects
from runtime.engine.cycle import open_session
from runtime.engine.session import Options
from runtime_helpers import cycle, placements, policy

NODES = {"n1": "group1", "n2": "group2", "n3": "group3", "n4": "group4", "n5": None}
FULL = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group1", "group3"],
                              "preferredDuringSchedulingIgnoredDuringExecution": ["group3"]},
        "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group2", "group4"],
                                  "preferredDuringSchedulingIgnoredDuringExecution": ["group4"]}}
NARROW = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group1"],
                                "preferredDuringSchedulingIgnoredDuringExecution": ["group3"]},
          "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group2"],
                                    "preferredDuringSchedulingIgnoredDuringExecution": ["group4"]}}


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def queue_object(name: str, affinity: dict | None = None, parent: str | None = None, **spec) -> dict:
    body = {"weight": 1, **spec}
    if affinity is not None:
        body["affinity"] = affinity
    if parent is not None:
        body["parent"] = parent
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": body}


def cluster(queues: list[dict], queue: str, cpu: str = "2", pods: int = 1, nodes: dict | None = None) -> list:
    objects = [{"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n, "labels": {"volcano.sh/nodegroup-name": g} if g else {}},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}
               for n, g in (nodes or NODES).items()]
    objects.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "pg", "namespace": "c1"}, "spec": {"minMember": pods, "queue": queue},
                    "status": {"phase": "Inqueue"}})
    objects += [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"p{i}", "namespace": "c1", "annotations": {"scheduling.k8s.io/group-name": "pg"}},
                 "spec": {"schedulerName": "volcano",
                          "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "4Gi"}}}]}}
                for i in range(pods)]
    return [("test.yaml", o) for o in (*queues, *objects)]


def plugin_policy(args: str = "", hierarchy: bool = False):
    flags = " enable_hierarchy = true " if hierarchy else ""
    body = f"{{ {flags}{args} }}" if flags or args else ""
    return policy(f"tier {{\n  plugin gang\n}}\ntier {{\n  plugin predicates\n  plugin proportion\n"
                  f"  plugin nodegroup {body}\n}}\n", actions="allocate")


def verdicts(plan, documents, pure) -> tuple[dict[str, bool], dict[str, float]]:
    ssn = open_session(plan, load_objects(documents), Options(pure_python=pure))
    cls = ssn.snap.classes[int(ssn.snap.task_class[0])]
    mask, _ = ssn.class_mask(cls)
    score = ssn.class_static_score(cls)
    names = ssn.snap.node_names
    return ({n: bool(mask[i]) for i, n in enumerate(names)}, {n: float(score[i]) for i, n in enumerate(names)})


OK, NO = True, False
# (Go case name, queues, queue of the pod, arguments, hierarchy, expected filter, expected score)
CASES = [
    ("soft constraints is subset of hard constraints", [queue_object("q1", FULL)], "q1", "", False,
     {"n1": OK, "n2": NO, "n3": OK, "n4": OK, "n5": NO}, {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0}),
    ("soft constraints is not subset of hard constraints", [queue_object("q2", NARROW)], "q2", "", False,
     {"n1": OK, "n2": NO, "n3": OK, "n4": OK, "n5": NO}, {"n1": 100, "n2": 0, "n3": 50, "n4": -1, "n5": 0}),
    ("affinity is not set for the queue, pods still cannot be scheduled to nodes with the nodegroup label "
     "when strict=false", [queue_object("root-no-affinity")], "root-no-affinity", "strict = false", False,
     {"n1": NO, "n2": NO, "n3": NO, "n4": NO, "n5": OK}, {n: 0 for n in NODES}),
    ("affinity inherits from parent queue",
     [queue_object("root", FULL), queue_object("q1", FULL, "root"), queue_object("q1-child", None, "q1")],
     "q1-child", "", True,
     {"n1": OK, "n2": NO, "n3": OK, "n4": OK, "n5": NO}, {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0}),
    ("affinity inherits from ancestor queue if parent queue has no affinity",
     [queue_object("root", FULL), queue_object("q-no-affinity", None, "root"),
      queue_object("q-no-affinity-child", None, "q-no-affinity")],
     "q-no-affinity-child", "", True,
     {"n1": OK, "n2": NO, "n3": OK, "n4": OK, "n5": NO}, {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0}),
    ("queue without affinity", [queue_object("q-no-affinity", None)], "q-no-affinity", "", False,
     {n: NO for n in NODES}, {n: 0 for n in NODES}),
]


@pytest.mark.parametrize("name, queues, queue, args, hierarchy, filtered, scored", CASES, ids=[c[0] for c in CASES])
def test_volcano_nodegroup_table(name, queues, queue, args, hierarchy, filtered, scored, pure):
    passes, scores = verdicts(plugin_policy(args, hierarchy), cluster(queues, queue), pure)
    assert passes == filtered
    assert scores == pytest.approx(scored)


def test_without_hierarchy_a_child_queue_does_not_inherit(pure):
    queues = [queue_object("q1", FULL), queue_object("q1-child", None, "q1")]
    passes, _ = verdicts(plugin_policy(), cluster(queues, "q1-child"), pure)
    assert not any(passes.values())


def test_pods_land_only_in_their_groups_and_prefer_the_preferred(pure):
    # Four pods of 2 CPU: n3 (preferred, 150) takes two, then n1 (100); n4 (avoided) only after
    # them, n2 (excluded) and n5 (no group) never.
    queues = [queue_object("q1", FULL)]
    state = load_objects(cluster(queues, "q1", pods=7))
    decisions = cycle(plugin_policy(), state, pure)
    placed = placements(decisions)
    assert sorted(placed.values()) == ["n1", "n1", "n3", "n3", "n4", "n4"] or not placed
    # minMember 7 does not fit in 6 slots: the gang waits whole.
    state = load_objects(cluster(queues, "q1", pods=6))
    placed = placements(cycle(plugin_policy(), state, pure))
    assert sorted(placed.values()) == ["n1", "n1", "n3", "n3", "n4", "n4"]
    assert not {"n2", "n5"} & set(placed.values())


def test_the_policy_queue_names_node_groups(pure):
    plan = policy('tier {\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n'
                  '  plugin nodegroup { strict = false }\n}\n'
                  'queue q1 {\n  node_groups = ["group1"]\n  avoided_node_groups = ["group4"]\n}\n',
                  actions="allocate")
    passes, scores = verdicts(plan, cluster([], "q1"), pure)
    assert passes == {"n1": OK, "n2": NO, "n3": NO, "n4": OK, "n5": NO}
    assert scores["n1"] == 100 and scores["n4"] == -1


def test_two_queues_with_the_same_pod_template_get_their_own_answers(pure):
    # The same request and constraints in two queues: classes must not mix their answers.
    documents = [("a.yaml", o) for o in (
        queue_object("qa", {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group1"]}}),
        queue_object("qb", {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group2"]}}))]
    state = load_objects(documents + cluster([], "qa")[:-2] + [
        ("b.yaml", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": f"pg-{q}", "namespace": "c1"}, "spec": {"minMember": 1, "queue": q},
                    "status": {"phase": "Inqueue"}}) for q in ("qa", "qb")] + [
        ("c.yaml", {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"pod-{q}", "namespace": "c1",
                                 "annotations": {"scheduling.k8s.io/group-name": f"pg-{q}"}},
                    "spec": {"schedulerName": "volcano",
                             "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})
        for q in ("qa", "qb")])
    placed = placements(cycle(plugin_policy(), state, pure))
    assert placed == {"c1/pod-qa": "n1", "c1/pod-qb": "n2"}


def test_a_queue_affinity_without_the_plugin_holds_its_jobs(pure):
    plan = policy("tier {\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n}\n", actions="allocate")
    state = load_objects(cluster([queue_object("q1", FULL)], "q1"))
    decisions = cycle(plan, state, pure)
    assert placements(decisions) == {}
    assert any("spec.affinity" in r.message and "nodegroup" in r.message for r in decisions.reasons_for("c1/p0"))


@pytest.mark.parametrize("affinity, message", [
    ({"nodeGroupAffinty": {}}, "spec.affinity.nodeGroupAffinty"),
    ({"nodeGroupAffinity": {"required": ["a"]}}, "spec.affinity.nodeGroupAffinity.required"),
    ({"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "a"}}, "must be a list"),
])
def test_a_malformed_affinity_is_a_located_error(affinity, message):
    with pytest.raises(ObjectError) as err:
        load_objects([("queues.yaml", queue_object("q1", affinity))])
    assert "Queue q1" in str(err.value) and message in str(err.value)


def test_node_scores_are_zero_where_the_plugin_weight_is_zero(pure):
    _, scores = verdicts(policy("tier {\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n"
                                "  plugin nodegroup weight 0\n}\n", actions="allocate"),
                         cluster([queue_object("q1", FULL)], "q1"), pure)
    assert not np.any(list(scores.values()))
