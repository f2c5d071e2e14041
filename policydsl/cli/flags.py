"""What a command-line flag may hold: argparse `type=` checks shared by the subcommands.

Each turns the flag's text into its value or raises argparse.ArgumentTypeError; argparse then
prints the usage line and `argument --flag: <why>` and exits 2, before the command does
anything. A value that passes here can still fail where only the command can tell (a port
taken, a file unreadable); those are the command's own exit-2 errors.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import re
import urllib.parse
from collections.abc import Callable

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
# The longest period, deadline or debounce the scheduler takes: longer than any sensible setting,
# and far below what its threads can wait for at once (threading.TIMEOUT_MAX).
MAX_DURATION_S = 86_400.0

# Kubernetes object names (k8s.io/apimachinery validation): a label names a namespace, a
# subdomain names most other objects and a pod's schedulerName.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_HOSTNAME_LABEL = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$")


def duration(text: str) -> float:
    """"1s", "500ms", "2m", "1.5" (seconds) -> seconds: positive, at most a day."""
    match = _DURATION.match(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"`{text}` is not a positive duration (examples: 1s, 500ms, 2m)")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_DURATION_S:
        raise argparse.ArgumentTypeError(f"`{text}` is longer than a day (24h), the longest this takes")
    return seconds


def count(minimum: int, meaning: str = "") -> Callable[[str], int]:
    """A whole number of at least `minimum`; `meaning` says what the smallest value does, if special."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"`{text}` is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"`{text}` is below {minimum}{meaning}")
        return value

    return parse


def rate(text: str) -> float:
    """A finite number of at least 0 (per second)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"`{text}` is not a finite number of at least 0")
    return value


def listen_address(text: str) -> str:
    """HOST:PORT to listen on (port 0: any free one), or `off`. HOST is an IPv4 address or a
    host name; the address is only resolved and bound when the command starts."""
    if text == "off":
        return text
    host, colon, port = text.rpartition(":")
    if not colon or not host:
        raise argparse.ArgumentTypeError(f"`{text}` is not HOST:PORT (e.g. 127.0.0.1:8080, 0.0.0.0:0) or `off`")
    if not _port(port, allow_any=True):
        raise argparse.ArgumentTypeError(f"`{text}`: the port must be a number from 0 to 65535, got `{port}`")
    if host.startswith("[") or ":" in host:
        raise argparse.ArgumentTypeError(f"`{text}`: IPv6 addresses are not supported; use an IPv4 address "
                                         "or a host name")
    if not _is_ipv4(host) and not _is_hostname(host):
        raise argparse.ArgumentTypeError(f"`{text}`: `{host}` is neither an IPv4 address nor a host name")
    return text


def url_paths(text: str) -> tuple[str, ...]:
    """A comma-separated list of URL paths, each starting with `/` (an empty text: none), as
    kube-scheduler's --authorization-always-allow-paths."""
    paths = tuple(p.strip() for p in text.split(",") if p.strip())
    for path in paths:
        if not path.startswith("/") or any(c in path for c in "?# \t"):
            raise argparse.ArgumentTypeError(f"`{path}` is not a URL path (e.g. /healthz)")
    return paths


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def _is_hostname(host: str) -> bool:
    # All digits and dots is a malformed IPv4 address (999.1.1.1), not a name.
    if len(host) > 253 or re.fullmatch(r"[\d.]+", host):
        return False
    return all(_HOSTNAME_LABEL.match(label) and len(label) <= 63 for label in host.removesuffix(".").split("."))


def kube_name(kind: str, *, label: bool = False) -> Callable[[str], str]:
    """A name Kubernetes accepts for `kind`: a DNS-1123 subdomain, or with `label` a DNS-1123 label."""
    pattern, limit, form = (_DNS_LABEL, 63, "label") if label else (_DNS_SUBDOMAIN, 253, "subdomain")

    def parse(text: str) -> str:
        if not text or len(text) > limit or not pattern.match(text):
            raise argparse.ArgumentTypeError(
                f"`{text}` is not a valid {kind} (a DNS-1123 {form}: at most {limit} lowercase letters, digits "
                f"and '-'{', dots between parts' if not label else ''}, starting and ending with a letter or digit)")
        return text

    return parse


def object_key(value: str) -> str:
    """NAMESPACE/NAME, or a bare NAME (in the default namespace)."""
    parts = value.split("/")
    if len(parts) > 2 or not all(part.strip() for part in parts):
        raise argparse.ArgumentTypeError(f"`{value}` is not NAMESPACE/NAME or NAME")
    return value


