"""The `policydsl` command. Each subcommand is a module in policydsl.cli.commands with
`HELP`, `add_arguments(parser)` and `run(args) -> int`; those modules import the compiler or
the runtime only inside `run`, so `policydsl --help` and `policydsl lint` stay fast.

Exit codes, as linters use them: 0 clean, 1 findings (or a failed check), 2 usage or I/O
error. An unexpected internal error prints one line (set POLICYDSL_DEBUG=1 for the
traceback) and exits 70.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys

from policydsl.cli.output import emit

# subcommand -> module under policydsl.cli.commands, in the order `--help` lists them
COMMANDS = {
    "lint": "lint",
    "fmt": "fmt",
    "compile": "compile",
    "import-volcano": "import_volcano",
    "export-volcano": "export_volcano",
    "simulate": "simulate",
    "diff": "diff",
    "test": "test",
    "explain": "explain",
    "queues": "queues",
    "pending": "pending",
    "run": "run",
    "dev-cluster": "dev_cluster",
}

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 70


def _command_modules():
    for name, module in COMMANDS.items():
        try:
            yield name, importlib.import_module(f"policydsl.cli.commands.{module}")
        except ModuleNotFoundError as err:
            if err.name != f"policydsl.cli.commands.{module}":
                raise
            continue  # a command not built yet is simply not offered


def build_parser() -> argparse.ArgumentParser:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from policydsl import __version__

    parser = argparse.ArgumentParser(
        prog="policydsl",
        description="Batch and AI-job scheduling for Kubernetes, declared as policy code.",
    )
    parser.add_argument("--version", action="version", version=f"policydsl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _command_modules():
        command = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # a usage error (2), or --help / --version (0): already printed
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        if getattr(args, "output_file", None):
            return _to_file(args)
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as err:  # the promise: no traceback reaches a user
        if os.environ.get("POLICYDSL_DEBUG"):
            raise
        print(f"policydsl: internal error: {type(err).__name__}: {err} "
              "(set POLICYDSL_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


def _to_file(args: argparse.Namespace) -> int:
    """Run the command with its standard output going to --output-file: written when the command
    printed something or succeeded (a policy with errors leaves an earlier file as it was)."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = int(args.handler(args) or 0)
    text = captured.getvalue()
    if (text or code == EXIT_OK) and not emit(text, args.output_file):
        return EXIT_USAGE
    return code


def entry_point() -> None:
    sys.exit(main())
