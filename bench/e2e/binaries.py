"""Where the benchmark's programs live, and how to get the ones that are missing.

Nothing here is in the repository: bench/e2e/build.sh builds vc-scheduler,
vc-controller-manager (for the vcjob integration tests) and the load tools into
the cache, and .ci/install-kube.sh builds kube-scheduler
(policydsl.cli.devcluster.kube_bin_dir()) and has build.sh build vc-controller-manager.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from policydsl.cli import devcluster

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parent.parent
BUILD_SCRIPT = E2E_DIR / "build.sh"
LOADTOOLS_SRC = E2E_DIR / "loadtools"
VOLCANO_GO_MOD = REPO_ROOT / "tools" / "volcano" / "go.mod"


class MissingBinary(RuntimeError):
    """A program the benchmark needs is not built; the message says how to build it."""


def cache_root() -> Path:
    return Path(os.environ.get("POLICYDSL_CACHE") or Path.home() / ".cache" / "policydsl")


def volcano_version() -> str:
    """The volcano.sh/volcano release tools/volcano/go.mod pins, e.g. "v1.14.1"."""
    for line in VOLCANO_GO_MOD.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "require" and parts[1] == "volcano.sh/volcano":
            return parts[2]
    raise MissingBinary(f"no `require volcano.sh/volcano vX.Y.Z` line in {VOLCANO_GO_MOD}")


def _volcano_binary(name: str, how: str) -> Path:
    path = cache_root() / "volcano" / volcano_version() / "bin" / name
    if not os.access(path, os.X_OK):
        raise MissingBinary(
            f"{name} {volcano_version()} is not built ({path} is missing): run "
            f"{how} (about 10 minutes the first time on 2 cores)"
        )
    return path


def vc_scheduler() -> Path:
    return _volcano_binary("vc-scheduler", "`bash bench/e2e/build.sh vc-scheduler`")


def vc_controller_manager() -> Path:
    """Volcano's job, PodGroup and Queue controllers; the vcjob integration tests run it."""
    return _volcano_binary(
        "vc-controller-manager",
        "`bash .ci/install-kube.sh` (or only `bash bench/e2e/build.sh vc-controller-manager`)",
    )


def kube_scheduler() -> Path:
    path = devcluster.kube_bin_dir() / "kube-scheduler"
    if not os.access(path, os.X_OK):
        raise MissingBinary(f"kube-scheduler is not built ({path} is missing): {devcluster.INSTALL_HINT}")
    return path


def loadtools_digest() -> str:
    """Content hash of the load tools' source; the same bytes, in the same order, as build.sh hashes."""
    files = [LOADTOOLS_SRC / "go.mod"]
    files += sorted(LOADTOOLS_SRC.rglob("*.go"), key=lambda p: "./" + p.relative_to(LOADTOOLS_SRC).as_posix())
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def loadtools_dir(build: bool = True) -> Path:
    """The directory holding `loadgen` and `rawbinder`, building them first if needed (seconds: stdlib only)."""
    bin_dir = cache_root() / "loadtools" / loadtools_digest() / "bin"
    if all(os.access(bin_dir / name, os.X_OK) for name in ("loadgen", "rawbinder")):
        return bin_dir
    if build:
        result = subprocess.run(["bash", str(BUILD_SCRIPT), "loadtools"], capture_output=True, text=True)
        if result.returncode == 0 and (bin_dir / "loadgen").exists():
            return bin_dir
        raise MissingBinary(f"building the load tools failed:\n{result.stdout}{result.stderr}".rstrip())
    raise MissingBinary(f"the load tools are not built ({bin_dir}): run `bash bench/e2e/build.sh loadtools`")
