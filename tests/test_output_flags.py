"""One output convention in every command (issue 32, point 3): `-o/--output` is always a format,
as in kubectl, and `--output-file FILE` names a file. A value of -o that looks like a file is
refused with a hint, never written to nor read as a format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policydsl.cli import build_parser, main

REPO = Path(__file__).resolve().parent.parent
POLICY = str(REPO / "policies" / "volcano-default.policy")
VOLCANO_CONF = str(REPO / "tests" / "fixtures" / "volcano" / "default.conf")
# commands that print a result -> their formats, the default first
FORMATS = {
    "lint": ["text", "json", "sarif", "github", "junit"],
    "compile": ["json"],
    "import-volcano": ["policy"],
    "export-volcano": ["yaml"],
    "simulate": ["text", "json"],
    "diff": ["text", "json"],
    "test": ["text", "json", "junit"],
    "explain": ["text", "json"],
    "queues": ["table", "json", "yaml"],
    "pending": ["table", "json", "yaml"],
}
NO_RESULT = ("fmt", "run", "dev-cluster")  # fmt prints policies (or rewrites them); the others serve


def _subparsers() -> dict:
    parser = build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


def _action(command, dest: str):
    return next((a for a in command._actions if a.dest == dest), None)


def test_every_command_with_a_result_has_the_same_two_flags() -> None:
    commands = _subparsers()
    for name, formats in FORMATS.items():
        output, output_file = _action(commands[name], "output"), _action(commands[name], "output_file")
        assert output.option_strings[:2] == ["-o", "--output"], name
        assert output.default == formats[0], name
        for fmt in formats:
            assert output.type(fmt) == fmt
        assert output_file.option_strings == ["--output-file"], name
    for name in NO_RESULT:
        options = {s for a in commands[name]._actions for s in a.option_strings}
        assert not options & {"-o", "--output", "--output-file"}, name


def test_compile_output_json_is_the_format_not_a_file(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["compile", POLICY, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["compile", POLICY, "-o", "plan.json"],
    ["export-volcano", POLICY, "-o", "out.yaml"],
    ["import-volcano", VOLCANO_CONF, "--output", "out/cluster.policy"],
    ["queues", "-o", "out.yaml"],
    ["simulate", POLICY, "--cycles", "1", "-o", "result.json"],
    ["lint", POLICY, "-o", "report.sarif"],
])
def test_a_file_given_to_o_is_refused_with_the_flag_to_use(tmp_path, monkeypatch, capsys, argv) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"did you mean --output-file {argv[-1]}?" in err
    assert [p.name for p in tmp_path.rglob("*")] == ["out"]


def test_a_word_that_is_no_format_names_the_file_flag(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["compile", POLICY, "--output", "plan"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'plan' (choose from 'json'); to write to a file, use --output-file FILE" in err
    assert list(tmp_path.iterdir()) == []


def test_formats_are_case_insensitive(capsys) -> None:
    assert main(["lint", POLICY, "-o", "JSON"]) == 0
    json.loads(capsys.readouterr().out)


def test_lint_and_test_keep_format_as_an_alias(capsys) -> None:
    assert main(["lint", POLICY, "--format", "json"]) == 0
    by_format = capsys.readouterr().out
    assert main(["lint", POLICY, "-o", "json"]) == 0
    assert capsys.readouterr().out == by_format
    assert json.loads(by_format)


@pytest.mark.parametrize("argv", [
    ["compile", POLICY],
    ["export-volcano", POLICY],
    ["lint", POLICY, "-o", "sarif"],
    ["simulate", POLICY, "--cycles", "1", "-o", "json"],
])
def test_output_file_holds_what_stdout_would(tmp_path, capsys, argv) -> None:
    assert main(argv) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "result"
    assert main(argv + ["--output-file", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert out.read_text() == printed and printed


def test_output_file_with_findings_is_written_and_the_exit_code_kept(tmp_path, capsys) -> None:
    policy = tmp_path / "p.policy"
    policy.write_text('policy "p" version 1\nactions [enqueue, allocate]\ntier { plugin predicates }\n'
                      "queue a { weight = 1 }\nqueue a { weight = 2 }\n")
    out = tmp_path / "lint.json"
    assert main(["lint", str(policy), "-o", "json", "--output-file", str(out)]) == 1
    assert any(d["code"] == "PD201" for d in json.loads(out.read_text())["diagnostics"])
