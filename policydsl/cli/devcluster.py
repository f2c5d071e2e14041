"""A real, throwaway Kubernetes control plane for tests and benchmarks.

`up()` starts Debian's etcd and a kube-apiserver built from the k8s.io/kubernetes
Go module (see .ci/install-kube.sh) on loopback ports, installs the Volcano CRDs
from deploy/crds/ and returns. There is no kubelet and no scheduler: nodes are
plain Node objects that tests create, and whatever schedules is the thing under
test. kube-controller-manager, from the same module, runs only when asked
(`start_controller_manager`, `up --controllers`) and then only the controllers
named: e.g. the resourceclaim controller, which makes pods' ResourceClaims from
their ResourceClaimTemplates as on a real cluster. The processes are detached,
so a cluster outlives the Python process that started it; `down()` stops it by
the pids recorded in DIR/devcluster.json.

Command line, for benchmarks and poking around:

    python -m policydsl.cli.devcluster up DIR     # prints the kubeconfig path
    python -m policydsl.cli.devcluster up DIR --controllers resourceclaim-controller
    python -m policydsl.cli.devcluster down DIR
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
# The wrapper module's go.mod is the single source of truth for the version.
KUBE_GO_MOD = REPO_ROOT / "tools" / "kube" / "go.mod"
DEFAULT_CRDS_DIR = REPO_ROOT / "deploy" / "crds"
INSTALL_HINT = "run `bash .ci/install-kube.sh` from the repository root"

STATE_FILE = "devcluster.json"
CONTROLLER_MANAGER = "kube-controller-manager"
# kube-controller-manager's name (v1.37, cmd/kube-controller-manager/names) of the controller that
# makes a pod's ResourceClaims from its ResourceClaimTemplates and clears `reservedFor` of pods gone.
RESOURCECLAIM_CONTROLLER = "resourceclaim-controller"
KUBECONFIG_FILE = "kubeconfig"

# Generous: the first start of a cold apiserver on a loaded 2-core machine
# spends several seconds in post-start hooks (RBAC bootstrap, priority classes).
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10.0


class DevClusterError(RuntimeError):
    """The dev cluster cannot be started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class KubeBinaries:
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    kube_version: str


@dataclass(frozen=True)
class DevCluster:
    """A running dev cluster; also the content of DIR/devcluster.json."""

    directory: Path
    kubeconfig: Path
    server: str  # https://127.0.0.1:<port>
    token: str  # bearer token of the admin user (group system:masters)
    ca_cert: Path  # CA of the apiserver's self-generated serving cert, for verified TLS
    kube_version: str
    etcd_pid: int
    apiserver_pid: int
    etcd_client_port: int
    etcd_peer_port: int
    apiserver_port: int
    etcd_data_dir: Path  # on tmpfs when available; removed by down()
    controller_manager_pid: int = 0  # 0: not running (start_controller_manager starts it)

    def api_client(self) -> Any:
        """A new `kubernetes.client.ApiClient` authenticated as the admin user."""
        from kubernetes import client as k8s_client

        return k8s_client.ApiClient(_client_configuration(self.server, self.token, self.ca_cert))

    def to_json(self) -> str:
        return json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> DevCluster:
        raw = json.loads(text)
        for key in ("directory", "kubeconfig", "ca_cert", "etcd_data_dir"):
            raw[key] = Path(raw[key])
        return cls(**raw)


# --------------------------------------------------------------------------- binaries


def pinned_kube_version() -> str:
    """The k8s.io/kubernetes version that tools/kube/go.mod requires, e.g. "v1.37.2"."""
    for line in KUBE_GO_MOD.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "require" and parts[1] == "k8s.io/kubernetes":
            return parts[2]
    raise DevClusterError(f"no `require k8s.io/kubernetes vX.Y.Z` line in {KUBE_GO_MOD}")


def kube_bin_dir(version: str | None = None) -> Path:
    """Where .ci/install-kube.sh puts the binaries it builds (outside the repo)."""
    cache = os.environ.get("POLICYDSL_CACHE") or str(Path.home() / ".cache" / "policydsl")
    return Path(cache) / "kube" / (version or pinned_kube_version()) / "bin"


