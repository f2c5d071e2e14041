"""The arguments of Volcano's tdm and rescheduling plugins, read into and written from policy settings.

tdm names its zones in its keys: `tdm.revocable-zone.<zone>: "HH:MM-HH:MM"` becomes the policy's
`revocable_zones = { <zone>: "HH:MM-HH:MM" }` (Volcano panics on a value that is not a string and
fails the window at every cycle when it does not parse; both are located errors here).

rescheduling takes `strategies: [{name, params}]`, `queueSelector: [queue]` and
`labelSelector: {label: value}`; the policy has `strategies` (names, in order), lowNodeUtilization's
`thresholds` / `target_thresholds` (cpu, memory, pods in percent) and `queues` / `labels`.
Volcano v1.14.1 implements lowNodeUtilization only; the other names of its design doc it accepts
and ignores. offlineOnly and lowPriorityFirst are evaluated here as the design doc says; the others
are refused at their name (runtime/README.md). Volcano reads a threshold only as a YAML integer and
only under `cpu`, `memory` and `pod` (which it then never compares); here any number, under `cpu`,
`memory` and `pods`.
"""

from __future__ import annotations

import re
from typing import Any

from yaml.nodes import Node

from compiler import catalog as cat
from compiler.volcano import codes
from compiler.volcano.located_yaml import YamlText, is_mapping, is_null, is_sequence, kind_of
from compiler.volcano.reading import Invalid
from policydsl.diagnostics import did_you_mean

TDM, RESCHEDULING = "tdm", "rescheduling"
ZONE_PREFIX = "tdm.revocable-zone."
NESTED_KEYS = {RESCHEDULING: ("strategies", "queueSelector", "labelSelector")}
NESTED_PREFIXES = {TDM: (ZONE_PREFIX,)}
LNU = "lowNodeUtilization"
THRESHOLDS = {"thresholds": "thresholds", "targetThresholds": "target_thresholds"}
# Strategies of Volcano's rescheduling design doc that v1.14.1 does not implement (it ignores the
# name): refused, with what to use instead.
NOT_IMPLEMENTED = {
    "shortLifeTimeFirst": "order victims by run time",
    "bigObjectFirst": "order victims by dominant request",
    "moreReplicasFirst": "order victims by replica count",
}


def read(reader: Any, src: YamlText, plugin: str, key: str, node: Node, out: dict[str, Any]) -> None:
    """Read tdm's zone keys or rescheduling's nested arguments into `out`, reporting located."""
    if plugin == TDM:
        zone = key[len(ZONE_PREFIX):]
        window = reader.text(node).strip() if not is_null(node) else ""
        if not zone:
            raise Invalid("a revocable zone needs a name after `tdm.revocable-zone.`")
        if not re.fullmatch(cat.TDM_WINDOW, window):
            raise Invalid(f"`{window}` is not a window HH:MM-HH:MM (such as 10:00-21:00); Volcano would keep "
                          "the zone closed at every cycle")
        out.setdefault("revocable_zones", {})[zone] = window
        return
    if key == "queueSelector":
        if is_null(node):
            return
        if not is_sequence(node):
            raise Invalid(f"expected a list of queue names, got {kind_of(node)}")
        out["queues"] = [reader.text(item).strip() for item in node.value]
        return
    if key == "labelSelector":
        if is_null(node):
            return
        if not is_mapping(node):
            raise Invalid(f"expected a mapping of label to value, got {kind_of(node)}")
        out["labels"] = {e.key: reader.text(e.value) for e in reader.mapping_entries(src, node)}
        return
    _strategies(reader, src, node, out)


