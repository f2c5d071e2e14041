"""Label and node selectors as Kubernetes evaluates them: a `MatchExpression`, a node selector
term (`SelectorTerm`, a conjunction of expressions), and a metav1 `LabelSelector`. Pods, nodes,
storage objects and the engine's rules all read them; this module imports nothing of ours."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class MatchExpression:
    key: str
    operator: str          # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()
    # A node selector term's matchFields entry: `key` names a field of the Node object (only
    # metadata.name exists), not a label.
    field: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label map satisfies the expression (label selectors' semantics)."""
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        try:  # Gt / Lt (node selectors only): integers
            return value is not None and (int(value) > int(self.values[0]) if self.operator == "Gt"
                                          else int(value) < int(self.values[0]))
        except (IndexError, ValueError):
            return False


# A node selector term is a conjunction of expressions; a required affinity is a disjunction
# of terms (Kubernetes' nodeSelectorTerms).
SelectorTerm = tuple[MatchExpression, ...]


@dataclass(frozen=True)
class LabelSelector:
    """A metav1.LabelSelector: every matchLabels pair and every expression must hold. The empty
    selector matches every object (a missing one, None where it is allowed, matches none)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[MatchExpression, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(expr.matches(labels) for expr in self.match_expressions)

    def keys(self) -> set[str]:
        return {k for k, _ in self.match_labels} | {e.key for e in self.match_expressions}