def controller_manager_binary(version: str | None = None) -> Path:
    """kube-controller-manager of the pinned version from the build cache, or how to build it."""
    path = kube_bin_dir(version) / CONTROLLER_MANAGER
    if not os.access(path, os.X_OK):
        raise DevClusterError(
            f"missing {CONTROLLER_MANAGER}: {INSTALL_HINT} (builds it from the same k8s.io/kubernetes "
            f"{version or pinned_kube_version()} module as kube-apiserver into {path.parent}; a few minutes)"
        )
    return path


def find_binaries() -> KubeBinaries:
    """Locate etcd, kube-apiserver and kube-scheduler, or say exactly how to get them.

    etcd comes from PATH (Debian's etcd-server). kube-* come only from the
    build cache of the version pinned in tools/kube/go.mod, never from PATH,
    so a test never runs against an apiserver of some other version.
    """
    version = pinned_kube_version()
    bin_dir = kube_bin_dir(version)
    etcd = shutil.which("etcd")
    apiserver, scheduler = bin_dir / "kube-apiserver", bin_dir / "kube-scheduler"
    missing = [] if etcd else ["etcd"]
    missing += [path.name for path in (apiserver, scheduler) if not os.access(path, os.X_OK)]
    if missing or etcd is None:
        raise DevClusterError(
            f"missing {', '.join(missing)}: {INSTALL_HINT} (installs Debian's etcd-server and builds "
            f"kube-apiserver and kube-scheduler {version} into {bin_dir}; the first build takes about "
            "6 minutes on 2 idle cores)"
        )
    return KubeBinaries(etcd=Path(etcd), kube_apiserver=apiserver, kube_scheduler=scheduler, kube_version=version)


# --------------------------------------------------------------------------- up / down


def up(directory: Path, *, crds_dir: Path | None = None, apiserver_args: Sequence[str] = ()) -> DevCluster:
    """Start etcd + kube-apiserver in the background and install the CRDs.

    `apiserver_args` are appended to kube-apiserver's flags (a later flag wins),
    e.g. the benchmark's `--enable-priority-and-fairness=false`.

    Everything the cluster needs lives in `directory` (kubeconfig, keys, certs,
    logs/, devcluster.json) except etcd's data, which goes to tmpfs: it is
    throwaway, and fsync on disk would dominate API latency.
    """
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    _refuse_if_running(directory)
    binaries = find_binaries()
    logs = directory / "logs"
    logs.mkdir(exist_ok=True)

    etcd_client_port, etcd_peer_port, apiserver_port = _free_ports(3)
    etcd_data_dir = Path(tempfile.mkdtemp(prefix="policydsl-etcd-", dir=_tmpfs_dir()))
    started: list[tuple[int, str]] = []
    try:
        etcd_pid = _start_etcd(binaries.etcd, etcd_data_dir, etcd_client_port, etcd_peer_port, logs)
        started.append((etcd_pid, "etcd"))
        _wait_until(
            lambda: _http_ok(f"http://127.0.0.1:{etcd_client_port}/health"),
            what="etcd /health",
            pid=(etcd_pid, "etcd"),
            log=logs / "etcd.log",
            timeout=30.0,
        )

        token = os.urandom(16).hex()
        apiserver_pid = _start_apiserver(
            binaries.kube_apiserver, directory, token, etcd_client_port, apiserver_port, logs, extra_args=apiserver_args
        )
        started.append((apiserver_pid, "kube-apiserver"))
        server = f"https://127.0.0.1:{apiserver_port}"
        _wait_until(
            lambda: _http_ok(f"{server}/readyz", token=token),
            what="kube-apiserver /readyz",
            pid=(apiserver_pid, "kube-apiserver"),
            log=logs / "kube-apiserver.log",
            timeout=READY_TIMEOUT_S,
        )

        cluster = DevCluster(
            directory=directory,
            kubeconfig=directory / KUBECONFIG_FILE,
            server=server,
            token=token,
            ca_cert=_extract_ca(directory / "pki"),
            kube_version=binaries.kube_version,
            etcd_pid=etcd_pid,
            apiserver_pid=apiserver_pid,
            etcd_client_port=etcd_client_port,
            etcd_peer_port=etcd_peer_port,
            apiserver_port=apiserver_port,
            etcd_data_dir=etcd_data_dir,
        )
        # Written before the CRDs so that down() can clean up even if that step fails.
        (directory / STATE_FILE).write_text(cluster.to_json())
        (directory / STATE_FILE).chmod(0o600)  # holds the admin token
        _write_kubeconfig(cluster.kubeconfig, server, token, cluster.ca_cert)
        install_crds(cluster, crds_dir or DEFAULT_CRDS_DIR)
        return cluster
    except BaseException:
        for pid, program in reversed(started):
            _stop_pid(pid, program)
        shutil.rmtree(etcd_data_dir, ignore_errors=True)
        (directory / STATE_FILE).unlink(missing_ok=True)
        raise


