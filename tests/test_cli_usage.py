"""A flag the subcommand does not know is said by the subcommand, with its usage (issue 32: the
top-level `usage: policydsl [-h] [--version] COMMAND ...` was printed for `lint --frobnicate`)."""

from __future__ import annotations

import pytest

from policydsl.cli import main


@pytest.mark.parametrize("argv, flag", [
    (["lint", "--frobnicate", "x.policy"], "--frobnicate"),
    (["fmt", "--check", "--bogus", "x.policy"], "--bogus"),
    (["simulate", "policies/volcano-default.policy", "--nope"], "--nope"),
])
def test_an_unknown_flag_is_the_subcommands_usage_error(argv, flag, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: policydsl {argv[0]} ")
    assert f"policydsl {argv[0]}: error: unrecognized arguments: {flag}" in err


def test_an_unknown_flag_before_any_command_is_the_top_levels(capsys):
    assert main(["--frobnicate"]) == 2
    assert capsys.readouterr().err.startswith("usage: policydsl [-h]")
