"""`policydsl simulate POLICY`: run a policy on a simulated cluster and workload."""

from __future__ import annotations

import argparse
import json
import sys

from policydsl.cli.flags import (TOPOLOGY_LABELS_HELP, add_output_arguments, count, existing_path, kube_name,
                                 label_topology_input, output_folder, simulated_time, topology_labels)

HELP = "run a policy on a simulated cluster: decisions per cycle, or waits, shares and utilization over time"
DESCRIPTION = (
    "Simulate the scheduler under POLICY. With neither --snapshot nor --workload it runs a built-in example "
    "cluster and workload. --cycles N runs N scheduling cycles and prints their decisions (-o json: one "
    "JSON object per line, one line per cycle). Otherwise a discrete-event simulation runs until --until, or "
    "until nothing is left to happen, and prints per-queue waits, utilization, fairness, fragmentation, "
    "evictions and gang violations. Exit 0 on success, 1 when the policy has errors, 2 on bad input."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", metavar="POLICY", help="the policy file")
    parser.add_argument("--snapshot", type=existing_path("the snapshot path"), metavar="PATH",
                        help="the cluster at time 0: Kubernetes objects (file or folder)")
    parser.add_argument("--workload", type=existing_path("the workload path"), metavar="PATH",
                        help="Pods/PodGroups arriving over time and `kind: Workload` generators (file or folder)")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--cycles", type=count(1), metavar="N", help="run N consecutive scheduling cycles")
    limit.add_argument("--until", type=simulated_time(), metavar="T", help="simulate until time T (e.g. 90s, 30m, 2h)")
    parser.add_argument("--period", default="1s", type=simulated_time(period=True), metavar="T",
                        help="time between scheduling cycles (default 1s)")
    add_output_arguments(parser, ("text", "json"))
    parser.add_argument("--report", type=output_folder, metavar="DIR",
                        help="write an HTML report with plots to DIR/index.html")
    parser.add_argument("--scheduler-name", default="volcano", type=kube_name("scheduler name"), metavar="NAME",
                        help="schedule pods with this schedulerName (default volcano)")
    parser.add_argument("--topology-labels", type=topology_labels, metavar="LABELS|FILE", help=TOPOLOGY_LABELS_HELP)


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this run, from its parsed arguments (for the report's header)."""
    import shlex

    argv = ["policydsl", "simulate", args.policy]
    for flag, value in (("--snapshot", args.snapshot), ("--workload", args.workload), ("--cycles", args.cycles),
                        ("--until", args.until), ("--period", args.period if args.period != "1s" else None),
                        ("--scheduler-name", args.scheduler_name if args.scheduler_name != "volcano" else None),
                        ("--topology-labels", getattr(args, "topology_labels", None)),
                        ("--report", args.report)):
        if value is not None:
            argv += [flag, str(value)]
    return shlex.join(argv)


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.simulation.engine import simulate
    from policydsl.cli.inputs import InputError, compile_policy, load_inputs, run_limits
    from runtime.simulation.progress import progress_bar
    from runtime.simulation.summary import console, cycle_lines, print_summary
    from runtime.engine.session import Options

    try:
        limits = run_limits(args.cycles, args.until, args.period)
        plan = compile_policy(args.policy)
        scenario = load_inputs(plan, args.snapshot, args.workload)
        if args.topology_labels:
            scenario.initial.label_topology = label_topology_input(args.topology_labels)
    except InputError as err:
        print(f"policydsl simulate: {err}" if err.exit_code == 2 else str(err), file=sys.stderr)
        return err.exit_code

    out = console()
    as_json = args.output == "json"

    def on_cycle(outcome) -> None:
        if args.cycles is None:
            return
        if as_json:
            sys.stdout.write(outcome.decisions.to_json(indent=None) + "\n")
        else:
            for line in cycle_lines(outcome):
                out.print(line, markup=False)

    options = Options(scheduler_name=args.scheduler_name)
    with progress_bar(limits.until if limits.until is not None else scenario.last_arrival, enabled=args.cycles is None) as tick:
        result = simulate(plan, scenario, limits, options, on_cycle=on_cycle, on_progress=tick)

    if as_json and args.cycles is None:
        # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
        from runtime.simulation.summary import topology_document

        document = {"policy": plan.name, "input": scenario.description, "stopped": result.stopped,
                    **result.metrics.to_dict(), "findings": list(result.findings)}
        topology = topology_document(result)
        if topology is not None:
            document["topology"] = topology
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    elif not as_json:
        if args.cycles is not None:
            out.print()
        print_summary(out, result, plan.name, scenario.description)
    if args.report:
        # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
        from runtime.simulation.report import write_report

        try:
            page = write_report(args.report, result, plan.name, scenario.description, revision=plan.revision,
                                command=command_line(args))
        except OSError as err:
            print(f"policydsl simulate: cannot write the report to {args.report}: {err.strerror or err}",
                  file=sys.stderr)
            return 2
        print(f"report: {page}", file=sys.stderr)
    return 0
