"""`policydsl pending QUEUE (--kubeconfig PATH | --scheduler URL)`: the queue's pending jobs in the
order the next cycle considers them (in the manner of Kueue's pending-workloads visibility)."""

from __future__ import annotations

import argparse
import sys

from policydsl.cli.flags import add_output_arguments, queue_name
from policydsl.cli.commands.live import add_connection_arguments, print_document

HELP = "list a queue's pending jobs in the order the next cycle considers them, with why each waits"
DESCRIPTION = (
    "Ask the running scheduler (--scheduler URL, or --kubeconfig: through the API server's proxy to its metrics "
    "Service) for QUEUE's jobs that wait, in the order its next cycle will consider them: position, priority, "
    "phase, minMember, minResources, waiting pods and the reason. When it does not answer, one offline cycle "
    "of --policy runs on a fresh list of the cluster. Exit 0, or 2 for an unknown queue or nothing to ask."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", type=queue_name, metavar="QUEUE", help="the queue")
    add_connection_arguments(parser)
    add_output_arguments(parser, ("table", "json", "yaml"))


def run(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from policydsl.cli.commands.queues import fetch
    from runtime.service.views import pending_document

    def offline(view):
        document = pending_document(view, args.queue)
        if document is None:
            known = ", ".join(q.name for q in view.queues) or "none"
            print(f"policydsl pending: no queue `{args.queue}` (queues: {known})", file=sys.stderr)
        return document

    try:
        document, source = fetch(args, f"/api/v1/queues/{quote(args.queue)}/pending", "pending", offline)
    except SystemExit as done:
        return int(done.code or 2)
    if args.output != "table":
        print_document(document, args.output)
        return 0
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from rich.table import Table
    from runtime.simulation.summary import console, fitted  # lazy, as rich: loaded only by this subcommand

    where = f"scheduler {source.describe()}" if source is not None else "offline cycle"
    listed = "" if document["listed"] == document["pendingJobs"] else f" ({document['listed']} listed)"
    table = Table(title=f"queue {args.queue}: {document['pendingJobs']} pending jobs{listed}; {where}, cycle "
                        f"{document['cycle']}, policy revision {document['revision']}", title_justify="left")
    for column in ("#", "JOB", "PRIORITY", "PHASE", "MINMEMBER", "MINRESOURCES", "WAITING", "REASON"):
        table.add_column(column, justify="right" if column in ("#", "PRIORITY", "MINMEMBER", "WAITING") else "left",
                         overflow="fold")
    for job in document["jobs"]:
        resources = ", ".join(f"{r} {v}" for r, v in (job["minResources"] or {}).items()) or "-"
        table.add_row(str(job["position"]), job["name"], str(job["priority"]), job["phase"], str(job["minMember"]),
                      resources, str(job["waitingPods"]), job["reason"])
    out = console(wide=200)
    parts = fitted(out, table)
    for part in parts if isinstance(parts, list) else [parts]:
        out.print(part)
    return 0
