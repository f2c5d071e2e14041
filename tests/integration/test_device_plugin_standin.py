"""Issue 28's dev-cluster proof: each pod gets the cards the scheduler chose for it, as its device
plugin would serve them.

The connector (in this process) schedules many shared-GPU or vGPU pods, pending at once, onto a
few fake nodes. No kubelet runs, so the pods stay Pending on their nodes. Then a kubelet stand-in
admits each node's pods in the order the API server bound them (the order of the watch's events),
and for each calls the device-plugin stand-in of tests/device_plugin_standin.py (volcano-sh/devices
for GPU share, HAMi's volcano-vgpu-device-plugin for vGPU). The plugin reads only the pods'
annotations on the API server and writes back what it writes (volcano.sh/gpu-assigned; vgpu-time,
devices-to-allocate and bind-phase). Checked: the plugin served each Allocate call for the pod it
was made for, with the cards of that pod's annotations, and by an independent count of what was
served no card is over-committed. Without volcano.sh/predicate-time the plugin serves the wrong
pods, and the test says so.
"""

from __future__ import annotations

import calendar
import threading
import time
from collections.abc import Iterator

import pytest
from polling import wait_for

from runtime.kube import binder
from runtime.kube.api import ApiError, KubeApi
from tests import device_plugin_standin as standin

from .connector_helpers import GANG_POLICY, InProcess, Objects, unique_scheduler_name

pytestmark = pytest.mark.integration

MEMORY, NUMBER = standin.GPU_MEMORY, standin.GPU_NUMBER
REGISTER = "volcano.sh/node-vgpu-register"
VGPU = {"number": "volcano.sh/vgpu-number", "memory": "volcano.sh/vgpu-memory", "cores": "volcano.sh/vgpu-cores"}
CARDS, CARD_MIB, SPLIT = 4, 16384, 4


def policy(switch: str) -> str:
    return GANG_POLICY.replace("plugin binpack", f"plugin binpack\n  plugin deviceshare {{ {switch} = true }}")


class BindOrder:
    """Watches the namespace's pods: per node, the pods in the order they were bound (the order
    a kubelet, watching its node's pods, would admit them)."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api, self.path = api, f"/api/v1/namespaces/{namespace}/pods"
        self.order: dict[str, list[str]] = {}
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._version = api.get(self.path)["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self.api.watch(self.path, {"resourceVersion": self._version}, 30):
                    pod = event.object
                    self._version = pod.get("metadata", {}).get("resourceVersion", self._version)
                    node = (pod.get("spec") or {}).get("nodeName")
                    if event.type in ("ADDED", "MODIFIED") and node:
                        with self._lock:
                            if standin.key(pod) not in self._seen:
                                self._seen.add(standin.key(pod))
                                self.order.setdefault(node, []).append(standin.key(pod))
                    if self._stop.is_set():
                        return
            except ApiError:
                self._stop.wait(0.2)

    def bound(self) -> int:
        with self._lock:
            return len(self._seen)

    def stop(self) -> None:
        self._stop.set()


def node_pods(api: KubeApi, node: str) -> list[dict]:
    """What the plugin lists: the pods on its node, all namespaces (the API lists them by name)."""
    return api.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"})["items"]


def kubelet_admits(api: KubeApi, order: dict[str, list[str]], plugin: str) -> dict[str, standin.Served | str]:
    """Admitted pod -> what the device plugin served for it (or why it failed the call)."""
    served: dict[str, standin.Served | str] = {}
    for node, keys in sorted(order.items()):
        for admitted in keys:
            namespace, name = admitted.split("/")
            pod = api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
            try:
                if plugin == "volcano":
                    [container] = pod["spec"]["containers"]
                    answer = standin.volcano_allocate(node_pods(api, node), MEMORY, standin.limit(container, MEMORY))
                else:
                    answer = standin.hami_allocate(node_pods(api, node), node)
            except standin.NoCandidate as exc:
                served[admitted] = str(exc)
                continue
            namespace, name = answer.pod.split("/")
            api.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{name}",
                            {"metadata": {"annotations": answer.writes}})
            served[admitted] = answer
    return served


def schedule_in_waves(objects: Objects, scheduler: InProcess, waves: list[list[tuple[str, dict[str, str]]]],
                      name: str, nodes: int) -> None:
    """Each wave's pods created at once, then cycles until none of them is left to place."""
    made = 0
    for wave in waves:
        for pod, extra in wave:
            objects.pod(pod, name, cpu="100m", memory="128Mi", extra=extra)
        made += len(wave)
        wait_for(lambda: scheduler.sees(objects.namespace, made, nodes), "the cache to see the pods", 10)
        for _ in range(3):
            if not scheduler.cycle().decisions.bindings:
                break


