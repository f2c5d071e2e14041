"""The storage a pod claims, table by table, on objects read from their YAML (the loader is
exercised too), both kernels. Expected outcomes and messages are kube-scheduler's volume
plugins' (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone)."""

from __future__ import annotations

import pytest

from runtime.engine.cycle import Options, run_cycle
from runtime.cluster.model import ClusterState
from runtime.cluster.objects import ObjectError, load_objects
from runtime_helpers import STANDARD_TIERS, policy
from storage_docs import (
    LOCAL, ZONE, claim_pod, csinode_doc, node_doc, podgroup_doc, pv_doc, pvc_doc, storage_class,
)

PLAN = policy(STANDARD_TIERS)
NO_ZONE = policy(STANDARD_TIERS.replace("plugin predicates", "plugin predicates {\n volume_zone = false\n }"))
NO_LIMITS = policy(STANDARD_TIERS.replace("plugin predicates", "plugin predicates {\n node_volume_limits = false\n }"))
DRIVER = "ebs.csi.aws.com"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def load(docs) -> ClusterState:
    return load_objects(("test", d) for d in docs)


def run(docs_or_state, pure: bool, plan=PLAN):
    state = docs_or_state if isinstance(docs_or_state, ClusterState) else load(docs_or_state)
    return run_cycle(plan, state, Options(pure_python=pure))


def bound(decisions) -> dict[str, str]:
    return {b.pod.split("/")[1]: b.node for b in decisions.bindings}


def chosen(decisions) -> dict[str, dict[str, str | None]]:
    return {pod.split("/")[1]: {c.claim.split("/")[1]: c.volume for c in choices}
            for pod, choices in decisions.volumes.items()}


def reasons(decisions, pod: str) -> list[str]:
    return [r.message for r in decisions.reasons_for(f"ns/{pod}")]


NODES3 = [node_doc("n1"), node_doc("n2"), node_doc("n3")]


# --- the loader ------------------------------------------------------------------------------

def test_storage_objects_are_read_from_a_list_with_the_default_class():
    docs = [{"apiVersion": "v1", "kind": "List", "items": [
        storage_class("fast", provisioner="csi.example.com", default=True), storage_class(LOCAL),
        pv_doc("pv1", "n1"), pvc_doc("plain", cls=None), pvc_doc("none", cls=""), csinode_doc("n1", {DRIVER: 3})]}]
    state = load(docs)
    st = state.storage
    assert st.claims["ns/plain"].storage_class == "fast"          # DefaultStorageClass admission, as for a file
    assert st.claims["ns/none"].storage_class is None              # "" asks for no class
    assert st.volumes["pv1"].phase == "Available" and st.volumes["pv1"].capacity == 10 * 2**30
    assert st.classes["fast"].provisions and not st.classes[LOCAL].provisions
    assert st.csinodes["n1"].limits == {DRIVER: 3}


@pytest.mark.parametrize("doc, message", [
    ({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {"accessModes": []}},
     "test: PersistentVolume pv: missing `spec.capacity.storage`"),
    (pv_doc("pv", modes=["ReadWriteSometimes"]),
     "test: PersistentVolume pv: `spec.accessModes[0]` must be one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany, "
     "ReadWriteOncePod, found `ReadWriteSometimes`"),
    (pv_doc("pv", affinity=[]), "test: PersistentVolume pv: `spec.nodeAffinity.required.nodeSelectorTerms` must not "
                                "be empty"),
    ({**pvc_doc("c"), "spec": {"volumeMode": "Blob"}},
     "test: PersistentVolumeClaim ns/c: `spec.volumeMode` must be Filesystem or Block, found `Blob`"),
    (pvc_doc("c", size="lots"),
     "test: PersistentVolumeClaim ns/c: `spec.resources.requests.storage`: `lots` is not a quantity (examples: 500m, 2, "
     "8Gi)"),
    (storage_class("s", mode="Later"),
     "test: StorageClass s: `volumeBindingMode` must be Immediate or WaitForFirstConsumer, found `Later`"),
    ({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}},
     "test: StorageClass s: missing `provisioner`"),
    (csinode_doc("n1", {DRIVER: -1}), "test: CSINode n1: `spec.drivers[0].allocatable.count` must not be negative"),
    (claim_pod("p", extra_volumes=[{"name": "d", "persistentVolumeClaim": {}}]),
     "test: Pod ns/p: `spec.volumes[0].persistentVolumeClaim.claimName` is missing"),
])
def test_bad_storage_objects_are_named(doc, message):
    with pytest.raises(ObjectError) as err:
        load([doc])
    assert [str(p) for p in err.value.problems] == [message]