def down(directory: Path) -> None:
    """Stop the cluster recorded in `directory` (SIGTERM, then SIGKILL) and drop its etcd data.

    Idempotent: a directory without a running cluster is left as it is.
    """
    state = Path(directory).resolve() / STATE_FILE
    if not state.exists():
        return
    cluster = DevCluster.from_json(state.read_text())
    # Clients first, then the apiserver, so it does not spend its last seconds retrying a dead etcd.
    if cluster.controller_manager_pid:
        _stop_pid(cluster.controller_manager_pid, CONTROLLER_MANAGER)
    _stop_pid(cluster.apiserver_pid, "kube-apiserver")
    _stop_pid(cluster.etcd_pid, "etcd")
    shutil.rmtree(cluster.etcd_data_dir, ignore_errors=True)
    state.unlink(missing_ok=True)


def start_controller_manager(directory: Path, controllers: Sequence[str] = (RESOURCECLAIM_CONTROLLER,)) -> DevCluster:
    """Start kube-controller-manager against the cluster in `directory`, running only `controllers`
    (its `--controllers` names), wait until it serves /healthz and record its pid: `down()` or
    `stop_controller_manager` stops it. Returns the updated cluster; a running one is kept as is.

    No leader election (one instance), no service-account credentials per controller (it acts as
    the admin, as the tests do), serving on a free loopback port with a certificate it makes."""
    directory = Path(directory).resolve()
    cluster = DevCluster.from_json((directory / STATE_FILE).read_text())
    if cluster.controller_manager_pid and _alive(cluster.controller_manager_pid, CONTROLLER_MANAGER):
        return cluster
    if not controllers:
        raise DevClusterError("start_controller_manager: name at least one controller")
    binary = controller_manager_binary(cluster.kube_version)
    logs = directory / "logs"
    logs.mkdir(exist_ok=True)
    cert_dir = directory / "pki" / CONTROLLER_MANAGER
    cert_dir.mkdir(parents=True, exist_ok=True)
    (port,) = _free_ports(1)
    log = logs / f"{CONTROLLER_MANAGER}.log"
    pid = _spawn(
        [
            str(binary),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--authentication-kubeconfig={cluster.kubeconfig}",
            f"--authorization-kubeconfig={cluster.kubeconfig}",
            # The API server publishes no front-proxy CA (kube-system/extension-apiserver-authentication
            # is never filled here): without this every lookup of it logs an error.
            "--authentication-skip-lookup=true",
            f"--controllers={','.join(controllers)}",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={cert_dir}",
            "--profiling=false",
            "--v=2",  # logs each claim it creates from a template
        ],
        log,
    )
    started = DevCluster(**{**asdict(cluster), "controller_manager_pid": pid})
    (directory / STATE_FILE).write_text(started.to_json())
    try:
        # /healthz is served without authentication once its controllers run.
        _wait_until(
            lambda: _http_ok(f"https://127.0.0.1:{port}/healthz"),
            what=f"{CONTROLLER_MANAGER} /healthz",
            pid=(pid, CONTROLLER_MANAGER),
            log=log,
            timeout=READY_TIMEOUT_S,
        )
    except BaseException:
        stop_controller_manager(directory)
        raise
    return started


def stop_controller_manager(directory: Path) -> DevCluster:
    """Stop the kube-controller-manager `start_controller_manager` started (if any)."""
    directory = Path(directory).resolve()
    cluster = DevCluster.from_json((directory / STATE_FILE).read_text())
    if cluster.controller_manager_pid:
        _stop_pid(cluster.controller_manager_pid, CONTROLLER_MANAGER)
    stopped = DevCluster(**{**asdict(cluster), "controller_manager_pid": 0})
    (directory / STATE_FILE).write_text(stopped.to_json())
    return stopped


