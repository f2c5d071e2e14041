"""The faults the soak injects, on a seeded schedule: each kind at least once early on (in a
shuffled order), then drawn at random, one every `interval_s`. A fault that has an end (a cordon,
a taint, a cut allocatable, a bad policy, a stopped replica) schedules its undo."""

from __future__ import annotations

import heapq
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.soak.kubelet import KubeletStandIn
from bench.soak.replicas import Replica
from bench.soak.workload import FAULT_TAINT, node_body
from policydsl.cli import devcluster
from runtime.kube.api import ApiError, KubeApi

KINDS = ("node-add", "node-delete", "node-cordon", "node-taint", "node-allocatable-cut", "apiserver-restart",
         "scheduler-kill", "leader-failover", "policy-reload-good", "policy-reload-bad", "namespace-delete")
MIN_NODES = 5  # node-delete leaves at least this many
RESTART_AFTER_S = 2.0  # a killed or stopped replica comes back after this


@dataclass(frozen=True)
class Injected:
    kind: str
    at: float  # seconds since the soak started
    detail: str


@dataclass(frozen=True)
class Policies:
    path: Path  # the file both replicas run (and watch)
    good: Sequence[str]  # variants that lint clean; a good reload moves to the next
    bad: Sequence[str]  # variants with errors, rejected by the running schedulers


@dataclass(frozen=True, order=True)
class _Undo:
    due: float
    what: str = field(compare=False)
    action: Callable[[], None] = field(compare=False)


