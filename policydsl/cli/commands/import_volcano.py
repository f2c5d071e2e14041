"""`policydsl import-volcano CONF [--queues QUEUES]`: a Volcano config as an equivalent policy."""

from __future__ import annotations

import argparse
import sys

from policydsl.cli.flags import add_output_arguments, existing_path, nonempty

HELP = "translate a Volcano scheduler config (and Queue objects) into a policy"
DESCRIPTION = (
    "Read a Volcano scheduler config (the raw volcano-scheduler.conf, or the ConfigMap holding it) "
    "and optionally Queue objects, and print the equivalent policy. Anything the policy cannot "
    "express is reported on stderr with its file:line:col; the exit status is 1 only for errors "
    "(the policy would behave differently), 2 when a file cannot be read. A Volcano argument that "
    "changes decisions and is not imported fails the import (exit 1, no policy) unless --allow-dropped."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="volcano-scheduler.conf, or a ConfigMap YAML that holds it")
    parser.add_argument("--queues", type=existing_path("the queue file path", "file"), metavar="FILE",
                        help="Queue objects (multi-document YAML or a List) to import as the queue tree")
    parser.add_argument("--name", type=nonempty("the policy name"),
                        help="the policy name (default: the config file's name without its suffix)")
    parser.add_argument("--allow-dropped", action="store_true",
                        help="write the policy even when arguments that change decisions are not imported; "
                             "each is a `# not imported:` comment in it (exit 0)")
    add_output_arguments(parser, ("policy",))


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from compiler.volcano.importer import import_volcano
    from policydsl.diagnostics import render

    result = import_volcano(args.config, args.queues, name=args.name, allow_dropped=args.allow_dropped)
    for diag in result.diagnostics:
        print(render(diag, result.sources), file=sys.stderr)
    if result.text is None:
        return result.exit_code or 1
    sys.stdout.write(result.text)
    return result.exit_code