# --- claims that must exist ----------------------------------------------------------------------

@pytest.mark.parametrize("case, docs, message", [
    ("missing", [], 'persistentvolumeclaim "data" not found'),
    ("being deleted", [pvc_doc("data", deleting=True)], 'persistentvolumeclaim "data" is being deleted'),
    ("lost", [pvc_doc("data", volume="gone", phase="Lost")],
     'persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"'),
    ("immediate class, unbound", [storage_class("slow", mode="Immediate", provisioner="csi.x"), pvc_doc("data", cls="slow")],
     "pod has unbound immediate PersistentVolumeClaims"),
    ("no class, unbound", [pvc_doc("data", cls=None)], "pod has unbound immediate PersistentVolumeClaims"),
    ("class that does not exist", [pvc_doc("data", cls="nowhere")], "pod has unbound immediate PersistentVolumeClaims"),
    ("pre-bound to a volume, not bound yet", [storage_class(LOCAL), pv_doc("pv1", "n1"),
                                              {**pvc_doc("data"), "spec": {**pvc_doc("data")["spec"], "volumeName": "pv1"}}],
     "pod has unbound immediate PersistentVolumeClaims"),
])
def test_claims_that_keep_a_pod_from_every_node(pure, case, docs, message):
    decisions = run([*NODES3, *docs, claim_pod("p", ["data"])], pure)
    assert bound(decisions) == {}, case
    assert reasons(decisions, "p") == [f"0/3 nodes are available: {message}."], case
    assert decisions.reasons_for("ns/p")[0].kind == "volume"


def test_ephemeral_volume_claims_must_exist_and_be_the_pods(pure):
    pod = claim_pod("p", ephemeral=["scratch"])
    decisions = run([*NODES3, pod], pure)
    assert reasons(decisions, "p") == ['0/3 nodes are available: waiting for ephemeral volume controller to create '
                                       'the persistentvolumeclaim "p-scratch".']
    storage = [storage_class(LOCAL), pv_doc("pv1", "n2", size="1Gi")]
    decisions = run([*NODES3, *storage, pvc_doc("p-scratch", size="1Gi", owner="other"), pod], pure)
    assert reasons(decisions, "p") == ["0/3 nodes are available: PVC ns/p-scratch was not created for pod ns/p "
                                       "(pod is not owner)."]
    decisions = run([*NODES3, *storage, pvc_doc("p-scratch", size="1Gi", owner="p"), pod], pure)
    assert bound(decisions) == {"p": "n2"} and chosen(decisions) == {"p": {"p-scratch": "pv1"}}


def test_a_pod_waits_for_its_claim_then_is_placed_once_it_exists(pure):
    state = load([*NODES3, storage_class(LOCAL), pv_doc("pv1", "n3"), claim_pod("p", ["data"])])
    assert bound(run(state, pure)) == {}
    load_objects([("test", pvc_doc("data"))], state=state)
    assert bound(run(state, pure)) == {"p": "n3"}


# --- bound claims -----------------------------------------------------------------------------------

def test_a_bound_local_volume_pins_its_pod(pure):
    docs = [storage_class(LOCAL), pv_doc("pv2", "n2", claim="data"), pvc_doc("data", volume="pv2")]
    assert bound(run([*NODES3, *docs, claim_pod("p", ["data"])], pure)) == {"p": "n2"}
    # n2 full: the other nodes are the volume's conflict, n2 is short of cpu.
    decisions = run([*NODES3, *docs, claim_pod("hog", cpu="4", node="n2"), claim_pod("p", ["data"])], pure)
    assert reasons(decisions, "p") == [f"0/3 nodes are available: 1 Insufficient cpu, 2 {NODE_CONFLICT}."]
    assert decisions.volumes == {}


