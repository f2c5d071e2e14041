"""`policydsl compile FILE`: the validated, normalized plan as stable JSON."""

from __future__ import annotations

import argparse
import sys

from policydsl.cli.flags import output_file

HELP = "print the compiled plan as stable JSON (quantities in base units)"
DESCRIPTION = ("Compile a policy and print its plan: sorted keys, every default filled in, CPU in "
               "millicores and memory in bytes, so a pull request shows the effective change.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the policy file (or a folder with main.policy)")
    parser.add_argument("-o", "--output", type=output_file, help="write the plan here instead of stdout")


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from policydsl.cli.output import emit
    from compiler.pipeline import compile_file
    from policydsl.diagnostics import Severity, render

    result = compile_file(args.file)
    for diag in result.diagnostics:
        if diag.severity >= Severity.WARNING:
            print(render(diag, result.sources), file=sys.stderr)
    if result.plan is None:
        loaded = result.loaded
        io_only = loaded is not None and loaded.main is None and all(d.code == "PD001" for d in result.errors)
        return 2 if io_only else 1
    text = result.plan.to_json()
    if not emit(text, args.output):
        return 2
    return 0
