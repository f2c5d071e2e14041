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
import re
import sys

from policydsl import __version__
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
    "dashboard": "dashboard",
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


# A value that starts with `-` and a digit but is no number argparse knows (`-5m`, `-1s`)
_NEGATIVE_VALUE = re.compile(r"^-\d")


def _attach_dashed_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`--until -5m` as `--until=-5m`: argparse takes `-5m` for a flag and says only "expected one
    argument"; attached, the flag's own check says what is wrong with the value."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    command = next((t for t in argv if not t.startswith("-")), None)
    target = sub.choices.get(command) if sub is not None and command is not None else None
    if target is None:
        return argv
    out: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        action = target._option_string_actions.get(token)
        if (action is not None and action.nargs is None and index + 1 < len(argv)
                and _NEGATIVE_VALUE.match(argv[index + 1])):
            out.append(f"{token}={argv[index + 1]}" if token.startswith("--") else token + argv[index + 1])
            index += 2
            continue
        if token == "--":
            out.extend(argv[index:])
            break
        out.append(token)
        index += 1
    return out


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return sub.choices.get(name) if sub is not None and name else None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        # as for any other usage error (and as Ruff does): the help on stderr, exit 2
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        args, extra = parser.parse_known_args(_attach_dashed_values(parser, argv))
        if extra:
            # The subcommand's parser says it, with its own usage line (argparse's top-level
            # parser would print `usage: policydsl [-h] ...` for a flag of `lint`).
            command = _subparser(parser, getattr(args, "command", None)) or parser
            command.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as done:  # a usage error (2), or --help / --version (0): already printed
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    if not getattr(args, "handler", None):  # options but no command (`policydsl -x` is argparse's error)
        parser.print_help(sys.stderr)
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
