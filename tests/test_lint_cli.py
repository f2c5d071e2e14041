"""`policydsl lint`: output formats, exit codes, configuration discovery, options, docs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from compiler.lint.docs import rules_markdown
from compiler.lint.registry import RULES
from policydsl.cli import main

REPO = Path(__file__).resolve().parent.parent
HEAD = 'policy "p" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin proportion\n}\n'
CLEAN = HEAD + "queue a { weight = 2 }\n"
# line 7: PD521 (warning); line 8: PD201 (error); line 9: PD411 (info)
FINDINGS = HEAD + ("queue a { capability = { memory: 64 } }\nqueue a { weight = 2 }\n"
                   "tier { plugin priority { enable_job_order = true } }\n")


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return write


def lint(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["lint", *args])
    out, err = capsys.readouterr()
    return code, out, err


# --- text -------------------------------------------------------------------------------------

def test_text_shows_caret_and_summary_and_exits_1_on_errors(tree, capsys):
    tree("p.policy", FINDINGS)
    tree("ok.policy", CLEAN)
    code, out, _ = lint(capsys, ".")
    assert code == 1
    assert "p.policy:8:7: error[PD201] queue `a` is declared twice\n   8 | queue a { weight = 2 }\n" in out
    assert ("p.policy:7:34: warning[PD521] memory `64` is 64 bytes\n"
            "   7 | queue a { capability = { memory: 64 } }\n"
            "     |                                  ^^\n") in out
    assert out.rstrip().endswith("Found 1 error, 1 warning, 1 info in 1 of 2 files.")


def test_clean_tree_exits_0(tree, capsys):
    tree("ok.policy", CLEAN)
    code, out, _ = lint(capsys, "ok.policy")
    assert (code, out) == (0, "1 file linted: no problems.\n")


@pytest.mark.parametrize("level, expected", [("error", 1), ("warning", 1), ("info", 1)])
def test_fail_level_with_an_error_present(tree, capsys, level, expected):
    tree("p.policy", FINDINGS)
    assert lint(capsys, "p.policy", "--fail-level", level)[0] == expected


def test_fail_level_decides_for_warnings_and_infos(tree, capsys):
    tree("w.policy", HEAD + "queue a { capability = { memory: 64 } }\n")
    tree("i.policy", HEAD + "tier { plugin priority { enable_job_order = true } }\n")
    assert lint(capsys, "w.policy")[0] == 0
    assert lint(capsys, "w.policy", "--fail-level", "warning")[0] == 1
    assert lint(capsys, "i.policy", "--fail-level", "warning")[0] == 0
    assert lint(capsys, "i.policy", "--fail-level", "info")[0] == 1


def test_quiet_prints_only_failing_findings(tree, capsys):
    tree("p.policy", FINDINGS)
    code, out, _ = lint(capsys, "p.policy", "-q")
    assert code == 1
    assert re.findall(r"\[(PD\d+)\]", out) == ["PD201"]
    assert "Found" not in out


# --- machine formats --------------------------------------------------------------------------

def test_json(tree, capsys):
    tree("p.policy", FINDINGS)
    code, out, _ = lint(capsys, "p.policy", "-o", "json")
    body = json.loads(out)
    assert code == 1
    assert body["files"] == ["p.policy"]
    assert body["summary"] == {"files": 1, "failing": 1, "error": 1, "warning": 1, "info": 1}
    assert body["diagnostics"][1] == {
        "path": "p.policy", "line": 8, "column": 7, "end_line": 8, "end_column": 8,
        "code": "PD201", "name": "duplicate-queue", "severity": "error",
        "message": "queue `a` is declared twice", "hint": "rename it or merge the two blocks",
        "notes": ["first declared at p.policy:7:7"]}
    assert [d["code"] for d in body["diagnostics"]] == ["PD521", "PD201", "PD411"]


def test_sarif_is_what_github_code_scanning_reads(tree, capsys):
    tree("sub/p.policy", FINDINGS)
    code, out, _ = lint(capsys, "sub", "-o", "sarif")
    log = json.loads(out)
    assert code == 1
    assert log["version"] == "2.1.0" and "sarif" in log["$schema"]
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "policydsl"
    ids = [rule["id"] for rule in rules]
    assert set(RULES) <= set(ids) and len(ids) == len(set(ids))
    for rule in rules:
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["text"] and rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    assert [r["ruleId"] for r in run["results"]] == ["PD521", "PD201", "PD411"]
    assert [r["level"] for r in run["results"]] == ["warning", "error", "note"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "sub/p.policy"
        region = location["region"]
        assert set(region) == {"startLine", "startColumn", "endLine", "endColumn"}
        assert all(isinstance(v, int) and v >= 1 for v in region.values())
    assert run["results"][1]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 8, "startColumn": 7, "endLine": 8, "endColumn": 8}
    pd201 = rules[ids.index("PD201")]
    assert pd201["defaultConfiguration"]["level"] == "error" and "```" in pd201["help"]["markdown"]


def test_github_workflow_commands(tree, capsys):
    tree("p.policy", FINDINGS)
    code, out, _ = lint(capsys, "p.policy", "-o", "github")
    lines = out.splitlines()
    assert code == 1 and len(lines) == 3
    assert lines[1] == ("::error file=p.policy,line=8,col=7,endLine=8,endColumn=8,title=PD201::"
                        "queue `a` is declared twice%0Ahint: rename it or merge the two blocks")
    assert lines[0].startswith("::warning file=p.policy,line=7,col=34,") and "title=PD521::" in lines[0]
    assert lines[2].startswith("::notice ")
    assert all("\n" not in line and re.match(r"::\w+ file=[^:]+::", line) for line in lines)


def test_junit_one_testcase_per_file(tree, capsys):
    tree("a/p.policy", FINDINGS)
    tree("a/ok.policy", CLEAN)
    code, out, _ = lint(capsys, "a", "-o", "junit")
    root = ET.fromstring(out.split("?>", 1)[1])
    suite = root.find("testsuite")
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert code == 1
    assert set(cases) == {"a/p.policy", "a/ok.policy"}
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = cases["a/p.policy"].find("failure")
    assert failure.get("type") == "PD201" and "a/p.policy:8:7: error[PD201]" in failure.text
    assert "PD521" in cases["a/p.policy"].find("system-out").text  # below the fail level: reported, not failing
    assert cases["a/ok.policy"].find("failure") is None


# --- exit 2 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["missing.policy"], "missing.policy: no such file or folder"),
    (["empty-folder"], "no .policy files"),
    ([], "give at least one file"),
    (["ok.policy", "--select", "PD206,PD9"], "unknown code `PD9`"),
    (["ok.policy", "--ignore", "PD101"], "cannot be disabled"),
    (["ok.policy", "--ignore", "PD201"], "cannot be disabled"),      # structural
    (["ok.policy", "--config", "nope.yaml"], "argument --config: `nope.yaml`: no such file"),
])
def test_usage_errors_exit_2(tree, capsys, args, words):
    tree("ok.policy", CLEAN)
    (Path.cwd() / "empty-folder").mkdir()
    code, out, err = lint(capsys, *args)
    assert code == 2 and words in err and out == ""


def test_bad_config_exits_2_with_its_location(tree, capsys):
    tree("team/p.policy", CLEAN)
    tree("team/.policydsl.yaml", "lint:\n  disable: [PD206]\n  severity: {PD402: loud}\n")
    code, _, err = lint(capsys, "team")
    assert code == 2
    assert "team/.policydsl.yaml:3:" in err and "error[PD200]" in err and "^" in err


# --- configuration and options ----------------------------------------------------------------

def test_nearest_config_wins_per_file(tree, capsys):
    tree(".policydsl.yaml", "lint:\n  severity: {PD521: error}\n")
    tree("strict/p.policy", HEAD + "queue a { capability = { memory: 64 } }\n")
    tree("relaxed/p.policy", HEAD + "queue a { capability = { memory: 64 } }\n")
    tree("relaxed/.policydsl.yaml", "lint:\n  disable: [memory-without-unit]\n")
    code, out, _ = lint(capsys, ".", "-o", "json")
    found = [(d["path"], d["code"], d["severity"]) for d in json.loads(out)["diagnostics"]]
    assert found == [("strict/p.policy", "PD521", "error")]
    assert code == 1


def test_explicit_config_and_config_fail_level(tree, capsys):
    tree("p.policy", HEAD + "queue a { capability = { memory: 64 } }\n")
    tree("ci.yaml", "lint:\n  fail_level: warning\n")
    assert lint(capsys, "p.policy")[0] == 0
    assert lint(capsys, "p.policy", "--config", "ci.yaml")[0] == 1
    assert lint(capsys, "p.policy", "--config", "ci.yaml", "--fail-level", "error")[0] == 0


def test_select_and_ignore(tree, capsys):
    tree("p.policy", FINDINGS)
    _, out, _ = lint(capsys, "p.policy", "-o", "json", "--select", "PD521,redundant-default")
    # A structural error (PD201) is reported whatever is selected, as a compile error would be.
    assert [d["code"] for d in json.loads(out)["diagnostics"]] == ["PD521", "PD201", "PD411"]
    code, out, _ = lint(capsys, "p.policy", "-o", "json", "--ignore", "PD521", "--ignore", "PD411")
    assert [d["code"] for d in json.loads(out)["diagnostics"]] == ["PD201"] and code == 1


def test_included_file_is_linted_with_its_includer_and_alone(tree, capsys):
    tree("pol/main.policy", HEAD.replace("version 1\n", 'version 1\ninclude "parts/shared.policy"\n')
         + "queue a { capability = { memory: SIZE } }\n")
    tree("pol/parts/shared.policy", 'policy "shared" version 1\nconst SIZE = 8Gi\ntier { }\n')
    code, out, _ = lint(capsys, "pol", "-o", "json")
    found = [(d["path"], d["code"]) for d in json.loads(out)["diagnostics"]]
    # no PD110 (missing actions) for the fragment, and its empty tier reported once
    assert found == [("pol/parts/shared.policy", "PD407")]
    assert code == 0
    # Named alone (pre-commit passes only changed files), it is still a fragment: pol/main.policy
    # includes it. A copy no policy includes is a whole policy, and lacks actions.
    code, out, _ = lint(capsys, "pol/parts/shared.policy", "-o", "json")
    assert [d["code"] for d in json.loads(out)["diagnostics"]] == ["PD407"] and code == 0
    tree("alone/shared.policy", 'policy "shared" version 1\nconst SIZE = 8Gi\ntier { }\n')
    code, out, _ = lint(capsys, "alone/shared.policy", "-o", "json")
    assert "PD110" in [d["code"] for d in json.loads(out)["diagnostics"]] and code == 1


def test_the_example_fragment_lints_clean_alone(capsys):
    code, out, err = lint(capsys, str(REPO / "examples" / "include" / "common.policy"))
    assert (code, err) == (0, "") and "no problems" in out


FRAGMENT = 'policy "shared" version 1\nconst SIZE = 8Gi\ntier { plugin gang }\n'


@pytest.mark.parametrize("where", ["main.policy", "a/main.policy", "a/b/main.policy"])
def test_a_file_without_actions_included_from_a_folder_above_is_a_fragment(tree, capsys, where):
    # The includer is not linted (not even named): found in the fragment's folder or one above it.
    main = tree(where, HEAD.replace("version 1\n", 'version 1\ninclude "X"\n'))
    fragment = tree("a/b/parts/shared.policy", FRAGMENT)
    main.write_text(main.read_text().replace('"X"', f'"{fragment.relative_to(main.parent).as_posix()}"'))
    code, out, _ = lint(capsys, "a/b/parts/shared.policy", "-o", "json")
    assert json.loads(out)["diagnostics"] == [] and code == 0


def test_a_file_included_only_from_a_sibling_folder_is_not_a_fragment(tree, capsys):
    # Includes never reach outside the includer's folder: other/main.policy cannot include it.
    tree("other/main.policy", HEAD.replace("version 1\n", 'version 1\ninclude "../parts/shared.policy"\n'))
    tree("parts/shared.policy", FRAGMENT)
    code, out, _ = lint(capsys, "parts/shared.policy", "-o", "json")
    assert "PD110" in [d["code"] for d in json.loads(out)["diagnostics"]] and code == 1


def test_a_file_marked_a_fragment_lints_alone_without_whole_policy_rules(tree, capsys):
    tree("shared.policy", "# policydsl: fragment -- included by the team policies\n" + FRAGMENT)
    code, out, _ = lint(capsys, "shared.policy", "-o", "json")
    assert json.loads(out)["diagnostics"] == [] and code == 0
    # unmarked: PD110 (no actions) and PD530 (SIZE unused), rules that need the whole policy
    tree("shared.policy", FRAGMENT)
    code, out, _ = lint(capsys, "shared.policy", "-o", "json")
    assert sorted(d["code"] for d in json.loads(out)["diagnostics"]) == ["PD110", "PD530"] and code == 1


def test_the_fragment_mark_is_not_a_misspelt_directive_but_a_misspelt_mark_is(tree, capsys):
    tree("shared.policy", "# policydsl: fragments\n" + FRAGMENT)
    code, out, _ = lint(capsys, "shared.policy", "-o", "json")
    codes = [d["code"] for d in json.loads(out)["diagnostics"]]
    assert "PD014" in codes and "PD110" in codes and code == 1


def test_a_policy_with_actions_is_never_a_fragment_by_being_included(tree, capsys):
    # It is whole on its own: whole-policy rules still judge it (here PD530, SIZE unused).
    tree("main.policy", HEAD.replace("version 1\n", 'version 1\ninclude "parts/p.policy"\n'))
    tree("parts/p.policy", 'policy "p" version 1\nactions [enqueue, allocate]\nconst SIZE = 8Gi\n'
                           "tier {\n  plugin predicates\n  plugin proportion\n}\n")
    code, out, _ = lint(capsys, "parts/p.policy", "-o", "json")
    assert "PD530" in [d["code"] for d in json.loads(out)["diagnostics"]]


def test_syntax_errors_are_findings(tree, capsys):
    tree("broken.policy", 'policy "b" version 1\nactions [enqueue,, allocate]\n')
    code, out, _ = lint(capsys, "broken.policy")
    assert code == 1 and "broken.policy:2:" in out and "[PD010]" in out


# --- rule documentation ------------------------------------------------------------------------

def test_explain_prints_the_rule_doc(capsys):
    code, out, _ = lint(capsys, "--explain", "duplicate-queue")
    assert code == 0
    assert out.startswith("PD201 duplicate-queue (error)")
    assert "Why:" in out and "Fix:" in out and "# expect: PD201" in out and "Good:" in out
    assert lint(capsys, "--explain", "PD2O1")[0] == 2


def test_list_rules_lists_every_rule(capsys):
    code, out, _ = lint(capsys, "--list-rules")
    assert code == 0
    listed = set(re.findall(r"^\s*(PD\d{3})\s", out, re.M))
    assert set(RULES) | {"PD001", "PD101"} <= listed


def test_docs_are_up_to_date_with_the_registry(capsys):
    committed = (REPO / "docs" / "lint-rules.md").read_text()
    assert committed == rules_markdown(), "regenerate: policydsl lint --rules-markdown > docs/lint-rules.md"
    code, out, _ = lint(capsys, "--rules-markdown")
    assert code == 0 and out == committed
    for code_name in RULES:
        assert f"### {code_name} " in committed


def test_pre_commit_hooks():
    hooks = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["policydsl-lint"]["entry"] == "policydsl lint"
    assert hooks["policydsl-fmt"]["entry"] == "policydsl fmt --check"
    for hook in hooks.values():
        assert re.search(hook["files"], "policies/a.policy") and not re.search(hook["files"], "a.policy.bak")


def test_entry_point_runs_as_a_process(tree):
    tree("p.policy", FINDINGS)
    done = subprocess.run([sys.executable, "-m", "policydsl", "lint", "p.policy", "-q"], capture_output=True,
                          text=True, cwd=Path.cwd(), env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1 and "[PD201]" in done.stdout and done.stderr == ""


def test_unreadable_policy_exits_2(tree, capsys, monkeypatch):
    import policydsl.loader as loader
    from policydsl.diagnostics import IO_ERROR, Span, make

    tree("ok.policy", CLEAN)
    tree("locked.policy", CLEAN)
    real = loader.read_source

    def refuse_locked(path):
        if path.name == "locked.policy":
            return None, make(IO_ERROR, f"cannot read {path}: Permission denied", Span.point(str(path), 1, 1))
        return real(path)

    monkeypatch.setattr(loader, "read_source", refuse_locked)
    code, out, _ = lint(capsys, ".")
    assert code == 2 and "locked.policy:1:1: error[PD001] cannot read locked.policy: Permission denied" in out


# --- stdin ------------------------------------------------------------------------------------

def feed_stdin(monkeypatch, data: bytes) -> None:
    import io

    class Stdin:
        buffer = io.BytesIO(data)

    monkeypatch.setattr(sys, "stdin", Stdin())


def test_dash_lints_stdin_under_its_stdin_filename_with_that_folders_config(tree, capsys, monkeypatch):
    tree("team/.policydsl.yaml", "lint:\n  disable: [PD521]\n")
    tree("team/common.policy", 'policy "common" version 1\nconst SIZE = 8Gi\n')
    feed_stdin(monkeypatch, (FINDINGS.replace("version 1\n", 'version 1\ninclude "common.policy"\n')
                             + "queue b { capability = { memory: SIZE } }\n").encode())
    code, out, _ = lint(capsys, "-", "--stdin-filename", "team/main.policy", "-o", "json")
    found = {(d["code"], d["path"]) for d in json.loads(out)["diagnostics"]}
    assert code == 1
    assert ("PD201", "team/main.policy") in found             # named as the file it stands for
    assert not any(c == "PD521" for c, _ in found)            # the folder's configuration applies
    assert {c for c, _ in found} == {"PD201", "PD411"}     # the include resolved from that folder


def test_dash_without_a_name_is_stdin_and_bad_bytes_are_located(tree, capsys, monkeypatch):
    feed_stdin(monkeypatch, CLEAN.encode())
    assert lint(capsys, "-")[0] == 0
    feed_stdin(monkeypatch, b'policy "p" version 1\n# caf\xe9\n')
    code, out, _ = lint(capsys, "-")
    assert code == 1 and "<stdin>:2:6" in out and "PD002" in out


def test_stdin_filename_also_named_as_a_file_is_a_usage_error(tree, capsys, monkeypatch):
    tree("a.policy", CLEAN)
    feed_stdin(monkeypatch, CLEAN.encode())
    code, _, err = lint(capsys, "-", "a.policy", "--stdin-filename", "a.policy")
    assert code == 2 and "named both" in err
