"""Every flag of every subcommand takes only what it can use: anything else is a usage error
(exit 2) naming the flag and the value, before the command does any work; never an internal
error (exit 70) or a silently different behaviour (an empty --cluster used to mean the
kubeconfig, an empty -o stdout, a negative --kube-api-qps no limit)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from policydsl.cli import build_parser, main
from policydsl.cli import flags

REPO = Path(__file__).resolve().parents[1]
POLICY = str(REPO / "policies" / "volcano-default.policy")
SNAPSHOT = str(REPO / "examples")
RUN = ["run", "--policy", POLICY, "--cluster", f"embedded:{SNAPSHOT}", "--cycles", "1"]
SIMULATE = ["simulate", POLICY, "--cycles", "1"]
DIFF = ["diff", POLICY, POLICY, "--cycles", "1"]
EXPLAIN = ["explain", "default/x", "--snapshot", SNAPSHOT]
VOLCANO_CONF = str(REPO / "tests" / "fixtures" / "volcano" / "default.conf")

BAD = [
    # policydsl run: addresses, durations, rates, counts, names, paths
    (RUN + ["--metrics-addr", "127.0.0.1:99999"], "argument --metrics-addr: `127.0.0.1:99999`: the port must be"),
    (RUN + ["--metrics-addr", "127.0.0.1:-1"], "the port must be a number from 0 to 65535"),
    (RUN + ["--metrics-addr", "127.0.0.1:http"], "the port must be a number from 0 to 65535"),
    (RUN + ["--metrics-addr", "8080"], "argument --metrics-addr: `8080` is not HOST:PORT"),
    (RUN + ["--metrics-addr", ":8080"], "argument --metrics-addr: `:8080` is not HOST:PORT"),
    (RUN + ["--metrics-addr", "999.1.1.1:80"], "`999.1.1.1` is neither an IPv4 address nor a host name"),
    (RUN + ["--metrics-addr", "bad_host:80"], "`bad_host` is neither an IPv4 address nor a host name"),
    (RUN + ["--metrics-addr", "[::1]:8080"], "IPv6 addresses are not supported"),
    (RUN + ["--schedule-period", "0"], "argument --schedule-period: `0` is not a positive duration"),
    # a value starting with `-` was taken for a flag: "expected one argument" (issue 32)
    (RUN + ["--schedule-period", "-1s"], "argument --schedule-period: `-1s` is not a positive duration"),
    (RUN + ["--schedule-period", "1e400"], "`1e400` is not a positive duration"),
    (RUN + ["--schedule-period", "99999999999999h"], "is longer than a day (24h)"),
    (RUN + ["--min-interval", "soon"], "argument --min-interval: `soon` is not a positive duration"),
    (RUN + ["--lease-duration", "0ms"], "argument --lease-duration: `0ms` is not a positive duration"),
    (RUN + ["--renew-deadline", "2d"], "argument --renew-deadline: `2d` is not a positive duration"),
    (RUN + ["--retry-period", "nan"], "argument --retry-period: `nan` is not a positive duration"),
    (RUN + ["--reload-debounce", "inf"], "argument --reload-debounce: `inf` is not a positive duration"),
    (RUN + ["--kube-api-qps", "-5"], "argument --kube-api-qps: `-5` is not a finite number of at least 0"),
    (RUN + ["--kube-api-qps", "nan"], "argument --kube-api-qps: `nan` is not a finite number"),
    (RUN + ["--kube-api-qps", "inf"], "argument --kube-api-qps: `inf` is not a finite number"),
    (RUN + ["--kube-api-burst", "0"], "argument --kube-api-burst: `0` is below 1"),
    (RUN + ["--kube-api-burst", "1.5"], "argument --kube-api-burst: `1.5` is not a whole number"),
    (["run", "--policy", POLICY, "--cycles", "-1"], "argument --cycles: `-1` is below 0"),
    (RUN + ["--scheduler-name", ""], "argument --scheduler-name: `` is not a valid scheduler name"),
    (RUN + ["--scheduler-name", "My_Scheduler"], "`My_Scheduler` is not a valid scheduler name"),
    (RUN + ["--lease-namespace", "kube.system"], "argument --lease-namespace: `kube.system` is not a valid namespace"),
    (RUN + ["--lease-name", "lease-"], "argument --lease-name: `lease-` is not a valid Lease name"),
    (RUN + ["--lease-name", "x" * 254], "is not a valid Lease name"),
    (RUN + ["--identity", " "], "argument --identity: the identity must not be empty"),
    (RUN + ["--context", ""], "argument --context: the context must not be empty"),
    (["run", "--policy", "", "--cycles", "1"], "argument --policy: the policy path must not be empty"),
    (["run", "--policy", POLICY, "--kubeconfig", ""], "argument --kubeconfig: the kubeconfig path must not be empty"),
    (["run", "--policy", POLICY, "--cluster", ""], "argument --cluster: `` is not embedded:SNAPSHOT"),
    (["run", "--policy", POLICY, "--cluster", "embedded:"], "argument --cluster: `embedded:` is not embedded:SNAPSHOT"),
    (["run", "--policy", POLICY, "--cluster", SNAPSHOT], f"argument --cluster: `{SNAPSHOT}` is not embedded:SNAPSHOT"),
    (["run", "--policy", POLICY, "--cluster", "embedded:/no/such/snapshot"],
     "argument --cluster: `/no/such/snapshot`: no such file or folder"),
    (["run", "--policy", "/no/such.policy"], "argument --policy: `/no/such.policy`: no such file or folder"),
    (["run", "--policy", POLICY, "--kubeconfig", "/no/such/kubeconfig"],
     "argument --kubeconfig: `/no/such/kubeconfig`: no such file"),
    (["run", "--policy", POLICY, "--kubeconfig", SNAPSHOT], f"argument --kubeconfig: `{SNAPSHOT}` is a folder"),
    (RUN + ["--log-level", "loud"], "argument --log-level: invalid choice: 'loud'"),
    (RUN + ["--log-format", "yaml"], "argument --log-format: invalid choice: 'yaml'"),
    # simulate and diff: counts, durations (checked by the simulator's own parser), names, paths
    (SIMULATE[:-1] + ["0"], "argument --cycles: `0` is below 1"),
    (["simulate", POLICY, "--until", "nan"], "--until: `nan` is not a finite duration"),
    (["simulate", POLICY, "--until", "1" + "0" * 400 + "s"], "is not a finite duration"),
    (SIMULATE + ["--period", "inf"], "--period: `inf` is not a finite duration"),
    (SIMULATE + ["--period", "1e-300"], "argument --period: `1e-300` is shorter than 1ms, the shortest period"),
    (SIMULATE + ["--period", "0"], "argument --period: `0` is shorter than 1ms"),
    (["simulate", POLICY, "--until", "-5m"], "argument --until: `-5m` is negative; give a time from the start"),
    (["simulate", POLICY, "--until=-5m"], "argument --until: `-5m` is negative"),
    (["diff", POLICY, POLICY, "--period", "-1s"], "argument --period: `-1s` is negative; give a period"),
    (["simulate", POLICY, "--cycles", "-1"], "argument --cycles: `-1` is below 1"),
    (["simulate", POLICY, "--until", "soon"], "argument --until: `soon` is not a duration"),
    (["simulate", POLICY, "--until", "1h30"], "argument --until: `1h30` is not a duration"),
    (SIMULATE + ["--snapshot", "/no/such/snapshot"],
     "argument --snapshot: `/no/such/snapshot`: no such file or folder"),
    (SIMULATE + ["--workload", "/no/such/workload"],
     "argument --workload: `/no/such/workload`: no such file or folder"),
    (SIMULATE + ["--scheduler-name", "Volcano"], "argument --scheduler-name: `Volcano` is not a valid scheduler name"),
    (SIMULATE + ["--snapshot", ""], "argument --snapshot: the snapshot path must not be empty"),
    (SIMULATE + ["--workload", ""], "argument --workload: the workload path must not be empty"),
    (SIMULATE + ["--report", POLICY], f"argument --report: `{POLICY}` exists and is not a folder"),
    (SIMULATE + ["--report", ""], "argument --report: the folder name must not be empty"),
    (DIFF[:-1] + ["-3"], "argument --cycles: `-3` is below 1"),
    (DIFF[:-1] + ["x"], "argument --cycles: `x` is not a whole number"),
    (DIFF + ["--period", "nan"], "argument --period: `nan` is not a finite duration"),
    (["diff", POLICY, POLICY, "--until", "-"], "argument --until: `-` is not a duration"),
    (DIFF + ["--workload", "/no/such/workload"], "argument --workload: `/no/such/workload`: no such file or folder"),
    (DIFF + ["--scheduler-name", "a..b"], "`a..b` is not a valid scheduler name"),
    (DIFF + ["--snapshot", ""], "argument --snapshot: the snapshot path must not be empty"),
    # explain
    (["explain", "a/b/c", "--snapshot", SNAPSHOT], "argument NS/NAME: `a/b/c` is not NAMESPACE/NAME or NAME"),
    (["explain", "ns/", "--snapshot", SNAPSHOT], "argument NS/NAME: `ns/` is not NAMESPACE/NAME or NAME"),
    (["explain", "", "--snapshot", SNAPSHOT], "argument NS/NAME: `` is not NAMESPACE/NAME or NAME"),
    (EXPLAIN[:-1] + [""], "argument --snapshot: the snapshot path must not be empty"),
    (EXPLAIN + ["--policy", ""], "argument --policy: the policy path must not be empty"),
    (EXPLAIN + ["--policy", "/no/such.policy"], "argument --policy: `/no/such.policy`: no such file or folder"),
    (["explain", "ns/x", "--snapshot", "/no/such/snapshot"], "argument --snapshot: `/no/such/snapshot`: no such"),
    (["explain", "ns/x", "--kubeconfig", "/no/such/kubeconfig"],
     "argument --kubeconfig: `/no/such/kubeconfig`: no such"),
    (EXPLAIN + ["--scheduler-name", "UPPER"], "`UPPER` is not a valid scheduler name"),
    (EXPLAIN + ["--scheduler", "http://127.0.0.1:8080"], "argument --scheduler: not allowed with argument --snapshot"),
    (["explain", "ns/x", "--scheduler", "127.0.0.1:8080"], "`127.0.0.1:8080` is not a scheduler address"),
    (["explain", "ns/x", "--scheduler", "http://h:1/api"], "`http://h:1/api` is not a scheduler address"),
    (["explain", "ns/x", "--kubeconfig", ""], "argument --kubeconfig: the kubeconfig path must not be empty"),
    # queues, pending
    (["queues", "--scheduler", "ftp://h"], "argument --scheduler: `ftp://h` is not a scheduler address"),
    (["queues", "--scheduler-service", "svc"], "argument --scheduler-service: `svc` is not NAMESPACE/NAME[:PORT]"),
    # ports past 65535 reached the network code (connection refused, or ValueError from urllib)
    (["queues", "--scheduler", "http://127.0.0.1:99999"], "argument --scheduler: `http://127.0.0.1:99999`: the port"),
    (["queues", "--scheduler", "http://127.0.0.1:0"], "the port must be a number from 1 to 65535"),
    (["queues", "--scheduler", "http://127.0.0.1:http"], "the port must be a number from 1 to 65535"),
    (["queues", "--scheduler", "http://:8080"], "argument --scheduler: `http://:8080` is not a scheduler address"),
    (["queues", "--scheduler", "http://h:1/?q=1"], "is not a scheduler address"),
    (["queues", "--scheduler-service", "ns/svc:99999"], "argument --scheduler-service: `ns/svc:99999`: the port must"),
    (["queues", "--scheduler-service", "ns/svc:0"], "the port must be a number from 1 to 65535 or a port name"),
    (["queues", "--scheduler-service", "ns/" + "s" * 64], "is not NAMESPACE/NAME[:PORT]"),
    (["queues", "-o", "xml"], "argument -o/--output: invalid choice: 'xml'"),
    (["pending", "a/b"], "argument QUEUE: `a/b` is not a queue name"),
    (["pending", ""], "argument QUEUE: `` is not a queue name"),
    # files written: compile, export-volcano, import-volcano
    (["compile", POLICY, "--output-file", ""], "argument --output-file: the file name must not be empty"),
    (["compile", POLICY, "--output-file", str(REPO)], f"argument --output-file: `{REPO}` is a folder"),
    (["compile", POLICY, "--output-file", "/no/such/folder/plan.json"],
     "`/no/such/folder/plan.json`: no folder `/no/such/folder`"),
    (["export-volcano", POLICY, "--output-file", ""], "argument --output-file: the file name must not be empty"),
    (["import-volcano", VOLCANO_CONF, "--output-file", str(REPO)], "is a folder"),
    (["import-volcano", VOLCANO_CONF, "--name", ""], "argument --name: the policy name must not be empty"),
    (["import-volcano", VOLCANO_CONF, "--queues", ""], "argument --queues: the queue file path must not be empty"),
    (["import-volcano", VOLCANO_CONF, "--queues", "/no/such.yaml"], "argument --queues: `/no/such.yaml`: no such file"),
    (["import-volcano", VOLCANO_CONF, "--queues", SNAPSHOT], f"argument --queues: `{SNAPSHOT}` is a folder"),
    # lint
    (["lint", "--stdin-filename", "", "-"], "argument --stdin-filename: the file name must not be empty"),
    (["lint", POLICY, "--config", ""], "argument --config: the configuration path must not be empty"),
    (["lint", POLICY, "--config", "/no/such.toml"], "argument --config: `/no/such.toml`: no such file"),
    (["lint", POLICY, "--config", SNAPSHOT], f"argument --config: `{SNAPSHOT}` is a folder"),
    (["lint", POLICY, "--format", "xml"], "argument -o/--output/--format: invalid choice: 'xml'"),
    (["lint", POLICY, "--select", ",,"], "policydsl lint: `,,` names no code"),
    (["lint", POLICY, "--ignore", ""], "policydsl lint: `` names no code"),
    (["lint", POLICY, "--select", "PD9999"], "policydsl lint: unknown code `PD9999`"),
    (["lint", POLICY, "--fail-level", "fatal"], "argument --fail-level: invalid choice: 'fatal'"),
    # dev-cluster: an empty --dir used to start a cluster in the working folder
    (["dev-cluster", "up", "--dir", ""], "argument --dir: the folder name must not be empty"),
    (["dev-cluster", "up", "--dir", POLICY], f"argument --dir: `{POLICY}` exists and is not a folder"),
    (["test", "--format", "tap"], "argument -o/--output/--format: invalid choice: 'tap'"),
    (["nonsense"], "argument COMMAND: invalid choice: 'nonsense'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(a[:1] + a[-2:])[:60] for a, _ in BAD])
def test_a_bad_flag_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str], argv: list[str],
                                               message: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and "internal error" not in err


def test_the_reported_overflow_is_a_usage_error_from_the_installed_command() -> None:
    # The case, end to end: `internal error: OverflowError` and exit 70 before.
    done = subprocess.run([sys.executable, "-m", "policydsl", *RUN, "--metrics-addr", "127.0.0.1:99999"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: policydsl run")
    assert "policydsl run: error: argument --metrics-addr" in done.stderr


def test_bare_policydsl_is_a_usage_error_with_the_help_on_stderr() -> None:
    # As Ruff (and argparse for any other usage error): nothing on stdout, exit 2. `--help` asks
    # for the help: stdout, exit 0.
    done = subprocess.run([sys.executable, "-m", "policydsl"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("usage: policydsl") and "COMMAND" in done.stderr
    done = subprocess.run([sys.executable, "-m", "policydsl", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stderr) == (0, "") and done.stdout.startswith("usage: policydsl")


def test_a_dashed_value_goes_to_its_flag_only(capsys) -> None:
    # -k takes a value: `-k -5m` selects tests named so; `-q` takes none, so `-1s` stays a path.
    assert main(["test", "-k", "-5m", "/no/such/tests"]) == 2
    assert "/no/such/tests: no such file or folder" in capsys.readouterr().err
    assert main(["lint", "-q", "-1s"]) == 2
    assert "unrecognized arguments: -1s" in capsys.readouterr().err


GOOD_RUN = [
    (["--metrics-addr", "0.0.0.0:0"], "metrics_addr", "0.0.0.0:0"),
    (["--metrics-addr", "localhost:65535"], "metrics_addr", "localhost:65535"),
    (["--metrics-addr", "scheduler.kube-system.svc.:9090"], "metrics_addr", "scheduler.kube-system.svc.:9090"),
    (["--metrics-addr", "off"], "metrics_addr", "off"),
    (["--schedule-period", "500ms"], "schedule_period", 0.5),
    (["--schedule-period", "24h"], "schedule_period", 86400.0),
    (["--lease-duration", "1.5"], "lease_duration", 1.5),
    (["--kube-api-qps", "0"], "kube_api_qps", 0.0),
    (["--kube-api-qps", "2.5"], "kube_api_qps", 2.5),
    (["--kube-api-burst", "1"], "kube_api_burst", 1),
    (["--cycles", "0"], "cycles", 0),
    (["--scheduler-name", "volcano.example.com"], "scheduler_name", "volcano.example.com"),
    (["--lease-namespace", "team-a"], "lease_namespace", "team-a"),
    (["--identity", "replica_1 (zone a)"], "identity", "replica_1 (zone a)"),
]


@pytest.mark.parametrize(("extra", "attribute", "value"), GOOD_RUN)
def test_good_values_parse_to_what_the_command_uses(extra: list[str], attribute: str, value: object) -> None:
    args = build_parser().parse_args(["run", "--policy", POLICY, *extra])
    assert getattr(args, attribute) == value


def test_the_defaults_pass_their_own_checks() -> None:
    # argparse does not run `type=` on a non-string default: each default must be valid as given.
    args = build_parser().parse_args(["run", "--policy", POLICY])
    assert flags.listen_address(args.metrics_addr) == args.metrics_addr
    assert flags.kube_name("x")(args.scheduler_name) and flags.kube_name("x")(args.lease_name)
    assert flags.kube_name("x", label=True)(args.lease_namespace)
    for seconds in (args.schedule_period, args.min_interval, args.lease_duration, args.renew_deadline,
                    args.retry_period, args.reload_debounce):
        assert 0 < seconds <= flags.MAX_DURATION_S


def test_help_and_version_exit_0_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert main(["run", "--help"]) == 0
    assert "--metrics-addr HOST:PORT" in capsys.readouterr().out


def test_a_check_names_the_smallest_value_and_what_is_wrong() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="`-2` is below 0"):
        flags.count(0)("-2")
    with pytest.raises(argparse.ArgumentTypeError, match="at most 63"):
        flags.kube_name("namespace", label=True)("a" * 64)
    assert flags.kube_name("namespace", label=True)("a" * 63) == "a" * 63
    assert flags.object_key("pod") == "pod" and flags.object_key("ns/pod") == "ns/pod"


# --- every flag of every command --------------------------------------------------------------

def command_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def value_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments that take a value (not --help, not on/off switches)."""
    return [a for a in parser._actions if a.nargs != 0 and not isinstance(a, argparse._HelpAction)]


