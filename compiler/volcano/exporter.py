"""`export-volcano`: a policy as a Volcano scheduler config (and Queue objects).

Export works from the lowered IR of a policy that compiled clean, not from the Plan: the IR
holds what the author wrote, so defaults stay implicit on both sides and a Volcano config
survives import then export with the same keys. Names come from the catalog (`Flag.volcano`,
`Argument.volcano`, `PluginSpec.weight_volcano`). Anything Volcano has no place for (device
rules, borrowing settings, a score weight without a Volcano key, ...) is a warning pointing
at the policy text, and is left out. One default is written out: a policy that uses Dynamic
Resource Allocation gets `predicate.DynamicResourceAllocationEnable: true`, which Volcano leaves off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import yaml

from compiler import catalog as cat
from compiler.pipeline import Compilation, compile_file, compile_text
from compiler.quantities import format_base_units
from compiler.volcano import codes
from compiler.volcano.config_reader import CONFIG_KEY
from compiler.volcano.model import AFFINITY_SETTINGS, TranslationResult
from compiler.volcano.eviction_args import EXPORTERS as EVICTION_EXPORTERS
from compiler.volcano.nested_args import EXPORTERS, METRICS_SECTION, USAGE, export_metrics
from policydsl.diagnostics import Diagnostic, make

QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"
CONFIGMAP_NAME = "volcano-scheduler-configmap"
CONFIGMAP_NAMESPACE = "volcano-system"

Report = Callable[[str, tuple, str | None], None]     # message, IR path, hint


class ExportResult(TranslationResult):
    """A Volcano config (and Queue objects) printed from a policy."""


# --- YAML with Volcano's look: the actions string quoted, an embedded config as a block -------

class _Quoted(str):
    pass


class _Block(str):
    pass


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


_Dumper.add_representer(_Quoted, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", str(s), style='"'))
_Dumper.add_representer(_Block, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", str(s), style="|"))


def to_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


# --- config ---------------------------------------------------------------------------------

def _number(value: Any) -> Any:
    """Integral floats as ints (`2.0` -> `2`), as Volcano's own examples write them."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _argument(arg: cat.Argument, value: Any, path: tuple, report: Report) -> dict[str, Any]:
    """One policy argument as Volcano argument keys (a resource-weight map becomes several)."""
    if arg.volcano is None:
        report(f"`{arg.name}` has no Volcano argument; not exported", path, None)
        return {}
    if arg.kind == cat.RESOURCE_WEIGHTS:
        if not value:
            return {}
        out: dict[str, Any] = {arg.volcano: ", ".join(value)}
        out.update({f"{arg.volcano}.{resource}": _number(weight) for resource, weight in value.items()})
        return out
    if arg.kind in (cat.NUMBER, cat.INT, cat.PERCENT):
        return {arg.volcano: _number(value)}
    return {arg.volcano: value}


def _plugin(plugin: dict, path: tuple, report: Report) -> dict:
    spec = cat.PLUGINS[plugin["name"]]
    entry: dict[str, Any] = {"name": spec.name}
    for flag_name, value in plugin["flags"].items():
        entry[cat.FLAGS_BY_SETTING[cat.FLAG_PREFIX + flag_name].volcano] = value
    arguments: dict[str, Any] = {}
    weight = plugin.get("weight")
    if weight is not None:
        if spec.weight_volcano:
            arguments[spec.weight_volcano] = _number(weight)
        elif weight != spec.default_weight:
            report(f"Volcano has no score weight for plugin `{spec.name}`; `weight {_number(weight)}` is not exported",
                   (*path, "weight"),
                   "Volcano sums every scorer at weight 1; scale the plugin's own argument weights instead"
                   if spec.arguments else None)
    nested = EXPORTERS.get(spec.name) or EVICTION_EXPORTERS.get(spec.name)
    for name, value in plugin["arguments"].items():
        if nested is None or name not in nested[0]:
            arguments.update(_argument(spec.argument(name), value, (*path, "arguments", name), report))
    if nested is not None:
        arguments.update(nested[1](plugin["arguments"]))
    if arguments:
        entry["arguments"] = arguments
    return entry


