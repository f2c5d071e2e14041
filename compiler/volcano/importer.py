"""`import-volcano`: a Volcano scheduler config (and Queue objects) as an equivalent policy.

Reading goes through YAML nodes so that every finding points at `file:line:col`; the config
may be the raw `volcano-scheduler.conf` or a ConfigMap that holds it. Names are looked up in
the catalog (flags by `Flag.volcano`, arguments by `Argument.volcano`, score weights by
`PluginSpec.weight_volcano`); nothing is translated by a table of its own. Whatever the policy
cannot say is a diagnostic (see compiler.volcano.codes for which are errors), and the output
notes it in a comment where it stood.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from compiler import catalog as cat
from compiler.quantities import to_base_units
from compiler.volcano import codes
from compiler.volcano import policy_text as pt
from compiler.volcano.located_yaml import (
    BOOL_TAG,
    FLOAT_TAG,
    INT_TAG,
    STR_TAG,
    YamlSyntaxError,
    YamlText,
    duplicate_keys,
    entries,
    is_mapping,
    is_null,
    is_scalar,
    is_sequence,
    kind_of,
    lookup,
    plain,
)
from compiler.volcano.model import PluginConfig, QueueConfig, SchedulerConfig, TierConfig
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity, SourceCache, Span, did_you_mean, make

CONFIG_KEY = "volcano-scheduler.conf"          # the ConfigMap key Volcano's chart uses
QUEUE_GROUP = "scheduling.volcano.sh/"
_FLAG_LIKE = re.compile(r"enabled?[A-Z]")
_INTEGER_TEXT = re.compile(r"[-+]?[0-9]+\Z")
_NUMBER_TEXT = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")
_QUEUE_SPEC_FIELDS = ("weight", "capability", "guarantee", "deserved", "reclaimable", "priority", "parent", "state")


class _Invalid(Exception):
    """A value that cannot be converted; the caller reports it where the value is."""


@dataclass
class ImportResult:
    text: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: SourceCache = field(default_factory=SourceCache)
    config: SchedulerConfig | None = None
    queues: tuple[QueueConfig, ...] = ()
    unreadable: bool = False

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity >= Severity.ERROR]

    @property
    def exit_code(self) -> int:
        """0 clean (warnings allowed), 1 when something could not be carried over, 2 unreadable input."""
        if self.unreadable:
            return 2
        return 1 if self.errors else 0


class _Reader:
    """Reads nodes into the model, collecting diagnostics."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def report(self, info: CodeInfo, message: str, span: Span | None, hint: str | None = None,
               severity: Severity | None = None) -> None:
        self.diagnostics.append(make(info, message, span, hint, severity))

    def mapping_entries(self, src: YamlText, node: MappingNode):
        for entry in duplicate_keys(node):
            self.report(codes.BAD_YAML, f"`{entry.key}` appears twice here; YAML keeps only the last",
                        src.span(entry.key_node), severity=Severity.WARNING)
        seen: dict[str, Any] = {}
        for entry in entries(node):
            seen[entry.key] = entry
        return list(seen.values())

    # --- values ---------------------------------------------------------------------------
    def number(self, node: Node, integer: bool = False) -> int | float:
        if not is_scalar(node) or node.tag == BOOL_TAG or node.tag not in (INT_TAG, FLOAT_TAG, STR_TAG):
            raise _Invalid(f"expected {'an integer' if integer else 'a number'}, got {kind_of(node)}")
        text = node.value.strip()
        if node.tag == FLOAT_TAG or (node.tag == STR_TAG and not _INTEGER_TEXT.match(text)):
            if node.tag == STR_TAG and not _NUMBER_TEXT.match(text):
                raise _Invalid(f"expected {'an integer' if integer else 'a number'}, got `{text}`")
            value = float(plain(node)) if node.tag == FLOAT_TAG else float(text)
            if not math.isfinite(value):
                raise _Invalid(f"`{text}` is not a finite number")
            if integer:
                if value != int(value):
                    raise _Invalid(f"expected an integer, got `{text}`")
                return int(value)
            return value
        return int(plain(node)) if node.tag == INT_TAG else int(text)

    @staticmethod
    def boolean(node: Node) -> bool:
        if is_scalar(node) and node.tag == BOOL_TAG:
            return bool(plain(node))
        if is_scalar(node) and node.tag == STR_TAG and node.value.strip().lower() in ("true", "false"):
            return node.value.strip().lower() == "true"
        raise _Invalid(f"expected true or false, got {kind_of(node)}")

    @staticmethod
    def text(node: Node) -> str:
        if not is_scalar(node) or is_null(node):
            raise _Invalid(f"expected a string, got {kind_of(node)}")
        return str(node.value)

    def argument_value(self, arg: cat.Argument, node: Node) -> Any:
        """A Volcano argument value converted by its catalog kind, range-checked."""
        if arg.kind in (cat.NUMBER, cat.INT):
            value = self.number(node, integer=arg.kind == cat.INT)
        elif arg.kind == cat.PERCENT:
            raw = node.value.strip() if is_scalar(node) else ""
            if raw.endswith("%"):
                node = ScalarNode(STR_TAG, raw[:-1], node.start_mark, node.end_mark)
            value = self.number(node)
        elif arg.kind == cat.BOOL:
            value = self.boolean(node)
        elif arg.kind in (cat.SYMBOL, cat.STRING):
            value = self.text(node).strip()
        elif arg.kind == cat.QUANTITY:
            text = self.text(node)
            try:
                to_base_units(arg.resource or "", text)
            except ValueError as err:
                raise _Invalid(str(err)) from None
            value = text.strip()
        else:
            raise _Invalid(f"a {arg.kind} argument has no Volcano form")
        rules = arg.rules
        if "allowed" in rules and value not in rules["allowed"]:
            raise _Invalid(f"`{value}` is not one of " + ", ".join(rules["allowed"]))
        if "min" in rules and value < rules["min"]:
            raise _Invalid(f"{value} is below the minimum {rules['min']}")
        if "max" in rules and value > rules["max"]:
            raise _Invalid(f"{value} is above the maximum {rules['max']}")
        return value


