"""Volcano plugin arguments that are nested mappings, read into and written from policy settings.

resource-strategy-fit takes `resources: {<resource>: {type: MostAllocated|LeastAllocated, weight: N}}`,
`sra: {enable, resources: "a,b", weight, resourceWeight: {a: N}}` and
`proportional: {enable, resources: "a,b", resourceProportion: {a.cpu: N, a.memory: N}}`;
the policy has `most_allocated` / `least_allocated` (resource -> weight), `sra_resources`,
`sra_weight`, `proportional` and `proportional_cpu` / `proportional_memory` (resource -> ratio). Values are read as Volcano reads them: a type that is neither
MostAllocated nor LeastAllocated means LeastAllocated, a weight of 0 or less means 1, an sra
resource's negative weight and a negative proportional ratio mean 1; a key with a `*` anywhere but at its end (or `*` alone) is an
error here (Volcano drops it with a log line)."""

from __future__ import annotations

import re
from typing import Any, Callable

from yaml.nodes import Node

from compiler import catalog as cat
from compiler.volcano import codes
from compiler.volcano.located_yaml import YamlText, is_mapping, is_null, is_scalar, is_sequence, kind_of, lookup
from compiler.volcano.reading import Invalid

RSF = "resource-strategy-fit"
USAGE, EXTENDER = "usage", "extender"
MANAGED_RESOURCES = "extender.managedResources"
NESTED_KEYS = {RSF: ("resources", "sra", "proportional"), USAGE: ("thresholds",), EXTENDER: (MANAGED_RESOURCES,)}
# usage's thresholds (Volcano's `thresholds: {cpu: N, mem: N}`), by Volcano key.
USAGE_THRESHOLDS = {"cpu": "cpu_threshold", "mem": "memory_threshold"}
# The config's top-level `metrics` section (Volcano's MetricsConfiguration, a flat map of strings):
# its keys are the usage plugin's metrics_* arguments (catalog: volcano key `metrics.<key>`).
METRICS_SECTION = "metrics"
# Volcano's metrics types this import does not read: the reason and the alternative.
# (None today: prometheus_adaptor is read through the API server, runtime.cluster.nodeusage.)
METRICS_TYPES_REFUSED: dict[str, str] = {}


def _valid_pattern(key: str) -> bool:
    return "*" not in key or (key != "*" and key.endswith("*") and key.count("*") == 1)