# Volcano's predicates plugin allocates pods' ResourceClaims only with this switch on, and it is
# off by default (plugins/predicates/predicates.go); policydsl always allocates them.
DRA_PREDICATE_SWITCH = "predicate.DynamicResourceAllocationEnable"


def _dra_use(ir: dict) -> tuple | None:
    """Where the policy says it schedules DRA devices, as an IR path: a queue quota naming a
    DeviceClass (`deviceclass/<class>`), or capacity's `device_class_quota` set; None if nowhere."""
    for q, queue in enumerate(ir["queues"]):
        for key in ("capability", "deserved", "guarantee"):
            if any(str(r).startswith(cat.DEVICE_CLASS_PREFIX) for r in queue.get(key) or {}):
                return ("queues", q, key)
    for t, tier in enumerate(ir["tiers"]):
        for p, plugin in enumerate(tier["plugins"]):
            if plugin["name"] == "capacity" and plugin["arguments"].get("device_class_quota"):
                return ("tiers", t, "plugins", p, "arguments", "device_class_quota")
    return None


def _export_dra_switch(ir: dict, tiers: list[dict], report: Report) -> None:
    """A policy that uses DRA exports Volcano's predicate switch on where it leaves it implicit
    (Volcano's default is off, ours on): else the config would bind pods without their devices."""
    use = _dra_use(ir)
    if use is None:
        return
    entries = [entry for tier in tiers for entry in tier["plugins"] if entry["name"] == "predicates"]
    for entry in entries:
        entry.setdefault("arguments", {}).setdefault(DRA_PREDICATE_SWITCH, True)
    if not entries:
        report("the policy counts Dynamic Resource Allocation devices, but has no `predicates` plugin: Volcano "
               "allocates pods' ResourceClaims only there (policydsl allocates them regardless)", use,
               f"add `plugin predicates` (exported with {DRA_PREDICATE_SWITCH}: true)")


def scheduler_config(ir: dict, report: Report) -> dict:
    """The Volcano scheduler config for a policy's IR, as plain data."""
    config: dict[str, Any] = {"actions": _Quoted(", ".join(map(cat.volcano_action, ir["actions"])))}
    config["tiers"] = [
        {"plugins": [_plugin(plugin, ("tiers", t, "plugins", p), report) for p, plugin in enumerate(tier["plugins"])]}
        for t, tier in enumerate(ir["tiers"])
    ]
    _export_dra_switch(ir, config["tiers"], report)
    configurations = []
    for action, arguments in ir["action_arguments"].items():
        if not arguments:
            continue
        if action not in ir["actions"]:
            report(f"action `{action}` is not in `actions`, so its settings are not exported",
                   ("action_arguments", action, next(iter(arguments))), None)
            continue
        spec = cat.ACTIONS[action]
        exported: dict[str, Any] = {}
        for name, value in arguments.items():
            arg = next(a for a in spec.arguments if a.name == name)
            exported.update(_argument(arg, value, ("action_arguments", action, name), report))
        if exported:
            configurations.append({"name": cat.volcano_action(action), "arguments": exported})
    if configurations:
        config["configurations"] = configurations
    # The usage plugin's metrics source is the config's top-level `metrics` section in Volcano.
    metrics = next((export_metrics(p["arguments"]) for tier in ir["tiers"] for p in tier["plugins"]
                    if p["name"] == USAGE), None)
    if metrics:
        config[METRICS_SECTION] = metrics
    for d, device in enumerate(ir["devices"]):
        report(f"device rules for `{device['resource']}` have no Volcano equivalent; not exported", ("devices", d),
               "Volcano picks a device mode with deviceshare arguments (deviceshare.GPUSharingEnable, "
               "deviceshare.VGPUEnable) and the device plugin's own config")
    return config


# --- queues ---------------------------------------------------------------------------------

