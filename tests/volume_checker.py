"""An independent checker of the storage side of pod placements, a sibling of placement_checker.

Written from kube-scheduler's and the PV controller's documented behaviour, sharing no code with
the engine (nothing from runtime/ or compiler/ is imported). Its input is plain Kubernetes
objects as dicts: Nodes, Pods, PersistentVolumes, PersistentVolumeClaims, CSINodes.
`check()` returns the violations (placement_checker.Violation), for every pod bound to a node
and not finished:

- `claim-bound`: each claim its volumes name (persistentVolumeClaim, or an ephemeral volume's
  `<pod>-<volume>`) exists and is bound to a PV (`spec.volumeName`), which exists: a pod is
  bound only once its claims are.
- `volume-node-affinity`: the node satisfies each bound PV's `spec.nodeAffinity.required`.
- `volume-zone`: the node's zone and region labels match each bound PV's (`a__b` lists values;
  a node without any such label passes).
- `read-write-once-pod`: a ReadWriteOncePod claim is used by one such pod at most.
- `attach-limit`: per node and CSI driver, the distinct volumes (driver/handle) of the pods there
  stay within the CSINode's `allocatable.count`.
And, whatever the pods: `one-claim-per-volume`: no PV is named by two claims' `volumeName`, and a
bound claim's PV names it back in its claimRef.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from placement_checker import Violation

ZONE_KEYS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
             "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
GA = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
      "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _claims_of(pod: Mapping[str, Any]) -> list[str]:
    name = _meta(pod)["name"]
    out = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        if vol.get("persistentVolumeClaim"):
            out.append(vol["persistentVolumeClaim"]["claimName"])
        elif "ephemeral" in vol:
            out.append(f"{name}-{vol['name']}")
    return list(dict.fromkeys(out))


def _requirement(labels: Mapping[str, str], name: str, expr: Mapping[str, Any], field: bool) -> bool:
    value = name if field else labels.get(expr["key"])
    values = set(expr.get("values") or ())
    op = expr["operator"]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None:
        return False
    bound = int(next(iter(values)))
    return int(value) > bound if op == "Gt" else int(value) < bound


def _affinity_allows(pv: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if not required:
        return True
    labels, name = _meta(node).get("labels") or {}, _meta(node)["name"]
    for term in required.get("nodeSelectorTerms") or []:
        exprs = [(e, False) for e in term.get("matchExpressions") or []]
        exprs += [(e, True) for e in term.get("matchFields") or []]
        if exprs and all(_requirement(labels, name, e, f) for e, f in exprs):
            return True
    return False


def _zone_allows(pv: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = _meta(node).get("labels") or {}
    if not any(k in labels for k in ZONE_KEYS):
        return True
    for key in ZONE_KEYS:
        value = (_meta(pv).get("labels") or {}).get(key)
        if not value:
            continue
        have = labels.get(key, labels.get(GA.get(key, key)))
        if have not in set(value.split("__")):
            return False
    return True


def check(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], pvs: Iterable[Mapping[str, Any]],
          pvcs: Iterable[Mapping[str, Any]], csinodes: Iterable[Mapping[str, Any]] = ()) -> list[Violation]:
    nodes_by = {_meta(n)["name"]: n for n in nodes}
    pv_by = {_meta(v)["name"]: v for v in pvs}
    claims = {f"{_meta(c).get('namespace') or 'default'}/{_meta(c)['name']}": c for c in pvcs}
    limits: dict[tuple[str, str], int] = {}
    for cn in csinodes:
        for driver in (cn.get("spec") or {}).get("drivers") or []:
            count = (driver.get("allocatable") or {}).get("count")
            if count is not None:
                limits[(_meta(cn)["name"], driver["name"])] = int(count)
    found: list[Violation] = []
    named: dict[str, list[str]] = defaultdict(list)
    for key, claim in claims.items():
        volume = (claim.get("spec") or {}).get("volumeName")
        if not volume:
            continue
        named[volume].append(key)
        pv = pv_by.get(volume)
        ref = ((pv or {}).get("spec") or {}).get("claimRef") or {}
        if pv is not None and f"{ref.get('namespace')}/{ref.get('name')}" != key:
            found.append(Violation(key, "one-claim-per-volume", f"PV {volume} names {ref.get('namespace')}/"
                                                                 f"{ref.get('name')} in its claimRef"))
    for volume, keys in named.items():
        if len(keys) > 1:
            found.append(Violation(",".join(sorted(keys)), "one-claim-per-volume", f"PV {volume} is every one's"))
    rwop_users: dict[str, list[str]] = defaultdict(list)
    attached: dict[tuple[str, str], set[str]] = defaultdict(set)
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node_name or phase in ("Succeeded", "Failed"):
            continue
        ns = _meta(pod).get("namespace") or "default"
        key = f"{ns}/{_meta(pod)['name']}"
        node = nodes_by.get(node_name)
        for name in _claims_of(pod):
            claim = claims.get(f"{ns}/{name}")
            volume = ((claim or {}).get("spec") or {}).get("volumeName")
            pv = pv_by.get(volume) if volume else None
            if claim is None or pv is None:
                found.append(Violation(key, "claim-bound", f"claim {ns}/{name} is not bound to a PV that exists"))
                continue
            if "ReadWriteOncePod" in ((claim.get("spec") or {}).get("accessModes") or []):
                rwop_users[f"{ns}/{name}"].append(key)
            if node is not None and not _affinity_allows(pv, node):
                found.append(Violation(key, "volume-node-affinity", f"PV {volume} is not reachable from {node_name}"))
            if node is not None and not _zone_allows(pv, node):
                found.append(Violation(key, "volume-zone", f"PV {volume}'s zone is not {node_name}'s"))
            csi = (pv.get("spec") or {}).get("csi")
            if csi:
                attached[(node_name, csi["driver"])].add(csi["volumeHandle"])
    for claim, users in rwop_users.items():
        if len(users) > 1:
            found.append(Violation(",".join(sorted(users)), "read-write-once-pod", f"{claim} has {len(users)} pods"))
    for (node_name, driver), handles in attached.items():
        limit = limits.get((node_name, driver))
        if limit is not None and len(handles) > limit:
            found.append(Violation(node_name, "attach-limit", f"{len(handles)} {driver} volumes, limit {limit}"))
    return sorted(found)
