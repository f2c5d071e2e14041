"""`policydsl simulate POLICY`: run a policy on a simulated cluster and workload."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from policydsl.cli.flags import (TOPOLOGY_LABELS_HELP, add_output_arguments, count, existing_path, kube_name,
                                 label_topology_input, object_key, output_file, output_folder, simulated_time,
                                 topology_labels)

HELP = "run a policy on a simulated cluster: decisions per cycle, or waits, shares and utilization over time"
DESCRIPTION = (
    "Simulate the scheduler under POLICY. With neither --snapshot nor --workload it runs a built-in example "
    "cluster and workload. --cycles N runs N scheduling cycles and prints their decisions (-o json: one "
    "JSON object per line, one line per cycle). Otherwise a discrete-event simulation runs until --until, or "
    "until nothing is left to happen, and prints per-queue waits, utilization, fairness, fragmentation, "
    "evictions and gang violations, then findings (head-of-line blocking in admission, starved queues, jobs "
    "naming missing queues, ...) and the longest waits, each with the command to run next. --explain NS/NAME "
    "says why that pod or PodGroup waits (as `policydsl explain`) at simulated time --at T (default: the end); "
    "--snapshot-out FILE writes the cluster at --at T as a snapshot `policydsl explain --snapshot` reads. "
    "Exit 0 on success, 1 when the policy has errors, 2 on bad input."
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
    parser.add_argument("--explain", type=object_key, metavar="NS/NAME",
                        help="print why this pod or PodGroup waits (or where it runs) at --at T instead of the summary")
    parser.add_argument("--at", type=simulated_time(), metavar="T",
                        help="the simulated time --explain and --snapshot-out look at (default: the end of the run)")
    parser.add_argument("--snapshot-out", type=output_file, metavar="FILE",
                        help="write the simulated cluster at --at T as a snapshot (YAML) for `explain --snapshot`")


def command_line(args: argparse.Namespace, report: bool = True) -> str:
    """The command that reproduces this run, from its parsed arguments (for the report's header;
    without `report`, the base of the next commands the findings suggest)."""
    import shlex

    argv = ["policydsl", "simulate", args.policy]
    for flag, value in (("--snapshot", args.snapshot), ("--workload", args.workload), ("--cycles", args.cycles),
                        ("--until", args.until), ("--period", args.period if args.period != "1s" else None),
                        ("--scheduler-name", args.scheduler_name if args.scheduler_name != "volcano" else None),
                        ("--topology-labels", getattr(args, "topology_labels", None)),
                        ("--report", args.report if report else None)):
        if value is not None:
            argv += [flag, str(value)]
    return shlex.join(argv)


def _look_at(args: argparse.Namespace, limits) -> float | None:
    """--at T in seconds (None: not given), checked against the other flags; InputError (exit 2)."""
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from policydsl.cli.inputs import InputError, parse_time

    looks = args.explain is not None or args.snapshot_out is not None
    if args.at is not None and not looks:
        raise InputError("--at goes with --explain NS/NAME or --snapshot-out FILE (the time they look at)", 2)
    if looks and args.cycles is not None:
        raise InputError("--explain and --snapshot-out look at a time of the event-driven run; use --until, not "
                         "--cycles", 2)
    if args.at is None:
        return None
    at = parse_time(args.at, "--at")
    if limits.until is not None and at > limits.until:
        raise InputError(f"--at {args.at} is after --until {args.until}, the end of the run", 2)
    return at


def _when(seconds: float) -> str:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.simulation.workload import format_duration

    return format_duration(seconds)


def _snapshot_out(args: argparse.Namespace, result, scenario, policy: str) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.simulation.snapshot_out import SnapshotRefused, write_snapshot

    header = (f"The simulated cluster at {_when(result.end_time)} of `{command_line(args, report=False)}`\n"
              f"(policy {policy}). Read it with: policydsl explain NS/NAME --snapshot {args.snapshot_out}")
    try:
        write_snapshot(args.snapshot_out, result.state, scenario.documents, result.end_time, header)
    except SnapshotRefused as err:
        print(f"policydsl simulate: --snapshot-out: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"policydsl simulate: cannot write {args.snapshot_out}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(f"snapshot at {_when(result.end_time)}: {args.snapshot_out}", file=sys.stderr)
    return 0


def _explain(args: argparse.Namespace, plan, result, scenario, as_json: bool) -> int:
    """Why args.explain waits (or where it runs) in the simulated cluster at the run's end (= --at)."""
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.cluster.objects import ObjectError, problems_text
    from runtime.engine.explanation import UnknownTarget, explain
    from runtime.engine.session import Options

    at = result.end_time
    target = args.explain if "/" in args.explain else f"default/{args.explain}"
    try:
        explanation = explain(plan, result.state, target, Options(scheduler_name=args.scheduler_name, now=at))
    except UnknownTarget as err:
        arrives = min((a.time for a in scenario.arrivals if (a.pod is not None and a.pod.key == target) or
                       (a.podgroup is not None and a.podgroup.key == target)), default=None)
        if arrives is not None and arrives > at:
            why = f"it arrives at {_when(arrives)}"
        elif target in result.podgroup_phases or target in result.bind_times:
            why = "it finished before then"
        else:
            why = f"did you mean {err.suggestion}?" if err.suggestion else "no such object in the run"
        print(f"policydsl simulate: --explain: no pod or PodGroup `{target}` at {_when(at)} ({why})", file=sys.stderr)
        return 2
    except ObjectError as err:
        print(f"policydsl simulate: --explain: {problems_text(err)}", file=sys.stderr)
        return 2
    if as_json:
        document = {**explanation.to_dict(), "at": at}
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(f"at {_when(at)} of the simulation:\n" + "\n".join(explanation.lines()) + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.simulation.engine import simulate
    from policydsl.cli.inputs import InputError, compile_policy, load_inputs, run_limits
    from runtime.simulation.progress import progress_bar
    from runtime.simulation.summary import console, cycle_lines, print_summary
    from runtime.engine.session import Options

    try:
        limits = run_limits(args.cycles, args.until, args.period)
        at = _look_at(args, limits)
        if at is not None:
            limits = dataclasses.replace(limits, until=at)
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

    if args.snapshot_out:
        code = _snapshot_out(args, result, scenario, plan.name)
        if code:
            return code
    if args.explain:
        # the explanation instead of the summary (a --report is still written)
        code = _explain(args, plan, result, scenario, as_json)
        if code:
            return code
    elif as_json and args.cycles is None:
        # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
        from runtime.simulation.summary import findings_document, topology_document

        findings, waits = findings_document(result, command_line(args, report=False))
        document = {"policy": plan.name, "input": scenario.description, "stopped": result.stopped,
                    **result.metrics.to_dict(), "findings": findings, "longest_waits": waits}
        topology = topology_document(result)
        if topology is not None:
            document["topology"] = topology
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    elif not as_json:
        if args.cycles is not None:
            out.print()
        print_summary(out, result, plan.name, scenario.description, command_line(args, report=False))
    if args.report:
        # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
        from runtime.simulation.report import write_report

        try:
            page = write_report(args.report, result, plan.name, scenario.description, revision=plan.revision,
                                command=command_line(args), base=command_line(args, report=False))
        except OSError as err:
            print(f"policydsl simulate: cannot write the report to {args.report}: {err.strerror or err}",
                  file=sys.stderr)
            return 2
        print(f"report: {page}", file=sys.stderr)
    return 0
