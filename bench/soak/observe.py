"""The checker's view of the cluster: plain HTTPS GETs and one pod watch, nothing of the engine's.

`Reader` lists objects; `PodFeed` keeps every pod of the cluster current from a list+watch
(relisting after the API server went away) and hands each version to a callback, so the checker
sees binds as they happen rather than once per step.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
WATCH_TIMEOUT_S = 60
RELIST_PAUSE_S = 0.5


class Unreachable(Exception):
    """The API server did not answer (restarting)."""


class Reader:
    def __init__(self, server: str, token: str, ca_cert: str, timeout: float = 15.0) -> None:
        self.server = server
        self.token = token
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca_cert)

    def _open(self, path: str, query: Mapping[str, str] | None, timeout: float) -> Any:
        url = f"{self.server}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}",
                                                       "Accept": "application/json"})
        return urllib.request.urlopen(request, timeout=timeout, context=self.context)

    def get(self, path: str, query: Mapping[str, str] | None = None) -> dict[str, Any]:
        try:
            with self._open(path, query, self.timeout) as response:
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
            raise Unreachable(str(exc)) from None

    def list(self, path: str) -> tuple[list[dict[str, Any]], str]:
        """Every item (page by page) and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            answer = self.get(path, {"limit": "500", **({"continue": token} if token else {})})
            items += answer.get("items") or []
            token = (answer.get("metadata") or {}).get("continue") or ""
            if not token:
                return items, str((answer.get("metadata") or {}).get("resourceVersion") or "")

    def items(self, path: str) -> list[dict[str, Any]]:
        return self.list(path)[0]

    def lease_holder(self, namespace: str, name: str) -> str:
        try:
            lease = self.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
        except urllib.error.HTTPError:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")


class PodFeed:
    """Every pod of the cluster, kept current by list+watch; `on_pod(pod, now, deleted)` is
    called for each version in order, from the feed's thread."""

    def __init__(self, reader: Reader, on_pod: Callable[[Mapping[str, Any], float, bool], None]) -> None:
        self.reader = reader
        self.on_pod = on_pod
        self.relists = 0
        self._pods: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-pod-feed", daemon=True)

    def start(self) -> PodFeed:
        self._thread.start()
        if not self._synced.wait(60):
            raise Unreachable("the pod list did not come in 60 s")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=WATCH_TIMEOUT_S + 5)

    def pods(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._pods.values())

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._relist()
                version = self._watch(version)
            except urllib.error.HTTPError as exc:
                if exc.code == 410:  # too old: start over from a list
                    version = ""
                else:
                    self._stop.wait(RELIST_PAUSE_S)
            except (Unreachable, OSError, ValueError):
                version = ""  # the API server went away: what happened meanwhile comes with the list
                self._stop.wait(RELIST_PAUSE_S)

    def _relist(self) -> str:
        items, version = self.reader.list("/api/v1/pods")
        now = time.time()
        fresh = {p["metadata"]["uid"]: p for p in items}
        with self._lock:
            gone = [p for uid, p in self._pods.items() if uid not in fresh]
            self._pods = fresh
        for pod in gone:
            self.on_pod(pod, now, True)
        for pod in items:
            self.on_pod(pod, now, False)
        self.relists += 1
        self._synced.set()
        return version

    def _watch(self, version: str) -> str:
        query = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(WATCH_TIMEOUT_S)}
        with self.reader._open("/api/v1/pods", query, WATCH_TIMEOUT_S + 10) as response:
            for line in response:
                if self._stop.is_set():
                    break
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                kind = event.get("type")
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return ""
                    raise Unreachable(str(obj.get("message")))
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind == "BOOKMARK":
                    continue
                now = time.time()
                uid = obj["metadata"]["uid"]
                with self._lock:
                    if kind == "DELETED":
                        self._pods.pop(uid, None)
                    else:
                        self._pods[uid] = obj
                self.on_pod(obj, now, kind == "DELETED")
        return version
