"""An independent check of network-topology placement: which HyperNode holds each gang.

It reads Volcano's HyperNodes (`topology.volcano.sh/v1alpha1`), the nodes and the pods back from
the API server and computes, with code of its own (not the scheduler's runtime/cluster/topology.py),
each HyperNode's nodes from its member list, then for every gang (the pods naming one PodGroup in
Volcano's `scheduling.k8s.io/group-name` annotation, or any other grouping the caller gives) the
tightest HyperNode that holds every one of its bound pods. Members are read as Volcano's API
documents them: a `Node` member by `exactMatch` (a name, whether or not the node exists),
`regexMatch` (Go's unanchored match: Python's `re.search` on the name) or `labelMatch`
(`matchLabels` and `matchExpressions`; an empty selector selects nothing); a `HyperNode` member by
`exactMatch` only. Used by the e2e benchmark's workload (e) and by
tests/integration/test_vcjob_topology.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
HYPERNODES_PATH = "/apis/topology.volcano.sh/v1alpha1/hypernodes"

Get = Callable[[str, Mapping[str, str]], Mapping[str, Any]]


@dataclass(frozen=True)
class Tree:
    """Each HyperNode's tier and the nodes under it (through its child HyperNodes)."""

    tiers: Mapping[str, int]
    leaves: Mapping[str, frozenset[str]]

    def tightest(self, nodes: Iterable[str]) -> tuple[str, int] | None:
        """The HyperNode of the lowest tier (then name) holding every node of `nodes`, or None."""
        wanted = set(nodes)
        holding = [(self.tiers[h], h) for h, members in self.leaves.items() if wanted <= members]
        if not holding:
            return None
        tier, name = min(holding)
        return name, tier


def _selects(selector: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    if "exactMatch" in selector:
        return name == (selector["exactMatch"] or {}).get("name")
    if "regexMatch" in selector:
        return re.search((selector["regexMatch"] or {}).get("pattern", ""), name) is not None
    match = selector.get("labelMatch") or {}
    pairs, expressions = match.get("matchLabels") or {}, match.get("matchExpressions") or []
    if not pairs and not expressions:
        return False                           # Volcano: an empty labelMatch selects no node
    if any(labels.get(k) != v for k, v in pairs.items()):
        return False
    for expression in expressions:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(operator)
        if not ok:
            return False
    return True


def tree_of(hypernodes: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]) -> Tree:
    """The HyperNodes' tiers and leaf node sets, from the objects as the API server serves them."""
    labelled = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes}
    tiers: dict[str, int] = {}
    direct: dict[str, set[str]] = {}
    children: dict[str, list[str]] = {}
    for hn in hypernodes:
        name, spec = hn["metadata"]["name"], hn.get("spec") or {}
        tiers[name] = int(spec.get("tier", 0))
        direct[name], children[name] = set(), []
        for member in spec.get("members") or []:
            selector = member.get("selector") or {}
            if member.get("type") == "HyperNode":
                if "exactMatch" in selector:
                    children[name].append(selector["exactMatch"]["name"])
            elif "exactMatch" in selector:
                direct[name].add(selector["exactMatch"]["name"])
            else:
                direct[name].update(n for n, labels in labelled.items() if _selects(selector, n, labels))

    def leaves(name: str, path: tuple[str, ...]) -> set[str]:
        out = set(direct.get(name, ()))
        for child in children.get(name, ()):
            if child in tiers and child not in path:      # a cycle adds nothing twice
                out |= leaves(child, (*path, name))
        return out

    return Tree(tiers, {name: frozenset(leaves(name, ())) for name in tiers})


@dataclass(frozen=True)
class GangSpan:
    group: str
    pods: int               # pods of the gang seen
    bound: int              # of which bound to a node
    hypernode: str | None   # the tightest HyperNode holding every bound pod (None: none holds them)
    tier: int | None


def gang_spans(pods: Iterable[Mapping[str, Any]], tree: Tree,
               group_of: Callable[[Mapping[str, Any]], str | None] | None = None) -> list[GangSpan]:
    """Per gang (by default the PodGroup named in a pod's group-name annotation; pods without one
    are left out), where its bound pods lie."""
    def annotated(pod: Mapping[str, Any]) -> str | None:
        return (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)

    group_of = group_of or annotated
    members: dict[str, list[str | None]] = {}
    for pod in pods:
        group = group_of(pod)
        if group is not None:
            members.setdefault(group, []).append((pod.get("spec") or {}).get("nodeName"))
    spans = []
    for group in sorted(members):
        bound = [n for n in members[group] if n]
        holding = tree.tightest(bound) if bound else None
        spans.append(GangSpan(group, len(members[group]), len(bound), *(holding or (None, None))))
    return spans


def read(get: Get, namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The HyperNodes, every node and the pods of `namespace`, as the API server serves them now."""
    # Lazy, as run.py's placement check: tests/ is importable only from the repository's root.
    from tests.placement_checker import list_all

    return (list_all(get, HYPERNODES_PATH), list_all(get, "/api/v1/nodes"),
            list_all(get, f"/api/v1/namespaces/{namespace}/pods"))


@dataclass(frozen=True)
class TierShare:
    """How many gangs with a bound pod lie whole within one HyperNode of at most `tier`."""

    tier: int
    gangs: int              # gangs with at least one pod bound
    within: int
    complete: int           # gangs with every pod bound
    examples: tuple[str, ...] = ()     # gangs that do not, with where their pods are

    @property
    def share(self) -> float | None:
        return self.within / self.gangs if self.gangs else None


def tier_share(spans: Iterable[GangSpan], tier: int, examples: int = 3) -> TierShare:
    spans = [s for s in spans if s.bound]
    outside = [s for s in spans if s.tier is None or s.tier > tier]
    said = tuple(f"{s.group}: {s.bound} bound pods, tightest HyperNode "
                 + (f"{s.hypernode} (tier {s.tier})" if s.hypernode else "none") for s in outside[:examples])
    return TierShare(tier, len(spans), len(spans) - len(outside), sum(s.bound == s.pods for s in spans), said)
