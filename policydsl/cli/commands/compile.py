"""`policydsl compile FILE`: the validated, normalized plan as stable JSON."""

from __future__ import annotations

import argparse
import sys

from policydsl.cli.flags import add_output_arguments

HELP = "print the compiled plan as stable JSON (quantities in base units)"
DESCRIPTION = ("Compile a policy and print its plan: sorted keys, every default filled in, CPU in "
               "millicores and memory in bytes, so a pull request shows the effective change.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the policy file (or a folder with main.policy)")
    add_output_arguments(parser, ("json",))


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
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
    sys.stdout.write(result.plan.to_json())
    return 0