@pytest.fixture
def bind_order(objects: Objects) -> Iterator[BindOrder]:
    order = BindOrder(objects.api, objects.namespace)
    yield order
    order.stop()


def share_nodes(objects: Objects, count: int) -> list[str]:
    nodes = [f"{objects.namespace}-g{i}" for i in range(count)]
    for node in nodes:
        objects.node(node, cpu="64", memory="256Gi", **{NUMBER: str(CARDS), MEMORY: str(CARDS * CARD_MIB)})
    return nodes


def check_gpu_share(objects: Objects, served: dict) -> None:
    """Independent of the engine: each pod was served its own gpu-index card, and per card the
    memory of the pods served on it fits the card (the node's gpu-memory over its gpu-number)."""
    pods = {standin.key(p): p for p in objects.pods().values() if p["spec"].get("nodeName")}
    assert set(served) == set(pods)
    wrong = {k: s for k, s in served.items() if not isinstance(s, standin.Served) or s.pod != k or
             s.cards != tuple(int(c) for c in pods[k]["metadata"]["annotations"][standin.GPU_INDEX].split(","))}
    assert not wrong, f"pods served another pod's cards (or none): {wrong}"
    used: dict[tuple[str, int], int] = {}
    for k, answer in served.items():
        mib = standin.limit(pods[k]["spec"]["containers"][0], MEMORY)
        for card in answer.cards:
            assert 0 <= card < CARDS
            used[(pods[k]["spec"]["nodeName"], card)] = used.get((pods[k]["spec"]["nodeName"], card), 0) + mib
    over = {card: mib for card, mib in used.items() if mib > CARD_MIB}
    assert not over, f"cards over-committed (MiB used of {CARD_MIB}): {over}"


def test_shared_gpu_pods_get_the_cards_the_scheduler_chose(objects: Objects, in_process, bind_order) -> None:
    name = unique_scheduler_name()
    share_nodes(objects, 3)
    sizes = [2048, 4096, 6144, 8192, 10240, 3072]
    # Names in no relation to the order they are bound: the plugin must go by predicate-time.
    waves = [[(f"w{w}-{(i * 7) % 13:02d}-{i}", {MEMORY: str(sizes[(i + w) % len(sizes)])}) for i in range(13)]
             for w in range(3)]
    scheduler = in_process(name, policy("gpu_sharing"))
    schedule_in_waves(objects, scheduler, waves, name, 3)
    wait_for(lambda: bind_order.bound() == len(objects.bound()), "the watch to see every bind", 10)
    assert len(objects.bound()) >= 25, "most pods fit: the proof needs many on each node"
    assert all(len(keys) >= 5 for keys in bind_order.order.values())
    check_gpu_share(objects, kubelet_admits(objects.api, bind_order.order, "volcano"))


