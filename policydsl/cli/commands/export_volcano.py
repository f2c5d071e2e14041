"""`policydsl export-volcano FILE [--queues] [--configmap]`: a policy as a Volcano config."""

from __future__ import annotations

import argparse
import sys

from policydsl.cli.flags import add_output_arguments

HELP = "print a policy as a Volcano scheduler config (and Queue objects)"
DESCRIPTION = (
    "Compile a policy and print the Volcano scheduler config that runs it: actions, tiers with "
    "plugin flags and arguments, and per-action configurations. With --queues, also print one "
    "Queue object per queue. Settings Volcano cannot express (device rules, borrowing, ...) are "
    "warnings on stderr and are left out."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the policy file (or a folder with main.policy)")
    parser.add_argument("--queues", action="store_true", help="also print the queue tree as Volcano Queue objects")
    parser.add_argument("--configmap", action="store_true",
                        help="wrap the config in the ConfigMap Volcano's chart reads (volcano-scheduler-configmap)")
    add_output_arguments(parser, ("yaml",))


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from compiler.volcano.exporter import export_volcano
    from policydsl.diagnostics import Severity, render

    result = export_volcano(args.file, queues=args.queues, configmap=args.configmap)
    for diag in result.diagnostics:
        if diag.severity >= Severity.WARNING:
            print(render(diag, result.sources), file=sys.stderr)
    if result.text is None:
        return result.exit_code
    sys.stdout.write(result.text)
    return result.exit_code
