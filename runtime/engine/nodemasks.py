"""Static node masks over the snapshot's label and taint bitsets: which nodes a label, a node
selector expression or term, a task class's node affinity, or a taint lets a pod onto. The
predicates plugin answers with them, and the stateful rules that need the same questions
(topology spread's node inclusion, a volume's node affinity) ask them here."""

from __future__ import annotations

import numpy as np

from runtime.cluster.model import Toleration
from runtime.cluster.selectors import MatchExpression
from runtime.engine.extension import Check
from runtime.engine.snapshot import Snapshot, TaskClass

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
