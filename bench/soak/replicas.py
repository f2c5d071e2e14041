"""The two scheduler replicas: `python -m policydsl run --leader-elect` as processes, one log file
per process instance, restarted by the fault injector after a kill or a stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LEASE_NAMESPACE = "soak-system"
LEASE_NAME = "soak-scheduler"
# Short, so that a kill -9 costs seconds, not the default 15 s: the soak wants many failovers.
LEASE_ARGS = ("--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "0.5s")


@dataclass
class Replica:
    identity: str
    policy: Path
    kubeconfig: Path
    scheduler_name: str
    logs: Path
    period: str = "0.5s"
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    pids: list[int] = field(default_factory=list)

    def start(self) -> None:
        self.starts += 1
        argv = [sys.executable, "-m", "policydsl", "run", "--policy", str(self.policy),
                "--kubeconfig", str(self.kubeconfig), "--scheduler-name", self.scheduler_name,
                "--schedule-period", self.period, "--metrics-addr", "127.0.0.1:0", "--leader-elect",
                "--lease-namespace", LEASE_NAMESPACE, "--lease-name", LEASE_NAME, "--identity", self.identity,
                *LEASE_ARGS]
        log = self.logs / f"{self.identity}.{self.starts}.log"
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                         env={**os.environ, "PYTHONPATH": str(REPO)})
        self.pids.append(self.proc.pid)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.alive and self.proc is not None else None

    def kill(self) -> None:
        """kill -9: no lease release, no last cycle."""
        if self.alive and self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM: the replica finishes its cycle and hands the lease back."""
        if not self.alive or self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=10)

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.logs.glob(f"{self.identity}.*.log")))