def test_without_predicate_time_the_plugin_serves_the_wrong_pods(objects: Objects, in_process, bind_order,
                                                                monkeypatch) -> None:
    """The same contract with volcano.sh/predicate-time left off the Binding (it goes under a key
    the plugin does not read): the plugin falls back to list order (by name), which is not the
    order the pods were bound in, and the checker catches pods served another pod's cards."""
    monkeypatch.setattr(binder, "PREDICATE_TIME_ANNOTATION", "test.policydsl.io/not-predicate-time")
    name = unique_scheduler_name()
    share_nodes(objects, 1)
    scheduler = in_process(name, policy("gpu_sharing"))
    # One pod a wave, each taking most of a card, named so that the last bound lists first.
    schedule_in_waves(objects, scheduler, [[(f"p{9 - i}", {MEMORY: "12288"})] for i in range(CARDS)], name, 1)
    wait_for(lambda: bind_order.bound() == CARDS, "the four pods bound", 10)
    assert "volcano.sh/predicate-time" not in objects.pods()["p9"]["metadata"]["annotations"]
    with pytest.raises(AssertionError, match="served another pod's cards"):
        check_gpu_share(objects, kubelet_admits(objects.api, bind_order.order, "volcano"))


def vgpu_nodes(objects: Objects, count: int) -> dict[str, list[str]]:
    """Nodes registering CARDS vGPU cards each (split SPLIT, CARD_MIB): node -> its card UUIDs."""
    nodes = {}
    for i in range(count):
        node = f"{objects.namespace}-v{i}"
        uuids = [f"GPU-{objects.namespace}-{i}-{c}" for c in range(CARDS)]
        objects.node(node, cpu="64", memory="256Gi", **{VGPU["number"]: str(CARDS * SPLIT),
                                                         VGPU["memory"]: str(CARDS * CARD_MIB),
                                                         VGPU["cores"]: str(CARDS * 100)})
        objects.api.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {
            REGISTER: "".join(f"{u},{SPLIT},{CARD_MIB},NVIDIA-A100,true,hami-core:" for u in uuids)}}})
        nodes[node] = uuids
    return nodes


def test_vgpu_pods_get_the_cards_the_scheduler_chose(objects: Objects, in_process, bind_order) -> None:
    name = unique_scheduler_name()
    nodes = vgpu_nodes(objects, 3)
    asks = [("1", "3000", "20"), ("2", "2000", "10"), ("1", "5000", "30"), ("1", "1000", "0")]
    waves = [[(f"v{w}-{(i * 5) % 11:02d}-{i}", dict(zip(VGPU.values(), asks[(i + w) % len(asks)])))
              for i in range(11)] for w in range(3)]
    scheduler = in_process(name, policy("vgpu"))
    wait_for(lambda: all(REGISTER in getattr(scheduler.cluster.cache.node(n), "annotations", {}) for n in nodes),
             "the cache to see the vGPU registers", 10)
    schedule_in_waves(objects, scheduler, waves, name, 3)
    wait_for(lambda: bind_order.bound() == len(objects.bound()), "the watch to see every bind", 10)
    assert len(objects.bound()) >= 25
    served = kubelet_admits(objects.api, bind_order.order, "hami")

    # Independent of the engine: each admitted pod got the devices of its own vgpu-ids-new, its
    # bind-phase is success, and per card the pods served fit its split, memory and cores.
    pods = {standin.key(p): p for p in objects.pods().values() if p["spec"].get("nodeName")}
    assert set(served) == set(pods)
    use: dict[str, list[int]] = {}
    for k, answer in served.items():
        notes = pods[k]["metadata"]["annotations"]
        assert isinstance(answer, standin.Served) and answer.pod == k, (k, answer)
        chosen = tuple(d.split(",")[0] for d in notes["volcano.sh/vgpu-ids-new"].split(":") if d)
        assert answer.cards == chosen and notes[standin.BIND_PHASE] == "success", (k, answer, notes)
        asked = {what: standin.limit(pods[k]["spec"]["containers"][0], r) for what, r in VGPU.items()}
        assert len(answer.cards) == asked["number"]
        for uuid in answer.cards:
            assert uuid in nodes[pods[k]["spec"]["nodeName"]]
            tasks, mib, cores = use.get(uuid, [0, 0, 0])
            use[uuid] = [tasks + 1, mib + asked["memory"], cores + asked["cores"]]
    over = {u: figures for u, figures in use.items()
            if figures[0] > SPLIT or figures[1] > CARD_MIB or figures[2] > 100}
    assert not over, f"cards over-committed (tasks, MiB, cores): {over}"