def stop_apiserver(directory: Path) -> DevCluster:
    """Stop only the kube-apiserver of the cluster in `directory`; etcd keeps the data.

    For tests of what clients do while the API server is gone; `start_apiserver` brings it
    back on the same port with the same token and certificates.
    """
    cluster = DevCluster.from_json((Path(directory).resolve() / STATE_FILE).read_text())
    _stop_pid(cluster.apiserver_pid, "kube-apiserver")
    return cluster


def start_apiserver(directory: Path) -> DevCluster:
    """Start the kube-apiserver of the cluster in `directory` again (after `stop_apiserver`),
    wait for /readyz and record its new pid. Returns the updated cluster."""
    directory = Path(directory).resolve()
    cluster = DevCluster.from_json((directory / STATE_FILE).read_text())
    if _alive(cluster.apiserver_pid, "kube-apiserver"):
        return cluster
    binaries = find_binaries()
    logs = directory / "logs"
    token = cluster.token
    pid = _start_apiserver(
        binaries.kube_apiserver, directory, token, cluster.etcd_client_port, cluster.apiserver_port, logs
    )
    restarted = DevCluster(**{**asdict(cluster), "apiserver_pid": pid})
    (directory / STATE_FILE).write_text(restarted.to_json())
    _wait_until(
        lambda: _http_ok(f"{cluster.server}/readyz", token=token),
        what="kube-apiserver /readyz after restart",
        pid=(pid, "kube-apiserver"),
        log=logs / "kube-apiserver.log",
        timeout=READY_TIMEOUT_S,
    )
    return restarted


def restart_apiserver(directory: Path) -> DevCluster:
    """`stop_apiserver` then `start_apiserver`."""
    stop_apiserver(directory)
    return start_apiserver(directory)


def compact_storage(cluster: DevCluster) -> int:
    """Drop etcd's history up to now and defragment its database; the revision compacted to.

    A benchmark run that follows another would otherwise pay for the history
    the earlier one left (deleted pods' revisions, until the API server's own
    compaction every five minutes, and the freed pages after it). Uses etcd's
    JSON gateway (/v3/...) on its loopback client port: no etcdctl needed.
    """
    base = f"http://127.0.0.1:{cluster.etcd_client_port}/v3"
    # Any read answers with the store's current revision; key "\0" (base64 "AA==") is never stored.
    revision = int(_etcd_call(f"{base}/kv/range", {"key": "AA==", "count_only": True})["header"]["revision"])
    try:
        _etcd_call(f"{base}/kv/compaction", {"revision": str(revision), "physical": True})
    except DevClusterError as exc:
        if "compacted" not in str(exc):  # the API server's compactor got there first: as good
            raise
    _etcd_call(f"{base}/maintenance/defragment", {}, timeout=120.0)
    return revision