def nonempty(what: str) -> Callable[[str], str]:
    """Any text but blank: an empty value is a mistake (a variable that expanded to nothing), not
    a request for the default, which leaving the flag out gives."""

    def parse(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"{what} must not be empty")
        return value

    return parse


def output_file(value: str) -> str:
    """A file to write: not empty, not a folder, in a folder that exists."""
    if not value:
        raise argparse.ArgumentTypeError("the file name must not be empty (leave the flag out for stdout)")
    if os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"`{value}` is a folder; give a file name")
    parent = os.path.dirname(value) or "."
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"`{value}`: no folder `{parent}` to write it in")
    return value


OUTPUT_FILE = "--output-file"


def output_format(formats: tuple[str, ...]) -> Callable[[str], str]:
    """One of `formats` (case-insensitive). -o/--output names a format in every command, as in
    kubectl; a file is --output-file. A value that looks like a file (`plan.json`, `out/x`) is
    refused with that hint rather than read as a format or written to."""

    def parse(text: str) -> str:
        if text.lower() in formats:
            return text.lower()
        choices = ", ".join(f"'{name}'" for name in formats)
        looks_like_file = bool(text) and ("." in text or "/" in text or os.sep in text or os.path.exists(text))
        hint = (f"; -o/--output names the format: did you mean {OUTPUT_FILE} {text}?" if looks_like_file
                else f"; to write to a file, use {OUTPUT_FILE} FILE")
        raise argparse.ArgumentTypeError(f"invalid choice: '{text}' (choose from {choices}){hint}")

    return parse


def add_output_arguments(parser: argparse.ArgumentParser, formats: tuple[str, ...], *,
                         aliases: tuple[str, ...] = ()) -> None:
    """The output flags every command that prints a result shares: `-o/--output FORMAT` (the first
    of `formats` by default; `aliases` are other spellings of it, such as lint's `--format`) and
    `--output-file FILE` (write the result there instead of stdout; see policydsl.cli.main)."""
    default = formats[0]
    only = len(formats) == 1
    parser.add_argument("-o", "--output", *aliases, dest="output", type=output_format(formats), default=default,
                        metavar="FORMAT",
                        help=f"output format: {default} (the only one)" if only else
                        f"output format: {', '.join(formats)} (default {default})")
    parser.add_argument(OUTPUT_FILE, dest="output_file", type=output_file, metavar="FILE",
                        help="write the output to FILE instead of stdout")


def output_folder(value: str) -> str:
    """A folder to write into, created if missing: not empty, not an existing file."""
    if not value:
        raise argparse.ArgumentTypeError("the folder name must not be empty")
    if os.path.exists(value) and not os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"`{value}` exists and is not a folder")
    return value


def existing_path(what: str, kind: str = "file or folder") -> Callable[[str], str]:
    """A path the command reads, there when it starts: not empty, and a file, a folder, or either
    (`kind`). Kept as written (a `~` is expanded only to look); read errors stay the command's."""
    if kind not in ("file", "folder", "file or folder"):
        raise ValueError(f"kind {kind!r}")

    def parse(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"{what} must not be empty")
        path = os.path.expanduser(value)
        if not os.path.exists(path):
            raise argparse.ArgumentTypeError(f"`{value}`: no such {kind}")
        if kind == "file" and os.path.isdir(path):
            raise argparse.ArgumentTypeError(f"`{value}` is a folder; give {what.removeprefix('the ')} file")
        if kind == "folder" and not os.path.isdir(path):
            raise argparse.ArgumentTypeError(f"`{value}` is not a folder")
        return value

    return parse


def embedded_cluster(value: str) -> str:
    """embedded:SNAPSHOT, a file or folder of Kubernetes objects the embedded cluster starts from."""
    scheme, colon, location = value.partition(":")
    if scheme != "embedded" or not colon or not location.strip():
        raise argparse.ArgumentTypeError(f"`{value}` is not embedded:SNAPSHOT (a file or folder of Kubernetes "
                                         "objects; leave the flag out for the kubeconfig's cluster)")
    existing_path("the snapshot")(location)
    return value


