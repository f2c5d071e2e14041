"""Pods read a template at a time (runtime/kube/podtemplates.py) are the pods read in full.

The property: for any sequence of pod objects whose specs repeat (the pods of a workload, each
coming again after its bind), PodTemplates.read gives a Pod equal to convert.pod_from's, or
raises the same located error; whatever came before it (a cached template never answers for a
pod whose metadata, status, labels, nodeName or priority differ in what the Pod shows).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.objects import ObjectError
from runtime.kube import convert
from runtime.kube.cache import PODS, ClusterCache
from runtime.kube.podtemplates import VARIANTS, PodTemplates

REPO = Path(__file__).resolve().parents[2]
CLASSES = {"high": 1000, "low": -5}

# --- pod objects: specs from a small palette (so they repeat), with bad values now and then ---

RESOURCES = st.sampled_from([
    {}, {"requests": {"cpu": "100m", "memory": "64Mi"}}, {"limits": {"cpu": "2", "memory": "1Gi"}},
    {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},   # Guaranteed
    {"requests": {"nvidia.com/gpu": 1}}, {"limits": {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 2048}},
])
CONTAINER = st.builds(
    lambda resources, port, image: {"name": "c", "image": image, "resources": resources,
                                    **({"ports": [port]} if port else {})},
    RESOURCES, st.sampled_from([None, {"containerPort": 80, "hostPort": 8080}]),
    st.sampled_from(["pause", "train:v1"]))
INIT = st.sampled_from([
    None, [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
    [{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}],
    [{"name": "v", "resources": {"limits": {"volcano.sh/vgpu-number": 1}}}],
])
SELECTOR = {"matchLabels": {"app": "web"}}
AFFINITY = st.sampled_from([
    None,
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": SELECTOR}]}},
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": SELECTOR, "matchLabelKeys": ["tier"]}]}},
    {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": SELECTOR,
                                           "mismatchLabelKeys": ["tier"]}}]}},
    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}]}]}}},
])
SPREAD = st.sampled_from([
    None,
    [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": SELECTOR}],
    [{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": SELECTOR,
      "matchLabelKeys": ["tier", "app"]}],
])
VOLUMES = st.sampled_from([
    None, [{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}],
    [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}, {"name": "tmp", "emptyDir": {}}],
    [{"name": "odd", "iscsi": {}, "nfs": {}}], [{"name": "odd", "nfs": {}, "iscsi": {}}],   # the first one is named
])
OPTIONAL = {
    "priorityClassName": st.sampled_from(["high", "low", "system-node-critical", "unknown"]),
    "priority": st.sampled_from([0, 7]),
    "preemptionPolicy": st.sampled_from(["Never", "PreemptLowerPriority"]),
    "schedulingGates": st.sampled_from([[{"name": "wait"}]]),
    "nodeSelector": st.sampled_from([{"pool": "a"}, {"pool": "b", "disk": "ssd"}]),
    "tolerations": st.sampled_from([[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]]),
    "resourceClaims": st.sampled_from([[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]]),
    "schedulerName": st.sampled_from(["volcano", "default-scheduler"]),
    "overhead": st.sampled_from([{"cpu": "50m"}]),
    "resources": st.sampled_from([{"requests": {"cpu": "4"}}]),
}
# One of these now and then: a spec the reader refuses, each naming its field.
SPEC_FAULTS: list[tuple[str, Any]] = [
    ("containers", []), ("containers", [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]),
    ("containers", [{"name": "c", "ports": [{"hostPort": 70000}]}]),
    ("affinity", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": SELECTOR}]}}),
    ("topologySpreadConstraints", [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
    ("volumes", [{"persistentVolumeClaim": {"claimName": "x"}}]), ("priority", "seven"),
    ("preemptionPolicy", "Sometimes"), ("schedulingGates", [{}]), ("tolerations", "none"),
    ("resourceClaims", [{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}]),
]


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(st.lists(CONTAINER, min_size=1, max_size=2))}
    for key, value in (("initContainers", draw(INIT)), ("affinity", draw(AFFINITY)),
                       ("topologySpreadConstraints", draw(SPREAD)), ("volumes", draw(VOLUMES))):
        if value is not None:
            spec[key] = value
    for key in draw(st.lists(st.sampled_from(sorted(OPTIONAL)), max_size=4, unique=True)):
        spec[key] = draw(OPTIONAL[key])
    if draw(st.integers(0, 9)) == 0:
        key, value = draw(st.sampled_from(SPEC_FAULTS))
        spec[key] = value
    return spec


TIME = st.sampled_from([None, "2026-01-02T03:04:05Z", "2026-01-02T03:04:06Z"])
# One of these now and then: a pod whose metadata or status the reader refuses (its spec may be a
# known template's: the template must not answer for it).
POD_FAULTS = ["no name", "labels", "annotations", "status", "creation", "scheduled", "claim statuses", "volume name"]


@st.composite
def pods(draw: st.DrawFn, spec: dict[str, Any], index: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"p{index}", "uid": draw(st.sampled_from([f"u{index}", None]))}
    namespace = draw(st.sampled_from(["a", "a", "b", None]))
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = draw(st.sampled_from([{"app": "web", "tier": "1"}, {"app": "web", "tier": "2"}, {"app": "web"},
                                           None]))
    meta["annotations"] = draw(st.sampled_from([{"scheduling.k8s.io/group-name": "g1"},
                                                {"scheduling.volcano.sh/group-name": "g2", "x": "y"}, None]))
    meta["creationTimestamp"] = draw(TIME)
    if draw(st.booleans()) and draw(st.booleans()):
        meta["deletionTimestamp"] = "2026-01-02T03:04:07Z"
    spec = copy.deepcopy(spec)
    node = draw(st.sampled_from([None, None, "n1", "n2"]))
    if node is not None:
        spec["nodeName"] = node
    if draw(st.booleans()):     # the service account token volume the API server adds, named at random
        token = f"kube-api-access-{draw(st.sampled_from(['a1b2c', 'x9y8z', 'q']))}"
        spec["volumes"] = [*spec.get("volumes", []), {"name": token, "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}]
        for container in spec["containers"]:
            container["volumeMounts"] = [{"name": token, "readOnly": True,
                                          "mountPath": draw(st.sampled_from(["/var/run/secrets", "/t"]))}]
    obj: dict[str, Any] = {"metadata": meta, "spec": spec}
    status = draw(st.sampled_from([None, {}, {"phase": "Running"}, {"nominatedNodeName": "n3"},
                                   {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"gpu-{index}"}]}]))
    if status is not None:
        obj["status"] = status
        when = draw(TIME)
        if when is not None:
            obj["status"] = {**status, "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": when}]}
    if draw(st.integers(0, 7)) == 0:
        fault = draw(st.sampled_from(POD_FAULTS))
        if fault == "no name":
            meta["name"] = ""
        elif fault in ("labels", "annotations"):
            meta[fault] = "bad"
        elif fault == "status":
            obj["status"] = "bad"
        elif fault == "creation":
            meta["creationTimestamp"] = "yesterday"
        elif fault == "volume name":    # the token volume (or a new one) with an empty, odd or no name
            volumes = spec.setdefault("volumes", [])
            if not volumes or "projected" not in volumes[-1]:
                volumes.append({"name": "kube-api-access-q", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}})
            bad = draw(st.sampled_from(["", 7, None]))
            if bad is None:
                del volumes[-1]["name"]
            else:
                volumes[-1]["name"] = bad
        elif fault == "scheduled":
            obj["status"] = {"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "soon"}]}
        else:
            obj["status"] = {"resourceClaimStatuses": "bad"}
    return json.loads(json.dumps(obj))       # as the API's JSON decodes: plain dicts, lists, str, numbers


def read(fn, obj: dict[str, Any], classes: dict[str, int]):
    """The pod, or the error's problems (as the connector logs them)."""
    try:
        return fn(obj, classes)
    except ObjectError as err:
        return [(p.source, p.kind, p.name, p.message) for p in err.problems]


