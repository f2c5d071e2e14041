"""SelectorIndex (runtime.engine.rules.pods): a pod's candidate items are those anchored under one
of its label pairs and the loose ones (no single pair required), each once, in the order added,
whether items were added before or after earlier questions (it indexes what was added when
next asked)."""

from __future__ import annotations

import pytest

from runtime.cluster.selectors import LabelSelector, MatchExpression
from runtime.engine.rules.pods import SelectorIndex

APP_A = LabelSelector((("app", "a"),))
APP_B = LabelSelector((("app", "b"),))
TIER_X = LabelSelector((("tier", "x"),))
ANY_APP = LabelSelector((), (MatchExpression("app", "Exists"),))     # requires no single pair


def candidates_of(added, asked):
    """The items `asked` returns after `added` (item, selector) pairs, added one by one with a
    question between each (so each question indexes what came before it)."""
    index: SelectorIndex[str] = SelectorIndex()
    for item, selector in added:
        index.add(item, selector)
        index.candidates({})
    return index.candidates(asked)


@pytest.mark.parametrize("added, labels, expected", [
    ([("a1", APP_A), ("b1", APP_B), ("a2", APP_A)], {"app": "a"}, ["a1", "a2"]),
    ([("a1", APP_A), ("t1", TIER_X)], {"app": "a", "tier": "x"}, ["a1", "t1"]),
    ([("a1", APP_A), ("t1", TIER_X)], {"tier": "x", "app": "a"}, ["t1", "a1"]),     # by the pod's label order
    ([("any", ANY_APP), ("a1", APP_A)], {"app": "a"}, ["a1", "any"]),             # loose ones last
    ([("none", None), ("b1", APP_B)], {"app": "a"}, ["none"]),                    # no selector: loose
    ([("b1", APP_B)], {}, []),
])
def test_candidates(added, labels, expected):
    index: SelectorIndex[str] = SelectorIndex()
    for item, selector in added:
        index.add(item, selector)
    assert index.candidates(labels) == expected
    # The same answer when asked between additions.
    assert candidates_of(added, labels) == expected


def test_items_added_after_a_question_are_candidates_next_time():
    index: SelectorIndex[str] = SelectorIndex()
    index.add("a1", APP_A)
    assert index.candidates({"app": "a"}) == ["a1"]
    index.add("a2", APP_A)
    index.add("any", ANY_APP)
    assert index.candidates({"app": "a"}) == ["a1", "a2", "any"]
    assert index.candidates({"app": "a"}) == ["a1", "a2", "any"]      # indexed once


def test_add_all_is_add_of_each_in_order():
    one_by_one: SelectorIndex[str] = SelectorIndex()
    items = [("a1", APP_A), ("any", ANY_APP), ("t1", TIER_X), ("a2", APP_A)]
    for item, selector in items:
        one_by_one.add(item, selector)
    at_once: SelectorIndex[str] = SelectorIndex()
    at_once.add("a0", APP_A)
    assert at_once.candidates({"app": "a"}) == ["a0"]
    at_once.add_all(items)
    assert at_once.candidates({"app": "a", "tier": "x"}) == ["a0", "a1", "a2", "t1", "any"]
    assert one_by_one.candidates({"app": "a", "tier": "x"}) == ["a1", "a2", "t1", "any"]
