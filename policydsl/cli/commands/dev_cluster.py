"""`policydsl dev-cluster up|down --dir DIR`: a throwaway etcd + kube-apiserver on loopback."""

from __future__ import annotations

import argparse
import sys

from policydsl.cli.flags import output_folder

HELP = "start or stop a local etcd + kube-apiserver for trying the scheduler"
DESCRIPTION = (
    "`up` starts etcd and kube-apiserver (built by .ci/install-kube.sh) on loopback ports, installs the "
    "Volcano CRDs, waits until ready, prints the kubeconfig path and returns with both running. `down` stops "
    "them and removes their data. There is no kubelet: create Node objects yourself."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--dir", required=True, type=output_folder, metavar="DIR",
                        help="where the kubeconfig, certificates and logs go")


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from policydsl.cli import devcluster

    try:
        if args.action == "up":
            print(devcluster.up(args.dir).kubeconfig)
        else:
            devcluster.down(args.dir)
    except devcluster.DevClusterError as err:
        print(f"policydsl dev-cluster: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"policydsl dev-cluster: {args.dir}: {err.strerror}", file=sys.stderr)
        return 2
    return 0