@st.composite
def pod_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    templates = draw(st.lists(specs(), min_size=1, max_size=3))
    return [draw(pods(draw(st.sampled_from(templates)), i)) for i in range(draw(st.integers(2, 24)))]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pod_streams(), st.integers(1, 3))
def test_a_pod_read_through_its_template_is_the_pod_read_in_full(stream: list[dict[str, Any]], limit: int) -> None:
    templates = PodTemplates(limit=limit)
    classes = dict(CLASSES)
    for i, obj in enumerate(stream):
        if i == len(stream) // 2:
            classes["high"] = 2000      # a PriorityClass changed: pods read since say so
        # Each pod twice: listed (or ADDED), then MODIFIED as the watch shows it again.
        for _ in range(2):
            assert read(templates.read, obj, classes) == read(convert.pod_from, obj, classes)
        assert len(templates) <= limit


def api_pod(name: str, node: str | None = None, **spec: Any) -> dict[str, Any]:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], "schedulerName": "volcano", **spec}
    if node is not None:
        body["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {"app": "web"},
                         "creationTimestamp": "2026-01-02T03:04:05Z"}, "spec": body, "status": {"phase": "Pending"}}


def test_pods_of_one_spec_but_their_node_and_token_volume_share_one_template() -> None:
    templates = PodTemplates()
    pods = [api_pod(f"p{i}", node=f"n{i % 3}" if i % 2 else None) for i in range(10)]
    for i, obj in enumerate(pods):
        token = f"kube-api-access-{i:05d}"
        obj["spec"]["volumes"] = [{"name": token, "projected": {"sources": []}}]
        obj["spec"]["containers"][0]["volumeMounts"] = [{"name": token, "mountPath": "/var/run/secrets"}]
    for obj in pods:
        assert templates.read(obj, {}) == convert.pod_from(obj, {})
    assert (templates.misses, templates.hits, len(templates)) == (1, 9, 1)
    first, second = templates.read(pods[0], {}), templates.read(pods[2], {})
    # Each pod its own dicts: a change to one pod's requests is no other pod's.
    assert first.requests == second.requests and first.requests is not second.requests
    assert first.rules is second.rules


