"""The dashboard (/ui) in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromedriver (installed by .ci/install-browser.sh), against a scheduler on the dev
cluster. On failure a screenshot and the page source are saved next to the test's files (and
under $POLICYDSL_ARTIFACTS when set) and their paths printed."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from polling import wait_for

from .connector_helpers import VOLCANO, Objects, SchedulerProcess, podgroup_body, unique_scheduler_name
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail("Debian's chromium and chromium-driver are missing: run `bash .ci/install-browser.sh` "
                    "(apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1600"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def policy(team: str) -> str:
    return f"""policy "dashboard" version 1
actions [enqueue, allocate, backfill]
tier {{
  plugin priority
  plugin gang
}}
tier {{
  plugin drf
  plugin predicates
  plugin capacity
  plugin nodeorder
}}
queue {team} {{ weight = 2  capability = {{ cpu: 2 }} }}
"""


def test_the_dashboard_shows_the_queue_tree_a_pending_reason_and_a_plot(
        tmp_path: Path, objects: Objects, kube_cluster: KubeCluster) -> None:
    name = unique_scheduler_name()
    team = f"dash{uuid.uuid4().hex[:6]}"
    objects.cluster_objects.append(f"{VOLCANO}/queues/{team}")
    objects.node(f"{objects.namespace}-n0", cpu="8", memory="16Gi")
    objects.gang("wide", 2, name, queue=team, cpu="2", memory="1Gi")     # 4 cpu > the capability of 2
    objects.pod("lone", name, cpu="500m", memory="64Mi")
    with SchedulerProcess(tmp_path, policy(team), kube_cluster.kubeconfig, name) as scheduler:
        scheduler.wait_ready()
        wait_for(lambda: f"queue {team} may allocate 2" in scheduler.get("/ui")[1], "the reason on the page", 30)
        driver = browser()
        try:
            driver.get(scheduler.metrics_url() + "/ui")
            from selenium.webdriver.common.by import By

            tree = driver.find_element(By.ID, "queue-tree")
            rows = {r.get_attribute("data-queue"): r for r in tree.find_elements(By.CSS_SELECTOR, "tr.queue")}
            assert {team, "default"} <= set(rows), list(rows)
            assert rows[team].find_elements(By.CSS_SELECTOR, "svg rect.allocated")
            assert rows[team].find_elements(By.CSS_SELECTOR, "svg line.capability")
            job = driver.find_element(By.CSS_SELECTOR, f'tr.pending-job[data-job="{objects.namespace}/wide"]')
            reason = job.find_element(By.CSS_SELECTOR, "td.reason").text
            assert f"queue {team} may allocate 2 more (capability 2" in reason, reason
            plot = driver.find_element(By.ID, "plot-pending")
            series = plot.find_elements(By.CSS_SELECTOR, ".series")
            assert team in {s.get_attribute("data-series") for s in series}
            assert plot.size["width"] > 300 and plot.size["height"] > 100     # laid out, not collapsed
            assert driver.find_element(By.ID, "revision").text
        except BaseException:
            for where in filter(None, (tmp_path, os.environ.get("POLICYDSL_ARTIFACTS"))):
                folder = Path(where)
                folder.mkdir(parents=True, exist_ok=True)
                shot = folder / "dashboard-failure.png"
                driver.save_screenshot(str(shot))
                (folder / "dashboard-failure.html").write_text(driver.page_source)
                print(f"screenshot: {shot}")
            raise
        finally:
            driver.quit()


def test_the_dashboard_shows_hypernodes_derived_from_labels_and_a_gangs_span(
        tmp_path: Path, objects: Objects, kube_cluster: KubeCluster) -> None:
    """`run --topology-labels RACK,kubernetes.io/hostname` on the dev cluster: racks a (two 4-cpu
    nodes), b and c (one each); a hard tier-1 gang of two 3-cpu pods fits only rack a. The nodes the
    API server says the pods run on are checked against the racks' labels, then the dashboard's
    Network topology tables in the browser: rack a's HyperNode with its label, and the gang's span."""
    name = unique_scheduler_name()
    rack = f"policydsl.test/rack-{uuid.uuid4().hex[:6]}"
    ns = objects.namespace
    racks = {f"{ns}-a0": "a", f"{ns}-a1": "a", f"{ns}-b0": "b", f"{ns}-c0": "c"}
    for node, value in racks.items():
        objects.node(node, cpu="4", memory="8Gi", labels={rack: value})
    group = podgroup_body("pair", 2)
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    objects.api.post(f"{VOLCANO}/namespaces/{ns}/podgroups", group)
    for i in range(2):
        objects.pod(f"pair-{i}", name, group="pair", cpu="3", memory="64Mi")
    with SchedulerProcess(tmp_path, policy(f"topo{uuid.uuid4().hex[:6]}"), kube_cluster.kubeconfig, name,
                          "--topology-labels", f"{rack},kubernetes.io/hostname") as scheduler:
        scheduler.wait_ready()
        bound = wait_for(lambda: (lambda b: b if len(b) == 2 else None)(objects.bound()), "the gang bound", 60)
        assert {racks[n] for n in bound.values()} == {"a"}, bound
        wait_for(lambda: f'data-podgroup="{ns}/pair"' in scheduler.get("/ui")[1], "the span on the page", 30)
        driver = browser()
        try:
            driver.get(scheduler.metrics_url() + "/ui")
            from selenium.webdriver.common.by import By

            span = driver.find_element(By.CSS_SELECTOR, f'#spans tr.span[data-podgroup="{ns}/pair"]')
            assert span.get_attribute("data-tier") == "1"
            hypernode = span.get_attribute("data-hypernode")
            row = driver.find_element(By.CSS_SELECTOR, f'#hypernodes tr.hypernode[data-hypernode="{hypernode}"]')
            assert f"{rack}=a" in row.text and row.get_attribute("data-tier") == "1"
            assert len(driver.find_elements(By.CSS_SELECTOR, "#hypernodes tr.hypernode")) == 3
            assert "derived from node labels" in driver.page_source
            assert span.is_displayed() and row.is_displayed()
        except BaseException:
            for where in filter(None, (tmp_path, os.environ.get("POLICYDSL_ARTIFACTS"))):
                folder = Path(where)
                folder.mkdir(parents=True, exist_ok=True)
                shot = folder / "dashboard-topology-failure.png"
                driver.save_screenshot(str(shot))
                (folder / "dashboard-topology-failure.html").write_text(driver.page_source)
                print(f"screenshot: {shot}")
            raise
        finally:
            driver.quit()


def test_the_dashboard_shows_each_shared_card_with_the_pods_the_api_server_says_hold_it(
        tmp_path: Path, objects: Objects, kube_cluster: KubeCluster) -> None:
    """A GPU-share node (volcano.sh/gpu-number 4, gpu-memory 4 x 16Gi) and three pods of 6Gi bound
    by the scheduler under deviceshare's gpu_sharing: in the browser, the Devices table lists the
    node's four cards, and each card names exactly the pods whose volcano.sh/gpu-index (read back
    from the API server) is that card, with 6Gi used per pod."""
    name = unique_scheduler_name()
    node = f"{objects.namespace}-g0"
    objects.node(node, cpu="16", memory="64Gi", **{"volcano.sh/gpu-number": "4",
                                                   "volcano.sh/gpu-memory": str(4 * 16384)})
    for i in range(3):
        objects.pod(f"share-{i}", name, cpu="100m", memory="64Mi", extra={"volcano.sh/gpu-memory": "6144"})
    text = policy(f"gpu{uuid.uuid4().hex[:6]}").replace("plugin nodeorder", "plugin nodeorder\n  plugin deviceshare {\n"
                                                          "    gpu_sharing = true\n  }")
    with SchedulerProcess(tmp_path, text, kube_cluster.kubeconfig, name) as scheduler:
        scheduler.wait_ready()
        wait_for(lambda: (lambda b: b if len(b) == 3 else None)(objects.bound()), "the three pods bound", 60)
        holders: dict[int, set[str]] = {}
        for key, pod in objects.pods().items():
            card = int(pod["metadata"]["annotations"]["volcano.sh/gpu-index"])
            holders.setdefault(card, set()).add(f"{objects.namespace}/{pod['metadata']['name']}")
        wait_for(lambda: all(p in scheduler.get("/ui")[1] for ps in holders.values() for p in ps),
                 "the holders on the page", 30)
        driver = browser()
        try:
            driver.get(scheduler.metrics_url() + "/ui")
            from selenium.webdriver.common.by import By

            rows = driver.find_elements(By.CSS_SELECTOR, f'#device-cards tr.device-card[data-node="{node}"]')
            assert sorted(int(r.get_attribute("data-card")) for r in rows) == [0, 1, 2, 3]
            for row in rows:
                card = int(row.get_attribute("data-card"))
                cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
                named = {p.strip() for p in cells[-1].split(",") if p.strip() and p.strip() != "-"}
                assert named == holders.get(card, set()), (card, cells)
                used = 6 * len(holders.get(card, ()))
                assert cells[3] == (f"{used}Gi / 16Gi" if used else "0 / 16Gi"), cells
            assert rows[0].is_displayed()
        except BaseException:
            for where in filter(None, (tmp_path, os.environ.get("POLICYDSL_ARTIFACTS"))):
                folder = Path(where)
                folder.mkdir(parents=True, exist_ok=True)
                shot = folder / "dashboard-devices-failure.png"
                driver.save_screenshot(str(shot))
                (folder / "dashboard-devices-failure.html").write_text(driver.page_source)
                print(f"screenshot: {shot}")
            raise
        finally:
            driver.quit()


DRA_API = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def test_the_dashboard_counts_dra_devices_per_class_and_node_as_the_claims_hold_them(
        tmp_path: Path, objects: Objects, kube_cluster: KubeCluster) -> None:
    """ResourceSlices published as a DRA driver would (3 GPUs on n0, 2 on n1) and one claim for two
    GPUs, its pod bound by the scheduler: in the browser, the class's row for each node shows the
    devices the slices publish and as allocated those the claim's status.allocation (read back from
    the API server) names on that node."""
    name, ns = unique_scheduler_name(), objects.namespace
    cls = f"gpu-{ns}"
    published = {f"{ns}-n0": 3, f"{ns}-n1": 2}
    for node in published:
        objects.node(node, cpu="4", memory="8Gi")
    objects.api.post(f"{DRA_API}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    objects.cluster_objects.append(f"{DRA_API}/deviceclasses/{cls}")
    for node, count in published.items():
        objects.api.post(f"{DRA_API}/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(count)]}})
        objects.cluster_objects.append(f"{DRA_API}/resourceslices/{node}-gpus")
    objects.api.post(f"{DRA_API}/namespaces/{ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "pair"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, "count": 2}}]}}})
    objects.api.post(f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"},
        "spec": {"schedulerName": name, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "pair"}]}})
    try:
        with SchedulerProcess(tmp_path, policy(f"dra{uuid.uuid4().hex[:6]}"), kube_cluster.kubeconfig, name) as scheduler:
            scheduler.wait_ready()
            wait_for(lambda: objects.bound().get("trainer"), "the pod bound", 60)
            claim = objects.api.get(f"{DRA_API}/namespaces/{ns}/resourceclaims/pair")
            allocated: dict[str, int] = {}
            for result in claim["status"]["allocation"]["devices"]["results"]:
                allocated[result["pool"]] = allocated.get(result["pool"], 0) + 1    # pools are named by node
            assert sum(allocated.values()) == 2
            wait_for(lambda: f'data-class="{cls}"' in scheduler.get("/ui")[1] and
                     all(f'data-node="{n}"' in scheduler.get("/ui")[1] for n in published), "the rows", 30)
            wait_for(lambda: f'<td class="num">{allocated.get(f"{ns}-n0", 0)}</td><td class="num">3</td>'
                     in scheduler.get("/ui")[1], "the allocation counted", 30)
            driver = browser()
            try:
                driver.get(scheduler.metrics_url() + "/ui")
                from selenium.webdriver.common.by import By

                for node, count in published.items():
                    row = driver.find_element(By.CSS_SELECTOR, f'#device-classes tr.device-class[data-class="{cls}"]'
                                                               f'[data-node="{node}"]')
                    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
                    used = allocated.get(node, 0)
                    assert cells == [cls, node, str(used), str(count), str(count - used)], cells
            except BaseException:
                for where in filter(None, (tmp_path, os.environ.get("POLICYDSL_ARTIFACTS"))):
                    folder = Path(where)
                    folder.mkdir(parents=True, exist_ok=True)
                    shot = folder / "dashboard-dra-failure.png"
                    driver.save_screenshot(str(shot))
                    (folder / "dashboard-dra-failure.html").write_text(driver.page_source)
                    print(f"screenshot: {shot}")
                raise
            finally:
                driver.quit()
    finally:
        # an allocated claim carries the delete-protection finalizer: taken off so the namespace goes
        for item in objects.api.get(f"{DRA_API}/namespaces/{ns}/resourceclaims")["items"]:
            objects.api.merge_patch(f"{DRA_API}/namespaces/{ns}/resourceclaims/{item['metadata']['name']}",
                                    {"metadata": {"finalizers": None}})