def test_a_claim_bound_to_a_volume_that_does_not_exist(pure):
    decisions = run([*NODES3, pvc_doc("data", volume="gone"), claim_pod("p", ["data"])], pure)
    assert reasons(decisions, "p") == ["0/3 nodes are available: 3 node(s) unavailable due to one or more pvc(s) "
                                       "bound to non-existent pv(s)."]


@pytest.mark.parametrize("case, nodes, pv_labels, plan, allowed", [
    ("zone label", {"a": {ZONE: "z1"}, "b": {ZONE: "z2"}}, {ZONE: "z2"}, PLAN, {"b"}),
    ("several zones", {"a": {ZONE: "z1"}, "b": {ZONE: "z2"}, "c": {ZONE: "z3"}}, {ZONE: "z1__z3"}, PLAN, {"a", "c"}),
    ("beta label on the volume, GA on the node", {"a": {ZONE: "z1"}, "b": {ZONE: "z2"}},
     {"failure-domain.beta.kubernetes.io/zone": "z2"}, PLAN, {"b"}),
    ("a node without zone labels passes", {"a": {ZONE: "z1"}, "b": {}}, {ZONE: "z2"}, PLAN, {"b"}),
    ("volume_zone = false", {"a": {ZONE: "z1"}}, {ZONE: "z2"}, NO_ZONE, {"a"}),
])
def test_volume_zone(pure, case, nodes, pv_labels, plan, allowed):
    docs = [node_doc(n, labels=labels) for n, labels in nodes.items()]
    docs += [pv_doc("pv", cls="", claim="data", labels=pv_labels, driver=DRIVER), pvc_doc("data", cls="", volume="pv")]
    decisions = run([*docs, claim_pod("p", ["data"])], pure, plan)
    assert bound(decisions).get("p") in allowed, case
    wrong = len(nodes) - len(allowed)
    if len(allowed) == 1 and wrong and plan is PLAN:
        decisions = run([*docs, claim_pod("hog", cpu="4", node=next(iter(allowed))), claim_pod("p", ["data"])], pure)
        assert f"{wrong} node(s) had no available volume zone" in reasons(decisions, "p")[0]


def test_read_write_once_pod_claims_take_one_pod(pure):
    docs = [*NODES3, pv_doc("pv", cls="", claim="data", driver=DRIVER),
            pvc_doc("data", cls="", volume="pv", modes=["ReadWriteOncePod"])]
    decisions = run([*docs, claim_pod("a", ["data"]), claim_pod("b", ["data"])], pure)
    assert len(bound(decisions)) == 1
    waiting = ({"a", "b"} - set(bound(decisions))).pop()
    assert reasons(decisions, waiting) == ["0/3 nodes are available: 3 node has pod using PersistentVolumeClaim with "
                                           "the same name and ReadWriteOncePod access mode."]
    decisions = run([*docs, claim_pod("running", ["data"], node="n1"), claim_pod("b", ["data"])], pure)
    assert bound(decisions) == {}
    # A read-write-once claim is the node's to enforce (kube-scheduler lets both pods through).
    docs[-1] = pvc_doc("data", cls="", volume="pv", modes=["ReadWriteOnce"])
    assert len(bound(run([*docs, claim_pod("a", ["data"]), claim_pod("b", ["data"])], pure))) == 2


def test_a_leaving_user_of_a_read_write_once_pod_claim_pipelines_the_next(pure):
    docs = [*NODES3, pv_doc("pv", cls="", claim="data", driver=DRIVER),
            pvc_doc("data", cls="", volume="pv", modes=["ReadWriteOncePod"])]
    state = load([*docs, claim_pod("old", ["data"], node="n1"), claim_pod("new", ["data"])])
    state.pods["ns/old"].releasing = True
    decisions = run(state, pure)
    assert bound(decisions) == {} and "ns/new" in decisions.pipelined


