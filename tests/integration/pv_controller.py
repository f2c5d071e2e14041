"""A stand-in for the PV controller and an external provisioner (the dev cluster runs neither),
for the classes a test names: new PVs become Available; a claim whose PV the scheduler pre-bound
(the PV's claimRef) is bound to it; a claim whose node the scheduler selected gets a new PV
there (for the classes it provisions) and is bound. It acts on a claim `delay` seconds after
it first sees it ready to bind, so a test can tell that pods wait for their claims. Polls."""

from __future__ import annotations

import time
from typing import Any

from runtime.kube.api import ApiError, KubeApi

from .poller import Poller

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


class PVController(Poller):
    def __init__(self, api: KubeApi, namespace: str, classes: set[str], provisions: set[str] = frozenset(),
                 delay: float = 0.0, interval: float = 0.2, driver: str = "csi.test.example.com") -> None:
        super().__init__(interval)
        self.api = api
        self.namespace = namespace
        self.classes = classes
        self.provisions = provisions
        self.delay = delay
        self.driver = driver
        self.bound_at: dict[str, float] = {}        # claim -> when (time.monotonic) it was bound
        self.made: list[str] = []                   # PVs it provisioned
        self._ready_since: dict[str, float] = {}

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        for name in self.made:
            try:
                self.api.delete(f"/api/v1/persistentvolumes/{name}")
            except ApiError:
                pass

    def poll(self) -> None:
        pvs = [pv for pv in self.api.get("/api/v1/persistentvolumes")["items"]
               if pv["spec"].get("storageClassName") in self.classes]
        for pv in pvs:
            if (pv.get("status") or {}).get("phase") in (None, "Pending") and not pv["spec"].get("claimRef"):
                self._phase(pv["metadata"]["name"], "Available")
        base = f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims"
        for claim in self.api.get(base)["items"]:
            name, spec = claim["metadata"]["name"], claim["spec"]
            if spec.get("volumeName") or spec.get("storageClassName") not in self.classes:
                continue
            mine = next((pv for pv in pvs if (pv["spec"].get("claimRef") or {}).get("name") == name
                         and pv["spec"]["claimRef"].get("namespace") == self.namespace), None)
            node = (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE)
            if mine is None and not (node and spec["storageClassName"] in self.provisions):
                self._ready_since.pop(name, None)
                continue
            since = self._ready_since.setdefault(name, time.monotonic())
            if time.monotonic() - since < self.delay:
                continue
            if mine is None:
                mine = self._provision(claim, node)
            self.api.merge_patch(f"{base}/{name}", {
                "metadata": {"annotations": {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}},
                "spec": {"volumeName": mine["metadata"]["name"]}})
            self.api.merge_patch(f"{base}/{name}/status", {"status": {"phase": "Bound"}})
            self._phase(mine["metadata"]["name"], "Bound")
            self.bound_at[name] = time.monotonic()

    def _provision(self, claim: dict[str, Any], node: str) -> dict[str, Any]:
        name = f"pvc-{claim['metadata']['uid']}"
        body = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
                "spec": {"capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                         "accessModes": claim["spec"]["accessModes"],
                         "storageClassName": claim["spec"]["storageClassName"],
                         "csi": {"driver": self.driver, "volumeHandle": name},
                         "claimRef": {"namespace": self.namespace, "name": claim["metadata"]["name"],
                                      "uid": claim["metadata"]["uid"]},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}
        made = self.api.post("/api/v1/persistentvolumes", body)
        self.made.append(name)
        return made

    def _phase(self, pv: str, phase: str) -> None:
        self.api.merge_patch(f"/api/v1/persistentvolumes/{pv}/status", {"status": {"phase": phase}})
