"""`policydsl queues (--kubeconfig PATH | --scheduler URL)`: every queue with its figures, as the
running scheduler's last cycle saw it (in the manner of `vcctl queue list`)."""

from __future__ import annotations

import argparse
import sys

from policydsl.cli.flags import add_output_arguments
from policydsl.cli.commands.live import (
    Refused, Unreachable, add_connection_arguments, offline_view, print_document, source_of,
)

HELP = "list the queues: weight, deserved, guarantee, capability, allocated, borrowed, share, pending jobs"
DESCRIPTION = (
    "Ask the running scheduler (--scheduler URL, or --kubeconfig: through the API server's proxy to its metrics "
    "Service) for every queue after its last cycle: weight, state, deserved, guarantee, capability, allocated, "
    "borrowed (held beyond deserved), share, pending and unschedulable jobs. When it does not answer, one "
    "offline cycle of --policy runs on a fresh list of the cluster. Exit 0, or 2 when nothing could be asked."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    add_output_arguments(parser, ("table", "json", "yaml"))


def fetch(args: argparse.Namespace, path: str, command: str, offline):
    """The document at `path` from the scheduler, else `offline(view)` of an offline cycle;
    raises SystemExit with the exit code on failure."""
    source, api = source_of(args, command)
    try:
        return source.get(path), source
    except Refused as err:
        print(f"policydsl {command}: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except Unreachable as err:
        view = offline_view(args, api, command, str(err))
        document = offline(view)
        if document is None:
            raise SystemExit(2)
        return document, None


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.service.views import queues_document

    try:
        document, source = fetch(args, "/api/v1/queues", "queues", queues_document)
    except SystemExit as done:
        return int(done.code or 2)
    if args.output != "table":
        print_document(document, args.output)
        return 0
    _table(document, source)
    return 0


def _figures(values: dict | None) -> str:
    if values is None:
        return "-"
    return "\n".join(f"{r} {v}" for r, v in values.items() if v not in ("0",)) or "-"


def _table(document: dict, source) -> None:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from rich.table import Table
    from runtime.simulation.summary import console, fitted  # lazy, as rich: loaded only by this subcommand

    where = f"scheduler {source.describe()}" if source is not None else "offline cycle"
    table = Table(title=f"queues: {where}, cycle {document['cycle']}, policy {document['policy']} "
                        f"revision {document['revision']}, {document['at']}", title_justify="left")
    for column in ("NAME", "STATE", "WEIGHT", "SHARE", "ALLOCATED", "DESERVED", "GUARANTEE", "CAPABILITY",
                   "BORROWED", "PENDING", "UNSCHEDULABLE"):
        table.add_column(column, justify="right" if column in ("WEIGHT", "SHARE", "PENDING", "UNSCHEDULABLE")
                         else "left")
    for q in document["queues"]:
        share = "-" if q["share"] is None else f"{q['share']:.2f}"
        table.add_row("  " * q["depth"] + q["name"], q["state"], str(q["weight"]), share, _figures(q["allocated"]),
                      _figures(q["deserved"]), _figures(q["guarantee"]), _figures(q["capability"]) if
                      q["capability"] else "unlimited", _figures(q["borrowed"]), str(q["pendingJobs"]),
                      str(q["unschedulableJobs"]))
    out = console(wide=200)
    parts = fitted(out, table)
    for part in parts if isinstance(parts, list) else [parts]:
        out.print(part)
