"""Label and node selectors as Kubernetes evaluates them: a `MatchExpression`, a node selector
term (`SelectorTerm`, a conjunction of expressions), and a metav1 `LabelSelector`. Pods, nodes,
storage objects and the engine's rules all read them; this module imports nothing of ours."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property


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

    # Hashed once (as PodRules): the inter-pod rules key their tables by selectors every cycle.
    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash((self.match_labels, self.match_expressions))

    @cached_property
    def anchor(self) -> tuple[str, str] | None:
        """A label pair every map the selector matches has (None: it requires no single pair):
        an index of selectors by it tries a label map only against those its own pairs name."""
        if self.match_labels:
            return self.match_labels[0]
        for expr in self.match_expressions:
            if expr.operator == "In" and len(expr.values) == 1:
                return expr.key, expr.values[0]
        return None

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(expr.matches(labels) for expr in self.match_expressions)

    def keys(self) -> set[str]:
        return {k for k, _ in self.match_labels} | {e.key for e in self.match_expressions}


class SelectorSet:
    """Distinct label selectors, numbered, and which of them a label map satisfies (`matched`):
    two pods of one namespace that satisfy the same selectors are alike to every inter-pod rule
    whatever their label values, so the task classes key on this rather than on the values
    (a replica group's own selector sets its pods apart; pods no rule selects share a class).
    Each selector is indexed by a label pair it requires, so a label map is tried only against
    the selectors its own pairs name (and those requiring no single pair); the answer is cached
    by the values of `keys`, the label keys the selectors read."""

    def __init__(self, selectors: Iterable[LabelSelector], keys: tuple[str, ...]):
        self.keys = keys
        self._anchored: dict[tuple[str, str], list[tuple[int, LabelSelector]]] = {}
        self._loose: list[tuple[int, LabelSelector]] = []
        self._matched: dict[tuple, tuple[int, ...]] = {}
        for i, selector in enumerate(dict.fromkeys(selectors)):
            pair = selector.anchor
            if pair is None:
                self._loose.append((i, selector))
            else:
                self._anchored.setdefault(pair, []).append((i, selector))

    def matched(self, labels: Mapping[str, str]) -> tuple[int, ...]:
        """The numbers of the selectors `labels` satisfies, ascending."""
        values = tuple([labels.get(k) for k in self.keys])
        found = self._matched.get(values)
        if found is None:
            hits = [i for pair in labels.items() for i, s in self._anchored.get(pair, ()) if s.matches(labels)]
            hits += [i for i, s in self._loose if s.matches(labels)]
            found = self._matched[values] = tuple(sorted(hits))
        return found

