"""The catalog: every action, plugin, argument, queue setting and device setting that exists.

This is the single list. The linter, the lowering to IR, the Cerberus schemas, the docs and
the Volcano import/export all read it; nothing is listed twice. An `Argument.kind` says how a
written value becomes a plan value (see compiler.values); its `rules` are Cerberus rules on
that plan value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Kinds of values (compiler.values converts AST values by kind).
INT = "int"
NUMBER = "number"            # int or float
BOOL = "bool"
STRING = "string"
SYMBOL = "symbol"            # a bare name from `allowed`, e.g. `topology = nvlink`
QUANTITY = "quantity"        # one quantity; `resource` on the Argument says its unit
RESOURCES = "resources"      # {resource: quantity} in base units
RESOURCE_WEIGHTS = "resource_weights"  # {resource: number}
STRINGS = "strings"          # list of strings
PERCENT = "percent"          # 50% -> 50.0 (or a plain number 0..100)
STRING_MAP = "string_map"    # {name: string}
STRING_MAPS = "string_maps"  # list of {name: string}


@dataclass(frozen=True)
class Argument:
    name: str
    kind: str
    doc: str
    default: Any = None
    rules: dict = field(default_factory=dict)   # extra Cerberus rules (min, max, allowed, ...)
    volcano: str | None = None                  # the Volcano argument key, where one exists
    resource: str | None = None                 # for QUANTITY: the resource whose unit applies
    # Why setting it away from its default is refused (lint PD413, import PD614): an argument
    # Volcano has whose behaviour is not evaluated yet. Empty: it does what it says.
    not_evaluated: str = ""


def cerberus_rule(arg: Argument) -> dict:
    """The Cerberus rule for an argument's plan value."""
    base: dict = {
        INT: {"type": "integer"},
        NUMBER: {"type": "number"},
        BOOL: {"type": "boolean"},
        STRING: {"type": "string"},
        SYMBOL: {"type": "string"},
        QUANTITY: {"type": "integer", "min": 0},
        RESOURCES: {"type": "dict", "keysrules": {"type": "string"},
                    "valuesrules": {"type": "integer", "min": 0}},
        RESOURCE_WEIGHTS: {"type": "dict", "keysrules": {"type": "string"},
                           "valuesrules": {"type": "number", "min": 0}},
        STRINGS: {"type": "list", "schema": {"type": "string"}},
        PERCENT: {"type": "number", "min": 0, "max": 100},
        STRING_MAP: {"type": "dict", "keysrules": {"type": "string"}, "valuesrules": {"type": "string"}},
        STRING_MAPS: {"type": "list", "schema": {"type": "dict", "keysrules": {"type": "string"},
                                                 "valuesrules": {"type": "string"}}},
    }[arg.kind]
    rule = dict(base)
    rule.update(arg.rules)
    rule["nullable"] = arg.default is None
    return rule


# --- extension points and Volcano's per-plugin flags -------------------------------------

@dataclass(frozen=True)
class Flag:
    """A per-plugin switch of one extension point (`enable_job_order = false`)."""

    name: str
    volcano: str
    default: bool
    doc: str


FLAGS: tuple[Flag, ...] = (
    Flag("job_order", "enableJobOrder", True, "order jobs"),
    Flag("hierarchy", "enableHierarchy", False, "hierarchical queues (drf, capacity; nodegroup: inherited node groups)"),
    Flag("job_ready", "enableJobReady", True, "decide whether a job is ready"),
    Flag("job_pipelined", "enableJobPipelined", True, "decide whether a job is pipelined"),
    Flag("task_order", "enableTaskOrder", True, "order tasks within a job"),
    Flag("preemptable", "enablePreemptable", True, "pick victims for preempt"),
    Flag("reclaimable", "enableReclaimable", True, "pick victims for reclaim"),
    Flag("preemptive", "enablePreemptive", True, "decide whether a queue may reclaim"),
    Flag("queue_order", "enableQueueOrder", True, "order queues"),
    Flag("cluster_order", "enabledClusterOrder", False, "order clusters"),
    Flag("predicate", "enablePredicate", True, "filter nodes"),
    Flag("best_node", "enableBestNode", True, "pick the best node"),
    Flag("node_order", "enableNodeOrder", True, "score nodes"),
    Flag("hypernode_order", "enabledHyperNodeOrder", True, "score HyperNodes for network topology placement"),
    Flag("target_job", "enableTargetJob", True, "pick a target job"),
    Flag("reserved_nodes", "enableReservedNodes", True, "reserve nodes"),
    Flag("job_enqueued", "enableJobEnqueued", True, "admit jobs (enqueue)"),
    Flag("victim", "enabledVictim", True, "pick victim tasks"),
    Flag("job_starving", "enableJobStarving", True, "decide whether a job is starving"),
    Flag("overused", "enabledOverused", True, "decide whether a queue is overused"),
    Flag("allocatable", "enabledAllocatable", True, "decide whether a queue may allocate"),
)
FLAG_PREFIX = "enable_"
FLAGS_BY_SETTING = {FLAG_PREFIX + f.name: f for f in FLAGS}
FLAGS_BY_VOLCANO = {f.volcano: f for f in FLAGS}