def _csi_claims(n: int, prefix: str = "c") -> list[dict]:
    out = []
    for i in range(n):
        out += [pv_doc(f"{prefix}{i}-pv", cls="", claim=f"{prefix}{i}", driver=DRIVER),
                pvc_doc(f"{prefix}{i}", cls="", volume=f"{prefix}{i}-pv")]
    return out


@pytest.mark.parametrize("case, limit_docs, running, expect_bound", [
    ("CSINode count", [csinode_doc("n1", {DRIVER: 2})], 2, False),
    ("room for one more", [csinode_doc("n1", {DRIVER: 3})], 2, True),
    ("node's allocatable", [], 2, False),
    ("another driver's limit", [csinode_doc("n1", {"other.csi": 1})], 2, True),
])
def test_attach_limits(pure, case, limit_docs, running, expect_bound):
    allocatable = {f"attachable-volumes-csi-{DRIVER}": 2} if case == "node's allocatable" else None
    docs = [node_doc("n1", allocatable=allocatable), *limit_docs, *_csi_claims(running + 1)]
    docs += [claim_pod(f"r{i}", [f"c{i}"], node="n1") for i in range(running)]
    decisions = run([*docs, claim_pod("p", [f"c{running}"])], pure)
    assert (bound(decisions) == {"p": "n1"}) == expect_bound, case
    if not expect_bound:
        assert reasons(decisions, "p") == ["0/1 nodes are available: 1 node(s) exceed max volume count."]
        assert bound(run([*docs, claim_pod("p", [f"c{running}"])], pure, NO_LIMITS)) == {"p": "n1"}


def test_attach_limits_count_a_shared_volume_once_and_this_cycles_placements(pure):
    docs = [node_doc("n1"), node_doc("n2"), csinode_doc("n1", {DRIVER: 1}), csinode_doc("n2", {DRIVER: 1}),
            *_csi_claims(3)]
    shared = pvc_doc("c0", cls="", volume="c0-pv", modes=["ReadWriteMany"])
    docs = [shared if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == "c0" else d for d in docs]
    decisions = run([*docs, claim_pod("a", ["c0"], node="n1"), claim_pod("b", ["c0"])], pure)
    assert bound(decisions)["b"] in ("n1", "n2")            # the volume is attached on n1 already
    decisions = run([*docs, claim_pod("x", ["c1"]), claim_pod("y", ["c2"]), claim_pod("z", ["c0"])], pure)
    placed = bound(decisions)
    assert len(placed) == 2 and len(set(placed.values())) == 2


@pytest.mark.parametrize("existing", [0, 1, 2])
def test_claims_alike_still_to_be_provisioned_each_count_toward_the_attach_limit(pure, existing):
    # Delayed claims of one shape share a task class; each is still its own volume on the node,
    # whether it takes an existing PV or a provisioned one.
    docs = [node_doc("n1", labels={ZONE: "z1"}), csinode_doc("n1", {DRIVER: 1}),
            storage_class("zonal", provisioner=DRIVER, topologies=[(ZONE, ["z1"])]),
            *[pv_doc(f"pv{i}", cls="zonal", driver=DRIVER, size="1Gi", labels={ZONE: "z1"},
                     affinity=[{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]}])
              for i in range(existing)],
            pvc_doc("c0", cls="zonal", size="1Gi"), pvc_doc("c1", cls="zonal", size="1Gi")]
    decisions = run([*docs, claim_pod("a", ["c0"]), claim_pod("b", ["c1"])], pure)
    assert len(bound(decisions)) == 1
    waiting = ({"a", "b"} - set(bound(decisions))).pop()
    assert reasons(decisions, waiting) == ["0/1 nodes are available: 1 node(s) exceed max volume count."]


# --- delayed binding (WaitForFirstConsumer) ---------------------------------------------------------

