"""`policydsl lint --fix`: the fixes lint is certain of (a misspelled name with one suggestion,
unit suffixes whose meaning is not in doubt), then the formatter; what is left is reported and
decides the exit code. Nothing else in the file changes."""

from __future__ import annotations

from pathlib import Path

from policydsl.cli import main

BROKEN = """policy "fx" version 1
actions [enqueue, alocate, backfill]
tier {
  plugin predicate
  plugin proportion { enable_queue_ordr = false }
}
# the team's queue
queue a {
  capability = { memory: 512MiB, cpu: 4 }
  weigth = 2
}
queue b { guarantee = { memory: 4gi } }
"""


def lint(capsys, *argv) -> tuple[int, str, str]:
    code = main(["lint", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_fix_applies_certain_fixes_formats_and_reports_what_is_left(tmp_path: Path, capsys):
    policy = tmp_path / "p.policy"
    policy.write_text(BROKEN)
    code, out, err = lint(capsys, "--fix", policy)
    text = policy.read_text()
    for right in ("allocate", "plugin predicates", "enable_queue_order = false", "memory: 512Mi,", "weight = 2",
                  "memory: 4Gi"):
        assert right in text
    assert "# the team's queue" in text                      # comments kept
    assert "fixed `alocate` -> `allocate`" in err and "fixed 6 finding(s)" in err
    assert code == 0 and "error" not in out
    # A second run has nothing to do and leaves the file alone.
    before = policy.stat().st_mtime_ns
    code, _, err = lint(capsys, "--fix", policy)
    assert code == 0 and "fixed" not in err and policy.stat().st_mtime_ns == before


def test_a_unit_whose_meaning_is_in_doubt_is_left_and_reported(tmp_path: Path, capsys):
    policy = tmp_path / "p.policy"
    policy.write_text(BROKEN.replace("512MiB", "64GB"))
    code, out, _ = lint(capsys, "--fix", policy)
    assert "64GB" in policy.read_text() and "`64GB` is not a quantity" in out
    assert code == 1


def test_a_name_with_no_suggestion_is_left(tmp_path: Path, capsys):
    policy = tmp_path / "p.policy"
    policy.write_text(BROKEN.replace("alocate", "zzzzzz"))
    code, out, _ = lint(capsys, "--fix", policy)
    assert "zzzzzz" in policy.read_text() and "unknown action `zzzzzz`" in out and code == 1


def test_fix_refuses_stdin(capsys):
    code, _, err = lint(capsys, "--fix", "-")
    assert code == 2 and "stdin" in err


def test_without_fix_nothing_is_written(tmp_path: Path, capsys):
    policy = tmp_path / "p.policy"
    policy.write_text(BROKEN)
    code, _, _ = lint(capsys, policy)
    assert policy.read_text() == BROKEN and code == 1