# --- plugins --------------------------------------------------------------------------------

@dataclass(frozen=True)
class PluginSpec:
    name: str
    doc: str
    points: frozenset[str]                 # extension points it implements (Flag names + more)
    arguments: tuple[Argument, ...] = ()
    scores: bool = False                   # contributes to node scores; takes `weight N`
    default_weight: float = 1.0
    weight_volcano: str | None = None      # Volcano's key for the plugin's score weight
    conflicts: tuple[str, ...] = ()        # plugins it must not be combined with

    def argument(self, name: str) -> Argument | None:
        return next((a for a in self.arguments if a.name == name), None)


# A Go duration ("90s", "1h30m"), as time.ParseDuration reads one (positive).
DURATION = r"^\+?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$"
# A tdm revocable zone's window as Volcano parses it (time layout 15:04 on each side of one `-`).
TDM_WINDOW = r"^\s*([01]?\d|2[0-3]):[0-5]\d-([01]?\d|2[0-3]):[0-5]\d\s*$"
# The rescheduling strategies evaluated here (runtime/README.md: Volcano v1.14.1 implements only
# lowNodeUtilization and ignores the other names of its design doc).
RESCHEDULING_STRATEGIES = ("lowNodeUtilization", "offlineOnly", "lowPriorityFirst")


def _weights(*pairs: tuple[str, int, str]) -> tuple[Argument, ...]:
    return tuple(
        Argument(name, NUMBER, doc, default, {"min": 0}, volcano=f"{name}.weight")
        for name, default, doc in pairs
    )


def _predicate_switches(*pairs: tuple[str, str, str]) -> tuple[Argument, ...]:
    return tuple(Argument(name, BOOL, doc, True, volcano=f"predicate.{volcano}") for name, volcano, doc in pairs)