def test_the_smallest_volume_that_fits_is_chosen(pure):
    docs = [*NODES3, storage_class(LOCAL), pv_doc("big", "n1", size="20Gi"), pv_doc("small", "n1", size="5Gi"),
            pv_doc("tiny", "n2", size="1Gi"), pv_doc("mid", "n3", size="10Gi"), pvc_doc("data", size="4Gi")]
    decisions = run([*docs, claim_pod("p", ["data"])], pure)
    assert chosen(decisions) == {"p": {"data": "small"}} and bound(decisions) == {"p": "n1"}


@pytest.mark.parametrize("case, pv_kw, claim_kw", [
    ("access modes", {"modes": ["ReadWriteOnce"]}, {"modes": ["ReadWriteMany"]}),
    ("too small", {"size": "1Gi"}, {"size": "2Gi"}),
    ("volume mode", {"volume_mode": "Block"}, {}),
    ("selector", {"labels": {"tier": "slow"}}, {"selector": {"matchLabels": {"tier": "fast"}}}),
    ("another class", {"cls": "other"}, {}),
    ("claimed by another claim", {"claim": "someone"}, {}),
    ("not Available", {"phase": "Released"}, {}),
])
def test_volumes_that_do_not_fit_the_claim_are_not_taken(pure, case, pv_kw, claim_kw):
    docs = [*NODES3, storage_class(LOCAL), pv_doc("pv", "n1", **pv_kw), pvc_doc("data", **claim_kw)]
    decisions = run([*docs, claim_pod("p", ["data"])], pure)
    assert bound(decisions) == {}, case
    assert reasons(decisions, "p") == [f"0/3 nodes are available: 3 {BIND_CONFLICT}."], case


def test_no_volume_goes_to_two_claims(pure):
    docs = [*NODES3, storage_class(LOCAL), pv_doc("pv1", "n1"), pv_doc("pv2", "n1"),
            *[pvc_doc(f"d{i}") for i in range(3)], *[claim_pod(f"p{i}", [f"d{i}"]) for i in range(3)]]
    decisions = run(docs, pure)
    assert len(bound(decisions)) == 2 and set(bound(decisions).values()) == {"n1"}
    volumes = [v for claims in chosen(decisions).values() for v in claims.values()]
    assert sorted(volumes) == ["pv1", "pv2"]
    waiting = ({"p0", "p1", "p2"} - set(bound(decisions))).pop()
    assert reasons(decisions, waiting) == [f"0/3 nodes are available: 3 {BIND_CONFLICT}."]


def test_a_gang_takes_volumes_for_all_its_members_or_none(pure):
    group = podgroup_doc("g", 4)
    members = [claim_pod(f"g-{i}", [f"data-{i}"], group="g") for i in range(4)]
    claims = [pvc_doc(f"data-{i}") for i in range(4)]
    nodes = [node_doc(f"n{i}") for i in range(4)]
    short = [pv_doc(f"pv{i}", f"n{i}") for i in range(3)]
    decisions = run([*nodes, storage_class(LOCAL), *short, *claims, group, *members], pure)
    assert bound(decisions) == {} and decisions.volumes == {}
    full = [pv_doc(f"pv{i}", f"n{i}") for i in range(4)]
    decisions = run([*nodes, storage_class(LOCAL), *full, *claims, group, *members], pure)
    placed = bound(decisions)
    assert len(placed) == 4 and len(set(placed.values())) == 4
    for pod, claims_of in chosen(decisions).items():
        (volume,) = claims_of.values()
        assert volume == f"pv{placed[pod][1:]}"              # each member the volume on its own node


def test_dynamic_provisioning_where_the_class_allows(pure):
    nodes = [node_doc("a", labels={ZONE: "z1"}), node_doc("b", labels={ZONE: "z2"})]
    fast = storage_class("fast", provisioner="csi.example.com", topologies=[(ZONE, ["z2"])])
    decisions = run([*nodes, fast, pvc_doc("data", cls="fast"), claim_pod("p", ["data"])], pure)
    assert bound(decisions) == {"p": "b"} and chosen(decisions) == {"p": {"data": None}}