# --- Volcano's node lock (deviceshare `node_lock`) ---------------------------------------------

LOCK = standin.GPU_SHARE_LOCK


def lock_of(objects: Objects, node: str) -> str | None:
    return (objects.api.get(f"/api/v1/nodes/{node}")["metadata"].get("annotations") or {}).get(LOCK)


def set_lock(objects: Objects, node: str, value: str | None) -> None:
    objects.api.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {LOCK: value}}})


def test_node_lock_one_pod_per_node_until_its_plugin_served_it(objects: Objects, in_process, bind_order,
                                                                monkeypatch) -> None:
    """With `node_lock`, a GPU-share pod is bound to a node only while no other pod there waits for
    its device plugin: the connector sets the node annotation `gpu` (RFC 3339 time) before the
    Binding, the plugin stand-in removes it after serving. So the plugin never has two pending pods
    to choose from, and serves each its own cards even without predicate-time (left off here). A
    lock younger than 5 minutes holds; an older one is taken over."""
    monkeypatch.setattr(binder, "PREDICATE_TIME_ANNOTATION", "test.policydsl.io/not-predicate-time")
    name = unique_scheduler_name()
    nodes = share_nodes(objects, 2)
    scheduler = in_process(name, policy("gpu_sharing").replace("gpu_sharing = true", "gpu_sharing = true node_lock = true"))
    for i in range(6):
        objects.pod(f"p{9 - i}", name, cpu="100m", memory="128Mi", extra={MEMORY: "6144"})
    wait_for(lambda: scheduler.sees(objects.namespace, 6, 2), "the cache to see the pods", 10)

    served: dict[str, standin.Served | str] = {}
    for _ in range(6):
        scheduler.cycle()
        order = {node: [k for k in keys if k not in served] for node, keys in bind_order.order.items()}
        # At most one pod per node waits for its plugin, and that node is locked.
        assert all(len(keys) <= 1 for keys in order.values()), order
        assert all(lock_of(objects, node) for node, keys in order.items() if keys)
        wait_for(lambda: bind_order.bound() == len(objects.bound()), "the watch to see every bind", 10)
        for key, answer in kubelet_admits(objects.api, order, "volcano").items():
            served[key] = answer
            assert isinstance(answer, standin.Served) and answer.node_lock == LOCK
            set_lock(objects, objects.bound()[key.split("/")[1]], None)     # the plugin releases it
        if len(served) == 6:
            break
    assert len(served) == 6
    check_gpu_share(objects, served)

    # A fresh lock (another scheduler's pod waiting for the plugin) holds; a stale one is taken over.
    node = nodes[0]
    objects.api.merge_patch(f"/api/v1/nodes/{nodes[1]}", {"spec": {"unschedulable": True}})
    fresh = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    set_lock(objects, node, fresh)
    objects.pod("late", name, cpu="100m", memory="128Mi", extra={MEMORY: "1024"})
    wait_for(lambda: scheduler.sees(objects.namespace, 7, 2), "the cache to see the late pod", 10)
    scheduler.cycle()
    scheduler.cycle()
    assert "late" not in objects.bound() and lock_of(objects, node) == fresh
    set_lock(objects, node, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 301)))
    scheduler.cycle_until(lambda: "late" in objects.bound(), 10, "the late pod bound over the stale lock")
    assert objects.bound()["late"] == node
    taken = lock_of(objects, node)
    assert taken and time.time() - calendar.timegm(time.strptime(taken, "%Y-%m-%dT%H:%M:%SZ")) < 60