def _etcd_call(url: str, body: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as exc:
        raise DevClusterError(f"etcd {url}: {exc.code} {exc.read().decode(errors='replace').strip()}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DevClusterError(f"etcd {url}: {exc}") from None


def install_crds(cluster: DevCluster, crds_dir: Path) -> list[str]:
    """Create (or replace) every CRD in `crds_dir`/*.yaml and wait until each is Established."""
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException

    documents = [
        doc
        for path in sorted(Path(crds_dir).glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == "CustomResourceDefinition"
    ]
    if not documents:
        raise DevClusterError(f"no CustomResourceDefinition found in {crds_dir}/*.yaml")
    names = [doc["metadata"]["name"] for doc in documents]
    with cluster.api_client() as api_client:
        api = k8s_client.ApiextensionsV1Api(api_client)
        for doc in documents:
            try:
                api.create_custom_resource_definition(doc)
            except ApiException as exc:
                if exc.status != 409:
                    raise DevClusterError(f"creating CRD {doc['metadata']['name']}: {exc.status} {exc.body}") from exc
                current = api.read_custom_resource_definition(doc["metadata"]["name"])
                doc = {**doc, "metadata": {**doc["metadata"], "resourceVersion": current.metadata.resource_version}}
                api.replace_custom_resource_definition(doc["metadata"]["name"], doc)

        def all_established() -> bool:
            for name in names:
                conditions = api.read_custom_resource_definition(name).status.conditions or []
                if not any(c.type == "Established" and c.status == "True" for c in conditions):
                    return False
            return True

        _wait_until(all_established, what=f"CRDs {names} Established", timeout=30.0)
    return names


# --------------------------------------------------------------------------- processes


def _start_etcd(etcd: Path, data_dir: Path, client_port: int, peer_port: int, logs: Path) -> int:
    client_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    return _spawn(
        [
            str(etcd),
            "--name=devcluster",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=devcluster={peer_url}",
            "--initial-cluster-state=new",
            "--logger=zap",
            "--log-level=warn",
            # As kubeadm runs etcd: a snapshot (and a truncated raft log) every 10,000 writes. This
            # etcd (3.4) keeps 100,000 raft entries in memory by default, and a benchmark writes
            # ~50,000 a run, so every run after the first carried a growing log: policydsl's (b)
            # fell from 456 to 390-420 pods/s over three runs; with 10,000, 436-477.
            "--snapshot-count=10000",
        ],
        logs / "etcd.log",
    )


def _start_apiserver(
    apiserver: Path,
    directory: Path,
    token: str,
    etcd_port: int,
    port: int,
    logs: Path,
    extra_args: Sequence[str] = (),
) -> int:
    pki = directory / "pki"
    pki.mkdir(exist_ok=True)
    sa_key, sa_pub = _service_account_keypair(pki)
    # Static token file: token,user,uid,"group". system:masters passes RBAC unconditionally.
    tokens = pki / "tokens.csv"
    tokens.write_text(f'{token},admin,admin,"system:masters"\n')
    tokens.chmod(0o600)
    return _spawn(
        [
            str(apiserver),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            # The endpoint reconciler publishes the advertise address as the
            # `kubernetes` Service's endpoints and refuses a loopback one.
            "--endpoint-reconciler-type=none",
            # The apiserver generates a CA and serving cert into this directory;
            # clients trust that CA (pki/ca.crt, see _extract_ca).
            f"--cert-dir={pki}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            # Needed only to allocate ClusterIPs for Service objects; no traffic goes there.
            "--service-cluster-ip-range=10.96.0.0/16",
            # The apiserver refuses to start without a service-account issuer and keys,
            # even though no pod here ever gets a token.
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_pub}",
            f"--service-account-signing-key-file={sa_key}",
            # These admission plugins wait on controllers that do not run here:
            # ServiceAccount rejects pods until the token controller has created the
            # namespace's "default" ServiceAccount; TaintNodesByCondition taints every
            # new Node not-ready until a kubelet reports, which fake nodes never do.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            # Schedulers and benchmarks issue thousands of binds and status writes
            # per second from few clients; don't let in-flight limits throttle them.
            "--max-requests-inflight=3000",
            "--max-mutating-requests-inflight=1500",
            "--profiling=false",
            "--v=1",
            *extra_args,
        ],
        logs / "kube-apiserver.log",
    )


def _spawn(argv: list[str], log_path: Path) -> int:
    """Start a detached process (own session, no stdin) logging to `log_path`; return its pid."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # no terminal signals; outlives this Python process
            close_fds=True,
        )
    # Keep the Popen object alive so that, while this process lives, _stop_pid can
    # reap it (a killed but unreaped child is a zombie that still "exists").
    _CHILDREN[proc.pid] = proc
    return proc.pid


_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _alive(pid: int, program: str) -> bool:
    """Whether `pid` is a live (non-zombie) process running `program`.

    Checking the program guards against pid reuse: a stale devcluster.json
    (say, after a reboot) must never get an unrelated process killed.
    """
    proc = _CHILDREN.get(pid)
    if proc is not None:
        return proc.poll() is None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv0 = cmdline.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return False
    # A zombie (state Z, empty cmdline) is dead; its parent just has not reaped it yet.
    return state != "Z" and Path(argv0).name == program


def _stop_pid(pid: int, program: str) -> None:
    """SIGTERM, wait up to STOP_TIMEOUT_S, then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5.0)):
        if not _alive(pid, program):
            break
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while _alive(pid, program) and time.monotonic() < deadline:
            time.sleep(0.05)
    _CHILDREN.pop(pid, None)
    if _alive(pid, program):
        raise DevClusterError(f"{program} (pid {pid}) survived SIGKILL")