def _strategies(reader: Any, src: YamlText, node: Node, out: dict[str, Any]) -> None:
    if is_null(node):
        return
    if not is_sequence(node):
        raise Invalid(f"expected a list of strategies (`- name: lowNodeUtilization`), got {kind_of(node)}")
    names: list[str] = []
    for item in node.value:
        if not is_mapping(item):
            reader.report(codes.BAD_VALUE, f"a strategy is a mapping with `name` (and `params`), got {kind_of(item)}",
                          src.span(item))
            continue
        fields = {e.key: e for e in reader.mapping_entries(src, item)}
        if "name" not in fields:
            reader.report(codes.BAD_VALUE, "a strategy needs a `name`", src.span(item))
            continue
        name = reader.text(fields["name"].value).strip()
        if name in NOT_IMPLEMENTED:
            reader.report(codes.BAD_VALUE, f"strategy `{name}` ({NOT_IMPLEMENTED[name]}) is in Volcano's design doc "
                          "only: v1.14.1 ignores it, and policydsl refuses it rather than run without it",
                          src.span(fields["name"].value),
                          "drop it; lowNodeUtilization takes the lowest priority first (lowPriorityFirst), "
                          "offlineOnly takes preemptable pods only")
            continue
        if name not in cat.RESCHEDULING_STRATEGIES:
            reader.report(codes.BAD_VALUE, f"rescheduling has no strategy `{name}`", src.span(fields["name"].value),
                          did_you_mean(name, list(cat.RESCHEDULING_STRATEGIES))
                          or "its strategies: " + ", ".join(cat.RESCHEDULING_STRATEGIES))
            continue
        names.append(name)
        for extra in set(fields) - {"name", "params"}:
            reader.report(codes.UNKNOWN_ARGUMENT, f"a strategy has no field `{extra}`; not imported",
                          src.span(fields[extra].key_node), "its fields: name, params")
        params = fields.get("params")
        if params is None or is_null(params.value):
            continue
        if name != LNU:
            reader.report(codes.UNKNOWN_ARGUMENT, f"strategy `{name}` takes no params; not imported",
                          src.span(params.key_node), "Volcano reads params of lowNodeUtilization only")
            continue
        if not is_mapping(params.value):
            reader.report(codes.BAD_VALUE, f"`params` must be a mapping, got {kind_of(params.value)}",
                          src.span(params.value))
            continue
        for entry in reader.mapping_entries(src, params.value):
            target = THRESHOLDS.get(entry.key)
            if target is None:
                reader.report(codes.UNKNOWN_ARGUMENT, f"lowNodeUtilization's `params` has no `{entry.key}` that "
                              "Volcano reads; not imported", src.span(entry.key_node),
                              "its params: thresholds, targetThresholds")
                continue
            _thresholds(reader, src, entry.key, entry.value, out.setdefault(target, {}))
        if name == LNU and any(out.get(t) for t in THRESHOLDS.values()):
            reader.report(codes.MEASURES_DIFFERENTLY, "lowNodeUtilization compares the pods' requests here; Volcano "
                          "v1.14.1 compares measured load (its metrics source over `metricsPeriod`, of which its "
                          "cache keeps only 10m: with the default 5m it reads 0% everywhere and moves nothing)",
                          src.span(fields["name"].value), "where Volcano moved nothing, this policy may move pods "
                          "(runtime/README.md)")
    out["strategies"] = names


def _thresholds(reader: Any, src: YamlText, key: str, node: Node, into: dict[str, Any]) -> None:
    if not is_mapping(node):
        reader.report(codes.BAD_VALUE, f"`{key}` must map cpu, memory, pods to percents, got {kind_of(node)}",
                      src.span(node))
        return
    for entry in reader.mapping_entries(src, node):
        if entry.key not in ("cpu", "memory", "pods"):
            hint = "write `pods` (Volcano reads `pod` and then never compares it)" if entry.key == "pod" else \
                "thresholds are of cpu, memory and pods"
            reader.report(codes.BAD_VALUE, f"`{key}.{entry.key}`: no utilization of `{entry.key}` is measured",
                          src.span(entry.key_node), hint)
            continue
        try:
            value = reader.number(entry.value)
            if not 0 <= value <= 100:
                raise Invalid(f"{value} is not a percent between 0 and 100")
        except Invalid as err:
            reader.report(codes.BAD_VALUE, f"`{key}.{entry.key}`: {err}", src.span(entry.value),
                          "a threshold is a percent of the node's allocatable, 0 to 100")
            continue
        into[entry.key] = value


def _number(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def export_tdm(arguments: dict[str, Any]) -> dict[str, Any]:
    return {ZONE_PREFIX + zone: window for zone, window in (arguments.get("revocable_zones") or {}).items()}


def export_rescheduling(arguments: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    strategies = []
    for name in arguments.get("strategies") or [LNU]:
        strategy: dict[str, Any] = {"name": name}
        if name == LNU:
            params = {volcano: {r: _number(v) for r, v in arguments[ours].items()}
                      for volcano, ours in THRESHOLDS.items() if arguments.get(ours)}
            if params:
                strategy["params"] = params
        strategies.append(strategy)
    if "strategies" in arguments or any(arguments.get(t) for t in THRESHOLDS.values()):
        out["strategies"] = strategies
    if arguments.get("queues"):
        out["queueSelector"] = list(arguments["queues"])
    if arguments.get("labels"):
        out["labelSelector"] = dict(arguments["labels"])
    return out


EXPORTERS = {
    TDM: (frozenset({"revocable_zones"}), export_tdm),
    RESCHEDULING: (frozenset({"strategies", "thresholds", "target_thresholds", "queues", "labels"}),
                   export_rescheduling),
}
