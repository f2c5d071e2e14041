"""Lint rules: every documented example, the fixture files, configuration and suppressions."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from compiler import lint
from compiler.lint.config import ConfigError, LintConfig, find_config, parse_config
from compiler.lint.docs import all_codes, policy_examples
from compiler.lint.registry import RULES, is_configurable, resolve_code
from compiler.lint.runner import lint_paths
from compiler.pipeline import compile_text
from policydsl.diagnostics import Severity

FIXTURES = Path(__file__).parent / "lint_fixtures"
_EXPECT = re.compile(r"#\s*expect(?P<next>-next-line)?:\s*(?P<codes>[A-Z0-9, ]+)")

# Examples registered by others (compiler/codes.py) carry no `# expect:` marker; the line
# their diagnostic belongs on, read off the example.
UNMARKED_LINES = {
    "PD101": 2, "PD102": 4, "PD103": 4, "PD104": 3, "PD105": 3,
    "PD106": 3, "PD107": 3, "PD108": 3, "PD109": 4, "PD110": 1,
}
# An example that includes "common.policy" finds this file next to it.
COMMON_POLICY = 'policy "common" version 1\ntier {\n  plugin predicates\n  plugin proportion\n}\n'


def expectations(text: str) -> set[tuple[int, str]]:
    """(line, code) pairs from `# expect: CODE, CODE` (this line) and `# expect-next-line: CODE`."""
    found = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            target = number + 1 if match.group("next") else number
            found |= {(target, code.strip()) for code in match.group("codes").split(",") if code.strip()}
    return found


@pytest.fixture
def example_dir(tmp_path, monkeypatch):
    (tmp_path / "common.policy").write_text(COMMON_POLICY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- the registry ---------------------------------------------------------------------------

def test_registry_has_at_least_twenty_documented_lint_rules():
    assert len(RULES) >= 20
    for code, rule in RULES.items():
        assert re.fullmatch(r"PD[2-5]\d\d", code), code
        assert rule.info.why and rule.info.fix and rule.info.bad and rule.info.good, code
    names = [info.name for info in all_codes().values()]
    assert len(names) == len(set(names)), "rule names must be unique"


@pytest.mark.parametrize("info", policy_examples(), ids=lambda info: info.code)
def test_example_fires_on_bad_at_its_line_and_is_quiet_on_good(info, example_dir):
    bad = compile_text(info.bad, str(example_dir / "example.policy"))
    expected_lines = {line for line, code in expectations(info.bad) if code == info.code}
    if not expected_lines:
        assert info.code in UNMARKED_LINES, f"mark the line {info.code} points at with `# expect: {info.code}`"
        expected_lines = {UNMARKED_LINES[info.code]}
    fired = {d.span.line for d in bad.diagnostics if d.code == info.code}
    assert fired == expected_lines, [f"{d.span} {d.code} {d.message}" for d in bad.diagnostics]

    good = compile_text(info.good, str(example_dir / "example.policy"))
    assert info.code not in {d.code for d in good.diagnostics}
    assert not good.errors, [f"{d.span} {d.code} {d.message}" for d in good.errors]


def test_lint_rule_examples_are_clean_apart_from_their_own_code(example_dir):
    """A good lint example is copied by readers; no other warning may fire on it either."""
    for code, rule in RULES.items():
        good = compile_text(rule.info.good, str(example_dir / "example.policy"))
        assert [d.code for d in good.diagnostics] == [], code


def test_resolve_code_takes_codes_and_names():
    assert resolve_code("pd201") == "PD201"
    assert resolve_code("duplicate-queue") == "PD201"
    assert resolve_code("PD999") is None
    assert is_configurable("PD206") and is_configurable("PD014")
    assert not is_configurable("PD101")
    assert not is_configurable("PD201")     # structural: the plan would be ambiguous


# --- the fixture files ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def fixture_run():
    cwd = os.getcwd()
    os.chdir(FIXTURES.parent.parent)
    try:
        return lint_paths([str(FIXTURES.relative_to(Path.cwd()))])
    finally:
        os.chdir(cwd)


FIXTURE_FILES = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*.policy"))


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_fixture_gets_exactly_the_expected_diagnostics(name, fixture_run):
    path = FIXTURES / name
    found = {(d.span.line, d.code) for d in fixture_run.diagnostics
             if d.span and Path(d.span.path).resolve() == path.resolve()}
    assert found == expectations(path.read_text())


def test_a_finding_in_an_included_file_is_reported_once(fixture_run):
    shared = [d for d in fixture_run.diagnostics if d.span and d.span.path.endswith("shared.policy")]
    assert sorted(d.code for d in shared) == ["PD407", "PD530"]


def test_fixture_folder_configuration_regrades_and_disables(fixture_run):
    configured = [d for d in fixture_run.diagnostics if d.span and "configured" in d.span.path]
    assert [(d.code, d.severity) for d in configured] == [("PD407", Severity.ERROR)]


def test_clean_fixture_is_clean_at_info_level(fixture_run):
    assert not [d for d in fixture_run.diagnostics if d.span and d.span.path.endswith("clean.policy")]


# --- spans and semantics beyond the examples -------------------------------------------------

HEAD = 'policy "t" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin capacity { enable_hierarchy = true }\n}\n'


def codes_at(text: str, config: LintConfig | None = None) -> list[tuple[str, int, int]]:
    result = compile_text(text, "t.policy", config=config)
    return [(d.code, d.span.line, d.span.column) for d in result.diagnostics]


def test_amounts_compare_in_base_units():
    # 500m + 600m = 1100m > 1 CPU, written three different ways.
    text = HEAD + "queue p {\n  capability = { cpu: 1 }\n  queue a { guarantee = { cpu: 500m } }\n" \
                  "  queue b { guarantee = { cpu: 0.6 } }\n}\n"
    assert ("PD203", 10, 32) in codes_at(text)
    fits = text.replace("0.6", "500m")
    assert "PD203" not in [c for c, *_ in codes_at(fits)]


def test_top_level_queues_are_children_of_a_declared_root():
    text = HEAD + "queue root { capability = { cpu: 10 } }\nqueue a { capability = { cpu: 12 } }\n"
    assert ("PD202", 8, 31) in codes_at(text)


def test_a_limit_only_binds_resources_the_parent_sets():
    text = HEAD + "queue p {\n  capability = { cpu: 10 }\n  queue a { capability = { memory: 1Ti } }\n}\n"
    assert "PD202" not in [c for c, *_ in codes_at(text)]


def test_constant_used_only_through_another_constant_counts_as_used():
    text = HEAD + "const BASE = 8Gi\nconst LIMIT = BASE\nqueue a { capability = { memory: LIMIT } }\n"
    assert "PD530" not in [c for c, *_ in codes_at(text)]


def test_rules_still_run_when_schema_validation_fails():
    # The negative weight fails validation (document is None); the duplicate is still found.
    text = HEAD + "queue a { weight = -1 }\nqueue a { weight = 2 }\n"
    found = [c for c, *_ in codes_at(text)]
    assert "PD108" in found and "PD201" in found


def test_lint_error_blocks_the_plan_and_disabling_it_lets_it_through():
    text = HEAD + "queue a { capability = { cpu: 1 } guarantee = { cpu: 2 } }\n"
    assert compile_text(text, "t.policy").plan is None
    relaxed = compile_text(text, "t.policy", config=LintConfig(disabled=frozenset({"PD205"})))
    assert relaxed.plan is not None and not relaxed.errors


def test_severity_override_select_and_fragment():
    text = HEAD + "const X = 1\ntier { }\n"
    regraded = compile_text(text, "t.policy", config=LintConfig(severity={"PD407": Severity.ERROR}))
    assert {(d.code, d.severity) for d in regraded.diagnostics} == {("PD530", Severity.WARNING),
                                                                  ("PD407", Severity.ERROR)}
    selected = compile_text(text, "t.policy", config=LintConfig(select=frozenset({"PD407"})))
    assert [d.code for d in selected.diagnostics] == ["PD407"]
    fragment = compile_text('policy "f" version 1\nconst X = Y\ntier { }\n', "f.policy",
                            config=LintConfig(fragment=True))
    assert [d.code for d in fragment.diagnostics] == ["PD407"]  # no PD110, PD107 or PD530


# --- suppressions -----------------------------------------------------------------------------

def test_suppression_forms_and_their_reach():
    over = "deserved = { cpu: 4 } capability = { cpu: 2 }"
    text = HEAD + (
        f"queue a {{ {over} }}  # policydsl: disable=PD206\n"           # line 7: same line
        "# policydsl: disable-next-line=PD206,PD520\n"
        f"queue b {{ {over[:-2]}, gpu: 1 }} }}\n"                       # line 9: next line, two codes
        f"queue c {{ {over} }}\n"                                       # line 10: not covered
        "# policydsl: disable=PD206\n"                                 # own line only: covers nothing below
        f"queue d {{ {over} }}\n"
    )
    assert [(c, line) for c, line, _ in codes_at(text)] == [("PD206", 10), ("PD206", 12)]
    whole_file = text + "# policydsl: disable-file=deserved-above-capability\n"
    assert codes_at(whole_file) == []


def test_a_structural_error_cannot_be_suppressed():
    # Two queues of one name: which one a job's queue is cannot be told, so no comment hides it
    # (as Ruff never lets a syntax error be ignored) and the plan is refused.
    text = HEAD + "queue a { weight = 2 }\nqueue a { weight = 3 }  # policydsl: disable=PD201\n"
    result = compile_text(text, "t.policy")
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("PD201", 8), ("PD014", 8)]
    assert "cannot be disabled" in result.diagnostics[1].message
    assert result.plan is None
    assert codes_at(text + "# policydsl: disable-file=PD201\n")[0][:2] == ("PD201", 8)


def test_bad_suppression_codes_are_reported_where_they_are_written():
    text = HEAD + "queue a { weight = 2 }  # policydsl: disable=PD206, PD77, PD101 -- why\n"
    found = compile_text(text, "t.policy").diagnostics
    assert [(d.code, d.span.line, d.span.column, d.span.end_column) for d in found] == [
        ("PD014", 7, 53, 57), ("PD014", 7, 59, 64)]
    assert "PD77" in found[0].message and "cannot be disabled" in found[1].message


def test_misspelt_directive_and_empty_list_are_reported():
    text = HEAD + "# policydsl: disabel=PD201\n# policydsl: disable=\n"
    found = compile_text(text, "t.policy").diagnostics
    assert [(d.code, d.span.line, d.message) for d in found] == [
        ("PD014", 7, "unknown directive `disabel`"), ("PD014", 8, "suppression names no code")]


def test_suppression_in_one_file_does_not_reach_another(tmp_path):
    (tmp_path / "inc.policy").write_text('policy "inc" version 1\ntier { }\n')
    main = tmp_path / "main.policy"
    main.write_text(HEAD + 'include "inc.policy"\n# policydsl: disable-file=PD407\ntier { }\n')
    result = lint_paths([str(main)])
    assert [(Path(d.span.path).name, d.code) for d in result.diagnostics] == [("inc.policy", "PD407")]


# --- configuration ----------------------------------------------------------------------------

def test_config_parses_codes_names_severities_and_fail_level():
    config = parse_config("lint:\n  disable: [PD305, unused-constant]\n  select: [PD206]\n"
                          "  severity: {PD402: error, PD411: warning}\n  fail_level: warning\n")
    assert config.disabled == {"PD305", "PD530"}
    assert config.select == {"PD206"}
    assert config.severity == {"PD402": Severity.ERROR, "PD411": Severity.WARNING}
    assert config.fail_level == Severity.WARNING
    assert parse_config("") == LintConfig(source=".policydsl.yaml")


@pytest.mark.parametrize("text, line, words", [
    ("lint:\n  disable: [PD305]\n  bogus: 1\n", 3, "unknown key `bogus`"),
    ("lint:\n  severity:\n    PD402: fatal\n", 3, "not a severity"),
    ("lint:\n  disable:\n    - PD206\n    - PD2O1\n", 4, "unknown code `PD2O1`"),
    ("lint:\n  disable: [PD201]\n", 2, "cannot be disabled"),
    ("lint:\n  disable: [PD101]\n", 2, "cannot be disabled"),
    ("lint:\n  severity:\n    nope: error\n", 3, "unknown code `nope`"),
    ("lint:\n  disable: PD201\n", 2, "must be a list"),
    ("lint: [\n", 2, "not valid YAML"),
    ("- just\n- a list\n", 1, "must be a mapping"),
    ("lint: {}\nfmt: {width: 100}\n", 2, "unknown top-level key `fmt`"),
])
def test_bad_config_is_a_located_error(text, line, words):
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "cfg.yaml")
    diag = caught.value.diagnostic
    assert diag.code == "PD200" and diag.span.path == "cfg.yaml"
    assert diag.span.line == line and words in diag.message, (diag.span, diag.message)


@pytest.mark.parametrize("text, hint", [
    ("disable: [PD201]\n", "did you mean `disable:` under `lint:`?"),       # not indented under lint:
    ("ignore: [PD201]\n", "did you mean `disable:` under `lint:`?"),        # Ruff's name, top level
    ("lint:\n  ignore: [PD201]\n", "did you mean `disable:` under `lint:`?"),
    ("lint:\n  extend-select: [PD201]\n", "did you mean `select:` under `lint:`?"),
    ("colour: auto\n", None),
])
def test_a_misplaced_or_ruff_named_key_gets_a_hint(text, hint):
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert caught.value.diagnostic.hint == hint


def test_nearest_config_wins_walking_up(tmp_path):
    (tmp_path / ".policydsl.yaml").write_text("lint: {disable: [PD407]}\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "p.policy").write_text("x")
    assert find_config(deep / "p.policy") == tmp_path / ".policydsl.yaml"
    (tmp_path / "a" / ".policydsl.yaml").write_text("lint: {}\n")
    assert find_config(deep / "p.policy") == tmp_path / "a" / ".policydsl.yaml"


def test_check_returns_nothing_without_lowered_ir():
    assert lint.check(None, None, None) == []


@pytest.mark.parametrize("name, hint", [
    ("gpu", 'did you mean "nvidia.com/gpu" or "amd.com/gpu"?'),
    ("memroy", "did you mean `memory`?"),
    ("fpga", 'extended resources are named like "vendor.com/name"'),
])
def test_unknown_resource_hints(name, hint):
    found = compile_text(HEAD + f"queue a {{ capability = {{ {name}: 1 }} }}\n", "t.policy").diagnostics
    assert [(d.code, d.hint) for d in found] == [("PD520", hint)]


def test_every_fixture_span_underlines_the_text_it_is_about(fixture_run):
    """Columns are 1-based and end-exclusive: the caret starts on a token, never on space or a comment."""
    for diag in fixture_run.diagnostics:
        line = Path(diag.span.path).read_text().splitlines()[diag.span.line - 1]
        end = diag.span.end_column if diag.span.end_line == diag.span.line else len(line) + 1
        underlined = line[diag.span.column - 1:end - 1]
        assert underlined.strip() and not underlined.startswith((" ", "#")), (str(diag.span), diag.code, line)


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_lint_never_raises_on_damaged_policies(name):
    """Deleting any one line leaves broken blocks, missing values and dangling names: never a traceback."""
    lines = (FIXTURES / name).read_text().splitlines(keepends=True)
    for drop in range(len(lines)):
        text = "".join(lines[:drop] + lines[drop + 1:])
        compile_text(text, str(FIXTURES / name))