def _refuse_if_running(directory: Path) -> None:
    state = directory / STATE_FILE
    if not state.exists():
        return
    previous = DevCluster.from_json(state.read_text())
    if _alive(previous.apiserver_pid, "kube-apiserver") or _alive(previous.etcd_pid, "etcd"):
        raise DevClusterError(f"a dev cluster is already running in {directory}; call down() on it first")
    # Left over from a crashed run: nothing runs, just drop the stale state.
    down(directory)


# --------------------------------------------------------------------------- helpers


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all held open while choosing, so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _tmpfs_dir() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _service_account_keypair(pki: Path) -> tuple[Path, Path]:
    """RSA key pair for signing service-account tokens, made with the openssl CLI once per directory."""
    key, pub = pki / "sa.key", pki / "sa.pub"
    if key.exists() and pub.exists():
        return key, pub
    if shutil.which("openssl") is None:
        raise DevClusterError("the `openssl` command is missing: apt-get install openssl")
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    key.chmod(0o600)
    return key, pub


def _extract_ca(pki: Path) -> Path:
    """Write the CA that signed the apiserver's self-generated serving cert to pki/ca.crt.

    With --cert-dir and no cert given, the apiserver makes its own CA and a
    serving cert for 127.0.0.1 and writes both, leaf first, to apiserver.crt.
    Trusting that CA gives clients verified TLS instead of skip-verify.
    """
    bundle = (pki / "apiserver.crt").read_text()
    end = "-----END CERTIFICATE-----"
    blocks = [block.strip() + "\n" + end + "\n" for block in bundle.split(end) if block.strip()]
    if len(blocks) < 2:
        raise DevClusterError(f"expected a serving cert and its CA in {pki / 'apiserver.crt'}, found {len(blocks)} certs")
    ca = pki / "ca.crt"
    ca.write_text(blocks[-1])
    return ca


def _insecure_ssl_context() -> ssl.SSLContext:
    # Only for the readiness probe: the CA is extracted once the apiserver is up.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _http_ok(url: str, token: str | None = None) -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=2.0, context=_insecure_ssl_context()) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _wait_until(
    condition: Callable[[], bool],
    *,
    what: str,
    timeout: float,
    pid: tuple[int, str] | None = None,
    log: Path | None = None,
) -> None:
    """Poll `condition` until true; fail early if the process `pid` (pid, program) died."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        if pid is not None and not _alive(*pid):
            raise DevClusterError(f"{what}: {pid[1]} (pid {pid[0]}) exited during startup{_log_tail(log)}")
        if time.monotonic() > deadline:
            raise DevClusterError(f"{what}: not ready after {timeout:.0f}s{_log_tail(log)}")
        time.sleep(0.1)


def _log_tail(log: Path | None, lines: int = 20) -> str:
    if log is None or not log.exists():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {log}:\n" + "\n".join(tail)


def _client_configuration(server: str, token: str, ca_cert: Path) -> Any:
    from kubernetes import client as k8s_client

    configuration = k8s_client.Configuration()
    configuration.host = server
    configuration.ssl_ca_cert = str(ca_cert)
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    # The urllib3 pool defaults to 4 connections; concurrent watches and writes need more.
    configuration.connection_pool_maxsize = 32
    return configuration


def _write_kubeconfig(path: Path, server: str, token: str, ca_cert: Path) -> None:
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "devcluster", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "devcluster", "context": {"cluster": "devcluster", "user": "admin"}}],
        "current-context": "devcluster",
    }
    path.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
    path.chmod(0o600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policydsl.cli.devcluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--controllers", default="",
                        help="also run kube-controller-manager with these controllers (comma-separated names, "
                             f"e.g. {RESOURCECLAIM_CONTROLLER})")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            cluster = up(args.directory)
            if args.controllers:
                try:
                    start_controller_manager(args.directory, [c for c in args.controllers.split(",") if c])
                except BaseException:
                    down(args.directory)
                    raise
            print(cluster.kubeconfig)
        else:
            down(args.directory)
    except DevClusterError as exc:
        print(f"devcluster: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