def action_name(action: argparse.Action) -> str:
    return max(action.option_strings, key=len) if action.option_strings else action.dest


# Arguments that take any text, and why it cannot be wrong at parse time. Everything else must
# name its values (`choices`) or be checked by a function of policydsl/cli/flags.py.
FREE_TEXT = {
    # Policy files and folders: the command reports each one it cannot read as a located PD001
    # diagnostic (and lint and fmt go on with the others), or `-` is stdin.
    ("lint", "paths"), ("fmt", "paths"), ("test", "paths"), ("compile", "file"), ("export-volcano", "file"),
    ("import-volcano", "config"), ("simulate", "policy"), ("diff", "old"), ("diff", "new"),
    # Codes: checked against the registry of codes, which the compiler fills (exit 2, unknown code).
    ("lint", "--select"), ("lint", "--ignore"), ("lint", "--explain"),
    ("test", "-k"),  # a substring of test names: any text is one
}

# Enough arguments for each command to parse; a command not listed here fails the tests below.
MINIMAL = {"lint": [POLICY], "fmt": [POLICY], "compile": [POLICY], "import-volcano": [VOLCANO_CONF],
           "export-volcano": [POLICY], "simulate": [POLICY], "diff": [POLICY, POLICY], "test": [],
           "explain": ["ns/x"], "queues": [], "pending": ["q"], "dashboard": [], "run": ["--policy", POLICY],
           "dev-cluster": ["up", "--dir", str(REPO / "build" / "no-cluster-here")]}


