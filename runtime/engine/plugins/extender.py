"""extender: an HTTP extender asked at the extension points, as Volcano's extender plugin.

Each verb the policy names is a POST of Volcano's JSON body to `<url_prefix>/<verb>`
(runtime.cluster.extenderclient: the bounds on time per call and per cycle):
- on_session_open_verb: {Jobs, Nodes, Queues, NamespaceInfo, RevocableNodes, NodeList} as a cycle opens;
  on_session_close_verb: {} as it closes (its failure is only logged, as Volcano's);
- predicate_verb: {task, node} per node; an answer whose `status` (the error message) is not empty
  fails the node with that text (`code` as Volcano's fit status);
- prioritize_verb: {task, nodes}; `nodeScore` {node: score} is added to the node scores as is
  (an `errorMessage` instead is a failure);
- preemptable_verb / reclaimable_verb: {evictor, evictees}; `victims` (by UID) with `status`
  (1 permit, 0 abstain, -1 reject) bound the victims as Volcano's other victim plugins do;
- job_enqueueable_verb: {job}; `status` is the vote (1 permit, 0 abstain, -1 reject);
- queue_overused_verb: {queue}; `overused`.
With `managed_resources`, only pods asking one of them concern the extender (Volcano's
IsInterested); the others pass, score 0 and abstain.

When the extender gives no answer: `ignorable` goes on as if it had not been asked (the node
passes, no score, the vote abstains, victims are not bounded, the queue is not overused), logged
once per verb while the failure lasts (and again when it answers); not `ignorable`, the pods it concerns wait with a reason naming the
extender's URL and the error (every node fails; a failed prioritize too), jobs are not admitted,
the queue counts as overused and no victim is taken. A session open that fails counts as a
failure of every call of the cycle.

Where we ask less often than Volcano (runtime/README.md): per task class (pods the scheduler
cannot tell apart, of one job and with the same labels and annotations: runtime.cluster.
extenderclient.extender_key; the class's first pod is sent as the task) instead of per pod, and
prioritize with every
schedulable node, not only those the other filters passed. The bodies carry Volcano's field names
with the fields the scheduler knows (a pod's requests as one container; a node without its Tasks)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from runtime.cluster import decisions as d
from runtime.cluster.extenderclient import ExtenderClient, ExtenderError
from runtime.cluster.nodeusage import duration_s
from runtime.engine.extension import ABSTAIN, PERMIT, REJECT, Check
from runtime.engine.kernels.codes import ALLOCATED, BOUND, HELD, PENDING, PIPELINED, RELEASING, SUCCEEDED
from runtime.engine.plugins.base import Plugin
from runtime.engine.session import Verdict

log = logging.getLogger(__name__)

IN_FLIGHT = 16                       # predicate calls of one class at once
DEFAULT_TIMEOUT_S = 1.0              # Volcano's default extender.httpTimeout
# Volcano's TaskStatus values (api/types.go), by our task status.
TASK_STATUS = {PENDING: 1, ALLOCATED: 2, PIPELINED: 4, BOUND: 32, RELEASING: 64, SUCCEEDED: 128, HELD: 1}
# Clients by (url_prefix, timeout): one per extender for the process, its cycle bookkeeping
# restarted as each session opens.
_CLIENTS: dict[tuple[str, float], ExtenderClient] = {}


def client_for(url_prefix: str, timeout_s: float) -> ExtenderClient:
    key = (url_prefix, timeout_s)
    if key not in _CLIENTS:
        _CLIENTS[key] = ExtenderClient(url_prefix, timeout_s)
    return _CLIENTS[key]


def failed_verbs(arguments: dict) -> list[str]:
    """The verbs (Volcano's names) that got no answer in the extender's last cycle: for the
    scheduler's metrics (runtime/service/loop.py)."""
    timeout = duration_s(str(arguments.get("http_timeout") or "")) or DEFAULT_TIMEOUT_S
    client = _CLIENTS.get((str(arguments.get("url_prefix") or ""), timeout))
    return sorted(client.cycle.failed) if client is not None else []


def interested(managed: frozenset[str], requests: dict[str, int]) -> bool:
    """Volcano's IsInterested: every pod when no resource is managed, else a pod asking one."""
    return not managed or any(r in managed for r in requests)


def resource_json(names: list[str], row: np.ndarray) -> dict:
    """Volcano's Resource: MilliCPU, Memory (bytes), ScalarResources (in milli-units), MaxTaskNum."""
    out: dict[str, Any] = {"MilliCPU": 0.0, "Memory": 0.0, "ScalarResources": {}, "MaxTaskNum": 0}
    for name, value in zip(names, row.tolist()):
        if name == "cpu":
            out["MilliCPU"] = float(value)
        elif name == "memory":
            out["Memory"] = float(value)
        elif name == "pods":
            out["MaxTaskNum"] = int(value)
        elif value:
            out["ScalarResources"][name] = float(value) * 1000
    return out


class Bodies:
    """Volcano's request bodies from the session (fields named as Go marshals api.TaskInfo & co)."""

    def __init__(self, ssn):
        self.ssn = ssn
        self.snap = ssn.snap
        self.names = list(self.snap.resources)

    def pod(self, t: int) -> dict:
        pod = self.snap.pods[t]
        requests = {r: str(v) if r != "cpu" else f"{v}m" for r, v in pod.requests.items()}
        return {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid, "labels": pod.labels,
                             "annotations": pod.annotations},
                "spec": {"nodeName": pod.node_name or "", "schedulerName": pod.scheduler_name,
                         "priority": pod.priority, "priorityClassName": pod.priority_class or "",
                         "containers": [{"name": "main", "resources": {"requests": requests}}]},
                "status": {"phase": pod.phase}}

    def task(self, t: int) -> dict:
        snap, ssn = self.snap, self.ssn
        pod = snap.pods[t]
        job = snap.jobs[int(snap.task_job[t])]
        node = int(ssn.task_node[t])
        request = resource_json(self.names, snap.request[t])
        return {"UID": pod.uid, "Job": job.key, "Name": pod.name, "Namespace": pod.namespace,
                "TaskRole": pod.task_role, "Resreq": request, "InitResreq": request,
                "NodeName": snap.node_names[node] if node >= 0 else "", "Status": TASK_STATUS.get(int(ssn.status[t]), 1),
                "Priority": int(snap.task_priority[t]), "Preemptable": pod.preemptable,
                "BestEffort": not any(v for r, v in pod.requests.items() if r != "pods"),
                "Pod": self.pod(t)}

    def node(self, n: int) -> dict:
        snap, ssn = self.snap, self.ssn
        name = snap.node_names[n]
        obj = snap.node_objects[n] if getattr(snap, "node_objects", None) is not None else None
        allocatable = snap.allocatable[n]
        used = ssn.used[n] + ssn.pipelined[n]
        spec = {"unschedulable": bool(obj.unschedulable) if obj is not None else False,
                "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in (obj.taints if obj else ())]}
        return {"Name": name,
                "Node": {"metadata": {"name": name, "labels": obj.labels if obj else {},
                                      "annotations": obj.annotations if obj else {}},
                         "spec": spec, "status": {"allocatable": {r: str(v) for r, v in
                                                                  (obj.allocatable if obj else {}).items()}}},
                "Allocatable": resource_json(self.names, allocatable),
                "Capacity": resource_json(self.names, allocatable),
                "Used": resource_json(self.names, used),
                "Idle": resource_json(self.names, allocatable - used),
                "Releasing": resource_json(self.names, ssn.releasing[n]),
                "Pipelined": resource_json(self.names, ssn.pipelined[n])}

    def job(self, j: int) -> dict:
        job = self.snap.jobs[j]
        namespace, _, name = job.key.partition("/")
        return {"UID": job.key, "Name": name, "Namespace": namespace, "Queue": job.queue_name,
                "Priority": job.priority, "MinAvailable": job.min_member,
                "TotalRequest": resource_json(self.names, self.ssn.job_request[j]),
                "Tasks": {self.snap.pods[t].uid: self.task(int(t)) for t in job.tasks.tolist()}}

    def queue(self, q: int) -> dict:
        queue = self.snap.queues[q]
        return {"UID": queue.name, "Name": queue.name, "Weight": queue.weight,
                "Queue": {"metadata": {"name": queue.name}, "spec": {"weight": queue.weight}}}

    def session(self) -> dict:
        snap = self.snap
        return {"Jobs": {job.key: self.job(job.index) for job in snap.jobs},
                "Nodes": {name: self.node(n) for n, name in enumerate(snap.node_names)},
                "Queues": {q.name: self.queue(q.index) for q in snap.queues},
                "NamespaceInfo": {}, "RevocableNodes": {}, "NodeList": list(snap.node_names)}


class ExtenderPlugin(Plugin):
    name = "extender"
    answers = frozenset({"predicate", "node_order", "preemptable", "reclaimable", "overused", "job_enqueued"})

    def on_session_open(self, ssn) -> None:
        args = self.args
        self.verbs = {k: str(args.get(k) or "") for k in (
            "on_session_open_verb", "on_session_close_verb", "predicate_verb", "prioritize_verb", "preemptable_verb",
            "reclaimable_verb", "queue_overused_verb", "job_enqueueable_verb")}
        self.ignorable = bool(args.get("ignorable", False))
        managed = frozenset(args.get("managed_resources") or ())
        timeout = duration_s(str(args.get("http_timeout") or "")) or DEFAULT_TIMEOUT_S
        url_prefix = str(args.get("url_prefix") or "")
        self.client = client = client_for(url_prefix, timeout)
        client.open()
        self._told: set[str] = set()
        snap = ssn.snap
        bodies = Bodies(ssn)

        if self.verbs["on_session_open_verb"]:
            try:
                client.send(self.verbs["on_session_open_verb"], bodies.session(), want_answer=False)
            except ExtenderError as err:
                self.tell("on_session_open_verb", err)
                if not self.ignorable:
                    client.cycle.broken = f"{err} (the session could not open)"

        def ask(verb: str, body: Any) -> tuple[Any, str]:
            """(answer, "") or (None, error text); the error logged once per verb and cycle."""
            try:
                return client.send(self.verbs[verb], body), ""
            except ExtenderError as err:
                self.tell(verb, err)
                return None, f"extender {err}"

        def class_interested(cls) -> bool:
            return interested(managed, snap.pods[cls.head].requests)

        # Prioritize is asked with the class's filters (before any scoring): a failure that is not
        # ignorable holds the class there, with its reason; the scores wait for node_order.
        class_scores: dict[int, np.ndarray | None] = {}

        def prioritize(cls) -> str:
            if not self.verbs["prioritize_verb"] or not self.spec.enabled("node_order") or cls.index in class_scores:
                return ""
            class_scores[cls.index] = None
            nodes = np.flatnonzero(snap.schedulable).tolist()
            answer, error = ask("prioritize_verb", {"task": bodies.task(cls.head), "nodes": [bodies.node(n)
                                                                                              for n in nodes]})
            if not error and isinstance(answer, dict) and not answer.get("errorMessage") \
                    and isinstance(answer.get("nodeScore"), dict):
                index = {name: i for i, name in enumerate(snap.node_names)}
                scores = np.zeros(snap.n_nodes, dtype=np.float64)
                for name, score in answer["nodeScore"].items():
                    if name in index and isinstance(score, (int, float)):
                        scores[index[name]] = float(score)
                class_scores[cls.index] = scores
                return ""
            if not error:
                error = f"extender {client.url(self.verbs['prioritize_verb'])}: " + (
                    str(answer.get("errorMessage")) if isinstance(answer, dict) and answer.get("errorMessage")
                    else "the answer has no nodeScore")
                self.tell("prioritize_verb", ExtenderError(error))
            return "" if self.ignorable else error

        def predicate(cls) -> list[Check]:
            if not class_interested(cls):
                return []
            checks: list[Check] = []
            held = prioritize(cls)
            if held:
                return [Check(held, np.zeros(snap.n_nodes, dtype=bool))]
            if not self.verbs["predicate_verb"]:
                return []
            task = bodies.task(cls.head)
            nodes = np.flatnonzero(snap.schedulable).tolist()
            failures: dict[str, list[int]] = {}

            def one(n: int) -> tuple[int, str]:
                answer, error = ask("predicate_verb", {"task": task, "node": bodies.node(n)})
                if error:
                    return n, "" if self.ignorable else error
                message = answer.get("status", "") if isinstance(answer, dict) else ""
                return n, str(message or "")

            with ThreadPoolExecutor(max_workers=max(1, min(IN_FLIGHT, len(nodes))),
                                    thread_name_prefix="extender") as pool:
                for n, message in pool.map(one, nodes):
                    if message:
                        failures.setdefault(message, []).append(n)
            for message, failed in sorted(failures.items()):
                passing = np.ones(snap.n_nodes, dtype=bool)
                passing[failed] = False
                checks.append(Check(message, passing))
            return checks

        def scores(cls) -> np.ndarray | None:
            if not class_interested(cls):
                return None
            if cls.index not in class_scores:
                prioritize(cls)
            return class_scores.get(cls.index)

        def victims(verb: str):
            def choose(preemptor: int, candidates: list[int]) -> list[int]:
                if preemptor >= 0 and not interested(managed, snap.pods[preemptor].requests):
                    return list(candidates)                      # abstain
                answer, error = ask(verb, {"evictor": bodies.task(preemptor) if preemptor >= 0 else None,
                                           "evictees": [bodies.task(c) for c in candidates]})
                if error:
                    return list(candidates) if self.ignorable else []
                status = answer.get("status", 0) if isinstance(answer, dict) else 0
                if status == 0:
                    return list(candidates)                      # abstain
                chosen = {v.get("UID") for v in (answer.get("victims") or []) if isinstance(v, dict)}
                return [c for c in candidates if snap.pods[c].uid in chosen]
            return choose

        def enqueueable(j: int) -> Verdict:
            answer, error = ask("job_enqueueable_verb", {"job": bodies.job(j)})
            if error:
                return Verdict(ABSTAIN) if self.ignorable else Verdict(REJECT, d.Reason(d.ENQUEUE, error,
                                                                                         {"plugin": self.name}))
            status = answer.get("status", 0) if isinstance(answer, dict) else 0
            if status == 1:
                return Verdict(PERMIT)
            if status == -1:
                return Verdict(REJECT, d.Reason(d.ENQUEUE, f"extender {client.url(self.verbs['job_enqueueable_verb'])} "
                                                           "answered that the job may not be enqueued",
                                                {"plugin": self.name}))
            return Verdict(ABSTAIN)

        def overused(q: int) -> bool:
            answer, error = ask("queue_overused_verb", {"queue": bodies.queue(q)})
            if error:
                return not self.ignorable
            return bool(answer.get("overused", False)) if isinstance(answer, dict) else False

        if self.verbs["predicate_verb"] or self.verbs["prioritize_verb"]:
            self.register(ssn, "predicate", predicate)
        if self.verbs["prioritize_verb"]:
            self.register(ssn, "node_order", scores)
        if self.verbs["preemptable_verb"]:
            self.register(ssn, "preemptable", victims("preemptable_verb"))
        if self.verbs["reclaimable_verb"]:
            self.register(ssn, "reclaimable", victims("reclaimable_verb"))
        if self.verbs["job_enqueueable_verb"]:
            self.register(ssn, "job_enqueued", enqueueable)
        if self.verbs["queue_overused_verb"]:
            self.register(ssn, "overused", overused)

    def tell(self, verb: str, err: Exception) -> None:
        """Log a verb's failure once while it lasts (ExtenderClient.reported: across cycles), with what
        it means; the client logs when the verb answers again."""
        if verb in self._told:
            return
        self._told.add(verb)
        if not self.client.report(self.verbs.get(verb, verb), str(err)):
            return
        if self.ignorable:
            log.warning("extender: %s; ignorable, so this cycle goes on without the extender's %s", err,
                        verb.removesuffix("_verb"))
        else:
            log.warning("extender: %s; not ignorable, so what it concerns waits this cycle", err)

    def on_session_close(self, ssn) -> None:
        verb = getattr(self, "verbs", {}).get("on_session_close_verb")
        if verb:
            try:
                self.client.send(verb, {}, want_answer=False)
            except ExtenderError as err:
                self.tell("on_session_close_verb", err)


PLUGIN = ExtenderPlugin