def simulated_time(*, period: bool = False) -> Callable[[str], str]:
    """A simulated time, or with `period` the time between cycles, as the simulator reads it (30s,
    10m, 1h30m, 2d, 500ms, or seconds): finite, not negative, a period at least the simulator's
    shortest. Kept as written: the simulator reads it again by the same rules, which live in
    runtime/simulation (imported only when the flag is parsed: only simulate and diff have it,
    and they run the simulator anyway)."""

    def parse(text: str) -> str:
        # imported when first used: start-up time of the CLI
        from policydsl.cli.inputs import MIN_PERIOD_S
        from runtime.simulation.workload import parse_duration

        if re.match(r"\s*-\s*[\d.]", text):
            raise argparse.ArgumentTypeError(f"`{text}` is negative; give a time from the start of the simulation "
                                             "(e.g. 5m)" if not period else f"`{text}` is negative; give a period "
                                             "(e.g. 1s)")
        try:
            seconds = parse_duration(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if period and seconds < MIN_PERIOD_S:
            raise argparse.ArgumentTypeError(f"`{text}` is shorter than {MIN_PERIOD_S * 1000:g}ms, "
                                             "the shortest period")
        return text

    return parse


TOPOLOGY_LABELS_HELP = (
    "derive HyperNodes from node labels, as Volcano's label discovery does, while the cluster has no HyperNode "
    "objects (objects win): a comma-separated label list top to bottom ending with kubernetes.io/hostname "
    "(e.g. example.com/block,example.com/rack,kubernetes.io/hostname; the label above the hostname is tier 1), "
    "or a file with Volcano's controller configuration (networkTopologyDiscovery, source: label; or its ConfigMap)")


def topology_labels(text: str) -> str:
    """--topology-labels: a label list or Volcano's discovery configuration file, checked now (a
    located error, exit 2) and kept as written: the command reads it again with the same reader."""
    # imported when the flag is parsed: only run and simulate take it
    from runtime.cluster.topology_labels import LabelTopologyError, read_topology_labels

    if not text.strip():
        raise argparse.ArgumentTypeError("the topology labels must not be empty")
    try:
        read_topology_labels(text)
    except LabelTopologyError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def label_topology_input(text: str):  # -> runtime.cluster.topology_labels.LabelTopology
    """The LabelTopology of a checked --topology-labels value, for the commands that read inputs;
    policydsl.cli.inputs.InputError (exit 2) if its file changed since the flag was checked."""
    # imported when used: only the commands that take the flag read it
    from policydsl.cli.inputs import InputError
    from runtime.cluster.topology_labels import LabelTopologyError, read_topology_labels

    try:
        return read_topology_labels(text)
    except LabelTopologyError as err:
        raise InputError(f"--topology-labels: {err}", 2) from None


def _port(text: str, *, allow_any: bool) -> bool:
    """A port number as text: 1-65535, or 0 too with `allow_any` (listen on any free port)."""
    return text.isdigit() and (0 if allow_any else 1) <= int(text) <= 65535


def scheduler_url(text: str) -> str:
    """http(s)://HOST[:PORT] of a scheduler's metrics port."""
    parsed = urllib.parse.urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.path not in ("", "/") \
            or parsed.query or parsed.fragment:
        raise argparse.ArgumentTypeError(f"`{text}` is not a scheduler address like http://127.0.0.1:8080")
    try:
        port = parsed.port  # ValueError for a port past 65535 or not a number (an internal error, later)
    except ValueError:
        port = 0
    if port == 0 and parsed.netloc.rpartition("]")[2].rpartition(":")[1]:
        raise argparse.ArgumentTypeError(f"`{text}`: the port must be a number from 1 to 65535")
    return text.rstrip("/")


_SERVICE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)/([a-z0-9]([-a-z0-9]*[a-z0-9])?)(:([-a-z0-9]+))?$")


def service_ref(text: str) -> str:
    """NAMESPACE/NAME[:PORT] of the scheduler's metrics Service: PORT is the Service port's name or
    number (1-65535)."""
    match = _SERVICE.match(text)
    if not match or (len(match.group(1)) > 63 or len(match.group(3)) > 63):
        raise argparse.ArgumentTypeError(f"`{text}` is not NAMESPACE/NAME[:PORT] "
                                         "(e.g. policydsl-system/policydsl-scheduler-metrics:metrics)")
    port = match.group(6)
    if port is not None and port.isdigit() and not _port(port, allow_any=False):
        raise argparse.ArgumentTypeError(f"`{text}`: the port must be a number from 1 to 65535 or a port name, "
                                         f"got `{port}`")
    return text


def queue_name(text: str) -> str:
    """A queue's name: the policy's (letters, digits, `_`, `-`) or a Queue object's (a path segment)."""
    if not text.strip() or "/" in text or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"`{text}` is not a queue name")
    return text


def queue_rename(text: str) -> tuple[str, str]:
    """`OLD=NEW`: two queue names (diff --rename-queue)."""
    old, sep, new = text.partition("=")
    if not sep or "=" in new:
        raise argparse.ArgumentTypeError(f"`{text}`: give OLD=NEW, two queue names")
    return queue_name(old.strip()), queue_name(new.strip())