PLUGINS: dict[str, PluginSpec] = {
    spec.name: spec
    for spec in (
        PluginSpec(
            "priority", "Orders jobs and tasks by PriorityClass value; victims must have lower priority.",
            frozenset({"job_order", "task_order", "preemptable", "job_starving"}),
        ),
        PluginSpec(
            "gang", "All-or-nothing: a job runs only when minMember tasks can run together.",
            frozenset({"job_order", "job_ready", "job_pipelined", "job_starving", "preemptable",
                       "reclaimable", "job_valid"}),
        ),
        PluginSpec(
            "conformance", "Never evicts critical system pods (system-*-critical, kube-system).",
            frozenset({"preemptable", "reclaimable"}),
        ),
        PluginSpec(
            "cdp", "Cooldown protection: a running pod is no victim of preempt or reclaim until its "
            "volcano.sh/cooldown-time (label or annotation, a duration such as 600s) has passed since it was "
            "scheduled.",
            frozenset({"preemptable", "reclaimable"}),
        ),
        PluginSpec(
            "sla", "Service level: a job whose waiting time (its PodGroup's volcano.sh/sla-waiting-time or "
            "sla-waiting-time annotation, else `waiting_time`) has passed is admitted by enqueue and counts as "
            "pipelined; jobs with a waiting time go first in job order, earliest deadline first.",
            frozenset({"job_order", "job_enqueued", "job_pipelined", "job_valid"}),
            arguments=(
                Argument("waiting_time", STRING, "the waiting time of jobs that do not set their own, a duration "
                         "such as 30m or 1h2m3s", None,
                         {"regex": r"^\+?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$"},
                         volcano="sla-waiting-time"),
            ),
        ),
        PluginSpec(
            "resourcequota", "Enqueue admits a job only while its PodGroup's minResources, with what the "
            "namespace's ResourceQuotas say is used and the jobs admitted before it, stays within their hard "
            "limits (resources compared by the quota's names).",
            frozenset({"job_enqueued"}),
        ),
        PluginSpec(
            "pdb", "PodDisruptionBudgets bound the victims of preempt and reclaim: a pod whose eviction would take "
            "a budget of its namespace below its disruptionsAllowed is no victim.",
            frozenset({"preemptable", "reclaimable"}),
        ),
        PluginSpec(
            "tdm", "Time division multiplexing: nodes labelled volcano.sh/revocable-zone=<zone> take only "
            "preemptable pods (volcano.sh/preemptable: \"true\" or volcano.sh/revocable-zone: \"*\"), and only while "
            "the zone's window in `revocable_zones` is open (the cycle's clock, UTC), and score them first; once it "
            "closes, the shuffle action evicts their preemptable pods every `evict_period`, each job within its "
            "disruption budget. Jobs not preemptable go first, and preempt only preemptable pods off revocable nodes.",
            frozenset({"predicate", "node_order", "preemptable", "victim", "job_order", "job_pipelined",
                       "job_starving"}),
            arguments=(
                Argument("revocable_zones", STRING_MAP, "each revocable zone's daily window, HH:MM-HH:MM (a start "
                         "at or after its end runs into the next day; 0:00-0:00 is the whole day)", {},
                         {"valuesrules": {"type": "string", "regex": TDM_WINDOW}}, volcano="tdm.revocable-zone"),
                Argument("evict_period", STRING, "how often the preemptable pods of closed zones are evicted, a "
                         "duration such as 1m", "1m", {"regex": DURATION}, volcano="tdm.evict.period"),
            ),
        ),
        PluginSpec(
            "rescheduling", "Evicts running pods to even out node utilization, when the shuffle action runs and "
            "`interval` has passed: lowNodeUtilization takes pods (lowest priority first) off nodes above "
            "`target_thresholds` while nodes below `thresholds` in every resource can take them and stay below "
            "their targets, and only a pod the cycle would place on such a node; offlineOnly takes preemptable "
            "pods only; `queues` and `labels` narrow the victims. Utilization is requests over allocatable.",
            frozenset({"victim"}),
            arguments=(
                Argument("interval", STRING, "the least time between two runs of the strategies, a duration",
                         "5m", {"regex": DURATION}, volcano="interval"),
                Argument("metrics_period", STRING, "Volcano's metrics window; kept for export-volcano (utilization "
                         "here is the pods' requests: runtime/README.md)", "5m", {"regex": DURATION},
                         volcano="metricsPeriod"),
                Argument("strategies", STRINGS, "the strategies, in order", ["lowNodeUtilization"],
                         {"schema": {"type": "string", "allowed": list(RESCHEDULING_STRATEGIES)}},
                         volcano="strategies"),
                Argument("thresholds", RESOURCE_WEIGHTS, "lowNodeUtilization: a node below these (percent of "
                         "allocatable; a resource left out: 100) in every resource is underused", {},
                         {"keysrules": {"type": "string", "allowed": ["cpu", "memory", "pods"]},
                          "valuesrules": {"type": "number", "min": 0, "max": 100}}),
                Argument("target_thresholds", RESOURCE_WEIGHTS, "lowNodeUtilization: a node above one of these (a "
                         "resource left out: 100) is overused, and underused nodes are filled up to them", {},
                         {"keysrules": {"type": "string", "allowed": ["cpu", "memory", "pods"]},
                          "valuesrules": {"type": "number", "min": 0, "max": 100}}),
                Argument("queues", STRINGS, "only pods of these queues are victims (empty: every queue)", [],
                         volcano="queueSelector"),
                Argument("labels", STRING_MAP, "only pods with all these labels are victims (empty: every pod)", {},
                         volcano="labelSelector"),
            ),
        ),
        PluginSpec(
            "drf", "Dominant resource fairness: lower dominant share first.",
            frozenset({"job_order", "preemptable", "queue_order", "reclaimable", "hierarchy"}),
        ),
        PluginSpec(
            "proportion", "Queues share the cluster by weight (water-filling), capped by capability, "
            "raised to guarantee.",
            frozenset({"queue_order", "reclaimable", "overused", "allocatable", "job_enqueued", "preemptive"}),
            conflicts=("capacity",),
        ),
        PluginSpec(
            "capacity", "Queues with explicit per-resource deserved, guarantee and capability, hierarchical.",
            frozenset({"queue_order", "reclaimable", "overused", "allocatable", "job_enqueued", "preemptive",
                       "hierarchy"}),
            arguments=(
                Argument("device_class_quota", BOOL, "count the devices of pods' ResourceClaims against queue "
                         "quotas that name `deviceclass/<DeviceClass>` (Dynamic Resource Allocation)", True,
                         volcano="capacity.DynamicResourceAllocationEnable"),
            ),
            conflicts=("proportion",),
        ),
        PluginSpec(
            "overcommit", "Admits jobs while inqueue demand fits the cluster times an overcommit factor.",
            frozenset({"job_enqueued"}),
            arguments=(
                Argument("factor", NUMBER, "cluster size multiplier for admission", 1.2, {"min": 0},
                         volcano="overcommit-factor"),
            ),
        ),
        PluginSpec(
            "predicates", "Filters nodes: resource fit, node selector and affinity, taints, pod count, inter-pod "
            "affinity, topology spread, host ports, volume zones and attach limits.",
            frozenset({"predicate"}),
            arguments=_predicate_switches(
                ("node_affinity", "NodeAffinityEnable", "required node affinity and nodeSelector"),
                ("taint_toleration", "TaintTolerationEnable", "taints and tolerations"),
                ("node_ports", "NodePortsEnable", "host ports"),
                ("pod_affinity", "PodAffinityEnable", "inter-pod affinity"),
                ("pod_topology_spread", "PodTopologySpreadEnable", "topology spread constraints"),
                ("node_volume_limits", "NodeVolumeLimitsEnable", "volume count limits"),
                ("volume_zone", "VolumeZoneEnable", "volume zones"),
            ) + (
                Argument("dynamic_resources", BOOL, "allocate pods' ResourceClaims from ResourceSlices "
                         "(kube-scheduler's DynamicResources)", True,
                         volcano="predicate.DynamicResourceAllocationEnable",
                         not_evaluated="policydsl always allocates a pod's ResourceClaims as kube-scheduler does "
                                       "(a pod placed without its devices would not start); leave it true"),
            ),
        ),
        PluginSpec(
            "nodeorder", "Scores nodes with kube-scheduler style scorers, each weighted.",
            frozenset({"node_order"}),
            arguments=_weights(
                ("leastrequested", 1, "prefer nodes with more free resources (spread)"),
                ("mostrequested", 0, "prefer fuller nodes"),
                ("nodeaffinity", 2, "preferred node affinity"),
                ("podaffinity", 2, "preferred inter-pod affinity"),
                ("balancedresource", 1, "balance CPU and memory use"),
                ("tainttoleration", 3, "prefer nodes whose PreferNoSchedule taints are tolerated"),
                ("imagelocality", 1, "prefer nodes that have the image"),
                ("podtopologyspread", 2, "preferred topology spread"),
            ),
            scores=True,
        ),
        PluginSpec(
            "binpack", "Packs tasks onto the fullest nodes that fit (Volcano's formula).",
            frozenset({"node_order"}),
            arguments=(
                Argument("cpu", NUMBER, "weight of CPU", 1, {"min": 0}, volcano="binpack.cpu"),
                Argument("memory", NUMBER, "weight of memory", 1, {"min": 0}, volcano="binpack.memory"),
                Argument("resources", RESOURCE_WEIGHTS, "weights of extended resources", {},
                         volcano="binpack.resources"),
            ),
            scores=True,
            weight_volcano="binpack.weight",
        ),
        PluginSpec(
            "network-topology-aware", "Scores HyperNodes for gangs that ask for network topology (the fullest that "
            "fits, HyperNode-level binpack) and, for pods without topology, nodes by how full their HyperNodes are, "
            "so whole switches stay free for gangs.",
            frozenset({"node_order", "hypernode_order"}),
            arguments=(
                Argument("cpu", NUMBER, "HyperNode-level binpack weight of CPU", 1, {"min": 0},
                         volcano="hypernode.binpack.cpu"),
                Argument("memory", NUMBER, "HyperNode-level binpack weight of memory", 1, {"min": 0},
                         volcano="hypernode.binpack.memory"),
                Argument("resources", RESOURCE_WEIGHTS, "HyperNode-level binpack weights of extended resources", {},
                         volcano="hypernode.binpack.resources"),
                Argument("normal_pod_binpack", BOOL, "score nodes for pods without network topology by how full "
                         "their HyperNodes are", True, volcano="hypernode.binpack.normal-pod.enable"),
                Argument("normal_pod_fading", NUMBER, "a tier-i HyperNode's share of that score is fading^(i-1) "
                         "(0: tier 1 only)", 0.8, {"min": 0}, volcano="hypernode.binpack.normal-pod.fading"),
            ),
            scores=True,
            weight_volcano="weight",
        ),
        PluginSpec(
            "nodegroup", "Keeps each queue's pods in its node groups (nodes labelled volcano.sh/nodegroup-name): "
            "required groups filter, preferred ones score, anti-affinity the other way round; with "
            "`enable_hierarchy`, a queue without groups takes its nearest ancestor's.",
            frozenset({"predicate", "node_order", "hierarchy"}),
            arguments=(
                Argument("strict", BOOL, "nodes without a node group are closed to every queue (Volcano's "
                         "default); false opens them to queues that name no groups", True, volcano="strict"),
            ),
            scores=True,
        ),
        PluginSpec(
            "task-topology", "A job's tasks by their affinity to each other (its PodGroup's "
            "volcano.sh/task-topology-affinity, -anti-affinity and -task-order annotations, task names from pods' "
            "volcano.sh/task-spec): tasks that like each other are put in buckets, placed bucket by bucket in the "
            "annotated order, and scored onto the nodes their bucket is on; tasks that dislike each other away from "
            "each other. A malformed annotation holds the job, naming it.",
            frozenset({"task_order", "node_order", "job_valid"}),
            scores=True,
            weight_volcano="task-topology.weight",
        ),
        PluginSpec(
            "numa-aware", "Places a Guaranteed pod's exclusive CPUs on NUMA nodes as the kubelet's CPU and topology "
            "managers would (each node's Numatopology from Volcano's resource exporter): a pod with "
            "volcano.sh/numa-topology-policy passes only nodes whose static CPU manager and topology manager "
            "policy (best-effort, restricted, single-numa-node) match it and admit its containers' CPUs; other "
            "Guaranteed pods are checked under the node's policy; nodes where its CPUs span fewer NUMA nodes "
            "score higher.",
            frozenset({"predicate", "node_order"}),
            scores=True,
            weight_volcano="weight",
        ),
        PluginSpec(
            "resource-strategy-fit", "Scores nodes per resource: MostAllocated (pack) or LeastAllocated (spread), "
            "each resource weighted (a key ending in `*` weighs every resource it prefixes); a pod may choose with "
            "volcano.sh/resource-strategy-scoring-type and volcano.sh/resource-strategy-weight. With `sra_weight`, "
            "nodes without scarce resources are kept for tasks that need none; with `proportional`, a node keeps CPU "
            "and memory in proportion to its idle scarce resources from tasks that ask none of them.",
            frozenset({"node_order", "predicate"}),
            arguments=(
                Argument("most_allocated", RESOURCE_WEIGHTS, "resources scored MostAllocated (fuller nodes first), "
                         "with their weights", {}, {"keysrules": {"type": "string", "regex": r"^[^*]+\*?$"}},
                         volcano="resources"),
                Argument("least_allocated", RESOURCE_WEIGHTS, "resources scored LeastAllocated (emptier nodes first), "
                         "with their weights; with neither map set, cpu and memory at weight 1", {},
                         {"keysrules": {"type": "string", "regex": r"^[^*]+\*?$"}}, volcano="resources"),
                Argument("sra_resources", RESOURCE_WEIGHTS, "scarce resources (sra) with their weights", {},
                         volcano="sra.resourceWeight"),
                Argument("sra_weight", NUMBER, "weight of the scarce-resource avoidance score (0: off)", 0, {"min": 0},
                         volcano="sra.weight"),
                Argument("proportional", BOOL, "keep CPU and memory in proportion to scarce resources' idle amounts: "
                         "a task asking none of them passes a node only if, after it, the node's idle CPU and "
                         "memory stay at or above idle(r) × the ratios of each resource r the node has",
                         False, volcano="proportional.enable"),
                Argument("proportional_cpu", RESOURCE_WEIGHTS, "CPUs kept per idle unit of each proportional "
                         "resource (1 where only `proportional_memory` names it)", {},
                         volcano="proportional.resourceProportion"),
                Argument("proportional_memory", RESOURCE_WEIGHTS, "GB (10^9 bytes) of memory kept per idle unit of "
                         "each proportional resource (1 where only `proportional_cpu` names it)", {},
                         volcano="proportional.resourceProportion"),
            ),
            scores=True,
            default_weight=10.0,
            weight_volcano="resourceStrategyFitWeight",
        ),
        PluginSpec(
            "deviceshare", "Places device requests on cards: whole cards, GPU memory slices or vGPU.",
            frozenset({"predicate", "node_order"}),
            arguments=(
                Argument("gpu_sharing", BOOL, "share GPUs by volcano.sh/gpu-memory", False,
                         volcano="deviceshare.GPUSharingEnable"),
                Argument("gpu_number", BOOL, "whole GPUs by volcano.sh/gpu-number", False,
                         volcano="deviceshare.GPUNumberEnable"),
                Argument("vgpu", BOOL, "HAMi vGPU by volcano.sh/vgpu-* (hami-core mode)", False,
                         volcano="deviceshare.VGPUEnable"),
                Argument("node_lock", BOOL, "lock a node (its annotation gpu / hamivgpu) from a shared or vGPU "
                         "pod's bind until its device plugin served it; stale after 5 minutes", False,
                         volcano="deviceshare.NodeLockEnable"),
                Argument("gpu_exclusive_rules", STRING_MAPS, "label maps: a vGPU pod carrying all labels of one "
                         "rule shares no card with another such pod (of any rule)", [],
                         volcano="deviceshare.GPUExclusiveRules"),
                Argument("schedule_policy", SYMBOL, "card choice: binpack fills cards, spread spreads",
                         "binpack", {"allowed": ["binpack", "spread"]}, volcano="deviceshare.SchedulePolicy"),
            ),
            scores=True,
            # Volcano's deviceshare.ScheduleWeight defaults to 0: no device node score unless set.
            default_weight=0.0,
            weight_volcano="deviceshare.ScheduleWeight",
        ),
        PluginSpec(
            "usage", "Node load: a node whose CPU or memory load (averaged over 10 minutes, read from the "
            "metrics source every `metrics_interval`, off the scheduling path) is above its threshold takes no new "
            "pod, and less loaded nodes score higher; a node without load figures of the last 5 minutes passes "
            "and scores 0, as Volcano's.",
            frozenset({"predicate", "node_order"}),
            arguments=(
                Argument("cpu_weight", INT, "weight of CPU load in the score", 1, {"min": 0}, volcano="cpu.weight"),
                Argument("memory_weight", INT, "weight of memory load in the score", 1, {"min": 0},
                         volcano="memory.weight"),
                Argument("cpu_threshold", INT, "CPU load (percent) above which a node takes no new pod", 80,
                         {"min": 0}, volcano="thresholds.cpu"),
                Argument("memory_threshold", INT, "memory load (percent) above which a node takes no new pod", 80,
                         {"min": 0}, volcano="thresholds.mem"),
                Argument("metrics_type", SYMBOL, "where node load is read: prometheus, elasticsearch or "
                         "prometheus_adaptor (the custom metrics API's node_cpu_usage_avg / node_memory_usage_avg "
                         "through the API server) (Volcano's `metrics.type`); unset: no load is read and the plugin "
                         "does nothing, as Volcano's", None,
                         {"allowed": ["prometheus", "elasticsearch", "prometheus_adaptor"]}, volcano="metrics.type"),
                Argument("metrics_address", STRING, "the metrics source's URL (Volcano's `metrics.address`; not used "
                         "by prometheus_adaptor)", None,
                         {"regex": r"^https?://\S+$"}, volcano="metrics.address"),
                Argument("metrics_interval", STRING, "how often node load is read, a duration such as 30s", "30s",
                         {"regex": r"^\+?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$"}, volcano="metrics.interval"),
                Argument("metrics_insecure_skip_verify", BOOL, "do not verify the metrics source's TLS certificate",
                         False, volcano="metrics.tls.insecureSkipVerify"),
                Argument("elasticsearch_index", STRING, "the Elasticsearch index searched", "metricbeat-*",
                         volcano="metrics.elasticsearch.index"),
                Argument("elasticsearch_hostname_field", STRING, "the Elasticsearch field holding the node name",
                         "host.hostname", volcano="metrics.elasticsearch.hostnameFieldName"),
            ),
            scores=True,
            default_weight=5.0,
            weight_volcano="usage.weight",
        ),
        PluginSpec(
            "extender", "An HTTP extender (Volcano's protocol): each configured verb is a POST to "
            "`url_prefix`/verb with Volcano's JSON body, bounded by `http_timeout` per call and a budget per cycle; "
            "when it fails, `ignorable` goes on without it (logged), else the pods it concerns wait naming it.",
            frozenset({"predicate", "node_order", "preemptable", "reclaimable", "overused", "job_enqueued"}),
            arguments=(
                Argument("url_prefix", STRING, "the extender's base URL", None, {"regex": r"^https?://\S+$"},
                         volcano="extender.urlPrefix"),
                Argument("http_timeout", STRING, "the time one call may take, a duration such as 100ms", "1s",
                         {"regex": r"^\+?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$"},
                         volcano="extender.httpTimeout"),
                Argument("on_session_open_verb", STRING, "verb called as each cycle opens", None,
                         volcano="extender.onSessionOpenVerb"),
                Argument("on_session_close_verb", STRING, "verb called as each cycle closes", None,
                         volcano="extender.onSessionCloseVerb"),
                Argument("predicate_verb", STRING, "verb filtering nodes (task, node)", None,
                         volcano="extender.predicateVerb"),
                Argument("prioritize_verb", STRING, "verb scoring nodes (task, nodes)", None,
                         volcano="extender.prioritizeVerb"),
                Argument("preemptable_verb", STRING, "verb choosing preempt victims", None,
                         volcano="extender.preemptableVerb"),
                Argument("reclaimable_verb", STRING, "verb choosing reclaim victims", None,
                         volcano="extender.reclaimableVerb"),
                Argument("queue_overused_verb", STRING, "verb saying whether a queue is overused", None,
                         volcano="extender.queueOverusedVerb"),
                Argument("job_enqueueable_verb", STRING, "verb admitting jobs (enqueue)", None,
                         volcano="extender.jobEnqueueableVerb"),
                Argument("ignorable", BOOL, "when the extender fails, go on without it (else the pods, jobs or "
                         "queues it concerns wait, naming it and the error)", False, volcano="extender.ignorable"),
                Argument("managed_resources", STRINGS, "the extender concerns only pods asking one of these "
                         "resources (empty: every pod)", [], volcano="extender.managedResources"),
            ),
        ),
    )
}

