"""What a newcomer writes by habit gets a hint in the scheduler's words (issue 32): units that are
not Kubernetes' (`1TB`, `64GB`, `10 cores`), Volcano's `parent =`, and PD213 telling the truth
about queue trees (policydsl always applies them; Volcano's proportion never does, its capacity
only with enableHierarchy)."""

from __future__ import annotations

import pytest

from compiler.pipeline import compile_text
from policydsl.diagnostics import Severity

HEAD = 'policy "t" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin proportion\n}\n'


def diagnostics(text: str):
    return compile_text(text, "t.policy").diagnostics


@pytest.mark.parametrize("written, shown, hint", [
    ("1TB", "`1TB`", "T (10^12 bytes) or Ti (2^40 bytes)"),
    ("64GB", "`64GB`", "G (10^9 bytes) or Gi (2^30 bytes)"),
    ("512MiB", "`512MiB`", "Mi, without the B"),
    ("4gi", "`4gi`", "Gi; suffixes are case-sensitive"),
    ("100 bytes", "`100 bytes`", "number of bytes alone"),
    ("2KB", "`2KB`", "k (10^3 bytes) or Ki (2^10 bytes)"),
])
def test_memory_units_that_are_not_kubernetes_get_a_hint(written, shown, hint):
    [diag] = diagnostics(HEAD + f"queue a {{\n  capability = {{ memory: {written} }}\n}}\n")
    assert diag.code == "PD010" and diag.message == f"{shown} is not a quantity"
    assert hint in diag.hint
    assert diag.span.line == 8


@pytest.mark.parametrize("written", ["10 cores", "4 cpus", "2 vcpu", "1core"])
def test_cpu_counts_with_a_word_get_a_hint(written):
    [diag] = diagnostics(HEAD + f"queue a {{\n  capability = {{ cpu: {written} }}\n}}\n")
    assert diag.message.endswith("is not a quantity") and "millicores (500m)" in diag.hint


def test_a_name_after_a_number_that_is_no_unit_keeps_the_grammar_hint():
    [diag] = diagnostics(HEAD + "queue a {\n  capability = { cpu: 4 banana }\n}\n")
    assert diag.message == "unexpected name `banana`" and diag.hint.startswith("expected")


def test_volcano_parent_setting_says_to_nest():
    [diag] = [d for d in diagnostics(HEAD + "queue a {}\nqueue b {\n  parent = a\n}\n") if d.code == "PD104"]
    assert "nest `queue child { ... }` inside `queue parent { ... }`" in diag.hint


CAPACITY = 'policy "t" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin capacity{flags}\n}\n'
NESTED = "queue ml {\n  deserved = { cpu: 8 }\n  queue train {\n    deserved = { cpu: 4 }\n  }\n}\n"


def pd213(text: str):
    return [d for d in diagnostics(text) if d.code == "PD213"]


def test_pd213_under_proportion_is_information_and_does_not_lead_into_pd401():
    [diag] = pd213(HEAD + "queue ml {\n  queue train { weight = 2 }\n}\n")
    assert diag.severity == Severity.INFO
    assert "policydsl shares it down the tree" in diag.message and "proportion" in diag.message
    assert "plugin capacity" not in diag.hint      # adding capacity beside proportion is PD401


def test_pd213_under_capacity_without_hierarchy_says_how_volcano_would_apply_the_tree():
    [diag] = pd213(CAPACITY.replace("{flags}", "") + NESTED)
    assert "without enableHierarchy" in diag.message and "enable_hierarchy = true" in diag.hint


def test_pd213_is_silent_where_volcano_applies_the_same_tree():
    assert pd213(CAPACITY.replace("{flags}", " { enable_hierarchy = true }") + NESTED) == []
    assert pd213(HEAD + "queue ml {}\nqueue train {}\n") == []
