"""gang_preempt / gang_reclaim in the language and in Volcano's configs: Volcano's names
(gangpreempt, gangreclaim; arguments allowWholeBundle, maxDomains) imported and exported, a
misspelling or a legacy action beside its gang-aware one refused with a located error."""

from __future__ import annotations

import yaml

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano_text
from compiler.volcano.importer import import_volcano_text

# Volcano's gangevict e2e config (test/e2e/gangevict/gangevict.go, gangEvictConfig) without what
# policydsl does not have (the sla plugin, predicates' DRA flag), and the arguments of
# pkg/scheduler/actions/gangpreempt's TestParseArguments.
VOLCANO_CONFIG = """\
actions: "allocate, backfill, gangreclaim, gangpreempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: capacity
    enableHierarchy: false
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
configurations:
- name: gangpreempt
  arguments:
    maxDomains: 3
    allowWholeBundle: false
"""

HEAD = 'policy "p" version 1\n'
TIERS = "tier {\n  plugin priority\n  plugin gang\n  plugin conformance\n}\ntier {\n  plugin predicates\n}\n"


def test_volcano_gang_actions_import_with_their_arguments():
    result = import_volcano_text(VOLCANO_CONFIG, "volcano-scheduler.conf")
    assert result.exit_code == 0, [str(d) for d in result.errors]
    assert "actions [allocate, gang_preempt, gang_reclaim, backfill]" in result.text
    assert "action gang_preempt {\n  max_domains = 3\n  whole_gangs = false\n}" in result.text
    plan = compile_text(result.text, "imported.policy").plan
    assert plan.actions == ("allocate", "gang_preempt", "gang_reclaim", "backfill")
    arguments = plan.action_arguments["gang_preempt"]
    assert arguments["max_domains"] == 3 and arguments["whole_gangs"] is False


def test_gang_actions_export_under_volcanos_names():
    policy = import_volcano_text(VOLCANO_CONFIG, "volcano-scheduler.conf").text
    exported = export_volcano_text(policy, "imported.policy")
    assert exported.exit_code == 0
    config = yaml.safe_load(exported.text)
    assert config["actions"] == "allocate, gangpreempt, gangreclaim, backfill"
    assert config["configurations"] == [{"name": "gangpreempt", "arguments": {"maxDomains": 3,
                                                                               "allowWholeBundle": False}}]


def test_volcanos_names_are_case_sensitive():
    """Volcano looks actions up by exact name: `gangPreempt` (its design doc's spelling) fails there."""
    result = import_volcano_text(VOLCANO_CONFIG.replace("gangpreempt\"", "gangPreempt\""), "c.conf")
    [diag] = [d for d in result.errors if d.code == "PD603"]
    assert "unknown action `gangPreempt`" in diag.message and "gangpreempt" in (diag.hint or "")
    assert (diag.span.line, diag.span.column) == (1, 44)


def test_a_legacy_action_beside_its_gang_aware_one_is_refused_where_written():
    result = import_volcano_text(VOLCANO_CONFIG.replace('"allocate, backfill, gangreclaim, gangpreempt"',
                                                        '"allocate, preempt, gangpreempt"'), "c.conf")
    assert result.exit_code != 0
    located = [d for d in result.errors if "cannot both run" in d.message]
    assert located and (located[0].span.line, located[0].span.column) == (1, 30)


def test_lint_refuses_both_in_one_policy_at_the_gang_action():
    compilation = compile_text(HEAD + "actions [enqueue, allocate, reclaim, gang_reclaim]\n" + TIERS, "p.policy")
    [diag] = [d for d in compilation.errors if d.code == "PD310"]
    assert (diag.span.line, diag.span.column) == (2, 38) and "`gang_reclaim` replaces `reclaim`" in diag.message


def test_lint_refuses_a_max_domains_below_one():
    compilation = compile_text(HEAD + "actions [enqueue, allocate, gang_preempt]\n" + TIERS
                               + "action gang_preempt {\n  max_domains = 0\n}\n", "p.policy")
    assert [d.span.line for d in compilation.errors] == [12]


def test_a_gang_action_needs_a_plugin_that_picks_victims():
    compilation = compile_text(HEAD + "actions [enqueue, allocate, gang_preempt]\ntier {\n  plugin predicates\n}\n",
                               "p.policy")
    assert "PD304" in {d.code for d in compilation.errors}


def test_plugins_that_only_pick_victims_are_not_idle_under_gang_actions():
    compilation = compile_text(HEAD + "actions [enqueue, allocate, gang_preempt, gang_reclaim]\n" + TIERS, "p.policy")
    assert compilation.ok and "PD410" not in {d.code for d in compilation.diagnostics}