# Settings policydsl once accepted that are gone, with where their meaning lives now (the hint of
# the unknown-setting error).
RETIRED_SETTINGS = {
    "vgpu_pod_group_spread": "Volcano never had this argument (`deviceshare.VGPUPodGroupDeviceSpread`): a pod asks "
                             "for its PodGroup's vGPU spread with the annotation volcano.sh/vgpu-podgroup-policy: spread",
}

# Plugins that pick victims, per action that evicts.
VICTIM_POINT = {"preempt": "preemptable", "reclaim": "reclaimable", "shuffle": "victim"}


# --- actions --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ActionSpec:
    name: str
    doc: str
    arguments: tuple[Argument, ...] = ()
    volcano: str | None = None      # Volcano's name for the action, where it differs from ours
    # A gang-aware eviction action: the action whose extension points it consults (and which it
    # replaces: Volcano refuses both in one action list).
    evicts_as: str | None = None


# How long the room a preemptor's or reclaimer's victims free stays held for it (its nomination)
# before it is released with a reason: victims that take longer to terminate, or a preemptor
# that cannot bind there, do not hold a node for ever.
RESERVATION_SECONDS = Argument("reservation_seconds", NUMBER, "seconds the room freed for a preemptor stays "
                               "held for it", 300, {"min": 1})