class FaultInjector:
    def __init__(self, api: KubeApi, cluster_dir: Path, replicas: Sequence[Replica], kubelet: KubeletStandIn,
                 policies: Policies, rng: random.Random, leader: Callable[[], str],
                 temp_namespace: Callable[[], str | None], started: float, interval_s: float) -> None:
        self.api = api
        self.cluster_dir = cluster_dir
        self.replicas = {r.identity: r for r in replicas}
        self.kubelet = kubelet
        self.policies = policies
        self.rng = rng
        self.leader = leader
        self.temp_namespace = temp_namespace
        self.started = started
        self.interval_s = interval_s
        self.injected: list[Injected] = []
        self.skipped: Counter[str] = Counter()  # kind -> times it had nothing to act on
        self.errors: list[str] = []
        self._undo: list[_Undo] = []
        self._good = 0
        self._nodes_made = 0
        self._busy: set[str] = set()  # nodes with an undo pending: not picked again until it ran
        self._restarting: set[str] = set()  # replicas with a restart pending
        self.exits: list[str] = []  # replicas found exited on their own (a restart under a bad policy)
        self._lock = threading.Lock()  # the API server restart and the checker's lists
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-faults", daemon=True)
        self.disruption_until = 0.0  # time.time() until which binds may be impossible

    def start(self) -> FaultInjector:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def finish(self) -> None:
        """Undo what is still undone (the end of the soak), and have both replicas running."""
        for item in sorted(self._undo):
            self._run_undo(item)
        self._undo.clear()

    def _loop(self) -> None:
        order = list(KINDS)
        self.rng.shuffle(order)
        next_at = time.monotonic() + self.interval_s
        while not self._stop.is_set():
            now = time.monotonic()
            while self._undo and self._undo[0].due <= now:
                self._run_undo(heapq.heappop(self._undo))
            self._supervise()
            if now >= next_at:
                kind = order.pop(0) if order else self.rng.choice(KINDS)
                try:
                    detail = getattr(self, "_" + kind.replace("-", "_"))()
                except ApiError as exc:
                    self.errors.append(f"{kind}: {exc}")
                    detail = None
                if detail is None:
                    self.skipped[kind] += 1
                    if order is not None and kind in KINDS and not any(i.kind == kind for i in self.injected):
                        order.append(kind)  # not yet injected once: try again later
                else:
                    self.injected.append(Injected(kind, time.time() - self.started, detail))
                next_at = time.monotonic() + self.interval_s * self.rng.uniform(0.6, 1.4)
            self._stop.wait(0.2)

    def _supervise(self) -> None:
        """Play the kubelet for the replicas' containers: one that exited (a restart while the
        policy file was bad exits 2, as `run` refuses a bad policy at start) is started again."""
        for replica in self.replicas.values():
            if not replica.alive and replica.identity not in self._restarting:
                code = replica.proc.returncode if replica.proc is not None else None
                self.exits.append(f"{replica.identity} exited {code} at {time.time() - self.started:.0f}s")
                self._restart_later(replica)

    def _restart_later(self, replica: Replica) -> None:
        self._restarting.add(replica.identity)

        def restart() -> None:
            self._restarting.discard(replica.identity)
            replica.start()
        self._later(RESTART_AFTER_S, f"restart {replica.identity}", restart)

    def _later(self, seconds: float, what: str, action: Callable[[], None]) -> None:
        heapq.heappush(self._undo, _Undo(time.monotonic() + seconds, what, action))

    def _run_undo(self, item: _Undo) -> None:
        try:
            item.action()
        except (ApiError, devcluster.DevClusterError) as exc:
            self.errors.append(f"undo {item.what}: {exc}")

    # --- nodes --------------------------------------------------------------------------------------
    def _soak_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.api.get("/api/v1/nodes")["items"] if n["metadata"]["name"].startswith("soak-")]

    def _node_add(self) -> str:
        self._nodes_made += 1
        gpu = self.rng.random() < 0.25
        name = f"soak-add{self._nodes_made}{'-gpu' if gpu else ''}"
        create_node(self.api, node_body(name, self.rng, gpu=gpu))
        return name

    def _node_delete(self) -> str | None:
        nodes = self._soak_nodes()
        if len(nodes) <= MIN_NODES:
            return None
        name = self.rng.choice(nodes)["metadata"]["name"]
        self.api.delete(f"/api/v1/nodes/{name}")
        return name

    def _pick_plain_node(self) -> dict[str, Any] | None:
        nodes = [n for n in self._soak_nodes() if n["metadata"]["name"] not in self._busy]
        if not nodes:
            return None
        node = self.rng.choice(nodes)
        self._busy.add(node["metadata"]["name"])
        return node

    def _node_cordon(self) -> str | None:
        node = self._pick_plain_node()
        if node is None:
            return None
        name = node["metadata"]["name"]
        self.api.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}})
        self._later(self.rng.uniform(15, 40), f"uncordon {name}",
                    self._undo_node(name, f"/api/v1/nodes/{name}", {"spec": {"unschedulable": None}}))
        return name

    def _node_taint(self) -> str | None:
        node = self._pick_plain_node()
        if node is None:
            return None
        name = node["metadata"]["name"]
        effect = self.rng.choice(("NoSchedule", "NoExecute"))
        self.api.merge_patch(f"/api/v1/nodes/{name}",
                             {"spec": {"taints": [{"key": FAULT_TAINT, "value": "soak", "effect": effect}]}})
        self._later(self.rng.uniform(15, 40), f"untaint {name}",
                    self._undo_node(name, f"/api/v1/nodes/{name}", {"spec": {"taints": None}}))
        return f"{name} {FAULT_TAINT}=soak:{effect}"

    def _node_allocatable_cut(self) -> str | None:
        node = self._pick_plain_node()
        if node is None:
            return None
        name = node["metadata"]["name"]
        allocatable = dict(node["status"]["allocatable"])
        cut = {**allocatable, "cpu": "4", "memory": "16Gi"}
        self.api.merge_patch(f"/api/v1/nodes/{name}/status", {"status": {"allocatable": cut}})
        self._later(self.rng.uniform(20, 50), f"restore {name}'s allocatable",
                    self._undo_node(name, f"/api/v1/nodes/{name}/status", {"status": {"allocatable": allocatable}}))
        return f"{name} cpu {allocatable.get('cpu')} -> 4, memory {allocatable.get('memory')} -> 16Gi"

    def _undo_node(self, name: str, path: str, body: dict[str, Any]) -> Callable[[], None]:
        def undo() -> None:
            try:
                self.api.merge_patch(path, body)
            except ApiError as exc:
                if exc.status != 404:  # deleted meanwhile by node-delete: nothing to undo
                    raise
            self._busy.discard(name)
        return undo

    # --- control plane -----------------------------------------------------------------------------
    def _apiserver_restart(self) -> str:
        began = time.monotonic()
        with self._lock:
            devcluster.restart_apiserver(self.cluster_dir)
        took = time.monotonic() - began
        self.disruption_until = time.time()
        return f"down and ready again in {took:.1f}s"

    def _leader_replica(self) -> Replica | None:
        holder = self.leader()
        replica = self.replicas.get(holder)
        return replica if replica is not None and replica.alive else None

    def _scheduler_kill(self) -> str | None:
        replica = self._leader_replica()
        if replica is None:
            return None
        pid = replica.pid
        self._restarting.add(replica.identity)  # before the kill: not an exit of its own
        replica.kill()
        self._restart_later(replica)
        return f"kill -9 leader {replica.identity} (pid {pid})"

    def _leader_failover(self) -> str | None:
        replica = self._leader_replica()
        if replica is None:
            return None
        pid = replica.pid
        self._restarting.add(replica.identity)
        code = replica.terminate()
        self._restart_later(replica)
        return f"SIGTERM leader {replica.identity} (pid {pid}, exit {code})"

    def _policy_reload_good(self) -> str:
        self._good = (self._good + 1) % len(self.policies.good)
        self.policies.path.write_text(self.policies.good[self._good])
        return f"good variant {self._good}"

    def _policy_reload_bad(self) -> str:
        which = self.rng.randrange(len(self.policies.bad))
        self.policies.path.write_text(self.policies.bad[which])
        current = self.policies.good[self._good]
        self._later(self.rng.uniform(5, 15), "restore the good policy", lambda: self.policies.path.write_text(current))
        return f"bad variant {which}"

    def _namespace_delete(self) -> str | None:
        namespace = self.temp_namespace()
        if namespace is None:
            return None
        pods = self.api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        self.api.delete(f"/api/v1/namespaces/{namespace}")
        self.kubelet.namespace_deleted(namespace)
        bound = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
        return f"{namespace} with {len(pods)} pods ({bound} bound)"


def create_node(api: KubeApi, body: dict[str, Any]) -> None:
    """Create a node with its status (the API server drops status on create)."""
    created = api.post("/api/v1/nodes", body)
    if not (created.get("status") or {}).get("allocatable"):
        created["status"] = body["status"]
        api.put(f"/api/v1/nodes/{body['metadata']['name']}/status", created)