@pytest.mark.parametrize("limit", [None, 1])
def test_a_gang_of_pods_with_claims_only_provisioned(pure, limit):
    # Claims no PV could take, each the pod's own: placing one changes nothing the others' node
    # check reads, and the gang is placed in one call (VolumeRule.unchanged_by_own) — binpack
    # puts all three on one node, each with a volume of its own. With an attach limit of one
    # volume per node the same gang is placed pod by pod, one to a node.
    nodes = [node_doc(n, labels={ZONE: "z1"}) for n in ("n1", "n2", "n3")]
    limits = [csinode_doc(n, {DRIVER: limit}) for n in ("n1", "n2", "n3")] if limit else []
    docs = [*nodes, *limits, storage_class("zonal", provisioner=DRIVER, topologies=[(ZONE, ["z1"])]),
            podgroup_doc("g", 3), *[pvc_doc(f"c{i}", cls="zonal") for i in range(3)],
            *[claim_pod(f"p{i}", [f"c{i}"], group="g") for i in range(3)]]
    decisions = run(docs, pure)
    placed = bound(decisions)
    assert len(placed) == 3 and chosen(decisions) == {f"p{i}": {f"c{i}": None} for i in range(3)}
    assert len(set(placed.values())) == (1 if limit is None else 3)


def test_a_static_volume_is_taken_before_provisioning(pure):
    # On the node a pod goes to (chosen by the other scores: kube's volume binder has no score
    # without storage capacity scoring), a free static volume comes before a new one.
    fast = storage_class("fast", provisioner="csi.example.com")
    docs = [*NODES3, fast, pv_doc("pv", cls="fast", driver="csi.example.com"), pvc_doc("a", cls="fast"),
            pvc_doc("b", cls="fast")]
    decisions = run([*docs, claim_pod("pa", ["a"]), claim_pod("pb", ["b"])], pure)
    assert sorted(v for c in chosen(decisions).values() for v in c.values() if v) == ["pv"]
    assert len(bound(decisions)) == 2


def test_a_selected_node_or_a_prebound_volume_decides_the_node(pure):
    fast = storage_class("fast", provisioner="csi.example.com")
    selected = pvc_doc("data", cls="fast", annotations={"volume.kubernetes.io/selected-node": "n2"})
    decisions = run([*NODES3, fast, selected, claim_pod("p", ["data"])], pure)
    assert bound(decisions) == {"p": "n2"} and chosen(decisions) == {"p": {"data": None}}
    prebound = [storage_class(LOCAL), pv_doc("pv1", "n1"), pv_doc("mine", "n3", claim="data"), pvc_doc("data")]
    decisions = run([*NODES3, *prebound, claim_pod("p", ["data"])], pure)
    assert bound(decisions) == {"p": "n3"} and chosen(decisions) == {"p": {"data": "mine"}}


def test_pods_sharing_a_delayed_claim_follow_the_first(pure):
    docs = [*NODES3, storage_class(LOCAL), pv_doc("pv2", "n2", modes=["ReadWriteMany"]),
            pvc_doc("shared", modes=["ReadWriteMany"]), claim_pod("a", ["shared"]), claim_pod("b", ["shared"])]
    decisions = run(docs, pure)
    assert bound(decisions) == {"a": "n2", "b": "n2"}
    assert chosen(decisions) == {"a": {"shared": "pv2"}, "b": {"shared": "pv2"}}


def test_claims_are_matched_smallest_first_as_kubes_volume_binder(pure):
    # n1's one 10Gi volume would go to the 5Gi claim, leaving the 10Gi claim nothing: only n2 fits.
    docs = [*NODES3, storage_class(LOCAL), pv_doc("n1-10", "n1", size="10Gi"), pv_doc("n1-20", "n1", size="20Gi"),
            pv_doc("n2-5", "n2", size="5Gi"), pv_doc("n2-10", "n2", size="10Gi"),
            pvc_doc("small", size="5Gi"), pvc_doc("large", size="15Gi")]
    decisions = run([*docs, claim_pod("p", ["large", "small"])], pure)
    assert bound(decisions) == {"p": "n1"}
    assert chosen(decisions) == {"p": {"small": "n1-10", "large": "n1-20"}}
    docs[-1] = pvc_doc("large", size="10Gi")
    docs = [d for d in docs if d["metadata"]["name"] != "n1-20"]
    decisions = run([*docs, claim_pod("p", ["large", "small"])], pure)
    assert bound(decisions) == {"p": "n2"} and chosen(decisions) == {"p": {"small": "n2-5", "large": "n2-10"}}