# Volcano's gangpreempt / gangreclaim arguments (pkg/scheduler/actions/gangpreempt): whether a
# gang at its minimum may be a victim as a whole (allowWholeBundle), and how many HyperNodes a job
# asking for hard network topology searches for victims (maxDomains; Volcano falls back to 8 on a
# value <= 0, ours refuses it).
GANG_EVICTION_ARGUMENTS = (
    Argument("whole_gangs", BOOL, "a gang at its minimum may be evicted whole, after every task above gangs' "
             "minimums", True, volcano="allowWholeBundle"),
    Argument("max_domains", INT, "most HyperNodes searched for victims for a job asking hard network topology", 8,
             {"min": 1}, volcano="maxDomains"),
    RESERVATION_SECONDS,
)

ACTIONS: dict[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec("enqueue", "Admits pending jobs (PodGroup Pending -> Inqueue).", (
            Argument("overcommit_factor", NUMBER, "admission overcommit of the cluster", None, {"min": 0},
                     volcano="overcommit-factor"),
        )),
        ActionSpec("allocate", "Places tasks of admitted jobs: queue -> job -> task, gangs as a unit."),
        ActionSpec("preempt", "Evicts lower-priority tasks within a queue for starving jobs.", (
            Argument("topology_aware", BOOL, "prefer victims that free a topology domain", False,
                     volcano="enableTopologyAwarePreemption"),
            Argument("min_candidate_nodes_percentage", PERCENT, "share of nodes to search for victims", 10,
                     volcano="minCandidateNodesPercentage"),
            Argument("min_candidate_nodes_absolute", INT, "fewest nodes to search", 1, {"min": 0},
                     volcano="minCandidateNodesAbsolute"),
            Argument("max_candidate_nodes_absolute", INT, "most nodes to search", 100, {"min": 1},
                     volcano="maxCandidateNodesAbsolute"),
            RESERVATION_SECONDS,
        )),
        ActionSpec("reclaim", "Evicts tasks of queues above their deserved share for starving queues.",
                   (RESERVATION_SECONDS,)),
        ActionSpec("gang_preempt", "Preempt by bundles: tasks above gangs' minimums first, then whole gangs.",
                   GANG_EVICTION_ARGUMENTS, volcano="gangpreempt", evicts_as="preempt"),
        ActionSpec("gang_reclaim", "Reclaim by bundles: tasks above gangs' minimums first, then whole gangs.",
                   GANG_EVICTION_ARGUMENTS, volcano="gangreclaim", evicts_as="reclaim"),
        ActionSpec("backfill", "Places zero-request tasks of admitted jobs."),
        ActionSpec("shuffle", "Evicts the running pods the plugins answering `victim` choose (tdm: pods of "
                   "closed revocable zones; rescheduling: pods of overused nodes), each with its reason."),
    )
}
# The order a cycle must keep when several are present (enqueue before allocate, ...).
CANONICAL_ACTION_ORDER = ("enqueue", "allocate", "preempt", "gang_preempt", "reclaim", "gang_reclaim", "backfill",
                          "shuffle")