def test_errors_are_the_uncached_path_s_and_never_remembered() -> None:
    templates = PodTemplates()
    good = api_pod("good")
    templates.read(good, {})
    bad_time = copy.deepcopy(good)
    bad_time["metadata"]["creationTimestamp"] = "soon"      # same spec: a template hit that must still fail
    bad_spec = api_pod("bad", tolerations="none")
    for obj in (bad_time, bad_spec, bad_spec):
        with pytest.raises(ObjectError) as cached:
            templates.read(obj, {})
        with pytest.raises(ObjectError) as full:
            convert.pod_from(obj, {})
        assert str(cached.value) == str(full.value) and "ns/" in str(cached.value)
    assert len(templates) == 1                                # the bad spec left nothing behind


def test_labels_key_the_template_only_where_the_rules_read_them() -> None:
    templates = PodTemplates()
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]}]
    for i in range(VARIANTS + 5):
        obj = api_pod(f"p{i}", topologySpreadConstraints=spread)
        obj["metadata"]["labels"]["pod-template-hash"] = f"h{i % (VARIANTS + 2)}"
        assert templates.read(obj, {}) == convert.pod_from(obj, {})
    assert len(templates) == 1
    plain = PodTemplates()
    for i in range(5):
        obj = api_pod(f"q{i}")
        obj["metadata"]["labels"]["index"] = str(i)             # read by no rule: one template
        assert plain.read(obj, {}) == convert.pod_from(obj, {})
    assert plain.hits == 4


def test_the_connector_reads_pod_events_through_templates() -> None:
    cache = ClusterCache(api=None, scheduler_name="volcano")  # type: ignore[arg-type]  # never started
    with cache._lock:
        for obj in (api_pod("p0"), api_pod("p1"), api_pod("p0", node="n1")):    # ADDED, ADDED, MODIFIED
            cache._upsert(PODS, obj)
    assert cache.pod("ns/p0") == convert.pod_from(api_pod("p0", node="n1"), {})
    assert cache.pod("ns/p0").node_name == "n1" and cache.pod("ns/p1").node_name is None
    assert cache._pod_templates.hits == 2


def test_priority_follows_the_priority_classes_of_the_moment() -> None:
    templates = PodTemplates()
    classes = {"high": 1000}
    assert templates.read(api_pod("p0", priorityClassName="high"), classes).priority == 1000
    classes["high"] = 2000
    for obj in (api_pod("p1", priorityClassName="high"), api_pod("p2", priorityClassName="high", node="n1")):
        assert templates.read(obj, classes) == convert.pod_from(obj, classes)
        assert templates.read(obj, classes).priority == 2000
    assert templates.read(api_pod("p3", priorityClassName="high"), {}).priority is None
    assert templates.hits == 5


def test_the_pod_read_benchmark_runs_and_its_pods_are_identical_both_ways() -> None:
    # bench/pod_read.py exits 1 when a pod read through templates differs from one read in full;
    # as tests/test_bench_scripts.py runs the others: completion and the script's own check, no timing.
    done = subprocess.run([sys.executable, str(REPO / "bench" / "pod_read.py"), "--pods", "400", "--templates", "4",
                           "--repeat", "1", "--json"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["identical_pods"] is True and result["events"] == 400 + 200
    assert (result["template_misses"], result["templates_held"]) == (4, 4)


def test_a_volume_name_is_left_out_of_the_key_only_where_the_pod_does_not_show_it() -> None:
    templates = PodTemplates()

    def with_volume(name: str, volume: dict[str, Any]) -> dict[str, Any]:
        obj = api_pod(name)
        obj["spec"]["volumes"] = [volume]
        return obj

    token = {"name": "kube-api-access-abcde", "projected": {"sources": []}}
    templates.read(with_volume("p0", token), {})
    odd_names = [with_volume(f"p{i}", {**token, "name": bad}) for i, bad in enumerate(["", 7, ["x"]], 1)]
    no_name = with_volume("p4", {"projected": {"sources": []}})
    # A claim's volume name is shown (PodClaim.volume): another type beside `projected` keeps it.
    claims = [with_volume(f"c{i}", {"name": f"v{i}", "projected": {"sources": []},
                                    "persistentVolumeClaim": {"claimName": "data"}}) for i in range(2)]
    for obj in (*odd_names, no_name, *claims):
        assert read(templates.read, obj, {}) == read(convert.pod_from, obj, {})
    assert [c.volume for c in templates.read(claims[1], {}).volumes] == ["v1"]