def _part_span(src: YamlText, node: Node, start: int, end: int) -> Span:
    """The span of characters [start, end) of a one-line scalar's value, else the whole value."""
    if not (is_scalar(node) and node.start_mark.line == node.end_mark.line and node.style in (None, "'", '"')):
        return src.span(node)
    column = node.start_mark.column + (0 if node.style is None else 1) + start
    line = node.start_mark.line + 1 + src.line_offset
    column += 1 + src.column_offset
    return Span(src.path, line, column, line, column + (end - start))


class ConfigReader(_Reader):
    """A scheduler config (raw or in a ConfigMap) into a SchedulerConfig."""

    def __init__(self) -> None:
        super().__init__()
        self.configmap_name: str | None = None   # set when the config came from a ConfigMap

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
        self.configmap_name = name
        return inner, docs[0], f"ConfigMap {name}, key {entry.key}"

    def config(self, src: YamlText, node: MappingNode, origin: str) -> SchedulerConfig:
        actions: list[str] = []
        left_out_actions: list[str] = []
        tiers: list[TierConfig] = []
        configurations: dict[str, dict[str, Any]] = {}
        have_actions = False
        for entry in self.mapping_entries(src, node):
            if entry.key == "actions":
                have_actions = True
                self.actions(src, entry.value, actions, left_out_actions, configurations)
            elif entry.key == "tiers":
                tiers = self.tiers(src, entry.value)
            elif entry.key == "configurations":
                self.configurations(src, entry.value, configurations)
            else:
                self.report(codes.NOT_IMPORTED, f"`{entry.key}` is not part of a scheduling policy; not imported",
                            src.span(entry.key_node), "keep it in the scheduler's own config or flags")
        canonical = sorted(actions, key=cat.CANONICAL_ACTION_ORDER.index)
        written = tuple(actions) if canonical != actions else ()
        if written:
            actions_node = lookup(node, "actions").value
            self.report(codes.ACTION_ORDER, "actions reordered to " + ", ".join(canonical) + "; Volcano runs them as "
                        "listed (" + ", ".join(actions) + ")", src.span(actions_node),
                        "a policy runs actions in the order enqueue, allocate, preempt, reclaim, backfill")
            actions = canonical
        if not have_actions:
            self.report(codes.BAD_YAML, "the config has no `actions`", src.span(node),
                        "Volcano's default is `actions: \"enqueue, allocate, backfill\"`")
        elif not actions and not left_out_actions:
            self.report(codes.BAD_VALUE, "`actions` names no action", src.span(lookup(node, "actions").value))
        return SchedulerConfig(tuple(actions), tuple(tiers), configurations, origin, tuple(left_out_actions), written)

    # --- actions ----------------------------------------------------------------------------
    def action_name(self, src: YamlText, name: str, span: Span, actions: list[str], left_out: list[str]) -> None:
        if name in cat.ACTIONS:
            actions.append(name)
            return
        left_out.append(name)
        self.report(codes.UNKNOWN_ACTION, f"unknown action `{name}`", span,
                    did_you_mean(name, cat.ACTIONS) or "policydsl has " + ", ".join(cat.ACTIONS))

    def actions(self, src: YamlText, node: Node, actions: list[str], left_out: list[str],
                configurations: dict[str, dict[str, Any]]) -> None:
        if is_scalar(node) and node.tag == STR_TAG:
            position = 0
            for part in node.value.split(","):
                name = part.strip()
                start = position + (len(part) - len(part.lstrip()))
                position += len(part) + 1
                if name:
                    self.action_name(src, name, _part_span(src, node, start, start + len(name)), actions, left_out)
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
            if name not in cat.ACTIONS:
                self.report(codes.UNKNOWN_ACTION, f"configuration for unknown action `{name}` is not imported",
                            src.span(name_node), did_you_mean(name, cat.ACTIONS), severity=Severity.WARNING)
                continue
            self.configuration(src, item, out)

    def configuration(self, src: YamlText, item: MappingNode, out: dict[str, dict[str, Any]]) -> None:
        name = lookup(item, "name").value.value.strip()
        spec = cat.ACTIONS[name]
        for entry in self.mapping_entries(src, item):
            if entry.key == "name":
                continue
            if entry.key != "arguments":
                self.report(codes.NOT_IMPORTED, f"`{entry.key}` of action `{name}` is not imported",
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
                    self.report(codes.UNKNOWN_ARGUMENT, f"action `{name}` has no argument `{arg_entry.key}`; not imported",
                                src.span(arg_entry.key_node),
                                did_you_mean(arg_entry.key, by_key) or _known(list(by_key)))
                    continue
                try:
                    target[arg.name] = self.argument_value(arg, arg_entry.value)
                except _Invalid as err:
                    self.report(codes.BAD_VALUE, f"`{arg_entry.key}`: {err}", src.span(arg_entry.value))

    # --- tiers and plugins ------------------------------------------------------------------
    def tiers(self, src: YamlText, node: Node) -> list[TierConfig]:
        if is_null(node):
            return []
        if not is_sequence(node):
            self.report(codes.BAD_VALUE, f"`tiers` must be a list, got {kind_of(node)}", src.span(node))
            return []
        tiers = []
        for tier in node.value:
            plugins_entry = lookup(tier, "plugins") if is_mapping(tier) else None
            if plugins_entry is None:
                self.report(codes.BAD_VALUE, "each tier is a mapping with a `plugins` list", src.span(tier))
                continue
            for entry in self.mapping_entries(src, tier):
                if entry.key != "plugins":
                    self.report(codes.NOT_IMPORTED, f"tier key `{entry.key}` is not imported", src.span(entry.key_node))
            tiers.append(self.tier(src, plugins_entry.value))
        return tiers

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
        weight = None
        for entry in self.mapping_entries(src, node):
            if entry.key == "name":
                continue
            if entry.key == "arguments":
                weight = self.plugin_arguments(src, entry.value, spec, arguments)
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
                    raise _Invalid(f"expected true or false, got {kind_of(entry.value)}")
                flags[flag.name] = self.boolean(entry.value)
            except _Invalid as err:
                self.report(codes.BAD_VALUE, f"`{entry.key}`: {err}", src.span(entry.value),
                            "Volcano reads flags as YAML booleans")
        return PluginConfig(spec.name, weight, flags, arguments)

    def plugin_arguments(self, src: YamlText, node: Node, spec: cat.PluginSpec, out: dict[str, Any]) -> int | float | None:
        """Fill `out` with the plugin's arguments; return its score weight if one is given."""
        if is_null(node):
            return None
        if not is_mapping(node):
            self.report(codes.BAD_VALUE, f"`arguments` must be a mapping, got {kind_of(node)}", src.span(node))
            return None
        by_key = {a.volcano: a for a in spec.arguments if a.volcano}
        lists = {a.volcano: a for a in spec.arguments if a.volcano and a.kind == cat.RESOURCE_WEIGHTS}
        weight = None
        listed: dict[str, list[str]] = {}                    # argument name -> listed resources
        weights: dict[str, dict[str, tuple[Any, Node]]] = {}  # argument name -> resource -> (weight, key node)
        for entry in self.mapping_entries(src, node):
            key = entry.key
            try:
                if spec.weight_volcano and key == spec.weight_volcano:
                    weight = self.number(entry.value)
                    if weight < 0:
                        raise _Invalid(f"{weight} is below the minimum 0")
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
                        raise _Invalid(f"{value} is below the minimum 0")
                    weights.setdefault(arg.name, {})[key[len(prefix) + 1:]] = (value, entry.key_node)
                    out.setdefault(arg.name, {})
                    continue
                arg = by_key.get(key)
                if arg is None:
                    known = list(by_key) + [k + ".<resource>" for k in lists] + (
                        [spec.weight_volcano] if spec.weight_volcano else [])
                    self.report(codes.UNKNOWN_ARGUMENT, f"plugin `{spec.name}` has no argument `{key}`; not imported",
                                src.span(entry.key_node),
                                _moved_to(key, spec) or did_you_mean(key, known) or _known(known))
                    continue
                out[arg.name] = self.argument_value(arg, entry.value)
            except _Invalid as err:
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


def _moved_to(key: str, spec: cat.PluginSpec) -> str | None:
    """A hint when another plugin takes this setting, as `predicate.GPUSharingEnable` (old
    Volcano) moved to `deviceshare.GPUSharingEnable`."""
    setting = key.rpartition(".")[2]
    for other in cat.PLUGINS.values():
        for arg in other.arguments:
            if other is not spec and arg.volcano and arg.volcano.rpartition(".")[2] == setting:
                return f"plugin `{other.name}` takes this as `{arg.volcano}`"
    return None


def _known(keys: list[str]) -> str:
    return "it takes: " + ", ".join(keys) if keys else "it takes no arguments"


class QueueReader(_Reader):
    """Queue objects (multi-document YAML or a List) into QueueConfigs, in tree order."""

    def read(self, src: YamlText) -> list[QueueConfig]:
        try:
            docs = src.documents()
        except YamlSyntaxError as err:
            self.report(codes.BAD_YAML, str(err), err.span)
            return []
        objects: list[MappingNode] = []
        for doc in docs:
            self.collect(src, doc, objects)
        queues: list[tuple[QueueConfig, dict[str, Node]]] = []
        for obj in objects:
            read = self.queue(src, obj)
            if read is not None:
                queues.append(read)
        return self.place(src, queues)

    def collect(self, src: YamlText, doc: Node, out: list[MappingNode]) -> None:
        if not is_mapping(doc):
            self.report(codes.BAD_YAML, f"expected a Queue object, got {kind_of(doc)}", src.span(doc))
            return
        kind_entry = lookup(doc, "kind")
        kind = str(kind_entry.value.value) if kind_entry and is_scalar(kind_entry.value) else ""
        if kind.endswith("List"):
            items = lookup(doc, "items")
            if items is None or is_null(items.value):
                return
            if not is_sequence(items.value):
                self.report(codes.BAD_YAML, f"`items` of a {kind} must be a list", src.span(items.value))
                return
            for item in items.value.value:
                self.collect(src, item, out)
            return
        api = lookup(doc, "apiVersion")
        api_version = str(api.value.value) if api and is_scalar(api.value) else ""
        if kind != "Queue" or not api_version.startswith(QUEUE_GROUP):
            what = f"{api_version} {kind}".strip() or "an object without kind"
            self.report(codes.NOT_IMPORTED, f"{what} is not a Volcano Queue; skipped",
                        src.span(kind_entry.value if kind_entry else doc),
                        "Queues are `apiVersion: scheduling.volcano.sh/v1beta1`, `kind: Queue`")
            return
        out.append(doc)

    def queue(self, src: YamlText, obj: MappingNode) -> tuple[QueueConfig, dict[str, Node]] | None:
        metadata = lookup(obj, "metadata")
        name_entry = lookup(metadata.value, "name") if metadata and is_mapping(metadata.value) else None
        if name_entry is None or not is_scalar(name_entry.value) or is_null(name_entry.value):
            self.report(codes.BAD_QUEUE, "a Queue without `metadata.name`", src.span(obj))
            return None
        name = str(name_entry.value.value)
        nodes: dict[str, Node] = {"name": name_entry.value}
        if not pt.is_name(name):
            self.report(codes.BAD_QUEUE, f"queue name `{name}` cannot be written in a policy", src.span(name_entry.value),
                        "policy queue names are letters, digits, `_` and `-`, starting with a letter")
            return None
        values: dict[str, Any] = {}
        spec = lookup(obj, "spec")
        if spec is not None and is_mapping(spec.value):
            for entry in self.mapping_entries(src, spec.value):
                if entry.key not in _QUEUE_SPEC_FIELDS:
                    self.report(codes.NOT_IMPORTED, f"queue `{name}`: `spec.{entry.key}` is not imported",
                                src.span(entry.key_node), "a policy declares weight, capability, guarantee, deserved, "
                                "reclaimable, priority, parent and state")
                    continue
                nodes[entry.key] = entry.value
                try:
                    values[entry.key] = self.spec_field(src, name, entry.key, entry.value)
                except _Invalid as err:
                    self.report(codes.BAD_VALUE, f"queue `{name}`: `spec.{entry.key}`: {err}", src.span(entry.value))
        elif spec is not None and not is_null(spec.value):
            self.report(codes.BAD_VALUE, f"queue `{name}`: `spec` must be a mapping", src.span(spec.value))
        status = lookup(obj, "status")
        state_entry = lookup(status.value, "state") if status and is_mapping(status.value) else None
        if state_entry is not None and is_scalar(state_entry.value) and state_entry.value.value in ("Closed", "Closing"):
            values["state"] = "closed"   # observed status: only a closed queue changes what the policy says
        return QueueConfig(name=name, **{k: v for k, v in values.items() if v is not None}), nodes

    def spec_field(self, src: YamlText, queue: str, key: str, node: Node) -> Any:
        if is_null(node):
            return None
        if key == "weight":
            weight = self.number(node, integer=True)
            if not 1 <= weight <= 65535:
                raise _Invalid(f"{weight} is outside 1..65535")
            return weight
        if key == "priority":
            return self.number(node, integer=True)
        if key == "reclaimable":
            return self.boolean(node)
        if key == "parent":
            return self.text(node).strip() or None
        if key == "state":
            state = self.text(node).strip()
            if state not in ("Open", "Closed", "Closing"):
                raise _Invalid(f"`{state}` is not Open or Closed")
            return "open" if state == "Open" else "closed"
        if key == "guarantee":
            if not is_mapping(node):
                raise _Invalid(f"expected a mapping with `resource`, got {kind_of(node)}")
            resource = None
            for entry in self.mapping_entries(src, node):
                if entry.key == "resource":
                    resource = self.resources(src, entry.value)
                else:
                    self.report(codes.NOT_IMPORTED, f"queue `{queue}`: `spec.guarantee.{entry.key}` is not imported",
                                src.span(entry.key_node))
            return resource
        return self.resources(src, node)      # capability, deserved

    def resources(self, src: YamlText, node: Node) -> dict[str, str] | None:
        if is_null(node):
            return None
        if not is_mapping(node):
            raise _Invalid(f"expected a resource mapping such as `{{cpu: 4, memory: 8Gi}}`, got {kind_of(node)}")
        out: dict[str, str] = {}
        for entry in self.mapping_entries(src, node):
            if not is_scalar(entry.value) or is_null(entry.value):
                self.report(codes.BAD_VALUE, f"`{entry.key}` must be a quantity, got {kind_of(entry.value)}",
                            src.span(entry.value))
                continue
            text = str(entry.value.value).strip()
            try:
                to_base_units(entry.key, text)
            except ValueError as err:
                self.report(codes.BAD_VALUE, f"`{entry.key}`: {err}", src.span(entry.value))
                continue
            out[entry.key] = text
        return out or None

    def place(self, src: YamlText, queues: list[tuple[QueueConfig, dict[str, Node]]]) -> list[QueueConfig]:
        """Check the tree: unique names, parents that exist, no cycles. Parents come first."""
        by_name: dict[str, tuple[QueueConfig, dict[str, Node]]] = {}
        for queue, nodes in queues:
            if queue.name in by_name:
                self.report(codes.BAD_QUEUE, f"queue `{queue.name}` is defined twice; the second is skipped",
                            src.span(nodes["name"]))
                continue
            by_name[queue.name] = (queue, nodes)
        fixed: dict[str, QueueConfig] = {}
        for name, (queue, nodes) in by_name.items():
            parent = queue.parent
            if name == cat.ROOT_QUEUE:
                if parent not in (None, cat.ROOT_QUEUE):
                    self.report(codes.BAD_QUEUE, "the root queue has no parent", src.span(nodes["parent"]))
                queue = replace(queue, parent=None)
            elif parent in (None, cat.ROOT_QUEUE):
                queue = replace(queue, parent=None)
            elif parent not in by_name:
                self.report(codes.BAD_QUEUE, f"queue `{name}`: parent queue `{parent}` does not exist",
                            src.span(nodes["parent"]),
                            did_you_mean(parent, by_name) or "create the parent Queue too, or leave `parent` out")
                queue = replace(queue, parent=None, note=f"parent `{parent}` was not found; placed at the top")
            fixed[name] = queue
        for name in list(fixed):
            seen = [name]
            current = fixed[name].parent
            while current is not None and current in fixed and current not in seen:
                seen.append(current)
                current = fixed[current].parent
            if current == name:
                self.report(codes.BAD_QUEUE, f"queue `{name}` is its own ancestor: " + " -> ".join([*seen, name]),
                            src.span(by_name[name][1].get("parent", by_name[name][1]["name"])))
                fixed[name] = replace(fixed[name], parent=None, note="parent cycle broken here; placed at the top")
        return _tree_order(list(fixed.values()))


def _tree_order(queues: list[QueueConfig]) -> list[QueueConfig]:
    """Parents before children, siblings in file order."""
    children: dict[str | None, list[QueueConfig]] = {}
    for queue in queues:
        children.setdefault(queue.parent, []).append(queue)
    out: list[QueueConfig] = []

    def visit(parent: str | None) -> None:
        for queue in children.get(parent, []):
            out.append(queue)
            visit(queue.name)

    visit(None)
    return out


# --- the policy -----------------------------------------------------------------------------

def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


def _setting_value(arg: cat.Argument, value: Any) -> Any:
    if arg.kind == cat.SYMBOL:
        return pt.symbol(value)
    if arg.kind == cat.QUANTITY:
        return pt.quantity(value)
    return value


def _plugin_decl(plugin: PluginConfig) -> pt.PluginDecl:
    spec = cat.PLUGINS[plugin.name]
    settings = [pt.Setting(cat.FLAG_PREFIX + name, value) for name, value in plugin.flags.items()]
    for name, value in plugin.arguments.items():
        arg = spec.argument(name)
        assert arg is not None
        settings.append(pt.Setting(name, _setting_value(arg, value)))
    return pt.PluginDecl(plugin.name, plugin.weight, settings, [f"{plugin.name}: {_first_sentence(spec.doc)}"])


def _queue_decl(queue: QueueConfig, children: dict[str | None, list[QueueConfig]]) -> pt.QueueDecl:
    settings = []
    for arg in cat.QUEUE_SETTINGS:
        value = getattr(queue, arg.name, None)
        if value is None:
            continue
        if arg.kind == cat.RESOURCES:
            value = {resource: pt.quantity(text) for resource, text in value.items()}
        elif arg.kind == cat.SYMBOL:
            value = pt.symbol(value)
        settings.append(pt.Setting(arg.name, value))
    return pt.QueueDecl(queue.name, settings, [_queue_decl(child, children) for child in children.get(queue.name, [])],
                        [queue.note] if queue.note else [])


def policy_doc(config: SchedulerConfig, queues: list[QueueConfig], name: str,
               config_path: str, queues_path: str | None) -> pt.PolicyDoc:
    comments = [f"Imported from {Path(config_path).name} by `policydsl import-volcano`."]
    if config.origin:
        comments.append(f"(read from {config.origin})")
    comments.append("Tiers and plugin order are Volcano's; `enable_*` settings are its enable* flags.")
    doc = pt.PolicyDoc(name, comments=comments)
    doc.actions = list(config.actions)
    if config.written_actions:
        doc.actions_comments.append("Volcano's order was " + ", ".join(config.written_actions) + "; a policy runs "
                                    "actions in the canonical order.")
    if config.left_out_actions:
        doc.actions_comments.append("not imported: action " + ", ".join(f"`{a}`" for a in config.left_out_actions))
    for tier in config.tiers:
        doc.tiers.append(pt.TierDecl([_plugin_decl(p) for p in tier.plugins],
                                     trailing_comments=[f"not imported: plugin `{n}`" for n in tier.left_out]))
    for action, arguments in config.configurations.items():
        spec = cat.ACTIONS[action]
        settings = []
        for arg_name, value in arguments.items():
            arg = next(a for a in spec.arguments if a.name == arg_name)
            settings.append(pt.Setting(arg_name, _setting_value(arg, value)))
        if settings:
            doc.action_configs.append(pt.ActionDecl(action, settings))
    children: dict[str | None, list[QueueConfig]] = {}
    for queue in queues:
        children.setdefault(queue.parent, []).append(queue)
    root = next((q for q in queues if q.name == cat.ROOT_QUEUE), None)
    if root is not None:
        # Top-level queues live under `root`; declared with settings, it holds them all.
        top = [q for q in children.get(None, []) if q is not root]
        children[cat.ROOT_QUEUE] = top + children.get(cat.ROOT_QUEUE, [])
        children[None] = [root]
    doc.queues = [_queue_decl(q, children) for q in children.get(None, [])]
    if queues_path:
        doc.queues_comments.append(f"Queues from {Path(queues_path).name}; nesting follows `spec.parent`.")
    return doc


def _policy_name(config_path: str, origin_name: str | None) -> str:
    if origin_name:
        return origin_name
    name = Path(config_path).name
    for suffix in (".yaml", ".yml", ".conf"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "imported"


def import_volcano_text(config_text: str, config_path: str = CONFIG_KEY, queues_text: str | None = None,
                        queues_path: str = "queues.yaml", *, name: str | None = None) -> ImportResult:
    """The policy for a Volcano config (and Queue objects) given as text."""
    result = ImportResult(text=None)
    result.sources.add(config_path, config_text)
    reader = ConfigReader()
    config = reader.read(YamlText(config_path, config_text))
    result.diagnostics.extend(reader.diagnostics)
    queues: list[QueueConfig] = []
    if queues_text is not None:
        result.sources.add(queues_path, queues_text)
        queue_reader = QueueReader()
        queues = queue_reader.read(YamlText(queues_path, queues_text))
        result.diagnostics.extend(queue_reader.diagnostics)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    if config is None:
        return result
    result.config = config
    result.queues = tuple(queues)
    doc = policy_doc(config, queues, name or _policy_name(config_path, reader.configmap_name), config_path,
                     queues_path if queues_text is not None else None)
    result.text = pt.render(doc)
    return result


def _read(path: str, result: ImportResult) -> str | None:
    try:
        return Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        if isinstance(err, IsADirectoryError):
            reason = "it is a folder"
        result.diagnostics.append(make(codes.UNREADABLE, f"cannot read {path}: {reason}", Span.point(path, 1, 1)))
        result.unreadable = True
        return None


def import_volcano(config_path: str, queues_path: str | None = None, *, name: str | None = None) -> ImportResult:
    """The policy for a Volcano config file (raw or a ConfigMap) and, optionally, a Queue file."""
    failed = ImportResult(text=None)
    config_text = _read(config_path, failed)
    queues_text = _read(queues_path, failed) if queues_path else None
    if failed.unreadable:
        return failed
    assert config_text is not None
    return import_volcano_text(config_text, config_path, queues_text, queues_path or "queues.yaml", name=name)