# Volcano's action names (its config's `actions` and `configurations[].name`) -> ours.
ACTION_BY_VOLCANO = {spec.volcano or spec.name: spec.name for spec in ACTIONS.values()}


def volcano_action(name: str) -> str:
    """Volcano's name for one of our actions."""
    return ACTIONS[name].volcano or name


def consulting(actions) -> set[str]:
    """The actions listed and those whose extension points a listed gang action consults."""
    return {*actions, *(ACTIONS[a].evicts_as for a in actions if a in ACTIONS and ACTIONS[a].evicts_as)}


# --- queues ---------------------------------------------------------------------------------

ROOT_QUEUE = "root"
DEFAULT_QUEUE = "default"

QUEUE_SETTINGS: tuple[Argument, ...] = (
    Argument("weight", INT, "share of the parent's resources relative to siblings (0: none but its guarantee)", 1,
             {"min": 0, "max": 65535}),
    Argument("capability", RESOURCES, "hard cap on what the queue may use", None),
    Argument("guarantee", RESOURCES, "reserved floor no other queue may take", None),
    Argument("deserved", RESOURCES, "explicit fair share (capacity plugin)", None),
    Argument("priority", INT, "queue order: higher first", 0),
    Argument("reclaimable", BOOL, "others may reclaim what it uses above its deserved share", True),
    Argument("borrow", BOOL, "may use idle resources of its siblings above its deserved share", True),
    Argument("borrow_limit", RESOURCES, "most it may borrow above its deserved share", None),
    Argument("state", SYMBOL, "closed queues admit no new jobs", "open", {"allowed": ["open", "closed"]}),
    Argument("dequeue", SYMBOL, "once one of its jobs cannot allocate in a cycle: the others go on (traverse), "
             "or those of the same or lower priority wait (fifo), or those of lower priority (priorityfifo)",
             "traverse", {"allowed": ["traverse", "fifo", "priorityfifo"]}),
    Argument("node_groups", STRINGS, "node groups its pods may run in (nodegroup plugin)", []),
    Argument("preferred_node_groups", STRINGS, "node groups its pods prefer (nodegroup plugin)", []),
    Argument("excluded_node_groups", STRINGS, "node groups its pods may not run in (nodegroup plugin)", []),
    Argument("avoided_node_groups", STRINGS, "node groups its pods run in only when others are full "
             "(nodegroup plugin)", []),
)
QUEUE_SETTINGS_BY_NAME = {a.name: a for a in QUEUE_SETTINGS}
# Volcano's Queue fields a policy spells another way: the hint when one is written as a setting.
QUEUE_SPELLINGS = {
    "parent": "a queue's parent is the queue it is written in: nest `queue child { ... }` inside "
              "`queue parent { ... }` (Volcano's spec.parent)",
    "dequeueStrategy": "write `dequeue = fifo` (or traverse, priorityfifo)",
    "affinity": "write node groups as `node_groups`, `preferred_node_groups`, `excluded_node_groups` and "
                "`avoided_node_groups` (Volcano's spec.affinity)",
}


