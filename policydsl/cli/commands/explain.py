"""`policydsl explain NS/POD|NS/PODGROUP (--snapshot FILE | --kubeconfig PATH | --scheduler URL)`:
why it waits, or where it goes."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse

from policydsl.cli.flags import TOPOLOGY_LABELS_HELP, add_output_arguments, object_key, topology_labels
from policydsl.cli.commands.live import Refused, Unreachable, add_connection_arguments, offline_view, source_of

HELP = "say why a pod or PodGroup waits (failed predicates per node, queue limits, gang, devices, enqueue)"
DESCRIPTION = (
    "Report what the scheduler decided for the pod or PodGroup: the node it is bound to, or why it waits: "
    "which predicate failed on how many nodes, a queue over its capability or share (with its figures), a gang "
    "short by N pods, device memory fragmented, a job not admitted by enqueue. With --snapshot: one cycle of "
    "POLICY (default: Volcano's default configuration) on a copy of the snapshot. With --scheduler or "
    "--kubeconfig: the running scheduler's last cycle (through the API server's proxy to its metrics Service "
    "with --kubeconfig), and when it does not answer, one offline cycle on a fresh list of the cluster. "
    "Exit 0, or 2 on bad input, an unknown pod, or no scheduler and no cluster to ask."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", type=object_key, metavar="NS/NAME",
                        help="a pod or PodGroup (namespace/name; bare name: default)")
    add_connection_arguments(parser, snapshot=True)
    parser.add_argument("--topology-labels", type=topology_labels, metavar="LABELS|FILE",
                        help="with --snapshot: " + TOPOLOGY_LABELS_HELP)
    add_output_arguments(parser, ("text", "json"))


def run(args: argparse.Namespace) -> int:
    if args.topology_labels and not args.snapshot:
        print("policydsl explain: --topology-labels goes with --snapshot (a running scheduler derives with its "
              "own `run --topology-labels`)", file=sys.stderr)
        return 2
    if args.snapshot:
        return _offline_snapshot(args)
    target = args.target if "/" in args.target else f"default/{args.target}"
    try:
        source, api = source_of(args, "explain")
    except SystemExit as done:
        return int(done.code or 2)
    namespace, name = target.split("/", 1)
    try:
        document = source.get(f"/api/v1/explain/{urllib.parse.quote(namespace)}/{urllib.parse.quote(name)}")
    except Refused as err:
        print(f"policydsl explain: {err}", file=sys.stderr)
        return 2
    except Unreachable as err:
        return _offline_cluster(args, api, target, str(err))
    print(f"policydsl explain: from the scheduler ({source.describe()}): cycle {document['cycle']}, policy "
          f"{document['policy']} revision {document['revision']}, at {document['at']}", file=sys.stderr)
    if args.output == "json":
        result = dict(document["explanation"])
        result["cycle"] = {k: document[k] for k in ("cycle", "policy", "revision", "at")}
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write("\n".join(document["text"]) + "\n")
    return 0


def _print(result, output: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write("\n".join(result.lines()) + "\n")


def _offline_cluster(args: argparse.Namespace, api, target: str, why: str) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.engine.explanation import UnknownTarget

    try:
        view = offline_view(args, api, "explain", why)
    except SystemExit as done:
        return int(done.code or 2)
    try:
        result = view.explain(target)
    except UnknownTarget as err:
        print(f"policydsl explain: no pod or PodGroup `{err.target}` in the cluster"
              f"{f'; did you mean {err.suggestion}?' if err.suggestion else ''}", file=sys.stderr)
        return 2
    _print(result, args.output)
    return 0


def _workload_in(documents) -> str | None:
    """"FILE: Workload NAME" of the first simulation Workload among the documents (List items
    included), or None."""
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.simulation.workload import WORKLOAD_KIND, flatten

    for source, doc in flatten(documents):
        if isinstance(doc, dict) and doc.get("kind") == WORKLOAD_KIND:
            return f"{source}: {WORKLOAD_KIND} {(doc.get('metadata') or {}).get('name', '')}".rstrip()
    return None


def _offline_snapshot(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.cluster.objects import ObjectError, load_objects, read_documents
    from runtime.engine.session import Options
    from runtime.engine.explanation import UnknownTarget, explain
    from policydsl.cli.inputs import InputError, compile_policy
    from runtime.cluster.objects import problems_text
    from runtime.simulation.scenarios import DEFAULT_POLICY
    from runtime.cluster.topology_labels import LabelTopologyError, read_topology_labels

    try:
        plan = compile_policy(args.policy or DEFAULT_POLICY)
    except InputError as err:
        print(f"policydsl explain: {err}" if err.exit_code == 2 else str(err), file=sys.stderr)
        return err.exit_code
    try:
        documents = read_documents(args.snapshot)
        workload = _workload_in(documents)
        if workload is not None:
            print(f"policydsl explain: {workload}: a simulation workload (objects arriving over time), not a "
                  f"cluster at one moment. Look inside the simulation instead: policydsl simulate "
                  f"{args.policy or 'POLICY'} --snapshot {args.snapshot} --explain {args.target} [--at T], or write "
                  f"the cluster at a time with --at T --snapshot-out FILE and explain that", file=sys.stderr)
            return 2
        state = load_objects(documents)
        if args.topology_labels:
            state.label_topology = read_topology_labels(args.topology_labels)
        result = explain(plan, state, args.target, Options(scheduler_name=args.scheduler_name))
    except ObjectError as err:
        print(f"policydsl explain: {problems_text(err)}", file=sys.stderr)
        return 2
    except UnknownTarget as err:
        print(f"policydsl explain: {err}", file=sys.stderr)
        return 2
    except LabelTopologyError as err:     # the file changed since the flag was checked
        print(f"policydsl explain: --topology-labels: {err}", file=sys.stderr)
        return 2
    _print(result, args.output)
    return 0
