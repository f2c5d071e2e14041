"""Volcano's job controllers (vc-controller-manager) against the dev cluster, for vcjob tests.

The binary comes from the pinned Volcano release (tools/volcano/go.mod), built into the cache
by `bash .ci/install-kube.sh`; Volcano's batch CRDs (Job, Command) come from tests/integration/
crds/, copied from the same release. What it runs here, and why:

- `--controllers`: only the controllers whose objects the dev cluster has. The controllers share
  one informer factory and each waits for *all* its informers to sync, so a single controller
  watching an absent CRD (jobflow's JobFlow/JobTemplate, cronjob's CronJob, hypernode's
  HyperNode, colocation's ColocationConfiguration) would keep the job controller from ever
  starting.
- `--leader-elect=false`: one replica, and no volcano-system namespace for the Lease.
- `--scheduler-name`: read only by the PodGroup controller (PodGroups for plain pods of that
  scheduler). The job controller copies a vcjob's own `spec.schedulerName` onto its pods.
- A `root` Queue, as vc-scheduler creates at start (with `default`): the queue controller makes
  every queue a child of `root` and looks it up on each sync.
- No admission webhook runs (it needs TLS serving and a webhook configuration): it is what
  fills a vcjob's defaults (queue `default`, maxRetry, minAvailable from the replicas, the
  task's minAvailable, the svc/ssh plugins an mpi job needs), so the tests spell them out.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from polling import wait_for

from policydsl.cli import devcluster
from runtime.kube.api import ApiError, KubeApi

from .connector_helpers import VOLCANO

CRDS_DIR = Path(__file__).resolve().parent / "crds"
ROOT_QUEUE_PATH = f"{VOLCANO}/queues/root"
CONTROLLERS = ("job-controller", "pg-controller", "queue-controller", "gc-controller")
# Logged by the job controller once its informers synced and its workers run.
RUNNING_LINE = "JobController is running"


class VolcanoController:
    """vc-controller-manager in the background, its log in a file."""

    def __init__(self, binary: Path, kubeconfig: Path, scheduler_name: str, log_path: Path) -> None:
        self.scheduler_name = scheduler_name
        self.log_path = log_path
        self.argv = [
            str(binary),
            f"--kubeconfig={kubeconfig}",
            f"--scheduler-name={scheduler_name}",
            "--leader-elect=false",
            "--controllers=" + ",".join(f"+{c}" for c in CONTROLLERS),
            # V(3) logs each Job sync and PodGroup creation: what a failing test needs to read.
            "--v=3",
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> VolcanoController:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(self._running, "vc-controller-manager's job controller to run", timeout, interval=0.2)
        return self

    def _running(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"vc-controller-manager exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
        return RUNNING_LINE in self.log()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def install_crds(cluster: devcluster.DevCluster) -> list[str]:
    """Volcano's batch.volcano.sh Job and bus.volcano.sh Command, on top of deploy/crds/."""
    return devcluster.install_crds(cluster, CRDS_DIR)


def ensure_root_queue(api: KubeApi) -> bool:
    """Create the `root` Queue as vc-scheduler would (weight 1, not reclaimable); True if this
    call created it (so the caller deletes it again), False if it was there."""
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "root"},
            "spec": {"weight": 1, "reclaimable": False}}
    try:
        api.post(f"{VOLCANO}/queues", body)
    except ApiError as err:
        if err.status != 409:
            raise
        return False
    return True