def test_every_command_is_covered_here() -> None:
    assert set(MINIMAL) == set(command_parsers())
    for command, parser in command_parsers().items():
        parser.parse_args(MINIMAL[command])  # exits 2 (SystemExit) if MINIMAL is out of date
    named = {(command, action_name(a)) for command, parser in command_parsers().items() for a in value_actions(parser)}
    assert FREE_TEXT <= named, f"FREE_TEXT names arguments that are gone: {FREE_TEXT - named}"


def test_every_value_is_checked_at_parse_time() -> None:
    # A new numeric, address, duration or path flag without a `type=` of flags.py fails here.
    unchecked = []
    for command, parser in command_parsers().items():
        for action in value_actions(parser):
            if (command, action_name(action)) in FREE_TEXT or action.choices is not None:
                continue
            if getattr(action.type, "__module__", None) != flags.__name__:
                unchecked.append(f"policydsl {command} {action_name(action)}")
    assert not unchecked, "no check of flags.py: " + ", ".join(unchecked)


def test_every_default_passes_the_check_of_its_flag() -> None:
    # argparse runs `type=` on a default only when it is text: a number default is taken as it is.
    for command, parser in command_parsers().items():
        for action in value_actions(parser):
            if action.default is None or action.default == argparse.SUPPRESS or action.type is None:
                continue
            if action.choices is not None:
                assert action.default in action.choices, (command, action_name(action))
            elif not isinstance(action.default, list):
                action.type(str(action.default))


NASTY = ["", " ", "-", "nan", "inf", "-1", "0", "1e999", "9" * 40, "127.0.0.1:99999", "x:y:z", "\x00", "é" * 3,
         "a" * 5000, "../" * 50, "embedded:", "http://[::1", "ns/", "/"]


@pytest.mark.parametrize("command", sorted(MINIMAL))
def test_no_value_of_any_flag_raises_anything_but_a_usage_error(command: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # Parsing alone (the commands are not run): each value is taken, or exit 2 with the usage line.
    parser = command_parsers()[command]
    for action in value_actions(parser):
        if not action.option_strings:
            continue
        for value in NASTY:
            try:
                parser.parse_args([*MINIMAL[command], action.option_strings[0], value])
            except SystemExit as done:
                assert done.code == 2, (action_name(action), value)
                assert f"error: argument {'/'.join(action.option_strings)}" in capsys.readouterr().err