def test_the_simulator_binds_the_claims_it_chose(pure):
    fast = storage_class("fast", provisioner="csi.example.com", topologies=[(ZONE, ["z1"])])
    nodes = [node_doc("a", labels={ZONE: "z1"}), node_doc("b", labels={ZONE: "z1"})]
    state = load([*nodes, fast, storage_class(LOCAL), pv_doc("pv", "b"), pvc_doc("local"), pvc_doc("dyn", cls="fast"),
                  claim_pod("p", ["local", "dyn"])])
    decisions = run(state, pure)
    state.apply(decisions)
    claims = state.storage.claims
    assert claims["ns/local"].volume_name == "pv" and claims["ns/local"].fully_bound
    assert state.storage.volumes["pv"].claim_ref.name == "local"
    made = state.storage.volumes[claims["ns/dyn"].volume_name]
    assert made.storage_class == "fast" and made.csi_driver == "csi.example.com"
    assert state.pods["ns/p"].node_name == "b"
    # The provisioned volume follows its class's topology key: a zone, not the node.
    assert [e.key for term in made.node_affinity for e in term] == [ZONE]


def test_a_claim_that_names_no_class_takes_the_default_one(pure):
    docs = [*NODES3, storage_class(LOCAL, default=True), pv_doc("pv", "n2"), pvc_doc("data", cls=None)]
    assert bound(run([*docs, claim_pod("p", ["data"])], pure)) == {"p": "n2"}


# --- what the scheduler does not evaluate ------------------------------------------------------------

@pytest.mark.parametrize("spec, field", [
    ({"volumes": [{"name": "disk", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0}}]}, "spec.volumes[0].iscsi"),
    ({"volumes": [{"name": "cfg", "configMap": {"name": "c"}},
                  {"name": "disk", "awsElasticBlockStore": {"volumeID": "v"}}]}, "spec.volumes[1].awsElasticBlockStore"),
])
def test_volume_types_not_evaluated_keep_the_pod_waiting(pure, spec, field):
    decisions = run([*NODES3, claim_pod("p", **spec)], pure)
    assert bound(decisions) == {}
    (reason,) = decisions.reasons_for("ns/p")
    assert reason.kind == "unsupported" and reason.details["field"] == field
    assert reason.message == f"pod sets {field}, which this scheduler does not evaluate: it is not placed without it"


def test_plain_volume_types_ask_nothing_of_the_scheduler(pure):
    volumes = [{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "c"}},
               {"name": "c", "projected": {"sources": []}}, {"name": "d", "hostPath": {"path": "/x"}},
               {"name": "e", "nfs": {"server": "s", "path": "/"}}, {"name": "f", "csi": {"driver": "d"}}]
    assert bound(run([node_doc("n1"), claim_pod("p", extra_volumes=volumes)], pure)) == {"p": "n1"}


def test_compiled_and_python_kernels_choose_alike():
    docs = [*[node_doc(f"n{i}", labels={ZONE: f"z{i % 2}"}) for i in range(4)], storage_class(LOCAL),
            storage_class("fast", provisioner="csi.example.com", topologies=[(ZONE, ["z1"])]),
            *[pv_doc(f"pv{i}", f"n{i % 4}", size=f"{5 + i}Gi") for i in range(6)],
            *[pvc_doc(f"d{i}", cls=LOCAL if i % 3 else "fast", size=f"{4 + i}Gi") for i in range(8)],
            *[claim_pod(f"p{i}", [f"d{i}"]) for i in range(8)]]
    assert run(docs, False).to_dict() == run(docs, True).to_dict()