def read_nested(reader: Any, src: YamlText, plugin: str, key: str, node: Node, out: dict[str, Any],
                dropped: list[str] | None) -> None:
    """Read nested argument `key` of `plugin` into `out` (policy argument names), reporting located."""
    if is_null(node):
        return
    if key == MANAGED_RESOURCES:
        out["managed_resources"] = _string_list(reader, src, node)
        return
    if not is_mapping(node):
        raise Invalid(f"expected a mapping, got {kind_of(node)}")
    entries = {e.key: e for e in reader.mapping_entries(src, node)}
    if key == "thresholds":
        for name, entry in entries.items():
            target = USAGE_THRESHOLDS.get(name)
            if target is None:
                reader.report(codes.UNKNOWN_ARGUMENT, f"`thresholds` has no field `{name}`; not imported (Volcano "
                              "reads only cpu and mem)", src.span(entry.key_node), "its fields: cpu, mem")
                continue
            # Volcano takes the value only as a YAML integer (anything else becomes threshold 0, which
            # filters every loaded node): said here instead.
            if not (getattr(entry.value, "tag", "") == "tag:yaml.org,2002:int"):
                reader.report(codes.BAD_VALUE, f"`thresholds.{name}`: expected a whole percent such as 80, got "
                              f"`{getattr(entry.value, 'value', kind_of(entry.value))}` (Volcano reads anything else "
                              "as 0, which filters every loaded node)", src.span(entry.value))
                continue
            value = reader.number(entry.value, integer=True)
            if value < 0:
                reader.report(codes.BAD_VALUE, f"`thresholds.{name}`: {value} is below the minimum 0",
                              src.span(entry.value))
                continue
            out[target] = value
        return
    if key == "resources":
        for resource, entry in entries.items():
            if not _valid_pattern(resource):
                reader.report(codes.BAD_VALUE, f"`resources.{resource}`: a wildcard is one `*` at the end of a "
                              "prefix (nvidia.com/*)", src.span(entry.key_node))
                continue
            if not is_mapping(entry.value):
                reader.report(codes.BAD_VALUE, f"`resources.{resource}`: expected a mapping with `type` and "
                              f"`weight`, got {kind_of(entry.value)}", src.span(entry.value))
                continue
            fields = {e.key: e for e in reader.mapping_entries(src, entry.value)}
            for extra in set(fields) - {"type", "weight"}:
                reader.report(codes.UNKNOWN_ARGUMENT, f"`resources.{resource}` has no field `{extra}`; not imported",
                              src.span(fields[extra].key_node), "its fields: type, weight")
            kind = reader.text(fields["type"].value) if "type" in fields else ""
            weight = reader.number(fields["weight"].value, integer=True) if "weight" in fields else 0
            target = "most_allocated" if kind == "MostAllocated" else "least_allocated"
            out.setdefault(target, {})[resource] = weight if weight > 0 else 1
        return
    enable = reader.boolean(entries["enable"].value) if "enable" in entries else False
    if key == "sra":
        for extra in set(entries) - {"enable", "resources", "weight", "resourceWeight"}:
            reader.report(codes.UNKNOWN_ARGUMENT, f"`sra` has no field `{extra}`; not imported",
                          src.span(entries[extra].key_node), "its fields: enable, resources, weight, resourceWeight")
        if not enable:
            return
        names = [r.strip() for r in reader.text(entries["resources"].value).split(",")] if "resources" in entries else []
        given: dict[str, int] = {}
        if "resourceWeight" in entries and not is_null(entries["resourceWeight"].value):
            for e in reader.mapping_entries(src, entries["resourceWeight"].value):
                given[e.key] = reader.number(e.value, integer=True)
        weights = {r: (given.get(r, 1) if given.get(r, 1) >= 0 else 1) for r in names if r}
        weight = reader.number(entries["weight"].value, integer=True) if "weight" in entries else 0
        out["sra_resources"] = weights
        out["sra_weight"] = max(weight, 0)
        return
    # proportional: `resources: "a,b"` and `resourceProportion: {a.cpu: N, a.memory: N}`, each ratio
    # 1 where unnamed or negative (Volcano's calculateProportionalResources).
    for extra in set(entries) - {"enable", "resources", "resourceProportion"}:
        reader.report(codes.UNKNOWN_ARGUMENT, f"`proportional` has no field `{extra}`; not imported",
                      src.span(entries[extra].key_node), "its fields: enable, resources, resourceProportion")
    if not enable:
        return
    names = [r.strip() for r in reader.text(entries["resources"].value).split(",")] if "resources" in entries else []
    ratios: dict[str, float] = {}
    if "resourceProportion" in entries and not is_null(entries["resourceProportion"].value):
        wanted = {f"{r}.{part}" for r in names if r for part in ("cpu", "memory")}
        for e in reader.mapping_entries(src, entries["resourceProportion"].value):
            if e.key not in wanted:
                reader.report(codes.UNKNOWN_ARGUMENT, f"`proportional.resourceProportion.{e.key}` is not "
                              "`<resource>.cpu` or `<resource>.memory` of a resource in `proportional.resources`; "
                              "Volcano ignores it, so it is not imported", src.span(e.key_node))
                continue
            ratios[e.key] = reader.number(e.value)
    out["proportional"] = True
    for part in ("cpu", "memory"):
        out[f"proportional_{part}"] = {r: (ratios.get(f"{r}.{part}", 1) if ratios.get(f"{r}.{part}", 1) >= 0 else 1)
                                       for r in names if r}


def _string_list(reader: Any, src: YamlText, node: Node) -> list[str]:
    """A YAML list of strings (Volcano's framework.Get[[]string]); anything else is located."""
    if not is_sequence(node):
        raise Invalid(f"expected a list of resource names, got {kind_of(node)}")
    names = []
    for item in node.value:
        if not is_scalar(item) or is_null(item):
            raise Invalid(f"expected a resource name, got {kind_of(item)}")
        names.append(str(item.value).strip())
    return names


