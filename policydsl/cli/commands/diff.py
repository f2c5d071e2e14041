"""`policydsl diff OLD.policy NEW.policy`: what a policy change changes on the same inputs."""

from __future__ import annotations

import argparse
import json
import sys

from policydsl.cli.flags import (TOPOLOGY_LABELS_HELP, add_output_arguments, count, existing_path, kube_name,
                                 label_topology_input, queue_rename, simulated_time, topology_labels)

HELP = "compare two policies on the same cluster and workload: placements that differ and metric deltas"
DESCRIPTION = (
    "Simulate OLD and NEW on the same inputs (as `policydsl simulate`: --snapshot, --workload, --cycles or "
    "--until; the built-in example when neither input is given) and print the pods placed on a different node "
    "(first binding of each pod) and how every metric moved. Exit 0 when nothing differs, 1 when something "
    "does, 2 on bad input or a policy with errors (as diff(1))."
)
SHOWN = 40     # placement changes listed in text output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="OLD", help="the policy as it is")
    parser.add_argument("new", metavar="NEW", help="the policy as proposed")
    parser.add_argument("--snapshot", type=existing_path("the snapshot path"), metavar="PATH",
                        help="the cluster at time 0 (file or folder)")
    parser.add_argument("--workload", type=existing_path("the workload path"), metavar="PATH",
                        help="the arriving workload (file or folder)")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--cycles", type=count(1), metavar="N", help="compare N consecutive scheduling cycles")
    limit.add_argument("--until", type=simulated_time(), metavar="T", help="simulate until time T (e.g. 30m, 2h)")
    parser.add_argument("--period", default="1s", type=simulated_time(period=True), metavar="T",
                        help="time between scheduling cycles (default 1s)")
    add_output_arguments(parser, ("text", "json"))
    parser.add_argument("--topology-labels", type=topology_labels, metavar="LABELS|FILE", help=TOPOLOGY_LABELS_HELP)
    parser.add_argument("--scheduler-name", default="volcano", type=kube_name("scheduler name"), metavar="NAME",
                        help="schedule pods with this schedulerName (default volcano)")
    parser.add_argument("--rename-queue", action="append", default=[], type=queue_rename, metavar="OLD=NEW",
                        help="NEW names OLD's queue (a migration that renames queues): the NEW run's inputs put "
                             "OLD's jobs in NEW, and OLD's figures compare with NEW's (repeatable)")


def _value(value: float | None, unit: str) -> str:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.simulation.summary import percent, wait_text

    if value is None:
        return "-"
    if unit == "s":
        return wait_text(value)
    if unit == "%":
        return percent(value)
    return f"{value:g}" if value == int(value) else f"{value:.3f}"


def _delta(value: float | None, unit: str) -> str:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.simulation.workload import format_duration

    if value is None:
        return "-"
    sign = "+" if value > 0 else "-" if value < 0 else "±"
    size = abs(value)
    if unit == "s":
        return sign + format_duration(size)
    if unit == "%":
        return f"{sign}{size * 100:.1f}pp"
    return sign + (f"{size:g}" if size == int(size) else f"{size:.3f}")


def run(args: argparse.Namespace) -> int:
    from rich import box
    from rich.table import Table

    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.engine.session import Options
    from runtime.simulation.comparison import compare
    from runtime.simulation.engine import simulate
    from policydsl.cli.inputs import InputError, compile_policy, load_inputs, run_limits
    from runtime.simulation.summary import console, fitted

    renamed = dict(args.rename_queue)
    try:
        limits = run_limits(args.cycles, args.until, args.period)
        runs = []
        for path in (args.old, args.new):
            plan = compile_policy(path)
            if path == args.new and renamed:
                unknown = sorted(n for n in renamed.values() if plan.queue(n) is None)
                if unknown:
                    raise InputError(f"--rename-queue: {', '.join(unknown)} is not a queue of {args.new}")
            scenario = load_inputs(plan, args.snapshot, args.workload, renamed if path == args.new else None)
            if args.topology_labels:
                scenario.initial.label_topology = label_topology_input(args.topology_labels)
            runs.append((plan, scenario))
    except InputError as err:
        print(f"policydsl diff: {err}" if err.exit_code == 2 else str(err), file=sys.stderr)
        return 2

    options = Options(scheduler_name=args.scheduler_name)
    old, new = (simulate(plan, scenario, limits, options) for plan, scenario in runs)
    result = compare(old, new, renamed)
    if args.output == "json":
        sys.stdout.write(json.dumps({"old": runs[0][0].name, "new": runs[1][0].name, **result.to_dict()},
                                    indent=2, sort_keys=True) + "\n")
        return 1 if result.changed else 0

    out = console()
    out.print(f"{args.old} ({runs[0][0].name}) -> {args.new} ({runs[1][0].name}) on {runs[0][1].description}")
    if result.placements:
        out.print(f"\n{len(result.placements)} of {result.pods} pods placed differently:")
        for change in result.placements[:SHOWN]:
            out.print(f"  {change.pod}: {change.old or 'not bound'} -> {change.new or 'not bound'}", markup=False)
        if len(result.placements) > SHOWN:
            out.print(f"  ... and {len(result.placements) - SHOWN} more (-o json lists them all)")
    else:
        out.print(f"\nevery one of the {result.pods} bound pods is placed the same")
    changed = [m for m in result.metrics if m.changed]
    if changed:
        table = Table(box=box.SIMPLE, show_edge=False, title="metrics that changed", title_justify="left")
        for column in ("metric", "old", "new", "change"):
            table.add_column(column, justify="left" if column == "metric" else "right", overflow="fold")
        for m in changed:
            table.add_row(m.name, _value(m.old, m.unit), _value(m.new, m.unit), _delta(m.delta, m.unit))
        out.print()
        parts = fitted(out, table)
        for part in parts if isinstance(parts, list) else [parts]:
            out.print(part)
    out.print(f"{len(result.metrics) - len(changed)} of {len(result.metrics)} metrics unchanged")
    return 1 if result.changed else 0
