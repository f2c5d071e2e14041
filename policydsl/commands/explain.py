"""`policydsl explain NS/POD|NS/PODGROUP --snapshot FILE`: why it waits, or where it goes."""

from __future__ import annotations

import argparse
import json
import sys

from policydsl.commands.flags import kube_name, nonempty, object_key

HELP = "say why a pod or PodGroup waits (failed predicates per node, queue limits, gang, devices, enqueue)"
DESCRIPTION = (
    "Run one scheduling cycle of POLICY (default: Volcano's default configuration) on a copy of the snapshot "
    "and report what it decided for the pod or PodGroup: the node it would be bound to, or why it waits: which "
    "predicate failed on how many nodes, a queue over its capability or share, a gang short by N pods, device "
    "memory fragmented, a job not admitted by enqueue. Exit 0, or 2 on bad input or an unknown pod."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", type=object_key, metavar="NS/NAME",
                        help="a pod or PodGroup (namespace/name; bare name: default)")
    parser.add_argument("--snapshot", required=True, type=nonempty("the snapshot path"),
                        metavar="PATH", help="the cluster: Kubernetes objects (file or folder)")
    parser.add_argument("--policy", type=nonempty("the policy path"), metavar="FILE",
                        help="the policy (default: Volcano's default configuration)")
    parser.add_argument("--output", choices=("text", "json"), default="text", help="output format (default text)")
    parser.add_argument("--scheduler-name", default="volcano", type=kube_name("scheduler name"), metavar="NAME",
                        help="the scheduler whose pods are scheduled (default volcano)")


def run(args: argparse.Namespace) -> int:
    from runtime.objects import ObjectError, load_path
    from runtime.session import Options
    from runtime.simulation.explanation import UnknownTarget, explain
    from runtime.simulation.inputs import InputError, compile_policy, problems_text
    from runtime.simulation.scenarios import DEFAULT_POLICY

    try:
        plan = compile_policy(args.policy or DEFAULT_POLICY)
    except InputError as err:
        print(f"policydsl explain: {err}" if err.exit_code == 2 else str(err), file=sys.stderr)
        return err.exit_code
    try:
        state = load_path(args.snapshot)
        result = explain(plan, state, args.target, Options(scheduler_name=args.scheduler_name))
    except ObjectError as err:
        print(f"policydsl explain: {problems_text(err)}", file=sys.stderr)
        return 2
    except UnknownTarget as err:
        print(f"policydsl explain: {err}", file=sys.stderr)
        return 2
    if args.output == "json":
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write("\n".join(result.lines()) + "\n")
    return 0
