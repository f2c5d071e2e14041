"""predicates: node selector and required node affinity (matchExpressions, matchFields on
metadata.name), taints and tolerations (NoSchedule, NoExecute) as static filters, each
answering for a whole task class at once over the label and taint bitsets; inter-pod affinity,
topology spread and host ports as stateful ones (runtime.engine.rules), each switchable (Volcano's
predicate.PodAffinityEnable, PodTopologySpreadEnable, NodePortsEnable). Resource fit and the
pod-count limit (the `pods` resource) are checked by the fit kernel for every plan;
unschedulable (cordoned) nodes are always filtered."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from runtime.cluster.model import Toleration
from runtime.cluster.selectors import MatchExpression
from runtime.engine.plugins import Plugin
from runtime.engine.session import Check
from runtime.engine.snapshot import Snapshot, TaskClass

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.rules.podaffinity import PodAffinityRule
    from runtime.engine.rules.spread import TopologySpreadRule

AFFINITY_MESSAGE = "node(s) didn't match Pod's node affinity/selector"


def bit_column(bits: np.ndarray, b: int) -> np.ndarray:
    return ((bits[:, b >> 6] >> np.uint64(b & 63)) & np.uint64(1)).astype(bool)


def label_match(snap: Snapshot, key: str, value: str) -> np.ndarray:
    b = snap.label_index.get((key, value))
    return bit_column(snap.label_bits, b) if b is not None else np.zeros(snap.n_nodes, dtype=bool)


def label_exists(snap: Snapshot, key: str) -> np.ndarray:
    b = snap.label_key_index.get(key)
    return bit_column(snap.label_bits, b) if b is not None else np.zeros(snap.n_nodes, dtype=bool)


def expression_mask(snap: Snapshot, expr: MatchExpression) -> np.ndarray:
    if expr.field:   # matchFields: metadata.name, the only node field
        named = np.isin(np.array(snap.node_names, dtype=object), list(expr.values))
        return named if expr.operator == "In" else ~named
    if expr.operator in ("In", "NotIn"):
        mask = np.zeros(snap.n_nodes, dtype=bool)
        for v in expr.values:
            mask |= label_match(snap, expr.key, v)
        return mask if expr.operator == "In" else ~mask
    if expr.operator == "Exists":
        return label_exists(snap, expr.key)
    if expr.operator == "DoesNotExist":
        return ~label_exists(snap, expr.key)
    # Gt / Lt compare integers: rare, so a loop over the node labels.
    try:
        bound = int(expr.values[0])
    except (IndexError, ValueError):
        return np.zeros(snap.n_nodes, dtype=bool)
    out = np.zeros(snap.n_nodes, dtype=bool)
    for i, node in enumerate(snap.node_objects):
        raw = node.labels.get(expr.key)
        try:
            value = int(raw) if raw is not None else None
        except ValueError:
            value = None
        if value is not None:
            out[i] = value > bound if expr.operator == "Gt" else value < bound
    return out


def terms_mask(snap: Snapshot, terms) -> np.ndarray:
    """OR of terms, each an AND of expressions (an empty term matches nothing, as in k8s)."""
    mask = np.zeros(snap.n_nodes, dtype=bool)
    for term in terms:
        if not term:
            continue
        t = np.ones(snap.n_nodes, dtype=bool)
        for expr in term:
            t &= expression_mask(snap, expr)
        mask |= t
    return mask


def affinity_mask(snap: Snapshot, cls: TaskClass) -> np.ndarray:
    mask = np.ones(snap.n_nodes, dtype=bool)
    for key, value in cls.node_selector:
        mask &= label_match(snap, key, value)
    if cls.required_terms:
        mask &= terms_mask(snap, cls.required_terms)
    return mask


def untolerated_taint_checks(snap: Snapshot, tolerations: tuple[Toleration, ...]) -> list[Check]:
    checks = []
    for b, taint in enumerate(snap.taints):
        if any(t.tolerates(taint) for t in tolerations):
            continue
        has = bit_column(snap.taint_bits, b)
        checks.append(Check(f"node(s) had untolerated taint {taint}", ~has))
    return checks


def pod_affinity_state(ssn) -> "PodAffinityRule":
    from runtime.engine.rules.podaffinity import PodAffinityRule
    return ssn.rule_state("podaffinity", lambda: PodAffinityRule(ssn))


def spread_state(ssn) -> "TopologySpreadRule":
    from runtime.engine.rules.spread import TopologySpreadRule
    return ssn.rule_state("podtopologyspread", lambda: TopologySpreadRule(ssn))


class PredicatesPlugin(Plugin):
    name = "predicates"
    answers = frozenset({"predicate"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        use_affinity = self.args.get("node_affinity", True)
        use_taints = self.args.get("taint_toleration", True)
        if snap.rule_pods:   # inter-pod rules only where some pod carries them
            if self.args.get("pod_affinity", True):
                rule = pod_affinity_state(ssn)
                rule.filter_on = True
                self.register(ssn, "predicate", rule)
            if self.args.get("pod_topology_spread", True):
                rule = spread_state(ssn)
                rule.filter_on = True
                self.register(ssn, "predicate", rule)
            if self.args.get("node_ports", True):
                from runtime.engine.rules.ports import NodePortsRule
                self.register(ssn, "predicate", NodePortsRule(ssn))

        def predicate(cls: TaskClass) -> list[Check]:
            checks = []
            if use_affinity and (cls.node_selector or cls.required_terms):
                checks.append(Check(AFFINITY_MESSAGE, affinity_mask(snap, cls)))
            if use_taints and snap.taints:
                checks.extend(untolerated_taint_checks(snap, cls.tolerations))
            return checks

        self.register(ssn, "predicate", predicate)


PLUGIN = PredicatesPlugin