def read_metrics(reader: Any, src: YamlText, node: Node) -> tuple[dict[str, Any], Any]:
    """The config's `metrics` section as the usage plugin's arguments, and the key node of its
    `type` (for a finding on all of it). Volcano reads a flat map of strings: a nested mapping (the
    design doc writes `tls:` and `elasticsearch:` so) makes Volcano v1.14.1 fail to load the config,
    so it is an error here, naming the flat key Volcano reads."""
    out: dict[str, Any] = {}
    if is_null(node):
        return out, None
    if not is_mapping(node):
        reader.report(codes.BAD_VALUE, f"`metrics` must be a mapping of strings, got {kind_of(node)}", src.span(node))
        return out, None
    by_key = {a.volcano[len(METRICS_SECTION) + 1:]: a for a in cat.PLUGINS[USAGE].arguments
              if a.volcano and a.volcano.startswith(METRICS_SECTION + ".")}
    for entry in reader.mapping_entries(src, node):
        if is_mapping(entry.value):
            inner = [e.key for e in reader.mapping_entries(src, entry.value)]
            flat = ", ".join(f"`{entry.key}.{k}`" for k in inner) or f"`{entry.key}.<key>`"
            reader.report(codes.BAD_VALUE, f"`metrics.{entry.key}` is a mapping, but Volcano reads `metrics` as flat "
                          f"strings and fails to load this config; write {flat} instead", src.span(entry.key_node))
            continue
        arg = by_key.get(entry.key)
        if entry.key == "type" and is_scalar(entry.value) and str(entry.value.value).strip() in METRICS_TYPES_REFUSED:
            value = str(entry.value.value).strip()
            reader.report(codes.BAD_VALUE, f"`metrics.type: {value}` is not read: {METRICS_TYPES_REFUSED[value]}",
                          src.span(entry.value))
            continue
        if entry.key in ("elasticsearch.username", "elasticsearch.password"):
            if is_null(entry.value) or str(entry.value.value) == "":
                continue    # empty: Volcano sends no credentials either
            reader.report(codes.BAD_VALUE, f"`metrics.{entry.key}` is not imported: a policy holds no credentials",
                          src.span(entry.key_node), "give the Elasticsearch behind a proxy that adds them, or none")
            continue
        if arg is None:
            reader.report(codes.UNKNOWN_ARGUMENT, f"`metrics` has no key `{entry.key}` Volcano reads; not imported",
                          src.span(entry.key_node), "its keys: " + ", ".join(sorted(by_key)))
            continue
        try:
            value = reader.argument_value(arg, entry.value)
            if isinstance(value, str) and "regex" in arg.rules and not re.fullmatch(arg.rules["regex"], value):
                raise Invalid(f"`{value}` is not what `{arg.name}` takes: {arg.doc}")
        except Invalid as err:
            reader.report(codes.BAD_VALUE, f"`metrics.{entry.key}`: {err}", src.span(entry.value))
            continue
        out[arg.name] = value
    return out, lookup(node, "type")


def export_usage(arguments: dict[str, Any]) -> dict[str, Any]:
    """usage's thresholds as Volcano's nested `thresholds` (only those set)."""
    thresholds = {key: arguments[name] for key, name in USAGE_THRESHOLDS.items() if name in arguments}
    return {"thresholds": thresholds} if thresholds else {}


def export_metrics(arguments: dict[str, Any]) -> dict[str, str]:
    """The usage plugin's metrics_* arguments as Volcano's top-level `metrics` section (strings)."""
    out: dict[str, str] = {}
    for arg in cat.PLUGINS[USAGE].arguments:
        if arg.volcano and arg.volcano.startswith(METRICS_SECTION + ".") and arg.name in arguments:
            value = arguments[arg.name]
            out[arg.volcano[len(METRICS_SECTION) + 1:]] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def export_extender(arguments: dict[str, Any]) -> dict[str, Any]:
    managed = arguments.get("managed_resources")
    return {MANAGED_RESOURCES: list(managed)} if managed else {}


def _number(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def export_rsf(arguments: dict[str, Any]) -> dict[str, Any]:
    """The policy's resource-strategy-fit settings as Volcano's nested arguments."""
    out: dict[str, Any] = {}
    resources = {r: {"type": "LeastAllocated", "weight": _number(w)}
                 for r, w in (arguments.get("least_allocated") or {}).items()}
    resources.update({r: {"type": "MostAllocated", "weight": _number(w)}
                      for r, w in (arguments.get("most_allocated") or {}).items()})
    if resources:
        out["resources"] = resources
    if arguments.get("sra_weight"):
        sra = arguments.get("sra_resources") or {}
        out["sra"] = {"enable": True, "resources": ",".join(sra), "weight": _number(arguments["sra_weight"]),
                      "resourceWeight": {r: _number(w) for r, w in sra.items()}}
    if arguments.get("proportional"):
        cpu, memory = arguments.get("proportional_cpu") or {}, arguments.get("proportional_memory") or {}
        names = list(dict.fromkeys([*cpu, *memory]))
        proportion: dict[str, Any] = {}
        for r in names:
            proportion[f"{r}.cpu"] = _number(cpu.get(r, 1))
            proportion[f"{r}.memory"] = _number(memory.get(r, 1))
        out["proportional"] = {"enable": True, "resources": ",".join(names), "resourceProportion": proportion}
    return out


EXPORTERS: dict[str, tuple[frozenset[str], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    RSF: (frozenset({"most_allocated", "least_allocated", "sra_resources", "sra_weight", "proportional",
                     "proportional_cpu", "proportional_memory"}), export_rsf),
    USAGE: (frozenset({"cpu_threshold", "memory_threshold", "metrics_type", "metrics_address", "metrics_interval",
                       "metrics_insecure_skip_verify", "elasticsearch_index", "elasticsearch_hostname_field"}),
            export_usage),
    EXTENDER: (frozenset({"managed_resources"}), export_extender),
}