# --- devices --------------------------------------------------------------------------------

DEVICE_SETTINGS: tuple[Argument, ...] = (
    Argument("sharing", SYMBOL, "whole cards, or shared by memory slices (and compute percent)", "whole",
             {"allowed": ["whole", "memory"]}),
    Argument("card_memory", QUANTITY, "memory of one card", None, {"min": 1}, resource="memory"),
    Argument("slice", QUANTITY, "unit of memory a shared card is cut into", None, {"min": 1}, resource="memory"),
    Argument("compute_percent", PERCENT, "compute granted per slice, % of a card", None),
    Argument("max_tasks_per_card", INT, "most tasks sharing one card", None, {"min": 1}),
    Argument("topology", SYMBOL, "keep a multi-card task's cards together", "none",
             {"allowed": ["nvlink", "numa", "none"]}),
    Argument("models", STRINGS, "accepted card models (node label values)", []),
    Argument("model_label", STRING, "node label that names the card model", "nvidia.com/gpu.product"),
    Argument("memory_resource", STRING, "pod resource that requests card memory (shared)", None),
    Argument("cores_resource", STRING, "pod resource that requests compute percent (shared)", None),
    Argument("policy", SYMBOL, "card choice: binpack fills cards first, spread spreads", "binpack",
             {"allowed": ["binpack", "spread"]}),
)
DEVICE_SETTINGS_BY_NAME = {a.name: a for a in DEVICE_SETTINGS}


# --- resources ------------------------------------------------------------------------------

STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
WELL_KNOWN_DEVICE_RESOURCES = (
    "nvidia.com/gpu", "amd.com/gpu", "huawei.com/Ascend910", "huawei.com/Ascend310",
    "volcano.sh/gpu-memory", "volcano.sh/gpu-number", "volcano.sh/vgpu-number",
    "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores", "volcano.sh/vgpu-memory-percentage",
)


# A queue's quota on a DeviceClass's devices (runtime.cluster.draquota).
DEVICE_CLASS_PREFIX = "deviceclass/"


def is_known_resource(name: str) -> bool:
    """Standard names, hugepages, any `domain/name` extended resource, and a DeviceClass's device
    count as queues name it (`deviceclass/<class>`, Volcano's capacity DRA quota)."""
    if name in STANDARD_RESOURCES or name.startswith("hugepages-"):
        return True
    if name.startswith(DEVICE_CLASS_PREFIX) and len(name) > len(DEVICE_CLASS_PREFIX):
        return True
    domain, slash, rest = name.partition("/")
    return bool(slash and "." in domain and rest)