def test_multi_container_vgpu_pods_get_each_container_its_cards(objects: Objects, in_process, bind_order) -> None:
    """volcano#4505's pods on the dev cluster: two containers asking vGPU and a sidecar asking none.
    The kubelet calls HAMi's plugin once per container; each call must hand that container the
    devices of its own list in volcano.sh/vgpu-ids-new (the sidecar's list empty), and bind-phase
    turns success after the last. The plugin re-stamps the pod's vgpu-time on every call, so a
    second container's call would go to another pod pending on the node: with `node_lock` only one
    vGPU pod a node waits for its plugin at a time. Checked independently: per card, split, memory
    and cores are not over-committed."""
    from .connector_helpers import pod_body    # only this test builds pods of several containers

    name = unique_scheduler_name()
    nodes = vgpu_nodes(objects, 2)
    scheduler = in_process(name, policy("vgpu").replace("vgpu = true", "vgpu = true node_lock = true"))
    wait_for(lambda: all(REGISTER in getattr(scheduler.cluster.cache.node(n), "annotations", {}) for n in nodes),
             "the cache to see the vGPU registers", 10)
    asks = [(("1", "3000", "20"), ("2", "1000", "10")), (("1", "6000", "30"), ("1", "2000", "0"))]
    for i in range(6):
        body = pod_body(f"m{(i * 3) % 8}-{i}", name, cpu="100m", memory="128Mi")
        sidecar = body["spec"]["containers"][0]
        body["spec"]["containers"] = [
            {"name": f"c{c}", "image": "busybox",
             "resources": {"limits": dict(zip(VGPU.values(), ask)), "requests": dict(zip(VGPU.values(), ask))}}
            for c, ask in enumerate(asks[i % 2])] + [sidecar]
        objects.api.post(f"/api/v1/namespaces/{objects.namespace}/pods", body)
    wait_for(lambda: scheduler.sees(objects.namespace, 6, 2), "the cache to see the pods", 10)
    use: dict[str, list[int]] = {}
    served: set[str] = set()
    for _ in range(8):
        scheduler.cycle()
        wait_for(lambda: bind_order.bound() == len(objects.bound()), "the watch to see every bind", 10)
        order = {node: [k for k in keys if k not in served] for node, keys in bind_order.order.items()}
        assert all(len(keys) <= 1 for keys in order.values()), order
        for node, keys in sorted(order.items()):
            for k in keys:
                namespace, pod_name = k.split("/")
                pod = objects.api.get(f"/api/v1/namespaces/{namespace}/pods/{pod_name}")
                lists = pod["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"].split(";")
                assert len(lists) == 3 and lists[2] == "", lists
                for container, listed in zip(pod["spec"]["containers"][:2], lists):
                    answer = standin.hami_allocate(node_pods(objects.api, node), node)
                    assert answer.pod == k and answer.cards == tuple(d.split(",")[0] for d in listed.split(":") if d)
                    objects.api.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{pod_name}",
                                            {"metadata": {"annotations": answer.writes}})
                    asked = {what: standin.limit(container, r) for what, r in VGPU.items()}
                    assert len(answer.cards) == asked["number"]
                    for uuid in answer.cards:
                        assert uuid in nodes[node]
                        tasks, mib, cores = use.get(uuid, [0, 0, 0])
                        use[uuid] = [tasks + 1, mib + asked["memory"], cores + asked["cores"]]
                done = objects.api.get(f"/api/v1/namespaces/{namespace}/pods/{pod_name}")["metadata"]["annotations"]
                assert done[standin.BIND_PHASE] == "success"
                served.add(k)
                objects.api.merge_patch(f"/api/v1/nodes/{node}",        # the plugin releases its lock
                                        {"metadata": {"annotations": {standin.VGPU_LOCK: None}}})
        if len(served) == 6:
            break
    assert len(served) == 6
    over = {u: figures for u, figures in use.items()
            if figures[0] > SPLIT or figures[1] > CARD_MIB or figures[2] > 100}
    assert not over, f"cards over-committed (tasks, MiB, cores): {over}"
