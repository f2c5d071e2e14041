"""Bad input at the edges, as every command that reads a policy meets it: a file that is not
UTF-8, an empty one, a folder with no policy in it, a path that is missing or runs through a
file, a file the system will not read. Each is a located error or a message naming the path,
exit 1 or 2, and never a traceback or an internal error (exit 70)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from policydsl.cli import main

REPO = Path(__file__).resolve().parents[1]
POLICY = str(REPO / "policies" / "volcano-default.policy")
SNAPSHOT = str(REPO / "examples")

# How each command takes a policy path.
COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "lint": lambda path: ["lint", path],
    "fmt": lambda path: ["fmt", path],
    "compile": lambda path: ["compile", path],
    "export-volcano": lambda path: ["export-volcano", path],
    "simulate": lambda path: ["simulate", path, "--cycles", "1"],
    "diff": lambda path: ["diff", POLICY, path, "--cycles", "1"],
    "explain": lambda path: ["explain", "default/x", "--snapshot", SNAPSHOT, "--policy", path],
    "run": lambda path: ["run", "--policy", path, "--cluster", f"embedded:{SNAPSHOT}", "--cycles", "1",
                         "--metrics-addr", "off"],
}


def make_input(kind: str, folder: Path) -> tuple[str, str]:
    """A bad policy path of `kind`, and what the output must say about it."""
    if kind == "not-utf8":
        path = folder / "latin1.policy"
        path.write_bytes('policy "caf\xe9" version 1\n'.encode("latin-1"))
        return str(path), f"{path}:1:12: error[PD002] invalid UTF-8 byte 0xe9"
    if kind == "empty":
        path = folder / "empty.policy"
        path.write_text("")
        return str(path), f"{path}:1:1: error[PD003]"
    if kind == "folder-without-policy":
        (folder / "notes.txt").write_text("not a policy\n")
        return str(folder), str(folder)
    if kind == "missing":
        return str(folder / "nope.policy"), str(folder / "nope.policy")
    if kind == "through-a-file":
        (folder / "file").write_text("x")
        return str(folder / "file" / "main.policy"), str(folder / "file" / "main.policy")
    if kind == "unreadable":
        # Reading /proc/self/mem at offset 0 fails with EIO: unreadable even for root, who reads
        # a mode-000 file.
        return "/proc/self/mem", "/proc/self/mem"
    raise AssertionError(kind)


KINDS = ["not-utf8", "empty", "folder-without-policy", "missing", "through-a-file", "unreadable"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc/self/mem")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_bad_policy_path_is_named_with_a_non_zero_exit(command: str, kind: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path, expected = make_input(kind, tmp_path)
    argv = COMMANDS[command](path)
    if command == "run":
        # The scheduler sets up logging and signal handlers: run it as a user does.
        done = subprocess.run([sys.executable, "-m", "policydsl", *argv], cwd=REPO, capture_output=True, text=True,
                              timeout=60)
        code, said = done.returncode, done.stdout + done.stderr
    else:
        code = main(argv)
        out, err = capsys.readouterr()
        said = out + err
    assert code in (1, 2), f"exit {code}\n{said}"
    assert expected in said, said
    assert "Traceback" not in said and "internal error" not in said


def test_fmt_of_a_folder_without_policies_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It printed nothing and exited 0, so a wrong folder in CI passed `fmt --check`.
    assert main(["fmt", "--check", str(tmp_path)]) == 2
    assert f"policydsl fmt: {tmp_path}: no .policy files in this folder" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_a_wrong_kubeconfig_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    # $KUBECONFIG set to a path that is not a file was "no cluster configuration: ... set KUBECONFIG".
    from runtime.kube.api import ConnectError, configuration

    target = tmp_path / "kubeconfig"
    if kind == "folder":
        target.mkdir()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(target), "/elsewhere"]))
    with pytest.raises(ConnectError, match="from \\$KUBECONFIG") as raised:
        configuration()
    assert str(target) in str(raised.value)
    assert ("it is a folder" if kind == "folder" else "no such file") in str(raised.value)


def test_no_kubeconfig_anywhere_says_how_to_give_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.kube.api import ConnectError, configuration

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConnectError, match="no cluster configuration: pass --kubeconfig PATH"):
        configuration()


def test_queues_without_any_cluster_configuration_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "policydsl", "queues"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 2
    assert "no cluster configuration" in done.stderr and "Traceback" not in done.stderr
