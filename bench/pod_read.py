"""What reading a pod from the API server costs the connector: each pod object as a list or a
watch event brings it, turned into the cluster model's Pod, in full (runtime.kube.convert.pod_from)
and through the connector's spec templates (runtime.kube.podtemplates.PodTemplates).

    python bench/pod_read.py [--pods 100000] [--templates 10] [--gang 8] [--repeat 3] [--json]

The pods: `--pods` objects as the API server answers them (defaults filled in: tolerations of the
DefaultTolerationSeconds admission, the service account token volume of the ServiceAccount admission,
named at random per pod, termination and pull fields, status), in gangs of `--gang`
(one PodGroup annotation each), their specs from `--templates` workloads (every third with
hostname anti-affinity and zone spread, every fifth with a sidecar and a GPU). Read as a restart
lists them (pending and bound), then as the watch brings each pending one again once bound
(MODIFIED with nodeName). Process CPU time, the best of `--repeat` runs; every pod read both ways
is compared, and the script exits 1 if any differs. With --json the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.kube import convert  # noqa: E402
from runtime.kube.podtemplates import PodTemplates  # noqa: E402

NAMESPACE = "bench"


def template_spec(t: int) -> dict[str, Any]:
    """The spec of workload `t`, as the API server fills in its defaults."""
    container: dict[str, Any] = {
        "name": "main", "image": f"registry.example/train:v{t}", "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": f"{100 * (t + 1)}m", "memory": f"{64 * (t + 1)}Mi"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }
    spec: dict[str, Any] = {
        "containers": [container], "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "securityContext": {}, "schedulerName": "volcano", "priority": 0,
        "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": f"node.kubernetes.io/{condition}", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300} for condition in ("not-ready", "unreachable")],
    }
    if t % 3 == 0:
        selector = {"matchLabels": {"app": f"w{t}"}}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}]}}
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]
    if t % 5 == 0:
        container["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        spec["initContainers"] = [{"name": "proxy", "image": "registry.example/proxy:1", "restartPolicy": "Always",
                                   "resources": {"requests": {"cpu": "50m"}}}]
    return spec


def pod_objects(pods: int, templates: int, gang: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The listed pods (every other gang bound), and the watch's MODIFIED events of the pending ones
    once bound."""
    specs = [template_spec(t) for t in range(templates)]
    listed, modified = [], []
    for i in range(pods):
        job, t = i // gang, (i // gang) % templates
        spec = copy.deepcopy(specs[t])
        obj = {
            "metadata": {
                "name": f"job-{job:06d}-{i % gang}", "namespace": NAMESPACE, "uid": f"00000000-0000-4000-8000-{i:012d}",
                "resourceVersion": str(1000 + i), "creationTimestamp": f"2026-12-02T08:{(i // 6000) % 60:02d}:00Z",
                "labels": {"app": f"w{t}", "volcano.sh/job-name": f"job-{job:06d}"},
                "annotations": {"scheduling.k8s.io/group-name": f"job-{job:06d}",
                                "scheduling.volcano.sh/queue-name": f"q{job % 4}"},
            },
            "spec": spec, "status": {"phase": "Pending", "qosClass": "Burstable"},
        }
        token = f"kube-api-access-{i:05x}"[-21:]
        spec["volumes"] = [{"name": token, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]
        for container in spec["containers"]:
            container["volumeMounts"] = [{"name": token, "readOnly": True,
                                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
        if job % 2:
            spec["nodeName"] = f"node-{i % 10_000}"
        listed.append(obj)
        if not job % 2:
            bound = copy.deepcopy(obj)
            bound["spec"]["nodeName"] = f"node-{i % 10_000}"
            bound["metadata"]["resourceVersion"] = str(10_000_000 + i)
            bound["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                              "lastTransitionTime": "2026-12-02T09:00:00Z"}]
            modified.append(bound)
    return listed, modified


def cpu_per_pod(read, objects: list[dict[str, Any]], repeat: int, fresh) -> tuple[float, list]:
    """The best of `repeat` runs' process CPU time per pod (us), and the last run's pods."""
    best, out = float("inf"), []
    for _ in range(repeat):
        reader = fresh(read)
        started = time.process_time()
        out = [reader(obj, {}) for obj in objects]
        best = min(best, time.process_time() - started)
    return best / len(objects) * 1e6, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--templates", type=int, default=10)
    parser.add_argument("--gang", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    listed, modified = pod_objects(args.pods, args.templates, args.gang)
    events = listed + modified
    full_us, full = cpu_per_pod(convert.pod_from, events, args.repeat, lambda read: read)
    caches: list[PodTemplates] = []

    def fresh_templates(_read):
        caches.append(PodTemplates())
        return caches[-1].read

    templated_us, templated = cpu_per_pod(None, events, args.repeat, fresh_templates)
    identical = full == templated
    cache = caches[-1]
    result = {
        "pods": args.pods, "events": len(events), "templates": args.templates, "gang": args.gang,
        "full_us_per_pod": round(full_us, 2), "templated_us_per_pod": round(templated_us, 2),
        "speedup": round(full_us / templated_us, 2), "template_hits": cache.hits, "template_misses": cache.misses,
        "templates_held": len(cache), "identical_pods": identical,
    }
    print(f"{len(events):,} pod events ({args.pods:,} listed, {len(modified):,} MODIFIED once bound), "
          f"{args.templates} specs, gangs of {args.gang}")
    print(f"  read in full (convert.pod_from):   {full_us:7.2f} us of CPU a pod")
    print(f"  through templates (PodTemplates):  {templated_us:7.2f} us of CPU a pod  ({full_us / templated_us:.1f}x; "
          f"{cache.hits:,} hits, {cache.misses} misses, {len(cache)} templates held)")
    print(f"  pods identical both ways: {identical}")
    if args.json:
        print(json.dumps(result))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