def _quantities(resources: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for resource, units in resources.items():
        text = format_base_units(resource, units)
        out[resource] = int(text) if text.isdigit() else text
    return out


def queue_objects(ir: dict, report: Report) -> list[dict]:
    """One Volcano Queue object per policy queue, parents first."""
    objects = []
    for q, queue in enumerate(ir["queues"]):
        spec: dict[str, Any] = {}
        if "weight" in queue:
            spec["weight"] = queue["weight"]
        for key in ("capability", "deserved"):
            if queue.get(key) is not None:
                spec[key] = _quantities(queue[key])
        if queue.get("guarantee") is not None:
            spec["guarantee"] = {"resource": _quantities(queue["guarantee"])}
        for key in ("reclaimable", "priority"):
            if key in queue:
                spec[key] = queue[key]
        if queue["parent"] not in (None, cat.ROOT_QUEUE):
            spec["parent"] = queue["parent"]
        if queue.get("dequeue", "traverse") != "traverse":
            spec["dequeueStrategy"] = queue["dequeue"]
        affinity: dict[str, dict[str, list[str]]] = {}
        for (part, term), setting in AFFINITY_SETTINGS.items():
            if queue.get(setting):
                affinity.setdefault(part, {})[term] = list(queue[setting])
        if affinity:
            spec["affinity"] = affinity
        obj: dict[str, Any] = {"apiVersion": QUEUE_API_VERSION, "kind": "Queue",
                               "metadata": {"name": queue["name"]}, "spec": spec}
        if queue.get("state") == "closed":
            obj["status"] = {"state": "Closed"}
            report(f"queue `{queue['name']}` is closed: the Queue carries `status.state: Closed`, which "
                   "`kubectl apply` does not set", ("queues", q, "state"),
                   f"close it in Volcano with `vcctl queue operate --name {queue['name']} --action close`")
        if queue.get("borrow") is False:
            report(f"queue `{queue['name']}`: Volcano has no switch to stop a queue borrowing; not exported",
                   ("queues", q, "borrow"), "cap what it may use with `capability` instead")
        if queue.get("borrow_limit") is not None:
            report(f"queue `{queue['name']}`: Volcano has no borrow limit; not exported",
                   ("queues", q, "borrow_limit"), "cap what it may use with `capability` instead")
        objects.append(obj)
    return objects


# --- the front door -------------------------------------------------------------------------

def _header(path: str, ir: dict) -> str:
    lines = [f"# Volcano scheduler config exported from {Path(path).name} by `policydsl export-volcano`."]
    labels = [f"{i + 1} \"{t['label']}\"" for i, t in enumerate(ir["tiers"]) if t["label"]]
    if labels:
        lines.append("# Tiers, labelled in the policy: " + ", ".join(labels) + ".")
    return "\n".join(lines) + "\n"


def export_compilation(compilation: Compilation, path: str, *, queues: bool = False,
                       configmap: bool = False) -> ExportResult:
    result = ExportResult(text=None, diagnostics=list(compilation.diagnostics), sources=compilation.sources)
    if not compilation.ok or compilation.lowered is None or compilation.lowered.ir is None:
        loaded = compilation.loaded
        result.unreadable = (loaded is not None and loaded.main is None
                             and all(d.code == "PD001" for d in compilation.errors))
        return result
    lowered = compilation.lowered
    ir = lowered.ir

    def report(message: str, ir_path: tuple, hint: str | None) -> None:
        span = None
        while ir_path and span is None:
            span = lowered.spans.get(ir_path)
            ir_path = ir_path[:-1]
        result.diagnostics.append(make(codes.NOT_EXPRESSIBLE, message, span, hint))

    config_text = to_yaml(scheduler_config(ir, report))
    header = _header(path, ir)
    if configmap:
        configmap_obj = {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": CONFIGMAP_NAME, "namespace": CONFIGMAP_NAMESPACE},
                         "data": {CONFIG_KEY: _Block(config_text)}}
        documents = [header + to_yaml(configmap_obj)]
    else:
        documents = [header + config_text]
    if queues:
        documents.extend(to_yaml(obj) for obj in queue_objects(ir, report))
    result.text = "---\n".join(documents)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result


def export_volcano(path: str, *, queues: bool = False, configmap: bool = False) -> ExportResult:
    """Compile the policy at `path` and export it; no output unless it compiles without errors."""
    return export_compilation(compile_file(path), path, queues=queues, configmap=configmap)


def export_volcano_text(text: str, path: str = "<string>", *, queues: bool = False,
                        configmap: bool = False) -> ExportResult:
    return export_compilation(compile_text(text, path), path, queues=queues, configmap=configmap)
