"""A Volcano scheduler config, raw or inside a ConfigMap, read into a SchedulerConfig.

Names are looked up in the catalog: flags by `Flag.volcano`, arguments by `Argument.volcano`,
a plugin's score weight by `PluginSpec.weight_volcano`, resource-weight lists such as
`binpack.resources` by their key and `<key>.<resource>`. Nothing is translated by a table of
its own. See compiler.volcano.codes for which findings are errors.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from yaml.nodes import MappingNode, Node

from compiler import catalog as cat
from compiler.volcano import codes
from compiler.volcano.located_yaml import (
    BOOL_TAG,
    STR_TAG,
    YamlSyntaxError,
    YamlText,
    entries,
    is_mapping,
    is_null,
    is_scalar,
    is_sequence,
    kind_of,
    lookup,
)
from compiler.volcano.model import PluginConfig, SchedulerConfig, TierConfig
from compiler.volcano.nested_args import METRICS_SECTION, NESTED_KEYS, USAGE, read_metrics, read_nested
from compiler.volcano.reading import Invalid, NodeReader, part_span
from compiler.volcano.eviction_args import NESTED_KEYS as EVICTION_KEYS, NESTED_PREFIXES as EVICTION_PREFIXES
from compiler.volcano.eviction_args import read as read_eviction_args
from policydsl.diagnostics import Severity, Span, did_you_mean

CONFIG_KEY = "volcano-scheduler.conf"          # the ConfigMap key Volcano's chart uses
_FLAG_LIKE = re.compile(r"enabled?[A-Z]")


class ConfigReader(NodeReader):
    """A scheduler config (raw or in a ConfigMap) into a SchedulerConfig."""

    def read(self, src: YamlText) -> SchedulerConfig | None:
        try:
            docs = src.documents()
        except YamlSyntaxError as err:
            self.report(codes.BAD_YAML, str(err), err.span)
            return None
        found = self.find_config(src, docs)
        if found is None:
            return None
        config_src, node, origin = found
        return self.config(config_src, node, origin)

    def find_config(self, src: YamlText, docs: list[Node]) -> tuple[YamlText, MappingNode, str] | None:
        if not docs:
            self.report(codes.BAD_YAML, "the file holds no Volcano config", src.point(0, 0),
                        "write `actions: \"enqueue, allocate, backfill\"` and `tiers:`")
            return None
        chosen = None
        for doc in docs:
            if not is_mapping(doc):
                self.report(codes.BAD_YAML, f"expected a mapping with `actions` and `tiers`, got {kind_of(doc)}",
                            src.span(doc))
                continue
            kind = lookup(doc, "kind")
            if kind is not None and is_scalar(kind.value) and kind.value.value == "ConfigMap":
                found = self.from_configmap(src, doc)
            elif any(lookup(doc, key) for key in ("actions", "tiers", "configurations")):
                found = (src, doc, "")
            else:
                what = f"a {kind.value.value}" if kind is not None and is_scalar(kind.value) else "this document"
                self.report(codes.NOT_IMPORTED, f"{what} is not a Volcano scheduler config; skipped", src.span(doc))
                continue
            if found is None:
                continue
            if chosen is None:
                chosen = found
            else:
                self.report(codes.NOT_IMPORTED, "a second scheduler config in the file; only the first is imported",
                            found[0].span(found[1]))
        if chosen is None and not any(d.severity >= Severity.ERROR for d in self.diagnostics):
            self.report(codes.BAD_YAML, "no Volcano scheduler config found", src.point(0, 0))
        return chosen

    def from_configmap(self, src: YamlText, doc: MappingNode) -> tuple[YamlText, MappingNode, str] | None:
        metadata = lookup(doc, "metadata")
        name_entry = lookup(metadata.value, "name") if metadata and is_mapping(metadata.value) else None
        name = str(name_entry.value.value) if name_entry and is_scalar(name_entry.value) else "ConfigMap"
        data = lookup(doc, "data")
        if data is None or not is_mapping(data.value):
            self.report(codes.BAD_YAML, f"ConfigMap `{name}` has no `data` mapping", src.span(doc),
                        f"put the config under `data: {{{CONFIG_KEY}: |...}}`")
            return None
        keys = {e.key: e for e in entries(data.value)}
        entry = keys.get(CONFIG_KEY)
        if entry is None:
            conf = [e for key, e in keys.items() if key.endswith(".conf")]
            if len(conf) != 1:
                self.report(codes.BAD_YAML, f"ConfigMap `{name}` has no `{CONFIG_KEY}` key", src.span(data.key_node),
                            "its keys: " + (", ".join(keys) or "none"))
                return None
            entry = conf[0]
        for other in keys.values():
            if other is not entry:
                self.report(codes.NOT_IMPORTED, f"ConfigMap `{name}`: `{other.key}` is not a scheduler config; "
                            "not imported", src.span(other.key_node))
        if not is_scalar(entry.value) or entry.value.tag != STR_TAG:
            self.report(codes.BAD_YAML, f"`{entry.key}` must hold the config as text (`{entry.key}: |`)",
                        src.span(entry.value))
            return None
        inner = src.embedded(entry.value)
        try:
            docs = inner.documents()
        except YamlSyntaxError as err:
            self.report(codes.BAD_YAML, str(err), err.span)
            return None
        if len(docs) != 1 or not is_mapping(docs[0]):
            self.report(codes.BAD_YAML, f"`{entry.key}` must hold one mapping with `actions` and `tiers`",
                        src.span(entry.value))
            return None
        return inner, docs[0], f"ConfigMap {name}, key {entry.key}"

    def config(self, src: YamlText, node: MappingNode, origin: str) -> SchedulerConfig:
        actions: list[str] = []
        left_out_actions: list[str] = []
        tiers: list[TierConfig] = []
        configurations: dict[str, dict[str, Any]] = {}
        have_actions = False
        metrics = None
        for entry in self.mapping_entries(src, node):
            if entry.key == "actions":
                have_actions = True
                self.actions(src, entry.value, actions, left_out_actions, configurations)
            elif entry.key == "tiers":
                tiers = self.tiers(src, entry.value)
            elif entry.key == "configurations":
                self.configurations(src, entry.value, configurations)
            elif entry.key == METRICS_SECTION:
                metrics = (read_metrics(self, src, entry.value), entry)
            else:
                self.report(codes.NOT_IMPORTED, f"`{entry.key}` is not part of a scheduling policy; not imported",
                            src.span(entry.key_node), "keep it in the scheduler's own config or flags")
        if metrics is not None:
            (values, _type), section = metrics
            usage = next((p for tier in tiers for p in tier.plugins if p.name == USAGE), None)
            if usage is None:
                self.report(codes.NOT_IMPORTED, "`metrics` feeds only the usage plugin, which this config does not "
                            "have; not imported", src.span(section.key_node), "add the usage plugin to use node load")
            else:
                usage.arguments.update(values)    # the policy keeps the source with the plugin that reads it
        canonical = sorted(actions, key=cat.CANONICAL_ACTION_ORDER.index)
        written = tuple(actions) if canonical != actions else ()
        if written:
            actions_node = lookup(node, "actions").value
            self.report(codes.ACTION_ORDER, "actions reordered to " + ", ".join(canonical) + "; Volcano runs them as "
                        "listed (" + ", ".join(map(cat.volcano_action, actions)) + ")", src.span(actions_node),
                        "a policy runs actions in the order " + ", ".join(cat.CANONICAL_ACTION_ORDER))
            actions = canonical
        if not have_actions:
            self.report(codes.BAD_YAML, "the config has no `actions`", src.span(node),
                        "Volcano's default is `actions: \"enqueue, allocate, backfill\"`")
        elif not actions and not left_out_actions:
            self.report(codes.BAD_VALUE, "`actions` names no action", src.span(lookup(node, "actions").value))
        anchor = lookup(node, "actions") or next(entries(node), None)
        span = src.span(anchor.key_node) if anchor else src.span(node)
        return SchedulerConfig(tuple(actions), tuple(tiers), configurations, origin, tuple(left_out_actions), written,
                               span)

    # --- actions ----------------------------------------------------------------------------
    def action_name(self, src: YamlText, name: str, span: Span, actions: list[str], left_out: list[str]) -> None:
        # Volcano's names (gangpreempt -> gang_preempt); Volcano matches them exactly.
        if name in cat.ACTION_BY_VOLCANO:
            ours = cat.ACTION_BY_VOLCANO[name]
            # A gang-aware action and the one it replaces (PD310 in lint): said where it is written.
            clash = next((a for a in actions if cat.ACTIONS[a].evicts_as == ours or cat.ACTIONS[ours].evicts_as == a),
                         None)
            if clash is not None:
                self.report(codes.BAD_VALUE, f"`{name}` and `{cat.volcano_action(clash)}` cannot both run: the "
                            "gang-aware action replaces the other (Volcano's design forbids them together)", span,
                            f"keep either `{name}` or `{cat.volcano_action(clash)}`")
            actions.append(ours)
            return
        left_out.append(name)
        self.report(codes.UNKNOWN_ACTION, f"unknown action `{name}`", span,
                    did_you_mean(name, cat.ACTION_BY_VOLCANO)
                    or "policydsl has " + ", ".join(cat.ACTION_BY_VOLCANO))

    def actions(self, src: YamlText, node: Node, actions: list[str], left_out: list[str],
                configurations: dict[str, dict[str, Any]]) -> None:
        if is_scalar(node) and node.tag == STR_TAG:
            position = 0
            for part in node.value.split(","):
                name = part.strip()
                start = position + (len(part) - len(part.lstrip()))
                position += len(part) + 1
                if name:
                    self.action_name(src, name, part_span(src, node, start, start + len(name)), actions, left_out)
            return
        if is_sequence(node):
            # The list form some Volcano configs use: `- enqueue` or `- name: enqueue` with arguments.
            for item in node.value:
                if is_scalar(item) and item.tag == STR_TAG:
                    self.action_name(src, item.value.strip(), src.span(item), actions, left_out)
                elif is_mapping(item) and lookup(item, "name") is not None:
                    name_node = lookup(item, "name").value
                    if not is_scalar(name_node):
                        self.report(codes.BAD_VALUE, "an action name must be a string", src.span(name_node))
                        continue
                    self.action_name(src, name_node.value.strip(), src.span(name_node), actions, left_out)
                    if name_node.value.strip() in cat.ACTION_BY_VOLCANO:
                        self.configuration(src, item, configurations)
                else:
                    self.report(codes.BAD_VALUE, f"expected an action name, got {kind_of(item)}", src.span(item))
            return
        self.report(codes.BAD_VALUE, f"`actions` must be a comma-separated string, got {kind_of(node)}", src.span(node),
                    'for example `actions: "enqueue, allocate, backfill"`')

    def configurations(self, src: YamlText, node: Node, out: dict[str, dict[str, Any]]) -> None:
        if is_null(node):
            return
        if not is_sequence(node):
            self.report(codes.BAD_VALUE, f"`configurations` must be a list, got {kind_of(node)}", src.span(node))
            return
        for item in node.value:
            if not is_mapping(item) or lookup(item, "name") is None:
                self.report(codes.BAD_VALUE, "each configuration needs a `name` (the action) and `arguments`",
                            src.span(item))
                continue
            name_node = lookup(item, "name").value
            name = name_node.value.strip() if is_scalar(name_node) else ""
            if name not in cat.ACTION_BY_VOLCANO:
                self.report(codes.UNKNOWN_ACTION, f"configuration for unknown action `{name}` is not imported",
                            src.span(name_node), did_you_mean(name, cat.ACTION_BY_VOLCANO), severity=Severity.WARNING)
                continue
            self.configuration(src, item, out)

    def configuration(self, src: YamlText, item: MappingNode, out: dict[str, dict[str, Any]]) -> None:
        volcano_name = lookup(item, "name").value.value.strip()
        name = cat.ACTION_BY_VOLCANO[volcano_name]
        spec = cat.ACTIONS[name]
        for entry in self.mapping_entries(src, item):
            if entry.key == "name":
                continue
            if entry.key != "arguments":
                self.report(codes.NOT_IMPORTED, f"`{entry.key}` of action `{volcano_name}` is not imported",
                            src.span(entry.key_node))
                continue
            if is_null(entry.value):
                continue
            if not is_mapping(entry.value):
                self.report(codes.BAD_VALUE, f"`arguments` must be a mapping, got {kind_of(entry.value)}",
                            src.span(entry.value))
                continue
            by_key = {a.volcano: a for a in spec.arguments if a.volcano}
            target = out.setdefault(name, {})
            for arg_entry in self.mapping_entries(src, entry.value):
                arg = by_key.get(arg_entry.key)
                if arg is None:
                    self.report(codes.UNKNOWN_ARGUMENT,
                                f"action `{volcano_name}` has no argument `{arg_entry.key}`; not imported",
                                src.span(arg_entry.key_node),
                                did_you_mean(arg_entry.key, by_key) or _known(list(by_key)))
                    continue
                try:
                    target[arg.name] = self.argument_value(arg, arg_entry.value)
                except Invalid as err:
                    self.report(codes.BAD_VALUE, f"`{arg_entry.key}`: {err}", src.span(arg_entry.value))

    # --- tiers and plugins ------------------------------------------------------------------
    def tiers(self, src: YamlText, node: Node) -> list[TierConfig]:
        if is_null(node):
            return []
        if not is_sequence(node):
            self.report(codes.BAD_VALUE, f"`tiers` must be a list, got {kind_of(node)}", src.span(node))
            return []
        tiers = []
        self.moved: list[tuple[int, str, str, str, Any]] = []  # (tier, source plugin, target plugin, argument, value)
        for tier in node.value:
            plugins_entry = lookup(tier, "plugins") if is_mapping(tier) else None
            if plugins_entry is None:
                self.report(codes.BAD_VALUE, "each tier is a mapping with a `plugins` list", src.span(tier))
                continue
            for entry in self.mapping_entries(src, tier):
                if entry.key != "plugins":
                    self.report(codes.NOT_IMPORTED, f"tier key `{entry.key}` is not imported", src.span(entry.key_node))
            self.tier_index = len(tiers)
            tiers.append(self.tier(src, plugins_entry.value))
        return _place_moved(tiers, self.moved)

    def tier(self, src: YamlText, node: Node) -> TierConfig:
        if is_null(node):
            return TierConfig(())
        if not is_sequence(node):
            self.report(codes.BAD_VALUE, f"`plugins` must be a list, got {kind_of(node)}", src.span(node))
            return TierConfig(())
        plugins: list[PluginConfig] = []
        left_out: list[str] = []
        for item in node.value:
            name_entry = lookup(item, "name") if is_mapping(item) else None
            if name_entry is None or not is_scalar(name_entry.value) or is_null(name_entry.value):
                self.report(codes.BAD_VALUE, "each plugin is a mapping with a `name`", src.span(item))
                continue
            name = str(name_entry.value.value).strip()
            spec = cat.PLUGINS.get(name)
            if spec is None:
                left_out.append(name)
                self.report(codes.UNKNOWN_PLUGIN, f"unknown plugin `{name}`; not imported", src.span(name_entry.value),
                            did_you_mean(name, cat.PLUGINS) or "policydsl has " + ", ".join(cat.PLUGINS))
                continue
            plugins.append(self.plugin(src, item, spec))
        return TierConfig(tuple(plugins), tuple(left_out))

    def plugin(self, src: YamlText, node: MappingNode, spec: cat.PluginSpec) -> PluginConfig:
        flags: dict[str, bool] = {}
        arguments: dict[str, Any] = {}
        dropped: list[str] = []
        weight = None
        for entry in self.mapping_entries(src, node):
            if entry.key == "name":
                continue
            if entry.key == "arguments":
                weight = self.plugin_arguments(src, entry.value, spec, arguments, dropped)
                continue
            flag = cat.FLAGS_BY_VOLCANO.get(entry.key)
            if flag is None:
                hint = did_you_mean(entry.key, cat.FLAGS_BY_VOLCANO) if _FLAG_LIKE.match(entry.key) else None
                self.report(codes.IGNORED_FLAG, f"Volcano ignores `{entry.key}` on plugin `{spec.name}`; not imported",
                            src.span(entry.key_node), hint or "plugin entries take `name`, `arguments` and `enable*` flags")
                continue
            if flag.name not in spec.points:
                own = [f.volcano for f in cat.FLAGS if f.name in spec.points]
                self.report(codes.IGNORED_FLAG,
                            f"plugin `{spec.name}` has no {flag.name.replace('_', ' ')} extension point, "
                            f"so `{entry.key}` does nothing; not imported",
                            src.span(entry.key_node), "its flags: " + (", ".join(own) or "none"))
                continue
            try:
                if not (is_scalar(entry.value) and entry.value.tag == BOOL_TAG):
                    raise Invalid(f"expected true or false, got {kind_of(entry.value)}")
                flags[flag.name] = self.boolean(entry.value)
            except Invalid as err:
                self.report(codes.BAD_VALUE, f"`{entry.key}`: {err}", src.span(entry.value),
                            "Volcano reads flags as YAML booleans")
        return PluginConfig(spec.name, weight, flags, arguments, tuple(dropped))

    def plugin_arguments(self, src: YamlText, node: Node, spec: cat.PluginSpec, out: dict[str, Any],
                         dropped: list[str] | None = None) -> int | float | None:
        """Fill `out` with the plugin's arguments; return its score weight if one is given. Arguments
        that change decisions and are not imported (DECISION_ARGUMENTS) go to `dropped`, as comments."""
        if is_null(node):
            return None
        if not is_mapping(node):
            self.report(codes.BAD_VALUE, f"`arguments` must be a mapping, got {kind_of(node)}", src.span(node))
            return None
        nested = NESTED_KEYS.get(spec.name, ())     # read by compiler.volcano.nested_args
        # Arguments read from a nested mapping or the config's `metrics` section are not plugin keys.
        by_key = {a.volcano: a for a in spec.arguments
                  if a.volcano and a.volcano not in nested and a.volcano.split(".")[0] not in nested
                  and not a.volcano.startswith(METRICS_SECTION + ".")}
        lists = {a.volcano: a for a in spec.arguments
                 if a.volcano and a.kind == cat.RESOURCE_WEIGHTS and a.volcano.split(".")[0] not in nested}
        weight = None
        listed: dict[str, list[str]] = {}                    # argument name -> listed resources
        weights: dict[str, dict[str, tuple[Any, Node]]] = {}  # argument name -> resource -> (weight, key node)
        for entry in self.mapping_entries(src, node):
            key = entry.key
            try:
                if key in EVICTION_KEYS.get(spec.name, ()) or key.startswith(EVICTION_PREFIXES.get(spec.name, ())):
                    read_eviction_args(self, src, spec.name, key, entry.value, out)   # tdm, rescheduling
                    continue
                if key in NESTED_KEYS.get(spec.name, ()):
                    read_nested(self, src, spec.name, key, entry.value, out, dropped)
                    continue
                if spec.weight_volcano and key == spec.weight_volcano:
                    weight = self.number(entry.value)
                    if weight < 0:
                        raise Invalid(f"{weight} is below the minimum 0")
                    continue
                if key in lists:
                    arg = lists[key]
                    names = [part.strip() for part in self.text(entry.value).split(",") if part.strip()]
                    listed[arg.name] = names
                    out.setdefault(arg.name, {})           # keeps the written position of the setting
                    continue
                prefix = next((k for k in lists if key.startswith(k + ".")), None)
                if prefix is not None:
                    arg = lists[prefix]
                    value = self.number(entry.value)
                    if value < 0:
                        raise Invalid(f"{value} is below the minimum 0")
                    weights.setdefault(arg.name, {})[key[len(prefix) + 1:]] = (value, entry.key_node)
                    out.setdefault(arg.name, {})
                    continue
                arg = by_key.get(key)
                old = OLD_ARGUMENTS.get((spec.name, key))
                if arg is None and old is not None:
                    target = cat.PLUGINS[old[0]].argument(old[1])
                    assert target is not None
                    value = self.argument_value(target, entry.value)
                    if value != target.default:
                        getattr(self, "moved", []).append((getattr(self, "tier_index", 0), spec.name, old[0], old[1], value))
                    continue
                why = _decision_argument(spec.name, key)
                if arg is None and key in _OFF_BY_DEFAULT and is_scalar(entry.value) \
                        and str(entry.value.value).lower() == "false":
                    continue
                if arg is None and why is not None:
                    value = " ".join((str(entry.value.value) if is_scalar(entry.value) else
                                      src.text[entry.value.start_mark.index:entry.value.end_mark.index]).split())
                    self.report(codes.DROPPED, f"plugin `{spec.name}`: `{key}` changes decisions and is not imported "
                                f"({why})", src.span(entry.key_node),
                                "pass --allow-dropped to write the policy without it, noted as a comment")
                    if dropped is not None:
                        dropped.append(f"{key}: {value} ({why})")
                    continue
                if arg is None and (spec.name, key) in SPEED_ONLY_ARGUMENTS:
                    self.report(codes.UNKNOWN_ARGUMENT, f"plugin `{spec.name}`: `{key}` is not imported "
                                f"({SPEED_ONLY_ARGUMENTS[spec.name, key]})", src.span(entry.key_node),
                                "nothing to do: the policy's decisions are Volcano's with or without it")
                    continue
                if arg is None:
                    known = list(by_key) + [k + ".<resource>" for k in lists] + (
                        [spec.weight_volcano] if spec.weight_volcano else [])
                    self.report(codes.UNKNOWN_ARGUMENT, f"plugin `{spec.name}` has no argument `{key}`; not imported",
                                src.span(entry.key_node),
                                NOT_VOLCANO_ARGUMENTS.get(key) or did_you_mean(key, known) or _known(known))
                    continue
                value = self.argument_value(arg, entry.value)
                if isinstance(value, str) and "regex" in arg.rules and not re.fullmatch(arg.rules["regex"], value):
                    raise Invalid(f"`{value}` is not what `{arg.name}` takes: {arg.doc}")
                if arg.not_evaluated and value != arg.default:
                    # Volcano schedules differently with it on; the policy would refuse it (PD413).
                    shown = str(value).lower() if isinstance(value, bool) else str(value)
                    self.report(codes.DROPPED, f"plugin `{spec.name}`: `{key}: {shown}` changes decisions and is not "
                                f"imported ({arg.not_evaluated})", src.span(entry.key_node),
                                "pass --allow-dropped to write the policy without it, noted as a comment")
                    if dropped is not None:
                        dropped.append(f"{key}: {shown} ({arg.not_evaluated})")
                    continue
                out[arg.name] = value
            except Invalid as err:
                self.report(codes.BAD_VALUE, f"`{key}`: {err}", src.span(entry.value))
        for name in [n for n in out if n in {a.name for a in lists.values()}]:
            names = listed.get(name, [])
            given = weights.get(name, {})
            for resource, (_, key_node) in given.items():
                if resource not in names:
                    list_key = next(k for k, a in lists.items() if a.name == name)
                    self.report(codes.IGNORED_FLAG,
                                f"`{resource}` is not listed in `{list_key}`, so Volcano ignores its weight; not imported",
                                src.span(key_node), f"add it to `{list_key}`")
            resolved = {resource: given[resource][0] if resource in given else 1 for resource in names}
            if resolved:
                out[name] = resolved
            else:
                del out[name]
        return weight


# The one list of Volcano plugin arguments policydsl does not import, by whether they change
# decisions. Listed here: Volcano reads them and schedules differently, so dropping one is an error
# (PD614; `--allow-dropped` writes the policy anyway with a `# not imported:` comment). Any other
# argument we do not know is one Volcano does not read either (a typo, an argument of another
# plugin): a pure no-op, a warning (PD605).
DECISION_ARGUMENTS: dict[tuple[str, str], str] = {
    ("capacity", "ancestorReclaimLevel"): "Volcano limits hierarchical reclaim to ancestors this many levels up",
    ("capacity", "capacity.DRAConsumableCapacityEnable"): "Volcano counts DRA devices' consumable capacity "
                                                          "(`<dim>.deviceclass/<class>` queue quotas); not evaluated "
                                                          "yet",
    ("overcommit", "max-queue-overcommit-factor"): "Volcano caps each queue's admitted demand at this factor "
                                                   "of its deserved share",
    ("predicates", "predicate.ProportionalEnable"): "Volcano keeps CPU and memory in proportion to the listed "
                                                    "resources on each node",
    ("predicates", "predicate.resources"): "the resources of Volcano's proportional predicate",
    ("deviceshare", "deviceshare.AscendHAMiVNPUEnable"): "Volcano places Ascend vNPUs through HAMi; not evaluated yet",
    ("deviceshare", "deviceshare.AscendMindClusterVNPUEnable"): "Volcano places Ascend 310P vNPUs for MindCluster; "
                                                                "not evaluated yet",
    ("deviceshare", "deviceshare.KnownGeometriesCMName"): "the MIG geometries of Volcano's vGPU; not evaluated yet",
    ("deviceshare", "deviceshare.KnownGeometriesCMNamespace"): "the MIG geometries of Volcano's vGPU; not evaluated "
                                                               "yet",
    ("extender", "extender.jobReadyVerb"): "Volcano asks the extender whether a job is ready; not evaluated yet",
    ("extender", "extender.allocateFuncVerb"): "Volcano tells the extender of each placement and undoes it on an "
                                               "error; not evaluated yet",
    ("extender", "extender.deallocateFuncVerb"): "Volcano tells the extender of each placement undone; not "
                                                 "evaluated yet",
}
# Arguments Volcano reads only to go faster, its decisions the same either way: a warning (PD605)
# that says so, rather than calling a real argument unknown.
SPEED_ONLY_ARGUMENTS: dict[tuple[str, str], str] = {
    ("predicates", "predicate.CacheEnable"): "Volcano's cache of predicate results per pod template: speed only, "
                                             "the same nodes pass",
}
# Keys written as if Volcano read them, which it never did: the hint says where the meaning lives.
NOT_VOLCANO_ARGUMENTS = {
    "deviceshare.VGPUPodGroupDeviceSpread": "Volcano reads no such argument (it ignores it): a pod asks for its "
                                            "PodGroup's vGPU spread with the annotation "
                                            "volcano.sh/vgpu-podgroup-policy: spread",
    "tdm.evict.max-num": "Volcano's tdm reads no such argument: each evict period a job loses at most its disruption "
                         "budget (PodGroup annotation volcano.sh/jdb-min-available or volcano.sh/jdb-max-unavailable, "
                         "else 1 pod)",
}
# Switches among DECISION_ARGUMENTS that change nothing when off (Volcano's default): `false` imports as nothing.
_OFF_BY_DEFAULT = frozenset({"deviceshare.AscendHAMiVNPUEnable", "deviceshare.AscendMindClusterVNPUEnable",
                             "capacity.DRAConsumableCapacityEnable"})
_DECISION_PREFIXES = {("predicates", "predicate.resources."): "a weight of Volcano's proportional predicate"}


def _decision_argument(plugin: str, key: str) -> str | None:
    why = DECISION_ARGUMENTS.get((plugin, key))
    if why is None:
        why = next((w for (p, prefix), w in _DECISION_PREFIXES.items() if p == plugin and key.startswith(prefix)),
                   None)
    return why


# Arguments of old Volcano versions that another plugin takes today with the same meaning, imported
# as that plugin's: Volcano <= 1.8 read the GPU flags in `predicates`, since 1.9 `deviceshare` does.
OLD_ARGUMENTS: dict[tuple[str, str], tuple[str, str]] = {
    ("predicates", "predicate.GPUSharingEnable"): ("deviceshare", "gpu_sharing"),
    ("predicates", "predicate.GPUNumberEnable"): ("deviceshare", "gpu_number"),
}


def _place_moved(tiers: list[TierConfig], moved: list[tuple[int, str, str, str, Any]]) -> list[TierConfig]:
    """Old arguments as today's plugin's: set on that plugin where the config has it (an argument it
    gives itself wins), else that plugin is added right after the one that had them."""
    for tier_index, source, target, name, value in moved:
        where = next(((t, i) for t, tier in enumerate(tiers) for i, p in enumerate(tier.plugins) if p.name == target),
                     None)
        note = f"{_old_key(source, name)} of Volcano <= 1.8 on `{source}` imported as `{name}`"
        if where is None:
            tier = tiers[tier_index]
            at = next(i for i, p in enumerate(tier.plugins) if p.name == source) + 1
            plugins = list(tier.plugins)
            plugins.insert(at, PluginConfig(target, arguments={name: value}, notes=(note,)))
            tiers[tier_index] = replace(tier, plugins=tuple(plugins))
            continue
        t, i = where
        plugin = tiers[t].plugins[i]
        if name in plugin.arguments:
            continue
        plugins = list(tiers[t].plugins)
        plugins[i] = replace(plugin, arguments={**plugin.arguments, name: value}, notes=plugin.notes + (note,))
        tiers[t] = replace(tiers[t], plugins=tuple(plugins))
    return tiers


def _old_key(source: str, name: str) -> str:
    return next(f"`{key}`" for (plugin, key), (_, arg) in OLD_ARGUMENTS.items() if plugin == source and arg == name)


def _known(keys: list[str]) -> str:
    return "it takes: " + ", ".join(keys) if keys else "it takes no arguments"
